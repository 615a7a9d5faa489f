"""Sums an ncu CSV (--csv --metrics gpu__time_duration.sum) per kernel name:
where a run's GPU time goes, largest first.

    ncu --csv --metrics gpu__time_duration.sum CMD > k.csv
    python3 scripts/bench/ncu_summary.py k.csv [STEPS]
"""
import collections
import csv
import sys


def main():
    path = sys.argv[1]
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    total = collections.Counter()
    count = collections.Counter()
    with open(path) as f:
        lines = [l for l in f if l.startswith('"')]
    for row in csv.DictReader(lines):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        v = float(row["Metric Value"].replace(",", ""))
        unit = row.get("Metric Unit", "nsecond")
        scale = {"nsecond": 1e-6, "usecond": 1e-3, "msecond": 1.0, "second": 1e3}.get(unit, 1e-6)
        name = row["Kernel Name"][:90]
        total[name] += v * scale
        count[name] += 1
    all_ms = sum(total.values())
    print(f"GPU time {all_ms / steps:.2f} ms/step over {sum(count.values()) / steps:.0f} kernels/step")
    for name, ms in total.most_common(25):
        print(f"{ms / steps:8.3f} ms/step {100 * ms / all_ms:5.1f}%  x{count[name] / steps:5.1f}  {name}")


if __name__ == "__main__":
    main()
