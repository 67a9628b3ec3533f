"""The readings users take off a memory curve.

- baseline: the idle level before the model server starts (another process, the desktop ...);
- plateau: the resident level once weights (and the KV cache) are in, before requests;
- each request's peak, and whether memory falls back to the plateau afterwards;
- a floor that climbs request after request (cache not released, or a leak);
- memory still held after the server exited (a leftover process still holding the card);
- the 80% safety line and the budget, against the peak.

Events (launch, weights_loaded, ready, request_start, request_end, exit) pin the phases when the
launcher or the log supplied them; without them (a replayed nvidia-smi CSV) the phases are found
from the curve itself: a rise from the starting level, the level it spends most time at, excursions
above a running floor, a final drop.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from statistics import median

MIB = 1024**2

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


def _first(events: Sequence[Event], *kinds: str) -> float | None:
    times = [e.t for e in events if e.kind in kinds]
    return min(times) if times else None


def _densest_level(values: list[float], width: float) -> float:
    """The median of the largest group of values lying within `width` of each other: the level the
    curve spends most time at."""
    ordered = sorted(values)
    best_lo, best_count, lo = 0, 0, 0
    for hi, value in enumerate(ordered):
        while value - ordered[lo] > width:
            lo += 1
        if hi - lo + 1 > best_count:
            best_count, best_lo = hi - lo + 1, lo
    return median(ordered[best_lo : best_lo + best_count])


def _first_settled(values: list[float], start: int, stop: int, width: int, noise: float) -> int | None:
    """The first index in [start, stop) where `width` samples stay within `noise` of each other."""
    for i in range(start, max(start, stop - width + 1)):
        window = values[i : i + width]
        if max(window) - min(window) <= noise:
            return i
    return None


def compute_readings(
    times: Sequence[float],
    values_bytes: Sequence[float | None],
    events: Sequence[Event] = (),
    total_bytes: int | None = None,
    budget_bytes: int | None = None,
    safety: float = 0.8,
    noise_bytes: float | None = None,
) -> Readings:
    """The readings of one curve (bytes over time). None values are gaps (N/A) and are left out.

    `noise_bytes`: the smallest change that counts (default: 2% of the curve's range, at least 32 MiB).
    """
    points = [
        (t, float(v)) for t, v in zip(times, values_bytes, strict=True) if v is not None and math.isfinite(v)
    ]
    points.sort(key=lambda p: p[0])
    readings = Readings(samples=len(points))
    if total_bytes:
        readings.total_mib = total_bytes / MIB
        readings.safety_line_mib = safety_line_bytes(total_bytes, safety) / MIB
    if budget_bytes is not None:
        readings.budget_mib = budget_bytes / MIB
    if not points:
        readings.notes.append("no samples")
        return readings
    ts = [p[0] for p in points]
    vs = [p[1] for p in points]
    n = len(vs)
    readings.duration_s = float(ts[-1] - ts[0])
    peak = max(vs)
    peak_i = vs.index(peak)
    readings.peak_mib, readings.peak_t = peak / MIB, ts[peak_i]
    low = min(vs)
    noise = noise_bytes if noise_bytes is not None else max(32 * MIB, 0.02 * (peak - low))
    readings.noise_mib = noise / MIB
    if total_bytes:
        readings.over_safety_line = peak > safety_line_bytes(total_bytes, safety)
    if budget_bytes is not None:
        readings.over_budget = peak > budget_bytes

    def index_at(t: float) -> int:
        """First sample at or after t."""
        lo, hi = 0, n
        while lo < hi:
            mid = (lo + hi) // 2
            if ts[mid] < t:
                lo = mid + 1
            else:
                hi = mid
        return lo

    # Samples in about two seconds: how long a level must hold to count as settled.
    step = (ts[-1] - ts[0]) / (n - 1) if n > 1 else 1.0
    settle = max(3, int(2.0 / step) if step > 0 else 3)

    # ---- baseline: before launch ----
    launch_t = _first(events, "launch")
    if launch_t is not None:
        before = vs[: index_at(launch_t)]
        baseline = median(before) if before else None
        if baseline is None:
            readings.notes.append("no sample before launch: baseline unknown")
        rise_i = index_at(launch_t)
    else:
        run = 1
        while run < n and vs[run] <= vs[0] + noise:
            run += 1
        baseline = median(vs[:run])
        rise_i = run
    readings.baseline_mib = None if baseline is None else baseline / MIB

    # ---- exit ----
    exit_t = max((e.t for e in events if e.kind == "exit"), default=None)
    exit_i = index_at(exit_t) if exit_t is not None else n

    # ---- plateau: after weights load, before requests ----
    loaded_t = _first(events, "ready", "weights_loaded")
    starts = sorted(e.t for e in events if e.kind == "request_start")
    ends = sorted(e.t for e in events if e.kind == "request_end")
    plateau: float | None
    if loaded_t is not None:
        load_end = index_at(loaded_t)
        stop = index_at(starts[0]) if starts and starts[0] > loaded_t else exit_i
        window = vs[load_end:stop] or vs[max(load_end - 1, 0) : load_end + 1]
        plateau = median(window) if window else None
    elif rise_i < exit_i:
        # The level the server idles at most; unless an earlier settled level was left by an
        # overshoot above it (a request, then memory the allocator kept): that earlier one is resident.
        plateau = _densest_level(vs[rise_i:exit_i], noise)
        load_end = rise_i
        while load_end < exit_i and abs(vs[load_end] - plateau) > noise:
            load_end += 1
        first = _first_settled(vs, rise_i, load_end, settle, noise)
        if first is not None and vs[first] < plateau - noise and max(vs[first:load_end]) > plateau + noise:
            plateau = median(vs[first : first + settle])
            load_end = first
    else:
        plateau, load_end = None, n
        if launch_t is None:
            readings.notes.append(
                "no load step seen: the recording starts with the model loaded, or it never loaded"
            )
    readings.plateau_mib = None if plateau is None else plateau / MIB

    # ---- exit without an event: the last drop back toward the baseline ----
    if exit_t is None and plateau is not None and baseline is not None and plateau - baseline > noise:
        middle = (plateau + baseline) / 2
        last_high = max((i for i in range(load_end, n) if vs[i] > middle), default=None)
        if last_high is not None and last_high + 1 < n:
            exit_i = last_high + 1
    if exit_i < n and baseline is not None:
        after_exit = median(vs[exit_i:])
        readings.leftover_mib = max(0.0, after_exit - baseline) / MIB

    # ---- requests ----
    floor0 = plateau if plateau is not None else vs[0]
    peaks: list[float] = []
    floors: list[float] = [floor0]
    still_high = False
    if starts:
        for k, start in enumerate(starts):
            end = next((e for e in ends if e >= start), None)
            next_start = starts[k + 1] if k + 1 < len(starts) else (ts[exit_i - 1] if exit_i > 0 else ts[-1])
            a = index_at(start)
            b = index_at(end) if end is not None else index_at(next_start)
            during = vs[a : b + 1] if b < n else vs[a:]
            if during:
                peaks.append(max(during))
            gap = vs[min(b + 1, n) : index_at(next_start) if k + 1 < len(starts) else exit_i]
            if gap:
                floors.append(min(gap))
            elif k + 1 == len(starts):
                still_high = True  # the last request ran until the exit or the end of the recording
    elif plateau is not None or launch_t is None:
        # Excursions above a running floor; one ends when it falls back to its floor, or when it has
        # stayed below half its height for a couple of seconds (a partial fall leaves a higher floor:
        # the next floor shows it; a dip inside a noisy request does not end it).
        first = load_end if plateau is not None else 0
        running_min = floor0
        high = False
        top = base = 0.0
        below, below_min = 0, math.inf
        for i in range(first, exit_i):
            v = vs[i]
            if not high:
                if v < running_min:
                    running_min = v
                if v > running_min + noise:
                    high, top, base = True, v, running_min
                    below, below_min = 0, math.inf
            else:
                top = max(top, v)
                ended_at: float | None = None
                if v <= base + noise:
                    ended_at = v
                elif v < top - max(noise, 0.5 * (top - base)):
                    below, below_min = below + 1, min(below_min, v)
                    if below >= settle:
                        ended_at = below_min
                else:
                    below, below_min = 0, math.inf
                if ended_at is not None:
                    peaks.append(top)
                    floors.append(ended_at)
                    running_min = ended_at
                    high = False
            if not high and peaks:
                floors[-1] = min(floors[-1], v)  # the floor after the latest request
        if high:
            peaks.append(top)
            still_high = True
    readings.request_peaks_mib = [p / MIB for p in peaks]
    readings.floors_mib = [f / MIB for f in floors]
    last_level = vs[exit_i - 1] if exit_i > 0 else vs[-1]
    cut_off = still_high and bool(peaks) and last_level > peaks[-1] - noise
    if peaks and not still_high:
        readings.after_mib = floors[-1] / MIB
        readings.falls_back = floors[-1] <= floor0 + noise
    elif peaks and not cut_off:
        # No end seen for the last request, but the curve came down from it: where it stands last.
        readings.after_mib = last_level / MIB
        readings.falls_back = last_level <= floor0 + noise
    elif peaks and len(floors) > 1:
        # The last request was cut off by the exit (or the recording's end) at its peak: the level
        # after it never showed, so the last settled floor speaks for the requests before it.
        readings.after_mib = floors[-1] / MIB
        readings.falls_back = floors[-1] <= floor0 + noise
        readings.notes.append(
            f"the last request ran until the {'exit' if exit_i < n else 'end of the recording'}: "
            f"falls back judged from the {len(peaks) - 1} request(s) before it"
        )
    elif peaks:
        readings.notes.append(
            f"the only request ran until the {'exit' if exit_i < n else 'end of the recording'}: "
            "whether memory falls back after it is not known"
        )
    elif load_end < exit_i:
        readings.after_mib = median(vs[max(load_end, exit_i - 5) : exit_i]) / MIB

    # ---- a floor that climbs request after request ----
    steps = [b - a for a, b in itertools.pairwise(floors)]
    if len(steps) >= 2 and floors[-1] - floors[0] > noise:
        ups = sum(1 for d in steps if d > noise / 4)
        readings.rising = all(d > -noise / 2 for d in steps) and ups >= max(2, math.ceil(0.6 * len(steps)))
    if readings.rising:
        readings.notes.append("the floor climbs request after request: cache not released, or a leak")
    if readings.leftover:
        readings.notes.append("memory still held after the process exited: a leftover process holds the card")
    return readings
