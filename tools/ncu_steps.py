#!/usr/bin/env python3
"""Fold an Nsight Compute CSV (`ncu --csv --page raw --metrics gpu__time_duration.sum`) of a short
`ridgeline bench latency` run into GPU time per decode step (scripts/device/decode_profile.sh, issue 12).

    tools/ncu_steps.py NCU.csv LATENCY.json [--marker NAME]

A decode step ends with the sampler, so the kernels between two consecutive launches of the marker kernel
(default: sample_kernel; the name must contain NAME) are one step. The steps folded are the longest run of
consecutive steps with the same kernel names in the same order (the latest such run on a tie), so the prefill
steps, a first step that differs and the run's tail drop out. Without the marker in the CSV, it falls back to
the graph's kernel count (`decode_graph_kernels` in the latency JSON): the last run of repeated K-kernel name
sequences. Prints the kernel time per step, the measured TPOT beside it, the time by kernel name, and the last
step's kernels in order.
"""
import csv
import json
import sys
from collections import defaultdict

UNIT = {"nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3, "second": 1e6}


def read_kernels(path):
    lines = open(path).read().splitlines()
    # The profiled program's own output comes first: the CSV starts at its header line.
    first = next((i for i, line in enumerate(lines) if line.startswith('"ID",')), len(lines))
    rows = list(csv.reader(line for line in lines[first:] if not line.startswith("==")))
    if len(rows) < 3:
        sys.exit(f"no kernels in {path}")
    head, units, data = rows[0], rows[1], rows[2:]
    name_col, time_col = head.index("Kernel Name"), head.index("gpu__time_duration.sum")
    grid_col = head.index("Grid Size") if "Grid Size" in head else None
    scale = UNIT.get(units[time_col], 1e-3)
    return [(r[name_col], float(r[time_col].replace(",", "")) * scale, r[grid_col] if grid_col is not None else "")
            for r in data if len(r) > time_col and r[time_col]]


def steps_by_marker(kernels, marker, name_of=lambda e: e[0]):
    """The longest run (latest on a tie) of consecutive marker-ended steps with identical name sequences.
    kernels: events in launch order; name_of(event) is the kernel's name (tools/kernel_gaps.py folds with it too)."""
    ends = [i for i, e in enumerate(kernels) if marker in name_of(e)]
    segments = [kernels[a + 1:b + 1] for a, b in zip(ends, ends[1:])]
    best, run_start = (0, 0), 0  # (length, index of the run's first segment)
    for i in range(len(segments)):
        same = i > 0 and [name_of(x) for x in segments[i]] == [name_of(x) for x in segments[i - 1]]
        if not same:
            run_start = i
        if i - run_start + 1 >= best[0]:
            best = (i - run_start + 1, run_start)
    n, start = best
    return segments[start:start + n]


def steps_by_count(kernels, k):
    """The last run of n repeated k-kernel name sequences (the tail may hold a few kernels after it)."""
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
    return [kernels[end - (i + 1) * k:end - i * k] for i in reversed(range(n))]


def main():
    args = sys.argv[1:]
    marker = "sample_kernel"
    if "--marker" in args:
        i = args.index("--marker")
        if i + 1 >= len(args):
            sys.exit("--marker needs a kernel name")
        marker = args[i + 1]
        del args[i:i + 2]
    if len(args) != 2:
        sys.exit("usage: tools/ncu_steps.py NCU.csv LATENCY.json [--marker NAME]")
    kernels = read_kernels(args[0])
    lat = json.load(open(args[1]))
    tpot_us = float(lat["tpot_ms"]) * 1e3
    steps = steps_by_marker(kernels, marker)
    how = f"steps end at {marker}"
    if len(steps) < 2:
        k = int(lat.get("decode_graph_kernels") or 0)
        if k <= 0:
            sys.exit(f"fewer than two steps end at {marker}, and the latency JSON names no decode_graph_kernels")
        steps = steps_by_count(kernels, k)
        how = f"steps of decode_graph_kernels = {k}"
    if len(steps) < 2:
        sys.exit(f"{len(kernels)} kernels: no two repeated decode steps ({how})")
    n, k = len(steps), len(steps[0])
    per_step = sum(t for step in steps for _, t, _ in step) / n
    print(f"kernels per step {k} ({how}); steps folded {n}; kernel time per step {per_step:.1f} us; "
          f"measured TPOT {tpot_us:.1f} us; gaps and launch {tpot_us - per_step:.1f} us "
          f"({100 * (tpot_us - per_step) / tpot_us:.0f} %)")
    by_name = defaultdict(lambda: [0.0, 0])
    for step in steps:
        for name, t, _ in step:
            short = name.split("(")[0].split("<")[0][:60]
            by_name[short][0] += t / n
            by_name[short][1] += 1
    print(f"{'kernel':60s} {'us/step':>9s} {'count':>6s} {'us each':>8s}")
    for name, (t, c) in sorted(by_name.items(), key=lambda x: -x[1][0]):
        print(f"{name:60s} {t:9.1f} {c // n:6d} {t / (c // n):8.2f}")
    print("last step, in order:")
    for name, t, grid in steps[-1]:
        print(f"  {t:7.2f} us  grid {grid:16s} {name[:100]}")


if __name__ == "__main__":
    main()
