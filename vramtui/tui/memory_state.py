"""What the memory pane shows, kept apart from the widgets: one peak-preserving history per series.

Samples arrive on the sampler thread and are ingested there (under a lock); the pane only reads the
state when it repaints, a few times a second, however fast the sampling runs.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from vramtui.core.history import PeakHistory
from vramtui.core.sampling import Sample

# Raw points kept per series for the readings (baseline, plateau, peaks): about 1 hour at 10 Hz.
READINGS_WINDOW = 36_000
# Past this many points the readings are taken from the history's buckets instead of raw samples.
READINGS_POINTS = 3_000


@dataclass
class Series:
    key: str  # "gpu:0", "host", "process"
    label: str
    total: float = 0.0
    history: PeakHistory = field(default_factory=PeakHistory)
    times: deque[float] = field(default_factory=lambda: deque(maxlen=READINGS_WINDOW))
    values: deque[float] = field(default_factory=lambda: deque(maxlen=READINGS_WINDOW))

    def add(self, t: float, value: float | None, total: float | None) -> None:
        if total:
            self.total = float(total)
        if value is None:
            return
        self.history.add(t, value)
        self.times.append(t)
        self.values.append(float(value))


class MemoryState:
    """Histories for every GPU, the host's RAM and the model's process tree, plus the latest sample."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.series: dict[str, Series] = {}
        self.latest: Sample | None = None
        self.events: list[Any] = []  # core.readings.Event, laid on the curve
        self.count = 0
        self.version = 0  # bumps on every change: the pane repaints only when it moved

    def ingest(self, sample: Sample) -> None:
        with self.lock:
            self._ingest(sample)

    def ingest_many(self, samples: list[Sample]) -> None:
        with self.lock:
            for sample in samples:
                self._ingest(sample)

    def _series(self, key: str, label: str) -> Series:
        series = self.series.get(key)
        if series is None:
            series = self.series[key] = Series(key, label)
        return series

    def _ingest(self, sample: Sample) -> None:
        self.latest = sample
        self.count += 1
        self.version += 1
        for gpu in sample.gpus:
            label = f"GPU{gpu.index} {gpu.name}".strip()
            self._series(f"gpu:{gpu.index}", label).add(sample.t, gpu.used_bytes, gpu.total_bytes)
        host = sample.host
        if host is not None:
            self._series("host", "host RAM").add(sample.t, host.ram_used, host.ram_total)
            if host.tree_rss is not None:
                self._series("process", "model process").add(sample.t, host.tree_rss, host.ram_total)

    def reset(self, key: str) -> None:
        """Forget one series (a new model process starts its own curve)."""
        with self.lock:
            if self.series.pop(key, None) is not None:
                self.version += 1

    def add_event(self, event: Any) -> None:
        with self.lock:
            self.events.append(event)
            self.version += 1

    def keys(self) -> list[str]:
        """Series in the order users look for them: GPUs, then the model process, then the host."""
        with self.lock:
            keys = list(self.series)
        return sorted(keys, key=lambda k: (0 if k.startswith("gpu:") else 1 if k == "process" else 2, k))

    def default_key(self) -> str | None:
        keys = self.keys()
        return keys[0] if keys else None

    def columns(self, key: str, n: int, span_s: float | None = None) -> list[float | None]:
        """`n` columns for the graph: the max of each bucket, so no peak is lost at any zoom."""
        with self.lock:
            series = self.series.get(key)
            if series is None:
                return []
            return [bucket.max for bucket in series.history.buckets(n, span_s)]

    def readings(self, key: str) -> Any:
        """The four readings of a series (baseline, plateau, last peak, fell back) from the core."""
        from vramtui.core.readings import compute_readings

        with self.lock:
            series = self.series.get(key)
            if series is None or len(series.values) < 2:
                return None
            if len(series.values) <= READINGS_POINTS:
                times, values = list(series.times), list(series.values)
            else:
                # A long curve goes in as the history's buckets (max of each): the readings cost stays
                # bounded, and every peak is still in.
                buckets = series.history.buckets(READINGS_POINTS)
                times, values = [b.t for b in buckets], [b.max for b in buckets]
            events = list(self.events)
        return compute_readings(times, values, events)
