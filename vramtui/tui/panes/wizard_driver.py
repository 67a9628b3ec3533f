"""Runs `core.wizard.Wizard` off the UI thread for the wizard pane.

Every launch the wizard makes goes through `run_check` with the log pane's feed and the memory pane's
pid watch attached, so the user sees each attempt's log and curve. Skip, confirm and edit are the
core wizard's own (`Wizard.skip`, `Wizard.apply`, `Proposal.edited`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vramtui.core.errors import VramtuiError
from vramtui.core.units import MIB, format_bytes
from vramtui.core.wizard.verify import outcome_shade
from vramtui.tui.panes.memory_state import MemoryState, RunFeed
from vramtui.tui.words import failure_words, in_words, outcome_words, stage_words

if TYPE_CHECKING:
    from vramtui.tui.panes.wizard import WizardPane


def _mib(value: float | None) -> str:
    return "—" if value is None else format_bytes(value * MIB, 1)


def step_row(number: int, step: Any, *, compact: bool = False, attached: bool = False) -> tuple[str, ...]:
    """One row of the steps table: #, change, outcome, stage reached, peak, resident.

    `compact` (a terminal under about 100 columns): the outcome in a word, no resident column.
    `attached`: the wizard watches a server vramtui did not start: its step 0 is that server as it runs,
    said as `wizard --attach` says it (QA 7: "first launch ... failed ✖ host out of memory" for a healthy
    server over its budget).
    """
    proposal = step.proposal
    change = "first launch" if proposal is None else f"{proposal.param} {proposal.change()}"
    obs = step.observation
    stage = "—"
    if obs is not None:
        stage = stage_words(obs.stage) if obs.stage else "—"
        if obs.failure:
            stage += f" ✖ {failure_words(obs.failure, short=compact)}"
    if attached and proposal is None:
        change = "as it runs now"
    if obs is not None and obs.runs_over_budget:  # up and answering, judged by its peak
        stage = f"{_mib(obs.peak_mib)} of a {_mib(obs.budget_mib)} budget"
        return _row(step, change, "over budget" if compact else "runs, over budget", stage, compact)
    return _row(
        step,
        change,
        outcome_words(outcome_shade(step.outcome, step.notes), short=compact),
        stage,
        compact,
    )


def _row(step: Any, change: str, outcome: str, stage: str, compact: bool) -> tuple[str, ...]:
    obs = step.observation
    peak = _mib(obs.peak_mib if obs else None)
    if compact:
        return (str(step.index), change, outcome, stage, peak)
    return (str(step.index), change, outcome, stage, peak, _mib(obs.resident_mib if obs else None))


def _memory_state(app: Any) -> MemoryState | None:
    """The memory pane's state, where this app has one."""
    from textual.css.query import NoMatches

    from vramtui.tui.panes.memory import MemoryPane

    try:
        return app.query_one(MemoryPane).state
    except NoMatches:
        return None


# A step's memory columns say which series they were read from (Observation.memory_series): the
# memory pane names the same series beside the same figures.
_SERIES_TAGS = {"process": "RSS", "host": "RAM"}


def memory_headings(steps: list[Any]) -> dict[str, str]:
    """The peak and resident columns' headings: 'peak RSS' when every step was read from the model's
    process tree, 'peak GPU0' from a card; plain 'peak' when the steps differ or nothing was read."""
    keys = {step.observation.memory_series for step in steps if step.observation is not None}
    keys.discard(None)
    if len(keys) != 1:
        return {}
    key = str(keys.pop())
    tag = _SERIES_TAGS.get(key) or ("GPU" + key[4:].partition(":")[0] if key.startswith("gpu:") else "")
    return {"peak": f"peak {tag}", "resident": f"resident {tag}"} if tag else {}


class WizardDriver:
    """One wizard session for the pane: first launch, proposals, confirmed steps, export."""

    PROPOSED = "proposed — confirm (n), skip, or edit the value"  # the pane's state line with a proposal

    def __init__(
        self,
        pane: WizardPane,
        profile: Any,
        record_path: str | Path | None = None,
        first_check: Any = None,
        wizard: Callable[[], Any] | None = None,
    ) -> None:
        self.pane = pane
        self.app = pane.app
        self.profile = profile
        # Each attempt's own samples draw the memory pane's model process curve (the ones the step's
        # peak and resident are read from): the pane and the table then read one curve.
        self._memory = _memory_state(pane.app)
        # A launch of this profile that already failed (`vramtui run`): the wizard's step 0, not relaunched.
        self._first_check = first_check
        self._kept: tuple[Any, Any] | None = None  # (server, feed) of an attempt that answered
        # The core wizard, made on the first step's thread: making it may measure the engine's idle
        # footprint (core/launch/footprint.py), which starts the engine once per binary (up to 20 s).
        # `wizard`: a maker of one with a runner of its own (a server vramtui did not start).
        self._make_wizard = wizard or (lambda: self._new_wizard(record_path))
        self.wizard: Any = None
        self.server: Any = None  # the server of the attempt in progress
        self.finished = False
        self.succeeded = False  # finished with a run that works (else stopped: `n` starts over)
        self.verified = False  # a working attempt's server was handed to the app
        self._lock = threading.Lock()

    def _new_wizard(self, record_path: str | Path | None) -> Any:
        from vramtui.core.wizard.wizard import Wizard

        return Wizard(self.profile, record_path=record_path, runner=self._runner, on_step=None)

    def _ensure_wizard(self) -> None:
        """On the step's thread: make the core wizard, saying so when it first measures the engine."""
        if self.wizard is not None:
            return
        from vramtui.core.launch.footprint import binary_of, measured_already

        if not measured_already(self.profile):
            binary = binary_of(self.profile)
            self._post(
                f"measuring {binary.name if binary else 'the engine'}'s own idle memory (once per binary, "
                "up to 20 s): the budget's share left for the model…"
            )
        self.wizard = self._make_wizard()

    @classmethod
    def for_demo(cls, pane: WizardPane) -> WizardDriver:
        from vramtui.core.demo import demo_profile

        return cls(pane, demo_profile())

    # -- the wizard's runner: one attempt, shown live -----------------------------------------------

    def _runner(self, profile: Any) -> Any:
        """Runs on the wizard's thread: the app learns of the attempt through messages."""
        from vramtui.core.launch.launcher import run_check
        from vramtui.tui.messages import AttemptStarted, ProcessStarted, RunEventSeen
        from vramtui.tui.widgets.tail import LogFeed

        if self._first_check is not None:
            check, self._first_check = self._first_check, None
            return check
        app = self.app
        feed = LogFeed(label=f"wizard step {len(self.wizard.steps)}: {profile.label}", tagged=True)
        app.post_message(AttemptStarted(profile, feed))
        samples = RunFeed(self._memory) if self._memory is not None else None

        def started(server: Any) -> None:
            if samples is not None:
                samples.pid = server.pid  # before the app hears of it: it keeps this run's curve
            self.server = server
            self.wizard.attempt_started(server)  # the record names this attempt's pid and log
            feed.follow_server(server)  # the pane shows this attempt's own diagnosis
            feed.push("vramtui: launched " + " ".join(server.command))
            app.post_message(ProcessStarted(server.pid))

        try:
            result = run_check(
                profile,
                on_log_line=feed.push_tagged,
                on_event=lambda event: app.post_message(RunEventSeen(event)),
                on_start=started,
                on_sample=samples,
                keep_if_works=True,
            )
        finally:
            server, self.server = self.server, None
        if server is not None and server.running:
            self._kept = (server, feed)  # it answered: kept until the wizard says whether it works
        else:
            feed.end(getattr(result, "exit_code", None))
        return result

    def _settle(self, step: Any) -> None:
        """A step that works keeps its server as the app's session; any other stops the kept one."""
        kept, self._kept = self._kept, None
        if kept is None:
            return
        server, feed = kept
        if step.outcome == "works":
            from vramtui.tui.messages import ServerVerified

            self.app.post_message(ServerVerified(self.wizard.profile, server, feed))
            self.verified = True
            return
        server.stop()
        feed.end(None)

    # -- steps (each in a thread; the pane learns through WizardUpdate messages) --------------------

    def _post(self, state: str, **kwargs: Any) -> None:
        from vramtui.tui.panes.wizard import WizardUpdate

        self.pane.post_message(WizardUpdate(state, **kwargs))

    def _in_thread(self, work: Any, *args: Any) -> None:
        if not self._lock.acquire(blocking=False):
            return

        def run() -> None:
            try:
                self._ensure_wizard()
                work(*args)
            except VramtuiError as error:
                self._post(f"stopped: {in_words(str(error))}", done=True, error=in_words(str(error)))
            except Exception as error:  # the app survives a wizard failure and says why
                self._post(f"stopped: {type(error).__name__}: {error}", done=True, error=str(error))
            finally:
                self._lock.release()

        threading.Thread(target=run, name="vramtui-wizard", daemon=True).start()

    def launch_first(self) -> None:
        if self._first_check is not None:
            self._post(f"{self.profile.label} failed as given (step 0): looking for one change…")
        else:
            self._post(f"launching {self.profile.label} as given (step 0)…")
        self._in_thread(self._first)

    def _first(self) -> None:
        step = self.wizard.start()
        self._settle(step)
        self._post(self._state_after(step), step=step)
        self._propose()

    def propose(self) -> None:
        self._post("looking for the next single change…")
        self._in_thread(self._propose)

    def _propose(self) -> None:
        if not self.wizard.steps:
            self._first()
            return
        proposal = self.wizard.propose()  # after a run that works, a follow-up (fewer slots) or None
        if proposal is None:
            last = self.wizard.last
            self._finish(last is not None and last.works)
            return
        self._post(self.PROPOSED, proposal=proposal)

    def apply(self, proposal: Any) -> None:
        self._post(f"relaunching with {proposal.param} = {proposal.to}…")
        self._in_thread(self._apply, proposal)

    def _apply(self, proposal: Any) -> None:
        step = self.wizard.apply(proposal)
        self._settle(step)
        self._post(self._state_after(step), step=step)
        self._propose()

    def skip(self, proposal: Any) -> None:
        """Turn this proposal down (the core records it) and ask for a change to another setting."""
        self._post(f"skipped {proposal.param}: looking for a change to another setting…")
        self._in_thread(self._skip, proposal)

    def _skip(self, proposal: Any) -> None:
        self.wizard.skip(proposal)
        self._propose()

    @property
    def skipped(self) -> set[str]:
        """The settings the user asked the wizard to leave alone."""
        return set() if self.wizard is None else self.wizard.skipped_params

    def edited(self, proposal: Any, text: str) -> Any:
        """The proposal with the typed value as the relaunch will hold it (one line when it cannot)."""
        from vramtui.core.wizard.edit import edited_proposal

        return edited_proposal(self.wizard.profile, proposal, text)

    def fit_warning(self, proposal: Any) -> str | None:
        """A sentence when the estimate says `proposal` will not fit (Wizard.fit_warning)."""
        return None if self.wizard is None else self.wizard.fit_warning(proposal)

    def _state_after(self, step: Any) -> str:
        obs = step.observation
        words = outcome_words(outcome_shade(step.outcome, step.notes))
        if obs is None:
            return f"step {step.index}: {words}" + (f" — {in_words(step.notes[0])}" if step.notes else "")
        where = f"reached {stage_words(obs.stage) if obs.stage else 'nothing'}"
        if obs.runs_over_budget:  # an attached server that answers: no stage failed (QA 8: "failed")
            return f"step {step.index}: runs, over budget — {obs.over_budget_text()}"
        if obs.failure:
            where += f", failed at {stage_words(obs.failure_stage)}: {failure_words(obs.failure)}"
        return f"step {step.index}: {words} — {where}"

    def _finish(self, success: bool) -> None:
        self.finished = True
        wizard = self.wizard
        # The record's end line: the session reopens as finished (and exports its verdict).
        success = self.succeeded = wizard.finish().success
        if success:
            final = wizard.profile
            params = ", ".join(f"{k}={v}" for k, v in sorted(final.params.items()))
            self._post(f"IT RUNS with {params} — export (x) to keep the steps", done=True)
            if not self.verified:  # the verified server runs on as the app's session: no second launch
                from vramtui.tui.messages import LaunchRequested

                self.app.post_message(LaunchRequested(final))
        else:
            reason = in_words(wizard.stop_reason or "no change left to propose")
            advice = "; ".join(in_words(line) for line in wizard.advice[:2])
            self._post(
                f"stopped: {reason}"
                + (f" — {advice}" if advice else "")
                + " (n: start again from the profile)",
                done=True,
            )

    def stop_attempt(self) -> None:
        """Stop the server of the attempt in progress (quitting); the wizard records what it saw."""
        server = self.server
        if server is not None:
            server.stop()
            if self.wizard is not None:
                self.wizard.abandon("quit during an attempt")  # the record gets its end line
        kept, self._kept = self._kept, None
        if kept is not None:
            kept[0].stop()

    @property
    def running(self) -> bool:
        server = self.server
        return server is not None and server.running

    def export(self) -> list[Path]:
        """Write the steps as Markdown and CSV next to the wizard's record."""
        from vramtui.core.wizard.steprecord import open_session, to_csv, to_markdown
        from vramtui.tui.words import record_words

        record = None if self.wizard is None else self.wizard.record_path
        if record is None or not record.is_file():
            raise VramtuiError("this wizard keeps no record to export")
        session = open_session(record)
        markdown = record.with_suffix(".md")
        table = record.with_suffix(".csv")
        backend = (session.header.get("profile") or {}).get("backend")
        markdown.write_text(to_markdown(session, record_words(backend)), encoding="utf-8")
        table.write_text(to_csv(session), encoding="utf-8")
        return [markdown, table]
