"""Feeding log lines to the log pane from a thread: tagged lines, posted in batches.

A server can print thousands of lines a second and a saved log can hold millions; posting one message
per line would swamp the UI. The feed works in its own thread and hands lines over in batches at most
every `budget_s` seconds (or every `max_batch` lines), each with the diagnosis so far.

Two sources of tags: a file (`--log FILE`) is read by the feed's own `LogDiagnoser`; a model server
the app launched already runs one (`core.launcher.ModelServer`), so its lines arrive tagged
(`push_tagged`) and the pane shows that server's diagnosis — one log engine per run, never two that
could disagree.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from vramtui.tui.widgets.logview import LogLine, display_text

# Called from the feed's thread with (new lines, diagnosis so far, finished?).
Deliver = Callable[[list[LogLine], Any, bool], None]

_END = object()


class LogFeed:
    """Delivers tagged lines in time-budgeted batches.

    `tagged=False`: lines are plain text, tagged here by a streaming `LogDiagnoser`.
    `tagged=True`: lines come from a `ModelServer` already tagged (`push_tagged`), the diagnosis is the
    server's (`follow_server`); plain text pushed meanwhile is our own note, shown untagged.
    """

    def __init__(
        self,
        deliver: Deliver,
        *,
        backend: str | None = None,
        budget_s: float = 0.05,
        max_batch: int = 20000,
        tagged: bool = False,
    ) -> None:
        self.diagnoser: Any = None
        if not tagged:
            from vramtui.core.logs.diagnose import LogDiagnoser

            self.diagnoser = LogDiagnoser(backend=backend)
        self.server: Any = None  # the ModelServer whose diagnosis a tagged feed shows
        self._deliver = deliver
        self._budget_s = budget_s
        self._max_batch = max_batch
        self._queue: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._stop = threading.Event()
        self._pending: list[LogLine] = []
        self._last_flush = time.monotonic()
        self.returncode: int | None = None
        self.line_count = 0

    # -- producers (any thread) -------------------------------------------------------------------

    def push(self, line: str) -> None:
        self._queue.put(line)

    def push_tagged(self, record: Any) -> None:
        """A `core.launcher.LogLine` (t, text, stage, severity, number): the server's log engine tagged
        and numbered it."""
        self._queue.put(record)

    def follow_server(self, server: Any) -> None:
        """Show this server's diagnosis (its own log engine read every line it printed)."""
        self.server = server

    def end(self, returncode: int | None = None) -> None:
        """The source ended (the process exited with `returncode`)."""
        self._queue.put((_END, returncode))

    def stop(self) -> None:
        self._stop.set()
        self._queue.put((_END, None))

    # -- the feed's own thread --------------------------------------------------------------------

    def _take(self, raw: str) -> None:
        if self.diagnoser is None:  # our own note beside a server's lines: no tag
            self._add(LogLine(text=display_text(raw)))
            return
        tag = self.diagnoser.feed(raw)
        self._add(
            LogLine(
                text=display_text(raw),
                stage=getattr(tag, "stage", None),
                severity=getattr(tag, "severity", "info"),
                is_first_error=bool(getattr(tag, "is_first_error", False)),
                number=getattr(tag, "number", None),
            )
        )

    def _take_tagged(self, record: Any) -> None:
        self._add(
            LogLine(
                text=display_text(record.text),
                stage=record.stage,
                severity=record.severity,
                number=getattr(record, "number", None),
            )
        )

    def _add(self, line: LogLine) -> None:
        self.line_count += 1
        self._pending.append(line)
        if len(self._pending) >= self._max_batch or time.monotonic() - self._last_flush >= self._budget_s:
            self._flush(False)

    def diagnosis(self) -> Any:
        """The diagnosis so far: the server's for a tagged feed, else this feed's own."""
        if self.diagnoser is not None:
            return self.diagnoser.result()
        server = self.server
        return None if server is None else server.diagnosis()

    def _flush(self, finished: bool) -> None:
        lines, self._pending = self._pending, []
        self._last_flush = time.monotonic()
        if lines or finished:
            self._deliver(lines, self.diagnosis(), finished)

    def run_queue(self) -> None:
        """Drain pushed lines until `end()`/`stop()`; blocks, so call it in a thread worker."""
        while not self._stop.is_set():
            timeout = max(0.0, self._budget_s - (time.monotonic() - self._last_flush))
            try:
                item = self._queue.get(timeout=timeout if self._pending else 0.5)
            except queue.Empty:
                if self._pending:
                    self._flush(False)
                continue
            if isinstance(item, str):
                self._take(item)
            elif isinstance(item, tuple) and item and item[0] is _END:
                self.returncode = item[1]
                if self.diagnoser is not None:  # a server's log engine notes its own exit
                    self.diagnoser.note_exit(self.returncode)
                break
            else:
                self._take_tagged(item)
        self._flush(True)

    def run_file(self, path: Path, *, follow: bool = True, poll_s: float = 0.25) -> None:
        """Read a log file from the start, then keep following what is appended (as `tail -f`)."""
        with open(path, "rb") as handle:
            partial = b""
            delivered_end = False
            while not self._stop.is_set():
                chunk = handle.read(1 << 20)
                if chunk:
                    data = partial + chunk
                    pieces = data.split(b"\n")
                    partial = pieces.pop()
                    if len(partial) > 1 << 22:  # a runaway line with no newline: show what we have
                        pieces.append(partial)
                        partial = b""
                    for piece in pieces:
                        self._take(piece.decode("utf-8", errors="replace"))
                        if self._stop.is_set():
                            return
                    continue
                if not delivered_end:
                    if partial:
                        self._take(partial.decode("utf-8", errors="replace"))
                        partial = b""
                    self._flush(True)
                    delivered_end = True
                elif self._pending:
                    self._flush(True)
                if not follow:
                    return
                self._stop.wait(poll_s)
