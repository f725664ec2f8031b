#!/usr/bin/env bash
# tests/train_cli/test_plot_render.sh — the SVG of `dlcc plot` renders in headless Chromium: a
# screenshot of it is a PNG of the canvas's size in which the curves are drawn where the SVG
# says: the loss colour at every vertex and segment of the loss polyline, the learning-rate
# colour along its dashed polyline, the test evaluation's red dot, dark title text, and none of
# those colours where nothing is drawn. Needs a Chromium: tools/setup.sh --test (which
# tools/test.sh runs, so CI runs this test) installs Debian's chromium-headless-shell; skipped
# (exit 77) without one. usage: test_plot_render.sh DLCC SOURCE_DIR
source "$(dirname "$0")/lib.sh"
browser=""
for b in chromium-headless-shell chromium chromium-browser google-chrome; do
  if command -v "$b" >/dev/null 2>&1; then browser=$(command -v "$b"); break; fi
done
if [ -z "$browser" ]; then
  echo "skip: no headless Chromium (chromium-headless-shell or chromium) installed; the SVG is"
  echo "      checked as XML by train_cli_plot. Install one to run this test:"
  echo "      apt-get install --no-install-recommends chromium-headless-shell"
  echo "      (or bash tools/setup.sh --test, which tools/test.sh runs)"
  exit 77
fi
printf '{"kind":"step","step":%d,"epoch":1,"loss":%s,"lr":%s}\n' \
  1 2.3 0.001 2 1.9 0.001 3 1.2 0.0008 4 0.9 0.0005 5 0.7 0.0002 > run.jsonl
echo '{"kind":"eval","step":5,"epoch":1,"eval_loss":0.8,"eval_accuracy":0.7}' >> run.jsonl
expect 0 "dlcc plot" plot run.jsonl -o curve.svg
# --no-sandbox: Chromium's sandbox refuses to start as root (CI, containers); the page is our own
# file. --disable-dev-shm-usage: a container's /dev/shm may be tiny.
HOME=$work timeout 60 "$browser" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage \
  --hide-scrollbars --force-device-scale-factor=1 --window-size=880,520 \
  --screenshot="$work/shot.png" "file://$work/curve.svg" >browser.log 2>&1
rc=$?
check "$(basename "$browser") exits 0 within 60 s and writes a screenshot" \
  test "$rc" -eq 0 -a -s shot.png
[ "$rc" -eq 0 ] || { echo "  exit $rc"; tail -20 browser.log; }
check "the screenshot draws the SVG's curves, dot and title where the SVG puts them" \
  $py - <<'PYEOF'
import struct, sys, zlib
import xml.etree.ElementTree as ET

# The PNG, decoded by hand (no imaging library needed): 8-bit RGB or RGBA, any filter.
b = open("shot.png", "rb").read()
if b[:8] != b"\x89PNG\r\n\x1a\n":
    sys.exit("not a PNG")
w, h, depth, ctype = struct.unpack(">IIBB", b[16:26])
print(f"screenshot {w} x {h}, depth {depth}, colour type {ctype}")
if (w, h) != (880, 520) or depth != 8 or ctype not in (2, 6):
    sys.exit("want an 880 x 520 8-bit RGB(A) PNG")
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
px = lambda x, y: tuple(rows[y][x * bpp:x * bpp + 3])
near = lambda p, c, tol=90: sum(abs(p[k] - c[k]) for k in range(3)) < tol
BLUE, ORANGE, RED = (0x1f, 0x77, 0xb4), (0xff, 0x7f, 0x0e), (0xd6, 0x27, 0x28)

def seen(x, y, colour, r):  # a pixel of `colour` within r pixels of (x, y)
    return any(near(px(i, j), colour) for i in range(max(0, int(x) - r), min(w, int(x) + r + 1))
               for j in range(max(0, int(y) - r), min(h, int(y) + r + 1)))

# Where the SVG draws: its polylines (one vertex per step) and the test evaluation's dot.
ns = "{http://www.w3.org/2000/svg}"
svg = ET.parse("curve.svg").getroot()
lines = {p.get("class"): [tuple(map(float, q.split(","))) for q in p.get("points").split()]
         for p in svg.iter(ns + "polyline")}
dots = [(float(c.get("cx")), float(c.get("cy"))) for c in svg.iter(ns + "circle")]
ok = True
def expect(cond, what):
    global ok
    print(("ok   " if cond else "FAIL ") + what)
    ok = ok and cond

# Along each polyline: every vertex and the midpoint of every segment (the dashed learning-rate
# line has 3-pixel gaps, so its colour is looked for within 5 pixels).
for cls, colour, r in (("loss", BLUE, 2), ("lr", ORANGE, 5)):
    pts = lines.get(cls, [])
    probes = pts + [((x0 + x1) / 2, (y0 + y1) / 2) for (x0, y0), (x1, y1) in zip(pts, pts[1:])]
    missed = [(round(x), round(y)) for x, y in probes if not seen(x, y, colour, r)]
    expect(len(pts) == 5 and not missed,
           f"{cls}: its colour at all {len(probes)} points along the polyline (missed {missed})")
expect(len(dots) >= 1 and all(seen(x, y, RED, 1) for x, y in dots),
       f"the test evaluation's dot and the legend's are red at {dots}")
# Nothing but background and grid below both curves (steps 1-5: loss >= 0.7, lr >= 0.0002).
stray = [(x, y) for y in range(400, 456) for x in range(85, 796)
         if any(near(px(x, y), c) for c in (BLUE, ORANGE, RED))]
expect(not stray, f"no curve colour in the empty band below the curves ({len(stray)} pixels)")
dark = sum(1 for y in range(10, 36) for x in range(300, 581) if sum(px(x, y)) < 300)
expect(dark > 30, f"the title is drawn ({dark} dark pixels in its box)")
white = sum(1 for y in range(0, h, 4) for x in range(0, w, 4) if px(x, y) == (255, 255, 255))
expect(white > 0.6 * (w // 4) * (h // 4), f"a white canvas ({white} of {(w // 4) * (h // 4)} samples)")
sys.exit(not ok)
PYEOF
finish
