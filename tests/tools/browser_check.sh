#!/bin/sh
# tests/tools/browser_check.sh HEAPKIT PROG WORKDIR
# Records PROG, writes its report and heap map, validates both as XML-ish
# documents (the SVG with python3's xml.etree, the page's inline SVGs too),
# and opens them in headless Chromium: the page's script must run without an
# error (it marks <body data-ready="1">) and the screenshots must not be
# blank. Exit 77 (skipped) when chromium or python3 is missing.
set -u
tool=$1 prog=$2 dir=$3
for c in chromium python3; do
  command -v $c >/dev/null 2>&1 || { echo "SKIP: $c is not installed (.ci/install-deps.sh installs it)"; exit 77; }
done
rm -rf "$dir" && mkdir -p "$dir" || exit 1
"$tool" record -q -o "$dir/t.hkt" -- "$prog" exit >/dev/null || { echo "FAIL: record"; exit 1; }
"$tool" report "$dir/t.hkt" -o "$dir/report.html" || { echo "FAIL: report"; exit 1; }
"$tool" map "$dir/t.hkt" -o "$dir/map.svg" || { echo "FAIL: map"; exit 1; }
python3 - "$dir/map.svg" "$dir/report.html" <<'PY' || exit 1
import re, sys, xml.etree.ElementTree as ET
svg = ET.parse(sys.argv[1]).getroot()
assert svg.tag == '{http://www.w3.org/2000/svg}svg', svg.tag
rects = svg.findall('.//{http://www.w3.org/2000/svg}rect')
assert len(rects) > 10, len(rects)
html = open(sys.argv[2]).read()
assert 'http://' not in html.replace('http://www.w3.org/2000/svg', ''), 'the page refers to the network'
assert 'https://' not in html, 'the page refers to the network'
n = 0
for m in re.finditer(r'<svg.*?</svg>', html, re.S):
    ET.fromstring(m.group(0).replace('&#160;', ' ') if 'xmlns' in m.group(0) else
                  m.group(0).replace('<svg', '<svg xmlns="http://www.w3.org/2000/svg"', 1))
    n += 1
assert n >= 4, n
print('xml ok: map with %d rects, %d svgs in the page' % (len(rects), n))
PY
chrome="chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --user-data-dir=$dir/profile"
timeout 120 $chrome --virtual-time-budget=3000 --dump-dom "file://$dir/report.html" > "$dir/dom.html" 2>"$dir/chrome.log"
grep -q 'data-ready="1"' "$dir/dom.html" || { echo "FAIL: the page's script did not finish"; tail -5 "$dir/chrome.log"; exit 1; }
if grep -q '<title>heapkit report: script error' "$dir/dom.html"; then echo "FAIL:"; grep -o '<title>heapkit report: script error[^<]*' "$dir/dom.html"; exit 1; fi
timeout 120 $chrome --window-size=1100,1600 --screenshot="$dir/report.png" "file://$dir/report.html" 2>>"$dir/chrome.log"
timeout 120 $chrome --window-size=1100,600 --screenshot="$dir/map.png" "file://$dir/map.svg" 2>>"$dir/chrome.log"
python3 - "$dir/report.png" "$dir/map.png" <<'PY' || exit 1
# decodes the PNGs (8-bit RGB/RGBA, as Chromium writes them) and counts
# the pixels that are not background: a blank page fails
import struct, sys, zlib
def pixels(path):
    data = open(path, 'rb').read()
    assert data[:8] == b'\x89PNG\r\n\x1a\n', path
    pos, idat, w = 8, b'', 0
    while pos < len(data):
        n, kind = struct.unpack('>I4s', data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b'IHDR':
            w, h, depth, ctype = struct.unpack('>IIBB', body[:10])
            assert depth == 8 and ctype in (2, 6), (depth, ctype)
            bpp = 3 if ctype == 2 else 4
        elif kind == b'IDAT':
            idat += body
        pos += 12 + n
    raw = zlib.decompress(idat)
    stride = w * bpp
    prev = bytearray(stride)
    out = []
    i = 0
    for y in range(h):
        f = raw[i]; line = bytearray(raw[i + 1:i + 1 + stride]); i += 1 + stride
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b = prev[x]; c = prev[x - bpp] if x >= bpp else 0
            if f == 1: line[x] = (line[x] + a) & 255
            elif f == 2: line[x] = (line[x] + b) & 255
            elif f == 3: line[x] = (line[x] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c; pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        out.append(bytes(line)); prev = line
    return w, h, bpp, out
for path in sys.argv[1:]:
    w, h, bpp, rows = pixels(path)
    ink, colours = 0, set()
    for r in rows[::4]:
        for x in range(0, w * bpp, bpp * 4):
            px = r[x:x + 3]
            colours.add(px)
            if px != b'\xff\xff\xff': ink += 1
    frac = ink / ((h // 4 + 1) * (w // 4 + 1))
    print('%s: %dx%d, %.1f%% drawn, %d colours' % (path, w, h, 100 * frac, len(colours)))
    assert frac > 0.03 and len(colours) >= 6, 'blank screenshot'
PY
echo "browser ok"
