"""A recording too long to hold is summarised as it is read (QA: a 1 GB `record` CSV took 5.3 GB to
replay): memory bounded by `keep`, and every peak, floor and count the file's own."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from vramtui.cli.replay import analyse
from vramtui.core.memory.nvsmi_csv import iter_samples, read_nvsmi_csv
from vramtui.core.memory.nvsmi_fold import held
from vramtui.core.memory.series import recorded_process

MIB = 1024**2
SPIKE = 19_000  # MiB, one sample in the middle: above every request's peak


def _stamp(i: int) -> str:
    """10 Hz from 2024/05/01 12:00:00.050."""
    seconds = i // 10
    return f"2024/05/{1 + seconds // 86400:02d} {seconds // 3600 % 24:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}.{(i % 10) * 100 + 50:03d}"


def _used(i: int, rows: int, rng: random.Random) -> int:
    """A card idle for a minute, a model loaded to 14 GiB, a request every 2 minutes (+1.5 GiB for 3 s),
    the spike in the middle, the exit 30 s before the end."""
    if i < 600 or i >= rows - 300:
        return 450 + rng.randrange(-2, 3)
    if i < 700:
        return 450 + (i - 600) * 140
    if i == rows // 2:
        return SPIKE
    return 14450 + (1500 if i % 1200 < 30 else 0) + rng.randrange(-3, 4)


def gpu_recording(path: Path, rows: int) -> Path:
    """nvidia-smi's `--query-gpu=timestamp,index,memory.used,memory.total,utilization.gpu -lms 100`."""
    rng = random.Random(5)
    lines = ["timestamp, index, memory.used [MiB], memory.total [MiB], utilization.gpu [%]\n"]
    for i in range(rows):
        util = "[N/A]" if i % 997 == 0 else f"{rng.randrange(100)} %"
        lines.append(f"{_stamp(i)}, 0, {_used(i, rows, rng)} MiB, 24564 MiB, {util}\n")
    path.write_text("".join(lines))
    return path


def process_recording(path: Path, rows: int) -> Path:
    """`vramtui record --pid` on two cards: the model's process appears after a minute on GPU 0, another
    user's 6 GiB on GPU 1 swells once, the process is gone 30 s before the end."""
    rng = random.Random(6)
    lines = [
        "timestamp, memory.used [MiB], memory.total [MiB], utilization.gpu [%], index, name, uuid, "
        "memory.reserved [MiB], host.ram_used [MiB], host.ram_total [MiB], host.swap_used [MiB], "
        "process.tree_rss [MiB], process.tree_gpu [MiB], process.pids\n"
    ]
    for i in range(rows):
        alive = 600 <= i < rows - 300
        model = _used(i, rows, rng) - 450 if alive else 0
        other = 6000 + (3000 if i == rows // 3 else 0)
        tail = f"{2000 + model // 10} MiB, 64000 MiB, 0 MiB, " + (
            f"{500 + model // 10} MiB, {model} MiB, 3" if alive else "[N/A], [N/A], 0"
        )
        for index, used in ((0, 450 + model), (1, other)):
            lines.append(
                f"{_stamp(i)}, {used} MiB, 24564 MiB, 5 %, {index}, RTX 4090, GPU-{index}, 0 MiB, {tail}\n"
            )
    path.write_text("".join(lines))
    return path


EXACT = ("peak_mib", "peak_t", "falls_back", "rising")
LEVELS = ("baseline_mib", "plateau_mib", "after_mib")  # medians: of the points kept, within the noise


def same_readings(kept: dict, full: dict) -> None:
    assert {k: kept[k] for k in EXACT} == {k: full[k] for k in EXACT}
    for key in LEVELS:
        assert (kept[key] is None) == (full[key] is None)
        assert kept[key] == pytest.approx(full[key], abs=4), key


def test_a_long_recording_keeps_its_spike_baseline_and_counts_in_bounded_points(tmp_path: Path) -> None:
    rows = 60_000
    path = gpu_recording(tmp_path / "long.csv", rows)
    whole, summary = read_nvsmi_csv(path), read_nvsmi_csv(path, keep=4000)
    assert not whole.summarised and summary.summarised
    assert held(summary) <= 4000 < held(whole) == rows
    assert summary.rows == whole.rows == rows and summary.fold.ticks == rows
    (series,) = summary.gpus.values()
    (every,) = whole.gpus.values()
    assert series.read() == rows and max(series.used) == SPIKE * MIB  # the one spike sample survives
    assert min(series.used) == min(every.used) and series.times[-1] == every.times[-1]
    assert len(series.util) == len(series.times) == len(series.reserved) == len(series.ticks)

    full, kept = analyse(whole), analyse(summary)
    same_readings(kept, full)
    assert kept["peak_mib"] == SPIKE and kept["baseline_mib"] == pytest.approx(450, abs=2)
    assert kept["leftover_mib"] == pytest.approx(full["leftover_mib"], abs=2)
    assert len(kept["request_peaks_mib"]) == len(full["request_peaks_mib"]) >= 40
    assert kept["samples"] == full["samples"] == rows and kept["rows"] == rows
    assert kept["gpus"][0]["samples"] == rows
    assert full["summarised"] is None and kept["summarised"]["rows_read"] == rows
    assert kept["summarised"]["timestamps_kept"] <= 4000
    note = next(n for n in kept["notes"] if "summarised" in n)
    assert f"{rows:,} rows read" in note and "lowest and highest" in note


def test_a_summarised_process_recording_keeps_its_launch_exit_and_the_others_peak(tmp_path: Path) -> None:
    rows = 30_000
    path = process_recording(tmp_path / "pid.csv", rows)
    whole, summary = read_nvsmi_csv(path), read_nvsmi_csv(path, keep=3000)
    assert summary.summarised and held(summary) <= 3000 and summary.rows == 2 * rows
    # the process appears and goes at the very rows it did
    assert recorded_process(summary.host) == recorded_process(whole.host)
    full, kept = analyse(whole), analyse(summary)
    assert kept["others_gpu_peak_mib"] == full["others_gpu_peak_mib"] == 9450  # GPU 1's swell, one tick
    for key in ("process_tree_gpu", "process_tree_rss"):
        same_readings(kept[key], full[key])
        assert kept[key]["samples"] == full[key]["samples"]
    assert any("the recorded process ended" in n for n in kept["notes"])
    # a kept tick is kept whole: both cards and the host, as read
    ticks = list(iter_samples(summary))
    assert len(ticks) == summary.ticks_kept
    assert all(len(s.gpus) == 2 and s.host is not None for s in ticks)
    assert [s.t for s in ticks] == sorted(s.t for s in ticks)


def test_time_that_runs_back_is_counted_as_read() -> None:
    text = "timestamp, memory.used [MiB]\n" + "".join(
        f"{t}, {100 + t % 7} MiB\n" for t in [*range(5000), *range(100, 5000)]
    )
    summary = read_nvsmi_csv(text, keep=500)
    assert summary.summarised and summary.rows == 9900
    (series,) = summary.gpus.values()
    assert series.backwards == 1 and series.read() == 9900
