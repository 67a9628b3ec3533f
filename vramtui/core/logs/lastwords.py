"""A process's last words: the line that says why a program died before any engine line.

A program that exits at once (a wrapper script, a missing library, a bad config of its own) prints a line
no rule knows, and vramtui's launcher then writes "vramtui: the server exited with status N". That exit
line says *that* it died; the program's own last line says *why* (QA 20 D3). `check` quotes it from the
lines it holds, and `diagnose` from the log's last lines: both ask this module.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from vramtui.core.logs.textclean import said_words

_ERROR_LOOKING = re.compile(
    r"(?i)\b(error|exception|invalid|refused|must be|should be|not allowed|cannot|can't|failed|fatal)\b"
)
_FEW_LINES = 5  # a process that printed no more than this and exited: its last line is its words
_QUOTE = 300


def last_words(lines: Iterable[tuple[int, str]], whole: bool = True) -> tuple[int, str] | None:
    """The last line of `lines` (numbered, the log's last ones) that the program printed and that reads
    like an error; else, when `lines` are the whole log (`whole`) and the program printed only a few, its
    very last one; else None. vramtui's own lines (its run log's "vramtui: ...") are not the program's."""
    said = [
        (number, text.strip())
        for number, text in lines
        if (bare := said_words(text)) and not bare.startswith("vramtui:")
    ]
    for number, text in reversed(said):
        if _ERROR_LOOKING.search(text):
            return number, text[:_QUOTE]
    if whole and 0 < len(said) <= _FEW_LINES:
        number, text = said[-1]
        return number, text[:_QUOTE]
    return None
