"""Screens the app pushes over its panes."""

from __future__ import annotations

from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Label


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


class ConfirmTakeOver(ConfirmQuit):
    """Asked before the wizard stops a server vramtui did not start: only a yes stops it."""

    DEFAULT_CSS = """
    ConfirmTakeOver { align: center middle; }
    ConfirmTakeOver > Vertical {
        width: 90; max-width: 95%; height: auto;
        border: thick $error; background: $surface; padding: 1 2;
    }
    ConfirmTakeOver Label { width: 100%; }
    ConfirmTakeOver Horizontal { height: auto; margin-top: 1; }
    ConfirmTakeOver Button { margin-right: 2; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "Stop it and take it over"),
        Binding("n,escape", "answer(False)", "Leave it running"),
    ]

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(self.question)
            with Horizontal():
                yield Button("Stop it and take it over (y)", variant="error", id="yes")
                yield Button("Leave it running (n)", id="no")
