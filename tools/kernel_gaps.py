#!/usr/bin/env python3
"""Where a decode step's wall time goes between kernels (issue 12), from ridgeline's own kernel trace or an Nsight
Systems GPU trace:

    ridgeline bench latency ... --profile RUN.json --profile-kernels     (CUDA; CUPTI, kernels in graphs included)
    tools/kernel_gaps.py RUN.json [--marker NAME] [--top N]

    nsys profile -t cuda --cuda-graph-trace=node -o RUN ridgeline bench latency ...
    nsys stats --report cuda_gpu_trace --format csv --output RUN RUN.nsys-rep
    tools/kernel_gaps.py RUN_cuda_gpu_trace.csv [--marker NAME] [--top N]

A .json file is read as ridgeline's Chrome trace: the spans of its "device kernels" track (tid 3).

Steps end with the marker kernel (default: sample_kernel); the steps folded are the longest run of consecutive steps
with the same kernel names in the same order (the latest on a tie): tools/ncu_steps.py's steps_by_marker. For each step:
its wall time (first kernel's start to the marker's end), the time at least one kernel runs (the union of the
kernel intervals) and the idle rest; then the idle time between consecutive steps (a step's marker to the next
step's first event), which the step's own wall time leaves out. Idle time is charged to the hand-off it falls in:
the pair (kernel that ended last, kernel that started next). The hand-offs that cost the most per step are listed,
each with its count per step, so a boundary that programmatic dependent launch does not overlap (a library kernel,
a memcpy) shows up as idle time beside its neighbours' names. Memory copies and sets in the trace count as activity
like kernels. --kernels N adds the N kernels that run longest per step: time per step, launches per step, median
duration. --totals N reads the whole trace as one span instead of folding steps (a single long step, such as a
32k-token prefill): its wall and busy time, then the N kernels with the most time in all, with their share of it.
--each NAME_PART lists every launch whose kernel name contains NAME_PART, in start order, with its duration, then
their count, minimum, median, maximum and sum (a long prompt's attention layer by layer); --min-us X leaves out the
launches shorter than X µs (the decode steps after the prompt).
"""
import csv
import json
import os
import sys
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ncu_steps import steps_by_marker  # noqa: E402  (the same step folding)


def short(name):
    return name.split("(")[0].split("<")[0].replace("void ", "").strip()[:48]


def read_profile(path):
    """The kernel spans of ridgeline's --profile-kernels trace (Chrome-trace JSON, µs), as (start_ns, end_ns, name)."""
    try:
        with open(path) as f:
            trace = json.load(f)
    except (OSError, ValueError) as e:
        sys.exit(f"{path}: not a readable Chrome trace ({e})")
    events = [(1e3 * e["ts"], 1e3 * (e["ts"] + e["dur"]), e["name"]) for e in trace.get("traceEvents", [])
              if e.get("ph") == "X" and e.get("tid") == 3]
    if not events:
        sys.exit(f"{path}: no device kernel spans (write it with --profile FILE --profile-kernels, on CUDA)")
    events.sort()
    return events


def read_trace(path):
    if path.endswith(".json"):
        return read_profile(path)
    with open(path, newline="") as f:
        lines = f.read().splitlines()
    # nsys may print notes before the table: start at the header row.
    first = next((i for i, line in enumerate(lines) if line.startswith('"Start') or line.startswith("Start")), None)
    if first is None:
        sys.exit(f"no GPU trace table in {path}")
    rows = list(csv.reader(lines[first:]))
    head = rows[0]

    def col(prefix):
        for i, h in enumerate(head):
            if h.startswith(prefix):
                return i
        sys.exit(f"{path}: no column starting with {prefix!r} (columns: {head})")

    start_col, dur_col, name_col = col("Start"), col("Duration"), col("Name")
    events = []
    for r in rows[1:]:
        if len(r) <= max(start_col, dur_col, name_col) or not r[start_col]:
            continue
        start = float(r[start_col].replace(",", ""))
        events.append((start, start + float(r[dur_col].replace(",", "")), r[name_col]))
    events.sort()
    return events  # (start_ns, end_ns, name), by start


def analyse(step):
    """(wall_ns, busy_ns, {(prev, next): idle_ns}, {(prev, next): idle gaps}) of one step's events, by start."""
    wall = step[-1][1] - step[0][0]
    busy, idle, gaps = 0.0, defaultdict(float), defaultdict(int)
    cur_end, cur_name = step[0][1], step[0][2]
    busy += step[0][1] - step[0][0]
    for s, e, name in step[1:]:
        if s > cur_end:
            idle[(short(cur_name), short(name))] += s - cur_end
            gaps[(short(cur_name), short(name))] += 1
            busy += e - s
            cur_end, cur_name = e, name
        elif e > cur_end:
            busy += e - cur_end
            cur_end, cur_name = e, name
    return wall, busy, idle, gaps


def by_kernel(events):
    """{short kernel name: [duration_ns, ...]} of (start_ns, end_ns, name) events."""
    spans = defaultdict(list)
    for s, e, name in events:
        spans[short(name)].append(e - s)
    return spans


def main():
    args = sys.argv[1:]
    marker, top, kernels, totals, each, min_us = "sample_kernel", 15, 0, 0, None, 0.0
    for flag in ("--marker", "--top", "--kernels", "--totals", "--each", "--min-us"):
        if flag in args:
            i = args.index(flag)
            if i + 1 >= len(args):
                sys.exit(f"{flag} needs a value")
            if flag == "--marker":
                marker = args[i + 1]
            elif flag == "--top":
                top = int(args[i + 1])
            elif flag == "--totals":
                totals = int(args[i + 1])
            elif flag == "--each":
                each = args[i + 1]
            elif flag == "--min-us":
                min_us = float(args[i + 1])
            else:
                kernels = int(args[i + 1])
            del args[i:i + 2]
    if len(args) != 1:
        sys.exit("usage: tools/kernel_gaps.py TRACE.json|TRACE.csv [--marker NAME] [--top N] [--kernels N] "
                 "[--totals N] [--each NAME_PART [--min-us X]]")
    events = read_trace(args[0])
    if each is not None:
        d = [(e - s) / 1e3 for s, e, name in sorted(events) if each in name and (e - s) / 1e3 >= min_us]
        if not d:
            sys.exit(f"no launch of a kernel named *{each}* of at least {min_us:g} us")
        print(f"{each}: {len(d)} launches; us: " + " ".join(f"{x:.1f}" for x in d))
        o = sorted(d)
        print(f"{each}: count {len(d)} min {o[0]:.1f} median {o[len(o) // 2]:.1f} max {o[-1]:.1f} sum {sum(d):.1f} us")
        return
    if totals > 0:
        wall, busy, _, _ = analyse(events)
        print(f"events {len(events)}; wall {wall / 1e6:.2f} ms; kernels running {busy / 1e6:.2f} ms")
        spans = by_kernel(events)
        total = sum(sum(d) for d in spans.values())
        print(f"{'ms':>10s} {'%':>6s} {'count':>6s}  kernel")
        for name, d in sorted(spans.items(), key=lambda x: -sum(x[1]))[:totals]:
            print(f"{sum(d) / 1e6:10.2f} {100 * sum(d) / total:6.1f} {len(d):6d}  {name}")
        return
    steps = steps_by_marker(events, marker, name_of=lambda e: e[2])
    if len(steps) < 2:
        sys.exit(f"{len(events)} GPU events: fewer than two repeated steps end at {marker}")
    n = len(steps)
    wall = busy = 0.0
    idle = defaultdict(float)
    counts = {}
    for step in steps:
        w, b, step_idle, counts = analyse(step)  # counts: the last step's
        wall += w / n
        busy += b / n
        for k, v in step_idle.items():
            idle[k] += v / n
    print(f"events per step {len(steps[0])}; steps folded {n}; wall {wall / 1e3:.1f} us; kernels running "
          f"{busy / 1e3:.1f} us; idle {(wall - busy) / 1e3:.1f} us ({100 * (wall - busy) / wall:.1f} %)")
    # The folded steps are consecutive: between two of them the GPU runs nothing the step accounts for (the next
    # step's launch, and any copy the host enqueued before it, come after).
    between = [steps[i][0][0] - steps[i - 1][-1][1] for i in range(1, n)]
    if between:
        b = sum(between) / len(between)
        print(f"between steps {b / 1e3:.1f} us idle ({len(between)} boundaries; {100 * b / (wall + b):.1f} % of the "
              f"{(wall + b) / 1e3:.1f} us step period): from a step's {marker} to the next step's first event")
    print(f"{'idle us/step':>12s} {'gaps':>6s}  hand-off (kernel that ended -> kernel that started)")
    for (a, b), t in sorted(idle.items(), key=lambda x: -x[1])[:top]:
        print(f"{t / 1e3:12.2f} {counts.get((a, b), 0):6d}  {a} -> {b}")
    if kernels > 0:  # where the running time goes: each kernel's time per step, its launches, their median
        spans = by_kernel(e for step in steps for e in step)
        print(f"{'us/step':>12s} {'count':>6s} {'median us':>10s}  kernel")
        for name, d in sorted(spans.items(), key=lambda x: -sum(x[1]))[:kernels]:
            d = sorted(d)
            print(f"{sum(d) / n / 1e3:12.2f} {len(d) // n:6d} {d[len(d) // 2] / 1e3:10.2f}  {name}")


if __name__ == "__main__":
    main()
