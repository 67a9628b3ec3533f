"""Bounded memory for very long recordings (QA: a 1 GB, 14 M-row `record` CSV took 5.3 GB to replay).

Once a series holds more than `keep` points, the reader folds what it has read into buckets of ticks (a
tick: the rows that share a timestamp) and keeps, of each bucket, only the ticks that carry something a
reading needs: its first and last, and for every memory column its lowest and highest value (the first
time it is reached), its first and last figure, and the first N/A after a figure. A kept tick is
kept whole (every GPU's row and the host's reading), so the series still line up tick by tick.

Buckets are `tick // width` with `width` a power of two: while a fold leaves more than half of `keep`,
`width` doubles and everything is folded again. Each coarse bucket is two finer ones whose extremes were
kept, so the lowest and highest values survive any number of folds exactly: no peak is ever lost.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Iterator, MutableSequence, Sequence
from dataclasses import dataclass
from itertools import compress
from typing import Any

KEEP_POINTS = 200_000  # a series's kept points before folding starts: a few tens of MB per series
FIRST_WIDTH = 8  # ticks per bucket at the first fold (narrower keeps about as many points as it reads)
CHECK_EVERY = 4096  # rows between two looks at the series' lengths (a look costs a little per series)

# The columns a reading is taken from, whose extremes and N/A edges are kept; the others ride along.
GPU_VALUES = ("used",)
HOST_VALUES = ("ram_used", "tree_rss", "tree_gpu")
GPU_COLUMNS = ("times", "used", "util", "reserved")
HOST_COLUMNS = ("times", "ram_used", "swap_used", "tree_rss", "tree_gpu")


@dataclass(slots=True)
class FoldState:
    """How far a recording has been folded; width 1: every point is kept as read."""

    keep: int = KEEP_POINTS
    width: int = 1
    raw_from: int = 0  # the first tick not folded at `width` yet
    ticks: int = 0  # ticks read

    @property
    def folded(self) -> bool:
        return self.width > 1


def _series(data: Any) -> Iterator[tuple[Any, tuple[str, ...], tuple[str, ...]]]:
    for gpu in data.gpus.values():
        yield gpu, GPU_COLUMNS, GPU_VALUES
    yield data.host, HOST_COLUMNS, HOST_VALUES


def held(data: Any) -> int:
    """The most points any one series holds."""
    return max(len(series.ticks) for series, _columns, _values in _series(data))


def maybe_fold(data: Any, state: FoldState, tick: int) -> None:
    """Fold when a series holds more than `state.keep` points; `tick` is the one being read (its rows
    may go on: it is folded again next time)."""
    if held(data) <= state.keep:
        return
    if state.width == 1:
        state.width = FIRST_WIDTH
    fold_from(data, state.raw_from - state.raw_from % state.width, state.width)
    while held(data) > state.keep // 2 and state.width <= tick:  # one bucket holds little more: stop
        state.width *= 2
        fold_from(data, 0, state.width)
    state.raw_from = tick


def fold_from(data: Any, lo_tick: int, width: int) -> None:
    """Fold every series from `lo_tick` (a bucket's first tick) on into buckets of `width` ticks."""
    kept: set[int] = set()
    starts = []
    for series, _columns, values in _series(data):
        start = bisect_left(series.ticks, lo_tick)
        starts.append(start)
        _choose(series.ticks, series.times, [getattr(series, name) for name in values], start, width, kept)
    _choose_others(data, lo_tick, width, kept)
    for (series, columns, values), start in zip(_series(data), starts, strict=True):
        known = {name: _known(getattr(series, name)[start:]) for name in values}
        mask = [tick in kept for tick in series.ticks[start:]]
        for name in (*columns, "ticks", "rows"):
            _keep(getattr(series, name), start, mask)
        for name in values:  # figures dropped, so that `samples` still counts every one read
            series.dropped[name] = (
                series.dropped.get(name, 0) + known[name] - _known(getattr(series, name)[start:])
            )


def _known(values: Sequence[float | None]) -> int:
    return len(values) - values.count(None)


def _keep(column: MutableSequence[Any], start: int, mask: list[bool]) -> None:
    tail = compress(column[start:], mask)
    if isinstance(column, array):
        column[start:] = array(column.typecode, tail)
    else:
        column[start:] = list(tail)


def _choose(
    ticks: array[int],
    times: list[float],
    columns: list[list[float | None]],
    start: int,
    width: int,
    kept: set[int],
) -> None:
    """Add to `kept` the ticks each bucket of one series needs (see the module's words)."""
    i, n = start, len(ticks)
    while i < n:
        j = bisect_left(ticks, (ticks[i] // width + 1) * width, i)
        kept.add(ticks[i])
        kept.add(ticks[j - 1])
        _extremes(times[i:j], ticks, i, kept)  # the earliest and latest time, should rows be out of order
        for column in columns:
            part = column[i:j]
            if None not in part:
                _extremes(part, ticks, i, kept)
            elif part.count(None) < len(part):
                _edges(part, ticks, i, kept)
        i = j


def _extremes(part: list[Any], ticks: array[int], offset: int, kept: set[int]) -> None:
    kept.add(ticks[offset + part.index(min(part))])
    kept.add(ticks[offset + part.index(max(part))])


def _edges(part: list[float | None], ticks: array[int], offset: int, kept: set[int]) -> None:
    """A part with N/A in it: its extremes, its first and last figure and the first N/A after a figure (a
    recorded process appears and goes there: `recorded_process` reads its launch and exit from them)."""
    known = [(value, k) for k, value in enumerate(part) if value is not None]
    marks = [min(known)[1], min(known, key=lambda item: (-item[0], item[1]))[1], known[0][1], known[-1][1]]
    missing = [value is None for value in part]
    if True in missing[known[0][1] :]:
        marks.append(missing.index(True, known[0][1]))  # the first N/A after a figure
    kept.update(ticks[offset + k] for k in marks)


def _choose_others(data: Any, lo_tick: int, width: int, kept: set[int]) -> None:
    """With the process's GPU bytes recorded, the tick of each bucket where the cards held most beside
    it (`replay`'s others_gpu_peak_mib): the most of a difference is no column's own extreme."""
    host = data.host
    start = bisect_left(host.ticks, lo_tick)
    if not data.gpus or _known(host.tree_gpu[start:]) == 0:
        return
    used_at: dict[int, float] = {}
    for gpu in data.gpus.values():
        first = bisect_left(gpu.ticks, lo_tick)
        for tick, used in zip(gpu.ticks[first:], gpu.used[first:], strict=True):
            if used is not None:
                used_at[tick] = used_at.get(tick, 0.0) + used
    best: dict[int, tuple[float, int]] = {}
    for tick, own in zip(host.ticks[start:], host.tree_gpu[start:], strict=True):
        if own is not None and tick in used_at:
            other, bucket = used_at[tick] - own, tick // width
            if bucket not in best or other > best[bucket][0]:
                best[bucket] = (other, tick)
    kept.update(tick for _other, tick in best.values())
