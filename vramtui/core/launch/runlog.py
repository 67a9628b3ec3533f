"""The run's log file: every line the server printed and vramtui's own, each headed by its local time.

A write that fails (a full disk) closes the file once and says why; the lines stay in memory and the run
goes on. Lines after the server's output ended (how it exited, what its tree held) are appended to the
closed file, so that a saved log reads as the live run did.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import IO


def stamp(t: float) -> str:
    """Local time with milliseconds, as servers print it: 2026-11-30T04:21:00.123."""
    return datetime.fromtimestamp(t).isoformat(timespec="milliseconds")


class RunLogFile:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._handle: IO[str] | None = path.open("w", encoding="utf-8", errors="replace")
        self.broken = False  # a write failed: later lines stay in memory only

    def write(self, t: float, text: str) -> str | None:
        """One line (ISO time first: the log engine strips that prefix); why it could not be written, once."""
        if self.broken:
            return None
        line = f"{stamp(t)} {text}\n"
        try:
            if self._handle is not None:
                self._handle.write(line)
                self._handle.flush()
            else:  # after the server's output ended (QA 19 F3: an exit status left no line in the file)
                with self.path.open("a", encoding="utf-8", errors="replace") as handle:
                    handle.write(line)
        except OSError as error:
            self.close()
            self.broken = True
            return f"{self.path}: {error.strerror or error}; later lines are kept in memory only"
        return None

    def close(self) -> None:
        if self._handle is not None:
            try:
                self._handle.close()
            except OSError:
                pass
            self._handle = None
