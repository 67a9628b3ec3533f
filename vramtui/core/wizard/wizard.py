"""The guided downgrade: launch, diagnose, propose ONE change, relaunch, verify, record — until it runs.

The loop joins the other engines: the launcher runs the profile (an injected callable, by default
`launcher.run_check`), the log diagnosis says where it stopped (`observe`), the budget model — the
estimator corrected by the sizes the engine printed and by what earlier runs proved about the
budget — and the backend's ladder say which one change comes next (`propose`), and every step is
verified before the next (`verify`): did it get further, did the log confirm the change, did the
memory move as predicted? A change that did not take effect stops the loop with that finding
instead of walking further down the ladder.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vramtui.core.backends import Backend
from vramtui.core.errors import VramtuiError
from vramtui.core.launch import procs
from vramtui.core.launch.profile import Profile, runnable_refusal
from vramtui.core.memory.parts import MemoryBill
from vramtui.core.units import MIB
from vramtui.core.wizard.budget import (
    DEFAULT_MARGIN,
    MemoryModel,
    current_value,
    needed_bytes,
    predicted_parts,
    whole_or_none,
)
from vramtui.core.wizard.ladders import Rung
from vramtui.core.wizard.observe import Observation, observe
from vramtui.core.wizard.proposal import Proposal, value_word
from vramtui.core.wizard.propose import Findings, Proposer, _nice_below, sibling_files
from vramtui.core.wizard.reach import fewer_slots_move, long_request_note
from vramtui.core.wizard.steprecord import StepRecorder, new_record_path
from vramtui.core.wizard.stress import StressResult, rising_floor, stress_check
from vramtui.core.wizard.verify import verify

__all__ = [
    "DEFAULT_MARGIN",
    "SKIP",
    "MemoryModel",
    "Observation",
    "Proposal",
    "Step",
    "StressResult",
    "Wizard",
    "WizardResult",
    "_nice_below",
    "current_value",
    "observe",
    "rising_floor",
    "sibling_files",
    "stress_check",
]

# What a confirm callback returns to keep the proposed setting and be offered the next change.
SKIP = "skip"
# Outcomes whose change is rolled back: it freed nothing (or made it worse), so keeping it would cost
# quality or speed for nothing (QA 18 F3: a smaller file that did not help stayed in the saved profile).
ROLLED_BACK = frozenset({"no_progress", "worse"})
ROLLED_BACK_WORDS = (
    "rolled back to {param} = {value}: the next change starts from the settings before this one"
)

Runner = Callable[[Profile], Any]


@dataclass
class Step:
    index: int
    proposal: Proposal | None
    outcome: str  # first_run | refused | works | progress | no_progress | not_applied | worse | error
    observation: Observation | None
    notes: list[str] = field(default_factory=list)
    profile_params: dict[str, object] = field(default_factory=dict)
    model: str = ""
    # The run before this step's, for rungs that trade speed for memory (None: it did not answer).
    tokens_per_s_before: float | None = None
    # The change freed nothing or made it worse: the profile went back to the settings before it.
    rolled_back: bool = False

    def _first_why(self) -> str:
        if self.outcome == "refused":
            return "the profile as given: not launched, the engine refuses these settings"
        return "first launch of the profile as given"

    @property
    def counts_as_progress(self) -> bool:
        return self.outcome in ("works", "progress")

    def to_dict(self) -> dict[str, Any]:
        obs = self.observation
        proposal = self.proposal
        data: dict[str, Any] = {
            "step": self.index,
            "param": proposal.param if proposal else None,
            "from": proposal.from_ if proposal else None,
            "to": proposal.to if proposal else None,
            "why": proposal.why if proposal else self._first_why(),
            "outcome": self.outcome,
            "stage": (obs.stage if obs else None),
            # a server that answers over its budget failed at no stage (the ladder's stage is the wizard's own)
            "failure_stage": obs.failure_stage if obs and not obs.runs_over_budget else None,
            "failure": obs.failure if obs else None,
            "cause": obs.cause
            if obs
            else None,  # the diagnosis' finer cause (budget_start, died_at_start ...)
            "first_error": obs.first_error if obs else None,
            # up and answering over its budget: it is ready, the budget is what it fails (over_budget)
            "ready": (obs.ready or obs.runs_over_budget) if obs else False,
            "over_budget": obs.runs_over_budget if obs else False,
            "smoke_ok": obs.smoke_ok if obs else None,
            "resident_mib": obs.resident_mib if obs else None,
            "peak_mib": obs.peak_mib if obs else None,
            "load_time_s": obs.load_time_s if obs else None,
            "ttft_s": obs.ttft_s if obs else None,
            "tokens_per_s": obs.tokens_per_s if obs else None,
            "tokens_per_s_before": self.tokens_per_s_before,
            "log_file": obs.log_file if obs else None,
            "log_offset": obs.log_offset if obs else 0,  # this run's lines start there (a shared log)
            "predicted_mib": proposal.predicted_mib if proposal else None,
            "engine_figures_mib": {k: round(v / MIB, 2) for k, v in (obs.figures if obs else {}).items()},
            "verification": self.notes,
            "rolled_back": self.rolled_back,  # the profile went back to the settings before this change
            "params": self.profile_params,
            "model": self.model,
        }
        fit = self.fit()
        data["fit"] = fit.to_dict() if fit is not None else None
        return data

    def fit(self) -> Any:
        """llama.cpp's fit projection in this run's log beside vramtui's estimate (FitComparison), or None."""
        from vramtui.core.wizard.fitcompare import compare_fit

        return compare_fit(self.observation.engine) if self.observation is not None else None


@dataclass
class WizardResult:
    success: bool
    steps: list[Step]
    final_profile: Profile
    reason: str = ""
    advice: list[str] = field(default_factory=list)
    pending: Proposal | None = None  # proposed but not applied (declined, or no terminal to ask)
    record_path: Path | None = None

    @property
    def relaunches(self) -> int:
        """Launches after the first one."""
        return sum(1 for step in self.steps if step.index > 0 and step.observation is not None)

    def to_dict(self) -> dict[str, Any]:
        first = next((s for s in self.steps if s.index == 0), None)
        final = self.final_profile
        return {
            "success": self.success,
            "reason": self.reason,
            "first_run": first.to_dict() if first else None,
            "steps": [s.to_dict() for s in self.steps if s.index > 0],
            "relaunches": self.relaunches,
            "final_params": dict(final.params),
            "final_model": final.model,
            "final_profile": final.to_dict(),
            "advice": self.advice,
            "pending": self.pending.to_dict() if self.pending else None,
            "record": str(self.record_path) if self.record_path else None,
        }


class Wizard:
    """One change at a time until the profile runs. `runner(profile)` returns a CheckResult-shaped object."""

    def __init__(
        self,
        profile: Profile,
        record_path: str | Path | None = None,
        auto: bool = False,
        runner: Runner | None = None,
        margin: float = DEFAULT_MARGIN,
        on_step: Callable[[Step], None] | None = None,
        on_start: Callable[[Any], None] | None = None,
        ladders: dict[str, tuple[Rung, ...]] | None = None,
        record: bool = True,
        device_bytes: int | None = None,
        replay: dict[str, object] | None = None,
    ) -> None:
        self.profile = profile
        self.start_profile = profile
        self.auto = auto
        self.backend: Backend = profile.backend
        self.model = MemoryModel(profile, margin, device_bytes)
        self.findings = Findings()
        self.proposer = Proposer(self.model, self.findings, ladders)
        self.on_step = on_step
        self.on_start = on_start
        self.ladders = ladders
        self.steps: list[Step] = []
        self.last: Observation | None = None
        self.record_path: Path | None = None
        self.recorder: StepRecorder | None = None
        self.skipped: list[Proposal] = []  # proposals the user turned down: their settings stay as they are
        self._runner = runner
        self._ended = False  # the record's end line is written
        self._running_log: str | None = None  # the run log of the launch in progress
        # The change a setting the engine refuses names, made before the first launch (step 0 refused).
        self.refusal: Proposal | None = None
        # A saved chat request (the long one that failed at inference): every run replays it.
        self.replay = replay
        if record:
            self.record_path = Path(record_path) if record_path else new_record_path(profile.label)
            self.recorder = StepRecorder(self.record_path)
            self.recorder.append(
                "session", profile=profile.to_dict(), params=dict(profile.params), auto=auto, margin=margin
            )
            # A hangup or a stop mid-session ends vramtui without unwinding: the record still ends.
            procs.install_exit_handlers()
            procs.add_exit_hook(self._on_exit_signal)

    # What the wizard concluded, kept in `findings` (the proposer writes there too).
    @property
    def advice(self) -> list[str]:
        return self.findings.advice

    @advice.setter
    def advice(self, value: list[str]) -> None:
        self.findings.advice = value

    @property
    def stop_reason(self) -> str:
        return self.findings.stop_reason

    @stop_reason.setter
    def stop_reason(self, value: str) -> None:
        self.findings.stop_reason = value

    @property
    def failing_stage(self) -> str | None:
        return self.findings.failing_stage

    # --- running --------------------------------------------------------------------------------------

    def _run(self, profile: Profile) -> Observation:
        if self._runner is not None:
            check = self._runner(profile)
        else:
            from vramtui.core.launch.launcher import run_check

            check = run_check(profile, on_start=self.attempt_started, replay=self.replay)
        return observe(check)

    def attempt_started(self, server: Any) -> None:
        """A launch of this session began (a runner of its own calls this too): the record names it."""
        log_file = getattr(server, "log_file", None)
        self._running_log = str(log_file) if log_file else None  # an interrupted step still names it
        if self.recorder is not None:
            self.recorder.append(
                "process", step=len(self.steps), pid=getattr(server, "pid", None), log_file=self._running_log
            )
        if self.on_start is not None:
            self.on_start(server)

    def _record(self, step: Step) -> None:
        self.steps.append(step)
        if self.recorder is not None:
            self.recorder.append("step", **step.to_dict())
        if self.on_step is not None:
            self.on_step(step)

    def start(self) -> Step:
        """The first launch, as the profile is: step 0."""
        if self.steps:
            return self.steps[0]
        refused = self._refused_before_launch()
        if refused is not None:
            return refused
        if self.recorder is not None:
            self.recorder.append("step_start", step=0, param=None, why="first launch")
        try:
            obs = self._run(self.profile)
        except VramtuiError as error:
            step = Step(0, None, "error", None, [str(error)], dict(self.profile.params), self.profile.model)
            self._record(step)
            self.stop_reason = str(error)
            return step
        self.model.learn(self.profile, obs)
        self.last = obs
        step = Step(0, None, "works" if obs.works else "first_run", obs, [], dict(self.profile.params))
        step.model = self.profile.model
        self._record(step)
        return step

    def _refused_before_launch(self) -> Step | None:
        """A setting the engine refuses before it loads anything (`check` and `run` stop on it): step 0
        is that refusal, not a launch that could only fail after a whole model load, and the first
        proposal is the change it names."""
        refusal = runnable_refusal(self.profile)
        if refusal is None:
            return None
        current = current_value(self.profile, refusal.param)
        label = f"the change {self.backend.name}'s refusal names"
        knob = self.backend.knob_words(refusal.param)
        self.refusal = Proposal(refusal.param, current, refusal.value, refusal.message, label, knob)
        step = Step(
            0, None, "refused", None, [refusal.message], dict(self.profile.params), self.profile.model
        )
        self._record(step)
        return step

    @property
    def needs_change(self) -> bool:
        """Is there a next change to look for: the last run failed, or the engine refused step 0."""
        if self.last is None:
            return self.refusal is not None
        return not self.last.works or self._follow_up() is not None

    # --- proposing ------------------------------------------------------------------------------------

    @property
    def skipped_params(self) -> set[str]:
        """Settings the user asked to leave alone (a step that prepares another skips that one too)."""
        params = {proposal.param for proposal in self.skipped}
        params.update(proposal.then[0] for proposal in self.skipped if proposal.then is not None)
        return params | rolled_back_params(self.steps)

    def skip(self, proposal: Proposal) -> None:
        """The user turns this proposal down: it is recorded as skipped, nothing is launched, and
        `propose` offers the next rung that changes another setting."""
        self.skipped.append(proposal)
        if self.recorder is not None and not self.recorder.closed:
            self.recorder.append("skip", step=len(self.steps), **proposal.to_dict())

    def propose(self) -> Proposal | None:
        """The next single change, or None (it works, or no memory setting can help: see `advice`)."""
        if not self.steps:
            self.start()
        obs = self.last
        if obs is None:
            return self._refusal_fix()
        if obs.works:
            return self._follow_up()
        if self.steps and self.steps[-1].outcome == "not_applied":
            # Going further down the ladder would stack changes on a setting that is not reaching the
            # engine: stop here and say so.
            notes = self.steps[-1].notes
            self.stop_reason = notes[0] if notes else "the last change did not take effect"
            return None
        self.proposer.findings.rolled_back = rolled_back_params(self.steps)
        return self.proposer.propose(self.profile, obs, self.skipped_params)

    def _follow_up(self) -> Proposal | None:
        """After a run that works: fewer slots where the wizard's own context change left each slot under a
        short chat turn (reach.fewer_slots_move); None otherwise, or once the user keeps the slots."""
        shortened = any(
            step.proposal is not None and step.proposal.param == "context" and not step.rolled_back
            for step in self.steps
        )
        return fewer_slots_move(self.model, self.profile, self.skipped_params) if shortened else None

    def _refusal_fix(self) -> Proposal | None:
        """The change a refused step 0 names, unless the user keeps that setting (then nothing starts)."""
        if self.refusal is None:
            return None
        if self.refusal.param in self.skipped_params:
            self.stop_reason = (
                f"the engine refuses these settings and {self.refusal.param} stays: {self.refusal.why}"
            )
            return None
        return self.refusal

    def fit_warning(self, proposal: Proposal) -> str | None:
        """A sentence when the estimate says the change (an edited value, say) will not fit; else None."""
        if proposal.advice_only or proposal.then is not None or proposal.param == "model":
            return None
        return fit_words(
            self.model, proposal, self.model.predict(self.profile.with_param(proposal.param, proposal.to))
        )

    # --- applying and verifying ----------------------------------------------------------------------

    def apply(self, proposal: Proposal) -> Step:
        """Relaunch with this one change, verify it, record it."""
        index = len(self.steps)
        if proposal.advice_only:
            notes = ["advice only: nothing to relaunch"]
            step = Step(index, proposal, "advice", None, notes, dict(self.profile.params))
            self._record(step)
            return step
        candidate = launched(self.profile, proposal)
        if self.recorder is not None:
            self.recorder.append(
                "step_start",
                step=index,
                param=proposal.param,
                **{"from": proposal.from_, "to": proposal.to},
                why=proposal.why,
            )
        # One prediction of what is launched, also the warning against an edited value that will not fit.
        warning = None
        bill = predict_launch(self.model, proposal, candidate)
        if proposal.edited_from is not None and proposal.param != "model" and not proposal.advice_only:
            warning = fit_words(self.model, proposal, bill)
        previous = self.last
        before_profile = self.profile
        try:
            obs = self._run(candidate)
        except VramtuiError as error:
            step = Step(index, proposal, "error", None, [str(error)], dict(candidate.params), candidate.model)
            self._record(step)
            self.stop_reason = str(error)
            return step
        outcome, notes = self.verify(proposal, previous, obs, before_profile, candidate)
        if warning is not None:  # the user's call against the estimate, kept in the record (QA 6)
            notes.append(f"relaunched on the user's yes, though {warning}")
        if outcome != "not_applied":
            self.model.learn(candidate, obs)
        rolled_back = outcome in ROLLED_BACK and previous is not None
        if rolled_back:  # the next change starts from the settings before this one (QA 18 F3)
            notes.append(ROLLED_BACK_WORDS.format(param=proposal.param, value=value_word(proposal.from_)))
        elif outcome != "not_applied":
            self.profile = candidate
            self.last = obs
        params, model = dict(candidate.params), candidate.model
        step = Step(index, proposal, outcome, obs, notes, params, model, rolled_back=rolled_back)
        step.tokens_per_s_before = previous.tokens_per_s if previous is not None else None
        self._record(step)
        return step

    def verify(
        self,
        proposal: Proposal,
        before: Observation | None,
        after: Observation,
        before_profile: Profile,
        after_profile: Profile,
    ) -> tuple[str, list[str]]:
        """Did the change take effect, did it get further, did the memory move as predicted, does it answer?"""
        return verify(self.model, proposal, before, after, before_profile, after_profile)

    # --- the loop ------------------------------------------------------------------------------------

    def run(
        self,
        max_steps: int = 8,
        confirm: Callable[[Proposal], Proposal | str | None] | None = None,
    ) -> WizardResult:
        """Launch, then propose/apply until it runs, `max_steps` changes were made, or nothing is left.

        `confirm(proposal)` returns the proposal to apply (possibly edited), SKIP to keep that setting and
        be offered the next change, or None to stop; with `auto` every proposal is applied.
        """
        try:
            first = self.start()
            if first.outcome == "error":
                return self._finish(False, None)
            pending = self._loop(max_steps, confirm)
            success = self.last is not None and self.last.works
            if success:
                self.stop_reason = "it runs and answers the smallest chat request"
                if note := long_request_note(self.model, self.profile):  # a cache that grows per request
                    self.advice.append(note)
            return self._finish(success, pending)
        finally:
            self.abandon("interrupted")

    def _on_exit_signal(self, name: str) -> None:
        self.abandon(f"interrupted by {name}")

    def abandon(self, reason: str = "interrupted") -> None:
        """End the record of a session stopped mid-step (ctrl-c, quitting the app): the end line names
        the step that was running and its log. Nothing to do when the session already ended."""
        if self.recorder is None or self.recorder.closed or self._ended:
            return
        self.recorder.append(
            "end",
            success=False,
            reason=reason,
            final_params=dict(self.profile.params),
            interrupted_step=len(self.steps),
            log_file=self._running_log,
        )
        self.recorder.close()
        self._ended = True
        procs.remove_exit_hook(self._on_exit_signal)

    def _loop(
        self, max_steps: int, confirm: Callable[[Proposal], Proposal | str | None] | None
    ) -> Proposal | None:
        """Propose and apply until it works or a stop; returns the proposal left pending, if any."""
        changes = 0
        stalls = 0
        while self.needs_change:
            if changes >= max_steps:
                self.stop_reason = f"stopped after {max_steps} change{'s' if max_steps != 1 else ''}"
                return None
            proposal = self.propose()
            if proposal is None:
                return None
            if not self.auto:
                decided = confirm(proposal) if confirm is not None else None
                if decided == SKIP:  # keep that setting: the next rung that changes another one
                    self.skip(proposal)
                    continue
                if decided is None:
                    self.stop_reason = (
                        "proposed but not applied (declined, or no terminal to ask: --auto applies it)"
                    )
                    return proposal
                proposal = decided
            step = self.apply(proposal)
            changes += 1
            if step.outcome == "error":
                return None
            if step.outcome == "not_applied":
                self.stop_reason = step.notes[0] if step.notes else "the change did not take effect"
                self.advice = [
                    f"check how {self.backend.name} receives {proposal.param}: extra_args or env in the "
                    "profile, a config file, or a build that ignores it",
                ]
                return None
            stalls = stalls + 1 if step.outcome in ("no_progress", "worse") else 0
            if stalls >= 2:
                self.stop_reason = "two changes in a row did not help"
                return None
        return None

    def finish(self) -> WizardResult:
        """End a session driven step by step (start/propose/apply): write the record's end line."""
        if self._ended:
            return WizardResult(
                bool(self.last and self.last.works), list(self.steps), self.profile, self.stop_reason,
                list(self.advice), None, self.record_path,
            )  # fmt: skip
        success = self.last is not None and self.last.works
        if success:
            self.stop_reason = "it runs and answers the smallest chat request"
        return self._finish(success, None)

    def _finish(self, success: bool, pending: Proposal | None) -> WizardResult:
        result = WizardResult(
            success=success,
            steps=list(self.steps),
            final_profile=self.profile,
            reason=self.stop_reason,
            advice=list(self.advice),
            pending=pending,
            record_path=self.record_path,
        )
        if self.recorder is not None:
            self.recorder.append(
                "end",
                success=success,
                reason=self.stop_reason,
                final_params=dict(self.profile.params),
                final_model=self.profile.model,
                final_profile=self.profile.to_dict(),
                advice=self.advice,
                pending=pending.to_dict() if pending else None,
            )
            self.recorder.close()
            self._ended = True
            procs.remove_exit_hook(self._on_exit_signal)
        return result


def fit_words(model: MemoryModel, proposal: Proposal, bill: MemoryBill | None) -> str | None:
    """A sentence when the budget model says `bill` (the change's) will not fit; else None."""
    room = model.room()
    if bill is None or room is None or model.fits(bill) is not False:
        return None
    # the margin said, as the wizard's why says it: one budget read three ways on one screen (QA 24 F4)
    margin = round((1 - model.margin) * 100)
    return (
        f"the estimate for {proposal.param} = {value_word(proposal.to)} needs "
        f"{needed_bytes(bill) / MIB:,.0f} MiB where {room * model.margin / MIB:,.0f} MiB are "
        f"usable (the {room / MIB:,.0f} MiB left for buffers, less the {margin}% margin): it will not fit"
    )


def rolled_back_params(steps: list[Step]) -> set[str]:
    """Settings whose change was rolled back since the last step that helped: not offered again until
    another change moves the run on (then the failure, and what the setting could do, differ)."""
    params: set[str] = set()
    for step in reversed(steps):
        if step.counts_as_progress:
            break
        if step.rolled_back and step.proposal is not None:
            params.add(step.proposal.param)
    return params


def first_move(profile: Profile, check: Any, margin: float = DEFAULT_MARGIN) -> Proposal | None:
    """The change the wizard makes first after this run of `profile` (a CheckResult): the one source of
    the first move, so that `check` reports the step `vramtui wizard` and `wizard --attach` take.
    None when it runs, or when no setting helps (the run's own advice says why)."""
    return first_move_and_advice(profile, check, margin)[0]


def first_move_and_advice(
    profile: Profile,
    check: Any,
    margin: float = DEFAULT_MARGIN,
    advice: list[str] | None = None,
    with_stop: bool = False,
) -> tuple[Proposal | None, list[str]]:
    """The first move, and the run's `advice` lines sized by the same arithmetic (advice_sizing.py); with
    `with_stop`, where there is no move, why the wizard would stop at once and its own advice first."""
    from vramtui.core.wizard.advice_sizing import sized_advice

    wizard = Wizard(profile, runner=lambda _profile: check, record=False, margin=margin)
    wizard.start()
    move = wizard.propose()
    if move is not None and move.then is not None:
        # the figure of what the step launches, as the wizard records it, not the pair's (QA 31 W11)
        predict_launch(wizard.model, move, launched(wizard.profile, move))
    sized = sized_advice(wizard.model, profile, list(advice or []))
    if with_stop and move is None and wizard.stop_reason:
        # no first move: why the wizard would stop at once, and its own advice, before the log's (QA 35 F4;
        # the app's wizard pane says its stop itself)
        own = [line for line in wizard.advice if line not in sized]
        return None, [f"the wizard would stop here: {wizard.stop_reason}", *own, *sized]
    return move, sized


def first_move_for_log(
    profile: Profile, diagnosis: Any, log_file: str | None
) -> tuple[Proposal | None, list[str]]:
    """The wizard's first move and the sized advice for a saved log of a run of `profile` (its diagnosis):
    what `check` says of the same run, so that `diagnose` gives the same answer (QA 36 F2)."""
    from vramtui.core.launch.launcher import CheckResult

    check = CheckResult(
        ready=diagnosis.failure_stage == "inference",
        stage=diagnosis.stage,
        failure_stage=diagnosis.failure_stage,
        failure=diagnosis.failure,
        diagnosis=diagnosis,
        smoke=None,
        peak_mib=None,
        resident_mib=None,
        command=[],
        log_file=log_file,
        backend=profile.backend.name,
    )
    return first_move_and_advice(profile, check, advice=list(diagnosis.advice or []), with_stop=True)


def launched(profile: Profile, proposal: Proposal) -> Profile:
    """The profile a step launches: its one change (of a proposal that names a second, the first only)."""
    if proposal.param == "model":
        return profile.with_changes(model=str(proposal.to))
    return _clamped(profile.with_param(proposal.param, proposal.to), proposal)


def predict_launch(model: MemoryModel, proposal: Proposal, candidate: Profile) -> MemoryBill | None:
    """Predict for what is really launched, onto the proposal: the user may have edited the value, and a
    proposal that names a second change (`then`) launches only its first (QA 17 F7: the step recorded the
    pair's figure). The bill, or None."""
    bill = model.predict(candidate)
    proposal.predicted_mib = needed_bytes(bill) / MIB if bill is not None else None
    proposal.predicted_parts = predicted_parts(bill)
    return bill


def advice_beside(move: Proposal | None, lines: list[str]) -> list[str]:
    """The run's advice beside the wizard's first move: less the lines that give the move's own setting
    another value (QA 5, 6: three context sizes on one screen), each line standing alone."""
    from vramtui.core.logs.advice import standing_alone

    if move is not None and move.knob:
        knobs = move.knob.split(" and ")  # every flag the move sets (Backend.knob_words)
        lines = [line for line in lines if not any(knob in line for knob in knobs)]
    return standing_alone(lines)


def _clamped(candidate: Profile, proposal: Proposal) -> Profile:
    """A batch below the micro-batch takes the micro-batch down with it: the engine clamps it so anyway
    (llama.cpp: n_ubatch = min(n_ubatch, n_batch)), and a saved profile says what runs (QA 17 F14)."""
    if proposal.param != "batch":
        return candidate
    ubatch, batch = whole_or_none(candidate.param("ubatch")), whole_or_none(proposal.to)
    if ubatch is not None and batch is not None and ubatch > batch:
        return candidate.with_param("ubatch", batch)
    return candidate
