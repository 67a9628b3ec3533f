"""Turn raw model-server output into safe, printable text lines.

Server logs carry ANSI colour codes, carriage-return progress bars, stray binary bytes and invalid
UTF-8, and sometimes one enormous line. The diagnosis and the log pane both read them through here:
bytes are decoded without ever raising, control characters are dropped, and lines are capped so a
50 MB line costs bounded memory.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import BinaryIO

# Longest line kept, in bytes; the rest of a longer line is skipped (and the line marked as cut).
MAX_LINE_BYTES = 16 * 1024
READ_CHUNK_BYTES = 1 << 20

# CSI (ESC [ ... final), OSC (ESC ] ... BEL or ESC \), and two-byte escapes (ESC + one char).
_ANSI_RE = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]|\x9b[0-?]*[ -/]*[@-~]"
)
# C0 controls except tab, plus DEL and the C1 block; \r is handled separately (progress bars).
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
# Rich/Textual markup tags, as rich.markup.escape finds them: "[" followed by a tag-like start.
_MARKUP_RE = re.compile(r"(\\*)(\[[a-z#/@][^[]*?])")

CUT_MARK = " …[line cut]"


# A line's bookkeeping before its words, as one-line verdicts quote it (QA 22: "0.00.033.807 E
# ggml_aligned_malloc: ..." in check's headline): vramtui's run-log stamp, llama.cpp's time and level,
# vLLM's process tag, level, date and source.
_PREFIXES_RE = re.compile(
    r"^(?:\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?\s+"
    r"|\d+\.\d\d\.\d{3}\.\d{3} [DIWE] "
    r"|\([\w-]+ pid=\d+\)\s+"
    r"|(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \[[\w./-]+:\d+\]\s+)+"
)


def said_words(text: str) -> str:
    """The line's own words without the stamps and tags before them (the full line stays in the log view
    and in diagnose's first error, where the line is shown as it is)."""
    return _PREFIXES_RE.sub("", text.strip(), count=1) or text.strip()


def decode_bytes(data: bytes) -> str:
    """Decode bytes as UTF-8, replacing what is not UTF-8; never raises."""
    return data.decode("utf-8", errors="replace")


def strip_ansi(text: str) -> str:
    """Remove ANSI escape sequences (colours, cursor moves, terminal titles)."""
    if "\x1b" not in text and "\x9b" not in text:
        return text
    return _ANSI_RE.sub("", text)


def clean_line(text: str, *, last_segment: bool = False) -> str:
    """One printable line: no ANSI codes, no control characters, no trailing newline.

    A carriage return redraws a terminal line (progress bars). With `last_segment` only what the
    terminal would finally show is kept; otherwise the segments are joined with spaces, so that a
    line like "Loading shards: 0%|  | 0/2\\rKilled" still says both things.
    """
    text = text.rstrip("\r\n")
    text = strip_ansi(text)
    if "\r" in text:
        segments = [segment for segment in text.split("\r") if segment.strip()]
        # Only the last segment is what the terminal finally shows.
        text = (segments[-1] if segments else "") if last_segment else " ".join(segments)
    text = _CONTROL_RE.sub("", text)
    return text.expandtabs(4) if "\t" in text else text


def clean_bytes_line(raw: bytes, *, last_segment: bool = False) -> str:
    """decode_bytes + clean_line for one raw line."""
    return clean_line(decode_bytes(raw), last_segment=last_segment)


def escape_markup(text: str) -> str:
    """Escape Rich/Textual markup so that `[bold red]` or `[/]` in a log line is shown, not applied."""

    def escape(match: re.Match[str]) -> str:
        backslashes, tag = match.groups()
        return f"{backslashes}{backslashes}\\{tag}"

    text = _MARKUP_RE.sub(escape, text)
    # A trailing backslash would escape the closing tag a caller wraps around the text.
    if text.endswith("\\") and not text.endswith("\\\\"):
        text += "\\"
    return text


def looks_binary(sample: bytes) -> bool:
    """True when a sample is mostly not text: a high share of control bytes, or NUL bytes beside bytes that
    are not text. Text with runs of NULs is text: a log rewritten in place, or the unwritten tail a crash
    or a power loss leaves (the log most worth reading)."""
    head = sample[:8192]
    if not head:
        return False
    if is_binary_format(head):
        return True
    if b"\x00" in head:
        # all NULs so far (logrotate's copytruncate leaves the old size as NULs before the new lines): read on
        rest = head.replace(b"\x00", b"")
        return bool(rest) and (_controls(rest) > len(rest) * 0.3 or _undecodable(rest) > len(rest) * 0.05)
    return _controls(head) > len(head) * 0.3


def reads_as_text(line: str) -> bool:
    """A decoded line that is words, not bytes a program dumped (undecodable or control characters in more
    than a tenth of it)."""
    noise = sum(1 for char in line if char == "\ufffd" or (char < " " and char != "\t"))
    return noise * 10 <= len(line)


def is_binary_format(head: bytes) -> bool:
    """A program, an archive, an image or a model file, by its own magic number (tar: at byte 257)."""
    return head.startswith(_BINARY_MAGIC) or head[257:262] == b"ustar"


# Files that are never a log however much of their head reads as text (a large program's symbol table)
_BINARY_MAGIC = (
    b"\x7fELF",  # Linux programs and libraries
    b"MZ",  # Windows programs
    b"\xcf\xfa\xed\xfe",  # macOS programs (Mach-O, 64-bit)
    b"\xca\xfe\xba\xbe",  # macOS universal binaries
    b"PK\x03\x04",  # zip (and wheels, jars)
    b"\x89PNG",
    b"\xff\xd8\xff",  # JPEG
    b"GGUF",  # a model file given as a log
    b"\x28\xb5\x2f\xfd",  # zstd
    b"7z\xbc\xaf",
)


def _controls(data: bytes) -> int:
    return sum(1 for byte in data if byte < 9 or 13 < byte < 32)


def _undecodable(data: bytes) -> int:
    return data.decode("utf-8", "replace").count("\ufffd")


def iter_raw_lines(
    stream: BinaryIO, max_line_bytes: int = MAX_LINE_BYTES, chunk_bytes: int = READ_CHUNK_BYTES
) -> Iterator[bytes]:
    """Yield the lines of a binary stream without their newline, each at most `max_line_bytes` long.

    Memory stays bounded by the chunk size plus one capped line, whatever the input: the rest of an
    over-long line is read and dropped, and the kept part ends with CUT_MARK.
    """
    for batch in iter_raw_line_batches(stream, max_line_bytes, chunk_bytes):
        yield from batch


def iter_raw_line_batches(
    stream: BinaryIO, max_line_bytes: int = MAX_LINE_BYTES, chunk_bytes: int = READ_CHUNK_BYTES
) -> Iterator[list[bytes]]:
    """iter_raw_lines, one list per block read (a loop over a list is cheaper than a generator)."""
    cut_mark = CUT_MARK.encode()
    for block, start, end in iter_raw_blocks(stream, max_line_bytes, chunk_bytes):
        lines = block[start : end - 1].split(b"\n")
        if max(map(len, lines)) > max_line_bytes:  # map/max run in C: no per-line bytecode
            lines = [cut_line(line, max_line_bytes, cut_mark) for line in lines]
        yield lines


def cut_line(line: bytes, max_line_bytes: int = MAX_LINE_BYTES, cut_mark: bytes = CUT_MARK.encode()) -> bytes:
    """The kept part of an over-long line, marked; a line already cut comes back unchanged."""
    return line[:max_line_bytes] + cut_mark if len(line) > max_line_bytes else line


def iter_raw_blocks(
    stream: BinaryIO, max_line_bytes: int = MAX_LINE_BYTES, chunk_bytes: int = READ_CHUNK_BYTES
) -> Iterator[tuple[bytes, int, int]]:
    """The stream as (block, start, end): block[start:end] is whole lines, each ending in a newline.

    Blocks are the chunks read, uncopied; a line that spans chunks comes as a block of its own, cut
    to `max_line_bytes` (and marked) when longer, the rest of it read and dropped. A line inside a
    chunk may still be longer than `max_line_bytes`: readers pass each line through cut_line, which
    leaves lines already cut here unchanged. The last line gets a newline if it had none.
    """
    cut_mark = CUT_MARK.encode()
    pending = b""
    skipping = False  # inside an over-long line whose kept part was already yielded
    while True:
        chunk = stream.read(chunk_bytes)
        if not chunk:
            break
        if not pending and not skipping and chunk[:1] == b"\x00":
            # a run of NULs at a line's start (logrotate's copytruncate leaves the old size as NULs, and
            # the new lines follow them with no newline between): not part of the line after it
            chunk = chunk.lstrip(b"\x00")
            if not chunk:
                continue
        start = 0
        if skipping:
            newline = chunk.find(b"\n")
            if newline < 0:
                continue
            skipping = False
            start = newline + 1
        if pending:
            newline = chunk.find(b"\n", start)
            end = newline if newline >= 0 else len(chunk)
            room = max_line_bytes - len(pending)
            if end - start > room:
                line = pending + chunk[start : start + max(room, 0)] + cut_mark + b"\n"
                yield line, 0, len(line)
                pending = b""
                if newline < 0:
                    skipping = True
                    continue
                start = newline + 1
            elif newline < 0:
                pending += chunk[start:]
                continue
            else:
                line = pending + chunk[start : newline + 1]
                yield line, 0, len(line)
                pending = b""
                start = newline + 1
        last = chunk.rfind(b"\n", start) + 1
        if last > start:
            yield chunk, start, last
        else:
            last = start
        if len(chunk) - last > max_line_bytes:
            line = chunk[last : last + max_line_bytes] + cut_mark + b"\n"
            yield line, 0, len(line)
            skipping = True
        else:
            pending = chunk[last:]
    if pending:
        line = pending + b"\n"
        yield line, 0, len(line)
