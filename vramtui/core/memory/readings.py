"""The readings users take off a memory curve.

- baseline: the idle level before the model server starts (another process, the desktop ...);
- plateau: the resident level once weights (and the KV cache) are in, before requests;
- each request's peak, and whether memory falls back to the plateau afterwards;
- a floor that climbs request after request (cache not released, or a leak);
- memory still held after the server exited (a leftover process still holding the card);
- the 80% safety line and the budget, against the peak.

The phases are found in `phases` (from events when the launcher or the log supplied them, else from
the curve itself), what requests do in `requests`; this module puts the readings together, and is
the one place the memory pane, the wizard and `vramtui replay` take them from.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from statistics import median

from vramtui.core.memory.phases import MIB, Curve, EventLike, find_phases, first_time, make_curve
from vramtui.core.memory.requests import (
    Requests,
    floor_rising,
    judge_fall_back,
    requests_from_curve,
    requests_from_events,
)

EVENT_KINDS = ("launch", "weights_loaded", "ready", "request_start", "request_end", "exit")


@dataclass(frozen=True, slots=True)
class Event:
    t: float
    kind: str  # one of EVENT_KINDS
    label: str = ""


@dataclass(slots=True)
class Readings:
    baseline_mib: float | None = None
    plateau_mib: float | None = None
    peak_mib: float | None = None
    after_mib: float | None = None  # the level after the last request (end of serving without any)
    falls_back: bool | None = None  # None: no request seen
    rising: bool = False
    leftover_mib: float | None = None  # held after exit above the baseline; None: no exit seen
    # where the leftover was read: "" its own series; "host RAM" where an exited process's RSS ends with
    # it and the host's RAM (every process's) says it
    leftover_read_from: str = ""
    request_peaks_mib: list[float] = field(default_factory=list)
    floors_mib: list[float] = field(default_factory=list)  # plateau, then the floor after each request
    peak_t: float | None = None
    noise_mib: float | None = None
    total_mib: float | None = None
    safety_line_mib: float | None = None
    over_safety_line: bool | None = None
    budget_mib: float | None = None
    over_budget: bool | None = None
    samples: int = 0
    duration_s: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def leftover(self) -> bool:
        return (
            self.leftover_mib is not None
            and self.noise_mib is not None
            and self.leftover_mib > self.noise_mib
        )

    def to_dict(self) -> dict[str, object]:
        data = asdict(self)
        for key, value in list(data.items()):
            if isinstance(value, float):
                data[key] = round(value, 1) if key != "peak_t" else value
            elif isinstance(value, list) and value and isinstance(value[0], float):
                data[key] = [round(v, 1) for v in value]
        data["leftover"] = self.leftover
        return data


def safety_line_bytes(total_bytes: int, fraction: float = 0.8) -> int:
    """The line a healthy setup stays under (allocator fragmentation and spikes live above it)."""
    return int(total_bytes * fraction)


def budget_check(
    peak_bytes: int, total_bytes: int | None, budget_bytes: int | None = None, fraction: float = 0.8
) -> dict[str, object]:
    """Where a peak stands against the card, the safety line and the budget (bytes; None = unknown)."""
    line = safety_line_bytes(total_bytes, fraction) if total_bytes else None
    return {
        "peak_bytes": peak_bytes,
        "total_bytes": total_bytes,
        "safety_line_bytes": line,
        "over_safety_line": None if line is None else peak_bytes > line,
        "headroom_bytes": None if not total_bytes else total_bytes - peak_bytes,
        "budget_bytes": budget_bytes,
        "over_budget": None if budget_bytes is None else peak_bytes > budget_bytes,
    }


def events_of_last_run(
    times: Sequence[float], values: Sequence[float | None], events: Sequence[EventLike]
) -> tuple[list[float], list[float | None], list[EventLike]]:
    """One run's part of a curve that spans several (the wizard relaunches, `r` relaunches): the
    events from the last launch on, and the samples from the exit of the run before it. The events of
    an earlier run read on a later one pin its phases at the wrong times."""
    launches = [e.t for e in events if e.kind == "launch"]
    if len(launches) <= 1 and not any(e.kind == "exit" and launches and e.t < launches[0] for e in events):
        return list(times), list(values), list(events)
    last = max(launches)
    since = max((e.t for e in events if e.kind == "exit" and e.t < last), default=None)
    kept = [(t, v) for t, v in zip(times, values, strict=True) if since is None or t >= since]
    return [t for t, _ in kept], [v for _, v in kept], [e for e in events if e.t >= last]


def host_noise(values_bytes: Sequence[float | None]) -> float | None:
    """The smallest change that counts on a host curve. A card's 32 MiB floor (its allocator's steps) hid
    a small process's whole request (QA 8: +20 MiB on a 63 MiB llama-server); RSS moves by pages, so 5% of
    the curve's peak there, at least 4 MiB and 2% of its range, at most the card's 32 MiB."""
    seen = [float(v) for v in values_bytes if v is not None and math.isfinite(v)]
    if not seen:
        return None
    return max(4 * MIB, min(32 * MIB, 0.05 * max(seen)), 0.02 * (max(seen) - min(seen)))


def compute_readings(
    times: Sequence[float],
    values_bytes: Sequence[float | None],
    events: Sequence[EventLike] = (),
    total_bytes: int | None = None,
    budget_bytes: int | None = None,
    safety: float = 0.8,
    noise_bytes: float | None = None,
    running: bool | None = None,
    on_host: bool = False,
) -> Readings:
    """The readings of one curve (bytes over time). None values are gaps (N/A) and are left out.

    `noise_bytes`: the smallest change that counts (default: 2% of the curve's range, at least 32 MiB; on
    the host, `host_noise`: a share of the curve's own size).
    `on_host`: the curve is host RAM (what is left after an exit is then no card's).
    `running`: whether the process is known to still run (True), to be gone (False), or unknown. Memory
    held after the exit is only read after an exit event, or a process known to be gone; a bare curve
    (no events, nothing known) may show its exit as a final drop.
    """
    times, values_bytes, events = events_of_last_run(times, values_bytes, events)
    readings = Readings()
    _limits(readings, total_bytes, budget_bytes, safety)
    if noise_bytes is None and on_host:
        noise_bytes = host_noise(values_bytes)
    curve = make_curve(times, values_bytes, noise_bytes)
    if curve is None:
        readings.notes.append("no samples")
        return readings
    _overall(readings, curve, total_bytes, budget_bytes, safety)
    phases, notes = find_phases(curve, events, running)
    if on_host and phases.plateau == 0:
        # a process tree that held nothing there: it was gone before its exit was recorded (QA 26 D11:
        # "plateau 0 B" beside the 103 MiB peak of a run that died as it loaded), no level to fall back to
        phases.plateau = None
    readings.notes += notes
    readings.baseline_mib = _mib(phases.baseline)
    readings.plateau_mib = _mib(phases.plateau)
    if phases.exit_seen and phases.exit_i < curve.n and phases.baseline is not None:
        readings.leftover_mib = max(0.0, median(curve.vs[phases.exit_i :]) - phases.baseline) / MIB
    floor0 = phases.plateau if phases.plateau is not None else curve.vs[0]
    if any(e.kind == "request_start" for e in events):
        found = requests_from_events(curve, events, phases)
    elif phases.plateau is not None or first_time(events, "launch") is None:
        found = requests_from_curve(curve, phases, floor0)
    else:
        found = Requests()
    readings.request_peaks_mib = [p / MIB for p in found.peaks]
    readings.floors_mib = [f / MIB for f in [floor0, *found.floors]]
    fall = judge_fall_back(curve, phases, found, floor0)
    readings.after_mib, readings.falls_back = _mib(fall.after), fall.falls_back
    if fall.note:
        readings.notes.append(fall.note)
    readings.rising = floor_rising(found.floors, curve.noise)
    if readings.rising:
        readings.notes.append("the floor climbs request after request: cache not released, or a leak")
    if readings.leftover:
        readings.notes.append(LEFTOVER_HOST if on_host else _LEFTOVER_CARD)
    return readings


_LEFTOVER_CARD = "memory still held after the process exited: a leftover process holds the card"
# host RAM is shared by every program: after an exit it may stay up for reasons that are not the model's
LEFTOVER_HOST = (
    "host RAM still in use above the baseline after the process exited: another program, or the files it "
    "read kept in memory; not necessarily a leftover of the model's"
)


def _mib(value: float | None) -> float | None:
    return None if value is None else value / MIB


def _limits(readings: Readings, total_bytes: int | None, budget_bytes: int | None, safety: float) -> None:
    if total_bytes:
        readings.total_mib = total_bytes / MIB
        readings.safety_line_mib = safety_line_bytes(total_bytes, safety) / MIB
    if budget_bytes is not None:
        readings.budget_mib = budget_bytes / MIB


def _overall(
    readings: Readings, curve: Curve, total_bytes: int | None, budget_bytes: int | None, safety: float
) -> None:
    """What the whole curve says, whatever its phases: samples, span, peak, noise, the lines."""
    peak = max(curve.vs)
    readings.samples, readings.duration_s = curve.n, float(curve.ts[-1] - curve.ts[0])
    readings.peak_mib, readings.peak_t = peak / MIB, curve.ts[curve.vs.index(peak)]
    readings.noise_mib = curve.noise / MIB
    if total_bytes:
        readings.over_safety_line = peak > safety_line_bytes(total_bytes, safety)
    if budget_bytes is not None:
        readings.over_budget = peak > budget_bytes
