"""`vramtui replay FILE`: the readings of a recorded nvidia-smi (or `vramtui record`) CSV."""

from __future__ import annotations

import argparse
import itertools
from statistics import median
from typing import Any

from vramtui.cli.common import print_json
from vramtui.core.errors import VramtuiError
from vramtui.core.units import MIB

HELP = (
    "read a recorded nvidia-smi CSV and print its readings: baseline, plateau, request peaks, "
    "whether memory falls back, a rising floor, memory left after exit"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "file",
        metavar="FILE",
        help="CSV from `nvidia-smi --query-gpu=... --format=csv -l 1` "
        "or `vramtui record` ('-' reads standard input)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def analyse(data: Any) -> dict[str, Any]:
    """Readings per GPU (and of the host curves); the series they speak for is chosen as the memory
    pane and the wizard choose it (core.memory.series.primary_key)."""
    from vramtui.core.memory.readings import compute_readings
    from vramtui.core.memory.series import moved, primary_key, recorded_process

    host = data.host
    # Recorded with --pid: when the process appeared and went, and whether it still ran at the last row.
    events, running = recorded_process(host)
    gpus = []
    for series in data.gpus.values():
        readings = compute_readings(
            series.times, series.used, events, total_bytes=_int(series.total), running=running
        )
        _count_read(data, readings, series.read())
        gpus.append((moved(series.used), series, readings))
    gpus.sort(key=lambda item: -item[0])
    columns: dict[str, Any] = {f"gpu:{s.index}": s.used for _m, s, _r in gpus}
    columns.update(process=host.tree_rss, host=host.ram_used)
    key = primary_key(columns)
    result: dict[str, Any] = {}
    if key is None:
        raise VramtuiError("no memory figures in this file (every memory field is N/A)")
    if key.startswith("gpu:"):
        _moved, chosen, primary = next(item for item in gpus if f"gpu:{item[1].index}" == key)
        result["series"] = f"{chosen.label} memory.used"
    else:
        values = host.tree_rss if key == "process" else host.ram_used
        primary = compute_readings(
            host.times, values, events, total_bytes=_int(host.ram_total), running=running, on_host=True
        )
        _count_read(data, primary, host.read("tree_rss" if key == "process" else "ram_used"))
        result["series"] = "process tree RSS (host)" if key == "process" else "host RAM used"
        if key == "process" and running is False:
            _left_on_host(primary, host, events)
    result.update(primary.to_dict())
    result["gpus"] = [
        {"index": s.index, "name": s.name, "uuid": s.uuid, "samples": len(s.times), **r.to_dict()}
        for _moved, s, r in gpus
    ]
    if any(v is not None for v in host.tree_rss):
        tree = compute_readings(
            host.times, host.tree_rss, events, total_bytes=_int(host.ram_total), running=running, on_host=True
        )
        _count_read(data, tree, host.read("tree_rss"))
        result["process_tree_rss"] = tree.to_dict()
    result.update(_process_on_gpus(data, events, running))
    result["notes"] = list(result.get("notes") or []) + _gaps(data)
    result["summarised"] = _summary(data, result["notes"])
    result["rows"] = data.rows
    result["skipped_rows"] = data.skipped
    # a damaged header's columns first: a series left out changes every reading (QA 17 F17)
    result["problems"] = [
        f"column {name!r} is not one vramtui reads: left out" for name in data.unread_columns
    ]
    result["problems"] += list(data.problems)
    result["unread_columns"] = list(data.unread_columns)
    return result


def _left_on_host(primary: Any, host: Any, events: list[Any]) -> None:
    """What an exited process left is not in its own curve (its RSS is N/A once it is gone): the host's
    RAM after the exit, against the host's before, says it (QA 33 V9: a stopped vLLM read nothing)."""
    from vramtui.core.memory.readings import LEFTOVER_HOST, compute_readings

    if primary.leftover_mib is not None or not any(v is not None for v in host.ram_used):
        return
    ram = compute_readings(
        host.times, host.ram_used, events, total_bytes=_int(host.ram_total), running=False, on_host=True
    )
    if ram.leftover_mib is None:
        return
    primary.leftover_mib, primary.noise_mib = ram.leftover_mib, ram.noise_mib
    primary.leftover_read_from = "host RAM"
    gone = max(e.t for e in events if e.kind == "exit")
    after = [v for t, v in zip(host.times, host.ram_used, strict=False) if t >= gone and v is not None]
    primary.notes.append(
        f"after the process exited, host RAM used was {_fmt(median(after) / MIB)} ({_fmt(ram.baseline_mib)} "
        "before it): read from the host's RAM, as the process's own RSS ends with it"
    )
    if ram.leftover:
        primary.notes.append(LEFTOVER_HOST)


def _count_read(data: Any, readings: Any, read: int) -> None:
    """A summarised recording's readings count the samples in the file, not those kept."""
    if data.summarised:
        readings.samples = read


def _summary(data: Any, notes: list[str]) -> dict[str, int] | None:
    """How a recording too long to hold was summarised (`core.memory.nvsmi_fold`), said in the notes
    too: nobody should take the kept points for every sample."""
    if not data.summarised:
        return None
    fold, kept = data.fold, data.ticks_kept
    notes.append(
        f"a long recording, summarised as it was read to stay in memory: {data.rows:,} rows read, {kept:,} "
        f"of their {fold.ticks:,} timestamps kept (of every {fold.width:,}, those with the first, last, "
        "lowest and highest figures); peaks, floors and levels are the file's, but requests closer "
        f"together than {fold.width:,} timestamps may read as one"
    )
    return {
        "rows_read": data.rows,
        "timestamps_read": fold.ticks,
        "timestamps_kept": kept,
        "timestamps_per_bucket": fold.width,
    }


def _process_on_gpus(data: Any, events: list[Any], running: bool | None) -> dict[str, Any]:
    """A `record --pid` recording's process on the GPUs (its tree's GPU bytes) apart from the rest of the
    cards' use, what other processes held beside it (QA 19 F10: replay showed the cards' totals alone)."""
    from vramtui.core.memory.readings import compute_readings

    host = data.host
    if not any(v for v in host.tree_gpu):
        return {}
    tree = compute_readings(host.times, host.tree_gpu, events, running=running)
    _count_read(data, tree, host.read("tree_gpu"))
    used_at: dict[float, float] = {}
    for series in data.gpus.values():
        for t, used in zip(series.times, series.used, strict=False):
            if used is not None:
                used_at[t] = used_at.get(t, 0.0) + used
    others = [
        used_at[t] - gpu
        for t, gpu in zip(host.times, host.tree_gpu, strict=False)
        if gpu is not None and t in used_at
    ]
    return {
        "process_tree_gpu": tree.to_dict(),
        "others_gpu_peak_mib": max(others) / MIB if others else None,
    }


def _gaps(data: Any) -> list[str]:
    """A GPU that stopped reporting before the recording ended (it fell off the bus, its driver failed:
    nvidia-smi then prints [GPU requires reset] or [Unknown Error]), and time that runs backwards (QA:
    both read without a word, and a "falls back" verdict from rows out of order)."""
    notes: list[str] = []
    all_times = [t for s in data.gpus.values() for t in s.times] + list(data.host.times)
    if not all_times:
        return notes
    start, end = min(all_times), max(all_times)
    for series in data.gpus.values():
        seen = [t for t, used in zip(series.times, series.used, strict=False) if used is not None]
        last = max(seen) if seen else start
        steps = sorted(b - a for a, b in itertools.pairwise(seen) if b > a)
        step = steps[len(steps) // 2] if steps else 1.0
        if end - last > max(5.0, 3 * step):
            notes.append(
                f"GPU {series.index} stopped reporting at {last - start:.0f} s of {end - start:.0f} s: it "
                "left the bus or its driver failed (nvidia-smi's [GPU requires reset] / [Unknown Error]); "
                "its readings end there"
            )
        back = series.backwards  # counted as read: a summary keeps only some rows
        if back:
            notes.append(
                f"GPU {series.index}: the time runs backwards {back} time(s) (rows out of order, or two "
                "recordings joined): readings over time are unreliable"
            )
    notes.extend(_process_end(data.host, start, end))
    return notes


def _process_end(host: Any, start: float, end: float) -> list[str]:
    """The recorded process tree that ended before the recording did (QA 6: `record --pid` went on past
    the server's exit, and the replay said nothing of it)."""
    last = max(
        (t for t, rss in zip(host.times, host.tree_rss, strict=False) if rss is not None), default=None
    )
    if last is None or end - last <= 2.0:
        return []
    # `last` once, not per row (it was: a 1 M-row recording of an ended process took hours)
    after = [rss for t, rss in zip(host.times, host.tree_rss, strict=False) if t > last]
    if not after or any(rss is not None for rss in after):
        return []
    return [
        f"the recorded process ended at {last - start:.0f} s of {end - start:.0f} s (its RSS is N/A "
        "after that): its readings stop there"
    ]


def _int(value: float | None) -> int | None:
    return None if value is None else int(value)


def _fmt(mib: float | None) -> str:
    if mib is None:
        return "n/a"
    return f"{mib / 1024:.2f} GiB" if abs(mib) >= 1024 else f"{mib:.0f} MiB"


def run(args: argparse.Namespace) -> int:
    from vramtui.cli.common import read_replay_csv

    data = read_replay_csv(args.file)  # the app's --replay refuses a file with the same line
    result = analyse(data)
    result = {"file": args.file, **result}
    if args.json:
        print_json(result)
        return 0
    lines = [
        f"{args.file}: {result['series']}, {result['samples']} samples over {result['duration_s']:.0f} s",
        f"  baseline (before launch)  {_fmt(result['baseline_mib'])}",
        f"  plateau (resident)        {_fmt(result['plateau_mib'])}",
        f"  peak                      {_fmt(result['peak_mib'])}",
    ]
    peaks = result["request_peaks_mib"]
    if peaks:
        shown = ", ".join(_fmt(p) for p in peaks[:8]) + (
            f" ... ({len(peaks)} in all)" if len(peaks) > 8 else ""
        )
        lines.append(f"  request peaks             {shown}")
        if result["falls_back"] is None:
            verdict = "unknown"
        elif result["falls_back"]:
            verdict = "yes"
        elif result["after_mib"] is not None and result["plateau_mib"] is not None:
            verdict = f"no: settles {_fmt(result['after_mib'] - result['plateau_mib'])} above the plateau"
        else:
            verdict = "no: memory stays up after requests"
        higher = "; it settles higher after each request" if result["rising"] else ""
        lines.append(f"  falls back after          {verdict} (after: {_fmt(result['after_mib'])}){higher}")
    else:
        lines.append("  request peaks             none seen")
    notes = list(result["notes"])
    leak = next((note for note in notes if "floor climbs" in note), "the floor climbs request after request")
    lines.append(f"  floor rising              {'YES: ' + leak if result['rising'] else 'no'}")
    if result["leftover_mib"] is not None:
        held = "yes" if result["leftover"] else "no"
        if result.get("leftover_read_from"):  # QA 37 F10: the host's RAM, every process's, not the model's
            said = f"{_fmt(result['leftover_mib'])} more {result['leftover_read_from']} used than before it"
            lines.append(f"  host RAM after exit       {held} ({said}; any process counts)")
        else:
            lines.append(
                f"  held after exit           {held} ({_fmt(result['leftover_mib'])} above baseline)"
            )
    if result["total_mib"]:
        over = " (peak is over it)" if result["over_safety_line"] else ""
        # a host series is measured against the host's RAM: say so (QA 7: a process's RSS beside "18.83 GiB
        # of 23.54 GiB" read as the process's own limit)
        of = " of host RAM" if not result["series"].startswith("GPU") else ""
        lines.append(
            f"  80% line{of:<18}{_fmt(result['safety_line_mib'])} of {_fmt(result['total_mib'])}{over}"
        )
    process = result.get("process_tree_gpu")
    if process:
        others = result["others_gpu_peak_mib"]
        beside = f"; other processes held up to {_fmt(others)} beside it" if others is not None else ""
        lines.append(
            f"  model's process on GPUs   peak {_fmt(process['peak_mib'])}, plateau {_fmt(process['plateau_mib'])}"
            f"{beside}"
        )
    for gpu in result["gpus"][1:]:
        name = f"GPU {gpu['index']} {gpu['name']}".rstrip()  # a CSV without a name column (QA 36: "GPU 1 :")
        lines.append(f"  {name}: peak {_fmt(gpu['peak_mib'])}, plateau {_fmt(gpu['plateau_mib'])}")
    for note in notes:
        if "floor climbs" not in note and "leftover process" not in note:
            lines.append(f"  note: {note}")
    unread = len(result["unread_columns"])
    lines.extend(f"  note: {problem}" for problem in result["problems"][:unread])
    if result["skipped_rows"]:
        lines.append(
            f"  {result['skipped_rows']} malformed row(s) skipped, first: {result['problems'][unread]}"
        )
    print("\n".join(lines))
    return 0
