"""A process's last words: the line that says why a program died before any engine line.

A program that exits at once (a wrapper script, a missing library, a bad config of its own) prints a line
no rule knows, and vramtui's launcher then writes "vramtui: the server exited with status N". That exit
line says *that* it died; the program's own last line says *why* (QA 20 D3). `check` quotes it from the
lines it holds, and `diagnose` from the log's last lines: both ask this module.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_ERROR_LOOKING = re.compile(
    r"(?i)\b(error|exception|invalid|refused|must be|should be|not allowed|cannot|can't|failed|fatal)\b"
)
# vramtui's run log stamps each line ("2026-12-06T10:52:41.425 "): its own lines are told apart after it
_STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?\s+")
FEW_LINES = 5  # a process that printed no more than this and exited: its last line is its words
_QUOTE = 300


def _unstamped(text: str) -> str:
    return _STAMP.sub("", text.strip(), count=1)


def program_lines(lines: Iterable[tuple[int, str]]) -> list[tuple[int, str]]:
    """The lines the program printed (numbered), without vramtui's own and blank ones."""
    said = []
    for number, text in lines:
        bare = _unstamped(text)
        if bare and not bare.startswith("vramtui:"):
            said.append((number, text.strip()))
    return said


def last_words(lines: Iterable[tuple[int, str]], few: bool) -> tuple[int, str] | None:
    """The last line of `lines` (numbered, the log's last ones) that reads like an error; else, when the
    program printed only a few lines in all (`few`), its very last one; else None."""
    said = program_lines(lines)
    for number, text in reversed(said):
        if _ERROR_LOOKING.search(text):
            return number, text[:_QUOTE]
    if few and said:
        number, text = said[-1]
        return number, text[:_QUOTE]
    return None
