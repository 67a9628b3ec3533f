"""What requests do to a memory curve: each request's peak, the floor after it, whether memory falls
back to the plateau, and whether the floor climbs request after request."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from statistics import median

from vramtui.core.memory.phases import Curve, EventLike, Phases


@dataclass(slots=True)
class Requests:
    peaks: list[float] = field(default_factory=list)  # bytes, one per request
    floors: list[float] = field(default_factory=list)  # the floor after each settled request
    still_high: bool = False  # the last request ran until the exit or the end of the recording


def requests_from_events(curve: Curve, events: Sequence[EventLike], phases: Phases) -> Requests:
    """Each request between its start and end event; its floor is the lowest level before the next
    request (or the exit)."""
    vs, n, exit_i = curve.vs, curve.n, phases.exit_i
    starts = sorted(e.t for e in events if e.kind == "request_start")
    ends = sorted(e.t for e in events if e.kind == "request_end")
    found = Requests()
    for k, start in enumerate(starts):
        last = k + 1 == len(starts)
        end = next((e for e in ends if e >= start), None)
        next_start = (
            curve.ts[exit_i - 1] if last and exit_i > 0 else (curve.ts[-1] if last else starts[k + 1])
        )
        a = curve.index_at(start)
        b = curve.index_at(end) if end is not None else curve.index_at(next_start)
        during = vs[a : b + 1] if b < n else vs[a:]
        if during:
            found.peaks.append(max(during))
        gap = vs[min(b + 1, n) : exit_i if last else curve.index_at(next_start)]
        if gap:
            found.floors.append(min(gap))
        elif last:
            found.still_high = True
    return found


def requests_from_curve(curve: Curve, phases: Phases, floor0: float) -> Requests:
    """Excursions above a running floor. One ends when it falls back to its floor, or when it has
    stayed below half its height for a couple of seconds (a partial fall leaves a higher floor: the
    next floor shows it; a dip inside a noisy request does not end it)."""
    noise, found = curve.noise, Requests()
    first = phases.load_end if phases.plateau is not None else 0
    running_min, high = floor0, False
    top = base = 0.0
    below, below_min = 0, math.inf
    for v in curve.vs[first : phases.exit_i]:
        if not high:
            running_min = min(running_min, v)
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
                if below >= curve.settle:
                    ended_at = below_min
            else:
                below, below_min = 0, math.inf
            if ended_at is not None:
                found.peaks.append(top)
                found.floors.append(ended_at)
                running_min, high = ended_at, False
        if not high and found.floors:
            found.floors[-1] = min(found.floors[-1], v)  # the floor after the latest request
    if high:
        found.peaks.append(top)
        found.still_high = True
    return found


@dataclass(slots=True)
class FallBack:
    after: float | None = None  # bytes: the level after the last request
    falls_back: bool | None = None
    note: str | None = None


def judge_fall_back(curve: Curve, phases: Phases, found: Requests, floor0: float) -> FallBack:
    """Does memory come back to the plateau after the requests? Judged on the last settled floor."""
    noise, exit_i = curve.noise, phases.exit_i
    last_level = curve.vs[exit_i - 1] if exit_i > 0 else curve.vs[-1]
    where = "exit" if exit_i < curve.n else "end of the recording"
    peaks, floors = found.peaks, found.floors
    if not peaks:
        if phases.load_end < exit_i:
            return FallBack(after=median(curve.vs[max(phases.load_end, exit_i - 5) : exit_i]))
        return FallBack()
    if not found.still_high:
        return FallBack(floors[-1], floors[-1] <= floor0 + noise)
    if last_level <= peaks[-1] - noise:
        # No end seen for the last request, but the curve came down from it: where it stands last.
        return FallBack(last_level, last_level <= floor0 + noise)
    if floors:
        # The last request was cut off at its peak: the floors before it speak for the requests.
        note = (
            f"the last request ran until the {where}: "
            f"falls back judged from the {len(peaks) - 1} request(s) before it"
        )
        return FallBack(floors[-1], floors[-1] <= floor0 + noise, note)
    return FallBack(
        note=f"the only request ran until the {where}: whether memory falls back after it is not known"
    )


def floor_rising(floors: Sequence[float], noise: float) -> bool:
    """A floor trend across requests beyond noise, judged from the first floor after a request (what
    the first request keeps is the caching allocator's, not a leak): up by more than the noise in
    all, mostly step by step, never falling back on the way."""
    if len(floors) < 2 or floors[-1] - floors[0] <= noise:
        return False
    steps = [b - a for a, b in itertools.pairwise(floors)]
    ups = sum(1 for d in steps if d > noise / 4)
    return all(d > -noise / 2 for d in steps) and ups >= math.ceil(0.6 * len(steps))
