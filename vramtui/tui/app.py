"""The vramtui app: memory, log, estimator and wizard panes in one screen.

All logic lives in `vramtui.core`; this module wires engines to widgets. Sampling and log tailing run
in threads that post messages; message handlers own the UI state.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from textual import on, work
from textual.app import ComposeResult
from textual.containers import Container
from textual.events import Resize
from textual.widgets import Footer, Static

from vramtui.core.errors import VramtuiError
from vramtui.tui.attach_requests import AttachRequests
from vramtui.tui.commands import CommandsApp
from vramtui.tui.messages import (
    AttemptStarted,
    LaunchRequested,
    ModelsStopped,
    ProcessStarted,
    RunEventSeen,
    ServerVerified,
)
from vramtui.tui.panes.base import Pane
from vramtui.tui.panes.estimator import EstimatorPane
from vramtui.tui.panes.log import LogPane
from vramtui.tui.panes.memory import GpuFound, MemoryPane
from vramtui.tui.panes.wizard import WizardPane
from vramtui.tui.screens import ConfirmQuit
from vramtui.tui.session import ModelSession, SessionRestart, SessionState
from vramtui.tui.startup import check_profile, refuse_binary_log, run_app
from vramtui.tui.status import status_text
from vramtui.tui.widgets.servertable import HereScan

__all__ = ["PANE_ORDER", "ConfirmQuit", "VramtuiApp", "check_profile", "refuse_binary_log", "run_app"]

# Below this size the four panes do not fit side by side: show one pane and a status line with tabs.
WIDE_MIN_WIDTH = 140
WIDE_MIN_HEIGHT = 34

PANE_ORDER = ("memory", "log", "estimator", "wizard")
# Keys that act on one pane: on a small screen they only show (and act) while it is on screen.
PANE_ACTIONS = {
    "pause_graph": "memory",
    "zoom_graph": "memory",
    "cycle_series": "memory",
    "search_log": "log",
    "export_wizard": "wizard",
}


class VramtuiApp(CommandsApp, AttachRequests):
    TITLE = "vramtui"

    CSS = """
    Screen { layout: vertical; }
    #panes {
        layout: grid;
        grid-size: 2 2;
        grid-columns: 2fr 3fr;  /* the log's lines and the wizard's table are the widest */
        grid-rows: 1fr 1fr;
        height: 1fr;
    }
    /* QA 26 D10: with no log and no wizard (a replay, plain sampling) the room goes to the curve: the
       empty log and wizard panes had 120 of 200 columns, the replayed curve 80 */
    Screen.-right-idle #panes { grid-columns: 3fr 2fr; }
    Screen.-narrow #panes { layout: vertical; }
    Screen.-narrow Pane { display: none; }
    Screen.-narrow Pane.-active { display: block; height: 1fr; }
    /* Textual's compact footer runs a group's label into the next key ("1234 Panee Error"). */
    Footer.-compact FooterLabel { margin: 0 1 0 0; }
    #status {
        height: 1;
        text-wrap: nowrap;
        text-overflow: ellipsis;
        background: $panel;
        color: $text;
        padding: 0 1;
    }
    """

    def __init__(
        self,
        *,
        profile_path: str | None = None,
        log_file: str | None = None,
        replay_csv: str | None = None,
        demo: bool = False,
        theme: str | None = None,
        live_sampling: bool | None = None,
        sample_interval_s: float = 0.1,
        remember: bool = True,
        attached: Any = None,
        source_url: str | None = None,
    ) -> None:
        super().__init__(theme=theme, remember=remember)
        self.attached = attached  # a tui.attached.AttachedView: a server vramtui did not start
        self.follower: Any = None
        self.profile_path = profile_path
        self.log_file = log_file
        self.replay_csv = replay_csv
        self.source_url = source_url  # a remote box's Prometheus endpoint instead of NVML (--source)
        self.demo = demo
        # a replay is a recording's curve alone: this machine's samples added to it changed its readings
        # (QA 17 F4: `--replay` read a peak of 1.6 GiB, this host's RAM now, in a recording of 935 MiB)
        self.live_sampling = replay_csv is None if live_sampling is None else live_sampling
        self.sample_interval_s = sample_interval_s
        self.sampler: Any = None
        self.session: ModelSession | None = None
        self.active_pane = "memory"
        self.launch_note: str | None = None  # the status line's words for a launch with no session
        self._screen_width = 0  # set by each layout pass; the status line's wording depends on it
        # The memory pane's table of every model server here: scanned on this machine when it samples
        # this machine (None: no table; tests give a scan with recorded NVML data).
        self.server_scan: Any = HereScan() if self.live_sampling and source_url is None else None

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Hide keys that cannot do anything now, so the footer keeps room for the ones that can; on a
        small screen a pane's own keys (the graph's, search, export) show with that pane only."""
        if action == "relaunch":
            return self.session is not None
        if action == "stop_model":
            return self.session is not None and self.session.running
        if self.narrow and action in PANE_ACTIONS and self.active_pane != PANE_ACTIONS[action]:
            return False
        try:
            wizard = self.query_one(WizardPane)
        except Exception:
            return True
        if action == "wizard_next":
            if wizard.driver is not None:  # a stopped wizard starts over; one that got it running is done
                return not wizard.driver.finished or not wizard.driver.succeeded
            if wizard.attached_view is not None:
                return wizard.attached_view.profile is not None
            # While the model runs the wizard pane says how to start one (stop it first).
            return wizard.profile_hint is not None and not (self.session and self.session.running)
        if action == "export_wizard":
            return bool(wizard.steps)
        return True

    # -- layout -----------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        with Container(id="panes"):
            yield MemoryPane(id="memory")
            yield LogPane(id="log")
            yield EstimatorPane(id="estimator")
            yield WizardPane(id="wizard")
        yield Static(id="status")
        yield Footer()

    def on_mount(self) -> None:
        self.watch_themes()
        self._apply_layout(self.size.width, self.size.height)
        self.action_show_pane(self.active_pane)
        memory = self.query_one(MemoryPane)
        if self.replay_csv:
            memory.load_replay(Path(self.replay_csv))
        if self.live_sampling:
            self.start_sampling()
        if self.log_file:
            self.query_one(LogPane).open_file(Path(self.log_file))
            if not self.replay_csv and not self.profile_path and not self.demo:
                self.active_pane = "log"
                self.action_show_pane("log")
        if self.attached is not None:
            self._follow_attached()
        if self.profile_path:
            self.launch(self.profile_path)
            self.action_show_pane("log")  # on a small terminal, the launch is what to watch
        elif self.demo:
            self.query_one(WizardPane).start_demo()
            self.action_show_pane("wizard")
        self.update_status()

    def on_resize(self, event: Resize) -> None:
        self._apply_layout(event.size.width, event.size.height)

    @property
    def narrow(self) -> bool:
        return self.screen.has_class("-narrow")

    def _apply_layout(self, width: int, height: int) -> None:
        narrow = width < WIDE_MIN_WIDTH or height < WIDE_MIN_HEIGHT
        self.screen.set_class(narrow, "-narrow")
        self._screen_width = width  # self.size may lag behind a resize here
        # At 80 columns the footer's keys only fit without their spacing.
        for footer in self.query(Footer):
            footer.compact = width < WIDE_MIN_WIDTH
        self.refresh_bindings()
        self.update_status()

    def pane(self, name: str) -> Pane:
        return self.query_one(f"#{name}", Pane)

    def action_show_pane(self, name: str) -> None:
        if name not in PANE_ORDER:
            return
        self.active_pane = name
        for pane_name in PANE_ORDER:
            self.pane(pane_name).set_class(pane_name == name, "-active")
        pane = self.pane(name)
        if self.focused is None or pane not in self.focused.ancestors_with_self:
            focus_target = pane.focus_target()
            if focus_target is not None:
                focus_target.focus()
        self.refresh_bindings()
        self.update_status()

    @on(Pane.Activated)
    def _pane_activated(self, message: Pane.Activated) -> None:
        name = message.pane.id or ""
        if name in PANE_ORDER and name != self.active_pane:
            self.active_pane = name
            for pane_name in PANE_ORDER:
                self.pane(pane_name).set_class(pane_name == name, "-active")
            self.refresh_bindings()
            self.update_status()

    def update_status(self) -> None:
        try:
            status = self.query_one("#status", Static)
        except Exception:
            return  # not composed yet
        paused = self.query_one(MemoryPane).paused
        # The status line spans the screen, less its padding.
        room = (self._screen_width or self.size.width) - 2
        tabs = PANE_ORDER if self.narrow else ()
        # a wizard attempt after the session's own launch failed: its fate is the newer news (QA 14)
        session = self.session
        if session is not None and not session.running and self.launch_note is not None:
            session = None
        text = status_text(session, tabs, self.active_pane, paused=paused, room=room, note=self.launch_note)
        status.update(text)
        self._balance_columns()

    def _balance_columns(self) -> None:
        """The wide grid's room follows content: the right column (log, wizard) gives way while both
        are empty. Checked with the status line, which every launch, attach and wizard step updates."""
        wizard = self.query_one(WizardPane)
        idle = (
            self.query_one(LogPane).feed is None
            and wizard.driver is None
            and not wizard.steps
            and self.session is None
            and self.attached is None
        )
        self.screen.set_class(idle, "-right-idle")

    # -- sampling ---------------------------------------------------------------------------------

    def start_sampling(self) -> None:
        from vramtui.core.memory.sampling import HostSource, NvmlSource, Sampler

        memory = self.query_one(MemoryPane)
        if self.source_url:
            from vramtui.tui.remote import remote_sampler

            self.sampler = remote_sampler(memory, self.source_url, self.sample_interval_s)
            return
        nvml = NvmlSource()
        status = nvml.status()
        memory.set_gpu_status(status.ok, status.message)
        sources: list[Any] = [nvml, HostSource()] if status.ok else [HostSource()]
        if not status.ok:
            nvml.close()
        self.sampler = Sampler(
            sources, interval_s=self.sample_interval_s, on_sample=memory.ingest_from_thread
        )
        self.sampler.start()

    def watch_pid(self, pid: int | None) -> None:
        """Follow a new model process: its curve starts afresh (one run's readings, not several)."""
        memory = self.query_one(MemoryPane)
        if pid is not None and pid != memory.watched_pid:
            memory.watched_pid = pid
            memory.state.follow(pid)
        if self.sampler is not None:
            self.sampler.watch_pid(pid)

    def follow_profile(self, profile: Any) -> None:
        """A profile is being launched: draw its budget on the graph, put its numbers in the estimator."""
        budget = getattr(profile, "memory_budget", None)
        memory = self.query_one(MemoryPane)
        memory.budget = float(budget) if budget else None
        # A server vramtui launches gets the budget as a cap on its address space (the launcher's
        # rlimit), not on its RSS; an attached one is judged by its measured RSS against it.
        memory.budget_words = "budget" if self.attached is not None else "address-space budget"
        self.query_one(EstimatorPane).prefill_from_profile(profile)

    # -- the model --------------------------------------------------------------------------------

    def launch(self, profile_or_path: Any) -> None:
        """Start a profile's server: its log goes to the log pane, its memory to the memory pane."""
        if self.session is not None and self.session.running:
            self.notify("A model is already running: relaunch with r.", severity="warning")
            return
        try:
            self.session = ModelSession.from_profile(self, profile_or_path)
        except VramtuiError as error:
            self.notify(str(error), severity="error", timeout=8)
            self.launch_note = f"launch failed: {error}"
            self.update_status()
            return
        self.follow_profile(self.session.profile)
        self.session.start()
        self.update_status()

    @on(SessionState)
    def _session_state(self, message: SessionState) -> None:
        self.refresh_bindings()
        self.update_status()
        if message.pid is not None:
            self.watch_pid(message.pid)
        if message.event is not None:
            self.query_one(MemoryPane).add_event(message.event)
        self.query_one(WizardPane).session_changed(self.session)

    @on(SessionRestart)
    def _session_restart(self, message: SessionRestart) -> None:
        if message.session is self.session:
            message.session.start()

    @on(AttemptStarted)
    def _attempt_started(self, message: AttemptStarted) -> None:
        self.follow_profile(message.profile)
        self.query_one(LogPane).attach_feed(message.feed)

    @on(ProcessStarted)
    def _process_started(self, message: ProcessStarted) -> None:
        self.watch_pid(message.pid)

    @on(RunEventSeen)
    def _run_event(self, message: RunEventSeen) -> None:
        self.query_one(MemoryPane).add_event(message.event)

    @on(LaunchRequested)
    def _launch_requested(self, message: LaunchRequested) -> None:
        self.launch(message.profile)

    @on(ServerVerified)
    def _server_verified(self, message: ServerVerified) -> None:
        if self.session is not None and self.session.running:
            self.session.stop_async()  # n is refused while a model runs; still, never two sessions
        self.launch_note = None
        self.session = ModelSession.adopt(self, message.profile, message.server, message.feed)
        self.follow_profile(message.profile)
        self.update_status()

    @on(GpuFound)
    def _gpu_found(self, message: GpuFound) -> None:
        self.query_one(EstimatorPane).set_card_memory(message.total_bytes)

    def action_relaunch(self) -> None:
        if self.session is None:
            self.notify("No profile to relaunch: start with `vramtui run PROFILE` or the demo.", timeout=4)
            return
        self.session.relaunch()

    def action_stop_model(self) -> None:
        if self.session is not None and self.session.running:
            self.session.stop_async()

    # -- actions ----------------------------------------------------------------------------------

    def action_first_error(self) -> None:
        self.action_show_pane("log")
        log = self.query_one(LogPane)
        if log.jump_to_first_error():
            log.view.focus()

    def action_search_log(self) -> None:
        self.action_show_pane("log")
        self.query_one(LogPane).action_search()

    def action_pause_graph(self) -> None:
        paused = self.query_one(MemoryPane).toggle_pause()
        self.notify("Graph paused (sampling goes on)." if paused else "Graph resumed.", timeout=2)
        self.update_status()

    def action_zoom_graph(self) -> None:
        zoom = self.query_one(MemoryPane).cycle_zoom()
        self.notify(f"Graph zoom: {zoom}", timeout=2)

    def action_cycle_series(self) -> None:
        key = self.query_one(MemoryPane).cycle_series()
        if key is None:
            self.notify("No memory series yet.", timeout=2)

    def action_wizard_next(self) -> None:
        self.action_show_pane("wizard")
        self.query_one(WizardPane).next_step()

    def action_export_wizard(self) -> None:
        self.query_one(WizardPane).export()

    def running_models(self) -> list[str]:
        """What this app started that still runs: its session's server, the wizard's attempt."""
        running = []
        if self.session is not None and self.session.running:
            running.append(self.session.describe())
        driver = self.query_one(WizardPane).driver
        if driver is not None and driver.running:
            running.append(f"wizard attempt (pid {driver.server.pid})")
        return running

    def stop_models(self) -> None:
        """Stop every server this app started (blocks until each process group is gone)."""
        wizard = self.query(WizardPane)
        driver = wizard.first().driver if wizard else None
        if driver is not None:
            driver.stop_attempt()
        if self.session is not None:
            self.session.stop()

    def action_quit_app(self) -> None:
        running = self.running_models()
        if running:
            # each item ends in its own "(pid N)": no parenthesis around them (QA 12: "(pid 28715))")
            question = f"A model is running: {'; '.join(running)}. Stop it and quit?"
            self.push_screen(ConfirmQuit(question), self._quit_answer)
            return
        self.exit(0)

    def _quit_answer(self, stop: bool | None) -> None:
        if stop:
            self._stop_and_exit()

    @work(thread=True, exit_on_error=False, group="quit")
    def _stop_and_exit(self) -> None:
        self.stop_models()
        self.post_message(ModelsStopped())

    @on(ModelsStopped)
    def _models_stopped(self) -> None:
        self.exit(0)

    def shutdown(self) -> None:
        """Stop everything this app started: the sampler and any model server (with its children)."""
        if self.sampler is not None:
            self.sampler.close()
            self.sampler = None
        if self.follower is not None:
            self.follower.stop()  # its log command only: the attached server keeps running
        log = self.query(LogPane)
        if log:
            log.first().stop_feed()
        self.stop_models()

    def on_unmount(self) -> None:
        self.shutdown()
