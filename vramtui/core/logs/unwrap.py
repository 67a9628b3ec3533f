"""A log hard-wrapped by a terminal (tmux, screen, a Windows console's copy) joined back into its lines.

A copy from an 80-column terminal cuts every longer line at column 80: `n_ctx_train = 13107` / `2` read as a
context of 13107, and an assert split in two was no error at all (QA 27 N1). A wrap shows as many lines of
exactly one length, the longest in the log: such a line and the next one that does not start a record of
its own (a time stamp, a `name: ` head, a level, a traceback frame) are one line. The rules read the
joined log (they count lines between an error and the lines that place it), and each joined line's first
line in the file is kept, so that the numbers a diagnosis quotes are the file's (`wrapped_at` says it was).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from itertools import chain
from typing import TypeVar

Line = TypeVar("Line", str, bytes)

_LOOK_LINES = 4000  # lines the width is judged from (the first read)
_MIN_WIDTH, _MAX_WIDTH = 60, 400
_MIN_AT_WIDTH = 5  # lines of exactly the width, at least
_SHARE_AT_WIDTH = 0.2  # of the lines longer than half the width

# A line that starts a record of its own: a date or time stamp, a `[...]`/`(...)` head, `name: `, a level
# word, a traceback's frame or caret line, a container's `name  | ` prefix
_NEW_RECORD = (
    r"^(?:\s*\d{4}-\d\d-\d\d|\s*\d\d:\d\d:\d\d|\s*\d+\.\d\d\.\d{3}\.\d{3} |\[|\(|[A-Za-z_][\w.\-]*: |"
    r"[A-Za-z_][\w.\-]*\s+\| |(?:INFO|WARNING|WARN|ERROR|DEBUG|CRITICAL|FATAL)\b|\s+File \"|Traceback \()"
)
_NEW_RECORD_TEXT = re.compile(_NEW_RECORD)
_NEW_RECORD_BYTES = re.compile(_NEW_RECORD.encode())
# In a log whose lines carry a time stamp, only a stamp starts a record: a cut may leave "fo: build 1" or
# "(attempted to allocate ...)" at the start of a continuation
_STAMP = (
    r"^\s*(?:\d{4}-\d\d-\d\d|\d{4}/\d\d/\d\d|\d\d:\d\d:\d\d|\d+\.\d\d\.\d{3}\.\d{3} "
    r"|[A-Z][a-z]{2} +\d{1,2} \d\d:\d\d:\d\d)"  # journald's and syslog's "Dec  6 10:00:00"
)
_STAMP_TEXT = re.compile(_STAMP)
_STAMP_BYTES = re.compile(_STAMP.encode())


def wrap_width(lines: Sequence[str] | Sequence[bytes]) -> int | None:
    """The column a terminal cut the log's lines at, or None when it reads as unwrapped."""
    lengths = [_width(line) for line in lines[:_LOOK_LINES]]
    longest = max(lengths, default=0)
    if not _MIN_WIDTH <= longest <= _MAX_WIDTH:
        return None
    at_width = lengths.count(longest)
    longish = sum(1 for length in lengths if length > longest // 2)
    if at_width < _MIN_AT_WIDTH or at_width < _SHARE_AT_WIDTH * longish:
        return None
    # a wrap leaves a continuation after most lines at the width; fixed-width records (a request log's
    # table rows) are followed by records of their own
    by_stamp = stamped(lines)
    looked = lines[: len(lengths)]
    followed = [
        not _starts_record(looked[index + 1], by_stamp)
        for index, length in enumerate(lengths[:-1])
        if length == longest
    ]
    return longest if followed and sum(followed) * 2 >= len(followed) else None


def _bare(line: Line) -> Line:
    """The line without its carriage return (a CRLF log's)."""
    return line.rstrip("\r" if isinstance(line, str) else b"\r")  # type: ignore[arg-type]


def _width(line: str | bytes) -> int:
    """Its columns as the terminal filled them: trailing spaces count (a cut may fall after one)."""
    return len(_bare(line))


def stamped(lines: Sequence[str] | Sequence[bytes]) -> bool:
    """Most of the log's lines start with a time stamp."""
    looked = [line for line in lines[:_LOOK_LINES] if line.strip()]
    pattern = _STAMP_BYTES if looked and isinstance(looked[0], bytes) else _STAMP_TEXT
    return bool(looked) and sum(1 for line in looked if pattern.match(line)) * 2 >= len(looked)  # type: ignore[arg-type]


def _starts_record(line: str | bytes, by_stamp: bool) -> bool:
    if isinstance(line, bytes):
        pattern = _STAMP_BYTES if by_stamp else _NEW_RECORD_BYTES
    else:
        pattern = _STAMP_TEXT if by_stamp else _NEW_RECORD_TEXT
    return not line.strip() or pattern.match(line) is not None  # type: ignore[arg-type]


def unwrap(lines: list[Line], width: int, by_stamp: bool | None = None) -> tuple[list[Line], list[int]]:
    """`lines` with each line cut at `width` joined to its continuations, and where each joined line
    starts in `lines` (its index). `by_stamp`: only a time stamp starts a record (None: judged here)."""
    if by_stamp is None:
        by_stamp = stamped(lines)
    out: list[Line] = []
    starts: list[int] = []
    head = False  # the last line out was cut at the width: the next may be its continuation
    for index, line in enumerate(lines):
        if head and not _starts_record(line, by_stamp):
            out[-1] = _bare(out[-1]) + line  # type: ignore[operator]  # a space either side is its own
            head = _width(line) == width
            continue
        out.append(line)
        starts.append(index)
        head = _width(line) == width
    return out, starts


def unwrap_batches(
    batches: Iterator[list[bytes]], on_wrap: Callable[[int, list[int], int], None] | None = None
) -> Iterator[list[bytes]]:
    """Batches of raw lines, unwrapped where the first batch shows a terminal's wrap; `on_wrap` is told
    its width and, batch by batch, the file's 0-based line where each joined line starts and the file's
    lines read so far. A wrap that spans two batches is joined too (a batch's last line, cut at the width,
    waits for the next)."""
    first = next(batches, None)
    if first is None:
        return
    width = wrap_width(first)
    if width is None:
        yield first
        yield from batches
        return
    held: list[bytes] = []
    held_at: list[int] = []
    read = 0  # the file's lines before this batch
    by_stamp = stamped(first)
    for batch in chain([first], batches):
        lines, starts = unwrap(held + batch, width, by_stamp)
        at = [held_at[i] if i < len(held) else read + i - len(held) for i in starts]
        read += len(batch)
        keep = 1 if lines and _width(lines[-1]) == width else 0
        held, held_at = lines[len(lines) - keep :], at[len(at) - keep :]
        if on_wrap is not None:
            on_wrap(width, at[: len(at) - keep], read)
        yield lines[: len(lines) - keep]
    if held:
        if on_wrap is not None:
            on_wrap(width, held_at, read)
        yield held
