"""Memory samples from NVML, from the host (a process tree through psutil), or from a recorded CSV.

Every source has the same three calls: `.sample() -> Sample | None`, `.status() -> SourceStatus`,
`.close()`. `Sampler` polls a set of sources on a thread at 10 Hz (a prefill spike shorter than a
second must show; `nvidia-smi -l 1` misses it) and hands each merged `Sample` to a callback.

For the launcher: `measure_process_tree(pid)` answers "how much does this server hold right now"
(host RSS of its whole tree and the GPU bytes NVML charges to the tree's pids) in one call, and
`TreeWatch(pid)` keeps the peak and the latest of both while the server runs.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import psutil

from vramtui.core.memory.nvml import NvmlApi, cuda_order_warning, cuda_visible_map


@dataclass(frozen=True, slots=True)
class GpuReading:
    """One GPU (or MIG instance) at one instant. None means N/A, never a crash."""

    index: int
    name: str
    uuid: str
    used_bytes: int | None
    total_bytes: int | None
    reserved_bytes: int | None = None
    util_percent: int | None = None
    process_bytes: dict[int, int] = field(default_factory=dict)  # pid -> bytes, pids with a known figure
    free_bytes: int | None = None
    unknown_pids: tuple[int, ...] = ()  # on the GPU, but NVML gives no figure (WDDM / WSL2)
    cuda_index: int | None = None  # its number inside CUDA_VISIBLE_DEVICES; None: hidden from CUDA
    mig_index: int | None = None
    error: str | None = None  # the GPU answered nothing (lost, no permission ...): why
    processes_note: str | None = None

    @property
    def label(self) -> str:
        where = f"GPU {self.index}" + (f" MIG {self.mig_index}" if self.mig_index is not None else "")
        return f"{where} {self.name}".strip()


GpuSample = GpuReading  # the name docs/ARCHITECTURE.md's module map uses


@dataclass(frozen=True, slots=True)
class HostReading:
    ram_used: int  # total - available: what the OOM killer looks at, not "used" in free(1)
    ram_total: int
    swap_used: int
    swap_total: int
    tree_rss: int | None = None  # RSS summed over the watched process and its descendants
    tree_pids: tuple[int, ...] = ()
    root_alive: bool | None = None  # None when no process is watched


@dataclass(frozen=True, slots=True)
class Sample:
    t: float  # seconds since the epoch
    gpus: tuple[GpuReading, ...] = ()
    host: HostReading | None = None

    def gpu_used_bytes(self) -> int | None:
        """Used memory over physical GPUs (MIG instances are inside their parent's figure)."""
        values = [g.used_bytes for g in self.gpus if g.mig_index is None and g.used_bytes is not None]
        return sum(values) if values else None

    def tree_gpu_bytes(self, pids: Iterable[int] | None = None) -> int | None:
        """GPU bytes NVML charges to `pids` (default: the watched tree), over every GPU.

        None when no GPU reports per-process figures; 0 when they report and none of the pids is there.
        """
        if pids is None:
            pids = self.host.tree_pids if self.host else ()
        wanted = set(pids)
        readable = [g for g in self.gpus if g.error is None]
        if not readable:
            return None
        return sum(b for g in readable for pid, b in g.process_bytes.items() if pid in wanted)


@dataclass(frozen=True, slots=True)
class SourceStatus:
    ok: bool
    message: str  # "NVML not available: no NVIDIA driver (libnvidia-ml.so.1 not found)"


class Source(Protocol):
    def sample(self) -> Sample | None: ...
    def status(self) -> SourceStatus: ...
    def close(self) -> None: ...


# ---- NVML ---------------------------------------------------------------------------------------


class NvmlSource:
    """Every GPU in the box through NVML. Without NVML it samples nothing and `status()` says why.

    `module`: a pynvml-shaped module (tests inject one); default the real `pynvml`.
    `cuda_visible_devices`: the model server's CUDA_VISIBLE_DEVICES (default: ours), to number GPUs
    as the server sees them.
    """

    def __init__(self, module: Any | None = None, cuda_visible_devices: str | None = None) -> None:
        self.api = NvmlApi(module)
        self._cuda_env = cuda_visible_devices
        self._cuda_map: dict[tuple[int, int | None], int] = {}
        self._started = False
        self._last: tuple[GpuReading, ...] = ()

    def _ensure_started(self) -> bool:
        if self._started:
            return self.api.ok
        ok = self.api.start()  # locked and idempotent: the UI thread and the sampler may race here
        if ok:
            env = self._cuda_env if self._cuda_env is not None else os.environ.get("CUDA_VISIBLE_DEVICES")
            devices = [(d.index, d.uuid, d.mig_index) for d in self.api.devices]
            self._cuda_map = cuda_visible_map(devices, env)
        self._started = True
        return ok

    @property
    def available(self) -> bool:
        return self._ensure_started()

    def sample(self) -> Sample | None:
        if not self._ensure_started():
            return Sample(time.time(), (), None)
        t = time.time()
        readings = []
        for snap in self.api.snapshot():
            known = {p.pid: p.used_bytes for p in snap.processes if p.used_bytes is not None}
            unknown = tuple(p.pid for p in snap.processes if p.used_bytes is None)
            readings.append(
                GpuReading(
                    index=snap.index,
                    name=snap.name,
                    uuid=snap.uuid,
                    used_bytes=snap.used_bytes,
                    total_bytes=snap.total_bytes,
                    reserved_bytes=snap.reserved_bytes,
                    util_percent=snap.util_percent,
                    process_bytes=known,
                    free_bytes=snap.free_bytes,
                    unknown_pids=unknown,
                    cuda_index=self._cuda_map.get((snap.index, snap.mig_index)),
                    mig_index=snap.mig_index,
                    error=snap.error,
                    processes_note=snap.processes_note,
                )
            )
        self._last = tuple(readings)
        return Sample(t, self._last, None)

    def status(self) -> SourceStatus:
        if not self._ensure_started():
            return SourceStatus(False, self.api.reason)
        parts = [self.api.reason]
        bad = [g for g in self._last if g.error]
        parts += [f"{g.label}: {g.error}" for g in bad]
        notes = {g.processes_note for g in self._last if g.processes_note and not g.error}
        parts += sorted(n for n in notes if n)
        warning = cuda_order_warning([d.name for d in self.api.devices if d.mig_index is None])
        if warning:
            parts.append(warning)
        good = [g for g in self._last if not g.error] if self._last else self.api.devices
        return SourceStatus(bool(good), "; ".join(parts))

    def close(self) -> None:
        self.api.shutdown()
        self._started = False


# ---- host ---------------------------------------------------------------------------------------


class HostSource:
    """Host RAM and swap, and the RSS of one process tree (the server and every child it spawns).

    The tree is re-listed every `tree_refresh_s` (listing children walks all of /proc); the RSS of the
    known members is read every sample (one small /proc read each). Members outlive their parent here:
    a worker orphaned by a dead server still holds memory and still counts.
    """

    def __init__(self, pid: int | None = None, tree_refresh_s: float = 1.0) -> None:
        self.tree_refresh_s = tree_refresh_s
        self._lock = threading.Lock()
        self._pid: int | None = None
        self._root: psutil.Process | None = None
        self._members: dict[int, psutil.Process] = {}
        self._next_refresh = 0.0
        self._message = "host memory (psutil)"
        if pid is not None:
            self.watch_pid(pid)

    @property
    def pid(self) -> int | None:
        return self._pid

    def watch_pid(self, pid: int | None) -> None:
        """Follow another process tree (None: host RAM only)."""
        with self._lock:
            self._pid = pid
            self._members = {}
            self._root = None
            self._next_refresh = 0.0
            if pid is None:
                self._message = "host memory (psutil)"
                return
            try:
                self._root = psutil.Process(pid)
                self._members[pid] = self._root
                self._message = f"host memory and process {pid} ({self._root.name()}) with its children"
            except psutil.NoSuchProcess:
                self._message = f"no process {pid} (it has exited, or never ran)"
            except psutil.AccessDenied:
                self._message = f"process {pid} cannot be read (another user's)"

    def _refresh_tree(self, now: float) -> None:
        if self._root is None or now < self._next_refresh:
            return
        self._next_refresh = now + self.tree_refresh_s
        found = _descendants_linux(list(self._members))
        if found is None:  # not Linux, or a kernel without /proc/PID/task/TID/children
            try:
                found = [child.pid for child in self._root.children(recursive=True)]
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                return  # the root is gone: keep following the members we know
        for pid in found:
            if pid not in self._members:
                try:
                    self._members[pid] = psutil.Process(pid)
                except (psutil.NoSuchProcess, psutil.AccessDenied):
                    pass

    def sample(self) -> Sample:
        now = time.monotonic()
        ram_total, ram_available, swap_total, swap_free = _host_memory()
        tree_rss: int | None = None
        pids: tuple[int, ...] = ()
        root_alive: bool | None = None
        with self._lock:
            if self._pid is not None:
                self._refresh_tree(now)
                total = 0
                alive: list[int] = []
                for pid, process in list(self._members.items()):
                    try:
                        rss = process.memory_info().rss
                        if rss == 0 and process.status() == psutil.STATUS_ZOMBIE:
                            raise psutil.ZombieProcess(pid)  # exited, not yet reaped: holds nothing
                        total += rss
                        alive.append(pid)
                    except (psutil.NoSuchProcess, psutil.ZombieProcess):
                        del self._members[pid]
                    except psutil.AccessDenied:
                        alive.append(pid)
                root_alive = self._pid in alive
                tree_rss, pids = total, tuple(sorted(alive))
        host = HostReading(
            ram_used=ram_total - ram_available,
            ram_total=ram_total,
            swap_used=swap_total - swap_free,
            swap_total=swap_total,
            tree_rss=tree_rss,
            tree_pids=pids,
            root_alive=root_alive,
        )
        return Sample(time.time(), (), host)

    def status(self) -> SourceStatus:
        # a process asked for and not found (gone, or another user's): said, and not ok
        return SourceStatus(self._pid is None or self._root is not None, self._message)

    def close(self) -> None:
        with self._lock:
            self._members = {}
            self._root = None


_MEMINFO_KEYS = {b"MemTotal:": 0, b"MemAvailable:": 1, b"SwapTotal:": 2, b"SwapFree:": 3}


def _host_memory() -> tuple[int, int, int, int]:
    """(RAM total, RAM available, swap total, swap free) in bytes: one read of /proc/meminfo on
    Linux (psutil's two calls read it twice plus /proc/vmstat: 4x the cost at 10 Hz)."""
    try:
        with open("/proc/meminfo", "rb") as handle:
            text = handle.read()
        found = [0, 0, 0, 0]
        seen = 0
        for line in text.splitlines():
            key, _, rest = line.partition(b" ")
            slot = _MEMINFO_KEYS.get(key)
            if slot is not None:
                found[slot] = int(rest.split()[0]) * 1024  # kB
                seen += 1
                if seen == 4:
                    return found[0], found[1], found[2], found[3]
    except (OSError, ValueError, IndexError):
        pass
    memory, swap = psutil.virtual_memory(), psutil.swap_memory()
    return int(memory.total), int(memory.available), int(swap.total), int(swap.free)


def _descendants_linux(members: list[int]) -> list[int] | None:
    """Every descendant of `members` through /proc/PID/task/TID/children (reads only the tree, not
    all of /proc as a ppid scan does). None where the kernel does not offer the file."""
    found: list[int] = []
    seen = set(members)
    queue = list(members)
    supported = False
    while queue:
        pid = queue.pop()
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue  # gone
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/children", "rb") as handle:
                    text = handle.read()
            except FileNotFoundError:
                if tid == str(pid) and os.path.isdir(f"/proc/{pid}"):
                    return None if not supported else found
                continue  # the thread just ended
            except OSError:
                continue
            supported = True
            for child in text.split():
                number = int(child)
                if number not in seen:
                    seen.add(number)
                    found.append(number)
                    queue.append(number)
    return found if supported or not members else None


# ---- replay -------------------------------------------------------------------------------------


class ReplaySource:
    """A recorded nvidia-smi (or `vramtui record`) CSV, one sample per call, None at the end."""

    def __init__(self, path: str | Path) -> None:
        from vramtui.core.memory.nvsmi_csv import iter_samples, read_nvsmi_csv  # it builds our Sample types

        self.path = Path(path)
        self.data = read_nvsmi_csv(self.path)
        self._iter: Iterator[Sample] = iter_samples(self.data)  # lazily: a week at 1 Hz is 600k samples

    def samples(self) -> list[Sample]:
        return list(self.data.samples)

    def sample(self) -> Sample | None:
        return next(self._iter, None)

    def status(self) -> SourceStatus:
        data = self.data
        message = f"replay {self.path.name}: {data.rows} rows, {len(data.gpu_keys)} GPU(s)"
        if data.skipped:
            message += f", {data.skipped} malformed row(s) skipped"
        return SourceStatus(data.rows > 0, message)

    def close(self) -> None:
        self._iter = iter(())


# ---- the sampler thread --------------------------------------------------------------------------


def merge_samples(t: float, samples: Iterable[Sample | None]) -> Sample:
    gpus: list[GpuReading] = []
    host: HostReading | None = None
    for sample in samples:
        if sample is None:
            continue
        gpus.extend(sample.gpus)
        if host is None and sample.host is not None:
            host = sample.host
    return Sample(t, tuple(gpus), host)


class Sampler:
    """Polls sources every `interval_s` on a daemon thread; `on_sample(sample)` gets each merged one.

    A source that raises is reported in `errors` and skipped for that tick; the thread never dies of it.
    The callback runs on the sampler thread: a UI posts a message from it and returns.
    """

    def __init__(
        self,
        sources: Sequence[Source],
        interval_s: float = 0.1,
        on_sample: Callable[[Sample], None] | None = None,
    ) -> None:
        if interval_s <= 0:
            raise ValueError("interval_s must be positive")
        self.sources = list(sources)
        self.interval_s = interval_s
        self.on_sample = on_sample
        self.latest: Sample | None = None
        self.count = 0
        self.errors: dict[int, str] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def sample_once(self) -> Sample:
        t = time.time()
        results: list[Sample | None] = []
        for number, source in enumerate(self.sources):
            try:
                results.append(source.sample())
                self.errors.pop(number, None)
            except Exception as error:  # a source must not take the sampler down
                self.errors[number] = f"{type(error).__name__}: {error}"
        sample = merge_samples(t, results)
        self.latest = sample
        self.count += 1
        return sample

    def _loop(self) -> None:
        next_tick = time.monotonic()
        while not self._stop.is_set():
            sample = self.sample_once()
            if self.on_sample is not None:
                try:
                    self.on_sample(sample)
                except Exception as error:
                    self.errors[-1] = f"on_sample: {type(error).__name__}: {error}"
            next_tick += self.interval_s
            delay = next_tick - time.monotonic()
            if delay < 0:  # fell behind (a slow NVML call): skip ticks rather than burst
                next_tick = time.monotonic()
                delay = 0
            self._stop.wait(delay)

    def start(self) -> Sampler:
        if self._thread is None or not self._thread.is_alive():
            self._stop.clear()
            self._thread = threading.Thread(target=self._loop, name="vramtui-sampler", daemon=True)
            self._thread.start()
        return self

    def stop(self, timeout_s: float = 2.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
            self._thread = None

    def watch_pid(self, pid: int | None) -> None:
        for source in self.sources:
            if isinstance(source, HostSource):
                source.watch_pid(pid)

    def statuses(self) -> list[SourceStatus]:
        return [source.status() for source in self.sources]

    def close(self) -> None:
        self.stop()
        for source in self.sources:
            source.close()

    def __enter__(self) -> Sampler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


# ---- one process tree: what the launcher asks --------------------------------------------------


@dataclass(frozen=True, slots=True)
class TreeMemory:
    rss_bytes: int | None  # host RSS of the tree; None when the process is gone
    gpu_bytes: int | None  # GPU bytes NVML charges to the tree's pids; None without NVML figures
    pids: tuple[int, ...]


def measure_process_tree(pid: int, nvml: NvmlSource | None = None) -> TreeMemory:
    """Host RSS of `pid` and its descendants, and the GPU bytes of those pids, in one call."""
    host = HostSource(pid, tree_refresh_s=0.0).sample().host
    assert host is not None
    gpu: int | None = None
    if nvml is not None and nvml.available:
        sample = nvml.sample()
        gpu = sample.tree_gpu_bytes(host.tree_pids) if sample else None
    rss = host.tree_rss if host.tree_pids else None
    return TreeMemory(rss, gpu, host.tree_pids)


class TreeWatch:
    """Peak and latest memory of one process tree while it runs (host RSS and GPU bytes).

    `with TreeWatch(server.pid) as watch: ...; watch.peak_rss, watch.peak_gpu, watch.last_rss`.
    `nvml=None` creates an NvmlSource (it simply reports nothing without a GPU); pass False for none.
    """

    def __init__(
        self,
        pid: int,
        interval_s: float = 0.1,
        nvml: NvmlSource | bool | None = None,
        on_sample: Callable[[Sample], None] | None = None,
    ) -> None:
        self.host = HostSource(pid)
        self.nvml: NvmlSource | None = NvmlSource() if nvml is None or nvml is True else (nvml or None)
        sources: list[Source] = [self.host] + ([self.nvml] if self.nvml is not None else [])
        self.sampler = Sampler(sources, interval_s, self._on_sample)
        self._callback = on_sample
        self.peak_rss = 0
        self.peak_gpu: int | None = None
        self.last_rss: int | None = None
        self.last_gpu: int | None = None
        self.samples = 0

    def _on_sample(self, sample: Sample) -> None:
        host = sample.host
        if host is not None and host.tree_rss is not None and host.tree_pids:
            self.last_rss = host.tree_rss
            self.peak_rss = max(self.peak_rss, host.tree_rss)
        gpu = sample.tree_gpu_bytes()
        if gpu is not None:
            self.last_gpu = gpu
            self.peak_gpu = gpu if self.peak_gpu is None else max(self.peak_gpu, gpu)
        self.samples += 1
        if self._callback is not None:
            self._callback(sample)

    def start(self) -> TreeWatch:
        self.sampler.start()
        return self

    def sample_now(self) -> Sample:
        """One sample at once, beside the ticks (after a request: a short run's peak must not fall between
        two of them)."""
        sample = self.sampler.sample_once()
        self._on_sample(sample)
        return sample

    def stop(self) -> None:
        self.sampler.stop()

    def __enter__(self) -> TreeWatch:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
