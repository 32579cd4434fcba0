#!/usr/bin/env python3
"""tools/smi_clocks.py on synthetic nvidia-smi CSVs: both column sets (with and without the throttle reasons), lines
that do not parse, the window's bounds and power floor, the summary's figures, the command line and its errors.

    test_smi_clocks.py PATH/TO/smi_clocks.py
"""
import datetime
import importlib.util
import os
import subprocess
import sys
import tempfile

TOOL = sys.argv[1]
spec = importlib.util.spec_from_file_location("smi_clocks", TOOL)
smi = importlib.util.module_from_spec(spec)
spec.loader.exec_module(smi)
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


T0 = datetime.datetime(2026, 12, 8, 1, 0, 0)


def stamp(ms):
    return (T0 + datetime.timedelta(milliseconds=ms)).strftime("%Y/%m/%d %H:%M:%S.%f")[:-3]


def write(lines):
    f = tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False)
    f.write("\n".join(lines) + "\n")
    f.close()
    return f.name


# Ten samples 50 ms apart: clocks 1980 down to 1530, power alternating 600 / 200 W, the power cap in every other
# sample; a header line and an "[N/A]" line among them.
rows = ["timestamp, clocks.current.sm [MHz], power.draw [W], temperature.gpu, clocks_event_reasons.active"]
for i in range(10):
    watts = 600.0 if i % 2 == 0 else 200.0
    reasons = "0x0000000000000004" if i % 2 == 0 else "0x0000000000000000"
    rows.append(f"{stamp(50 * i)}, {1980 - 50 * i}, {watts:.2f}, {60 + i}, {reasons}")
    if i == 4:
        rows.append(f"{stamp(50 * i + 10)}, [N/A], [N/A], [N/A], [N/A]")
path = write(rows)
samples = smi.read_samples(path)
check(len(samples) == 10, f"10 samples read, got {len(samples)}")
check(samples[0].reasons == 4 and samples[1].reasons == 0, "reasons parsed as hex bitmasks")
t0 = samples[0].t
check(abs(samples[9].t - t0 - 0.45) < 1e-6, "timestamps 50 ms apart")

every = smi.window(samples, t0, t0 + 0.45)
check(len(every) == 10, "the window's ends are inclusive")
busy = smi.window(samples, t0, t0 + 0.45, min_watts=250)
check([s.mhz for s in busy] == [1980, 1880, 1780, 1680, 1580], f"the power floor keeps the 600 W samples: {busy}")
check(len(smi.window(samples, t0 + 0.1, t0 + 0.2)) == 3, "a window inside the run")

line = smi.summary(busy)
check(line == "5 samples, 1780 MHz (1580-1980), 600 W, 68 C, sw_power_cap 5", f"summary of the busy samples: {line}")
check(smi.summary([]) == "no samples", "an empty window")
check(smi.summary(smi.window(samples, t0 + 0.05, t0 + 0.05)) == "1 samples, 1930 MHz (1930-1930), 200 W, 61 C",
      "one sample, no reasons")

# The four-column form (prefill_vs_cudnn.sh): no reasons, none reported.
rows4 = [f"{stamp(100 * i)}, {1700 + i}, {400 + i}.5, {55 + i}" for i in range(4)]
s4 = smi.read_samples(write(rows4))
check(len(s4) == 4 and all(s.reasons is None for s in s4), "four columns: samples without reasons")
check(smi.summary(s4) == "4 samples, 1702 MHz (1700-1703), 402 W, 58 C", f"four-column summary: {smi.summary(s4)}")

# The command line: the same line as summary(); a window that ends before it starts is an error.
p = subprocess.run([sys.executable, TOOL, path, str(t0), str(t0 + 0.45), "--min-watts", "250"], capture_output=True,
                   text=True)
check(p.returncode == 0 and p.stdout.strip() == "5 samples, 1780 MHz (1580-1980), 600 W, 68 C, sw_power_cap 5",
      f"command line: rc {p.returncode}, {p.stdout!r} {p.stderr!r}")
p = subprocess.run([sys.executable, TOOL, path, str(t0 + 1), str(t0)], capture_output=True, text=True)
check(p.returncode != 0 and "ends" in p.stderr, f"a reversed window fails: rc {p.returncode}, {p.stderr!r}")
p = subprocess.run([sys.executable, TOOL, "/nonexistent/clocks.csv", "0", "1"], capture_output=True, text=True)
check(p.returncode != 0, "a missing CSV fails")
os.unlink(path)

if failures:
    print("smi_clocks: FAILED\n  " + "\n  ".join(failures))
    sys.exit(1)
print("smi_clocks: all checks passed")
