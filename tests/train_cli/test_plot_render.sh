#!/usr/bin/env bash
# tests/train_cli/test_plot_render.sh — the SVG of `dlcc plot` renders in headless Chromium: a
# screenshot of it is a PNG of the canvas's size with the curves' colours in it. Skipped (exit
# 77) without a Chromium: tools/setup.sh does not install one (the Debian package and its
# dependencies take ~400 MB, chromium-headless-shell ~300 MB, for this one check).
# usage: test_plot_render.sh DLCC SOURCE_DIR
source "$(dirname "$0")/lib.sh"
browser=""
for b in chromium chromium-headless-shell chromium-browser google-chrome; do
  if command -v "$b" >/dev/null 2>&1; then browser=$(command -v "$b"); break; fi
done
if [ -z "$browser" ]; then
  echo "skip: no headless Chromium (chromium or chromium-headless-shell) installed; the SVG is"
  echo "      checked as XML by train_cli_plot. Install one (apt-get install chromium) to run this."
  exit 77
fi
printf '{"kind":"step","step":%d,"epoch":1,"loss":%s,"lr":%s}\n' \
  1 2.3 0.001 2 1.9 0.001 3 1.2 0.0008 4 0.9 0.0005 5 0.7 0.0002 > run.jsonl
echo '{"kind":"eval","step":5,"epoch":1,"eval_loss":0.8,"eval_accuracy":0.7}' >> run.jsonl
expect 0 "dlcc plot" plot run.jsonl -o curve.svg
HOME=$work timeout 60 "$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars \
  --window-size=880,520 --screenshot="$work/shot.png" "file://$work/curve.svg" >browser.log 2>&1
check "$(basename "$browser") wrote a screenshot" test -s shot.png
check "the screenshot is an 880 x 520 PNG with the loss (blue) and lr (orange) colours" $py - <<'PYEOF'
import struct, sys, zlib
b = open("shot.png", "rb").read()
ok = b[:8] == b"\x89PNG\r\n\x1a\n"
w, h, depth, ctype = struct.unpack(">IIBB", b[16:26])
ok = ok and (w, h) == (880, 520) and depth == 8 and ctype in (2, 6)
data, i = b"", 8
while i < len(b):
    n, t = struct.unpack(">I4s", b[i:i + 8])
    if t == b"IDAT":
        data += b[i + 8:i + 8 + n]
    i += 12 + n
raw, bpp = zlib.decompress(data), 3 if ctype == 2 else 4
stride, prev, rows = w * bpp, bytearray(w * bpp), []
for y in range(h):
    f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
    for x in range(stride):
        a = line[x - bpp] if x >= bpp else 0
        c = prev[x - bpp] if x >= bpp else 0
        if f == 1: line[x] = (line[x] + a) & 255
        elif f == 2: line[x] = (line[x] + prev[x]) & 255
        elif f == 3: line[x] = (line[x] + (a + prev[x]) // 2) & 255
        elif f == 4:
            p = a + prev[x] - c
            pa, pb, pc = abs(p - a), abs(p - prev[x]), abs(p - c)
            line[x] = (line[x] + (a if pa <= pb and pa <= pc else prev[x] if pb <= pc else c)) & 255
    rows.append(bytes(line)); prev = line
px = {tuple(r[x:x + 3]) for r in rows for x in range(0, stride, bpp)}
near = lambda c: any(sum(abs(p[k] - c[k]) for k in range(3)) < 60 for p in px)
ok = ok and near((0x1f, 0x77, 0xb4)) and near((0xff, 0x7f, 0x0e)) and len(px) > 20
print(w, h, len(px), "colours")
sys.exit(not ok)
PYEOF
finish
