"""What `vramtui attach TARGET` points at: a PID, a server URL, Ollama, a docker container or a
systemd unit; resolved to a PID (when it can be seen), a URL to probe and where its log comes from."""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import psutil

from vramtui.core.backends import Backend, get_backend
from vramtui.core.errors import VramtuiError

TOOL_TIMEOUT_S = 5.0


@dataclass
class Target:
    text: str  # what the user typed
    kind: str  # "pid" | "url" | "engine" (ollama: its default local URL) | "docker" | "systemd"
    pid: int | None = None
    url: str | None = None
    name: str | None = None  # the container or unit
    # The command that follows its log (shown to the user) and the one that reads it once.
    log_follow: list[str] | None = None
    log_once: list[str] | None = None
    notes: list[str] = field(default_factory=list)


_BARE_HOST_PORT = re.compile(r"^(?:[A-Za-z0-9.-]+|\[[0-9A-Fa-f:]+\]):\d{1,5}(?:/.*)?$")


def parse_target(text: str) -> Target:
    """The target as typed; bad input is one clear VramtuiError."""
    value = text.strip()
    if value.isdigit():
        pid = int(value)
        if not psutil.pid_exists(pid):
            raise VramtuiError(f"no process with PID {pid}")
        return Target(value, "pid", pid=pid)
    engine = _engine_named(value)
    if engine is not None and engine.launch is not None:
        # `attach ollama`: that engine's local server at its default port (Ollama: 11434, /api/ps).
        return Target(value, "engine", url=f"http://127.0.0.1:{engine.launch.default_port}")
    scheme, _, rest = value.partition(":")
    if scheme in ("docker", "systemd") and rest:
        return Target(value, scheme, name=rest)
    if _BARE_HOST_PORT.match(value):  # host:port, as --source takes it: http://host:port (QA 37 F15)
        value = f"http://{value}"
    try:
        parts = urlsplit(value)
    except ValueError as error:  # an unclosed [ of an IPv6 address
        raise VramtuiError(f"{text}: not a URL ({error})") from None
    if parts.scheme in ("http", "https") and parts.hostname:
        try:
            parts.port  # noqa: B018 - raises on a port that is no number
        except ValueError:
            raise VramtuiError(f"{text}: the port is not a number") from None
        return Target(value, "url", url=server_root(value))
    raise VramtuiError(
        f"cannot attach to {text!r}: give a PID, a server URL (http://127.0.0.1:8080 or 127.0.0.1:8080), "
        "ollama, docker:NAME or systemd:UNIT"
    )


# What people paste after the server's address: the OpenAI base URL, or one endpoint of it. The server is
# probed from its root, so these come off (any other path, a reverse proxy's prefix, stays).
_ENDPOINT_TAILS = ("/v1/models", "/v1", "/health", "/props", "/slots", "/metrics", "/api/ps", "/api")


def server_root(url: str) -> str:
    """The URL the endpoints hang from: http://host:8080/v1 -> http://host:8080."""
    url = url.rstrip("/")
    for tail in _ENDPOINT_TAILS:
        if urlsplit(url).path.endswith(tail):
            return url.removesuffix(tail).rstrip("/")
    return url


def _engine_named(text: str) -> Backend | None:
    if not text or ":" in text or "/" in text:
        return None
    try:
        return get_backend(text)
    except VramtuiError:
        return None


def url_port(url: str) -> int:
    parts = urlsplit(url)
    return parts.port or (443 if parts.scheme == "https" else 80)


def pid_listening_on(port: int) -> int | None:
    """The PID that listens on TCP `port` (None: nobody, or its owner cannot be seen)."""
    try:
        connections = psutil.net_connections(kind="tcp")
    except (psutil.AccessDenied, OSError):
        return None
    for conn in connections:
        if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port and conn.pid:
            return conn.pid
    return None


def listening_ports(pid: int) -> list[int]:
    """TCP ports `pid` (or a child of it) listens on, lowest first."""
    ports: set[int] = set()
    try:
        root = psutil.Process(pid)
        processes = [root, *root.children(recursive=True)]
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return []
    for process in processes:
        try:
            conns = process.net_connections(kind="tcp")
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        ports.update(c.laddr.port for c in conns if c.status == psutil.CONN_LISTEN and c.laddr)
    return sorted(ports)


def _tool(argv: list[str], what: str) -> str:
    """Run a container or service tool; a missing or failing tool is one clear line."""
    if shutil.which(argv[0]) is None:
        raise VramtuiError(f"{what}: {argv[0]} is not installed (no {argv[0]!r} on PATH)")
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=TOOL_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        raise VramtuiError(f"{what}: {' '.join(argv)} did not answer within {TOOL_TIMEOUT_S:g} s") from None
    except OSError as error:
        raise VramtuiError(f"{what}: cannot run {argv[0]}: {error.strerror or error}") from None
    if proc.returncode != 0:
        lines = [line.strip() for line in (proc.stderr or proc.stdout).splitlines() if line.strip()]
        why = lines[-1] if lines else f"exit status {proc.returncode}"
        raise VramtuiError(f"{what}: {argv[0]} failed: {why}")
    return proc.stdout.strip()


def _serves(process: psutil.Process) -> bool:
    """Does this process run an engine vramtui knows (by its command line)?"""
    from vramtui.core.attach.cmdline import find_backend

    try:
        return find_backend(process.cmdline())[0] is not None
    except psutil.Error:
        return False


def _server_in_tree(target: Target) -> None:
    """A PID that is not itself a model server (a shell, a supervisor, init) stands for the one server
    below it: watched with a note. None below it and PID 1 is the whole machine: refused."""
    try:
        root = psutil.Process(target.pid)
        if _serves(root):
            return
        servers = [p for p in root.children(recursive=True) if _serves(p) and not _serves(p.parent())]
        name = root.name()
        # a process of a server (vLLM's engine core and workers, the PIDs `top` shows holding the memory):
        # the server above it (QA 29 Q7: refused as "no model server vramtui knows")
        above = next((p for p in root.parents() if _serves(p)), None) if not servers else None
    except psutil.Error:
        return
    if above is not None:
        target.notes.append(
            f"PID {target.pid} ({name}) is a process of the server PID {above.pid}: watching that"
        )
        target.pid = above.pid
        return
    if len(servers) == 1:
        target.notes.append(
            f"PID {target.pid} ({name}) runs no engine itself: watching its PID {servers[0].pid}"
        )
        target.pid = servers[0].pid
    elif len(servers) > 1:
        pids = ", ".join(str(p.pid) for p in servers[:6])
        raise VramtuiError(
            f"PID {target.pid} ({name}) has {len(servers)} model servers below it ({pids}): give one"
        )
    elif target.pid == 1:
        raise VramtuiError(
            f"PID 1 ({name}) is the whole machine, and no model server runs: give the server's PID or URL"
        )


def resolve(target: Target) -> Target:
    """Fill in the PID, the URL and the log commands the target implies."""
    if target.kind == "pid":
        _server_in_tree(target)
    if target.kind == "docker":
        name = target.name or ""
        out = _tool(["docker", "inspect", "--format", "{{.State.Pid}}", name], target.text)
        target.pid = _positive_pid(out, target.text, "is not running")
        target.log_follow = ["docker", "logs", "-f", name]
        target.log_once = ["docker", "logs", name]
    elif target.kind == "systemd":
        unit = target.name or ""
        out = _tool(["systemctl", "show", "--property", "MainPID", "--value", unit], target.text)
        target.pid = _positive_pid(out, target.text, "has no running main process")
        target.log_follow = ["journalctl", "-fu", unit, "-o", "cat"]
        target.log_once = ["journalctl", "-u", unit, "-o", "cat", "--no-pager", "-n", "2000"]
    elif target.url is not None and target.pid is None:
        target.pid = pid_listening_on(url_port(target.url))
        if target.pid is None:
            target.notes.append(
                f"the owner of port {url_port(target.url)} cannot be seen (another user, a container "
                "or another host): no command line or process memory, the URL only"
            )
    if target.pid is not None and target.url is None:
        ports = listening_ports(target.pid)
        if ports:
            target.url = f"http://127.0.0.1:{ports[0]}"
        else:
            target.notes.append(f"process {target.pid} listens on no TCP port: no endpoint to probe")
    return target


def _positive_pid(text: str, what: str, otherwise: str) -> int:
    if text.isdigit() and int(text) > 0:
        return int(text)
    raise VramtuiError(f"{what} {otherwise}")
