"""Replay speed of a week-long nvidia-smi CSV at 1 Hz (604,800 rows, `-l 1` shape with units), and with
--large, the seconds and peak memory of `vramtui replay` on a ~1 GB `vramtui record --pid` CSV (QA: 14.3 M
rows took 160 s and 5.3 GB).

Run: python benchmarks/bench_replay.py
     python benchmarks/bench_replay.py --large [--rows N] [--dir DIR] [--against CHECKOUT]

--against runs the same replay with another checkout's vramtui first (e.g. `git worktree add /tmp/before
HEAD`), so that both figures come from one file on one machine; --dir keeps the file there.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from vramtui.cli.replay import analyse
from vramtui.core.memory.nvsmi_csv import read_nvsmi_csv

ROWS = 7 * 24 * 3600
LARGE_ROWS = 14_300_000  # about 1 GB in `record --pid`'s host-only shape (73 bytes a row)
SPIKE_MIB = 20_000  # one sample in the middle of the large file, above every request's peak


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


def _large_row(i: int, rows: int, rng: random.Random) -> tuple[int, str, int]:
    """(host RAM used, the process tree's RSS, its PIDs) of row i: idle a minute, a 10 s load to 14 GiB,
    then a request every 5 minutes (+1.5 GiB for 5 s) until the end, and the spike in the middle."""
    if i < 600:
        return 785, "[N/A]", 0
    if i < 700:
        rss = 13 + (i - 600) * 140
    elif i == rows // 2:
        rss = SPIKE_MIB
    else:
        rss = 14013 + (1500 * (i % 3000) // 50 if i % 3000 < 50 else 0) + rng.randrange(-3, 4)
    return 785 + rss + rng.randrange(-20, 21), f"{rss} MiB", 3


def write_large(path: Path, rows: int) -> None:
    """`vramtui record --pid --interval-ms 100`'s own columns on a machine without NVML, `rows` rows."""
    rng = random.Random(2)
    start = 1714564800
    with path.open("w") as out:
        out.write(
            "timestamp, host.ram_used [MiB], host.ram_total [MiB], host.swap_used [MiB], "
            "process.tree_rss [MiB], process.tree_gpu [MiB], process.pids\n"
        )
        lines: list[str] = []
        stamp = ""
        for i in range(rows):
            if i % 10 == 0:
                stamp = time.strftime("%Y/%m/%d %H:%M:%S", time.gmtime(start + i // 10))
            ram, rss, pids = _large_row(i, rows, rng)
            lines.append(
                f"{stamp}.{(i % 10) * 100 + 61:03d}, {ram} MiB, 24105 MiB, 0 MiB, {rss}, [N/A], {pids}\n"
            )
            if len(lines) >= 10_000:
                out.write("".join(lines))
                lines.clear()
        out.write("".join(lines))


def replay_in_child(path: Path, checkout: Path | None) -> tuple[float, int, dict]:
    """`vramtui replay FILE --json` in its own process: (seconds, peak RSS in KiB, its JSON)."""
    # this checkout's vramtui when none is named, not an installed one
    checkout = checkout or Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    start = time.perf_counter()
    child = subprocess.Popen(
        [sys.executable, "-m", "vramtui", "replay", str(path.resolve()), "--json"],
        stdout=subprocess.PIPE,
        env=env,
        cwd=checkout,
    )
    out = child.stdout.read() if child.stdout else b""
    _pid, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.perf_counter() - start
    if child.returncode != 0:
        raise SystemExit(f"replay exited {child.returncode}")
    return seconds, usage.ru_maxrss, json.loads(out)


def large(rows: int, folder: Path, against: Path | None) -> None:
    """Seconds and peak RSS of `vramtui replay` on large.csv (written unless it is there), before and now."""
    path = folder / "large.csv"
    if not path.is_file():
        start = time.perf_counter()
        write_large(path, rows)
        print(f"wrote {path} in {time.perf_counter() - start:.0f} s")
    print(f"`record --pid` CSV at 10 Hz: {path.stat().st_size / 1024**2:,.0f} MiB")
    runs = [("before", against)] if against is not None else []
    for label, checkout in [*runs, ("now", None)]:
        seconds, rss_kib, result = replay_in_child(path, checkout)
        summary = result.get("summarised")
        kept = f", {summary['timestamps_kept']:,} timestamps kept" if summary else ""
        print(
            f"{label:>6}: {seconds:6.1f} s, peak RSS {rss_kib / 1024:7.0f} MiB; rows {result['rows']:,}, "
            f"samples {result['samples']:,}{kept}; peak {result['peak_mib']} MiB (spike {SPIKE_MIB}), "
            f"baseline {result['baseline_mib']}, plateau {result['plateau_mib']}, "
            f"{len(result['request_peaks_mib'])} request peaks"
        )


def week() -> None:
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


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--large", action="store_true", help="the ~1 GB `record --pid` case")
    parser.add_argument("--rows", type=int, default=LARGE_ROWS)
    parser.add_argument("--dir", type=Path, help="write (or reuse) large.csv here and keep it")
    parser.add_argument("--against", type=Path, help="a checkout of the code before, run first")
    args = parser.parse_args()
    if not args.large:
        week()
    elif args.dir is not None:
        args.dir.mkdir(parents=True, exist_ok=True)
        large(args.rows, args.dir, args.against)
    else:
        with tempfile.TemporaryDirectory() as folder:
            large(args.rows, Path(folder), args.against)


if __name__ == "__main__":
    main()
