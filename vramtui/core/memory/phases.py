"""The phases of one memory curve: idle before launch, loading, serving, and after the exit.

Events (launch, weights_loaded, ready, request_start, request_end, exit) pin the phases when the
launcher or the log supplied them. Without them (a bare nvidia-smi CSV) the same phases are found
from the curve itself: the starting level, the settled levels after it, a final drop.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import median
from typing import Protocol

from vramtui.core.units import MIB


class EventLike(Protocol):
    @property
    def t(self) -> float: ...
    @property
    def kind(self) -> str: ...


@dataclass(frozen=True, slots=True)
class Curve:
    """Samples in time order (bytes), with the two scales every reading is judged on."""

    ts: list[float]
    vs: list[float]
    noise: float  # the smallest change that counts
    settle: int  # how many samples a level must hold (about two seconds) to count as settled

    @property
    def n(self) -> int:
        return len(self.vs)

    def index_at(self, t: float) -> int:
        """The first sample at or after t."""
        return bisect.bisect_left(self.ts, t)


def make_curve(
    times: Sequence[float], values_bytes: Sequence[float | None], noise_bytes: float | None
) -> Curve | None:
    """The finite samples in time order; None when there are none. Default noise: 2% of the curve's
    range, at least 32 MiB."""
    points = sorted(
        (t, float(v)) for t, v in zip(times, values_bytes, strict=True) if v is not None and math.isfinite(v)
    )
    if not points:
        return None
    ts = [p[0] for p in points]
    vs = [p[1] for p in points]
    noise = noise_bytes if noise_bytes is not None else max(32 * MIB, 0.02 * (max(vs) - min(vs)))
    step = (ts[-1] - ts[0]) / (len(ts) - 1) if len(ts) > 1 else 1.0
    settle = max(3, int(2.0 / step) if step > 0 else 3)
    return Curve(ts, vs, noise, settle)


def first_time(events: Sequence[EventLike], *kinds: str) -> float | None:
    times = [e.t for e in events if e.kind in kinds]
    return min(times) if times else None


@dataclass(slots=True)
class Phases:
    """Where each phase starts, as sample indices into the curve."""

    baseline: float | None  # bytes
    rise_i: int  # first sample after the idle start (launch)
    plateau: float | None = None  # bytes
    load_end: int = 0  # first sample of the plateau
    exit_i: int = 0  # first sample after the exit (n: no exit seen)
    exit_seen: bool = False


# -- baseline -------------------------------------------------------------------------------------


def find_baseline(curve: Curve, launch_t: float | None) -> tuple[float | None, int]:
    """The idle level before launch, and the index where the launch (or the rise) starts."""
    vs = curve.vs
    if launch_t is not None:
        rise_i = curve.index_at(launch_t)
        return (median(vs[:rise_i]) if rise_i else None), rise_i
    run = 1
    while run < curve.n and vs[run] <= vs[0] + curve.noise:
        run += 1
    return median(vs[:run]), run


# -- plateau --------------------------------------------------------------------------------------


def plateau_from_events(
    curve: Curve, events: Sequence[EventLike], stop: int
) -> tuple[float | None, int] | None:
    """The level between "loaded" (ready, else weights_loaded) and the first request; None when no
    event says when loading ended."""
    loaded_t = first_time(events, "ready")
    if loaded_t is None:
        loaded_t = first_time(events, "weights_loaded")
    if loaded_t is None:
        return None
    load_end = curve.index_at(loaded_t)
    starts = [e.t for e in events if e.kind == "request_start" and e.t > loaded_t]
    end = min(curve.index_at(min(starts)), stop) if starts else stop
    window = curve.vs[load_end:end] or curve.vs[max(load_end - 1, 0) : load_end + 1]
    return (median(window) if window else None), load_end


@dataclass(frozen=True, slots=True)
class Level:
    """A settled stretch of the curve: at least `settle` samples within noise of each other."""

    start: int
    stop: int
    value: float


def settled_levels(curve: Curve, start: int, stop: int) -> list[Level]:
    """The curve's settled stretches in [start, stop), in order, each as long as it holds."""
    vs, levels, i = curve.vs, [], start
    while i + curve.settle <= stop:
        window = vs[i : i + curve.settle]
        low, high = min(window), max(window)
        if high - low > curve.noise:
            i += 1
            continue
        j = i + curve.settle
        while j < stop and max(high, vs[j]) - min(low, vs[j]) <= curve.noise:
            low, high = min(low, vs[j]), max(high, vs[j])
            j += 1
        levels.append(Level(i, j, median(vs[i:j])))
        i = j
    return levels


# After a request has been seen, a step up is still loading only if it then holds this many settle
# lengths (vLLM allocates its KV cache after a profiling run; a request's peak is short).
LATE_LOAD_HOLD = 10


def plateau_from_curve(curve: Curve, baseline: float, rise_i: int, stop: int) -> tuple[float, int]:
    """The level right after loading: the last settled level the curve stepped up to (no overshoot
    on the way) and never fell below again. Loading climbs; a request overshoots and leaves a floor
    below its peak, however much higher than the plateau that floor is."""
    levels = settled_levels(curve, rise_i, stop)
    chosen = _loaded_level(curve, levels, baseline, rise_i)
    if chosen is not None:
        return chosen.value, chosen.start
    # Nothing settled above the start (a short or restless curve): the level it spends most time at.
    plateau = _densest_level(curve.vs[rise_i:stop], curve.noise)
    load_end = rise_i
    while load_end < stop and abs(curve.vs[load_end] - plateau) > curve.noise:
        load_end += 1
    return plateau, load_end


def _loaded_level(curve: Curve, levels: list[Level], baseline: float, rise_i: int) -> Level | None:
    vs, noise = curve.vs, curve.noise
    chosen: Level | None = None
    before, before_end, served = baseline, rise_i, False
    for k, level in enumerate(levels):
        between = vs[before_end : level.start]
        step_up = level.value > before + noise and not (between and max(between) > level.value + noise)
        # A lower level later that is not the idle level after the exit: this one was a request's peak.
        fell = any(baseline + noise < later.value < level.value - noise for later in levels[k + 1 :])
        # A later step replaces an earlier plateau only if it holds about as long (a short one just
        # before the exit is a request's peak).
        hold = LATE_LOAD_HOLD * curve.settle
        need = hold if served else min(hold, chosen.stop - chosen.start) if chosen else 0
        long_enough = level.stop - level.start >= need
        if step_up and not fell and long_enough:
            chosen = level
        if (step_up and fell) or baseline + noise < level.value < before - noise:
            served = True
        before, before_end = level.value, level.stop
    return chosen


def _densest_level(values: list[float], width: float) -> float:
    """The median of the largest group of values lying within `width` of each other."""
    ordered = sorted(values)
    best_lo, best_count, lo = 0, 0, 0
    for hi, value in enumerate(ordered):
        while value - ordered[lo] > width:
            lo += 1
        if hi - lo + 1 > best_count:
            best_count, best_lo = hi - lo + 1, lo
    return median(ordered[best_lo : best_lo + best_count])


# -- exit -----------------------------------------------------------------------------------------


def exit_from_curve(curve: Curve, phases: Phases) -> int:
    """No exit event and no word on the process: the last drop back toward the baseline, if any."""
    plateau, baseline = phases.plateau, phases.baseline
    if plateau is None or baseline is None or plateau - baseline <= curve.noise:
        return curve.n
    middle = (plateau + baseline) / 2
    last_high = max((i for i in range(phases.load_end, curve.n) if curve.vs[i] > middle), default=None)
    if last_high is not None and last_high + 1 < curve.n:
        return last_high + 1
    return curve.n


# -- a server already up at the first row ---------------------------------------------------------


def loaded_from_start(curve: Curve) -> Level | None:
    """The level a recording of a server already up starts at (`record --source` on a running box),
    or None. Told from an idle card by its shape: what rises above the starting level is smaller
    than that level, and falls back to it (requests on a loaded model), where a load from idle rises
    by more than the idle level and holds."""
    noise, vs = curve.noise, curve.vs
    # The first settled level nothing before it is below (a recording may start inside a request);
    # one with lower samples before it was climbed to.
    start = next(
        (lv for lv in settled_levels(curve, 0, curve.n) if min(vs[: lv.start + 1]) >= lv.value - noise), None
    )
    if start is None:
        return None
    rises = [i for i in range(start.stop, curve.n) if vs[i] > start.value + noise]
    if not rises or max(vs) - start.value >= start.value:
        return None  # flat (an idle card looks the same), or a rise bigger than where it started
    if _longest_run(rises) >= max(LATE_LOAD_HOLD, curve.n // 4):
        # a rise held for a quarter of the recording is a load, not a request: host RAM starts high
        # with everything else on the machine (QA 17 F8: a 45 MiB load on 878 MiB read as "loaded")
        return None
    back = any(abs(v - start.value) <= noise for v in vs[rises[0] :])
    return start if back else None


def _longest_run(indices: list[int]) -> int:
    """The most consecutive indices in an ascending list."""
    longest = run = 0
    for i, index in enumerate(indices):
        run = run + 1 if i and index == indices[i - 1] + 1 else 1
        longest = max(longest, run)
    return longest


def _final_drop(curve: Curve, level: float) -> int:
    """Where the curve falls below a loaded level for good (the server's exit); n: it never does."""
    i = curve.n
    while i > 0 and curve.vs[i - 1] < level - curve.noise:
        i -= 1
    return i


def find_phases(curve: Curve, events: Sequence[EventLike], running: bool | None) -> tuple[Phases, list[str]]:
    """Baseline, plateau and exit of one curve. Memory held after the exit is only judged when the
    exit is known: an exit event, or (without any event, and no word that the process still runs)
    the curve's own final drop."""
    notes: list[str] = []
    launch_t = first_time(events, "launch")
    up = None if events else loaded_from_start(curve)
    if up is not None:
        # No launch in the recording: no idle level before it, and a fall back is no exit.
        notes.append("the recording starts with the model loaded: no baseline before launch")
        phases = Phases(None, 0, plateau=up.value, load_end=up.start, exit_i=curve.n)
        if running is not True:
            phases.exit_i = _final_drop(curve, up.value)
            phases.exit_seen = phases.exit_i < curve.n
        return phases, notes
    baseline, rise_i = find_baseline(curve, launch_t)
    if launch_t is not None and baseline is None:
        notes.append("no sample before launch: baseline unknown")
    exit_t = max((e.t for e in events if e.kind == "exit"), default=None)
    phases = Phases(baseline, rise_i, exit_i=curve.n)
    if exit_t is not None:
        phases.exit_i, phases.exit_seen = curve.index_at(exit_t), True
    pinned = plateau_from_events(curve, events, phases.exit_i)
    if pinned is not None:
        phases.plateau, phases.load_end = pinned
    elif rise_i < phases.exit_i:
        start = baseline if baseline is not None else curve.vs[rise_i]
        phases.plateau, phases.load_end = plateau_from_curve(curve, start, rise_i, phases.exit_i)
    else:
        phases.load_end = curve.n
        if launch_t is None:
            notes.append("no load step seen: the recording starts with the model loaded, or it never loaded")
            if running is not None:
                # a process was recorded (--pid) and nothing launched in the recording: its flat level is
                # the running server's own, not an idle one before a launch
                phases.plateau, phases.baseline = phases.baseline, None
    if exit_t is None and running is not True and (running is False or not events):
        phases.exit_i = exit_from_curve(curve, phases)
        phases.exit_seen = phases.exit_i < curve.n
    ready_t = first_time(events, "ready")
    if launch_t is None and ready_t is not None and ready_t <= curve.ts[0]:
        # up before the first sample (a server attached to): its first level is its own, not an idle
        # card's (QA 36 F10d: attach said "baseline 419 MiB", the plateau, where replay says n/a)
        notes.append("the server was up before the first sample: no baseline before launch")
        phases.baseline = None
    return phases, notes
