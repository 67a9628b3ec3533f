"""Replay speed of a week-long nvidia-smi CSV at 1 Hz (604,800 rows, `-l 1` shape with units).

Run: python benchmarks/bench_replay.py
"""

from __future__ import annotations

import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from vramtui.cli.replay import analyse
from vramtui.core.memory.nvsmi_csv import read_nvsmi_csv

ROWS = 7 * 24 * 3600


def write_week(path: Path) -> None:
    rng = random.Random(1)
    start = 1714564800
    with path.open("w") as out:
        out.write("timestamp, memory.used [MiB], memory.total [MiB], utilization.gpu [%]\n")
        for i in range(ROWS):
            t = start + i
            stamp = time.strftime("%Y/%m/%d %H:%M:%S", time.gmtime(t)) + f".{rng.randrange(1000):03d}"
            if i < 600:
                used = 450
            elif i % 900 < 20:  # a request every 15 minutes: the KV cache grows, then is let go
                used = 15000 + (i % 900) * 150 + rng.randrange(-20, 21)
            else:
                used = 14200 + rng.randrange(-3, 4)
            util = "[N/A]" if i % 100_003 == 0 else f"{rng.randrange(100)} %"
            out.write(f"{stamp}, {used} MiB, 24564 MiB, {util}\n")


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "week.csv"
        start = time.perf_counter()
        write_week(path)
        size = path.stat().st_size
        print(
            f"week-long CSV: {ROWS} rows, {size / 1024**2:.1f} MiB (written in {time.perf_counter() - start:.1f} s)"
        )
        start = time.perf_counter()
        data = read_nvsmi_csv(path)
        parsed = time.perf_counter() - start
        print(f"parse: {parsed:.2f} s ({ROWS / parsed / 1000:.0f}k rows/s), {data.skipped} skipped")
        start = time.perf_counter()
        result = analyse(data)
        readings = time.perf_counter() - start
        print(
            f"readings: {readings:.2f} s; {len(result['request_peaks_mib'])} request peaks, "
            f"plateau {result['plateau_mib']} MiB, peak {result['peak_mib']} MiB, falls back {result['falls_back']}"
        )
        start = time.perf_counter()
        samples = data.samples
        print(
            f"building all {len(samples)} Sample objects (ReplaySource yields them lazily): {time.perf_counter() - start:.2f} s"
        )
        start = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "vramtui", "replay", str(path), "--json"], capture_output=True, text=True
        )
        print(
            f"`vramtui replay week.csv --json` end to end: {time.perf_counter() - start:.2f} s (exit {done.returncode})"
        )


if __name__ == "__main__":
    main()
