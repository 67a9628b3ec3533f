"""Messages that worker threads post to the app: the app and its panes own the UI state.

`post_message` is thread-safe: a thread never calls into a widget, it says what happened and the
handler on the UI thread (in `VramtuiApp`) updates the panes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from textual.message import Message

from vramtui.tui.widgets.tail import LogFeed


class AttemptStarted(Message):
    """A launch the app did not start itself (a wizard attempt) begins: show its log and its budget."""

    def __init__(self, profile: Any, feed: LogFeed) -> None:
        super().__init__()
        self.profile = profile
        self.feed = feed


class ProcessStarted(Message):
    """A model process started: the memory pane follows its process tree."""

    def __init__(self, pid: int) -> None:
        super().__init__()
        self.pid = pid


class RunEventSeen(Message):
    """A launcher event (launch, weights loaded, ready, requests, exit) for the memory graph."""

    def __init__(self, event: Any) -> None:
        super().__init__()
        self.event = event


class LaunchRequested(Message):
    """Launch this profile as the app's model session (the wizard found one that runs)."""

    def __init__(self, profile: Any) -> None:
        super().__init__()
        self.profile = profile


class ModelsStopped(Message):
    """Every server the app started is stopped (quitting): the app can exit."""


class ServerVerified(Message):
    """The wizard's attempt works and its server is left running: it becomes the app's model session."""

    def __init__(self, profile: Any, server: Any, feed: LogFeed) -> None:
        super().__init__()
        self.profile = profile
        self.server = server
        self.feed = feed


class BillReconciled(Message):
    """A launched or attached server's bill, reconciled (core/memory/reconcile.py): the log pane shows it."""

    def __init__(
        self, lines: list[str], title: str, render: Callable[[int], list[str]] | None = None
    ) -> None:
        super().__init__()
        self.lines = lines
        self.title = title
        self.render = render  # the lines again for a label column this wide (a narrow pane)


class AdviceSized(Message):
    """A failed launch's advice, each line with what the wizard's arithmetic makes of the change it names
    (the same sizing `vramtui check` prints): the log pane shows these in place of the bare lines."""

    def __init__(self, feed: LogFeed, lines: list[str]) -> None:
        super().__init__()
        self.feed = feed
        self.lines = lines


class AttachReady(Message):
    """A server picked in the table was looked at: follow it (`view`), or say why not (`problem`)."""

    def __init__(self, view: Any, problem: str = "") -> None:
        super().__init__()
        self.view = view
        self.problem = problem
