"""Small helpers shared by the subcommands."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from vramtui.core.errors import VramtuiError

# The exit status a command has settled on before it writes its report: kept when the reader of stdout
# goes away early (`vramtui diagnose x | head` under pipefail still says "failure").
_SETTLED: list[int] = []


def settle(status: int) -> int:
    """Say the command's exit status before writing (see `settled`); returns it."""
    _SETTLED[:] = [status]
    return status


def settled(default: int = 0) -> int:
    """The status settled on, once: `main` resets it for the next command in the same process."""
    status = _SETTLED[0] if _SETTLED else default
    _SETTLED.clear()
    return status


class ReaderGone:
    """stdout for a command whose reader may leave early (`vramtui check p.toml | head -3`): once the pipe
    breaks, the rest goes nowhere and the command runs on to its own status (QA 9: `check` stopped at the
    broken pipe, mid-run, and said 0)."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self.broken = False

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._gone()
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._gone()

    def _gone(self) -> None:
        try:  # the file descriptor too, so that the flush at exit finds somewhere to write
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())
            os.close(devnull)
        except (OSError, ValueError, AttributeError):
            pass
        self._stream = open(os.devnull, "w")  # noqa: SIM115 - for the rest of this command
        self.broken = True

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def has_terminal() -> bool:
    """Both ends are a terminal: the app's screen has somewhere to draw and someone to read keys from."""
    return sys.stdin.isatty() and sys.stdout.isatty()


def no_terminal_words(command: str, instead: str) -> str:
    """The one line (exit 2) for an app with no terminal to draw on and read keys from (QA: `vramtui demo
    </dev/null >out` hung, filling `out` with escape codes)."""
    return f"{command} opens a screen and needs a terminal; without one, {instead}"


def print_json(obj: Any) -> None:
    """One JSON object on stdout, as scripts read it."""
    json.dump(obj, sys.stdout, indent=2, sort_keys=False, default=str)
    sys.stdout.write("\n")
    sys.stdout.flush()


def input_file(path: str, label: str) -> Path:
    """A file the user named: "not found" and "is a folder" are one line each (exit 2)."""
    file = Path(path).expanduser()
    if file.is_dir():
        raise VramtuiError(f"{label} is a folder, not a file: {path}")
    if not file.is_file():
        raise VramtuiError(f"{label} not found: {path}")
    return file


def read_replay_csv(path: str, check_only: bool = False) -> Any:
    """A recorded nvidia-smi (or `vramtui record`) CSV with rows in it; the same refusal everywhere.
    `check_only`: stop at the first readable row (the app checks before its screen opens, then reads the
    file itself: a 1 GB recording was read twice)."""
    from vramtui.core.memory.nvsmi_csv import read_nvsmi_csv

    stop_after = 1 if check_only else None
    if path == "-":
        data = read_nvsmi_csv(sys.stdin, stop_after=stop_after)
    else:
        file = Path(path).expanduser()
        if file.is_dir():
            raise VramtuiError(f"{path} is a folder, not a file")
        if not file.exists():
            raise VramtuiError(f"no such file: {path}")
        from vramtui.core.logs.textclean import looks_binary

        # a pipe or a device (/dev/null, <(...)) is read once, as it comes: its head is not read twice
        # (QA 23 D9: /dev/null read "no such file")
        with file.open("rb") as head:
            start = head.read(4096) if file.is_file() else b""
        if looks_binary(start):
            raise VramtuiError(f"{path} looks like binary data, not a CSV recording")
        if start.lstrip().startswith(b'{"type": "session"'):  # the record the wizard points to (QA 14)
            raise VramtuiError(
                f"{path} is a wizard record, not a memory recording: `vramtui wizard {path} --export steps.md` "
                "writes its steps"
            )
        data = read_nvsmi_csv(file, stop_after=stop_after)
    if data.rows == 0:
        why = f"; {data.skipped} malformed row(s) skipped, first: {data.problems[0]}" if data.problems else ""
        why = why or " (it is empty, or a header alone)"
        raise VramtuiError(f"no readable rows in {path}{why}")
    return data
