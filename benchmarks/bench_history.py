"""Memory and speed of a 24-hour history at 10 Hz (864,000 samples) with the default PeakHistory.

Run: python benchmarks/bench_history.py
"""

from __future__ import annotations

import random
import time
import tracemalloc

from vramtui.core.memory.history import SAMPLES_24H_AT_10HZ, PeakHistory

MIB = 1024**2


def main() -> None:
    rng = random.Random(0)
    n = SAMPLES_24H_AT_10HZ
    values = [8000.0 * MIB + rng.uniform(-50, 50) * MIB for _ in range(n)]
    spike_at = rng.randrange(n)
    values[spike_at] = 23000.0 * MIB  # one 100 ms spike somewhere in the day

    timed = PeakHistory()
    start = time.perf_counter()
    for i, value in enumerate(values):
        timed.add(i * 0.1, value)
    elapsed = time.perf_counter() - start

    tracemalloc.start()
    history = PeakHistory()
    for i, value in enumerate(values):
        history.add(i * 0.1, value)
    current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(
        f"history: {history.levels} levels x {history.capacity} buckets (factor {history.factor}), "
        f"spans {history.span_samples / 36000:.1f} h at 10 Hz"
    )
    print(
        f"ring buffers: {history.memory_bytes() / MIB:.2f} MiB; traced after 24 h: {current / MIB:.2f} MiB (peak {peak / MIB:.2f} MiB)"
    )
    print(f"add(): {elapsed / n * 1e6:.2f} us per sample ({n} samples in {elapsed:.2f} s)")
    for width, span in ((200, None), (200, 3600.0), (200, 60.0), (80, 600.0)):
        start = time.perf_counter()
        for _ in range(20):
            buckets = history.buckets(width, span)
        took = (time.perf_counter() - start) / 20 * 1000
        where = "whole day" if span is None else f"last {span:.0f} s"
        print(
            f"buckets({width}, {where}): {took:.2f} ms, {len(buckets)} buckets, max {max(b.max for b in buckets) / MIB:.0f} MiB"
        )
    whole = history.buckets(200)
    assert max(b.max for b in whole) == 23000.0 * MIB, "the spike was lost"
    print(
        f"the one 100 ms spike of the day shows in the 200-bucket view: {max(b.max for b in whole) / MIB:.0f} MiB"
    )


if __name__ == "__main__":
    main()
