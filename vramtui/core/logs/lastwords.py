"""A process's last words: the line that says why a program died before any engine line.

A program that exits at once (a wrapper script, a missing library, a bad config of its own) prints a line
no rule knows, and vramtui's launcher then writes "vramtui: the server exited with status N". That exit
line says *that* it died; the program's own last line says *why* (QA 20 D3). `check` quotes it from the
lines it holds, and `diagnose` from the log's last lines: both ask this module.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from vramtui.core.logs.textclean import reads_as_text, said_words

_ERROR_LOOKING = re.compile(
    r"(?i)\b(error|exception|invalid|refused|must be|should be|not allowed|cannot|can't|failed|fatal)\b"
)
# three letters in a row: a word ("Killed", "OOM"), which the few short lines that dumped bytes split into
# ("0", "/p", "hQ") never hold
_A_WORD = re.compile(r"[^\W\d_]{3}")
FEW_LINES = 5  # a process that printed no more than this and exited: its last line is its words
_QUOTE = 300


def program_words(text: str) -> bool:
    """A line the program printed in words: not vramtui's own (its run log's "vramtui: ..."), nor bytes
    the program dumped (QA 23 D5: 20 kB of binary before its last line hid that line)."""
    bare = said_words(text)
    return _A_WORD.search(bare) is not None and not bare.startswith("vramtui:") and reads_as_text(bare)


def last_words(lines: Iterable[tuple[int, str]], whole: bool = True) -> tuple[int, str] | None:
    """The last line of `lines` (numbered, the log's last ones) that the program printed and that reads
    like an error; else, when `lines` hold all the program's words (`whole`) and it printed only a few,
    its very last one; else None."""
    said = [(number, text.strip()) for number, text in lines if program_words(text)]
    for number, text in reversed(said):
        if _ERROR_LOOKING.search(text):
            return number, text[:_QUOTE]
    if whole and 0 < len(said) <= FEW_LINES:
        number, text = said[-1]
        return number, text[:_QUOTE]
    return None
