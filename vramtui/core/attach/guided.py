"""The wizard on a server vramtui did not start: the same proposer, verifier and record, another runner.

Step 0 observes the server as it runs (its health, the smallest chat request, its process tree's
memory against the budget, its log). Each later step applies one change one of two ways:

- "restart": the changed command (rebuilt by the Backend's translation) is handed to the user, and
  the runner waits, bounded, for a new process serving at the same place, then observes that one;
- "take_over": only with the user's yes, the old process is stopped and the changed profile is
  launched by vramtui as any wizard step is (`launcher.run_check`); a server that works is kept.

The outcome is judged by `core.wizard.verify` as for the wizard's own launches; the restarted
process's own command line is read first, so a restart without the change is `not_applied`.
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vramtui.core.attach.cmdline import ServerCommand
from vramtui.core.attach.restart import (
    ChangedCommand,
    Running,
    answers_health,
    changed_command,
    command_of,
    rebuilt,
    stop_process,
    wait_for_restart,
)
from vramtui.core.attach.watch import implied_log
from vramtui.core.errors import VramtuiError
from vramtui.core.launch.launcher import CheckResult, ModelServer, build_command, run_check
from vramtui.core.launch.profile import Profile
from vramtui.core.launch.smoke import SmokeResult, replay_request, smoke_request
from vramtui.core.logs.stages import furthest
from vramtui.core.memory.readings import Event
from vramtui.core.memory.sampling import HostSource, NvmlSource, Sample, Sampler, Source
from vramtui.core.memory.series import run_readings
from vramtui.core.units import MIB
from vramtui.core.wizard.observe import Observation
from vramtui.core.wizard.proposal import Proposal, same_value
from vramtui.core.wizard.wizard import Wizard

WAYS = ("restart", "take_over")


@dataclass
class Process:
    """What the step record's `process` line names: the PID serving and its log."""

    pid: int | None
    log_file: str | None


@dataclass
class LogSource:
    """Where a server's log is read from, and from which byte (a restart appends to the same file)."""

    path: str | None
    offset: int = 0

    def text(self) -> str | None:
        if self.path is None or not Path(self.path).is_file():
            return None
        with open(self.path, "rb") as handle:
            handle.seek(0, 2)
            size = handle.tell()
            if self.offset > size:
                self.offset = 0  # truncated: a new log
            handle.seek(self.offset)
            return handle.read().decode("utf-8", "replace")


@dataclass
class AttachedRunner:
    """The wizard's runner for an attached server (see the module's doc)."""

    running: Running
    log: str | None = None  # --log FILE; else the file the process writes to
    way: str = "restart"
    allowed: bool = False  # the user's yes to stopping the server (a take-over)
    replay: dict[str, object] | None = None
    restart_timeout_s: float = 300.0
    watch_s: float = 2.0
    on_command: Callable[[ChangedCommand], None] | None = None
    on_process: Callable[[Process], None] | None = None
    # A take-over's launch, shown live (the app's log pane and memory graph); the CLI passes none.
    on_log_line: Callable[[Any], None] | None = None
    on_event: Callable[[Any], None] | None = None
    cancel: threading.Event = field(default_factory=threading.Event)  # set: stop waiting for a restart
    calls: int = 0
    current: Profile | None = None  # what serves now, as a profile
    last_command: ServerCommand | None = None  # the restarted process's command line
    last_change: ChangedCommand | None = None
    server: ModelServer | None = None  # ours, after a take-over
    notes: list[str] = field(default_factory=list)

    def __call__(self, profile: Profile) -> CheckResult:
        self.calls += 1
        if self.calls == 1:
            self.current = profile
            pid = self.running.pid
            if self.on_process is not None:
                self.on_process(Process(pid, self._log_path(pid)))
            return self.observe(profile, LogSource(self._log_path(pid)))
        before = self.current or profile
        profile = rebuilt(profile)  # the server's own spelling of a rebuilt flag must not come after it
        self.last_change = changed_command(self.running, before, profile)
        self.current = profile
        if self.way == "take_over":
            return self._take_over(profile)
        return self._restart(profile)

    def _log_path(self, pid: int | None) -> str | None:
        if self.log is not None:
            return self.log
        return implied_log(pid) if pid is not None else None

    # -- the two ways ------------------------------------------------------------------------------

    def _restart(self, profile: Profile) -> CheckResult:
        assert self.last_change is not None
        # Where the old process's log ends: a restart that appends to the same file starts there.
        old_log = self._log_path(self.running.pid)
        old_size = _size(old_log)
        if self.on_command is not None:
            self.on_command(self.last_change)
        launch = profile.backend.launch
        health = launch.health_paths if launch is not None else ()
        pid = wait_for_restart(self.running, health, self.restart_timeout_s, cancel=self.cancel)
        self.running.pid = pid
        self.last_command = command_of(pid)
        path = self._log_path(pid)
        log = LogSource(path, old_size if path is not None and path == old_log else 0)
        if self.on_process is not None:
            self.on_process(Process(pid, log.path))
        return self.observe(profile, log)

    def _take_over(self, profile: Profile) -> CheckResult:
        if not self.allowed:
            raise VramtuiError(
                f"PID {self.running.pid} was not started by vramtui: it is stopped only after your yes "
                "(answer yes, or pass --take-over --yes)"
            )
        if self.running.in_box:
            raise VramtuiError(
                f"{self.running.target.text} is run by {self.running.target.kind}: vramtui does not take "
                "it over; apply the setting there (the restart way)"
            )
        if self.server is not None:
            self.server.stop()  # ours, from the last step: one server at a time
            self.server = None
        elif self.running.pid is not None:
            stop_process(self.running.pid)
            self.notes.append(f"stopped PID {self.running.pid} (taken over with your yes)")
        self.last_command = None
        if self.on_command is not None and self.last_change is not None:
            self.on_command(self.last_change)
        # The budget as the attached server was judged by it, measured (the launcher's host budget is an
        # address-space cap, a different measure): launched without the cap, judged on its samples.
        check = run_check(
            profile.with_changes(memory_budget=None),
            on_start=self._started,
            replay=self.replay,
            keep_if_works=True,
            on_log_line=self.on_log_line,
            on_event=self.on_event,
        )
        return self._judged(profile, check)

    def _judged(self, profile: Profile, check: CheckResult) -> CheckResult:
        budget = profile.memory_budget
        readings = run_readings(check.samples, check.events)
        peak = readings.peak_mib if readings is not None else None
        if not (budget and check.ok and peak is not None and peak * MIB > budget):
            return check
        if self.server is not None:
            self.server.stop()  # over the budget: not a server to keep
            self.server = None
        what = "GPU memory" if _place(check.samples) == "gpu" else "process tree RSS"
        message = f"{what} {peak:.0f} MiB is over the budget of {budget / MIB:.0f} MiB"
        failure = "cuda_oom" if _place(check.samples) == "gpu" else "host_oom"
        return dataclasses.replace(
            check, ready=False, failure=failure, failure_stage="kv_cache", message=message,
            memory_budget_mib=budget / MIB, budget_mode=_place(check.samples),
        )  # fmt: skip

    def _started(self, server: ModelServer) -> None:
        self.server = server
        self.running.pid = server.pid
        if self.on_process is not None:
            log = getattr(server, "log_file", None)
            self.on_process(Process(server.pid, str(log) if log else None))

    # -- observing what serves now -----------------------------------------------------------------

    def observe(self, profile: Profile, log: LogSource) -> CheckResult:
        """A CheckResult of the server as it runs: health, the smallest request, memory, its log."""
        plan = build_command(profile)
        launch = profile.backend.launch
        url = self.running.url
        ready = answers_health(url, launch.health_paths if launch is not None else ())
        if not ready and self.calls == 1:
            raise VramtuiError(f"{url} does not answer its health check: nothing to tune until it serves")
        samples, events, smoke, replayed = self._watch(url, plan.model_name, plan.request_options, ready)
        diagnosis = _diagnose(log, profile)
        readings = run_readings(samples, events)
        failure, failure_stage, message = _verdict(
            profile, ready, smoke, replayed, diagnosis, samples, readings
        )
        stage = (
            "inference" if smoke is not None and smoke.status is not None else ("ready" if ready else None)
        )
        argv = self.last_command.argv if self.last_command else list(self.running.command.argv)  # type: ignore[union-attr]
        # Over the budget counts as the launcher counts a run that crossed it: it did not pass.
        over_budget = failure in ("cuda_oom", "host_oom") and diagnosis_failure(diagnosis) != failure
        return CheckResult(
            ready=ready and not over_budget,
            stage=furthest(stage, getattr(diagnosis, "stage", None)),
            failure_stage=failure_stage,
            failure=failure,
            diagnosis=diagnosis,
            smoke=smoke,
            peak_mib=readings.peak_mib if readings else None,
            resident_mib=readings.plateau_mib if readings else None,
            command=argv,
            log_file=log.path if diagnosis is not None else None,
            log_offset=log.offset,
            ttft_s=smoke.ttft_s if smoke else None,
            tokens_per_s=smoke.tokens_per_s if smoke else None,
            command_line=" ".join(argv),
            backend=profile.backend.name,
            base_url=url,
            unsupported=list(plan.unsupported),
            message=message,
            memory_budget_mib=profile.memory_budget / MIB if profile.memory_budget else None,
            budget_mode=_place(samples) if profile.memory_budget else None,
            events=events,
            replay=replayed,
            samples=samples,
        )

    def _watch(
        self, url: str, model: str, options: dict[str, object], ready: bool
    ) -> tuple[list[Sample], list[Event], SmokeResult | None, SmokeResult | None]:
        """Sample the process tree while the smallest request (and the saved one) is sent."""
        samples: list[Sample] = []
        nvml = NvmlSource()
        sources: list[Source] = [HostSource(self.running.pid), nvml]
        sampler = Sampler(sources, 0.1, samples.append).start()
        events = [Event(time.time(), "ready", "attached to the serving server")]
        smoke = replayed = None
        try:
            time.sleep(self.watch_s / 2)
            if ready:
                events.append(Event(time.time(), "request_start", "smallest request"))
                smoke = smoke_request(url, model, options=options or None)
                events.append(Event(time.time(), "request_end", smoke.meaning))
                if self.replay is not None and smoke.ok:
                    events.append(Event(time.time(), "request_start", "saved request"))
                    replayed = replay_request(url, self.replay, model=model)
                    events.append(Event(time.time(), "request_end", replayed.meaning))
            time.sleep(self.watch_s / 2)
        finally:
            sampler.stop()
            sampler.close()
        return samples, events, smoke, replayed


def diagnosis_failure(diagnosis: Any) -> str | None:
    return diagnosis.failure if diagnosis is not None and diagnosis.failed else None


def _size(path: str | None) -> int:
    try:
        return os.path.getsize(path) if path else 0
    except OSError:
        return 0


def _diagnose(log: LogSource, profile: Profile) -> Any:
    """The diagnosis of this run's lines: from where they start in the server's own log file (the
    step records that file and the offset, never a copy)."""
    from vramtui.core.logs.diagnose import diagnose_text

    text = log.text()
    return None if text is None else diagnose_text(text, backend=profile.backend.name)


def _place(samples: list[Sample]) -> str:
    return "gpu" if samples and samples[-1].gpus else "host"


def _verdict(
    profile: Profile,
    ready: bool,
    smoke: SmokeResult | None,
    replayed: SmokeResult | None,
    diagnosis: Any,
    samples: list[Sample],
    readings: Any,
) -> tuple[str | None, str | None, str]:
    """(failure, failure stage, message): the request that failed, the budget crossed, the log's."""
    if not ready:
        return "exited", "ready", "the server does not answer its health check"
    if smoke is not None and not smoke.ok:
        return smoke.failure, "inference", smoke.meaning
    if replayed is not None and not replayed.ok:
        if diagnosis is not None and diagnosis.failed:
            return diagnosis.failure, diagnosis.failure_stage, replayed.meaning
        return f"replay_{replayed.kind}", "inference", replayed.meaning
    budget = profile.memory_budget
    peak = readings.peak_mib if readings is not None else None
    if budget and peak is not None and peak * MIB > budget:
        place = _place(samples)
        # Up and over: the weights are in; the cache and buffers on top crossed it, unless the file
        # alone is over (then the weights' ladder).
        weights = Path(profile.model).stat().st_size if Path(profile.model).is_file() else 0
        stage = "load_weights" if weights > budget else "kv_cache"
        what = "GPU memory" if place == "gpu" else "process tree RSS"
        message = f"{what} {peak:.0f} MiB is over the budget of {budget / MIB:.0f} MiB"
        return ("cuda_oom" if place == "gpu" else "host_oom"), stage, message
    if diagnosis is not None and diagnosis.failed:
        return diagnosis.failure, diagnosis.failure_stage, diagnosis.summary or ""
    return None, None, "it runs and answers the smallest chat request"


class AttachedWizard(Wizard):
    """The wizard with an attached runner; it first checks the restarted process's command line."""

    def __init__(self, profile: Profile, runner: AttachedRunner, keep: set[str] | None = None, **kw: Any):
        super().__init__(profile, runner=runner, **kw)
        if self.model.host:
            # its budget is judged on the process tree's RSS, not on address space (the launcher's cap):
            # the engine's idle share of it is its idle RSS
            from vramtui.core.launch.footprint import host_footprint

            self.model.host_baseline = host_footprint(profile, "rss")
            # nor are the slots' thread stacks in it (QA 22 #2, QA 23: parallel 2 -> 1 "freed" their 8 MiB
            # of address space, and was proposed at the same total context, whose bill grew)
            self.model.address_space = False
        self.attached = runner
        self.keep = set(keep or ())
        runner.on_process = self._process_started
        if self.recorder is not None:
            running = runner.running
            self.recorder.append(
                "attach",
                target=running.target.text,
                pid=running.pid,
                url=running.url,
                command_line=running.command.argv if running.command else None,
                way=runner.way,
            )

    def _process_started(self, process: Process) -> None:
        self.attempt_started(process)

    @property
    def skipped_params(self) -> set[str]:
        return super().skipped_params | self.keep

    def verify(
        self,
        proposal: Proposal,
        before: Observation | None,
        after: Observation,
        before_profile: Profile,
        after_profile: Profile,
    ) -> tuple[str, list[str]]:
        seen = self.attached.last_command
        notes: list[str] = []
        if seen is not None and proposal.param != "model":
            now = seen.params.get(proposal.param, seen.extra.get(proposal.param))
            if now is None:
                now = after_profile.backend.default(proposal.param)
            if not same_value(now, proposal.to):
                pid = self.attached.running.pid
                return "not_applied", [
                    f"the restarted server (PID {pid}) runs with {proposal.param} = {now}, not {proposal.to}: "
                    "the change was not made"
                ]
            notes.append(
                f"new process {self.attached.running.pid}: its command line sets {proposal.param} = {now}"
            )
        elif seen is not None and proposal.param == "model" and seen.model != proposal.to:
            return "not_applied", [f"the restarted server runs {seen.model}, not {proposal.to}"]
        outcome, more = super().verify(proposal, before, after, before_profile, after_profile)
        return outcome, [*notes, *more]
