"""The server's merged stdout and stderr, read line by line in a thread of its own.

Raw reads (not a buffered file's iteration), so that a stop can tell "every line printed so far is
recorded" from "lines still on their way": a line taken after vramtui's stop line would be read as the
stop's own noise (a refusal, the error that ended the run). So vramtui's own line is handed on by the
reader thread itself, once the pipe is empty: ordering by construction, not by a timed poll (CI met a
poll that returned between a read and the handing on of its lines).
"""

from __future__ import annotations

import os
import select
import threading
from collections.abc import Callable
from typing import IO


class LineReader:
    """Reads `stream` until it closes, handing each line (without its line end) to `on_line`."""

    def __init__(self, stream: IO[bytes], on_line: Callable[[str], None], on_end: Callable[[], None]) -> None:
        self._stream, self._on_line, self._on_end = stream, on_line, on_end
        self._wake_r, self._wake_w = os.pipe()
        self._lock = threading.Lock()
        self._ours: str | None = None  # vramtui's line, to be handed on once the pipe is empty
        self._ours_done = threading.Event()
        self._closed = False
        self._thread = threading.Thread(target=self._read, name="vramtui-server-log", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def join(self, timeout: float) -> None:
        self._thread.join(timeout=timeout)

    def _read(self) -> None:
        fd, pending = self._stream.fileno(), b""
        try:
            while True:
                try:
                    ready = select.select([fd, self._wake_r], [], [])[0]
                    chunk = os.read(fd, 1 << 16) if fd in ready else None
                except (OSError, ValueError):
                    chunk = b""
                if chunk == b"":
                    break
                if chunk is None:  # woken with nothing in the pipe: every line printed so far is handed on
                    os.read(self._wake_r, 64)
                    self._hand_on_ours()
                    continue
                *lines, pending = (pending + chunk).split(b"\n")
                for raw in lines:
                    self._on_line(raw.decode("utf-8", errors="replace").rstrip("\r"))
            if pending:
                self._on_line(pending.decode("utf-8", errors="replace").rstrip("\r"))
            self._hand_on_ours()
        finally:
            with self._lock:  # closed under the lock: a late say_after_pipe must not write to a reused fd
                self._closed = True
                os.close(self._wake_r)
                os.close(self._wake_w)
            self._on_end()

    def _hand_on_ours(self) -> None:
        with self._lock:
            ours, self._ours = self._ours, None
            if ours is not None:
                self._on_line(ours)
                self._ours_done.set()

    def say_after_pipe(self, text: str, limit_s: float = 5.0) -> bool:
        """Hand `text` on after every line already in the pipe; False (not handed on) past `limit_s`.

        A server that prints without a pause for `limit_s` keeps the pipe from ever being empty; the
        caller then records its line itself, out of order at worst.
        """
        with self._lock:
            if self._closed or not self._thread.is_alive():
                return False
            self._ours = text
            self._ours_done.clear()
            try:
                os.write(self._wake_w, b"x")
            except OSError:
                pass
        if self._ours_done.wait(limit_s):
            return True
        with self._lock:  # withdrawn, unless the reader took it just now
            withdrawn, self._ours = self._ours is not None, None
        return not withdrawn
