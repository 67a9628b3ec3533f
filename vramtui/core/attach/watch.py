"""Attach to a running server: resolve it, read its command line and endpoints, sample its memory
for a while, read its log. Everything here only reads: the process is never signalled."""

from __future__ import annotations

import os
import shlex
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from vramtui.core.attach.cmdline import ServerCommand, as_sizes, process_command
from vramtui.core.attach.container import Container, container_of, named
from vramtui.core.attach.endpoints import Endpoint, Unreachable, probe
from vramtui.core.attach.target import Target, parse_target, resolve
from vramtui.core.backends.base import kv_set_outright
from vramtui.core.errors import VramtuiError
from vramtui.core.memory.readings import Event, compute_readings
from vramtui.core.memory.sampling import HostSource, NvmlSource, Sample, Sampler, Source
from vramtui.core.memory.series import primary_key, sample_columns, series_name
from vramtui.core.units import MIB


@dataclass
class Attached:
    """What attach saw; `to_dict(diagnosis_view)` is the JSON (the CLI supplies diagnose's view)."""

    target: Target
    command: ServerCommand | None
    endpoints: dict[str, Endpoint]
    samples: list[Sample]
    log_source: str | None
    diagnosis: Any = None  # a core.logs Diagnosis when a log was read
    nvml_status: str = ""
    notes: list[str] = field(default_factory=list)
    still_running: bool | None = None
    estimate: Any = None  # a launch.billcheck.LaunchEstimate for its command line's settings

    def bill(self) -> Any:
        """Its bill reconciled: the estimate for its settings, what its log printed, what it held."""
        from vramtui.core.launch.billcheck import run_bill

        figures = dict(getattr(self.diagnosis, "engine_figures", None) or {})
        return run_bill(self.estimate, figures, self.samples)

    def readings(self) -> dict[str, Any] | None:
        """The same keys as `vramtui replay --json`, over the series the memory pane would choose."""
        columns = sample_columns(self.samples)
        key = primary_key({k: values for k, (_t, values) in columns.items()})
        if key is None:
            return None
        times, values = columns[key]
        host = self.samples[-1].host
        total = None
        if key.startswith("gpu:"):
            gpu = next((g for g in self.samples[-1].gpus if key == f"gpu:{g.index}"), None)
            total = gpu.total_bytes if gpu is not None else None
        running = None if host is None else host.root_alive
        # It was serving before we came: the whole watch is its resident level, no load step to find.
        serving = any(e.answered for e in self.endpoints.values())
        events = [Event(times[0], "ready", "attached to a serving server")] if serving else []
        exited = self.exited_at()
        if exited is not None:  # what it held after its exit is no level of its own (QA 30 S2: plateau 0)
            events.append(Event(exited, "exit", "the process exited"))
        readings = compute_readings(times, values, events, total_bytes=total, running=running)
        return {"series": series_name(key), **readings.to_dict()}

    def exited_at(self) -> float | None:
        """When the watched process was first seen gone (its host sample's root no longer alive), or None."""
        if self.still_running is not False:
            return None
        return next((s.t for s in self.samples if s.host is not None and not s.host.root_alive), None)

    def gpu_processes(self) -> list[dict[str, Any]]:
        """Every process NVML charges GPU memory to, with its container (NVML gives host PIDs)."""
        if not self.samples:
            return []
        last = self.samples[-1]
        tree = set(last.host.tree_pids) if last.host else set()
        rows = []
        for gpu in last.gpus:
            for pid, used in sorted(gpu.process_bytes.items()):
                box = named(container_of(pid))
                rows.append(
                    {
                        "gpu": gpu.index,
                        "pid": pid,
                        "used_mib": round(used / MIB, 1),
                        "attached_tree": pid in tree,
                        "container": box.to_dict() if box else None,
                    }
                )
        return rows

    def to_dict(self, diagnosis_view: Any = None) -> dict[str, Any]:
        command = self.command
        backend = command.backend if command else None
        pid = self.target.pid
        box = named(container_of(pid)) if pid is not None else None
        if box is not None and not box.name and self.target.kind == "docker" and self.target.name:
            box = Container(box.runtime, box.id, self.target.name)  # the name it was attached by
        model = command.model if command else None
        diagnosis = None
        if self.diagnosis is not None:
            diagnosis = diagnosis_view(self.diagnosis) if diagnosis_view else self.diagnosis.to_dict()
        return {
            "target": self.target.text,
            "pid": pid,
            "url": self.target.url,
            "backend": backend.name if backend else None,
            "model": model or _model_from_endpoints(self.endpoints),
            "command_line": command.argv if command else None,
            "params": dict(command.params) if command else {},
            "params_assumed": _assumed(command, self.endpoints),
            "backend_params": dict(command.extra) if command else {},
            "endpoints": {path: e.to_dict() for path, e in self.endpoints.items()},
            "endpoints_found": [path for path, e in self.endpoints.items() if e.answered],
            "container": box.to_dict() if box else None,
            "readings": self.readings(),
            "gpu_processes": self.gpu_processes(),
            "memory_sources": self.nvml_status,
            "log_source": self.log_source,
            "log_follow": " ".join(self.target.log_follow) if self.target.log_follow else None,
            "diagnosis": diagnosis,
            "still_running": self.still_running,
            "bill": bill.to_dict() if (bill := self.bill()) is not None else None,
            "notes": [*self.target.notes, *(command.problems if command else []), *self.notes],
        }


def _why_no_server(
    command: ServerCommand | None, endpoints: dict[str, Endpoint], silent: str | None = None
) -> str:
    """What was seen instead of a model server: its program, and what its endpoints said."""
    said = []
    if command is not None and command.argv:
        # the whole command, cut between arguments past a few (QA 7: cut within one, "--port" alone)
        words = [Path(command.argv[0]).name, *command.argv[1:6]]
        more = " …" if len(command.argv) > 6 else ""
        said.append(f"its program {shlex.join(words) + more!r} is no engine's")
    else:
        said.append("no engine's program")
    garbage = [f"{e.path} {e.problem}" for e in endpoints.values() if e.problem and e.status]
    stopped = [e.problem for e in endpoints.values() if e.problem and not e.status]
    statuses = sorted({e.status for e in endpoints.values() if e.status and not 200 <= e.status < 300})
    if garbage:
        said.append(garbage[0])
    elif statuses:
        said.append(f"its endpoints answer HTTP {', '.join(map(str, statuses))}")
    elif silent:
        said.append(silent)
    elif stopped:
        said.append(f"it stopped answering: {stopped[0]}")
    else:
        said.append("no endpoint answers")
    return "; ".join(said)


def _assumed(
    command: ServerCommand | None, endpoints: dict[str, Endpoint] | None = None
) -> dict[str, object]:
    """What the server runs with where its command line says nothing: what its endpoints say (vLLM's
    /v1/models names the context it took, llama-server's /props and /slots its slots: an environment
    variable or a build may set them), else the engine's defaults."""
    if command is None or command.backend is None:
        return {}
    from vramtui.core.memory.nvml import first_gpu_total_bytes

    card = first_gpu_total_bytes()  # no GPU here: an engine that runs anyway runs on the CPU
    backend = command.backend
    said = [k for k in backend.defaults if k not in command.params]
    if not backend.offloads_layers:  # QA 10: vLLM read as "gpu_layers=all", a knob it has not
        said = [k for k in said if k != "gpu_layers"]
    if kv_set_outright(backend, command.params):  # QA 10: no share assumed beside it
        said = [k for k in said if k != "mem_share"]
    assumed = {k: backend.default(k, card, card is None) for k in said}
    models = (endpoints or {}).get("/v1/models")
    if "context" not in command.params and models is not None and models.answered:
        length = models.found.get("max_model_len")
        if length:
            assumed["context"] = length
    if "parallel" not in command.params:
        for path in ("/props", "/slots"):
            found = (endpoints or {}).get(path)
            slots = found.found.get("slots") if found is not None and found.answered else None
            if isinstance(slots, int) and not isinstance(slots, bool) and slots > 0:
                assumed["parallel"] = slots
                break
    return assumed


def _model_from_endpoints(endpoints: dict[str, Endpoint]) -> str | None:
    for path in ("/props", "/api/ps", "/v1/models"):
        found = endpoints.get(path)
        if found is None or not found.answered:
            continue
        if path == "/props" and found.found.get("model_path"):
            return str(found.found["model_path"])
        models = found.found.get("models") or []
        if models:
            first = models[0]
            return str(first.get("name") if isinstance(first, dict) else first)
    return None


def _command_line(pid: int) -> ServerCommand | None:
    try:
        return process_command(pid)
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        raise VramtuiError(f"process {pid} exited") from None


def implied_log(pid: int) -> str | None:
    """The file its stderr (else stdout) goes to, when that is a regular file: `server > log 2>&1`."""
    for fd in (2, 1):
        try:
            path = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if path.startswith("/") and Path(path).is_file():
            return path
    return None


def server_log(pid: int) -> str | None:
    """The server's log: the file its output goes to (`server > log 2>&1`), else, for a server vramtui
    launched (its output goes to a pipe), the run log its parent writes, which names its PID."""
    from vramtui.core.logs.ownlines import SERVER_PID

    path = implied_log(pid)
    if path is not None:
        return path
    marker = f"{SERVER_PID}{pid}\n".encode()
    try:
        files = psutil.Process(pid).parent().open_files()  # type: ignore[union-attr]
    except (psutil.Error, AttributeError):
        return None
    for opened in files:
        if not opened.path.endswith(".log"):
            continue
        try:
            with open(opened.path, "rb") as handle:
                if marker in handle.read(16384):
                    return opened.path
        except OSError:
            continue
    return None


def _sample(pid: int | None, duration_s: float, interval_s: float) -> tuple[list[Sample], str]:
    host = HostSource(pid)
    nvml = NvmlSource()
    samples: list[Sample] = []
    sources: list[Source] = [host, nvml]
    sampler = Sampler(sources, interval_s, samples.append)
    sampler.start()
    try:
        time.sleep(duration_s)
    finally:
        sampler.stop()
        status = nvml.status().message
        sampler.close()
    return samples, status


def _log_once(argv: list[str]) -> str:
    """Read a docker/journald log once into a temporary file the diagnosis reads."""
    try:
        proc = subprocess.run(argv, capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise VramtuiError(f"cannot read the log with {' '.join(argv)}: {error}") from None
    handle, path = tempfile.mkstemp(prefix="vramtui-attach-", suffix=".log")
    with os.fdopen(handle, "wb") as out:
        out.write(proc.stdout + proc.stderr)
    return path


def attach(text: str, duration_s: float = 3.0, log: str | None = None, interval_s: float = 0.1) -> Attached:
    """Watch TARGET for `duration_s` seconds and report what it is and what it does."""
    if not duration_s > 0:
        raise VramtuiError("--duration must be a positive number of seconds")
    target = resolve(parse_target(text))
    command = _command_line(target.pid) if target.pid is not None else None
    if command is not None and command.port is not None and target.kind == "pid":
        target.url = f"http://127.0.0.1:{command.port}"
    endpoints: dict[str, Endpoint] = {}
    silent: str | None = None
    if target.url is not None:
        try:
            endpoints = probe(target.url)
        except Unreachable as error:
            if target.pid is None:
                raise VramtuiError(f"nothing answers at {target.url}: {error}") from None
            target.notes.append(f"{target.url} does not answer: {error}")
            silent = f"{target.url} does not answer: {error}"
    known = command is not None and command.backend is not None
    if not known and not any(e.answered for e in endpoints.values()):
        what = target.url if target.pid is None else f"process {target.pid}"
        if target.pid is not None and target.url is not None and target.kind == "url":
            what = f"{target.url} (process {target.pid})"
        raise VramtuiError(
            f"{what} is no model server vramtui knows ({_why_no_server(command, endpoints, silent)})"
        )
    estimate = _estimate_of(command)  # made while it is watched
    # its log is found through /proc while it runs: a server that dies during the watch keeps it (QA 30 S2)
    found = server_log(target.pid) if log is None and target.pid is not None and not target.log_once else None
    samples, nvml_status = _sample(target.pid, duration_s, interval_s)
    result = Attached(target, command, endpoints, samples, None, nvml_status=nvml_status)
    result.estimate = estimate
    if target.pid is not None:
        result.still_running = psutil.pid_exists(target.pid)
    exited = result.exited_at()
    if exited is not None and samples:
        when = time.strftime("%H:%M:%S", time.localtime(exited))
        result.notes.append(
            f"the process exited at {when}, {exited - samples[0].t:.0f} s into the watch (not by vramtui)"
        )
    _read_log(result, log, found)
    return result


def _estimate_of(command: ServerCommand | None) -> Any:
    """The estimate for the model and settings its command line says, started in the background."""
    from vramtui.core.launch.billcheck import LaunchEstimate

    if command is None or command.backend is None or not command.model:
        return None
    source = NvmlSource()
    on_gpu = source.available  # a GPU here: its engine offloads to it unless its settings say not
    source.close()
    params = as_sizes(dict(command.params))  # QA 9: --kv-cache-memory-bytes 268435456 "needs a unit"
    return LaunchEstimate(command.model, params, command.backend.name, on_gpu, None)


def _read_log(result: Attached, log: str | None, found: str | None = None) -> None:
    from vramtui.core.logs.diagnose import diagnose_file

    target = result.target
    path = log
    scratch = None
    if path is None and target.log_once is not None:
        path = scratch = _log_once(target.log_once)
        result.log_source = " ".join(target.log_follow or target.log_once)
    elif path is None and target.pid is not None:
        path = found or server_log(target.pid)
        if path is not None:
            result.log_source = path
    else:
        result.log_source = path
    if path is None:
        result.notes.append("no log read: pass --log FILE (its output goes to no file vramtui can see)")
        return
    backend = result.command.backend if result.command else None
    # a server on this machine (a PID) where NVML finds no GPU: every buffer on the CPU is no news (QA 30 S21)
    # (the watch's own samples say so: NVML is not opened a second time for it)
    here_without_gpu = target.pid is not None and not any(sample.gpus for sample in result.samples)
    try:
        result.diagnosis = diagnose_file(
            path, backend=backend.name if backend else None, gpu_absent=here_without_gpu
        )
    finally:
        if scratch is not None:
            os.unlink(scratch)
