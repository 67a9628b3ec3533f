"""Launch a model server from a profile, watch it come up, measure it, stop it; `run_check` does all four.

`build_command(profile)` turns the shared vocabulary into the backend's argument list (never a shell
string) and lists what the backend cannot take. `ModelServer` owns one run: its own process group,
every output line timestamped into the log engine and a per-run log file, readiness by the backend's
health endpoint, the memory of its process tree (host RSS and GPU bytes), the memory budget, and a stop
that waits until the memory is given back. `run_check` is launch → ready → smallest request → stop.

The per-run log file holds every line with its local time in front (`2026-11-30T04:21:00.123 ...`),
a prefix the log engine strips: `vramtui diagnose` reads it like the raw output.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import shlex
import shutil
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from vramtui.core.backends.base import kv_set_outright, sizing_params
from vramtui.core.errors import VramtuiError
from vramtui.core.launch import procs
from vramtui.core.launch.billcheck import LaunchEstimate, run_bill
from vramtui.core.launch.footprint import engine_build, measured_floor
from vramtui.core.launch.health import HealthProbe
from vramtui.core.launch.pipe import LineReader
from vramtui.core.launch.profile import BUDGET_WHERE, Profile, missing_program
from vramtui.core.launch.runlog import RunLogFile
from vramtui.core.launch.smoke import SmokeResult, replay_request, smoke_request
from vramtui.core.logs import ownlines
from vramtui.core.logs.lastwords import last_words
from vramtui.core.logs.stages import STAGES, furthest, stage_index
from vramtui.core.logs.textclean import said_words
from vramtui.core.memory.readings import Event
from vramtui.core.memory.reconcile import Reconciliation
from vramtui.core.units import MIB

# Failures the launcher itself names (the log engine names the rest).
COMMAND_NOT_FOUND = "command_not_found"
PORT_IN_USE = "port_in_use"
READY_TIMEOUT = "ready_timeout"
# How long a port may answer in no HTTP before the wait stops (an engine answers HTTP once it listens)
_NOT_HTTP_S = 10.0
_ERRING_S = 30.0  # a readiness probe answered HTTP 500 this long: it is not coming up (QA 26 D3)
EXITED = "exited"
CUDA_OOM = "cuda_oom"  # the run crossed the GPU memory budget
BAD_ARGUMENTS = "bad_arguments"  # the server refused its own command line before loading anything
MODEL_NOT_FOUND = "file_missing"  # the profile's model file is not there (the log class of the same name)
BUDGET_BELOW_ENGINE = "budget_start"  # the log class of a budget the engine cannot start under
STOPPED_BY_VRAMTUI = "stopped_by_vramtui"  # we stopped it before it was ready (ctrl-c, quit, a budget)

# How servers refuse a command line: argparse (llama_cpp.server, vLLM, the transformers runner),
# llama.cpp's common arg parser, Go's cobra (Ollama); and how a program that is no model server refuses
# the flags vramtui passes: GNU getopt ("sleep: unrecognized option '--model'", "invalid option -- 'x'"),
# BSD and busybox getopt, Go's flag package, click. Group 1 is what was refused.
_BAD_ARGUMENT_PATTERNS = (
    re.compile(r"error: (unrecognized arguments?: .+)", re.IGNORECASE),
    re.compile(r"error: (argument \S+: .+)", re.IGNORECASE),
    re.compile(r"error: (the following arguments are required: .+)", re.IGNORECASE),
    re.compile(r"error: ((?:invalid|unknown) argument: .+)", re.IGNORECASE),
    re.compile(r"(error while handling argument .+)", re.IGNORECASE),
    re.compile(r"Error: (unknown (?:shorthand )?flag: .+)"),
    re.compile(r"(?:^|: )((?:unrecognized|unknown|invalid|illegal) option\b.+)", re.IGNORECASE),
    re.compile(r"(?:^|: )(option '[^']+' (?:requires an argument|is ambiguous|doesn't allow an argument).*)"),
    re.compile(r"(?:^|: )(option requires an argument -- .+)"),
    re.compile(r"(flag provided but not defined: .+)"),
    re.compile(r"Error: (no such option: .+)", re.IGNORECASE),
)


@dataclass(frozen=True)
class LaunchPlan:
    argv: list[str]
    env: dict[str, str]  # only what the plan sets; the launch merges it over the current environment
    unsupported: list[str]  # shared parameters this backend does not take (see notes for why)
    notes: list[str] = field(default_factory=list)
    request_options: dict[str, object] = field(default_factory=dict)
    backend: str = ""  # the backend's name, as printed and saved
    host: str = "127.0.0.1"
    port: int = 0
    model_name: str = ""  # the name to send in requests
    health_paths: tuple[str, ...] = ()
    ready_patterns: tuple[str, ...] = ()

    @property
    def base_url(self) -> str:
        host = "127.0.0.1" if self.host in {"0.0.0.0", "", "*"} else self.host
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self.port}"

    def command_line(self) -> str:
        """The exact command, as a user would paste it into a shell (environment first)."""
        assignments = [f"{k}={shlex.quote(v)}" for k, v in self.env.items()]
        return " ".join([*assignments, shlex.join(self.argv)])


def build_command(profile: Profile) -> LaunchPlan:
    """The argument list, environment and unsupported parameters for launching `profile`."""
    backend = profile.backend
    launch = backend.launch
    if launch is None:
        raise VramtuiError(f"vramtui cannot launch {backend.name}")
    port = profile.port if profile.port is not None else launch.default_port
    if port == 0:
        port = procs.free_port(profile.host if profile.host not in {"0.0.0.0", ""} else "127.0.0.1")

    argv = launch.argv_prefix()
    if profile.program:  # the profile names the binary (a build of its own, not the one on PATH)
        argv[0] = profile.program
    env: dict[str, str] = {}
    if not launch.model_at_request:
        argv += [launch.model_flag, profile.model] if launch.model_flag else [profile.model]
    if launch.host_flag and launch.port_flag:
        argv += [launch.host_flag, profile.host, launch.port_flag, str(port)]
    if launch.host_port_env:
        env[launch.host_port_env] = f"{profile.host}:{port}"
    env.update({k: v for k, v in launch.log_env.items() if k not in profile.env})

    unsupported: list[str] = []
    notes: list[str] = []
    request_options: dict[str, object] = {}
    for param, value in profile.params.items():
        if param in launch.extra_params:
            flag = launch.extra_params[param]
            argv += [flag, _flag_value(value)]
            continue
        if param in launch.switches:
            argv += list(launch.switch_args(param, value))
            continue
        if param not in backend.flags and param not in backend.env:
            unsupported.append(param)
            notes.append(_not_this_engines(param, backend))
            continue
        translation = backend.translate(param, value)
        if translation.problem:
            unsupported.append(param)
            notes.append(translation.problem)
            continue
        argv += list(translation.args)
        env.update(translation.env)
        request_options.update(translation.request_options)
    argv += list(profile.extra_args)

    model_name = profile.model
    for alias_param in ("model_alias", "alias", "served_model_name"):
        if alias_param in profile.params and alias_param in launch.extra_params:
            model_name = str(profile.params[alias_param])
    return LaunchPlan(
        argv=argv,
        env=env,
        unsupported=unsupported,
        notes=notes,
        request_options=request_options,
        backend=backend.name,
        host=profile.host,
        port=port,
        model_name=model_name,
        health_paths=launch.health_paths,
        ready_patterns=launch.ready_patterns,
    )


def pin_port(profile: Profile, unset_is_free: bool = True) -> Profile:
    """A profile whose port 0 ("auto") is replaced by a free port now, so that the command shown
    before launch is the command launched. With `unset_is_free`, a profile that sets no port gets a
    free one too (a check must not fail because something else sits on the engine's default port);
    a port the profile sets stays, busy or not: the launch then names who holds it."""
    if profile.port == 0 or (profile.port is None and unset_is_free):
        return profile.with_changes(port=build_command(profile.with_changes(port=0)).port)
    return profile


def _not_this_engines(param: str, backend: Any) -> str:
    """A parameter this engine has no flag for: another engine's (named), or none vramtui knows."""
    from vramtui.core.backends import BACKENDS

    owners = [other.name for other in BACKENDS.values() if param in other.flags or param in other.env]
    if owners:
        return f"{param}: {backend.name} has no such setting (it is for {' and '.join(owners)})"
    return f"{param}: not a parameter vramtui knows for {backend.name}"


def _flag_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class LaunchError(VramtuiError):
    """The server could not be started at all; `failure` names why (command_not_found, port_in_use)."""

    def __init__(self, failure: str, message: str) -> None:
        super().__init__(message, exit_code=1)
        self.failure = failure


@dataclass(frozen=True)
class LogLine:
    t: float  # seconds since the epoch
    text: str
    stage: str | None = None
    severity: str = "info"
    # The log engine's number for this line (its diagnosis names lines by it); None for a line the
    # engine did not read (a note about the run, like a budget crossing).
    number: int | None = None


# The memory pane's Event (t, kind, label): launch | weights_loaded | ready | request_start | request_end | exit
RunEvent = Event


def default_log_dir() -> Path:
    """The run store: logs and their records ($VRAMTUI_DATA_DIR/runs, else the user data dir's)."""
    from vramtui.core.estimate.calibrate import runs_dir

    return runs_dir()


def _make_diagnoser(backend: str) -> Any | None:
    try:
        from vramtui.core.logs.diagnose import LogDiagnoser
    except ImportError:
        return None
    return LogDiagnoser(backend=backend)


def fit_to_budget(
    plan: LaunchPlan, profile: Profile, budget_mode: str | None, budget: int | None
) -> str | None:
    """An engine that fits itself to the card (llama-server's --fit) measures the real card, not the
    budget vramtui emulates: under a GPU budget give it the margin that leaves only the budget (added to
    `plan.argv`); under a host budget say that its fit does not see the address-space limit. Returns the
    note to log, or None."""
    launch = profile.backend.launch
    flag = launch.fit_target_flag if launch is not None else None
    fit = str(profile.params.get("fit", profile.backend.default("fit") or "")).strip().lower()
    if budget is None or flag is None or fit in {"off", "false", "0", "no"}:
        return None
    if budget_mode != "gpu":
        return "the engine's fit measures physical memory: it does not see the host budget"
    if flag in plan.argv:
        return None  # the user set the margin: theirs wins
    from vramtui.core.memory.nvml import first_gpu_total_bytes

    total = first_gpu_total_bytes()
    if total is None or total <= budget:
        return None
    margin = max(1024, int((total - budget) / MIB))
    plan.argv[1:1] = [flag, str(margin)]
    return f"the engine's fit targets the budget: {flag} {margin} MiB left free on the card"


def budget_on_gpu(source: Any, profile: Profile) -> bool:
    """Is the GPU where the budget applies? Only with GPUs visible and layers (or all) on them."""
    if source is None or not getattr(source, "available", False):
        return False
    backend = profile.backend
    if backend.offloads_layers:
        # The engine's default when unset: llama-cpp-python's server keeps every layer on the host
        # (n_gpu_layers=0); llama-server and Ollama offload by default.
        layers = profile.params.get("gpu_layers", backend.default("gpu_layers"))
        return str(layers).strip().lower() != "0"
    return True


def exit_words(code: int | None, ready_at: float | None, started_at: float | None) -> str:
    """How a server ended, by the signal's name, and when against ready: "the server was killed by SIGKILL
    (signal 9) 42 s after it was ready"."""
    if code is None:
        return "the server is still running"
    if code >= 0:
        return f"the server exited with status {code}"
    try:
        name = signal.Signals(-code).name
    except ValueError:
        name = f"signal {-code}"
    when = ""
    if ready_at is not None:
        when = f" {time.time() - ready_at:.0f} s after it was ready"
    elif started_at is not None:
        when = f" {time.time() - started_at:.0f} s after launch, before it was ready"
    return f"the server was killed by {name} (signal {-code}){when}"


def preflight(plan: LaunchPlan, profile: Profile, sample_source: Any) -> list[str]:
    """Problems found before launch: a missing program, a busy port (raised), GPU memory already held."""
    program = plan.argv[0]
    search_path = {**os.environ, **profile.env}.get("PATH")
    if shutil.which(program, path=search_path) is None:
        said = missing_program(profile.backend) if not profile.program else None
        raise LaunchError(COMMAND_NOT_FOUND, said or f"program not found: {program}")
    if procs.port_in_use(plan.host, plan.port):
        holder = procs.port_holder(plan.port)
        who = f" by {holder}" if holder else ""
        raise LaunchError(
            PORT_IN_USE,
            f"port {plan.port} on {plan.host} is already in use{who}: stop it or set another port",
        )
    below = budget_below_engine(profile, sample_source)
    if below:
        raise LaunchError(BUDGET_BELOW_ENGINE, below)
    return [
        *gpu_holders(sample_source),
        *machine_share(profile, sample_source),
        *on_cpu_ignored(profile, sample_source),
    ]


def budget_below_engine(profile: Profile, sample_source: Any) -> str | None:
    """A host budget under what the engine's largest process maps before any model buffer (its Backend's
    address_space_floor): it cannot start under it, whatever its settings (QA 29: vLLM's CPU build under 1
    GiB failed 15 s after launch, and read as two different errors from run to run)."""
    budget, floor = profile.memory_budget, profile.backend.address_space_floor
    if not budget or not floor or budget_on_gpu(sample_source, profile):
        return None
    estimated = load_over_budget(profile)
    if budget >= floor:
        return estimated
    below = (
        f"the memory budget of {budget / MIB:.0f} MiB is below the {floor / MIB:.0f} MiB of address space "
        f"{profile.backend.name}'s largest process maps before its weights and KV cache"
    )
    if estimated:  # the least budget, as `vramtui estimate` says it (QA 35 F5: three figures for one floor)
        return f"{below}; {estimated}"
    return (
        f"{below}: it cannot start under it; raise the memory budget {BUDGET_WHERE} well above "
        f"{floor / MIB:.0f} MiB (`vramtui estimate` with --memory-budget gives the least that holds the model too)"
    )


def load_over_budget(profile: Profile) -> str | None:
    """Where the estimate says the engine cannot even load this model under the host budget (vLLM's CPU
    worker maps the checkpoint beside the weights it fills: measured, QA 33 V1), why, with the least budget;
    None where it loads, or where there is no estimate. QA 33 V6: check launched it anyway, failed 35 s
    later, and advised "a smaller file" with no figure."""
    try:
        from vramtui.core.wizard.budget import MemoryModel  # the wizard's own settings for this profile

        model = MemoryModel(profile)
        estimate = model.estimate_of(profile) if model.host else None
    except Exception:  # an estimate that cannot be made refuses nothing: the launch speaks
        return None
    if estimate is None or estimate.load_peak_fits is not False or not estimate.reason:
        return None
    return f"{estimate.reason} {BUDGET_WHERE}; by vramtui's estimate of this model at these settings"


def on_cpu_ignored(profile: Profile, sample_source: Any) -> list[str]:
    """With no GPU, the settings the engine's CPU build takes and ignores, said before it launches."""
    from vramtui.core.backends.base import toml_spelling

    if sample_source is not None and getattr(sample_source, "available", False):
        return []
    backend = profile.backend
    return [
        f"{param} = {toml_spelling(profile.params[param])}: {backend.name}'s CPU build has no such path and "
        "runs without it"
        for param in backend.cpu_ignored
        if param in profile.params and backend.flags.get(param) is not None
    ]


def past_trained(profile: Profile) -> str | None:
    """A context past the model's trained length, where the engine takes it (vLLM refuses it before:
    runnable_refusal): it starts, and its answers degrade past that length."""
    backend, context = profile.backend, profile.params.get("context")
    if backend.context_limit_words or not isinstance(context, int) or isinstance(context, bool):
        return None
    try:
        from vramtui.core.estimate.modelinfo import load_model_info

        trained = load_model_info(profile.model).max_context
    except Exception:  # a model the estimator cannot read: nothing to say
        return None
    if not trained or context <= trained:
        return None
    if backend.caps_slot_at_trained:  # QA 32 D10: "answers degrade" beside the engine's own "capping" line
        slots = profile.params.get("parallel")
        if (
            isinstance(slots, int)
            and not isinstance(slots, bool)
            and slots > 1
            and context // slots <= trained
        ):
            return None  # each slot's share is within the trained length: nothing is capped
        return (
            f"context {context} is past the model's trained length {trained}: {backend.name} caps each slot "
            f"at {trained} tokens, so no request gets more (set context to what the slots need, or a rope "
            "scaling the model supports)"
        )
    return (
        f"context {context} is past the model's trained length {trained}: it starts, but its answers "
        "degrade past that length (set context to it or less, or a rope scaling the model supports)"
    )


def machine_share(profile: Profile, sample_source: Any) -> list[str]:
    """With no GPU, an engine that sizes its KV cache from a share of the whole machine, with nothing
    setting it outright: said before it takes most of the host's memory (QA 10: 22.5 of 23.5 GiB)."""
    backend = profile.backend
    if not backend.cpu_share_words or (
        sample_source is not None and getattr(sample_source, "available", False)
    ):
        return []
    if kv_set_outright(backend, profile.params, profile.env):
        return []
    import psutil

    from vramtui.core.units import format_bytes

    share = float(profile.params.get("mem_share") or backend.default("mem_share", None, True) or 0)  # type: ignore[arg-type]
    if share <= 0:
        return []
    total = psutil.virtual_memory().total
    return [backend.cpu_share_words.format(share=f"{share:.0%}", size=format_bytes(int(total * share), 1))]


class ModelServer:
    """One run of a model server. Use as a context manager: the server is stopped on exit, always.

    `on_line(text)` gets every output line as it arrives (`on_log_line(LogLine)` the same with its
    time, stage and severity from the log engine); `on_sample(sample)` every memory sample
    (host tree RSS, and GPU bytes when `sample_source` is an NVML source). `memory_budget` (from the
    profile) caps the run: an address-space limit on the host, or a watch on its GPU bytes.
    """

    def __init__(
        self,
        profile: Profile,
        log_dir: str | Path | None = None,
        on_line: Callable[[str], None] | None = None,
        sample_source: Any | None = None,
        on_sample: Callable[[Any], None] | None = None,
        on_event: Callable[[RunEvent], None] | None = None,
        sample_interval_s: float = 0.1,
        on_log_line: Callable[[LogLine], None] | None = None,
    ) -> None:
        self.profile = profile
        self.plan = build_command(profile)
        self.log_dir = Path(log_dir) if log_dir is not None else default_log_dir()
        self.on_line = on_line
        self.on_log_line = on_log_line
        self.on_sample = on_sample
        self.on_event = on_event
        self.sample_source = sample_source
        self.sample_interval_s = sample_interval_s
        self.diagnoser = _make_diagnoser(self.plan.backend)

        self.proc: subprocess.Popen[bytes] | None = None
        self.log_file: Path | None = None
        self.lines: list[LogLine] = []
        self.events: list[RunEvent] = []
        self.health = HealthProbe(self.plan.health_paths)
        self.warnings: list[str] = []
        self.stage: str | None = None  # furthest stage reached
        self.failure: str | None = None  # set by the launcher (timeout, budget, launch errors)
        self.failure_stage: str | None = None
        self.failure_message = ""  # the launcher's own words for `failure`
        self.ready = False
        self.started_at: float | None = None
        self.ready_at: float | None = None
        self.exit_code: int | None = None
        self.stopped_by_us = False
        self.peak_bytes = 0
        # What the tree holds while it runs: the last sample before a stop began (a tree being torn down
        # reads what is left of it: vLLM's API server alone after its engine and worker were killed).
        self.resident_bytes = 0
        self._stopping = False
        self._died_on_its_own = False
        # The run's own samples: the wizard's readings (core.memory.series.run_readings) come from them.
        self.samples: deque[Any] = deque(maxlen=36_000)
        self.peak_gpu_bytes: int | None = None
        self.released: bool | None = None
        self.budget_mode: str | None = None  # "host" | "gpu"
        self.budget_exceeded = False
        self._run_log: RunLogFile | None = None
        self._reader: LineReader | None = None
        self._watch: Any | None = None
        self._lock = threading.Lock()
        self._ready_seen = threading.Event()
        self._last_pids: tuple[int, ...] = ()
        self.record_file: Path | None = None  # the run's record in the store (core/launch/runrecord.py)
        self.request: SmokeResult | None = None  # the smallest request's answer, for the run's record
        self.launch_estimate: LaunchEstimate | None = None  # the estimate as it stood at launch

    # --- properties the panes read -------------------------------------------------------------------
    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    @property
    def base_url(self) -> str:
        return self.plan.base_url

    @property
    def command(self) -> list[str]:
        return list(self.plan.argv)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    # --- start ---------------------------------------------------------------------------------------
    def preflight(self) -> list[str]:
        return preflight(self.plan, self.profile, self.sample_source)

    def bill(self) -> Reconciliation | None:
        """The estimate at launch, the buffers the engine printed and the memory measured, per term and
        device (core/memory/reconcile.py); None before launch."""
        if self.proc is None:
            return None
        diagnosis = self.diagnosis()
        figures = dict(getattr(diagnosis, "engine_figures", None) or {})
        failed = not self.ready and bool(
            getattr(diagnosis, "failed", False)
        )  # never got to its later buffers
        return run_bill(self.launch_estimate, figures, list(self.samples), failed=failed)

    def start(self) -> ModelServer:
        """Launch. Raises LaunchError when it cannot start at all (the failure is also recorded)."""
        procs.raise_pending_interrupt()  # no new server after a ctrl-c, even one Python swallowed
        try:
            self.warnings.extend(self.preflight())
        except LaunchError as error:
            self.failure = error.failure
            self.failure_stage = "launch"
            self.failure_message = str(error)
            raise
        self.warnings.extend(self.plan.notes)
        if self.diagnoser is not None:
            # NVML found no GPU here: a log with every buffer on the CPU is this machine's only way to run,
            # not a quiet failure to warn about (QA 16)
            self.diagnoser.gpu_absent = first_card_bytes(self.sample_source) is None and not _any_gpu()
        budget = self.profile.memory_budget
        address_limit = None
        if budget is not None:
            self.budget_mode = "gpu" if budget_on_gpu(self.sample_source, self.profile) else "host"
            if self.budget_mode == "host":
                address_limit = budget
                if self.diagnoser is not None:
                    self.diagnoser.host_budget = True  # its allocation failures are the budget's OOM

        self.log_dir.mkdir(parents=True, exist_ok=True)
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S-%f")
        label = "".join(c if c.isalnum() or c in "-_." else "_" for c in self.profile.label)[:60]
        self.log_file = self.log_dir / f"{stamp}-{label}.log"
        self._run_log = RunLogFile(self.log_file)
        procs.add_stop_note(self._say_exit_stop)
        self.started_at = time.time()
        fit_note = fit_to_budget(self.plan, self.profile, self.budget_mode, budget)
        # The log says how the run was made: a saved log then reads back like the live run.
        self._record_line(f"{ownlines.LAUNCH}{self.plan.command_line()}")
        if fit_note:
            self._record_line(f"vramtui: {fit_note}")
        if budget is not None:
            where = "on the host (address-space limit)" if self.budget_mode == "host" else "on the GPU"
            self._record_line(f"{ownlines.BUDGET}{budget / MIB:.0f} MiB, enforced {where}")
            floor = measured_floor(self.profile) if self.budget_mode == "host" else None
            if floor:  # what the budget holds besides the engine itself, for diagnose's sizing (QA 23 D4)
                self._record_line(
                    f"vramtui: the engine itself needs {floor / MIB:.0f} MiB of it to come up (measured)"
                )
        past = past_trained(self.profile)
        if past:  # in the log, so that the log pane and `diagnose` say it too (QA 11: only `estimate` did)
            self.warnings.append(past)
            self._record_line(f"vramtui: {past}")

        env = {**os.environ, **self.profile.env, **self.plan.env}
        cwd = self.profile.source.parent if self.profile.source else None
        try:
            self.proc = procs.spawn(self.plan.argv, env=env, cwd=cwd, address_space_limit=address_limit)
        except (FileNotFoundError, PermissionError) as error:
            self._close_log()
            self.failure, self.failure_stage = COMMAND_NOT_FOUND, "launch"
            self.failure_message = f"cannot run {self.plan.argv[0]}: {error.strerror}"
            raise LaunchError(COMMAND_NOT_FOUND, self.failure_message) from None
        # `vramtui ps` finds this log by it: the server's own output goes to our pipe, not to a file.
        self._record_line(f"{ownlines.SERVER_PID}{self.proc.pid}")
        self._event("launch", self.profile.label)
        profile = self.profile
        self.launch_estimate = LaunchEstimate(
            profile.model,
            sizing_params(profile.backend, profile.params, profile.env),
            profile.backend.name,
            budget_on_gpu(self.sample_source, self.profile),
            first_card_bytes(self.sample_source),
            engine_build(profile),
            host_budget=budget if self.budget_mode == "host" else None,
        )
        assert self.proc.stdout is not None
        self._reader = LineReader(self.proc.stdout, self._record_line, self._close_log)
        self._reader.start()
        self._start_watch()
        return self

    def _start_watch(self) -> None:
        from vramtui.core.memory.sampling import TreeWatch

        assert self.proc is not None
        nvml: Any = self.sample_source if self.sample_source is not None else False
        self._watch = TreeWatch(self.proc.pid, self.sample_interval_s, nvml=nvml, on_sample=self._on_sample)
        self._watch.start()

    def sample_now(self) -> None:
        """One memory sample at once (after a request, before the stop): a run of a second or two must
        not have its peak fall between two ticks of the watch."""
        watch = getattr(self, "_watch", None)
        if watch is not None and self.running:
            with contextlib.suppress(Exception):  # the measurement must never take the run down
                watch.sample_now()

    def _on_sample(self, sample: Any) -> None:
        host = sample.host
        rss = host.tree_rss if host is not None and host.tree_pids else None
        gpu = sample.tree_gpu_bytes()
        if host is not None and host.tree_pids:
            self._last_pids = host.tree_pids
        total = (rss or 0) + (gpu or 0)
        self.samples.append(sample)
        with self._lock:
            if rss:  # a dying tree reads 0: keep the last figure it held
                self.peak_bytes = max(self.peak_bytes, total)
                if not self._stopping:
                    self.resident_bytes = total
            if gpu is not None:
                self.peak_gpu_bytes = gpu if self.peak_gpu_bytes is None else max(self.peak_gpu_bytes, gpu)
        budget = self.profile.memory_budget
        if self.budget_mode == "gpu" and budget is not None and gpu is not None and gpu > budget:
            _stop_over_gpu_budget(self, gpu, budget)
        if self.on_sample is not None:
            with contextlib.suppress(Exception):
                self.on_sample(sample)

    def _record_line(self, text: str, feed: bool = True) -> None:
        t = time.time()
        stage, severity, number = None, "info", None
        if feed and self.diagnoser is not None:
            try:
                tag = self.diagnoser.feed(text)
                stage, severity, number = tag.stage, tag.severity, tag.number
            except Exception:  # the log engine must never take the run down
                pass
        with self._lock:
            if stage is not None and stage_index(stage) > stage_index(self.stage):
                if stage in {"kv_cache", "ready"} and stage_index(self.stage) < STAGES.index("kv_cache"):
                    self._event("weights_loaded", "")
                self.stage = stage
            record = LogLine(t, text, stage, severity, number)
            self.lines.append(record)
            failed = self._run_log.write(t, text) if self._run_log is not None else None
            if failed:  # a full disk: said once, the run goes on (QA: a thread traceback, then exit 3)
                self.warnings.append(f"the log could not be written: {failed}")
                self._event("log_write_failed", failed)
        lowered = text.lower()
        if any(p in lowered for p in self.plan.ready_patterns):
            self._ready_seen.set()
        if self.on_line is not None:
            with contextlib.suppress(Exception):
                self.on_line(text)
        if self.on_log_line is not None:
            with contextlib.suppress(Exception):
                self.on_log_line(record)

    def _say_exit_stop(self) -> None:
        _say_exit_stop(self)  # a bound method: procs holds its stop notes weakly

    def _close_log(self) -> None:
        procs.remove_stop_note(self._say_exit_stop)
        with self._lock:
            if self._run_log is not None:
                self._run_log.close()

    def _event(self, kind: str, label: str) -> None:
        event = RunEvent(time.time(), kind, label)
        self.events.append(event)
        if self.on_event is not None:
            with contextlib.suppress(Exception):
                self.on_event(event)

    # --- ready ---------------------------------------------------------------------------------------
    def wait_ready(self, timeout_s: float | None = None) -> bool:
        """Wait until the backend answers its health check; False when it exited, crossed a budget or timed out."""
        if self.proc is None:
            return False
        if timeout_s is None:
            timeout_s = self.profile.ready_timeout or 120.0
        deadline = time.monotonic() + timeout_s
        while True:
            procs.raise_pending_interrupt()
            if self.budget_exceeded:
                return False
            if self.proc.poll() is not None:
                self._note_exit()
                return False
            # The process could have died in the same instant; a dead server is not ready.
            if self.health.ready(self.base_url) and self.proc.poll() is None:
                self.ready = True
                self.ready_at = time.time()
                with self._lock:
                    if stage_index(self.stage) < STAGES.index("ready"):
                        self.stage = "ready"
                self._event("ready", "")
                return True
            waited = _gave_up(self.health, time.monotonic() >= deadline, timeout_s)
            if waited:
                self.failure = READY_TIMEOUT
                self.failure_stage = self.stage or "launch"
                self.failure_message = f"not ready {waited}; stuck at stage {self.failure_stage}"
                if self.health.said:  # QA: a 500 or a listener in no HTTP read as a large model loading
                    self.failure_message += f"; {self.health.said}"
                self._record_line(f"vramtui: {self.failure_message}")  # the diagnosis marks it (QA 26 D3)
                return False
            # A ready line in the log: look again at once instead of sleeping.
            self._ready_seen.wait(0.25)
            self._ready_seen.clear()

    def _note_exit(self) -> None:
        if self.proc is None or self.exit_code is not None:
            return
        self.exit_code = self.proc.wait()
        if self._reader is not None:
            self._reader.join(timeout=5.0)
        # A group vramtui signalled (stop(), a budget crossing, the exit handlers) died of our signal; a
        # server that died before that (the OOM killer, a crash) did not, whatever vramtui sent after.
        if not self._died_on_its_own:
            self.stopped_by_us = self.stopped_by_us or procs.signalled_by_us(self.proc.pid)
        if not self.stopped_by_us and (self.exit_code not in (None, 0) or not self.ready):
            # in the run's log too: `vramtui diagnose` on it later reads how it ended (QA 19 F3: an exit
            # status of 1 left no line, and the saved log read "no failure"; QA 20 D2: nor did status 0)
            said = exit_words(self.exit_code, self.ready_at, self.started_at)
            self._record_line(f"vramtui: {said}{' before it was ready' if self.exit_code == 0 else ''}")
        if self.profile.memory_budget is not None and self.peak_bytes and not self.ready:
            # what the engine held under the budget when it failed: the room its advice sizes from, in
            # the saved log as in the live run (QA 19 F2: diagnose sized a KV cache beside vLLM's printed
            # non-KV memory, 0.55 GiB, where its process held 1.6 GiB, and the size it gave failed again)
            self._record_line(
                f"vramtui: the server's process tree held at most {self.peak_bytes / MIB:.0f} MiB"
            )
        if self.stopped_by_us and not self.ready and self.failure is None:
            self.failure, self.failure_stage = STOPPED_BY_VRAMTUI, self.stage or "launch"
            self.failure_message = f"stopped by vramtui at stage {self.failure_stage}, before it was ready"
            self._record_line(f"vramtui: {self.failure_message}", feed=False)
        if not self.stopped_by_us and self.diagnoser is not None:
            with contextlib.suppress(Exception):
                self.diagnoser.note_exit(self.exit_code)
                self.diagnoser.log_time = time.time()  # a kernel OOM kill about now is this process's
                self.diagnoser.log_start = self.started_at  # and one before its launch is not (QA 20 D6)
        self._event("exit", f"exit status {self.exit_code}")

    @property
    def load_time_s(self) -> float | None:
        if self.ready_at is None or self.started_at is None:
            return None
        return self.ready_at - self.started_at

    # --- stop ----------------------------------------------------------------------------------------
    def stop(self, grace_s: float = 5.0, release_timeout_s: float = 15.0) -> None:
        """SIGTERM the group, grace, SIGKILL; then wait until its memory is released."""
        if self.proc is None:
            return
        with self._lock:
            self._stopping = True
        if self.proc.poll() is not None and self.exit_code is None:
            self._died_on_its_own = True  # what stop_group sends now reaches only what it left behind
        if self.proc.poll() is None:
            self.stopped_by_us = True
            # Into the run log: a kill after this line is ours, not the OOM killer's (the diagnosis reads it).
            line = f"{ownlines.STOP} (SIGTERM, then SIGKILL after {grace_s:g} s)"
            if self._reader is None or not self._reader.say_after_pipe(line):
                self._record_line(line)
        procs.stop_group(self.proc, grace_s=grace_s)
        self._note_exit()
        if self._reader is not None:
            self._reader.join(timeout=5.0)
        self._close_log()
        if self._watch is not None:
            self._watch.stop()
        assert self.proc is not None
        pids = set(self._last_pids) | {self.proc.pid}
        self.released = wait_released(pids, self.sample_source, release_timeout_s)
        if self.record_file is None:  # once per run: its calibration record (estimate --no-calibrate)
            from vramtui.core.launch.runrecord import keep_run

            self.record_file = keep_run(self)

    # --- results -------------------------------------------------------------------------------------
    def diagnosis(self) -> Any | None:
        """The log engine's diagnosis; when the launcher itself named the failure (a busy port, a
        missing program, our own stop), one that says that failure, wherever a verdict is shown."""
        if self.diagnoser is None:
            return None
        try:
            diagnosis = self.diagnoser.result()
        except Exception:
            return None
        failure, stage, message = launcher_failure(self)
        if failure is None or _log_says_why(failure, diagnosis):
            return diagnosis
        return launcher_diagnosis(diagnosis, failure, stage, message, launcher_advice(failure, self))

    def __enter__(self) -> ModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _log_says_why(failure: str | None, diagnosis: Any) -> bool:
    """vramtui gave up on the server (a health check that never answered) or stopped it, where the log has
    a failure of its own with its line: that is the verdict, not the launcher's. QA 13: a runner up under a
    budget that could start no thread for a request; CI: a runner that printed its error, slow to exit."""
    return (
        failure in (READY_TIMEOUT, STOPPED_BY_VRAMTUI)
        and bool(getattr(diagnosis, "failed", False))
        and getattr(diagnosis, "first_error_line", None) is not None
    )


def launcher_failure(server: ModelServer) -> tuple[str | None, str | None, str]:
    """The failure the launcher names itself: (failure, stage, its message), or (None, None, "")."""
    if server.failure is not None and server.failure != CUDA_OOM:
        return server.failure, server.failure_stage, server.failure_message
    if server.failure == CUDA_OOM and server.budget_exceeded:
        return server.failure, server.failure_stage, server.failure_message
    if not server.ready and server.exit_code not in (None, 0):
        refused = refused_arguments(server.lines)
        if refused is not None:
            # argparse prints its usage and exits: nothing was loaded, whatever the usage resembles.
            return BAD_ARGUMENTS, "launch", _bad_arguments_message(refused, server.profile, server.plan)
    return None, None, ""


def gpu_holders(source: Any) -> list[str]:
    """What other processes hold on each GPU before a launch (said, never stopped)."""
    if source is None:
        return []
    try:
        sample = source.sample()
    except Exception:  # a monitor problem must not stop a launch
        return []
    notes = []
    for gpu in getattr(sample, "gpus", ()) or ():
        for pid, used in sorted(gpu.process_bytes.items()):
            name = procs.process_name(pid)
            notes.append(f"GPU {gpu.index}: pid {pid} ({name}) already holds {used / MIB:.0f} MiB")
    return notes


def _stop_over_gpu_budget(server: ModelServer, gpu: int, budget: int) -> None:
    """The run's GPU memory crossed its emulated budget: record it as an out-of-memory and stop the run."""
    with server._lock:
        if server.budget_exceeded:
            return
        server.budget_exceeded = True
        server.failure = CUDA_OOM
        server.failure_stage = server.stage or "load_weights"
        server.stopped_by_us = True  # the kill that follows is ours: its exit is no OOM killer's
    message = (
        f"vramtui: GPU memory {gpu / MIB:.0f} MiB crossed the budget of {budget / MIB:.0f} MiB "
        f"at stage {server.failure_stage}: stopping the run (emulated out of memory)"
    )
    server.failure_message = message.removeprefix("vramtui: ")
    server._record_line(message, feed=False)
    if server.proc is not None:
        threading.Thread(target=procs.stop_group, args=(server.proc, 2.0), daemon=True).start()


def _say_exit_stop(server: ModelServer) -> None:
    """vramtui is ending (a signal, its exit) with this server up: its stop line, before the exit paths kill
    the group, so that the log reads the kill as vramtui's (QA 38 F11). Runs in a signal handler: it never
    waits long for the lock the interrupted code may hold."""
    if server.proc is None or server.proc.poll() is not None or server._stopping:
        return
    if not server._lock.acquire(timeout=0.2):
        return
    try:
        if server._run_log is not None:
            server._run_log.write(time.time(), f"{ownlines.STOP} (vramtui is ending: a signal or its exit)")
    finally:
        server._lock.release()


def _any_gpu() -> bool:
    """Does NVML see a GPU on this machine (probed when no sampler was handed over)?"""
    from vramtui.core.memory.nvml import first_gpu_total_bytes

    return first_gpu_total_bytes() is not None


def first_card_bytes(source: Any) -> int | None:
    """The first card's size (what a share of the card is of), None without NVML."""
    try:
        sample = source.sample() if source is not None else None
    except Exception:  # a monitor problem must not stop a launch
        return None
    gpus = getattr(sample, "gpus", ()) or ()
    return gpus[0].total_bytes if gpus else None


def wait_released(pids: set[int], source: Any, timeout_s: float) -> bool:
    """True when no process of the run is left and no GPU memory is charged to its pids."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        alive = [p for p in pids if _pid_alive(p)]
        if not alive and not _gpu_bytes_of(pids, source):
            return True
        time.sleep(0.1)
    return False


def _gpu_bytes_of(pids: set[int], source: Any) -> int:
    if source is None:
        return 0
    try:
        sample = source.sample()
    except Exception:  # a monitor problem reads as nothing held
        return 0
    return int(sample.tree_gpu_bytes(pids) or 0) if sample is not None else 0


def _pid_alive(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


# --- run_check -----------------------------------------------------------------------------------------


@dataclass
class CheckResult:
    ready: bool
    stage: str | None  # furthest stage reached
    failure_stage: str | None
    failure: str | None  # the log engine's class, or the launcher's own (command_not_found ...)
    diagnosis: Any | None
    smoke: SmokeResult | None
    peak_mib: float | None
    resident_mib: float | None
    command: list[str]
    log_file: str | None
    load_time_s: float | None = None
    log_offset: int = 0  # where this run's lines start in log_file (a restarted server may append)
    ttft_s: float | None = None
    tokens_per_s: float | None = None
    command_line: str = ""
    backend: str = ""  # the backend's name, as printed and saved
    base_url: str = ""
    unsupported: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    message: str = ""  # one line for people: what happened
    exit_code: int | None = None
    memory_budget_mib: float | None = None
    budget_mode: str | None = None
    released: bool | None = None
    events: list[RunEvent] = field(default_factory=list)
    replay: SmokeResult | None = None  # the saved request, when one was replayed
    samples: list[Any] = field(default_factory=list, repr=False)  # the run's memory samples
    bill: Reconciliation | None = None  # estimate, printout and measurement per term and device

    @property
    def ok(self) -> bool:
        """Came up and answered (the saved request too, when one was replayed)."""
        answered = self.ready and self.smoke is not None and self.smoke.ok
        return answered and (self.replay is None or self.replay.ok)

    @property
    def engine_figures(self) -> dict[str, int]:
        return dict(getattr(self.diagnosis, "engine_figures", {}) or {})

    def to_dict(self) -> dict[str, object]:
        diagnosis = self.diagnosis.to_dict() if self.diagnosis is not None else None
        return {
            "ready": self.ready,
            "ok": self.ok,
            "stage": self.stage,
            "failure_stage": self.failure_stage,
            "failure": self.failure,
            "message": self.message,
            "smoke": self.smoke.to_dict() if self.smoke is not None else None,
            "replay": self.replay.to_dict() if self.replay is not None else None,
            "peak_mib": _round(self.peak_mib),
            "resident_mib": _round(self.resident_mib),
            "load_time_s": _round(self.load_time_s, 3),
            "ttft_s": _round(self.ttft_s, 4),
            "tokens_per_s": _round(self.tokens_per_s, 1),
            "command": self.command,
            "command_line": self.command_line,
            "backend": self.backend,
            "base_url": self.base_url,
            "log_file": self.log_file,
            "unsupported": self.unsupported,
            "warnings": self.warnings,
            "exit_code": self.exit_code,
            "memory_budget_mib": _round(self.memory_budget_mib),
            "budget_mode": self.budget_mode,
            "released": self.released,
            "engine_figures": self.engine_figures,
            "bill": self.bill.to_dict() if self.bill is not None else None,
            "diagnosis": diagnosis,
            "events": [{"t": e.t, "kind": e.kind, "label": e.label} for e in self.events],
        }


def _round(value: float | None, digits: int = 1) -> float | None:
    return None if value is None else round(value, digits)


def run_check(
    profile: Profile,
    ready_timeout_s: float | None = None,
    on_line: Callable[[str], None] | None = None,
    log_dir: str | Path | None = None,
    sample_source: Any | None = None,
    on_sample: Callable[[Any], None] | None = None,
    on_event: Callable[[RunEvent], None] | None = None,
    smoke_timeout_s: float = 30.0,
    on_start: Callable[[ModelServer], None] | None = None,
    on_log_line: Callable[[LogLine], None] | None = None,
    replay: dict[str, object] | None = None,
    replay_timeout_s: float = 300.0,
    keep_if_works: bool = False,
) -> CheckResult:
    """Launch `profile`, wait for ready (or failure), send the smallest request, stop, and report.

    Never raises for a server that fails: every way of failing is in the result.
    `on_start(server)` is called right after launch (the TUI follows the pid from there).
    `replay`: a saved chat request (the long one that failed) sent after the smallest request
    answered, to check a fix for an inference-stage failure.
    `keep_if_works`: a server that answered (and passed the replay) is left running for the caller,
    who got it from `on_start` and now owns its stop (the TUI keeps the verified server on screen).
    """
    server = ModelServer(
        profile,
        log_dir=log_dir,
        on_line=on_line,
        sample_source=sample_source,
        on_sample=on_sample,
        on_event=on_event,
        on_log_line=on_log_line,
    )
    smoke: SmokeResult | None = None
    replayed: SmokeResult | None = None
    launch_message = ""
    try:
        try:
            server.start()
        except LaunchError as error:
            launch_message = str(error)
        else:
            if on_start is not None:
                on_start(server)
            if server.wait_ready(ready_timeout_s):
                server._event("request_start", "smallest request")
                smoke = smoke_request(
                    server.base_url,
                    server.plan.model_name,
                    timeout_s=smoke_timeout_s,
                    options=server.plan.request_options or None,
                )
                server._event("request_end", smoke.meaning)
                server.request = smoke
                if smoke.status is not None:
                    server.stage = "inference"
                if replay is not None and smoke.ok and server.running:
                    server._event("request_start", "saved request")
                    replayed = replay_request(
                        server.base_url, replay, model=server.plan.model_name, timeout_s=replay_timeout_s
                    )
                    server._event("request_end", replayed.meaning)
                server.sample_now()
    finally:
        answered = smoke is not None and smoke.ok and (replayed is None or replayed.ok)
        if not (keep_if_works and answered and server.running):
            server.stop()
    return _result(server, smoke, launch_message, replayed)


# answers whose meaning is vramtui's guess from the text, and how they came back
_GUESSED = {"empty": " with empty text", "garbled": " with garbled text"}


def _told_by_log(request: SmokeResult | None, diagnosis: Any | None) -> SmokeResult | None:
    """An empty or broken answer whose server logged a failure while serving: the log's failure is why,
    not a guess from the answer (QA 21 F4: an out-of-memory request read "the chat template probably does
    not match the model")."""
    if (
        request is None
        or request.ok
        or request.kind not in _GUESSED  # an engine's own answer ("maximum context length is 2048") stays
        or diagnosis is None
        or not getattr(diagnosis, "failed", False)
        or getattr(diagnosis, "failure_stage", None) != "inference"
    ):
        return request
    from vramtui.core.logs.advice import FAILURE_WORDS

    words = FAILURE_WORDS.get(diagnosis.failure, diagnosis.failure)
    where = f" (line {diagnosis.first_error_line})" if diagnosis.first_error_line else ""
    how = _GUESSED[request.kind]
    said = f"answered {request.status}{how}, and the server's log says why: {words}{where}"
    return dataclasses.replace(request, meaning=said)


def refused_arguments(lines: list[LogLine]) -> str | None:
    """What the server said when it refused its command line (argparse, llama.cpp, cobra), or None."""
    for line in lines:
        for pattern in _BAD_ARGUMENT_PATTERNS:
            found = pattern.search(line.text)
            if found:
                return found.group(1).strip()
    return None


def _bad_arguments_message(refused: str, profile: Profile, plan: LaunchPlan) -> str:
    words = {word.strip("'\"") for word in refused.split(":", 1)[-1].split()}
    if not_the_server(refused, profile):
        return (
            f"{plan.argv[0]} is not {profile.backend.name}'s server: it refused {refused}, a flag "
            f"{profile.backend.name}'s server always takes; check program in the profile"
        )
    source = "extra_args" if words & set(profile.extra_args) else "the command line (extra_args and [params])"
    return f"the server refused its command line before loading anything: {refused}; check {source}"


def not_the_server(refused: str, profile: Profile) -> bool:
    """The program refused a flag vramtui always passes and the engine's server always takes (its model,
    host or port flag): whatever it is, it is not that engine's server (`program = "/bin/sleep"`)."""
    launch = profile.backend.launch
    if launch is None:
        return False
    always = {flag for flag in (launch.model_flag, launch.host_flag, launch.port_flag) if flag}
    said = {word.strip("'\"`,.") for word in re.split(r"[\s:=]+", refused)}
    return bool(always & said)


def _result(
    server: ModelServer, smoke: SmokeResult | None, launch_message: str, replayed: SmokeResult | None = None
) -> CheckResult:
    diagnosis = server.diagnosis()
    failure = server.failure
    failure_stage = server.failure_stage
    measured = server.proc is not None and bool(server.samples) and server.peak_bytes > 0
    stage = server.stage
    own, own_stage, own_message = launcher_failure(server)
    if own == BAD_ARGUMENTS:
        failure, failure_stage, stage = BAD_ARGUMENTS, own_stage, None
        launch_message = launch_message or own_message
    elif diagnosis is not None:
        stage = furthest(stage, getattr(diagnosis, "stage", None))
        # the health check never answered, and the log says why (QA 13: a runner up under a budget that
        # could start no thread for a request read "not ready within the timeout ... check the program")
        if (failure is None and getattr(diagnosis, "failed", False)) or _log_says_why(failure, diagnosis):
            failure = getattr(diagnosis, "failure", None)
            failure_stage = getattr(diagnosis, "failure_stage", None)
    if failure is None and not server.ready and server.exit_code is not None:
        failure, failure_stage = EXITED, stage or "launch"
        if diagnosis is not None:
            diagnosis = launcher_diagnosis(diagnosis, failure, failure_stage, last_error_line(server.lines))
    # Under a host budget the log engine itself names a failed allocation host_oom (it is told the
    # budget, and the run log's header says it): no second word scan here.
    if server.ready and smoke is not None and not smoke.ok and failure is None:
        failure, failure_stage = smoke.failure, "inference"
    if replayed is not None and not replayed.ok and failure is None:
        # The saved request still fails: what the log says about it, else how the answer failed.
        if diagnosis is not None and getattr(diagnosis, "failed", False):
            failure, failure_stage = diagnosis.failure, diagnosis.failure_stage
        else:
            failure, failure_stage = f"replay_{replayed.kind}", "inference"

    smoke, replayed = _told_by_log(smoke, diagnosis), _told_by_log(replayed, diagnosis)
    message = launch_message or _message(server, smoke, failure, failure_stage, diagnosis, replayed)
    budget = server.profile.memory_budget
    return CheckResult(
        ready=server.ready,
        stage=stage,
        failure_stage=failure_stage,
        failure=failure,
        diagnosis=diagnosis,
        smoke=smoke,
        # no sample taken, or none that read the tree (a process that died before the first, or whose tree
        # read 0 as it died): not measured, not "0 MiB" (QA 5, QA 16)
        peak_mib=server.peak_bytes / MIB if measured else None,
        resident_mib=server.resident_bytes / MIB if measured else None,
        command=server.command,
        log_file=str(server.log_file) if server.log_file else None,
        load_time_s=server.load_time_s,
        ttft_s=smoke.ttft_s if smoke else None,
        tokens_per_s=smoke.tokens_per_s if smoke else None,
        command_line=server.plan.command_line(),
        backend=server.plan.backend,
        base_url=server.base_url,
        unsupported=list(server.plan.unsupported),
        warnings=list(server.warnings) + ([smoke.warning] if smoke and smoke.warning else []),
        message=message,
        exit_code=server.exit_code,
        memory_budget_mib=budget / MIB if budget is not None else None,
        budget_mode=server.budget_mode,
        released=server.released,
        events=list(server.events),
        replay=replayed,
        samples=list(server.samples),
        bill=server.bill(),
    )


# What to do about a failure the launcher names itself (the log engine advises on the rest).
_LAUNCHER_ADVICE = {
    PORT_IN_USE: 'Stop the process holding the port, or set another port in the profile (port = "auto" picks a free one).',
    COMMAND_NOT_FOUND: 'Install the engine, or name its binary in the profile: program = "/path/to/server".',
    MODEL_NOT_FOUND: "Fix the model path in the profile (a relative path is relative to the profile's folder).",
    BAD_ARGUMENTS: "Remove or fix the refused argument (extra_args, or the [params] value behind it).",
    READY_TIMEOUT: "Raise `ready_timeout` in the profile if the model is large, or look at the last lines.",
    STOPPED_BY_VRAMTUI: "vramtui stopped the server itself (ctrl-c, quit, or a budget): not an engine failure.",
    CUDA_OOM: f"The run crossed vramtui's memory budget: lower the settings or raise the budget {BUDGET_WHERE}.",
    BUDGET_BELOW_ENGINE: f"Raise the memory budget {BUDGET_WHERE}: no engine setting helps.",
}


def launcher_advice(failure: str, server: ModelServer) -> str:
    """What to do about a failure the launcher names itself, in the words of this profile's engine: the
    engine that is missing and how to get it; the program that is not the engine's server."""
    profile = server.profile
    launch, engine = profile.backend.launch, profile.backend.name
    wanted = (launch.binary if launch is not None else None) or f"a Python with {engine}'s server installed"
    where = f'program = "/path/to/{launch.binary}"' if launch is not None and launch.binary else "program"
    if failure == COMMAND_NOT_FOUND and launch is not None and launch.install:
        return f"Install {engine}'s server ({launch.install}), or name its binary in the profile: {where}."
    refused = refused_arguments(server.lines) if failure == BAD_ARGUMENTS else None
    if refused is not None and not_the_server(refused, profile):
        return (
            f"program = {profile.program or server.command[0]!r} is not {engine}'s server: name {wanted} "
            f"there ({where}), or leave program out to run the one on PATH."
        )
    if failure == READY_TIMEOUT and server.health.said and not server.health.loading:
        # an answer that is no engine's "still loading": waiting longer will not help
        return (
            f"Its health check {server.health.said}: not the engine's 'still loading'. Check that the program "
            f"is {engine}'s server and the port its own, and read the last lines of the log."
        )
    if failure == READY_TIMEOUT and server.stage is None:
        # not one line of the engine's start-up in all that time: waiting longer will not help (QA 35 F7)
        printed = (line.text.strip() for line in reversed(server.lines) if line.number is not None)
        last = next((text for text in printed if text and not text.startswith("vramtui:")), None)
        said = f" (its last line: {last[:120]!r})" if last else " (it printed nothing)"
        return (
            f"Until vramtui gave up, the program printed no line of {engine}'s start-up{said}: check "
            f"that program = {profile.program or server.command[0]!r} is {engine}'s server and that it runs "
            f"by hand; raise `ready_timeout` only once it prints its loading lines."
        )
    return _LAUNCHER_ADVICE.get(failure, "See the last lines of the log.")


def launcher_diagnosis(
    diagnosis: Any, failure: str, stage: str | None, message: str, advice: str | None = None
) -> Any:
    """The log's diagnosis, told the failure the launcher named: what the log header and `--json` show."""
    if failure == EXITED and getattr(diagnosis, "failed", False):
        return diagnosis
    changes: dict[str, object] = {
        "failed": True,
        "failure": failure,
        "failure_stage": stage,
        "first_error_text": message or getattr(diagnosis, "first_error_text", None),
        "first_error_line": None if message else getattr(diagnosis, "first_error_line", None),
        "cause": "launcher",
        "inferred": False,
        "stage_inferred": False,
        "summary": f"Failed at {stage or 'launch'}: {message or failure.replace('_', ' ')}.",
        "advice": [advice or _LAUNCHER_ADVICE.get(failure, "See the last lines of the log.")],
    }
    try:
        return dataclasses.replace(diagnosis, **changes)
    except (TypeError, ValueError):
        return diagnosis


def last_error_line(lines: list[LogLine]) -> str:
    """The last line that looks like an error ("Input should be greater than or equal to 0"), or ""; a
    process that printed a line or two and died: its last line (QA 19 F4: "fake: boom" was in the log)."""
    words = last_words(enumerate(line.text for line in lines))
    return words[1] if words is not None else ""


def _gave_up(health: HealthProbe, timed_out: bool, timeout_s: float) -> str:
    """Why the wait for ready ends now, in words ("for 10 s", "after 120 s"), or "" to go on waiting: no
    HTTP for _NOT_HTTP_S, server errors for _ERRING_S (QA 26 D3), or the timeout."""
    if health.not_http_for(_NOT_HTTP_S):
        return f"for {_NOT_HTTP_S:g} s"
    if health.erring_for(_ERRING_S):
        return f"for {_ERRING_S:g} s of server errors"
    return f"after {timeout_s:g} s" if timed_out else ""


def _message(
    server: ModelServer,
    smoke: SmokeResult | None,
    failure: str | None,
    stage: str | None,
    diagnosis: Any | None,
    replayed: SmokeResult | None = None,
) -> str:
    if failure == CUDA_OOM and server.budget_exceeded:
        return f"out of memory at stage {stage}: GPU memory crossed the budget"
    if server.ready and smoke is not None and smoke.ok:
        answered = f"up in {server.load_time_s or 0:.1f} s and answered: {smoke.meaning}"
        if replayed is not None:
            verdict = "answered too" if replayed.ok else f"failed: {replayed.meaning}"
            return f"{answered}; the saved request {verdict}"
        return answered
    if server.ready and smoke is not None:
        return f"up, but the smallest request failed: {smoke.meaning}"
    if failure == READY_TIMEOUT:
        if server.failure_message.startswith("not ready "):  # how long it waited, and why it stopped
            return server.failure_message
        said = f"; {server.health.said}" if server.health.said else ""
        return f"not ready within the timeout; stuck at stage {stage}{said}"
    first_error = getattr(diagnosis, "first_error_text", None) if diagnosis is not None else None
    if first_error and (
        "with no error text" in first_error or first_error.startswith("vramtui: the server ")
    ):
        # The engine exited without a line the rules know: quote the last one that reads like an error.
        said = last_error_line(server.lines)
        first_error = f"{first_error}; its last words: {said}" if said else first_error
    where = f" at stage {stage}" if stage else ""
    detail = f": {said_words(first_error)}" if first_error else ""
    if diagnosis is not None and getattr(diagnosis, "failed", False):
        from vramtui.core.logs.advice import START_UP_WORDS, before_the_model

        if before_the_model(diagnosis):  # a port held, a flag refused: said as diagnose says it (QA 15)
            return f"failed at {START_UP_WORDS} ({diagnosis.cause or failure}){detail}"
    return f"failed{where} ({failure}){detail}"
