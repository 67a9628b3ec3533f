"""Read a model server's log: the stage of every line, the first error, the failure class, the advice.

`LogDiagnoser` is fed one line at a time (the launcher and the log pane tail a live process);
`diagnose_file` reads a whole file through the same state machine in big binary chunks, so both give
the same verdict. Both analyse each *digit mask* of a line once (the memo of vramtui.core.logs.memo).

The diagnosis is split by concern, and this module keeps the public API:
  rules      the rule tables (each engine's own in vramtui.core.backends.<family>.log)
  analysis   one line -> its analysis (anchors, echo cuts, figures)
  memo       the digit-mask memo that shares analyses between lines
  state      the streaming state machine (stages, tracebacks, the first error)
  verdict    the Diagnosis (failure class, kernel OOM confirmation, quiet failures)
  advice     what to change, a table keyed by failure and cause
"""

from __future__ import annotations

import difflib
import io
import os
import re
import stat
import sys
from array import array
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from vramtui.core.errors import VramtuiError
from vramtui.core.logs import rules as ls
from vramtui.core.logs.advice import CAUSE_WORDS, FAILURE_WORDS, advise, summarize
from vramtui.core.logs.analysis import _analyze, _LineInfo  # noqa: F401  (_analyze: benchmarks name it here)
from vramtui.core.logs.encoded import DAMAGED, STDIN, damaged, decoded
from vramtui.core.logs.kernel import read_kernel_oom_lines
from vramtui.core.logs.lastwords import FEW_LINES, last_words, program_words
from vramtui.core.logs.memo import (
    _DIGIT_MASK,
    _DIRTY,
    _DIRTY_BYTES_RE,
    _EACH_LINE,
    _MEMO_LINE_BYTES,
    _NO_INFO,
    _ByDigits,
    _mask_entry,
    _remember,
    _resolve,
)
from vramtui.core.logs.rules import STAGES
from vramtui.core.logs.state import MAX_EVIDENCE, MAX_QUOTE, LogState, judged_run
from vramtui.core.logs.textclean import (
    clean_bytes_line,
    clean_line,
    iter_raw_line_batches,
    reads_as_text,
)
from vramtui.core.logs.unwrap import unwrap, unwrap_batches, wrap_width
from vramtui.core.logs.verdict import Diagnosis, detect_backend, judge

__all__ = [
    "CAUSE_WORDS",
    "FAILURE_WORDS",
    "STAGES",
    "Diagnosis",
    "LineTag",
    "LogDiagnoser",
    "advise",
    "detect_backend",
    "diagnose_file",
    "diagnose_lines",
    "diagnose_text",
    "read_kernel_oom_lines",
    "summarize",
]


@dataclass(frozen=True, slots=True)
class LineTag:
    """What one fed line is: its number (1-based), the stage the log is in, its severity.

    `is_first_error` marks the first line that names a cause (a generic error line before it, like a
    "Traceback" header, is severity "error" but not the first error).
    """

    number: int
    stage: str | None
    severity: str  # "info" | "warning" | "error"
    is_first_error: bool = False


class LogDiagnoser(LogState):
    """Stream a model server's log through the rules, one line at a time."""

    def __init__(
        self,
        backend: str | None = None,
        requested_quant: str | None = None,
        kernel_log: Callable[[], str | None] | None = None,
        host_budget: bool = False,
    ) -> None:
        super().__init__(requested_quant=requested_quant, host_budget=host_budget)
        self.backend = _normalize_backend(backend) if backend else None
        self._kernel_log = kernel_log if kernel_log is not None else read_kernel_oom_lines
        self._kernel_text: str | bool | None = False  # False: not read yet
        self._memo: dict[str, _LineInfo | None] = {}  # digit-dependent lines, by their text
        self._masks: dict[bytes, object] = {}  # ASCII lines, by their digit mask (see _mask_entry)
        self._text_masks: dict[bytes, object] = {}  # cleaned non-ASCII lines, by the mask of their UTF-8
        self._raw_exact: dict[bytes, tuple[str, _LineInfo | None]] = {}  # feed_raw's digit-dependent lines
        # The log's last lines, for a program's last words (lastwords.py): fed lines one by one, a file's
        # last two pieces of lines with the number before each (one assignment per piece, not per line).
        self._recent: deque[tuple[int, str]] = deque(maxlen=_RECENT_LINES)
        self._words = 0  # the program's lines of words, counted while they are few (lastwords.FEW_LINES)
        self.wrapped_at: int | None = None  # a terminal's hard wrap, joined back (core/logs/unwrap.py)
        self._line_starts = array("l")  # then: each joined line's first line in the file (0-based)
        self._file_lines = 0  # and the file's own lines
        self._pieces_seen: tuple[tuple[int, list[bytes]], ...] = ()

    # -- feeding -----------------------------------------------------------------------------------
    def feed(self, line: str) -> LineTag:
        """Take one line of output (with or without its newline) and say what it is."""
        text = line if line.isprintable() else clean_line(line)
        info = self._info_of_text(text)
        self.lines += 1
        # QA 23 D5: bytes a program dumped are not its words ("\ufffd" is printable: ASCII is the fast path)
        if (text.isascii() and text.isprintable()) or reads_as_text(text):
            self._recent.append((self.lines, text))
            if self._words <= FEW_LINES and program_words(text):
                self._words += 1
        if info is None or self._is_noop(info):
            self.after_frame = False
            return LineTag(self.lines, self.current, "info", False)
        severity, first = self._step(self.lines, text, info)
        return LineTag(self.lines, self.current, severity, first)

    def _info_of_text(self, text: str) -> _LineInfo | None:
        """The analysis of a clean line, through the memo of its digit mask."""
        if text.isascii():
            key = text.encode("ascii").translate(_DIGIT_MASK)
            masks = self._masks
        else:
            # Non-ASCII text has its own memo: in the file path raw non-ASCII bytes stand for "clean
            # this line first" (_DIRTY), and the cleaned text is masked here like any other.
            key = text.encode("utf-8", "surrogatepass").translate(_DIGIT_MASK)
            masks = self._text_masks
        entry = masks.get(key)
        if entry is None:
            entry = self._new_mask(key, text, masks)
        if isinstance(entry, _LineInfo) or entry is _NO_INFO:
            return _resolve(entry, text)
        # Digit-dependent lines: by their exact text (repeats pay once).
        info = self._memo.get(text, _MISSING)
        if info is _MISSING:
            info = _resolve(entry, text)
            _remember(self._memo, text, info)
        return info  # type: ignore[return-value]

    def _new_mask(self, key: bytes, text: str, masks: dict[bytes, object]) -> object:
        if len(key) > _MEMO_LINE_BYTES:
            return _EACH_LINE  # never stored (see _remember): no use working out what it would share
        entry = _mask_entry(key.decode("utf-8", "surrogatepass"), text)  # a _LineInfo comes interned
        _remember(masks, key, entry)
        return entry

    def feed_raw(self, raw: bytes) -> tuple[str | None, str]:
        """As `feed`, for one line's bytes (no newline): the stage it is in and its severity. A line the
        mask memo knows to change nothing is not decoded (the log pane reads files through here)."""
        self.lines += 1
        key = raw.translate(_DIGIT_MASK)
        entry = self._masks.get(key)
        if entry is None:
            entry = self._new_raw_mask(key, raw)
        if entry is _NO_INFO:
            self.after_frame = False
            return self.current, "info"
        if isinstance(entry, _LineInfo):
            text, info = "", entry
        else:
            text, info = self._by_exact_bytes(raw, entry, self._raw_exact)
        if info is None or self._is_noop(info):
            self.after_frame = False
            return self.current, "info"
        severity, _ = self._step(self.lines, text or raw.decode("ascii"), info)
        return self.current, severity

    def _new_raw_mask(self, key: bytes, raw: bytes) -> object:
        """The memo entry for a line's bytes not met before: "clean it first" for raw bytes that need it."""
        if _DIRTY_BYTES_RE.search(key) is not None:
            _remember(self._masks, key, _DIRTY)
            return _DIRTY
        return self._new_mask(key, raw.decode("ascii"), self._masks)

    def feed_lines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.feed(line)

    def _feed_raw_stream(self, stream: BinaryIO) -> None:
        """The fast path for files: bytes lines memoized by their digit mask, no LineTag objects."""
        masks = self._masks
        masks_get = masks.get
        exact_memo: dict[bytes, tuple[str, _LineInfo | None]] = {}
        exact_get = exact_memo.get
        step = self._step
        is_noop = self._is_noop
        number = self.lines
        mask = _DIGIT_MASK
        # Entries known to change nothing in the present state (a line with no rule, or the same stage
        # again): skipped at the cost of one look-up until the next step changes the state. Equal
        # analyses are one object (see _intern), so this holds across masks.
        quiet: set[object] = set()
        # A log that repeats lines verbatim is served by their exact bytes first (no mask to make, the
        # text already decoded); whether that pays is measured per piece of lines, probed every few.
        by_bytes = True
        pieces = 0
        for piece in _pieces(unwrap_batches(iter_raw_line_batches(stream), self._note_wrap)):
            pieces += 1
            self._pieces_seen = (*self._pieces_seen[-1:], (number, piece))
            probing = by_bytes or pieces % _PROBE_EVERY == 0
            hits = 0
            for raw in piece:
                number += 1
                if probing:
                    known = exact_get(raw)
                    if known is not None:
                        hits += 1
                        info = known[1]
                        if info in quiet:
                            continue
                        if info is None or (info.simple and is_noop(info)):
                            self.after_frame = False
                            if info is not None:
                                quiet.add(info)
                            continue
                        quiet.clear()
                        step(number, known[0], info)
                        continue
                key = raw.translate(mask)
                entry = masks_get(key)
                if entry in quiet:
                    continue
                if entry is None:
                    entry = self._new_raw_mask(key, raw)
                if entry is _NO_INFO:
                    self.after_frame = False
                    quiet.add(entry)
                    continue
                if isinstance(entry, _LineInfo):
                    if probing:
                        _remember(exact_memo, raw, (raw.decode("ascii"), entry))
                    if entry.simple and is_noop(entry):
                        self.after_frame = False
                        quiet.add(entry)
                        continue
                    quiet.clear()
                    step(number, raw.decode("ascii"), entry)
                    continue
                # Lines whose analysis depends on their digits (or on cleaning): by their exact bytes
                # (_by_exact_bytes). The digit checks are cheap: while the log does not repeat itself
                # they run on every line.
                if not probing and isinstance(entry, _ByDigits):
                    text = raw.decode("ascii")
                    info = entry.info(text)
                else:
                    text, info = self._by_exact_bytes(raw, entry, exact_memo)
                self._take(number, text, info, quiet)
            if probing:
                by_bytes = hits * 2 >= len(piece)
        self.lines = number

    def _take(self, number: int, text: str, info: _LineInfo | None, quiet: set[object]) -> None:
        """Step on a line's analysis, unless it changes nothing now: then it joins `quiet`.

        Both file drivers end here for lines analysed by their digits or after cleaning; their hotter
        paths (an entry that is an analysis itself) keep the same few lines inline.
        """
        if info in quiet:
            return
        if info is None or (info.simple and self._is_noop(info)):
            self.after_frame = False
            if info is not None:
                quiet.add(info)
            return
        quiet.clear()
        self._step(number, text, info)

    def _by_exact_bytes(
        self, raw: bytes, entry: object, exact_memo: dict[bytes, tuple[str, _LineInfo | None]]
    ) -> tuple[str, _LineInfo | None]:
        """A line whose analysis depends on its digits (or on cleaning), by its exact bytes: a log that
        repeats such lines verbatim pays once per distinct line."""
        known = exact_memo.get(raw)
        if known is None:
            if entry is _DIRTY:
                text = clean_bytes_line(raw)
                known = (text, self._info_of_text(text))
            else:
                text = raw.decode("ascii")
                known = (text, _resolve(entry, text))
            _remember(exact_memo, raw, known)
        return known

    def _note_wrap(self, width: int, starts: list[int], read: int) -> None:
        self.wrapped_at = width
        self._line_starts.extend(starts)
        self._file_lines = read

    # -- the verdict -------------------------------------------------------------------------------
    def result(self) -> Diagnosis:
        verdict = judge(judged_run(self), self.backend or detect_backend(self.scores), self._read_kernel)
        diagnosis = verdict.diagnosis
        if self.wrapped_at is not None:
            in_file(diagnosis, self.wrapped_at, self._line_starts, self._file_lines)
        if diagnosis.cause == "died_at_start":
            _quote_last_words(diagnosis, *self._last_lines())
        diagnosis.advice = advise(
            diagnosis, verdict.formats, verdict.kernel_note, verdict.kills_elsewhere, hint=verdict.hint
        )
        if (read_as := self._read_as_another()) is not None:
            diagnosis.advice.insert(0, read_as)
        diagnosis.summary = summarize(diagnosis, verdict.kernel_note)
        return diagnosis

    def _read_as_another(self) -> str | None:
        """A note where the engine given (--backend) is not the family the log's own lines are (QA 35 F17:
        a llama-server log diagnosed as vLLM's got --max-model-len with no word)."""
        seen = detect_backend(self.scores)
        if not self.backend or seen is None or seen == self.backend:
            return None
        from vramtui.core.backends import get_backend

        try:
            given, found = get_backend(self.backend), get_backend(seen)
        except VramtuiError:  # an engine whose logs are read but which vramtui does not run (SGLang, TGI)
            return None
        if given.family == found.family:
            return None
        return (
            f"This log's lines are {found.name}'s, read here as {given.name}'s (--backend {given.name}): "
            f"the flags below are {given.name}'s; leave --backend out to read it as {found.name}'s."
        )

    def _last_lines(self) -> tuple[list[tuple[int, str]], bool]:
        """The log's last lines, numbered (the lines fed one by one, else a file's last pieces), and whether
        the program printed only a few lines of words (the few-lines rule of lastwords holds only then)."""
        if self._recent:
            return list(self._recent), self._words <= FEW_LINES
        numbered = [
            (n, raw) for before, piece in self._pieces_seen for n, raw in enumerate(piece, before + 1)
        ]

        def decoded(raw: bytes) -> str:
            return raw.decode("ascii") if raw.isascii() else clean_bytes_line(raw)

        # a file's first lines only, decoded for this verdict alone: its launch lines and bytes the program
        # dumped (QA 23 D5) are no words of its own, and the few it printed are all in the last lines
        whole = bool(numbered) and numbered[0][0] == 1
        words = sum(1 for _, raw in numbered if program_words(decoded(raw))) if whole else FEW_LINES + 1
        return [(number, decoded(raw)) for number, raw in numbered[-_RECENT_LINES:]], words <= FEW_LINES

    def _read_kernel(self) -> str | None:
        if self._kernel_text is False:
            try:
                self._kernel_text = self._kernel_log()
            except Exception:  # reading the kernel log is a bonus, never a crash
                self._kernel_text = None
        return self._kernel_text if isinstance(self._kernel_text, str) else None


_MISSING: object = object()
_RECENT_LINES = 16


def _quote_last_words(diagnosis: Diagnosis, lines: list[tuple[int, str]], whole: bool) -> None:
    """A program that died before any engine line: its own last words are the first error, not vramtui's
    exit line after them (QA 20 D3: "vramtui: the server exited with status 3" hid "cannot open config")."""
    words = last_words(lines, whole=whole)
    if words is None:
        return
    number, text = words
    diagnosis.evidence = [f"line {number}: {text}", *diagnosis.evidence][:MAX_EVIDENCE]
    diagnosis.first_error_line, diagnosis.first_error_text = number, text[:MAX_QUOTE]


# The exact-bytes memo is tried on a piece of lines every so often (and kept while it serves half).
_PIECE_LINES = 1024
_PROBE_EVERY = 32


def _pieces(batches: Iterable[list[bytes]]) -> Iterator[list[bytes]]:
    for batch in batches:
        if len(batch) <= _PIECE_LINES:
            yield batch
            continue
        for start in range(0, len(batch), _PIECE_LINES):
            yield batch[start : start + _PIECE_LINES]


def _normalize_backend(name: str) -> str:
    """The name the diagnosis reports for a backend a user named (an engine's alias, a Backend's)."""
    key = name.strip().lower()
    if key in ls.BACKEND_NAMES:
        return key
    for profile in ls.LOG_PROFILES.values():
        if key in profile.aliases:
            return profile.name
    from vramtui.core.backends import get_backend

    try:
        return get_backend(key).name
    except VramtuiError as error:
        from vramtui.core.backends import BACKENDS

        # the log engines' names and every backend's (ik_llama.cpp reads with llama.cpp's rules)
        names = list(dict.fromkeys([*ls.BACKEND_NAMES, *BACKENDS]))
        known = ", ".join(names)
        near = difflib.get_close_matches(key, names, n=1, cutoff=0.7)
        hint = f"; did you mean {near[0]!r}?" if near else ""
        raise VramtuiError(f"unknown backend {name!r}{hint} (known: {known})") from error


def diagnose_lines(
    lines: Iterable[str],
    backend: str | None = None,
    *,
    requested_quant: str | None = None,
    exit_code: int | None = None,
    kernel_log: Callable[[], str | None] | None = None,
    host_budget: bool = False,
) -> Diagnosis:
    """Diagnose lines one by one, exactly as a live log is fed."""
    diagnoser = LogDiagnoser(
        backend, requested_quant=requested_quant, kernel_log=kernel_log, host_budget=host_budget
    )
    diagnoser.feed_lines(lines)
    diagnoser.note_exit(exit_code)
    return diagnoser.result()


def diagnose_text(
    text: str,
    backend: str | None = None,
    *,
    requested_quant: str | None = None,
    exit_code: int | None = None,
    kernel_log: Callable[[], str | None] | None = None,
) -> Diagnosis:
    """Diagnose a whole log held in memory."""
    # Split on newlines only, as the file reader does, so both give the same line numbers.
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    width, file_lines = wrap_width(lines), len(lines)
    starts: list[int] = []
    if width is not None:  # a terminal's hard wrap, joined back (as the file reader does)
        lines, starts = unwrap(lines, width)
    diagnosis = diagnose_lines(
        lines, backend, requested_quant=requested_quant, exit_code=exit_code, kernel_log=kernel_log
    )
    if width is not None:
        in_file(diagnosis, width, starts, file_lines)
    return diagnosis


_LINE_REF = re.compile(r"^line (\d+)")


def in_file(diagnosis: Diagnosis, width: int, starts: Sequence[int], file_lines: int) -> None:
    """A diagnosis of a log joined after a terminal's wrap at `width`, its line numbers (and its count of
    lines: QA 28 M3, "131 lines" for a 225-line file) the file's."""

    def of_file(number: int) -> int:
        return starts[number - 1] + 1 if 0 < number <= len(starts) else number

    diagnosis.wrapped_at = width
    diagnosis.lines = file_lines or diagnosis.lines
    if diagnosis.first_error_line:
        diagnosis.first_error_line = of_file(diagnosis.first_error_line)
    diagnosis.evidence = [
        _LINE_REF.sub(lambda found: f"line {of_file(int(found.group(1)))}", line)
        for line in diagnosis.evidence
    ]


def diagnose_file(
    path: str | Path,
    backend: str | None = None,
    *,
    requested_quant: str | None = None,
    exit_code: int | None = None,
    kernel_log: Callable[[], str | None] | None = None,
    gpu_absent: bool = False,
) -> Diagnosis:
    """Diagnose a log file ("-" is stdin), streaming in chunks: memory stays bounded. `gpu_absent`: the log
    is of a server on this machine, where no GPU is found (every buffer on the CPU is then no news)."""
    with open_log(path) as stream:
        return diagnose_stream(
            stream,
            backend,
            requested_quant=requested_quant,
            exit_code=exit_code,
            kernel_log=kernel_log,
            gpu_absent=gpu_absent,
        )


@contextmanager
def open_log(path: str | Path) -> Iterator[BinaryIO]:
    """A log file opened once for reading: a regular file, or a pipe (`<(docker logs srv)`, a FIFO) read
    as it comes; "-" is stdin (left open); a folder or a device is one line. A compressed or UTF-16 log
    is read as its text (core/logs/encoded.py)."""
    if str(path) == "-":
        with _decoding(STDIN, sys.stdin.buffer) as stream:
            yield stream
        return
    file_path = Path(path)
    try:
        mode = file_path.stat().st_mode
    except FileNotFoundError as error:
        raise VramtuiError(f"no such file: {path}") from error
    except OSError as error:
        raise VramtuiError(f"cannot read {path}: {error.strerror or error}") from error
    if stat.S_ISDIR(mode):
        raise VramtuiError(f"{path} is a folder, not a log file")
    if (stat.S_ISCHR(mode) or stat.S_ISBLK(mode)) and str(path) != os.devnull:  # /dev/zero has no end
        raise VramtuiError(f"{path} is a device, not a log file (pipe it in: ... | vramtui diagnose -)")
    try:
        stream = file_path.open("rb")
    except PermissionError as error:
        raise VramtuiError(f"cannot read {path}: permission denied") from error
    except OSError as error:
        raise VramtuiError(f"cannot read {path}: {error.strerror or error}") from error
    with stream, _decoding(path, stream) as text:
        try:
            yield text
        except OSError as error:
            raise VramtuiError(f"cannot read {path}: {error.strerror or error}") from error


@contextmanager
def _decoding(path: object, stream: BinaryIO) -> Iterator[BinaryIO]:
    text, packed = decoded(stream)
    try:
        yield text
    except DAMAGED as error:
        if packed is None:
            raise
        raise damaged(path, packed, error) from None


def diagnose_stream(
    stream: BinaryIO,
    backend: str | None = None,
    *,
    requested_quant: str | None = None,
    exit_code: int | None = None,
    kernel_log: Callable[[], str | None] | None = None,
    gpu_absent: bool = False,
) -> Diagnosis:
    """Diagnose an open binary stream to its end, in chunks; a regular file's modification time is taken
    as its last line's time (near enough) for the kernel log's kills."""
    diagnoser = LogDiagnoser(backend, requested_quant=requested_quant, kernel_log=kernel_log)
    diagnoser.gpu_absent = gpu_absent
    try:
        status = os.fstat(stream.fileno())
        if stat.S_ISREG(status.st_mode):
            diagnoser.log_time = log_end_time(stream, status)
            diagnoser.log_start = log_start_time(stream)
    except (OSError, ValueError, io.UnsupportedOperation):
        pass  # an in-memory stream has no file behind it
    diagnoser._feed_raw_stream(stream)
    diagnoser.note_exit(exit_code)
    return diagnoser.result()


_STAMP_TAIL_BYTES = 64 * 1024


def log_start_time(stream: BinaryIO) -> float | None:
    """When the log's first dated line was written (its own stamp), or None: a kill before it was not
    this log's process (QA 20 D6)."""
    from vramtui.core.logs.kernel import log_stamp_time

    start = stream.tell()
    try:
        stream.seek(0)
        head = stream.read(_STAMP_TAIL_BYTES).decode("utf-8", "replace")
    finally:
        stream.seek(start)
    return log_stamp_time(head, first=True)


def log_end_time(stream: BinaryIO, status: os.stat_result) -> float:
    """When the log's last line was written: its own last dated stamp, else the file's modification time
    (QA: a 2023 log saved today was "confirmed" by a kill of this morning, by the file's time)."""
    from vramtui.core.logs.kernel import log_stamp_time

    start = stream.tell()
    try:
        stream.seek(max(0, status.st_size - _STAMP_TAIL_BYTES))
        tail = stream.read(_STAMP_TAIL_BYTES).decode("utf-8", "replace")
    finally:
        stream.seek(start)
    stamped = log_stamp_time(tail)
    return stamped if stamped is not None else status.st_mtime


# ------------------------------------------------------------------------------------------------
# Advice: what to change, by failure class and stage, in the flags of the detected backend.
# ------------------------------------------------------------------------------------------------
