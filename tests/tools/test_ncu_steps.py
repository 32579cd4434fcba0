#!/usr/bin/env python3
"""tools/ncu_steps.py on synthetic Nsight Compute CSVs: steps found by the sampler marker (326-kernel steps after a
prefill, a last step that differs and a trailing copy), the decode_graph_kernels fallback, and the errors.

    test_ncu_steps.py PATH/TO/ncu_steps.py
"""
import json
import os
import subprocess
import sys
import tempfile

TOOL = sys.argv[1]
failures = []


def csv_text(kernels):
    out = ["ridgeline: the profiled program's own output", "==PROF== Connected to process 1234",
           '"ID","Kernel Name","Grid Size","gpu__time_duration.sum"', '"","","","nsecond"']
    for i, (name, ns) in enumerate(kernels):
        out.append(f'"{i}","{name}","(1, 1, 1)","{ns:,}"')
    out.append("==PROF== Disconnected from process 1234")
    return "\n".join(out) + "\n"


def run(kernels, lat, *extra):
    with tempfile.TemporaryDirectory() as d:
        c, j = os.path.join(d, "ncu.csv"), os.path.join(d, "lat.json")
        open(c, "w").write(csv_text(kernels))
        json.dump(lat, open(j, "w"))
        p = subprocess.run([sys.executable, TOOL, c, j, *extra], capture_output=True, text=True)
        return p.returncode, p.stdout + p.stderr


def expect(cond, what, out):
    if not cond:
        failures.append(what + "\n--- output ---\n" + out)


decode_step = [(f"void layer_kernel_{i}<128>(Params)", 1000) for i in range(325)] + [
    ("sample_kernel(float*, long, SampleBatch)", 2000)]
prefill = [("gemm_big", 50000)] * 3 + [("sample_kernel(float*, long, SampleBatch)", 2000)]
last_step = [("void layer_kernel_0<128>(Params)", 1000), ("sample_kernel(float*, long, SampleBatch)", 2000)]
kernels = prefill + decode_step * 5 + last_step + [("copy_tail", 500)]

rc, out = run(kernels, {"tpot_ms": 0.4, "decode_graph_kernels": 999})
expect(rc == 0, "marker run exits 0", out)
expect("kernels per step 326 (steps end at sample_kernel)" in out, "326 kernels per step by the marker", out)
expect("steps folded 5;" in out, "5 identical steps folded (prefill, last step and tail left out)", out)
expect("kernel time per step 327.0 us" in out, "327 us per step", out)
expect("gaps and launch 73.0 us" in out, "TPOT minus kernel time", out)
expect("sample_kernel" in out.split("last step, in order:")[1], "last step listed", out)

# No marker in the CSV: the decode_graph_kernels fallback (the tail is one copy kernel).
no_marker = [(n.replace("sample_kernel", "argmax_kernel"), t) for n, t in prefill + decode_step * 4] + [("copy", 500)]
rc, out = run(no_marker, {"tpot_ms": 0.4, "decode_graph_kernels": 326})
expect(rc == 0, "fallback exits 0", out)
expect("(steps of decode_graph_kernels = 326); steps folded 4;" in out, "fallback folds 4 steps", out)

# A custom marker.
rc, out = run(no_marker, {"tpot_ms": 0.4}, "--marker", "argmax_kernel")
expect(rc == 0 and "steps folded 4;" in out, "--marker argmax_kernel folds 4 steps", out)

# Errors: no steps and no kernel count; an empty CSV.
rc, out = run(no_marker, {"tpot_ms": 0.4})
expect(rc != 0 and "names no decode_graph_kernels" in out, "no marker and no kernel count fails", out)
rc, out = run([], {"tpot_ms": 0.4})
expect(rc != 0 and "no kernels in" in out, "an empty CSV fails", out)

if failures:
    print("\n\n".join(failures))
    sys.exit(1)
print("ncu_steps: all checks passed")
