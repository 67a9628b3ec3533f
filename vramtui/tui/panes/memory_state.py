"""What the memory pane shows, kept apart from the widgets: one peak-preserving history per series.

Samples arrive on the sampler thread and are ingested there (under a lock); the pane only reads the
state when it repaints, a few times a second, however fast the sampling runs.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from vramtui.core.memory.history import PeakHistory
from vramtui.core.memory.sampling import GpuReading, HostReading, Sample

if TYPE_CHECKING:
    from vramtui.core.memory.nvsmi_csv import NvsmiData

# Raw points kept per series for the readings (baseline, plateau, peaks): about 1 hour at 10 Hz.
READINGS_WINDOW = 36_000
# Past this many points the readings are taken from the history's buckets instead of raw samples.
READINGS_POINTS = 3_000


def gpu_key(index: int, mig_index: int | None = None) -> str:
    """A GPU's series key; a MIG instance has its own, so it never overwrites its parent's curve."""
    return f"gpu:{index}" if mig_index is None else f"gpu:{index}:mig{mig_index}"


def gpu_label(index: int, mig_index: int | None, name: str) -> str:
    where = f"GPU{index}" + (f" MIG{mig_index}" if mig_index is not None else "")
    return f"{where} {name}".strip()


def _key_order(key: str) -> tuple[int, int, int, str]:
    """GPUs by number (MIG instances after their parent), then the model process, then the host."""
    if key.startswith("gpu:"):
        index, _, mig = key[4:].partition(":mig")
        try:
            return (0, int(index), int(mig) if mig else -1, key)
        except ValueError:
            return (0, 0, 0, key)
    return (1 if key == "process" else 2, 0, 0, key)


def _whole(value: float | None) -> int | None:
    return None if value is None else int(value)


@dataclass
class Series:
    key: str  # "gpu:0", "gpu:0:mig1", "host", "process"
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

    def extend(self, times: list[float], values: list[float | None], total: float | None) -> None:
        """A whole recorded column at once (a replayed CSV): no Sample object per row."""
        if total:
            self.total = float(total)
        self.history.extend(times, values)
        window = self.times.maxlen or len(times)
        for t, value in zip(times[-window:], values[-window:], strict=True):
            if value is not None:
                self.times.append(t)
                self.values.append(float(value))


class RunFeed:
    """One launched run's own samples (the launcher's tree watch: the samples the wizard reads its
    step's peak and resident from), handed to the pane as `on_sample`. While a run feeds the model
    process series, the app's own sampler does not: two samplers catch different moments, and a run
    that dies within a second is over before the app's sampler has found its PID."""

    def __init__(self, state: MemoryState) -> None:
        self.state = state
        self.pid: int | None = None  # set once the run has started (before the app follows the PID)
        self.retired = False  # another run (or a process the app follows) took the series over

    def __call__(self, sample: Sample) -> None:
        self.state.ingest_run(self, sample)


class MemoryState:
    """Histories for every GPU, the host's RAM and the model's process tree, plus the latest sample."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.series: dict[str, Series] = {}
        self.latest: Sample | None = None
        self.run_feed: RunFeed | None = None  # the run whose own samples draw the model process series
        self.events: list[Any] = []  # core.readings.Event, laid on the curve
        # a replayed recording's process: still running at its last row (the live sampler's own samples,
        # which go on beside a replay, do not know that process)
        self.recorded_running: bool | None = None
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
            key = gpu_key(gpu.index, gpu.mig_index)
            series = self.series.get(key) or self._series(key, gpu_label(gpu.index, gpu.mig_index, gpu.name))
            series.add(sample.t, gpu.used_bytes, gpu.total_bytes)
        host = sample.host
        if host is not None:
            self._series("host", "host RAM").add(sample.t, host.ram_used, host.ram_total)
            if host.tree_rss is not None and self.run_feed is None:
                self._series("process", "model process").add(sample.t, host.tree_rss, host.ram_total)

    def ingest_run(self, feed: RunFeed, sample: Sample) -> None:
        """A sample from a launched run's own watch (RunFeed): the model process series is its curve."""
        host = sample.host
        if host is None or host.tree_rss is None:
            return
        with self.lock:
            if feed.retired:
                return  # a run that was replaced, still stopping
            if feed is not self.run_feed:
                if self.run_feed is not None:
                    self.run_feed.retired = True
                self.run_feed = feed
                self.series.pop("process", None)  # a new run starts its own curve
            self._series("process", "model process").add(sample.t, host.tree_rss, host.ram_total)
            self.version += 1

    def follow(self, pid: int | None) -> None:
        """The app follows a new model process: its curve starts afresh, unless that process's own run
        already feeds it (the run's first samples may come before the app hears of its PID)."""
        with self.lock:
            feed = self.run_feed
            if feed is not None and pid is not None and feed.pid == pid:
                return
            if feed is not None:
                feed.retired = True
            self.run_feed = None
            if self.series.pop("process", None) is not None:
                self.version += 1

    def ingest_recorded(self, data: NvsmiData) -> None:
        """A recorded nvidia-smi / `vramtui record` CSV, read by `read_nvsmi_csv`: its columns go
        straight into the histories. Building one Sample per row first costs seconds for a week."""
        from vramtui.core.memory.series import recorded_process

        built: dict[str, Series] = {}
        gpus: list[GpuReading] = []
        last_t: float | None = None
        events: list[Any] = []
        running: bool | None = None  # no process column, or no host column at all (an nvidia-smi CSV)
        for gpu in data.gpus.values():
            if not gpu.times:
                continue
            key = gpu_key(gpu.index)
            series = built[key] = Series(key, gpu_label(gpu.index, None, gpu.name))
            series.extend(gpu.times, gpu.used, gpu.total)
            util = gpu.util[-1]
            gpus.append(
                GpuReading(
                    index=gpu.index,
                    name=gpu.name,
                    uuid=gpu.uuid,
                    used_bytes=_whole(gpu.used[-1]),
                    total_bytes=_whole(gpu.total),
                    reserved_bytes=_whole(gpu.reserved[-1]),
                    util_percent=None if util is None else int(util),
                )
            )
            last_t = max(last_t or gpu.times[-1], gpu.times[-1])
        host_reading: HostReading | None = None
        host = data.host
        if host.times:
            built["host"] = Series("host", "host RAM")
            built["host"].extend(host.times, host.ram_used, host.ram_total)
            if any(value is not None for value in host.tree_rss):
                built["process"] = Series("process", "model process")
                built["process"].extend(host.times, host.tree_rss, host.ram_total)
            events, running = recorded_process(host)  # as `vramtui replay` reads the same CSV
            host_reading = HostReading(
                ram_used=_whole(host.ram_used[-1]) or 0,
                ram_total=_whole(host.ram_total) or 0,
                swap_used=_whole(host.swap_used[-1]) or 0,
                swap_total=_whole(host.swap_total) or 0,
                tree_rss=_whole(host.tree_rss[-1]),
                root_alive=running,
            )
            last_t = max(last_t or host.times[-1], host.times[-1])
        if last_t is None:
            return
        # The histories are built above without the lock: the pane keeps repainting meanwhile.
        with self.lock:
            self.series.update(built)
            self.latest = Sample(last_t, tuple(gpus), host_reading)
            self.events.extend(events)
            self.recorded_running = running
            self.count += data.rows
            self.version += 1

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
        return sorted(keys, key=_key_order)

    def has_gpu(self) -> bool:
        """Whether any GPU series exists (the sampler thread may be adding one: read under the lock)."""
        with self.lock:
            return any(key.startswith("gpu:") for key in self.series)

    def default_key(self) -> str | None:
        return self.primary_key()

    def columns(self, key: str, n: int, span_s: float | None = None) -> list[float | None]:
        """`n` columns for the graph: the max of each bucket, so no peak is lost at any zoom."""
        with self.lock:
            series = self.series.get(key)
            if series is None:
                return []
            return [bucket.max for bucket in series.history.buckets(n, span_s)]

    def readings(self, key: str) -> Any:
        """The four readings of a series (baseline, plateau, last peak, fell back) from the core."""
        from vramtui.core.memory.readings import compute_readings

        with self.lock:
            series = self.series.get(key)
            # one sample is a reading too: a run that died within its first sample had its peak drawn
            # by the wizard's step and lost by the pane (the core reads a one-point curve)
            if series is None or not series.values:
                return None
            # a tree sampled only once it had gone (no pid left): its zeros are no reading of the run
            if key == "process" and not any(series.values):
                return None
            if len(series.values) <= READINGS_POINTS:
                times, values = list(series.times), list(series.values)
            else:
                # A long curve goes in as the history's buckets, each as its low, its high and its last
                # reading: the cost stays bounded, every peak is still in, and the level between peaks
                # stays the level (QA 24 F2: the maxima alone read a spike in every bucket as the plateau)
                times, values = [], []
                for b in series.history.buckets(READINGS_POINTS // 3):
                    times += [b.t, (b.t + b.t_end) / 2, b.t_end]
                    values += [b.min, b.max, b.last]
            events = list(self.events)
            host = self.latest.host if self.latest is not None else None
            # Memory "held after the exit" only once the process is gone (or an exit event says so).
            running = None if host is None else host.root_alive
            if key == "process" and self.recorded_running is not None:
                running = self.recorded_running
        return compute_readings(times, values, events, running=running, on_host=not key.startswith("gpu:"))

    def primary_key(self) -> str | None:
        """The series the readings speak for unless the user picks one: the same choice as
        `vramtui replay` and the wizard make (core.memory.series)."""
        from vramtui.core.memory.series import primary_key

        with self.lock:
            return primary_key({key: list(series.values) for key, series in self.series.items()})
