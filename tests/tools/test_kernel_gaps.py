#!/usr/bin/env python3
"""tools/kernel_gaps.py on a synthetic Nsight Systems GPU trace: three identical decode steps after a prefill step,
with overlapped (PDL-like) hand-offs, idle gaps around a library GEMM, and a memcpy; the numbers are checked against
the trace's construction. The same steps as ridgeline's --profile-kernels trace (Chrome JSON, kernel track 3, host
spans beside it) give the same figures. Also the errors.

    test_kernel_gaps.py PATH/TO/kernel_gaps.py
"""
import json
import os
import subprocess
import sys
import tempfile

TOOL = sys.argv[1]
failures = []


def trace_csv(events):
    out = ["Generating SQLite file ...", "Processing [report.sqlite] with [cuda_gpu_trace.py]... ",
           '"Start (ns)","Duration (ns)","CorrId","GrdX","Strm","Name"']
    for i, (start, dur, name) in enumerate(events):
        out.append(f'"{start}","{dur}","{i}","1","7","{name}"')
    return "\n".join(out) + "\n"


def trace_json(events):
    """ridgeline's Chrome trace: the kernels on tid 3 in µs, host spans on tid 0 that the tool must ignore."""
    spans = [{"name": "thread_name", "ph": "M", "pid": 1, "tid": 3, "args": {"name": "device kernels"}}]
    for start, dur, name in events:
        spans.append({"name": name, "ph": "X", "pid": 1, "tid": 3, "ts": start / 1e3, "dur": dur / 1e3})
        spans.append({"name": "process", "ph": "X", "pid": 1, "tid": 0, "ts": start / 1e3, "dur": 5.0})
    return json.dumps({"displayTimeUnit": "ms", "traceEvents": spans})


def run(events, *extra, fmt="csv"):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "trace." + fmt)
        open(path, "w").write(trace_csv(events) if fmt == "csv" else trace_json(events))
        p = subprocess.run([sys.executable, TOOL, path, *extra], capture_output=True, text=True)
        return p.returncode, p.stdout + p.stderr


def expect(cond, what, out):
    if not cond:
        failures.append(what + "\n--- output ---\n" + out)


def step(t0):
    """One decode step from t0 (ns): 10 us wall, 7.3 us of kernels and copies, 2.7 us idle."""
    return [
        (t0 + 0, 2000, "[CUDA memcpy Host-to-Device]"),
        (t0 + 2500, 1000, "void rms_norm_kernel(unsigned short*)"),       # 500 ns idle after the memcpy
        (t0 + 3300, 2000, "sm90_xmma_gemm_bf16bf16_bf16f32"),             # overlaps the norm (starts before it ends)
        (t0 + 6300, 1000, "void qk_norm_rope_kernel<128>(QkNormRopeArgs)"),  # 1000 ns idle after the GEMM
        (t0 + 7300, 1000, "void decode_attention_mma_kernel<128, 0>(DecodeParams)"),  # starts as RoPE ends
        (t0 + 9500, 500, "sample_kernel(float*, long, SampleBatch)"),     # 1200 ns
    ]


events = [(0, 50000, "prefill_gemm"), (50000, 1000, "sample_kernel(float*, long, SampleBatch)")]
for k in range(3):
    events += step(100000 + 20000 * k)
events.append((200000, 700, "[CUDA memcpy Device-to-Host]"))
rc, out = run(events)
expect(rc == 0, "exits 0", out)
expect("events per step 6; steps folded 3; wall 10.0 us; kernels running 7.3 us; idle 2.7 us (27.0 %)" in out,
       "wall, busy and idle per step", out)
expect("between steps 10.0 us idle (2 boundaries; 50.0 % of the 20.0 us step period)" in out,
       "the gap from one step's marker to the next step's first event", out)
lines = out.splitlines()
expect(any(l.split()[:2] == ["1.20", "1"] and "decode_attention_mma_kernel -> sample_kernel" in l for l in lines),
       "the largest hand-off first: attention -> sampler 1.2 us", out)
expect(any("1.00" in l and "sm90_xmma_gemm_bf16bf16_bf16f32 -> qk_norm_rope_kernel" in l for l in lines),
       "GEMM -> RoPE 1.0 us", out)
expect(any("0.50" in l and "[CUDA memcpy Host-to-Device] -> rms_norm_kernel" in l for l in lines),
       "memcpy -> norm 0.5 us", out)
expect(not any("rms_norm_kernel -> sm90_xmma" in l for l in lines), "an overlapped hand-off costs nothing", out)
expect(not any("qk_norm_rope_kernel -> decode_attention" in l for l in lines), "a back-to-back hand-off neither", out)
order = [l for l in lines if "->" in l and l.strip()[0].isdigit()]
expect(len(order) >= 3 and "sample_kernel" in order[0] and "qk_norm_rope" in order[1], "sorted by idle time", out)

rc, out_json = run(events, fmt="json")
expect(rc == 0, "a --profile-kernels trace exits 0", out_json)
expect(out_json == out, "the same figures from the Chrome trace as from the CSV", out_json)

rc, out = run([], fmt="json")
expect(rc != 0 and "no device kernel spans" in out, "a trace without the kernel track fails", out)

rc, out = run(events, "--top", "1")
expect(rc == 0 and len([l for l in out.splitlines() if "->" in l and l.strip()[0].isdigit()]) == 1, "--top 1", out)

rc, out = run(events, "--kernels", "2")
krows = sorted(tuple(l.split()) for l in out.splitlines()[-2:])
expect(rc == 0 and krows == [("2.00", "1", "2.00", "[CUDA", "memcpy", "Host-to-Device]"),
                             ("2.00", "1", "2.00", "sm90_xmma_gemm_bf16bf16_bf16f32")],
       "--kernels 2: the two longest per step (us per step, launches per step, median us)", out)

rc, out = run(events, "--totals", "2")
lines = out.splitlines()
expect(rc == 0 and "events 21; wall 0.20 ms; kernels running 0.07 ms" in out, "--totals: the whole trace's wall and "
       "busy time (steps not folded)", out)
expect(len(lines) == 4 and lines[2].split() == ["0.05", "67.4", "1", "prefill_gemm"] and
       lines[3].split()[:3] == ["0.01", "8.1", "3"] and
       lines[3].split()[3] in ("sm90_xmma_gemm_bf16bf16_bf16f32", "[CUDA"),  # tied at 6 us with the memcpy
       "--totals 2: the two kernels with the most time in all (ms, % of all kernel time, launches)", out)

# --each: every launch of the named kernels in start order (the three steps' attention, 1 us each, then a longer
# one), and --min-us drops the short ones.
long_attn = events + [(150000, 4000, "void decode_attention_mma_kernel<128, 0>(DecodeParams)")]
rc, out = run(long_attn, "--each", "decode_attention", fmt="json")
expect(rc == 0 and "decode_attention: 4 launches; us: 1.0 1.0 1.0 4.0" in out and
       "decode_attention: count 4 min 1.0 median 1.0 max 4.0 sum 7.0 us" in out, "--each: launches and summary", out)
rc, out = run(long_attn, "--each", "decode_attention", "--min-us", "2")
expect(rc == 0 and "decode_attention: 1 launches; us: 4.0" in out, "--min-us leaves out the short launches", out)
rc, out = run(long_attn, "--each", "no_such_kernel")
expect(rc != 0 and "no launch of a kernel named *no_such_kernel*" in out, "--each with no launch fails", out)

rc, out = run(events, "--marker", "no_such_kernel")
expect(rc != 0 and "fewer than two repeated steps end at no_such_kernel" in out, "no steps fails", out)

with tempfile.TemporaryDirectory() as d:
    path = os.path.join(d, "empty.csv")
    open(path, "w").write("nothing here\n")
    p = subprocess.run([sys.executable, TOOL, path], capture_output=True, text=True)
    expect(p.returncode != 0 and "no GPU trace table" in p.stdout + p.stderr, "a file without the table fails",
           p.stdout + p.stderr)

if failures:
    print("\n\n".join(failures))
    sys.exit(1)
print("kernel_gaps: all checks passed")
