#!/usr/bin/env python3
# Summarises an ncu CSV (gpu__time_duration per kernel) of a `bench latency` run: the last complete decode step
# (kernels between the last two sampling kernels), grouped by kernel name.
import csv, sys, collections, re
rows = []
with open(sys.argv[1]) as f:
    lines = [l for l in f if l.startswith('"')]
for r in csv.DictReader(lines):
    if r.get("Metric Name") != "gpu__time_duration.sum": continue
    rows.append((r["Kernel Name"], float(r["Metric Value"].replace(",", "")), r.get("Grid Size", ""), r.get("Block Size", "")))
tag = sys.argv[2] if len(sys.argv) > 2 else ""
ends = [i for i, r in enumerate(rows) if re.search(r"sample_kernel|argmax_rows", r[0])]
print(f"{tag}: {len(rows)} kernels profiled, {len(ends)} sampling kernels")
if len(ends) < 2: sys.exit(0)
step = rows[ends[-2] + 1: ends[-1] + 1]
tot = sum(r[1] for r in step) / 1e3
print(f"{tag}: one decode step = {len(step)} kernels, sum of kernel times {tot:.1f} us")
g = collections.defaultdict(lambda: [0, 0.0, ""])
for name, ns, grid, blk in step:
    k = re.sub(r"\(.*", "", name)[:90]
    g[k][0] += 1; g[k][1] += ns / 1e3; g[k][2] = grid + "x" + blk
for k, (n, us, gb) in sorted(g.items(), key=lambda kv: -kv[1][1]):
    print(f"{tag}: {us:9.1f} us {100*us/tot:5.1f}% n={n:4d} avg {us/n:7.2f} us  {gb:22s} {k}")
