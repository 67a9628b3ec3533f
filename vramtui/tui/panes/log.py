"""The log pane: the diagnosis with its advice pinned on top (log_header.py), the stage-coloured tail
below, search."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widgets import Input, Static

from vramtui.tui.messages import AdviceSized, BillReconciled
from vramtui.tui.panes.base import Pane
from vramtui.tui.panes.log_header import HEADER_ROWS, header_text
from vramtui.tui.widgets.linestore import RowChunk
from vramtui.tui.widgets.logview import LogView
from vramtui.tui.widgets.tail import LogFeed, Progress


class LogBatch(Message):
    """Tagged lines from a feed's thread, with the diagnosis so far (None while a file is first read)."""

    def __init__(
        self, feed: LogFeed, chunk: RowChunk, diagnosis: Any, finished: bool, progress: Progress | None
    ) -> None:
        super().__init__()
        self.feed = feed
        self.chunk = chunk
        self.diagnosis = diagnosis
        self.finished = finished
        self.progress = progress


BILL_ROWS = 24  # the bill's rows at most (its CSS max-height)


def bill_rows(lines: list[str], width: int, rows: int) -> list[str]:
    """The bill's first lines that fit `rows` rows of `width` cells (a long line wraps), then one that
    says how many were left out: never cut silently."""
    shown: list[str] = []
    used = 0
    for number, line in enumerate(lines):
        height = max(1, -(-len(line) // width))
        left = len(lines) - number
        if used + height > rows - (1 if left > 1 else 0):
            more = f"{left} more line" + ("s" if left > 1 else "")
            return [*shown, f"… {more} of the bill (a taller window shows them)"]
        shown.append(line)
        used += height
    return shown


class LogPane(Pane):
    PANE_TITLE = "Log"
    PANE_KEY = "2"

    DEFAULT_CSS = """
    LogPane #diagnosis {
        height: auto;
        max-height: 9;
        border-bottom: hkey $panel-lighten-2;
    }
    LogPane #bill {
        display: none;
        height: auto;
        max-height: 24;
        border-bottom: hkey $panel-lighten-2;
    }
    LogPane #bill.-shown {
        display: block;
    }
    LogPane #log-search {
        display: none;
        height: 1;
        border: none;
        padding: 0;
    }
    LogPane #log-search.-visible {
        display: block;
    }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("slash", "search", "Find"),
        Binding("escape", "close_search", "Close search", show=False),
    ]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.diagnosis: Any = None
        self.sized_advice: list[str] = []  # a failed launch's advice with the arithmetic's word on each
        self.from_file = False  # the feed reads a file (read to its end once progress is gone)
        self.progress: Progress | None = None  # a file still being read
        self.source_label = ""
        self.feed: LogFeed | None = None
        self.finished = False
        self.batches_received = 0  # how many LogBatch messages the lines came in (benchmarks read it)
        self._header_width = 0  # the width the header was last fitted to
        self._header_height = 0
        self.bill: BillReconciled | None = None  # the running server's bill, shown under the header

    def compose(self) -> ComposeResult:
        yield Static(id="diagnosis")
        yield Static(id="bill", markup=False)
        yield Input(
            placeholder="search the log (Enter: next, Shift+Enter: previous, Esc: close)", id="log-search"
        )
        yield LogView(id="log-view")

    def on_mount(self) -> None:
        super().on_mount()
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self.show_diagnosis())
        self.show_diagnosis()

    def focus_target(self) -> LogView:
        return self.view

    @property
    def view(self) -> LogView:
        return self.query_one(LogView)

    # -- sources ----------------------------------------------------------------------------------

    def attach_feed(self, feed: LogFeed, path: Path | None = None, *, follow: bool = True) -> None:
        """Show this feed from now on (the one before it stops): its batches come as LogBatch messages.

        A feed may be made and pushed to on any thread; its lines wait until it is attached here. With
        `path` the feed reads that file in its thread, else it drains what is pushed to it."""
        if self.feed is not None:
            self.feed.stop()
        self.view.clear(None if path is None else str(path))
        self.query_one("#bill", Static).remove_class("-shown")  # the bill was the last run's
        self.bill = None
        self.diagnosis = None
        self.sized_advice = []
        self.finished = False
        self.from_file = path is not None
        # A file says it is being read from the first frame, before its first batch.
        self.progress = None if path is None else Progress(0, path.stat().st_size if path.is_file() else 0)
        self.batches_received = 0
        self.source_label = feed.label
        self.border_subtitle = feed.label

        def deliver(chunk: RowChunk, diagnosis: Any, finished: bool, progress: Progress | None) -> None:
            self.post_message(LogBatch(feed, chunk, diagnosis, finished, progress))

        feed.deliver = deliver
        self.feed = feed
        self.show_diagnosis()
        # A daemon thread, not a Textual worker: a feed that follows a file never ends on its own, and
        # it must never keep the process alive after the app is gone.
        target = feed.run_queue if path is None else lambda: self._read_file(feed, path, follow)
        thread = threading.Thread(target=target, name="vramtui-log-feed", daemon=True)
        # Started after the next frame: a big file's read must not hold the GIL while the screen is
        # first drawn (lines pushed meanwhile wait in the feed's queue).
        self.call_after_refresh(thread.start)

    @staticmethod
    def _read_file(feed: LogFeed, path: Path, follow: bool) -> None:
        try:
            feed.run_file(path, follow=follow)
        except OSError as error:
            feed.push(f"vramtui: cannot read {path}: {error.strerror or error}")
            feed.end(None)
            feed.run_queue()

    def open_file(self, path: Path, *, follow: bool = True) -> None:
        self.attach_feed(LogFeed(label=path.name), path, follow=follow)

    def open_stream(self, label: str, backend: str | None = None, *, tagged: bool = False) -> LogFeed:
        """A live feed: the caller pushes lines (from any thread) and calls `end()` when done.

        `tagged=True` for a launched model: the caller passes the server's tagged lines to
        `feed.push_tagged` and the server to `feed.follow_server`; the pane shows that server's diagnosis.
        """
        feed = LogFeed(backend=backend, label=label, tagged=tagged)
        self.attach_feed(feed)
        return feed

    def stop_feed(self) -> None:
        if self.feed is not None:
            self.feed.stop()

    def on_unmount(self) -> None:
        self.stop_feed()

    @on(LogBatch)
    def _on_batch(self, message: LogBatch) -> None:
        if message.feed is not self.feed:
            return  # a batch from a feed we already replaced
        self.batches_received += 1
        view = self.view
        view.append(message.chunk)
        self.progress = None if message.finished else message.progress
        diagnosis = message.diagnosis
        if diagnosis is not None:
            self.diagnosis = diagnosis
            view.failure_stage = diagnosis.failure_stage if diagnosis.failed else None
            # The diagnosis may settle on the first error after more lines came (a traceback's cause):
            # its line number is the authority, looked up among the lines its engine numbered.
            view.first_error = self._first_error_index(diagnosis)
        if message.finished and not self.finished and view.follow and self._failed_with_error():
            # A run that ended in failure: show where it went wrong, not the traceback's tail
            # (unless the user scrolled away meanwhile).
            view.jump_to_first_error()
        self.finished = message.finished
        self.show_diagnosis()

    @on(BillReconciled)
    def _on_bill(self, message: BillReconciled) -> None:
        """The estimate, the engine's printout and the measurement per term: under the diagnosis."""
        self.bill = message
        self.query_one("#bill", Static).add_class("-shown")
        self.show_bill()
        self.show_diagnosis()  # the header gives the bill some of its rows
        self.view.keep_tail()

    def show_bill(self) -> None:
        """The bill in a share of the pane's rows, a row per term at this width (QA 7: at 80x24 the header
        and a wrapped bill took every row and no log line showed)."""
        if self.bill is None:
            return
        width = max(20, self.content_size.width)
        message = self.bill
        lines = message.render(max(8, min(40, width - 38))) if message.render else message.lines
        # a third of a small pane; on a tall one all but a log view of about 20 rows (the header's 8 among them)
        rows = min(BILL_ROWS, max(self._rows(3), self.size.height - 26))
        self.query_one("#bill", Static).update("\n".join(bill_rows([message.title, *lines], width, rows)))

    @on(AdviceSized)
    def _on_advice_sized(self, message: AdviceSized) -> None:
        """The launch that failed is still the one shown: its advice gets the arithmetic's words."""
        if message.feed is self.feed:
            self.sized_advice = message.lines
            self.show_diagnosis()

    def _failed_with_error(self) -> bool:
        diagnosis = self.diagnosis
        return bool(diagnosis is not None and diagnosis.failed and self.view.first_error is not None)

    def _first_error_index(self, diagnosis: Any) -> int | None:
        """The view index of the diagnosis' first error line, or None while it has not arrived."""
        number = getattr(diagnosis, "first_error_line", None)
        return self.view.lines.index_of_number(number) if number else None

    def on_resize(self) -> None:
        # The header's lines wrap anew: what fits whole in its rows is chosen again.
        if self.content_size.width != self._header_width or self.size.height != self._header_height:
            self.show_diagnosis()
            self.show_bill()

    def _rows(self, share: int) -> int:
        """A block's rows: 1/share of the pane, at least 2 (the log view keeps the rest)."""
        return max(2, self.size.height // share)

    def show_diagnosis(self) -> None:
        view = self.view
        self._header_width, self._header_height = self.content_size.width, self.size.height
        text = header_text(
            self,
            self.diagnosis,
            self.source_label,
            len(view.lines),
            width=self._header_width,
            rows=min(HEADER_ROWS, self._rows(3 if self.bill is not None else 2)),
            first_error_line=first_error_number(view.lines.numbers, view.first_error),
            progress=self.progress,
            sized_advice=self.sized_advice,
            settled=self.finished or (self.from_file and self.progress is None and self.batches_received > 0),
        )
        self.query_one("#diagnosis", Static).update(text)
        for pane in self.app.query("WizardPane"):  # by name: the wizard offers the on-GPU goal
            pane.diagnosis_changed(self.diagnosis)  # type: ignore[attr-defined]

    # -- actions ----------------------------------------------------------------------------------

    def jump_to_first_error(self) -> bool:
        found = self.view.jump_to_first_error()
        if not found:
            self.notify("No error in this log (yet).", timeout=3)
        return found

    def action_search(self) -> None:
        search = self.query_one("#log-search", Input)
        search.add_class("-visible")
        search.focus()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Esc closes the search only while it is open: otherwise it goes on to the app (the keys panel)."""
        if action == "close_search":
            return self.query_one("#log-search", Input).has_class("-visible")
        return True

    def action_close_search(self) -> None:
        search = self.query_one("#log-search", Input)
        search.remove_class("-visible")
        self.view.search_text = ""
        self.view.refresh()
        self.view.focus()

    @on(Input.Changed, "#log-search")
    def _search_changed(self, event: Input.Changed) -> None:
        self.view.find(event.value, from_index=(self.view.marked or 0) - 1 if self.view.marked else None)

    @on(Input.Submitted, "#log-search")
    def _search_next(self, event: Input.Submitted) -> None:
        if self.view.find(event.value) is None and event.value:
            self.notify(f"Not found: {event.value}", timeout=3)


def first_error_number(numbers: Sequence[int], index: int | None) -> int | None:
    """The first error's line number as the log engine numbered it (the file's and `diagnose`'s), not its
    place in the view, which may also hold lines no engine read (QA 38 F8: the demo's pane said 255 where
    the file and diagnose say 254)."""
    if index is None:
        return None
    number = numbers[index] if index < len(numbers) else 0
    return number or index + 1
