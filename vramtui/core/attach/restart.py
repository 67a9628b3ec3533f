"""Changing one setting of a server vramtui did not start: its command rebuilt with the change, the
restart waited for, and the stop that a take-over needs.

The running server becomes a `Profile` (its Backend, model, parameters, the words no flag reads, the
environment knobs it was started with), so the changed command is the Backend's own translation of
the changed profile (`launcher.build_command`), never a string edited by hand. Nothing here stops a
process unless `stop_process` is called, and the guided wizard calls it only after the user's yes.
"""

from __future__ import annotations

import os
import shlex
import signal
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from vramtui.core.attach.cmdline import ServerCommand, as_sizes, flags_set, process_command, without_flags
from vramtui.core.attach.endpoints import Unreachable, fetch
from vramtui.core.attach.target import Target, parse_target, pid_listening_on, resolve, url_port
from vramtui.core.attach.watch import Attached, _model_from_endpoints
from vramtui.core.backends import Backend
from vramtui.core.errors import VramtuiError
from vramtui.core.launch.launcher import build_command
from vramtui.core.launch.profile import Profile

# Environment a server's GPUs and threads depend on: a relaunch must see the same devices.
DEVICE_ENV = (
    "CUDA_VISIBLE_DEVICES",
    "HIP_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
    "OMP_NUM_THREADS",
    "LD_LIBRARY_PATH",
)
POLL_S = 0.5


@dataclass
class Running:
    """The server as it runs now: the target, its process, where it answers, how it was started."""

    target: Target
    pid: int | None
    url: str
    command: ServerCommand | None
    cwd: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    model_hint: str | None = None  # the model an endpoint names (Ollama's /api/ps)

    @property
    def port(self) -> int:
        return url_port(self.url)

    @property
    def in_box(self) -> bool:
        """Run by docker or systemd: the relaunch is theirs, never a process vramtui starts."""
        return self.target.kind in ("docker", "systemd")


def _environ(pid: int) -> dict[str, str]:
    try:
        return dict(psutil.Process(pid).environ())
    except (psutil.Error, OSError):
        return {}


def _cwd(pid: int) -> str | None:
    try:
        return psutil.Process(pid).cwd()
    except (psutil.Error, OSError):
        return None


def running_from(attached: Attached) -> Running:
    """What a relaunch needs from an attach: its URL, command line, directory and environment knobs."""
    target = attached.target
    if target.url is None:
        raise VramtuiError(f"{target.text}: no URL to reach the server at: the wizard needs one")
    pid = target.pid
    command = attached.command
    env: dict[str, str] = {}
    if pid is not None:
        seen = _environ(pid)
        keep = set(DEVICE_ENV)
        if command is not None and command.backend is not None:
            keep.update(v for v in command.backend.env.values() if v.isupper())
        env = {k: v for k, v in seen.items() if k in keep}
    hint = _model_from_endpoints(attached.endpoints)
    return Running(target, pid, target.url, command, _cwd(pid) if pid else None, env, hint)


def _absolute(path: str, cwd: str | None) -> str:
    """A relative model or program path as the process saw it (relative to its own directory)."""
    if os.path.isabs(path) or cwd is None or ("/" not in path and not Path(cwd, path).exists()):
        return path
    return str(Path(cwd, path))


def _env_params(running: Running) -> dict[str, object]:
    """Shared parameters the running engine takes from its environment."""
    command = running.command
    if command is None or command.backend is None:
        return {}
    return env_params(command.backend, running.env)


def env_params(backend: Backend, env: Mapping[str, str]) -> dict[str, object]:
    """Shared parameters an engine takes from its environment (Ollama's OLLAMA_CONTEXT_LENGTH ...)."""
    params: dict[str, object] = {}
    for param, name in backend.env.items():
        if name.isupper() and name in env:
            raw = env[name]
            params[param] = int(raw) if raw.isdigit() else raw
    return params


def program_of(argv: list[str], backend: Backend) -> str:
    """The program a relaunch runs: an engine's console script, not the interpreter the kernel shows it
    under (`python .../bin/vllm serve ...`: QA 30 S14, a profile with `program = ".../bin/python"` ran
    `python serve MODEL`)."""
    interpreter = os.path.basename(argv[0]).startswith("python") and len(argv) > 1
    script = backend.launch is not None and backend.launch.program[0] != "{python}"
    if interpreter and script and not argv[1].startswith("-"):
        return argv[1]
    return argv[0]


def attached_profile(running: Running, memory_budget: int | None = None) -> Profile:
    """The running server as a profile: what the wizard reasons about and what a relaunch runs."""
    command = running.command
    backend = command.backend if command else None
    if command is None or backend is None or backend.launch is None:
        why = "its command line cannot be read" if command is None else "it is no engine vramtui knows"
        raise VramtuiError(
            f"{running.target.text}: {why}, so vramtui cannot rebuild its command with a change"
        )
    model = command.model or (running.model_hint if backend.launch.model_at_request else None)
    if not model:
        raise VramtuiError(f"{running.target.text}: its command line names no model")
    program = program_of(command.argv, backend)
    params = as_sizes({**_env_params(running), **command.params, **command.extra})
    return Profile(
        backend=backend,
        model=_absolute(model, running.cwd) if backend.model_is_file else model,
        params=params,
        memory_budget=memory_budget,
        host=command.host or "127.0.0.1",
        port=command.port if command.port is not None else running.port,
        extra_args=tuple(command.unread),
        env=dict(running.env),
        program=_absolute(program, running.cwd) if "/" in program else None,
    )


@dataclass
class ChangedCommand:
    """The server's command with one change, and how to apply it where the server runs."""

    argv: list[str]
    env: dict[str, str]  # what differs from the environment it runs with now
    changes: dict[str, tuple[object, object]]  # parameter -> (now, after)
    how: list[str]  # what to do, in the words of where it runs (shell, docker, systemd, Ollama)

    @property
    def shell(self) -> str:
        assignments = [f"{k}={shlex.quote(v)}" for k, v in self.env.items()]
        return " ".join([*assignments, shlex.join(self.argv)])

    def to_dict(self) -> dict[str, object]:
        return {
            "argv": self.argv,
            "env": self.env,
            "command_line": self.shell,
            "changes": {k: {"from": a, "to": b} for k, (a, b) in self.changes.items()},
            "how": self.how,
        }


def _launch_env(profile: Profile) -> dict[str, str]:
    """The environment the Backend's translation sets, less what vramtui adds for its own logs."""
    plan = build_command(profile)
    launch = profile.backend.launch
    log_env = launch.log_env if launch is not None else {}
    env = {**profile.env, **{k: v for k, v in plan.env.items() if k not in log_env}}
    return env


def rebuilt(profile: Profile) -> Profile:
    """The profile whose pass-through words set none of the flags its parameters are rebuilt into:
    the engine takes a flag's last value, so a server's own `-ctv f16` left after a rebuilt
    `--cache-type-v q4_0` would undo the change. Removed in whichever spelling the server used."""
    launch = profile.backend.launch
    if launch is None or not profile.extra_args:
        return profile
    plan = build_command(profile.with_changes(extra_args=(), port=profile.port or launch.default_port))
    sets = flags_set(profile.backend, plan.argv[len(launch.argv_prefix()) :])
    kept, dropped = without_flags(profile.backend, profile.extra_args, sets)
    return profile.with_changes(extra_args=tuple(kept)) if dropped else profile


def changed_command(running: Running, before: Profile, after: Profile) -> ChangedCommand:
    """`after`'s command as the Backend builds it, and what to change where the server runs."""
    after = rebuilt(after)
    plan = build_command(after)
    env_before, env_after = _launch_env(before), _launch_env(after)
    env = {k: v for k, v in env_after.items() if env_before.get(k) != v}
    changes: dict[str, tuple[object, object]] = {}
    for name in sorted({*before.params, *after.params}):
        if before.params.get(name) != after.params.get(name):
            changes[name] = (before.params.get(name), after.params.get(name))
    if before.model != after.model:
        changes["model"] = (before.model, after.model)
    options = {**plan.request_options}
    argv = _own_listen_address(running, after, plan.argv)
    how = _how(running, argv, env, options)
    return ChangedCommand(argv, env, changes, how)


def _own_listen_address(running: Running, profile: Profile, argv: list[str]) -> list[str]:
    """The command with the server's own listen address: a server started without a host flag keeps the
    engine's default (vLLM's: every interface), not vramtui's 127.0.0.1, which would be a second change
    the proposal does not name (QA 37 F9: a server others used became local-only)."""
    launch = profile.backend.launch
    flag = launch.host_flag if launch is not None else None
    if running.command is None or running.command.host is not None or not flag or flag not in argv:
        return argv
    at = argv.index(flag)
    return argv[:at] + argv[at + 2 :]


def candidate_profile(profile: Profile, proposal: Any) -> Profile:
    """The profile with the wizard's proposed change applied (a parameter, or the model file)."""
    if proposal.param == "model":
        return profile.with_changes(model=str(proposal.to))
    return profile.with_param(proposal.param, proposal.to)


def proposed_command(running: Running, profile: Profile, proposal: Any) -> ChangedCommand:
    """The command a proposal asks the user to restart with: what the CLI prints and the pane shows."""
    return changed_command(running, profile, candidate_profile(profile, proposal))


def _how(running: Running, argv: list[str], env: dict[str, str], options: dict[str, object]) -> list[str]:
    """The instructions for this kind of target; the exact command is always among them."""
    target = running.target
    sets = " ".join(f"{k}={v}" for k, v in env.items())
    lines: list[str] = []
    if target.kind == "docker":
        lines.append(f"recreate the container {target.name} with its command: {shlex.join(argv[1:])}")
        if env:
            lines.append("and its environment: " + " ".join(f"-e {k}={v}" for k, v in env.items()))
    elif target.kind == "systemd":
        lines.append(f"systemctl edit --full {target.name}: ExecStart={shlex.join(argv)}")
        if env:
            lines.append(f"and Environment={sets}; then systemctl restart {target.name}")
        else:
            lines.append(f"then systemctl restart {target.name}")
    elif env and running.command is not None and running.command.backend is not None:
        launch = running.command.backend.launch
        if launch is not None and launch.model_at_request:  # Ollama: its server reads the environment
            lines.append(f"restart the server with {sets} in its environment (a service: systemctl edit)")
        else:
            lines.append(f"stop PID {running.pid} and start it again with {sets}, as the command says")
    else:
        lines.append(f"stop PID {running.pid} and start it again with the command below")
    for knob, value in options.items():
        lines.append(f"send {knob}={value} with each request (or PARAMETER {knob} {value} in the Modelfile)")
    return lines


def answers_health(url: str, paths: tuple[str, ...]) -> bool:
    for path in paths or ("/v1/models",):
        try:
            status, _body = fetch(url.rstrip("/") + path, timeout_s=2.0)
        except Unreachable:
            return False
        if 200 <= status < 300:
            return True
    return False


def _current_pid(running: Running) -> int | None:
    """Who serves now: the container's or unit's main process again, else the port's owner."""
    if running.in_box:
        try:
            return resolve(parse_target(running.target.text)).pid
        except VramtuiError:
            return None  # stopped, between a stop and a start
    return pid_listening_on(running.port)


def wait_for_restart(
    running: Running,
    health_paths: tuple[str, ...],
    timeout_s: float,
    on_wait: object = None,
    poll_s: float = POLL_S,
    cancel: threading.Event | None = None,
) -> int:
    """Wait for a new process serving where the old one did (the same port, or the same container or
    unit); returns its PID once it answers its health check. The old PID answering is no restart.
    `cancel` set (the app's user stopped waiting, or quit) ends the wait with a VramtuiError."""
    deadline = time.monotonic() + timeout_s
    old = running.pid
    while time.monotonic() < deadline:
        pid = _current_pid(running)
        if pid is not None and pid != old and answers_health(running.url, health_paths):
            return pid
        if cancel is not None and cancel.wait(poll_s):
            raise VramtuiError(
                f"stopped waiting for a restart at {running.url}: nothing was verified or recorded as applied"
            )
        if cancel is None:
            time.sleep(poll_s)
    still = "still serves" if old is not None and psutil.pid_exists(old) else "is gone"
    raise VramtuiError(
        f"no new server answered at {running.url} within {timeout_s:g} s (PID {old} {still}): "
        "nothing was verified or recorded as applied"
    )


def command_of(pid: int) -> ServerCommand | None:
    try:
        return process_command(pid)
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return None


def stop_process(pid: int, grace_s: float = 10.0) -> None:
    """SIGTERM a server and its children, SIGKILL what is left after `grace_s`. Only ever called on a
    process vramtui did not start after the user said yes (the take-over)."""
    try:
        root = psutil.Process(pid)
        processes = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return
    except psutil.AccessDenied as error:
        raise VramtuiError(f"not permitted to stop PID {pid}: {error}") from None
    for process in processes:
        try:
            process.send_signal(signal.SIGTERM)
        except psutil.NoSuchProcess:
            continue
        except psutil.AccessDenied:
            raise VramtuiError(f"not permitted to stop PID {process.pid} (another user's process)") from None
    _gone, alive = psutil.wait_procs(processes, timeout=grace_s)
    for process in alive:
        try:
            process.kill()
        except psutil.NoSuchProcess:
            continue
    psutil.wait_procs(alive, timeout=5.0)
