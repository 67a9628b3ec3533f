"""A fixed-size memory history that never loses a peak, at any zoom.

Several levels of ring buffers: level 0 keeps the last `capacity` raw samples, level k keeps
`capacity` buckets of `factor**k` samples each. Every bucket holds the min, max and last value of
the samples it covers, so a 100 ms prefill spike is still the max of its 30-minute bucket. Each
sample updates the open bucket of every level (a few float operations per level), so no level waits
for another and the newest data is in every level. With the defaults (4096 buckets, factor 8) the
coarsest level spans more than 24 hours at 10 Hz, in well under a megabyte.
"""

from __future__ import annotations

import math
from array import array
from dataclasses import dataclass

SAMPLES_24H_AT_10HZ = 24 * 3600 * 10


@dataclass(frozen=True, slots=True)
class Bucket:
    min: float
    max: float
    last: float
    t: float  # time of the first sample in the bucket
    t_end: float  # time of the last sample in the bucket
    count: int = 1


class _Level:
    """One resolution: a ring of closed buckets and the open one being filled."""

    __slots__ = (
        "capacity",
        "count",
        "head",
        "lasts",
        "maxs",
        "mins",
        "open_count",
        "open_last",
        "open_max",
        "open_min",
        "open_t",
        "open_t_end",
        "per_bucket",
        "t_ends",
        "ts",
    )

    def __init__(self, capacity: int, per_bucket: int) -> None:
        self.capacity = capacity
        self.per_bucket = per_bucket
        zeros = [0.0] * capacity
        self.mins = array("d", zeros)
        self.maxs = array("d", zeros)
        self.lasts = array("d", zeros)
        self.ts = array("d", zeros)
        self.t_ends = array("d", zeros)
        self.head = 0  # next slot to write
        self.count = 0  # closed buckets held
        self.open_count = 0
        self.open_min = math.inf
        self.open_max = -math.inf
        self.open_last = 0.0
        self.open_t = 0.0
        self.open_t_end = 0.0

    def add(self, t: float, value: float) -> None:
        if self.open_count == 0:
            self.open_t = t
            self.open_min = value
            self.open_max = value
        else:
            if value < self.open_min:
                self.open_min = value
            if value > self.open_max:
                self.open_max = value
        self.open_last = value
        self.open_t_end = t
        self.open_count += 1
        if self.open_count >= self.per_bucket:
            i = self.head
            self.mins[i] = self.open_min
            self.maxs[i] = self.open_max
            self.lasts[i] = self.open_last
            self.ts[i] = self.open_t
            self.t_ends[i] = self.open_t_end
            self.head = (i + 1) % self.capacity
            if self.count < self.capacity:
                self.count += 1
            self.open_count = 0

    def oldest_t(self) -> float | None:
        if self.count:
            return self.ts[(self.head - self.count) % self.capacity]
        return self.open_t if self.open_count else None

    def _first_ending_at_or_after(self, since: float) -> int:
        """Logical position (0 = oldest closed bucket) of the first closed bucket ending at or after
        `since`: a binary search over the ring (bucket end times only grow)."""
        start, capacity = (self.head - self.count) % self.capacity, self.capacity
        lo, hi = 0, self.count
        while lo < hi:
            mid = (lo + hi) // 2
            if self.t_ends[(start + mid) % capacity] < since:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def window(self, since: float | None = None) -> list[tuple[float, float, float, float, float, int]]:
        """(min, max, last, t, t_end, count) of the closed buckets oldest first, then the open one;
        those ending before `since` are left out."""
        start, capacity, n = (self.head - self.count) % self.capacity, self.capacity, self.per_bucket
        first = 0 if since is None else self._first_ending_at_or_after(since)
        mins, maxs, lasts, ts, t_ends = self.mins, self.maxs, self.lasts, self.ts, self.t_ends
        out = []
        for k in range(first, self.count):
            i = (start + k) % capacity
            out.append((mins[i], maxs[i], lasts[i], ts[i], t_ends[i], n))
        if self.open_count and (since is None or self.open_t_end >= since):
            out.append(
                (self.open_min, self.open_max, self.open_last, self.open_t, self.open_t_end, self.open_count)
            )
        return out

    def iter_buckets(self, since: float | None = None) -> list[Bucket]:
        """Closed buckets oldest first, then the open one; those ending before `since` are left out."""
        return [Bucket(*row) for row in self.window(since)]


def merge(buckets: list[Bucket]) -> Bucket:
    return Bucket(
        min=min(b.min for b in buckets),
        max=max(b.max for b in buckets),
        last=buckets[-1].last,
        t=buckets[0].t,
        t_end=buckets[-1].t_end,
        count=sum(b.count for b in buckets),
    )


class PeakHistory:
    """`add(t, value)` at any rate; `buckets(n)` gives at most n buckets of the whole history (or of
    the last `span_s` seconds), each with the true min and max of what it covers; `peak` is the max
    ever added, even after the samples around it have aged out of the coarsest level."""

    def __init__(
        self,
        capacity: int = 4096,
        factor: int = 8,
        min_samples: int = SAMPLES_24H_AT_10HZ,
    ) -> None:
        if capacity < 2 or factor < 2:
            raise ValueError("capacity and factor must be at least 2")
        self.capacity = capacity
        self.factor = factor
        levels = 1
        while capacity * factor ** (levels - 1) < min_samples:
            levels += 1
        self._levels = [_Level(capacity, factor**k) for k in range(levels)]
        self.peak: float | None = None
        self.peak_t: float | None = None
        self.last: float | None = None
        self.last_t: float | None = None
        self.first_t: float | None = None
        self.count = 0

    @property
    def levels(self) -> int:
        return len(self._levels)

    @property
    def span_samples(self) -> int:
        """How many samples the coarsest level covers before it starts dropping the oldest."""
        return self.capacity * self.factor ** (len(self._levels) - 1)

    def add(self, t: float, value: float | None) -> None:
        """Add one sample; None (N/A) is a gap and is not recorded."""
        if value is None:
            return
        value = float(value)
        for level in self._levels:
            level.add(t, value)
        if self.peak is None or value > self.peak:
            self.peak = value
            self.peak_t = t
        if self.first_t is None:
            self.first_t = t
        self.last = value
        self.last_t = t
        self.count += 1

    def extend(self, times: list[float], values: list[float | None]) -> None:
        for t, v in zip(times, values, strict=True):
            self.add(t, v)

    def buckets(self, n: int, span_s: float | None = None) -> list[Bucket]:
        """At most `n` buckets, oldest first, covering the whole history or the last `span_s` seconds.

        The finest level that reaches back far enough is merged down to n buckets of equal time width;
        at the window's left edge a coarse bucket may reach a little before it (a peak just outside
        can show; one inside is never hidden).
        """
        if n <= 0 or self.count == 0 or self.last_t is None:
            return []
        since = None if span_s is None else self.last_t - span_s
        chosen = self._levels[-1]
        for level in self._levels:
            oldest = level.oldest_t()
            if oldest is None:
                continue
            holds_all = level.count < level.capacity  # never dropped anything
            if holds_all or (since is not None and oldest <= since):
                chosen = level
                break
        rows = chosen.window(since)
        if len(rows) <= n:
            return [Bucket(*row) for row in rows]
        start = rows[0][3] if since is None else max(since, rows[0][3])
        end = self.last_t
        width = (end - start) / n if end > start else 0.0
        # Merge the rows into n slots of equal time width, by their end time (raw floats: this runs on
        # every repaint of the graph).
        slots: list[list[float] | None] = [None] * n
        for lo, hi, last, t, t_end, count in rows:
            slot = min(max(int((t_end - start) / width), 0), n - 1) if width > 0 else n - 1
            acc = slots[slot]
            if acc is None:
                slots[slot] = [lo, hi, last, t, t_end, count]
            else:
                if lo < acc[0]:
                    acc[0] = lo
                if hi > acc[1]:
                    acc[1] = hi
                acc[2], acc[4] = last, t_end
                acc[5] += count
        return [Bucket(a[0], a[1], a[2], a[3], a[4], int(a[5])) for a in slots if a is not None]

    def max_since(self, since: float) -> float | None:
        """The max of everything added at or after `since` (exact at level 0, bucket-wide further back)."""
        buckets = self.buckets(self.capacity, None if self.last_t is None else self.last_t - since)
        return max((b.max for b in buckets), default=None)

    def memory_bytes(self) -> int:
        """Bytes the ring buffers hold (five float64 arrays per level)."""
        return sum(5 * level.capacity * 8 for level in self._levels)
