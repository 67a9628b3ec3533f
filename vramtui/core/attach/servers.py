"""Every model server on this machine at once: who holds what on which card, term by term, and what is free.

A server is a process whose command line an engine of the registry reads (`cmdline.find_backend`), or a
log-only engine's (SGLang, TGI: their LogProfile's `command_words`), whose parent is none: the process and
its children are one server (vLLM's APIServer, EngineCore and Worker; Ollama's runners under `ollama
serve`). Its settings are read back from its command line; its memory per GPU from NVML's per-process
figures (the tree's pids), on the host from the tree's RSS; its bill by term from what the engine printed
(its log, found through /proc/PID/fd), else from its endpoints, else the estimate for its settings, and
the bill says which.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from vramtui.core.attach.cmdline import ServerCommand, as_sizes, find_backend, in_cwd, read_command
from vramtui.core.launch import procs
from vramtui.core.memory.parts import HOST, MemoryBill
from vramtui.core.memory.sampling import GpuReading, Sample


@dataclass
class Server:
    """One model server: its root process, its engine, settings, memory and bill."""

    pid: int
    engine: str  # the backend's or log-only engine's name
    pids: list[int]
    command: ServerCommand | None = None
    model: str | None = None
    params: dict[str, object] = field(default_factory=dict)  # read back from its command line
    assumed: dict[str, object] = field(default_factory=dict)  # what it runs with where that says nothing
    ports: list[int] = field(default_factory=list)
    host_bytes: int = 0  # the tree's resident memory
    gpu_bytes: dict[int, int] = field(default_factory=dict)  # GPU index -> bytes (NVML, per process)
    bill: MemoryBill | None = None
    bill_source: str = ""  # "log" | "endpoints" | "estimate" | "" (none known)
    log: str | None = None
    container: str | None = None
    notes: list[str] = field(default_factory=list)

    def settings_line(self) -> str:
        """`ctx 4096, slots 2, KV q8_0, layers 99*`: what it runs with (* the engine's default)."""
        shown = []
        for name, word in _setting_words(self.engine):
            value = self.params.get(name, self.assumed.get(name))
            if value is not None:
                shown.append(f"{word} {value}{'' if name in self.params else '*'}")
        return ", ".join(shown) or "—"

    @property
    def port(self) -> int | None:
        """Its HTTP port: the one its command line names (vLLM listens on it only once loaded, and its
        engine's ZMQ ports listen before: QA 30 S8), else the first port it listens on."""
        named = self.command.port if self.command is not None else None
        return named or (self.ports[0] if self.ports else None)

    @property
    def url(self) -> str | None:
        return f"http://127.0.0.1:{self.port}" if self.port else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "pid": self.pid,
            "engine": self.engine,
            "model": self.model,
            "pids": self.pids,
            "url": self.url,
            "ports": self.ports,
            "container": self.container,
            "params": self.params,
            "params_assumed": self.assumed,
            "host_mib": round(self.host_bytes / 2**20, 1),
            "gpu_mib": {str(index): round(used / 2**20, 1) for index, used in sorted(self.gpu_bytes.items())},
            "bill": self.bill.by_place() if self.bill is not None else None,
            "bill_source": self.bill_source or None,
            "log": self.log,
            "notes": self.notes,
        }


@dataclass
class GpuShare:
    """One GPU: what each server holds of it, what other processes hold, and what is free."""

    index: int
    name: str
    total_bytes: int | None
    used_bytes: int | None
    free_bytes: int | None
    servers: dict[int, int] = field(default_factory=dict)  # server pid -> bytes
    others: dict[int, tuple[str, int]] = field(default_factory=dict)  # pid -> (name, bytes)
    unknown_pids: tuple[int, ...] = ()  # on the GPU with no figure (WDDM, WSL2)

    def to_dict(self) -> dict[str, Any]:
        mib = _mib
        return {
            "index": self.index,
            "name": self.name,
            "total_mib": mib(self.total_bytes),
            "used_mib": mib(self.used_bytes),
            "free_mib": mib(self.free_bytes),
            "servers_mib": {str(pid): mib(used) for pid, used in self.servers.items()},
            "others": [
                {"pid": pid, "name": name, "mib": mib(used)} for pid, (name, used) in self.others.items()
            ],
            "unknown_pids": list(self.unknown_pids),
        }


def _mib(value: int | None) -> float | None:
    return None if value is None else round(value / 2**20, 1)


def _engine_of(argv: list[str]) -> tuple[str | None, ServerCommand | None]:
    """The engine whose server this command line runs, and the command read back (None: no engine)."""
    backend, _ = find_backend(argv)
    if backend is not None:
        return backend.name, read_command(argv)
    from vramtui.core.logs.rules import LOG_PROFILES

    words = " ".join(argv)
    for profile in LOG_PROFILES.values():
        if profile.command_words and any(word in words for word in profile.command_words):
            return profile.name, None
    return None, None


def find_servers(processes: Iterable[psutil.Process] | None = None) -> list[Server]:
    """Every model server running here (its root process; children belong to it), oldest first."""
    engines: dict[int, tuple[str, ServerCommand | None]] = {}
    parents: dict[int, int] = {}
    for proc in processes if processes is not None else psutil.process_iter(["pid", "ppid", "cmdline"]):
        try:
            argv = proc.info["cmdline"] if hasattr(proc, "info") else proc.cmdline()
            ppid = proc.info["ppid"] if hasattr(proc, "info") else proc.ppid()
        except psutil.Error:
            continue
        parents[proc.pid] = ppid or 0
        if argv:
            name, command = _engine_of(list(argv))
            if name is not None:
                engines[proc.pid] = (name, command)
    servers = []
    for pid, (name, command) in sorted(engines.items()):
        if _ancestor_in(pid, parents, engines):
            continue  # a child of another server (vLLM's engine core, Ollama's runner)
        server = Server(pid, name, _tree(pid), command)
        if command is not None:
            command.model = _in_server_cwd(command.model, pid)
            server.model = command.model
            server.params = dict(command.params)
        servers.append(server)
    return servers


def _in_server_cwd(model: str | None, pid: int) -> str | None:
    """A relative model path read from the server's own directory."""
    if not model or Path(model).is_absolute():
        return model
    try:
        cwd = psutil.Process(pid).cwd()
    except psutil.Error:
        return model
    return in_cwd(model, cwd)


def _ancestor_in(pid: int, parents: dict[int, int], engines: dict[int, Any]) -> bool:
    seen = set()
    parent = parents.get(pid, 0)
    while parent and parent not in seen:
        if parent in engines:
            return True
        seen.add(parent)
        parent = parents.get(parent, 0)
    return False


def _tree(pid: int) -> list[int]:
    try:
        root = psutil.Process(pid)
        return [pid, *(child.pid for child in root.children(recursive=True))]
    except psutil.Error:
        return [pid]


def measure(servers: list[Server], sample: Sample | None) -> list[GpuShare]:
    """Each server's memory on the host (tree RSS) and per GPU (NVML per process), and each GPU's shares."""
    owner = {pid: server for server in servers for pid in server.pids}
    for server in servers:
        server.host_bytes = procs.pids_rss(server.pids)
    shares = []
    for gpu in (sample.gpus if sample is not None else ()) or ():
        share = _gpu_share(gpu)
        for pid, used in gpu.process_bytes.items():
            server = owner.get(pid)
            if server is None:
                share.others[pid] = (procs.process_name(pid), used)
                continue
            server.gpu_bytes[gpu.index] = server.gpu_bytes.get(gpu.index, 0) + used
            share.servers[server.pid] = share.servers.get(server.pid, 0) + used
        shares.append(share)
    return shares


def _gpu_share(gpu: GpuReading) -> GpuShare:
    free = gpu.free_bytes
    if free is None and gpu.total_bytes is not None and gpu.used_bytes is not None:
        free = gpu.total_bytes - gpu.used_bytes
    return GpuShare(gpu.index, gpu.name, gpu.total_bytes, gpu.used_bytes, free, unknown_pids=gpu.unknown_pids)


# --- the bill by term -----------------------------------------------------------------------------------


def bill_of(
    server: Server, device_bytes: int | None, estimate: Callable[[Server, int | None], MemoryBill | None]
) -> None:
    """Fill the server's bill: what its log printed, else what its endpoints say, else the estimate."""
    from vramtui.core.attach.watch import server_log

    server.log = server_log(server.pid)
    if server.log is not None:
        printed = _printed_bill(server)
        if printed is not None:
            server.bill, server.bill_source = printed, "log"
            return
    from_endpoints = _endpoint_bill(server)
    if from_endpoints is not None:
        server.bill, server.bill_source = from_endpoints, "endpoints"
        return
    estimated = estimate(server, device_bytes)
    if estimated is not None:
        server.bill, server.bill_source = estimated, "estimate"


def _printed_bill(server: Server) -> MemoryBill | None:
    from vramtui.core.errors import VramtuiError
    from vramtui.core.logs.diagnose import diagnose_file
    from vramtui.core.memory.parts import bill_from_figures

    try:
        diagnosis = diagnose_file(server.log or "", backend=server.engine, kernel_log=lambda: None)
    except VramtuiError as error:
        server.notes.append(f"its log could not be read: {error}")
        return None
    bill = bill_from_figures(diagnosis.engine_figures)
    if not server.gpu_bytes:
        bill = bill.on_host()  # no GPU memory in its tree: what it printed sits in host RAM
    return bill if bill.total() or bill.total(HOST) else None


def _endpoint_bill(server: Server) -> MemoryBill | None:
    """What the server's endpoints say of its memory: Ollama's /api/ps (each model's size, in VRAM and
    not); nothing else gives bytes (llama-server's /props and vLLM's /metrics give sizes in tokens)."""
    from vramtui.core.attach.endpoints import Unreachable, probe

    if server.url is None:
        return None
    try:
        found = probe(server.url, ("/api/ps",), timeout_s=1.0)
    except Unreachable:
        return None
    answer = found.get("/api/ps")
    if answer is None or not answer.answered:
        return None
    bill = MemoryBill()
    for model in answer.found.get("models", []):
        size, vram = int(model.get("size") or 0), int(model.get("size_vram") or 0)
        bill.add(0, "weights", vram)
        bill.add(HOST, "weights", max(0, size - vram))
    return bill if bill.total() or bill.total(HOST) else None


def estimated_bill(server: Server, device_bytes: int | None) -> MemoryBill | None:
    """The estimator's bill for the server's model and settings (None: its model cannot be read here)."""
    from vramtui.core.errors import VramtuiError
    from vramtui.core.estimate.estimator import Settings, estimate
    from vramtui.core.estimate.modelinfo import load_model_info

    if not server.model or server.command is None or server.command.backend is None:
        return None
    # its command line only: the estimator knows the engine's defaults, and bills a default given as if
    # set (llama-server's 8 GiB prompt-cache limit is a ceiling it fills with use, not what it holds)
    params = as_sizes({**server.command.extra, **server.params})  # the engine's own knobs too (-mla)
    try:
        info = load_model_info(server.model)
        settings = Settings.from_params(params, backend=server.engine, device_bytes=device_bytes)
        if device_bytes is None:
            settings.on_gpu = False  # no GPU here: the engine runs on the CPU
        # calibrated by earlier runs on this machine, as `estimate` and `attach` are (QA: `ps` said 2.8 MiB
        # of compute where `attach` said 3.0 for the same server)
        from vramtui.core.estimate.calibrate import calibration_for

        settings.calibration, _notes = calibration_for(settings)
        return estimate(info, settings).bill
    except (VramtuiError, ValueError, OSError) as error:
        server.notes.append(f"no estimate: {error}")
        return None


@dataclass
class Snapshot:
    """Every server, every GPU's shares, and the host's memory, at one instant."""

    servers: list[Server]
    gpus: list[GpuShare]
    host_total_bytes: int
    host_available_bytes: int
    gpu_status: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "servers": [server.to_dict() for server in self.servers],
            "gpus": [gpu.to_dict() for gpu in self.gpus],
            "host": {
                "total_mib": _mib(self.host_total_bytes),
                "available_mib": _mib(self.host_available_bytes),
            },
            "gpu_status": self.gpu_status,
        }


def snapshot(nvml: Any = None, bills: bool = True) -> Snapshot:
    """Find the servers, measure them, and bill each (`nvml`: an NvmlSource; None: this machine's)."""
    from vramtui.core.attach.container import container_of, named
    from vramtui.core.attach.watch import _assumed
    from vramtui.core.memory.sampling import NvmlSource

    source = nvml if nvml is not None else NvmlSource()
    try:
        sample = source.sample() if getattr(source, "available", True) else None
        status = source.status().message if hasattr(source, "status") else ""
    finally:
        if nvml is None:
            source.close()  # ours: NVML's init is counted, each scan must give it back
    servers = find_servers()
    for server in servers:
        server.ports = _ports(server.pids, server.command.port if server.command else None)
        server.assumed = _assumed(server.command, {})
        box = named(container_of(server.pid))  # a server in docker or podman: its container, by cgroup
        server.container = box.label if box is not None else None
    gpus = measure(servers, sample)
    memory = psutil.virtual_memory()
    shot = Snapshot(servers, gpus, memory.total, memory.available, status)
    if bills:
        bill_new(shot, {})
    return shot


def bill_new(shot: Snapshot, known: dict[int, Server]) -> None:
    """Bill each server of `shot` that `known` (pid -> the Server billed before) lacks, and copy the
    others' bills: a bill reads logs and endpoints, so a repeated scan makes it once per server.
    `known` is kept to the servers still running."""
    card = shot.gpus[0].total_bytes if shot.gpus else None
    for server in shot.servers:
        before = known.get(server.pid)
        if before is None or before.bill is None:
            bill_of(server, card, estimated_bill)
            known[server.pid] = server
        else:
            server.bill, server.bill_source, server.log = before.bill, before.bill_source, before.log
    alive = {server.pid for server in shot.servers}
    for pid in [pid for pid in known if pid not in alive]:
        del known[pid]


def _ports(pids: list[int], named: int | None = None) -> list[int]:
    """The ports the tree listens on, the one its command line names first (its API, not its engine's)."""
    ports: set[int] = set()
    for pid in pids:
        try:
            conns = psutil.Process(pid).net_connections(kind="tcp")
        except psutil.Error:
            continue
        ports.update(c.laddr.port for c in conns if c.status == psutil.CONN_LISTEN and c.laddr)
    return sorted(ports, key=lambda port: (port != named, port))


def _setting_words(engine: str) -> tuple[tuple[str, str], ...]:
    """The engine's words for its settings (its Backend's); a log-only engine gets the shared ones."""
    from vramtui.core.backends import get_backend
    from vramtui.core.backends.base import SHARED_SETTING_WORDS
    from vramtui.core.errors import VramtuiError

    try:
        return get_backend(engine).setting_words
    except VramtuiError:
        return SHARED_SETTING_WORDS
