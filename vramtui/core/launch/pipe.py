"""The server's merged stdout and stderr, read line by line in a thread of its own.

Raw reads (not a buffered file's iteration), so that a stop can tell "every line printed so far is
recorded" (the reader waits on an empty pipe) from "lines still on their way": a line taken after
vramtui's stop line would be read as the stop's own noise (a refusal, the error that ended the run).
"""

from __future__ import annotations

import os
import select
import threading
import time
from collections.abc import Callable
from typing import IO


class LineReader:
    """Reads `stream` until it closes, handing each line (without its line end) to `on_line`."""

    def __init__(self, stream: IO[bytes], on_line: Callable[[str], None], on_end: Callable[[], None]) -> None:
        self._stream, self._on_line, self._on_end = stream, on_line, on_end
        self._waiting = threading.Event()  # set while the reader waits on an empty pipe
        self._thread = threading.Thread(target=self._read, name="vramtui-server-log", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def join(self, timeout: float) -> None:
        self._thread.join(timeout=timeout)

    def _read(self) -> None:
        fd, pending = self._stream.fileno(), b""
        while True:
            self._waiting.set()
            try:
                chunk = os.read(fd, 1 << 16)
            except OSError:
                chunk = b""
            self._waiting.clear()
            if not chunk:
                break
            *lines, pending = (pending + chunk).split(b"\n")
            for raw in lines:
                self._on_line(raw.decode("utf-8", errors="replace").rstrip("\r"))
        if pending:
            self._on_line(pending.decode("utf-8", errors="replace").rstrip("\r"))
        self._on_end()

    def catch_up(self, limit_s: float = 1.0) -> None:
        """Wait (at most `limit_s`) until every line already in the pipe has been handed on."""
        if not self._thread.is_alive():
            return
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline:
            try:
                in_pipe = bool(select.select([self._stream], [], [], 0)[0])
            except (OSError, ValueError):
                return
            if self._waiting.is_set() and not in_pipe:
                return
            time.sleep(0.005)
