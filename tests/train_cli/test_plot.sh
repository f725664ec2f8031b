#!/usr/bin/env bash
# tests/train_cli/test_plot.sh — `dlcc plot LOG -o CURVE.svg` on the logs `dlcc train --log`
# writes (JSON Lines and CSV): the SVG parses as XML (xml.etree), its loss and learning-rate
# polylines have one point per logged step, the test evaluation is a dot, the axes have ticks
# and labels, the title is the log's name; a resumed run's log; errors for a missing, empty or
# malformed log name the file and line and write nothing. usage: test_plot.sh DLCC SOURCE_DIR
source "$(dirname "$0")/lib.sh"
watch_data
expect 0 "a log of 3 epochs (30 steps, cosine)" train mlp.dlg "${data[@]}" --epochs 3 \
  --lr-schedule cosine --log run.jsonl
expect 0 "the same as CSV, every 3 steps" train mlp.dlg "${data[@]}" --epochs 3 \
  --lr-schedule cosine --log run.csv --log-every 3

# svg_check SVG TITLE N_POINTS N_EVALS: well-formed XML, an <svg> root, the title, polylines of
# N_POINTS points, N_EVALS test dots (plus the legend's), ticks and axis labels.
svg_check() {
  $py - "$@" <<'PYEOF'
import sys
import xml.etree.ElementTree as ET
path, title, npts, nev = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
ns = "{http://www.w3.org/2000/svg}"
root = ET.parse(path).getroot()
ok = root.tag == ns + "svg" and root.find(ns + "title").text == title
lines = {p.get("class"): p.get("points").split() for p in root.iter(ns + "polyline")}
ok = ok and len(lines.get("loss", [])) == npts and len(lines.get("lr", [])) == npts
for pts in lines.values():
    xs = [float(p.split(",")[0]) for p in pts]
    ok = ok and xs == sorted(xs)  # one point per step, in step order
dots = [c for c in root.iter(ns + "circle") if c.get("class") == "eval"]
ok = ok and len(dots) == nev + (1 if nev else 0)
texts = [t.text or "" for t in root.iter(ns + "text")]
ok = ok and all(w in texts for w in ("step", "loss", "learning rate", title))
ok = ok and sum(1 for t in texts if t.replace(".", "").replace("e-", "").isdigit()) >= 8  # ticks
if not ok:
    print("title", root.find(ns + "title").text, {k: len(v) for k, v in lines.items()},
          len(dots), texts[:20])
sys.exit(not ok)
PYEOF
}

expect 0 "dlcc plot run.jsonl -o curve.svg" plot run.jsonl -o curve.svg
check "... says nothing" test ! -s "$out" -a ! -s "$err"
check "the SVG parses as XML: 30 loss and lr points, 1 test dot, ticks, labels, title" \
  svg_check curve.svg run.jsonl 30 1
expect 0 "dlcc plot run.csv (stdout)" plot run.csv
cp "$out" csv.svg
check "CSV: 10 points (every 3 steps), the test dot" svg_check csv.svg run.csv 10 1
check "the same lr curve as the JSON log's at steps 3, 6, ... (the values are the same)" $py - <<'PYEOF'
import csv, json, sys
j = {r["step"]: r["lr"] for r in map(json.loads, open("run.jsonl")) if r["kind"] == "step"}
c = [r for r in csv.DictReader(open("run.csv")) if r["kind"] == "step"]
sys.exit(not all(float(r["lr"]) == j[int(r["step"])] for r in c))
PYEOF
expect 0 "--title" plot run.jsonl -o titled.svg --title "run <1> & co"
check "... escaped in the XML" svg_check titled.svg "run <1> & co" 30 1

# a resumed run's log: steps 6-9 logged twice (the first run got past its checkpoint)
$py - <<'PYEOF'
import json
recs = [json.loads(l) for l in open("run.jsonl")]
with open("resumed.jsonl", "w") as f:
    for r in recs[:9] + recs[5:]:
        f.write(json.dumps(r) + "\n")
PYEOF
expect 0 "a log with steps logged again after a resume" plot resumed.jsonl -o resumed.svg
check "... one point per step" svg_check resumed.svg resumed.jsonl 30 1

# errors: named file and line, exit 1, no output
expect_msg 1 "a missing log" "dlcc plot: error: cannot read missing.jsonl" plot missing.jsonl -o m.svg
: > empty.jsonl
expect_msg 1 "an empty log" "empty.jsonl: no step records (an empty file)" plot empty.jsonl -o m.svg
head -2 run.jsonl > bad.jsonl
echo '{"kind":"step","step":3,"loss":' >> bad.jsonl
expect_msg 1 "a malformed record" "bad.jsonl:3: malformed record: bad value for \"loss\"" \
  plot bad.jsonl -o m.svg
printf '{"kind":"step","step":1,"loss":2}\n[1, 2]\n' > arr.jsonl
expect_msg 1 "not an object" "arr.jsonl:2: malformed record: expected a JSON object" plot arr.jsonl -o m.svg
printf '{"kind":"batch","step":1}\n' > kind.jsonl
expect_msg 1 "an unknown kind" "kind.jsonl:1: malformed record: unknown record kind 'batch'" \
  plot kind.jsonl -o m.svg
printf '{"kind":"step","loss":1}\n' > nostep.jsonl
expect_msg 1 "a record without a step" "nostep.jsonl:1: malformed record: a record without a step" \
  plot nostep.jsonl -o m.svg
head -1 run.csv > head.csv
expect_msg 1 "a CSV log with only its header" "head.csv: no step records (only a header" plot head.csv -o m.svg
(head -3 run.csv; echo "step,1,2") > cells.csv
expect_msg 1 "a CSV row of the wrong width" "cells.csv:4: malformed record: 3 cells, the header has 12" \
  plot cells.csv -o m.svg
echo "a,b" > nohead.csv
expect_msg 1 "a CSV file that is no log" "nohead.csv:1: not the header of a dlcc train log" plot nohead.csv -o m.svg
check "no failed plot wrote its output" test ! -e m.svg
expect_msg 2 "another suffix" "run.txt: the format comes from the suffix" plot run.txt
expect_msg 2 "no log" "no log file" plot
finish
