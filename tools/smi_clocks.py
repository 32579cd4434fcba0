#!/usr/bin/env python3
"""The GPU's SM clock, power, temperature and throttle reasons through a run, from an nvidia-smi CSV sampled beside
it (scripts/device/ttft_clock.sh, prefill_vs_cudnn.sh):

    nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu[,clocks_event_reasons.active] \\
        --format=csv,noheader,nounits -lms 50 > clocks.csv

    smi_clocks.py CSV START END [--min-watts W]

START and END are seconds since the epoch (`date +%s.%N`). Prints one line: the samples in the window (those above
W watts, if given), the SM clock's median, minimum and maximum, the mean power, the highest temperature and, where
the CSV has them, how many samples named each throttle reason. The scripts import read_samples, window and summary.
nvidia-smi writes its timestamps in local time, which is how `date +%s` and datetime.timestamp() count.
"""
import argparse
import collections
import datetime
import statistics
import sys

Sample = collections.namedtuple("Sample", "t mhz watts temp reasons")  # reasons: the active bitmask, or None

# clocks_event_reasons.active bits (nvml's clocks event reasons) that a device script reads.
REASONS = {0x1: "idle", 0x4: "sw_power_cap", 0x8: "hw_slowdown", 0x20: "sw_thermal", 0x40: "hw_thermal",
           0x80: "hw_power_brake"}


def read_samples(path):
    """Every well-formed line of the CSV, in file order; lines that do not parse (a header, "[N/A]") are skipped."""
    samples = []
    with open(path) as f:
        for line in f:
            p = [x.strip() for x in line.split(",")]
            try:
                t = datetime.datetime.strptime(p[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
                reasons = int(p[4], 16) if len(p) > 4 else None
                samples.append(Sample(t, float(p[1]), float(p[2]), float(p[3]), reasons))
            except (ValueError, IndexError):
                pass
    return samples


def window(samples, t0, t1, min_watts=None):
    """The samples from t0 to t1 (inclusive), above min_watts if given."""
    return [s for s in samples if t0 <= s.t <= t1 and (min_watts is None or s.watts > min_watts)]


def summary(samples):
    """One line over the samples: count, SM MHz median (min-max), mean W, max C, and the throttle reasons seen."""
    if not samples:
        return "no samples"
    mhz = [s.mhz for s in samples]
    line = (f"{len(samples)} samples, {statistics.median(mhz):.0f} MHz ({min(mhz):.0f}-{max(mhz):.0f}), "
            f"{statistics.mean(s.watts for s in samples):.0f} W, {max(s.temp for s in samples):.0f} C")
    counts = {name: sum(1 for s in samples if s.reasons is not None and s.reasons & bit)
              for bit, name in REASONS.items()}
    seen = ", ".join(f"{name} {n}" for name, n in counts.items() if n)
    return line + (", " + seen if seen else "")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("csv")
    ap.add_argument("start", type=float)
    ap.add_argument("end", type=float)
    ap.add_argument("--min-watts", type=float, default=None)
    a = ap.parse_args()
    if a.end < a.start:
        sys.exit(f"smi_clocks: the window ends ({a.end}) before it starts ({a.start})")
    print(summary(window(read_samples(a.csv), a.start, a.end, a.min_watts)))


if __name__ == "__main__":
    main()
