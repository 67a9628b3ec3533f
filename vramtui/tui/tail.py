"""Feeding log lines to the log pane from a thread: tag each line with the log engine, post in batches.

A server can print thousands of lines a second and a saved log can hold millions; posting one message
per line would swamp the UI. The feed tags lines in its own thread and hands them over in batches at
most every `budget_s` seconds (or every `max_batch` lines), each with the diagnosis so far.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from vramtui.tui.logview import LogLine, display_text

# Called from the feed's thread with (new lines, diagnosis so far, finished?).
Deliver = Callable[[list[LogLine], Any, bool], None]

_END = object()


class LogFeed:
    """Tags lines with a streaming `LogDiagnoser` and delivers them in time-budgeted batches."""

    def __init__(
        self,
        deliver: Deliver,
        *,
        backend: str | None = None,
        budget_s: float = 0.05,
        max_batch: int = 20000,
    ) -> None:
        from vramtui.core.diagnose import LogDiagnoser

        self.diagnoser = LogDiagnoser(backend=backend)
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

    def end(self, returncode: int | None = None) -> None:
        """The source ended (the process exited with `returncode`)."""
        self._queue.put((_END, returncode))

    def stop(self) -> None:
        self._stop.set()
        self._queue.put((_END, None))

    # -- the feed's own thread --------------------------------------------------------------------

    def _take(self, raw: str) -> None:
        tag = self.diagnoser.feed(raw)
        self.line_count += 1
        self._pending.append(
            LogLine(
                text=display_text(raw),
                stage=getattr(tag, "stage", None),
                severity=getattr(tag, "severity", "info"),
                is_first_error=bool(getattr(tag, "is_first_error", False)),
            )
        )
        if len(self._pending) >= self._max_batch or time.monotonic() - self._last_flush >= self._budget_s:
            self._flush(False)

    def _flush(self, finished: bool) -> None:
        lines, self._pending = self._pending, []
        self._last_flush = time.monotonic()
        if lines or finished:
            self._deliver(lines, self.diagnoser.result(), finished)

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
            if isinstance(item, tuple) and item and item[0] is _END:
                self.returncode = item[1]
                self.diagnoser.note_exit(self.returncode)
                break
            self._take(str(item))
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
