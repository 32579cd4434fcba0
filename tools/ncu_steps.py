#!/usr/bin/env python3
"""Fold an Nsight Compute CSV (`ncu --csv --page raw --metrics gpu__time_duration.sum`) of a short
`ridgeline bench latency` run into GPU time per decode step (scripts/device/decode_profile.sh, issue 12).

    tools/ncu_steps.py NCU.csv LATENCY.json

The decode graph has K kernel nodes (`decode_graph_kernels` in the latency JSON); the last decode steps of the run
are the last run of n repeated K-kernel name sequences. Prints the kernel time per step, the measured
TPOT beside it, the time by kernel name, and the last step's kernels in order.
"""
import csv
import json
import sys
from collections import defaultdict

UNIT = {"nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3, "second": 1e6}


def main():
    lines = open(sys.argv[1]).read().splitlines()
    # The profiled program's own output comes first: the CSV starts at its header line.
    first = next((i for i, line in enumerate(lines) if line.startswith('"ID",')), len(lines))
    rows = list(csv.reader(line for line in lines[first:] if not line.startswith("==")))
    if len(rows) < 3:
        sys.exit(f"no kernels in {sys.argv[1]}")
    head, units, data = rows[0], rows[1], rows[2:]
    name_col, time_col = head.index("Kernel Name"), head.index("gpu__time_duration.sum")
    grid_col = head.index("Grid Size") if "Grid Size" in head else None
    scale = UNIT.get(units[time_col], 1e-3)
    kernels = [(r[name_col], float(r[time_col].replace(",", "")) * scale, r[grid_col] if grid_col is not None else "")
               for r in data if len(r) > time_col and r[time_col]]
    lat = json.load(open(sys.argv[2]))
    k = int(lat.get("decode_graph_kernels") or 0)
    tpot_us = float(lat["tpot_ms"]) * 1e3
    if k <= 0:
        sys.exit("the latency JSON names no decode_graph_kernels")
    # The tail may hold a few kernels after the last decode step (the final sampling, copies): end the window where
    # the most consecutive k-kernel steps, counted back from there, repeat the same names.
    names = [x[0] for x in kernels]
    n, end = 0, len(kernels)
    for back in range(0, k):
        e = len(kernels) - back
        last = names[e - k:e]
        m = 1
        while e - (m + 1) * k >= 0 and names[e - (m + 1) * k:e - m * k] == last:
            m += 1
        if m > n:
            n, end = m, e
    if n < 2:
        sys.exit(f"{len(kernels)} kernels: no two repeated decode steps of {k} kernels")
    window = kernels[end - n * k:end]
    per_step = sum(t for _, t, _ in window) / n
    print(f"kernels per step {k}; steps folded {n}; kernel time per step {per_step:.1f} us; "
          f"measured TPOT {tpot_us:.1f} us; gaps and launch {tpot_us - per_step:.1f} us "
          f"({100 * (tpot_us - per_step) / tpot_us:.0f} %)")
    by_name = defaultdict(lambda: [0.0, 0])
    for name, t, _ in window:
        short = name.split("(")[0].split("<")[0][:60]
        by_name[short][0] += t / n
        by_name[short][1] += 1
    print(f"{'kernel':60s} {'us/step':>9s} {'count':>6s} {'us each':>8s}")
    for name, (t, c) in sorted(by_name.items(), key=lambda x: -x[1][0]):
        print(f"{name:60s} {t:9.1f} {c // n:6d} {t / (c // n):8.2f}")
    print("last step, in order:")
    for name, t, grid in window[-k:]:
        print(f"  {t:7.2f} us  grid {grid:16s} {name[:100]}")


if __name__ == "__main__":
    main()
