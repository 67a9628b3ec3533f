"""The log view's lines as byte offsets and compact tags, read and cleaned only when drawn (as toolong).

A million-line log is an `array('Q')` of line ends (8 bytes a line), a stage and a severity byte and a
4-byte engine number per line: no Python object per line. A saved log's text stays in its file
(`os.pread` on draw); a stream's text (a launched server's output, our own notes) is kept as its UTF-8
bytes in one bytearray, so memory follows the size of the log, not the count of its lines.

The feed's thread builds a `RowChunk` and posts it; the UI thread appends it to the store it owns.
"""

from __future__ import annotations

import math
import os
import stat
from array import array
from bisect import bisect_right
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from vramtui.core.logs.stages import STAGE_INDEX, STAGES
from vramtui.core.logs.textclean import clean_line

if TYPE_CHECKING:
    from vramtui.core.launch.launcher import LogLine

# Lines longer than this are cut for display (the full text stays in the log file); keeps rendering
# and width bookkeeping cheap when a server prints a megabyte of JSON on one line.
MAX_DISPLAY_CHARS = 2000

SEVERITIES = ("info", "warning", "error")
SEVERITY_CODE = {name: code for code, name in enumerate(SEVERITIES)}

# Rows decoded for drawing and kept: a few screens, whatever the log's length.
CACHED_ROWS = 4096
# Bytes read at a time when searching.
SEARCH_BLOCK = 1 << 22


def display_text(line: str) -> str:
    """What a log line looks like on screen: colour codes and control characters dropped (core
    textclean), very long lines cut for display."""
    line = clean_line(line)
    if len(line) > MAX_DISPLAY_CHARS:
        line = line[:MAX_DISPLAY_CHARS] + f" … ({len(line) - MAX_DISPLAY_CHARS} more characters)"
    return line


def stage_code(stage: str | None) -> int:
    """0 for no stage, else its place in STAGES plus one."""
    return 0 if stage is None else STAGE_INDEX[stage] + 1


@dataclass
class RowChunk:
    """Lines read by a feed's thread, in the store's compact form.

    `ends` are absolute end offsets (after the newline, if any) in the store's bytes; `data` is the
    text of these lines for an in-memory store (None when the text stays in a file)."""

    ends: array = field(default_factory=lambda: array("Q"))
    stages: bytearray = field(default_factory=bytearray)
    severities: bytearray = field(default_factory=bytearray)
    numbers: array = field(default_factory=lambda: array("I"))  # 0: a line no log engine read
    data: bytearray | None = None
    widest: int = 0

    def __len__(self) -> int:
        return len(self.ends)

    def add(self, end: int, stage: str | None, severity: str, number: int | None, width: int) -> None:
        self.ends.append(end)
        self.stages.append(stage_code(stage))
        self.severities.append(SEVERITY_CODE.get(severity, 0))
        self.numbers.append(number or 0)
        if width > self.widest:
            self.widest = width


class LineStore:
    """Every line of one log source: offsets and tags, rows decoded on demand through a small LRU."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.ends = array("Q")
        self.stages = bytearray()
        self.severities = bytearray()
        self.numbers = array("I")
        self.widest = 0
        self._fd: int | None = None
        if path is not None:
            try:
                self._fd = os.open(path, os.O_RDONLY)
                if not stat.S_ISREG(os.fstat(self._fd).st_mode):
                    self.close()
            except OSError:
                self.close()
            # No file to read rows from: the feed says why in a note, which this store keeps in memory.
        self._data: bytearray | None = None if self._fd is not None else bytearray()
        self._rows: OrderedDict[int, LogLine] = OrderedDict()

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __len__(self) -> int:
        return len(self.ends)

    def nbytes(self) -> int:
        """Bytes the per-line arrays take (the text of an in-memory store aside)."""
        return (
            self.ends.itemsize * len(self.ends)
            + len(self.stages)
            + len(self.severities)
            + self.numbers.itemsize * len(self.numbers)
        )

    def extend(self, chunk: RowChunk) -> None:
        if chunk.data is not None and self._data is not None:
            self._data += chunk.data
        self.ends.extend(chunk.ends)
        self.stages += chunk.stages
        self.severities += chunk.severities
        self.numbers.extend(chunk.numbers)
        self.widest = max(self.widest, chunk.widest)

    # -- one line ---------------------------------------------------------------------------------

    def stage(self, index: int) -> str | None:
        code = self.stages[index]
        return STAGES[code - 1] if code else None

    def severity(self, index: int) -> str:
        return SEVERITIES[self.severities[index]]

    def number(self, index: int) -> int | None:
        return self.numbers[index] or None

    def _span(self, index: int) -> tuple[int, int]:
        return (self.ends[index - 1] if index else 0), self.ends[index]

    def _read(self, start: int, end: int) -> bytes:
        if self._data is not None:
            return bytes(self._data[start:end])
        if self._fd is None:
            return b""
        try:
            return os.pread(self._fd, end - start, start)
        except OSError:  # the file went away or cannot be read now: an empty row, not a crash
            return b""

    def raw(self, index: int) -> str:
        data = self._read(*self._span(index))
        if data.endswith(b"\n"):
            data = data[:-1]
        return data.decode("utf-8", errors="replace")

    def __getitem__(self, index: int) -> LogLine:
        """The line as the view draws it (cleaned text); the core's LogLine, made when asked for."""
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(index)
        row = self._rows.get(index)
        if row is not None:
            self._rows.move_to_end(index)
            return row
        # A saved log's lines carry no time of their own: t is NaN ("not known").
        # Imported here: the launcher's module is not needed before a row is drawn (first frame).
        from vramtui.core.launch.launcher import LogLine

        text = display_text(self.raw(index))
        row = LogLine(math.nan, text, self.stage(index), self.severity(index), self.number(index))
        self._rows[index] = row
        if len(self._rows) > CACHED_ROWS:
            self._rows.popitem(last=False)
        return row

    def index_of_number(self, number: int) -> int | None:
        """The index of the line the log engine numbered `number`.

        The store may also hold lines the engine never read (a launcher's note, an app note when a
        launch fails), so engine line N sits at index N-1 or further down, never above."""
        numbers = self.numbers
        for index in range(max(0, number - 1), len(numbers)):
            found = numbers[index]
            if found == number:
                return index
            if found and found > number:
                break
        return None

    # -- search -----------------------------------------------------------------------------------

    def find(self, text: str, start: int, *, forward: bool = True) -> int | None:
        """The next line after `start` (before it, backwards) whose shown text contains `text`,
        case-insensitive, wrapping around; None if no line has it.

        Blocks of raw bytes are searched in C and a hit is confirmed on the line's shown text, so a
        word that only the cleaning makes (split by a colour code, a tab shown as spaces) is not found."""
        count = len(self)
        if not text or not count:
            return None
        needle = text.lower()
        raw_needle = needle.encode("utf-8")
        if forward:
            ranges = [(start + 1, count), (0, min(start + 1, count))]
        else:
            ranges = [(0, max(start, 0)), (max(start, 0), count)]
        for lo, hi in ranges:
            if lo >= hi:
                continue
            found = self._scan(needle, raw_needle, lo, hi, forward)
            if found is not None:
                return found
        return None

    def _scan(self, needle: str, raw_needle: bytes, lo: int, hi: int, forward: bool) -> int | None:
        """The first (last) line in [lo, hi) holding the needle."""
        blocks = self._blocks(lo, hi)
        for block_lo, block_hi in blocks if forward else reversed(blocks):
            base = self._span(block_lo)[0]
            data = self._read(base, self._span(block_hi - 1)[1]).lower()
            lines = self._hits(data, base, raw_needle, block_lo, block_hi)
            for index in lines if forward else reversed(lines):
                if needle in self[index].text.lower():
                    return index
        return None

    def _blocks(self, lo: int, hi: int) -> list[tuple[int, int]]:
        """[lo, hi) cut into runs of lines of about SEARCH_BLOCK bytes each."""
        blocks = []
        while lo < hi:
            limit = self._span(lo)[0] + SEARCH_BLOCK
            end = min(hi, max(lo + 1, bisect_right(self.ends, limit, lo, hi)))
            blocks.append((lo, end))
            lo = end
        return blocks

    def _hits(self, data: bytes, base: int, needle: bytes, lo: int, hi: int) -> list[int]:
        """Lines in [lo, hi) whose raw bytes hold the needle, each once, in order."""
        hits: list[int] = []
        position = data.find(needle)
        while position >= 0:
            index = bisect_right(self.ends, base + position, lo, hi)
            if index >= hi:
                break
            hits.append(index)
            # Go on from the next line: one hit per line is enough.
            position = data.find(needle, self.ends[index] - base)
        return hits
