"""Feeding log lines to the log pane from a thread: tagged lines, posted in compact batches.

A server can print thousands of lines a second and a saved log can hold millions; posting one message
per line would swamp the UI, and one Python object per line would fill memory. The feed works in its
own thread and hands lines over as `RowChunk`s (offsets and tag bytes) at most every `budget_s`
seconds (or every `max_batch` lines), each with the diagnosis so far.

Two sources of tags: a file (`--log FILE`) is read by the feed's own `LogDiagnoser`, and its text
stays in the file; a model server the app launched already runs one (`core.launcher.ModelServer`), so
its lines arrive tagged (`push_tagged`) and the pane shows that server's diagnosis — one log engine per
run, never two that could disagree. A stream's text is kept as bytes in the pane's store.
"""

from __future__ import annotations

import os
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.cells import cell_len

from vramtui.core.logs.stages import STAGES
from vramtui.tui.widgets.linestore import MAX_DISPLAY_CHARS, SEVERITY_CODE, RowChunk, display_text

STAGE_CODES: dict[str | None, int] = {None: 0, **{stage: code for code, stage in enumerate(STAGES, 1)}}


@dataclass(frozen=True)
class Progress:
    """How far the first read of a file has got (bytes), for the pane's "reading 42%"."""

    done: int
    total: int

    @property
    def percent(self) -> int:
        return 100 if self.total <= 0 else min(100, self.done * 100 // self.total)


# Called from the feed's thread with (new lines, diagnosis so far, finished?, progress of a file's read).
Deliver = Callable[[RowChunk, Any, bool, Progress | None], None]

_END = object()


def shown_width(raw: str) -> int:
    """Cells the line takes on screen once cleaned (cheap for the common printable line)."""
    if raw.isprintable() and len(raw) <= MAX_DISPLAY_CHARS:
        return len(raw) if raw.isascii() else cell_len(raw)
    text = display_text(raw)
    return len(text) if text.isascii() else cell_len(text)


class LogFeed:
    """Delivers tagged lines in time-budgeted batches.

    `tagged=False`: lines are plain text, tagged here by a streaming `LogDiagnoser`.
    `tagged=True`: lines come from a `ModelServer` already tagged (`push_tagged`), the diagnosis is the
    server's (`follow_server`); plain text pushed meanwhile is our own note, shown untagged.

    Any thread may make a feed and push to it; lines wait in its queue until the pane attaches it
    (`LogPane.attach_feed`), which sets `deliver` and starts the feed's thread.
    """

    def __init__(
        self,
        deliver: Deliver | None = None,
        *,
        backend: str | None = None,
        label: str = "",
        budget_s: float = 0.05,
        max_batch: int = 20000,
        tagged: bool = False,
    ) -> None:
        # An untagged feed's own log engine, made in the feed's thread (`_start`): importing and
        # building it is not the first frame's work.
        self.diagnoser: Any = None
        self._backend = backend if not tagged else None
        self._tagging = not tagged
        self.label = label
        self.server: Any = None  # the ModelServer whose diagnosis a tagged feed shows
        self.deliver = deliver
        self._budget_s = budget_s
        self._max_batch = max_batch
        self._queue: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._stop = threading.Event()
        self._in_memory = True  # False while reading a file: the text stays there
        self._pending = RowChunk(data=bytearray())
        self._offset = 0  # bytes of the source so far: the next line starts here
        self._reading: int | None = None  # a file's size while it is first read
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

    def _take(self, raw: str, size: int = 0) -> None:
        """One line of text; `size`: its bytes in the file being read (0: a streamed line)."""
        if self.diagnoser is None:  # our own note beside a server's lines: no tag
            self._add(raw, size, None, "info", None)
            return
        tag = self.diagnoser.feed(raw)
        self._add(raw, size, tag.stage, tag.severity, tag.number)

    def _take_tagged(self, record: Any) -> None:
        self._add(record.text, 0, record.stage, record.severity, getattr(record, "number", None))

    def _add(self, raw: str, size: int, stage: str | None, severity: str, number: int | None) -> None:
        if size:
            self._offset += size
        else:  # a streamed line: its text goes with the chunk
            data = (raw.rstrip("\n") + "\n").encode("utf-8", errors="replace")
            assert self._pending.data is not None
            self._pending.data += data
            self._offset += len(data)
        self.line_count += 1
        self._pending.add(self._offset, stage, severity, number, shown_width(raw))
        if len(self._pending) >= self._max_batch or time.monotonic() - self._last_flush >= self._budget_s:
            self._flush(False)

    def diagnosis(self) -> Any:
        """The diagnosis so far: the server's for a tagged feed, else this feed's own."""
        if self.diagnoser is not None:
            return self.diagnoser.result()
        server = self.server
        return None if server is None else server.diagnosis()

    def _flush(self, finished: bool) -> None:
        chunk = self._pending
        reading = self._reading is not None and not finished
        progress = Progress(self._offset, self._reading) if self._reading is not None else None
        self._pending = RowChunk(data=bytearray() if self._in_memory else None)
        self._last_flush = time.monotonic()
        if (len(chunk) or finished) and self.deliver is not None:
            # While a file is first read a verdict would be early: the diagnosis waits for its end.
            diagnosis = None if reading else self.diagnosis()
            self.deliver(chunk, diagnosis, finished, progress)

    def _start(self) -> None:
        if self._tagging and self.diagnoser is None:
            from vramtui.core.logs.diagnose import LogDiagnoser

            self.diagnoser = LogDiagnoser(backend=self._backend)

    def run_queue(self) -> None:
        """Drain pushed lines until `end()`/`stop()`; blocks, so call it in a thread."""
        self._start()
        while not self._stop.is_set():
            timeout = max(0.0, self._budget_s - (time.monotonic() - self._last_flush))
            try:
                item = self._queue.get(timeout=timeout if len(self._pending) else 0.5)
            except queue.Empty:
                if len(self._pending):
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
        self._start()
        with open(path, "rb") as handle:
            self._in_memory = False  # the text stays in the file: chunks carry offsets only
            self._pending = RowChunk()
            status = os.fstat(handle.fileno())
            self._reading = status.st_size  # the first read: batches say how far it got
            if self.diagnoser is not None:  # as `vramtui diagnose FILE`: its last stamp, else its last write
                from vramtui.core.logs.diagnose import log_end_time, log_start_time

                self.diagnoser.log_time = log_end_time(handle, status)
                self.diagnoser.log_start = log_start_time(handle)
            partial = b""
            while not self._stop.is_set():
                chunk = handle.read(1 << 20)
                if chunk:
                    partial = self._take_lines(partial + chunk)
                    if partial is None:
                        return
                    continue
                if self._reading is not None:
                    if partial:
                        self._take(partial.decode("utf-8", errors="replace"), len(partial))
                        partial = b""
                    self._flush(True)
                    self._reading = None
                elif len(self._pending):
                    self._flush(True)
                if not follow:
                    return
                self._stop.wait(poll_s)

    def _take_lines(self, data: bytes) -> bytes | None:
        """Take the whole lines in `data`; what follows the last newline is returned (None: stopped)."""
        pieces = data.split(b"\n")
        partial = pieces.pop()
        if self.diagnoser is None:  # a tagged feed made to read a file: its lines, untagged
            for piece in pieces:
                self._take(piece.decode("utf-8", errors="replace"), len(piece) + 1)
        else:
            self._tag_pieces(pieces)
        if self._stop.is_set():
            return None
        if len(partial) > 1 << 22:  # a runaway line with no newline: show what we have
            self._take(partial.decode("utf-8", errors="replace"), len(partial))
            partial = b""
        elif len(self._pending) >= self._max_batch or time.monotonic() - self._last_flush >= self._budget_s:
            self._flush(False)
        return partial

    def _tag_pieces(self, pieces: list[bytes]) -> None:
        """The hot loop of reading a file: each line tagged by the log engine and stored as its end
        offset and tag bytes in the pending chunk (no object kept per line)."""
        chunk = self._pending
        ends, stages, severities, numbers = chunk.ends, chunk.stages, chunk.severities, chunk.numbers
        diagnoser = self.diagnoser
        feed = diagnoser.feed_raw  # bytes: a line the memo knows changes nothing is never decoded
        offset = self._offset
        widest = chunk.widest
        for piece in pieces:
            offset += len(piece) + 1
            stage, severity = feed(piece)
            ends.append(offset)
            stages.append(STAGE_CODES[stage])
            severities.append(SEVERITY_CODE[severity])
            numbers.append(diagnoser.lines)
            # Cleaning never widens a line but for its tabs, and a line has no more characters than bytes:
            # most lines need no decoding, and fewer still a measuring.
            if len(piece) > widest or b"\t" in piece:
                text = piece.decode("utf-8", errors="replace")
                if len(text) > widest or "\t" in text:
                    widest = max(widest, shown_width(text))
        self._offset = offset
        self.line_count += len(pieces)
        chunk.widest = widest
