"""The app's side of attaching to a server it did not start, from the memory pane's server table (Enter
on a row) or `vramtui attach`: look at the server off the UI thread, then follow it (tui/attached.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from textual import work

from vramtui.core.errors import VramtuiError
from vramtui.tui.messages import AttachReady
from vramtui.tui.widgets.servertable import AttachRequested


class AttachRequests:
    """Mixed into the App (which owns `attached`, `follower`, `launch_note` and `update_status`)."""

    attached: Any
    follower: Any
    launch_note: str | None
    if TYPE_CHECKING:  # the App's own

        def update_status(self) -> None: ...

        def post_message(self, message: Any) -> bool: ...

    def on_attach_requested(self, message: AttachRequested) -> None:
        self.launch_note = f"attaching to {message.label}…"
        self.update_status()
        self._look_at(message.pid)

    @work(thread=True, exit_on_error=False, group="attach", exclusive=True)
    def _look_at(self, pid: int) -> None:
        from vramtui.tui.attached import attach_view

        try:
            self.post_message(AttachReady(attach_view(pid)))
        except VramtuiError as error:
            self.post_message(AttachReady(None, str(error)))

    def on_attach_ready(self, message: AttachReady) -> None:
        if message.view is None:
            self.launch_note = f"cannot attach: {message.problem}"
            self.update_status()
            return
        if self.follower is not None:
            self.follower.stop()  # the server followed before keeps running: only its log command stops
        self.attached = message.view
        self._follow_attached()
        self.update_status()

    def _follow_attached(self) -> None:
        from vramtui.tui.attached import AttachedFollower

        self.follower = AttachedFollower(self, self.attached)
        self.launch_note = self.attached.describe()  # the status line: its current parameters
        self.follower.start()
