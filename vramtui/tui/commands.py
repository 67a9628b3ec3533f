"""The app's keys, command palette and colour themes: the plumbing `VramtuiApp` builds on."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, ClassVar

from textual.app import App, SystemCommand
from textual.binding import Binding, BindingType
from textual.screen import Screen

from vramtui.core.errors import VramtuiError
from vramtui.tui import themes

# Offered in the palette only while they can act (the app's check_action): a model to stop or relaunch,
# a wizard step to take, steps to export
_WHEN_POSSIBLE = frozenset({"relaunch", "stop_model", "wizard_next", "export_wizard"})


class CommandsApp(App[int]):
    """Keys, palette entries and themes; the actions themselves are `VramtuiApp`'s."""

    # Short descriptions: at 80 columns the footer holds the keys that apply (see `check_action`).
    PANES = Binding.Group("Pane", compact=True)
    GRAPH = Binding.Group("Graph", compact=True)
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit_app", "Quit"),
        # Textual's own ctrl+q quits at once: here it asks first, as q does, while a model runs.
        Binding("ctrl+q", "quit_app", "Quit", show=False, priority=True),
        # ctrl+c too (a reflex): Textual's own hint for it looks for an action named `quit` and says
        # nothing here. Not a priority: in a text field it still copies.
        Binding("ctrl+c", "quit_app", "Quit", show=False),
        Binding("1", "show_pane('memory')", "Memory", group=PANES),
        Binding("2", "show_pane('log')", "Log", group=PANES),
        Binding("3", "show_pane('estimator')", "Estimator", group=PANES),
        Binding("4", "show_pane('wizard')", "Wizard", group=PANES),
        Binding("e", "first_error", "Error"),
        Binding("slash", "search_log", "Find"),
        Binding("r", "relaunch", "Relaunch"),
        Binding("s", "stop_model", "Stop"),
        Binding("n", "wizard_next", "Next"),
        Binding("x", "export_wizard", "Export"),
        Binding("p", "pause_graph", "Pause", group=GRAPH),
        Binding("z", "zoom_graph", "Zoom", group=GRAPH),
        Binding("g", "cycle_series", "Series", group=GRAPH),
        Binding("t", "cycle_theme", "Theme"),
        # the keys of the focused pane and the app, in Textual's own panel (QA: ? and F1 did nothing)
        Binding("question_mark", "toggle_keys", "Keys", show=False),
        Binding("f1", "toggle_keys", "Keys", show=False),
        # Esc closes the panel too (QA 5: only ? did); a field's own Esc comes first (bindings of the
        # focused widget win over the app's)
        Binding("escape", "close_keys", "Close keys", show=False),
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
        ("toggle_keys", "Show the keys", "Open or close the panel of keys for where you are (? or F1)"),
        ("close_keys", "Close the keys", "Close the panel of keys (Esc)"),
        ("quit_app", "Quit vramtui", "Asks first when a model is running, and stops it (q)"),
    )

    def __init__(self, *, theme: str | None = None, remember: bool = True) -> None:
        super().__init__()
        self.remember = remember
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

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return dict(themes.VARIABLE_DEFAULTS)

    def watch_themes(self) -> None:
        """On mount: remember a theme named on the command line, and every one chosen later."""
        self.theme_changed_signal.subscribe(self, self._theme_changed)
        if self._remember_theme_from_flag and self.remember:
            themes.remember_theme(self.theme)

    @property
    def theme_names(self) -> list[str]:
        return self._theme_names or ["textual-dark", "textual-light"]

    def action_toggle_keys(self) -> None:
        """Textual's key panel: open it, or close it when it is open."""
        from textual.widgets import HelpPanel

        if self.screen.query(HelpPanel):
            self.action_hide_help_panel()
        else:
            self.action_show_help_panel()

    def action_close_keys(self) -> None:
        from textual.widgets import HelpPanel

        if self.screen.query(HelpPanel):
            self.action_hide_help_panel()

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

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        from textual.widgets import HelpPanel

        keys_open = bool(screen.query(HelpPanel))
        for action, title, help_text in self.ACTIONS:
            if action == "close_keys" and not keys_open:
                continue  # QA 6: offered with no panel of keys to close
            # QA 7: "Stop the model" beside a server vramtui did not start did nothing, silently
            if action in _WHEN_POSSIBLE and self.check_action(action, ()) is False:
                continue
            yield SystemCommand(title, help_text, self._palette_callback(action))
        for name in self.theme_names:
            yield SystemCommand(
                f"Theme: {name}", f"Use the {name} colour theme (remembered)", self._theme_callback(name)
            )
        for command in super().get_system_commands(screen):
            if command.title not in ("Quit", "Theme"):
                yield command

    def _palette_callback(self, action: str) -> Callable[[], Any]:
        async def run() -> None:
            await self.run_action(action)

        return run

    def _theme_callback(self, name: str) -> Callable[[], None]:
        return lambda: self.action_set_theme(name)
