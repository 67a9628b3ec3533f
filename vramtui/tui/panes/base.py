"""The frame every pane shares: a titled, bordered container that tells the app when it gains focus."""

from __future__ import annotations

from textual.containers import Vertical
from textual.events import DescendantFocus
from textual.message import Message
from textual.widget import Widget


class Pane(Vertical):
    """One of the four panes. On narrow terminals only the active pane is displayed."""

    PANE_TITLE = ""
    PANE_KEY = ""

    DEFAULT_CSS = """
    Pane {
        border: round $panel-lighten-2;
        border-title-color: $text-muted;
        border-title-style: bold;
        padding: 0 1;
        height: 1fr;
        width: 1fr;
    }
    Pane:focus-within {
        border: round $accent;
        border-title-color: $accent;
    }
    """

    class Activated(Message):
        def __init__(self, pane: Pane) -> None:
            super().__init__()
            self.pane = pane

    def focus_target(self) -> Widget | None:
        """Where focus goes when the pane is shown: itself if focusable, else its first shown control."""
        if self.focusable:
            return self
        for widget in self.query("*"):
            if widget.focusable and all(
                node.display for node in widget.ancestors_with_self if node is not self
            ):
                return widget
        return None

    def on_mount(self) -> None:
        self.border_title = f"{self.PANE_KEY} {self.PANE_TITLE}".strip()

    def on_descendant_focus(self, event: DescendantFocus) -> None:
        self.post_message(self.Activated(self))
