"""The wizard pane's driver on a server vramtui did not start (`vramtui attach TARGET`).

The core's `AttachedWizard` and `AttachedRunner` do the work, as for `vramtui wizard --attach`: step 0
observes the server as it runs (health, the smallest request, its tree's memory against the budget,
its log); each proposal is then applied one of two ways, chosen in the pane:

- restart it yourself (n): the pane shows the changed command (c copies it); this thread waits for a
  new PID at the same port (`wait_for_restart`), then the runner observes it and the wizard verifies
  it, the restarted command line first, as for the CLI;
- take it over (o): only after the user's yes in a modal, the process is stopped and the change is
  launched under vramtui (`run_check`); a server that works becomes the app's model session.

The thread posts messages; the pane and the app own what is shown.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual.message import Message

from vramtui.tui.panes.wizard_driver import WizardDriver
from vramtui.tui.words import in_words

if TYPE_CHECKING:
    from vramtui.tui.attached import AttachedView
    from vramtui.tui.panes.wizard import WizardPane


class AttachedProcess(Message):
    """Posted from the wizard's thread: another process serves now (restarted by the user, or launched
    by the take-over); the memory pane, the log pane and the status line follow it."""

    def __init__(
        self, pid: int | None, log_file: str | None, params: dict[str, object] | None, profile: Any = None
    ) -> None:
        super().__init__()
        self.pid = pid
        self.log_file = log_file
        self.params = params  # what its command line sets (None: not read, or ours after a take-over)
        self.profile = profile  # what it runs as a profile (the estimator's fields, the budget line)


def attached_hint(view: AttachedView) -> str:
    """What the wizard pane says on an attached server before its wizard starts."""
    if view.profile is None:
        return (
            f"attached to {view.target}: vramtui cannot rebuild its command line, so it proposes no change "
            "(it watches its memory and log)"
        )
    budget = view.profile.memory_budget
    held = f" within {budget / 2**20:.0f} MiB" if budget else ""
    return (
        f"attached to {view.target} (vramtui did not start it): press n to check it runs{held} and get "
        "one change; you restart it with the changed command, or vramtui takes it over after your yes"
    )


class AttachedDriver(WizardDriver):
    """One wizard session on an attached server, for the pane."""

    attached = True  # its step 0 is a server vramtui did not start, as it runs

    PROPOSED = "proposed — restart it yourself (n) or take it over (o); skip (k) or edit the value (v)"

    def __init__(
        self,
        pane: WizardPane,
        view: AttachedView,
        record_path: str | Path | None = None,
        restart_timeout_s: float | None = None,
    ) -> None:
        from vramtui.core.attach.guided import AttachedRunner, AttachedWizard

        self.view = view
        timeout = restart_timeout_s if restart_timeout_s is not None else view.restart_timeout_s
        self.runner = AttachedRunner(view.running, log=view.log_given, restart_timeout_s=timeout)

        def make() -> Any:  # on the first step's thread (it may measure the engine's idle footprint)
            wizard = AttachedWizard(view.profile, self.runner, keep=set(view.keep), record_path=record_path)
            self.runner.on_process = self._process  # after the wizard's own: ours tells it first
            return wizard

        super().__init__(pane, view.profile, wizard=make)
        self.runner.on_command = self._command
        self._change: tuple[Any, Any] | None = None  # (proposal, its ChangedCommand)
        self._feed: Any = None  # the take-over's launch log

    # -- what the pane shows ------------------------------------------------------------------------

    @property
    def pid(self) -> int | None:
        return self.runner.running.pid

    @property
    def taken_over(self) -> bool:
        """vramtui launched what serves now (after the user's yes): a change is relaunched as usual."""
        return self.runner.way == "take_over" and self.runner.allowed

    def change_for(self, proposal: Any) -> Any:
        """The command this proposal asks for, as the Backend builds it (`vramtui wizard --attach`'s)."""
        from vramtui.core.attach.restart import proposed_command

        if self._change is None or self._change[0] is not proposal:
            self._change = (proposal, proposed_command(self.runner.running, self.wizard.profile, proposal))
        return self._change[1]

    # -- the two ways -------------------------------------------------------------------------------

    def apply(self, proposal: Any) -> None:
        """Restart it yourself (or, once taken over, relaunch under vramtui)."""
        self.runner.cancel.clear()
        if self.taken_over:
            self._launch_feed(proposal)
            self._post(f"relaunching under vramtui with {proposal.param} = {proposal.to}…")
        else:
            self.runner.way = "restart"
            self._post(
                f"waiting for you to restart PID {self.pid} with the command below (up to "
                f"{self.runner.restart_timeout_s:g} s; k stops waiting)…"
            )
        self._in_thread(self._apply, proposal)

    def take_over(self, proposal: Any) -> None:
        """After the user's yes: stop the process vramtui did not start and launch the change."""
        self.runner.way, self.runner.allowed = "take_over", True
        follower = getattr(self.app, "follower", None)
        if follower is not None:
            follower.taken_over = True  # the status line says who stopped it
        self.runner.cancel.clear()
        self._launch_feed(proposal)
        self._post(
            f"stopping PID {self.pid} (your yes) and relaunching with {proposal.param} = {proposal.to}…"
        )
        self._in_thread(self._apply, proposal)

    def stop_waiting(self) -> bool:
        """End the wait for a restart (the step is recorded as an error; nothing is applied)."""
        if not self.busy_waiting:
            return False
        self.runner.cancel.set()
        return True

    @property
    def busy_waiting(self) -> bool:
        wizard = self.wizard
        return (
            self._lock.locked()
            and self.runner.way == "restart"
            and wizard is not None
            and len(wizard.steps) > 0
        )

    def _launch_feed(self, proposal: Any) -> None:
        from vramtui.core.attach.restart import candidate_profile
        from vramtui.tui.messages import AttemptStarted, RunEventSeen
        from vramtui.tui.widgets.tail import LogFeed

        candidate = candidate_profile(self.wizard.profile, proposal)
        feed = self._feed = LogFeed(label=f"taken over: {candidate.label}", tagged=True)
        self.runner.on_log_line = feed.push_tagged
        self.runner.on_event = lambda event: self.app.post_message(RunEventSeen(event))
        self.app.post_message(AttemptStarted(candidate, feed))

    # -- the runner's callbacks (the wizard's thread) -----------------------------------------------

    def _command(self, change: Any) -> None:
        if self.runner.way == "restart":
            self._post(
                f"waiting for you to restart PID {self.pid} with: {change.shell} (up to "
                f"{self.runner.restart_timeout_s:g} s; k stops waiting)…"
            )

    def _process(self, process: Any) -> None:
        self.wizard._process_started(process)  # the record names this process and its log
        server = self.runner.server
        if server is not None and self._feed is not None:
            self._feed.follow_server(server)
        seen = self.runner.last_command
        params = dict(seen.params) if seen is not None and server is None else None
        profile = self.runner.current if params is not None else None
        self.pane.post_message(AttachedProcess(process.pid, process.log_file, params, profile))

    def _runner(self, profile: Any) -> Any:  # the AttachedRunner runs every step instead
        raise AssertionError("an attached wizard runs through its AttachedRunner")

    # -- the end of a step and of the session -------------------------------------------------------

    def _settle(self, step: Any) -> None:
        """A taken-over server that works becomes the app's session (stopped when the app quits)."""
        server = self.runner.server
        if server is None or step.outcome != "works" or not server.running:
            return
        from vramtui.tui.messages import ServerVerified

        self.runner.server = None  # the app's session owns it now
        self.app.post_message(ServerVerified(self.wizard.profile, server, self._feed))
        self.verified = True

    def _state_after(self, step: Any) -> str:
        said = super()._state_after(step)
        if step.observation is not None and step.notes:
            said += f" — {in_words(step.notes[0])}"  # "new process N: its command line sets context = 4096"
        return said

    def _finish(self, success: bool) -> None:
        if not (self.wizard.last is not None and self.wizard.last.works):
            super()._finish(success)
            return
        self.finished = True
        self.wizard.finish()
        params = ", ".join(f"{k}={v}" for k, v in sorted(self.wizard.profile.params.items()))
        who = (
            "under vramtui, as the app's model (s stops it)"
            if self.verified
            else f"as PID {self.pid}, which vramtui leaves running"
        )
        last = self.wizard.steps[-1] if self.wizard.steps else None
        seen = f" ({in_words(last.notes[0])})" if last is not None and last.index and last.notes else ""
        self._post(f"IT RUNS with {params} {who}{seen} — export (x) to keep the steps", done=True)

    def stop_attempt(self) -> None:
        """Quitting: stop waiting for a restart, and stop a taken-over launch still in progress."""
        self.runner.cancel.set()
        server = self.runner.server
        if server is not None:
            server.stop()
            self.runner.server = None
            self.wizard.abandon("quit during an attempt")

    @property
    def running(self) -> bool:
        server = self.runner.server
        return server is not None and server.running

    @property  # type: ignore[override]
    def server(self) -> Any:
        """The server vramtui launched after a take-over (the app's quit question names it)."""
        return self.runner.server

    @server.setter
    def server(self, value: Any) -> None:
        pass  # the runner holds it; the base class's own launches never happen here


def two_ways(text: Any, driver: Any, proposal: Any) -> None:
    """The proposal's two ways, appended to the pane's proposal text: the exact command first."""
    change = driver.change_for(proposal)
    port = driver.runner.running.port
    text.append("\ncommand: ", style="bold")
    text.append(change.shell)
    for line in change.how:
        text.append(f"\n  {line}")
    text.append(
        f"\nRestart it yourself (n): vramtui waits for a new PID on port {port} and verifies it. "
        f"Take it over (o): vramtui stops PID {driver.pid} and relaunches it, after your yes. "
        "Copy (c), Skip (k).",
        style="dim",
    )


def follow_process(app: Any, message: AttachedProcess) -> None:
    """On the UI thread: the memory pane follows the new process tree, the status line names it, and
    the log pane opens the log the restarted process writes."""
    from vramtui.tui.panes.log import LogPane

    if message.pid is not None:
        app.watch_pid(message.pid)
    follower = getattr(app, "follower", None)
    if follower is None:
        return
    view = follower.view
    if message.pid is not None and message.pid != view.pid:
        view.pid = message.pid
        follower.exited = False  # the old PID is gone by design: the new one is watched
    if message.params is not None:
        view.params = dict(message.params)
    if message.profile is not None:
        app.follow_profile(message.profile)  # the estimator's fields: what it runs now
    if app.session is None:
        app.launch_note = view.describe()
        app.update_status()
    log = message.log_file
    if message.params is not None and log and Path(log).is_file():
        # Opened afresh even when it is the same file: `server > log` truncated it for the new process.
        view.log_file = log
        app.query_one(LogPane).open_file(Path(log), follow=True)


def ask_take_over(pane: Any, proposal: Any) -> None:
    """The wizard pane's take-over (`t`): a server run by docker or systemd is never taken over; another is
    stopped and relaunched under vramtui only after the user's yes, with the command it will run."""
    from vramtui.tui.screens import ConfirmTakeOver

    driver: Any = pane.driver
    target = driver.runner.running.target
    if driver.runner.running.in_box:  # docker or systemd restarts it: vramtui never takes it over
        pane.notify(f"{target.text} is run by {target.kind}: apply the change there (n).", timeout=6)
        return
    change = driver.change_for(proposal)
    question = (
        f"Stop PID {driver.pid}, which vramtui did not start, and relaunch it under vramtui with "
        f"{proposal.param} = {proposal.to}?\n{change.shell}"
    )

    def answered(yes: bool | None) -> None:
        if yes and pane.proposal is proposal and not pane.busy:
            driver.take_over(proposal)
        elif not yes:
            pane.notify(f"Not taken over: PID {driver.pid} runs as it did.", timeout=5)

    pane.app.push_screen(ConfirmTakeOver(question), answered)
