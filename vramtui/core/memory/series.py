"""Which curve a run's readings are taken from, the same for the memory pane, the wizard and
`vramtui replay`: the GPU whose memory moved most, else the model's process tree (host RSS), else
the host's RAM. One function, so the three never read different series for the same run."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from vramtui.core.memory.readings import Readings, compute_readings

# What each series measures, in the words every reader of a peak shows beside it (the wizard's table,
# the memory pane's readings, `attach`, `replay`): a GPU's figure is the whole card's, the host's the
# whole machine's, the process tree's only the model's own resident memory.
SERIES_NAMES = {"process": "process tree RSS (host)", "host": "host RAM used"}


def series_name(key: str) -> str:
    """'process' -> 'process tree RSS (host)'; 'gpu:0' -> 'GPU0 memory.used'; 'gpu:0:mig1' -> 'GPU0 MIG1 ...'."""
    if key in SERIES_NAMES:
        return SERIES_NAMES[key]
    if key.startswith("gpu:"):
        index, _, mig = key[4:].partition(":mig")
        return f"GPU{index}" + (f" MIG{mig}" if mig else "") + " memory.used"
    return key


def moved(values: Iterable[float | None]) -> float:
    """How far a series moved (max - min); -1 for one with no figure."""
    known = [v for v in values if v is not None]
    return max(known) - min(known) if known else -1.0


def primary_key(columns: Mapping[str, Sequence[float | None]]) -> str | None:
    """`columns`: series key ("gpu:0", "process", "host") -> values. GPUs first, by how far they moved."""
    gpus = [(moved(values), key) for key, values in columns.items() if key.startswith("gpu:")]
    gpus = [(m, key) for m, key in gpus if m >= 0]
    if gpus:
        return max(gpus, key=lambda item: (item[0], -len(item[1])))[1]
    for key in ("process", "host"):
        if moved(columns.get(key, ())) >= 0:
            return key
    return None


def sample_columns(samples: Iterable[Any]) -> dict[str, tuple[list[float], list[float | None]]]:
    """Times and values per series key from Samples (what the pane's state and the launcher hold)."""
    columns: dict[str, tuple[list[float], list[float | None]]] = {}

    def add(key: str, t: float, value: float | None) -> None:
        if value is not None:
            times, values = columns.setdefault(key, ([], []))
            times.append(t)
            values.append(float(value))

    for sample in samples:
        for gpu in sample.gpus:
            key = f"gpu:{gpu.index}" if gpu.mig_index is None else f"gpu:{gpu.index}:mig{gpu.mig_index}"
            add(key, sample.t, gpu.used_bytes)
        host = sample.host
        if host is not None:
            add("host", sample.t, host.ram_used)
            add("process", sample.t, host.tree_rss)
    return columns


def run_readings(samples: Sequence[Any], events: Sequence[Any] = ()) -> Readings | None:
    """The readings of one run from its samples: the wizard's peak and plateau per step."""
    return run_series(samples, events)[1]


def run_series(samples: Sequence[Any], events: Sequence[Any] = ()) -> tuple[str | None, Readings | None]:
    """The series key a run's readings are taken from (`series_name` says it in words) and its readings."""
    if not samples:
        return None, None
    columns = sample_columns(samples)
    key = primary_key({k: v for k, (_t, v) in columns.items()})
    if key is None:
        return None, None
    times, values = columns[key]
    host = samples[-1].host
    running = None if host is None else host.root_alive
    return key, compute_readings(times, values, events, running=running, on_host=not key.startswith("gpu:"))


def recorded_process(host: Any) -> tuple[list[Any], bool | None]:
    """A `record --pid` recording's process, from its tree column (host.times, host.tree_rss): launch when
    it appears, exit when it is gone, and whether it still ran at the last row (None: no process column).
    `replay` and the app's `--replay` read the same readings from it."""
    from vramtui.core.memory.readings import Event

    alive = [rss is not None for rss in host.tree_rss]
    if not any(alive):
        return [], None
    events = []
    first = alive.index(True)
    if first > 0:
        events.append(Event(host.times[first], "launch", "process appears"))
    gone = next((i for i in range(first, len(alive)) if not alive[i]), None)
    if gone is not None:
        events.append(Event(host.times[gone], "exit", "process gone"))
    return events, alive[-1]
