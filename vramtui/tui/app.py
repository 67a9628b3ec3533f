"""The vramtui app: memory, log, estimator and wizard panes in one screen.

All logic lives in `vramtui.core`; this module wires engines to widgets. Sampling and log tailing run
in threads that post messages; message handlers own the UI state.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Iterable
from pathlib import Path
from typing import Any, ClassVar

from textual import on, work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.containers import Container, Horizontal, Vertical
from textual.events import Resize
from textual.screen import ModalScreen, Screen
from textual.widgets import Button, Footer, Label, Static

from vramtui.core.errors import VramtuiError
from vramtui.tui import themes
from vramtui.tui.panes.base import Pane
from vramtui.tui.panes.estimator import EstimatorPane
from vramtui.tui.panes.log import LogPane
from vramtui.tui.panes.memory import GpuFound, MemoryPane
from vramtui.tui.panes.wizard import WizardPane
from vramtui.tui.session import ModelSession, SessionState

# Below this size the four panes do not fit side by side: show one pane and a status line with tabs.
WIDE_MIN_WIDTH = 140
WIDE_MIN_HEIGHT = 34

PANE_ORDER = ("memory", "log", "estimator", "wizard")


class ConfirmQuit(ModalScreen[bool]):
    """Asked before quitting while a model runs: quitting stops it."""

    DEFAULT_CSS = """
    ConfirmQuit { align: center middle; }
    ConfirmQuit > Vertical {
        width: 60; max-width: 95%; height: auto;
        border: thick $warning; background: $surface; padding: 1 2;
    }
    ConfirmQuit Label { width: 100%; }
    ConfirmQuit Horizontal { height: auto; margin-top: 1; }
    ConfirmQuit Button { margin-right: 2; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "Stop it and quit"),
        Binding("n,escape", "answer(False)", "Keep running"),
    ]

    def __init__(self, question: str) -> None:
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(self.question)
            with Horizontal():
                yield Button("Stop it and quit (y)", variant="error", id="yes")
                yield Button("Keep running (n)", id="no")

    def action_answer(self, value: bool) -> None:
        self.dismiss(value)

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")


class VramtuiApp(App[int]):
    TITLE = "vramtui"

    CSS = """
    Screen { layout: vertical; }
    #panes {
        layout: grid;
        grid-size: 2 2;
        grid-columns: 2fr 3fr;
        grid-rows: 1fr 1fr;
        height: 1fr;
    }
    Screen.-narrow #panes { layout: vertical; }
    Screen.-narrow Pane { display: none; }
    Screen.-narrow Pane.-active { display: block; height: 1fr; }
    #status {
        height: 1;
        text-wrap: nowrap;
        text-overflow: ellipsis;
        background: $panel;
        color: $text;
        padding: 0 1;
    }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit_app", "Quit"),
        Binding("1", "show_pane('memory')", "Memory", show=False),
        Binding("2", "show_pane('log')", "Log", show=False),
        Binding("3", "show_pane('estimator')", "Estimator", show=False),
        Binding("4", "show_pane('wizard')", "Wizard", show=False),
        Binding("e", "first_error", "1st error"),  # short labels: every key fits at 80 columns
        Binding("slash", "search_log", "Search"),
        Binding("r", "relaunch", "Relaunch"),
        Binding("n", "wizard_next", "Next step"),
        Binding("p", "pause_graph", "Pause"),
        Binding("t", "cycle_theme", "Theme"),
        Binding("z", "zoom_graph", "Zoom graph", show=False),
        Binding("g", "cycle_series", "Graph series", show=False),
        Binding("x", "export_wizard", "Export steps", show=False),
        Binding("s", "stop_model", "Stop model", show=False),
    ]

    # Every action the palette lists: (action, title, help). Keys are in BINDINGS.
    ACTIONS: tuple[tuple[str, str, str], ...] = (
        ("show_pane('memory')", "Show memory pane", "GPU, host and model-process memory with the graph (1)"),
        ("show_pane('log')", "Show log pane", "The model server's log and its diagnosis (2)"),
        (
            "show_pane('estimator')",
            "Show estimator pane",
            "Will it fit? Arithmetic on the model's numbers (3)",
        ),
        ("show_pane('wizard')", "Show wizard pane", "The guided downgrade, one change at a time (4)"),
        ("first_error", "Jump to first error", "Scroll the log to the first error line (e)"),
        ("search_log", "Search the log", "Find text in the log (/)"),
        ("relaunch", "Relaunch the model", "Stop the running model and start the profile again (r)"),
        ("stop_model", "Stop the model", "Stop the running model server and its children (s)"),
        ("wizard_next", "Wizard: next step", "Propose or apply the next single change (n)"),
        ("export_wizard", "Wizard: export steps", "Write the steps as Markdown and CSV (x)"),
        ("pause_graph", "Pause/resume the graph", "Freeze the memory graph; sampling goes on (p)"),
        ("zoom_graph", "Zoom the graph", "All / 1 hour / 10 minutes / 1 minute (z)"),
        ("cycle_series", "Graph another series", "GPU, model process or host RAM (g)"),
        ("cycle_theme", "Next theme", "Switch to the next colour theme (t)"),
        ("quit_app", "Quit vramtui", "Asks first when a model is running, and stops it (q)"),
    )

    def __init__(
        self,
        *,
        profile_path: str | None = None,
        log_file: str | None = None,
        replay_csv: str | None = None,
        demo: bool = False,
        theme: str | None = None,
        live_sampling: bool = True,
        sample_interval_s: float = 0.1,
        remember: bool = True,
    ) -> None:
        super().__init__()
        self.profile_path = profile_path
        self.log_file = log_file
        self.replay_csv = replay_csv
        self.demo = demo
        self.live_sampling = live_sampling
        self.sample_interval_s = sample_interval_s
        self.remember = remember
        self.sampler: Any = None
        self.session: ModelSession | None = None
        self.wizard_driver: Any = None  # set by the wizard pane; kept here so shutdown can reach it
        self.active_pane = "memory"
        self._screen_width = 0  # set by each layout pass; the status line's wording depends on it
        self._theme_names: list[str] = []
        for compiled in themes.load_themes().values():
            self.register_theme(compiled)
            self._theme_names.append(compiled.name)
        chosen = theme or themes.remembered_theme() or themes.DEFAULT_THEME
        if chosen not in self.available_themes:
            if theme:  # asked for by name on the command line: say what exists
                raise VramtuiError(f"unknown theme {theme!r} (available: {', '.join(self.theme_names)})")
            chosen = themes.DEFAULT_THEME if themes.DEFAULT_THEME in self.available_themes else "textual-dark"
        self.theme = chosen
        self._remember_theme_from_flag = theme is not None

    @property
    def theme_names(self) -> list[str]:
        return self._theme_names or ["textual-dark", "textual-light"]

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Hide keys that cannot do anything yet, so the footer keeps room for the ones that can."""
        if action == "relaunch":
            return self.session is not None
        if action == "wizard_next":
            try:
                wizard = self.query_one(WizardPane)
            except Exception:
                return True
            return wizard.driver is not None or wizard.profile_hint is not None
        return True

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return dict(themes.VARIABLE_DEFAULTS)

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
        self.theme_changed_signal.subscribe(self, self._theme_changed)
        if self._remember_theme_from_flag and self.remember:
            themes.remember_theme(self.theme)
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
        self.update_status()

    @on(Pane.Activated)
    def _pane_activated(self, message: Pane.Activated) -> None:
        name = message.pane.id or ""
        if name in PANE_ORDER and name != self.active_pane:
            self.active_pane = name
            for pane_name in PANE_ORDER:
                self.pane(pane_name).set_class(pane_name == name, "-active")
            self.update_status()

    def update_status(self) -> None:
        try:
            status = self.query_one("#status", Static)
        except Exception:
            return  # not composed yet
        from rich.text import Text

        session = self.session
        paused = " │ graph paused" if self.query_one(MemoryPane).paused else ""
        # The status line spans the screen, less its padding.
        room = (self._screen_width or self.size.width) - 2
        # Longest wording first; shorter ones (no backend name, short tab names) where it does not fit.
        wordings = (
            [(False, False), (False, True), (True, True)] if self.narrow else [(False, False), (False, True)]
        )
        for short_tabs, short_model in wordings:
            text = Text(no_wrap=True, overflow="ellipsis")
            if self.narrow:
                for number, name in enumerate(PANE_ORDER, 1):
                    label = f" {number} {name.capitalize()[:3] if short_tabs else name.capitalize()} "
                    text.append(label, style="reverse bold" if name == self.active_pane else "")
                text.append(" │ ")
            text.append(session.describe(short=short_model) if session is not None else "no model launched")
            text.append(paused)
            if text.cell_len <= room:
                break
        status.update(text)

    # -- sampling ---------------------------------------------------------------------------------

    def start_sampling(self) -> None:
        from vramtui.core.memory.sampling import HostSource, NvmlSource, Sampler

        memory = self.query_one(MemoryPane)
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
            memory.state.reset("process")
        if self.sampler is not None:
            self.sampler.watch_pid(pid)

    def follow_profile(self, profile: Any) -> None:
        """A profile is being launched: draw its budget on the graph, put its numbers in the estimator."""
        budget = getattr(profile, "memory_budget", None)
        self.query_one(MemoryPane).budget = float(budget) if budget else None
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

    def action_cycle_theme(self) -> None:
        names = self.theme_names
        current = names.index(self.theme) if self.theme in names else -1
        self.theme = names[(current + 1) % len(names)]
        self.notify(f"Theme: {self.theme}", timeout=2)

    def action_set_theme(self, name: str) -> None:
        if name in self.available_themes:
            self.theme = name

    def _theme_changed(self, theme: Any) -> None:
        if self.remember and theme.name in self._theme_names:
            themes.remember_theme(theme.name)

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
        driver = self.wizard_driver
        if driver is not None and driver.running:
            running.append(f"wizard attempt (pid {driver.server.pid})")
        return running

    def stop_models(self) -> None:
        """Stop every server this app started (blocks until each process group is gone)."""
        driver = self.wizard_driver
        if driver is not None:
            driver.stop_attempt()
        if self.session is not None:
            self.session.stop()

    def action_quit_app(self) -> None:
        running = self.running_models()
        if running:
            question = f"A model is running ({'; '.join(running)}). Stop it and quit?"
            self.push_screen(ConfirmQuit(question), self._quit_answer)
            return
        self.exit(0)

    def _quit_answer(self, stop: bool | None) -> None:
        if stop:
            self._stop_and_exit()

    @work(thread=True, exit_on_error=False, group="quit")
    def _stop_and_exit(self) -> None:
        self.stop_models()
        self.call_from_thread(self.exit, 0)

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        for action, title, help_text in self.ACTIONS:
            yield SystemCommand(title, help_text, self._palette_callback(action))
        for name in self.theme_names:
            yield SystemCommand(
                f"Theme: {name}", f"Use the {name} colour theme (remembered)", self._theme_callback(name)
            )
        for command in super().get_system_commands(screen):
            if command.title not in ("Quit", "Theme"):
                yield command

    def _palette_callback(self, action: str):  # type: ignore[no-untyped-def]
        async def run() -> None:
            await self.run_action(action)

        return run

    def _theme_callback(self, name: str):  # type: ignore[no-untyped-def]
        return lambda: self.action_set_theme(name)

    def shutdown(self) -> None:
        """Stop everything this app started: the sampler and any model server (with its children)."""
        if self.sampler is not None:
            self.sampler.close()
            self.sampler = None
        log = self.query(LogPane)
        if log:
            log.first().stop_feed()
        self.stop_models()

    def on_unmount(self) -> None:
        self.shutdown()


def run_app(
    *,
    profile_path: str | None = None,
    log_file: str | None = None,
    replay_csv: str | None = None,
    demo: bool = False,
    theme: str | None = None,
) -> int:
    """Open the app; the CLI (`vramtui`, `vramtui run`, `vramtui demo`) calls exactly this."""
    for label, value in (("log file", log_file), ("replay CSV", replay_csv), ("profile", profile_path)):
        if value is not None and not Path(value).is_file():
            raise VramtuiError(f"{label} not found: {value}")
    if log_file is not None:
        refuse_binary_log(log_file)
    if profile_path is not None:
        check_profile(profile_path)
    # Signal handlers can only be set on the main thread, and servers start from worker threads: set
    # them here, so a closed terminal (SIGHUP) or a kill (SIGTERM) still stops every server we started.
    from vramtui.core.launch.procs import install_exit_handlers

    install_exit_handlers()
    app = VramtuiApp(
        profile_path=profile_path, log_file=log_file, replay_csv=replay_csv, demo=demo, theme=theme
    )
    previous = _leave_cleanly_on_sigterm(app)
    try:
        result = app.run()
    finally:
        signal.signal(signal.SIGTERM, previous)
        app.shutdown()
    return int(result or 0)


def refuse_binary_log(path: str) -> None:
    """Refuse a file that is not a text log, as `vramtui diagnose` does (the same test, the same line):
    binary bytes at its head and no failure a log engine can read in it."""
    from vramtui.core.logs.textclean import looks_binary

    try:
        with Path(path).open("rb") as stream:
            head = stream.read(8192)
    except OSError as error:
        raise VramtuiError(f"cannot read {path}: {error.strerror or error}") from None
    if not looks_binary(head):
        return
    from vramtui.core.logs.diagnose import diagnose_file

    if not diagnose_file(path).failed:
        raise VramtuiError(f"{path} looks like binary data, not a text log")


def check_profile(path: str) -> None:
    """Read the profile and build its command line now: a bad value is one line before the screen opens,
    not a note in the log pane."""
    from vramtui.core.launch.launcher import build_command
    from vramtui.core.launch.profile import load_launch_profile

    build_command(load_launch_profile(path))


def _leave_cleanly_on_sigterm(app: VramtuiApp) -> Any:
    """SIGTERM (a kill from another shell): stop every server at once, then leave the screen the way
    the shell had it (no raw mode, no alternate screen) and exit 143. A second SIGTERM, or one that
    comes before the app runs, does what the exit handlers do: stop the servers and die of it."""
    from vramtui.core.launch.procs import kill_all_groups

    previous = signal.getsignal(signal.SIGTERM)
    asked = False

    def on_sigterm(signum: int, frame: Any) -> None:
        nonlocal asked
        if not asked and app.is_running:
            asked = True
            kill_all_groups()
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                loop = None
            if loop is not None:
                # Thread- and signal-safe: the app exits from its own loop, restoring the terminal.
                loop.call_soon_threadsafe(app.exit, 128 + signum)
                return
        if callable(previous):
            previous(signum, frame)
            return
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    signal.signal(signal.SIGTERM, on_sigterm)
    return previous
