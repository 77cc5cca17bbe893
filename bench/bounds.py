#!/usr/bin/env python3
"""bench/bounds.py - the published worst-case bounds of docs/realtime.md:
checks counted calls against them, records the counts, rebounds, and
writes the table of docs/realtime.md. Run by bench/bounds.sh (which counts
the calls under callgrind); --doc alone needs no counts.

Files (tab-separated, '#' starts a comment line):
  bench/bounds.tsv           one row per call and worst path: driver, call,
                             path, complexity, unit, bound (instructions),
                             bound per unit, peer (the glibc call it is
                             compared with), what the worst path is
  bench/bounds-measured.tsv  the worst count of each row at each scale,
                             with the units of that call (written by --record)

A call with units u (blocks walked, bytes copied...: 0 for O(1) calls)
meets its row when instructions <= 1.10 * (bound + per_unit * u).
"""
import argparse
import math
import os
import re
import sys
from collections import defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
BOUNDS = os.path.join(HERE, "bounds.tsv")
MEASURED = os.path.join(HERE, "bounds-measured.tsv")
DOC = os.path.join(HERE, "..", "docs", "realtime.md")
SLACK = 1.10
COLS = ["driver", "call", "path", "complexity", "unit", "bound", "per_unit", "peer", "worst"]
OBJECT_DRIVERS = ("pool", "gc")
# the glibc call an allocator's call is compared with, by the call's verb
PEERS = [("realloc", "glibc.realloc"), ("reallocate", "glibc.malloc"), ("alloc", "glibc.malloc"),
         ("calloc", "glibc.malloc"), ("free", "glibc.free")]
SCALE_NAMES = {1: "1 MiB / 10^3", 2: "16 MiB / 10^4", 3: "256 MiB / 10^5", 4: "1 GiB / 10^6"}


def read_tsv(path):
    rows = []
    if not os.path.exists(path):
        return rows
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            rows.append(line.split("\t"))
    return rows


def header_lines(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [l for l in f if l.startswith("#")]


def read_bounds():
    out = []
    for r in read_tsv(BOUNDS):
        r = (r + [""] * len(COLS))[: len(COLS)]
        d = dict(zip(COLS, r))
        d["bound"] = int(d["bound"] or 0)
        d["per_unit"] = float(d["per_unit"] or 0)
        out.append(d)
    return out


DRIVER_ORDER = ["hunk", "zone", "cache", "pool", "gc", "glibc"]


def write_bounds(rows):
    rows = sorted(rows, key=lambda d: DRIVER_ORDER.index(d["driver"]) if d["driver"] in DRIVER_ORDER else 99)
    head = header_lines(BOUNDS)
    with open(BOUNDS, "w") as f:
        f.writelines(head)
        for d in rows:
            pu = d["per_unit"]
            pus = ("%g" % pu) if pu else "0"
            f.write("\t".join([d["driver"], d["call"], d["path"], d["complexity"], d["unit"], str(d["bound"]), pus,
                               d["peer"], d["worst"]]) + "\n")


def read_counts(path):
    """[(driver, scale, call, path, units, instructions)] in dump order,
    with every '@relabel' dump applied to the call counted before it."""
    calls = []
    with open(path) as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) != 4:
                continue
            drv, scale, label, ins = parts
            lab = label.split("|")
            if lab[0] == "@relabel":
                if calls and calls[-1][0] == drv and len(lab) == 4:
                    c = calls[-1]
                    calls[-1] = (c[0], c[1], lab[1], lab[2], int(lab[3]), c[5])
                continue
            if len(lab) != 3:
                continue
            calls.append((drv, int(scale), lab[0], lab[1], int(lab[2]), int(ins)))
    return [c for c in calls if not c[2].startswith("(")]


def limit(row, units):
    return row["bound"] + row["per_unit"] * units


def worst_by_row(calls):
    """{(call, path, scale): (instructions, units)}: the call closest to (or
    furthest past) its bound; for rows without a bound, the largest count."""
    bounds = {(d["call"], d["path"]): d for d in read_bounds()}
    worst = {}
    for drv, scale, call, path, units, ins in calls:
        key = (call, path, scale)
        row = bounds.get((call, path))
        score = ins / limit(row, units) if row and limit(row, units) > 0 else ins
        if key not in worst or score > worst[key][2]:
            worst[key] = (ins, units, score)
    return {k: (v[0], v[1]) for k, v in worst.items()}


def check(calls, drivers, scales):
    bounds = {(d["call"], d["path"]): d for d in read_bounds()}
    bad = 0
    seen = set()
    for drv, scale, call, path, units, ins in calls:
        seen.add((call, path))
        row = bounds.get((call, path))
        if row is not None and row["complexity"] == "peer":
            continue  # glibc's rows: measured for comparison, not a bound of ours
        if row is None:
            print("check-bounds: FAIL %s [%s] at scale %d: counted (%d instructions) but no bound is published in "
                  "bench/bounds.tsv" % (call, path, scale, ins))
            bad += 1
            continue
        lim = limit(row, units)
        if ins > SLACK * lim:
            print("check-bounds: FAIL %s [%s] at %s: %d instructions%s > bound %d%s (+10%%)" %
                  (call, path, SCALE_NAMES[scale], ins, (" for %d %s" % (units, row["unit"])) if units else "",
                   round(lim), (" (%d + %g/%s)" % (row["bound"], row["per_unit"], row["unit"])) if row["per_unit"]
                   else ""))
            bad += 1
    for d in read_bounds():
        # a path reached at some scales only (a full 1 MiB heap) is looked
        # for only when every scale ran
        if d["driver"] in drivers and sorted(scales) == [1, 2, 3, 4] and (d["call"], d["path"]) not in seen:
            print("check-bounds: FAIL %s [%s]: published but never reached by its driver" % (d["call"], d["path"]))
            bad += 1
    rows = len({(c[2], c[3]) for c in calls if c[0] != "glibc"})
    calls = [c for c in calls if c[0] != "glibc"]
    if bad:
        print("check-bounds: %d failure(s) over %d calls (%d rows)" % (bad, len(calls), rows))
        return 1
    print("check-bounds: %d calls on %d paths within their published bounds (+10%%)" % (len(calls), rows))
    return 0


def round_up(x):
    """x rounded up to two significant digits (at least 10)."""
    if x <= 10:
        return 10
    p = 10 ** (int(math.floor(math.log10(x))) - 1)
    return int(math.ceil(x / p) * p)


def record(calls, drivers, scales, rebound):
    calls = [c for c in calls if c[0] in drivers and c[1] in scales]
    worst = worst_by_row(calls)
    old = [r for r in read_tsv(MEASURED) if len(r) >= 5]
    keep = [r for r in old if r[0] not in drivers or int(r[3]) not in scales]
    drv_of = {}
    for drv, scale, call, path, units, ins in calls:
        drv_of[(call, path)] = drv
    new = [[drv_of[(c, p)], c, p, str(s), str(v[0]), str(v[1])] for (c, p, s), v in worst.items()]
    rows = sorted(keep + new, key=lambda r: (r[0], r[1], r[2], int(r[3])))
    head = header_lines(MEASURED) or [
        "# bench/bounds-measured.tsv - worst instructions per call counted by bench/bounds.sh (callgrind),\n",
        "# written by bench/bounds.sh --record: driver, call, path, scale (1-4), instructions, units\n"]
    with open(MEASURED, "w") as f:
        f.writelines(head)
        for r in rows:
            f.write("\t".join(r) + "\n")
    if not rebound:
        return
    rows = read_bounds()
    by_key = {(d["call"], d["path"]): d for d in rows}
    per_row = defaultdict(list)
    for drv, scale, call, path, units, ins in calls:
        per_row[(call, path)].append((units, ins))
    for key, obs in per_row.items():
        d = by_key.get(key)
        if d is None:
            # a new path: its unit from "(units: X)" in the label, its peer
            # from the verb, for the rows of the peer itself "peer"
            m = re.search(r"\(units: ([^)]*)\)", key[1])
            unit = m.group(1) if m else ""
            drv = drv_of[key]
            verb = key[0].split(".", 1)[-1]
            peer = next((g for v, g in PEERS if verb.startswith(v)), "") if drv != "glibc" else ""
            d = {"driver": drv, "call": key[0], "path": key[1],
                 "complexity": "peer" if drv == "glibc" else ("O(n), n = %s" % unit if unit else "O(1)"),
                 "unit": unit, "bound": 0, "per_unit": 0.0, "peer": peer,
                 "worst": re.sub(r" \(units: [^)]*\)", "", key[1])}
            rows.append(d)
            by_key[key] = d
        if d["unit"]:
            # instructions = bound + per_unit * units: the slope from the
            # calls with the most units, then the constant over all calls
            big = max(u for u, _ in obs)
            slope = max(i / u for u, i in obs if u >= max(1, big // 2))
            pu = float("%.2g" % slope)
            if pu < slope:
                pu = float("%.2g" % (slope * 1.05))
            d["per_unit"] = pu
            d["bound"] = round_up(max(max(i - pu * u for u, i in obs), 1))
        else:
            d["per_unit"] = 0.0
            d["bound"] = round_up(max(i for _, i in obs))
    if sorted(scales) == [1, 2, 3, 4]:
        # a rebound over every size also drops the rows of these drivers
        # that no call reached any more (a path the allocator lost)
        gone = [d for d in rows if d["driver"] in drivers and (d["call"], d["path"]) not in per_row]
        for d in gone:
            print("bounds: %s [%s] no longer reached: its row is removed" % (d["call"], d["path"]))
        rows = [d for d in rows if d not in gone]
    write_bounds(rows)


def fmt(n):
    return "{:,}".format(int(n))


def doc():
    bounds = read_bounds()
    meas = defaultdict(dict)
    for r in read_tsv(MEASURED):
        if len(r) >= 6:
            meas[(r[1], r[2])][int(r[3])] = (int(r[4]), int(r[5]))
    # glibc's worst per call and scale, for the comparison column
    glibc = defaultdict(dict)
    for (call, path), by in meas.items():
        if call.startswith("glibc."):
            for s, (ins, _) in by.items():
                glibc[call][s] = max(glibc[call].get(s, 0), ins)
    lines = ["| call | complexity | worst path | 1 MiB / 10^3 | 16 MiB / 10^4 | 256 MiB / 10^5 | 1 GiB / 10^6 | "
             "largest / smallest | published bound | worst vs glibc's |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---|"]
    for d in bounds:
        by = meas.get((d["call"], d["path"]), {})
        cells = []
        for s in (1, 2, 3, 4):
            if s not in by:
                cells.append("-")
            elif d["unit"]:
                cells.append("%s (%s %s)" % (fmt(by[s][0]), fmt(by[s][1]), d["unit"]))
            else:
                cells.append(fmt(by[s][0]))
        flat = "-"
        if not d["unit"] and 1 in by and by[1][0] and len(by) > 1:
            vals = [by[s][0] for s in by]
            flat = "%.2f" % (max(vals) / min(vals))
        bound = fmt(d["bound"])
        if d["per_unit"]:
            bound = "%s + %g per %s" % (fmt(d["bound"]), d["per_unit"], d["unit"])
        vs = "-"
        if d["peer"] and d["peer"] in glibc and by and not d["unit"]:
            g = glibc[d["peer"]]
            ratios = ["%.2g" % (by[s][0] / g[s]) for s in (1, 2, 3, 4) if s in by and s in g and g[s]]
            if ratios:
                vs = "%s: %s" % (d["peer"], " / ".join(ratios))
        lines.append("| `%s` | %s | %s | %s | %s | %s | %s |" % (
            d["call"], d["complexity"], d["worst"], " | ".join(cells), flat, bound, vs))
    table = "\n".join(lines) + "\n"
    with open(DOC) as f:
        text = f.read()
    b, e = "<!-- bounds-table begin: generated by bench/bounds.sh --doc -->\n", "<!-- bounds-table end -->"
    i, j = text.find(b), text.find(e)
    if i < 0 or j < i:
        sys.exit("bounds: docs/realtime.md has no bounds-table markers")
    text = text[: i + len(b)] + table + text[j:]
    with open(DOC, "w") as f:
        f.write(text)
    print("bounds: docs/realtime.md table written (%d rows)" % len(bounds))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--counts")
    ap.add_argument("--drivers", default="")
    ap.add_argument("--scales", default="1 2 3 4")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--record", action="store_true")
    ap.add_argument("--rebound", action="store_true")
    ap.add_argument("--doc", action="store_true")
    a = ap.parse_args()
    drivers = a.drivers.split()
    scales = [int(s) for s in a.scales.split()]
    rc = 0
    if a.counts:
        calls = read_counts(a.counts)
        if a.record or a.rebound:
            record(calls, drivers, scales, a.rebound)
        if a.check:
            rc = check(calls, drivers, scales)
        if not (a.check or a.record or a.rebound):
            worst = worst_by_row(calls)
            for (c, p, s), (ins, u) in sorted(worst.items()):
                print("%-28s %-60s %d %10d %s" % (c, p[:60], s, ins, u if u else ""))
    if a.doc:
        doc()
    return rc


if __name__ == "__main__":
    sys.exit(main())
