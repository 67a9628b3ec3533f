"""Read a model server's log: the stage of every line, the first error, the failure class, the advice.

`LogDiagnoser` is fed one line at a time (the launcher and the log pane tail a live process);
`diagnose_file` reads a whole file through the same state machine in big binary chunks, so both give
the same verdict. Both analyse each *digit mask* of a line once (a bounded memo; see _mask_entry):
real logs make every line unique with timestamps and counters, but the rules rarely care which digits
a line holds, and where they do (derived from the rule tables) the real line decides. Masks that
differ only in how wide their numbers are share one analysis where no rule reads a width (see
_width_key); non-ASCII lines are cleaned first and masked the same way. The wording of each backend
lives in `vramtui.core.logs.rules` as data.
"""

from __future__ import annotations

import os
import re
import re._compiler as _sre_compiler  # type: ignore[import-not-found]  # see _masked_regex
import re._constants as _sre  # type: ignore[import-not-found]
import re._parser as _sre_parser  # type: ignore[import-not-found]
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, BinaryIO

from vramtui.core.errors import VramtuiError
from vramtui.core.logs import rules as ls
from vramtui.core.logs.rules import STAGE_INDEX, STAGES, ErrorRule, NoticeRule
from vramtui.core.logs.textclean import (
    clean_bytes_line,
    clean_line,
    iter_raw_line_batches,
)

__all__ = [
    "STAGES",
    "Diagnosis",
    "LineTag",
    "LogDiagnoser",
    "detect_backend",
    "diagnose_file",
    "diagnose_lines",
    "diagnose_text",
    "read_kernel_oom_lines",
]

MAX_EVIDENCE = 10
MAX_QUOTE = 400
# The memos that let lines share an analysis hold at most this many entries (then start over), and
# never a line longer than _MEMO_LINE_BYTES: such lines (a prompt echoed in a request line, a config
# dump) are rarely met twice, and memory stays bounded whatever the log (see _remember).
_MEMO_LIMIT = 65536
_MEMO_LINE_BYTES = 1024

# Where an error with no stage context happened, by class. An excerpt with no startup lines at all is
# from a running server, so a bare out-of-memory there is a request's.
_DEFAULT_STAGE: dict[str, str] = {
    "cuda_oom": "inference",
    "host_oom_killed": "load_weights",
    "unsupported_quant": "load_weights",
    "unknown_arch": "load_weights",
    "shape_mismatch": "load_weights",
    "dtype_unsupported": "load_weights",
    "file_missing": "load_weights",
    "network": "download",
    "disk_full": "download",
    "kv_cache_too_small": "kv_cache",
    "context_too_long": "inference",
    "other": "load_weights",
}

_CARETS_RE = re.compile(r"\s*[\^~]+[\s\^~]*")
_FRAME_RE = re.compile(r'File "([^"]+)", line \d+, in (\S+)')
_PREFIX_RES = (
    re.compile(r"^\s*\d+\.\d+\.\d+\.\d+ [IWEDT] "),  # llama.cpp's timestamped log
    re.compile(r"^[\w.\[\]-]+\s+\|\s?"),  # docker compose "name  | "
    re.compile(r"^\([\w-]+(?: pid=\d+)?[^)]*\)\s?"),  # "(EngineCore_DP0 pid=1)" / Ray actors
    re.compile(r"^\[rank\d+\]:\s?"),
    # FastChat/LLaVA workers, after the date: "| ERROR | stderr | "
    re.compile(r"^\|\s*(?:INFO|WARNING|ERROR|DEBUG|CRITICAL)\s*\|\s*[\w.]+\s*\|\s?"),
    re.compile(
        r"^(?:INFO|WARNING|ERROR|DEBUG|CRITICAL|WARN)\s+\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?\s+(?:\[[^\]]+\]|[\w.]+:\d+\])\s?"
    ),
    re.compile(r"^\d{4}-\d\d-\d\d[T ][\d:.,]+Z?\s*(?:>\s?)?"),
    re.compile(r"^\[\d{4}-\d\d-\d\d [\d:]+(?: [\w]+)?\]\s?"),
    re.compile(r"^[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \S+ [\w.-]+(?:\[\d+\])?: "),
)
_EXCEPTION_RE = re.compile(
    r"^(?:[A-Za-z_]\w*\.)*(?P<name>[A-Z]\w*(?:Error|Exception|Interrupt)|Exception)(?::\s|:?$)"
)
_WARNING_LEVEL_RE = re.compile(r"\bwarn(?:ing)?\b|^\s*\d+\.\d+\.\d+\.\d+ w |level=warn")
_CHAINED = ("during handling of the above exception", "the above exception was the direct cause")
_FORMAT_WORDS = ((".gguf", "gguf"), ("awq", "awq"), ("gptq", "gptq"), (".safetensors", "safetensors"))


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


@dataclass
class Diagnosis:
    backend: str | None
    stage: str | None  # furthest stage the log reached
    failed: bool
    failure_stage: str | None
    failure: str  # a class from stages.FAILURES, or "none"
    first_error_line: int | None
    first_error_text: str | None
    evidence: list[str] = field(default_factory=list)
    advice: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # Bytes the engine printed about its own memory (counts for *_tokens, *_blocks, *_cells, context;
    # max_concurrency is a float).
    engine_figures: dict[str, int | float] = field(default_factory=dict)
    cause: str | None = None  # finer than `failure`: e.g. host_alloc, gated_repo, bad_magic
    summary: str = ""
    inferred: bool = False  # the class is inferred (no line names the cause)
    stage_inferred: bool = False  # no line says where it failed: failure_stage is a best guess
    lines: int = 0
    exit_code: int | None = None

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


@dataclass(slots=True, eq=False)  # identity: equal analyses are one object (see _intern), sets hold them
class _LineInfo:
    """Everything the rules say about one line; a pure function of its text (memoized)."""

    stage: str | None = None
    error: ErrorRule | None = None
    frame: bool = False
    memory_heavy: bool = False
    exception: str | None = None
    header: bool = False
    chained: bool = False
    warning_level: bool = False
    notices: tuple[NoticeRule, ...] = ()
    recovery: bool = False
    figures: tuple[tuple[str, str | None, int | float, bool], ...] = ()
    backends: tuple[str, ...] = ()
    quant_words: bool = False
    formats: tuple[str, ...] = ()
    simple: bool = False  # a stage marker and/or backend marks, nothing else
    extras: bool = False  # figures, notices, quantization words or file formats


def _strip_prefix(text: str) -> str:
    for _ in range(4):
        before = text
        for regex in _PREFIX_RES:
            text = regex.sub("", text, count=1)
        if text == before:
            break
    return text


def _number(value: str) -> float:
    # "251,920" (thousands) and "26.91"; a lone comma with two or fewer digits after it is a decimal.
    if "," in value and "." not in value and re.fullmatch(r"\d+,\d{1,2}", value):
        return float(value.replace(",", "."))
    return float(value.replace(",", ""))


# -- the prefilter -----------------------------------------------------------------------------------
# Every rule is filed under one word of its anchor (the longest). A line's words are found with one
# regex scan; only the rules filed under those words (plus the few substring anchors) are tried.
_TOKEN_RE = re.compile(r"[a-z0-9]+")


def _key_of(anchor: str) -> str:
    tokens = _TOKEN_RE.findall(anchor)
    return max(tokens, key=len) if tokens else anchor


def _file(index: dict[str, list], anchor: str, item: object) -> None:
    if anchor in ls.SUBSTRING_ANCHORS:
        index.setdefault(f"\0{anchor}", []).append(item)
    else:
        index.setdefault(_key_of(anchor), []).append(item)


_STAGE_INDEX: dict[str, list] = {}
_ERROR_INDEX: dict[str, list] = {}
_NOTICE_INDEX: dict[str, list] = {}
_RECOVERY_INDEX: dict[str, list] = {}
_FIGURE_INDEX: dict[str, list] = {}
_MARK_INDEX: dict[str, list] = {}
for _rule in ls.STAGE_RULES:
    _file(_STAGE_INDEX, _rule.anchor, _rule)
for _rule_position, _error_rule in enumerate(ls.ERROR_RULES):
    _file(_ERROR_INDEX, _error_rule.anchor, (_rule_position, _error_rule))
for _notice in ls.NOTICE_RULES:
    _file(_NOTICE_INDEX, _notice.anchor, _notice)
for _notice in ls.RECOVERY_RULES:
    _file(_RECOVERY_INDEX, _notice.anchor, _notice)
for _figure in ls.FIGURE_RULES:
    _file(_FIGURE_INDEX, _figure.anchor, _figure)
for _anchor, _name in ls.BACKEND_MARKS:
    _file(_MARK_INDEX, _anchor, (_anchor, _name))
# Words that matter outside the rule tables: frames, tracebacks, warning levels, formats.
_OTHER_WORDS = {"file", "traceback", "handling", "above", "warn", "warning", "w", "gguf", "awq", "gptq"}
_OTHER_WORDS.add("safetensors")  # a model file's format (see _FORMAT_WORDS)
_OTHER_WORDS.update(_key_of(word) for word in ls.QUANT_CONFIRM_ANCHORS)
# Code lines under a traceback frame that allocate (".to(" is left out: "to" is in every other line).
_OTHER_WORDS.update(_key_of(word) for word in ls.MEMORY_HEAVY_FRAME_WORDS if word != ".to(")
_KEYS: frozenset[str] = frozenset(
    set(_STAGE_INDEX)
    | set(_ERROR_INDEX)
    | set(_NOTICE_INDEX)
    | set(_RECOVERY_INDEX)
    | set(_FIGURE_INDEX)
    | set(_MARK_INDEX)
    | _OTHER_WORDS
)
_SUBSTRINGS: tuple[str, ...] = (*ls.SUBSTRING_ANCHORS, "quant")
# word -> (stage rules, (position, error rule)s, notices, recoveries, figures, backend marks)
_INDEX: dict[str, tuple[tuple, ...]] = {
    key: tuple(
        tuple(table.get(key, ()))
        for table in (_STAGE_INDEX, _ERROR_INDEX, _NOTICE_INDEX, _RECOVERY_INDEX, _FIGURE_INDEX, _MARK_INDEX)
    )
    for key in {*_STAGE_INDEX, *_ERROR_INDEX, *_NOTICE_INDEX, *_RECOVERY_INDEX, *_FIGURE_INDEX, *_MARK_INDEX}
}


def _position(item: tuple[int, ErrorRule]) -> int:
    return item[0]


def _matches(rule: object, low: str) -> bool:
    regex = rule.regex  # type: ignore[attr-defined]
    return rule.anchor in low and (regex is None or regex.search(low) is not None)  # type: ignore[attr-defined]


def _analyze(text: str) -> _LineInfo | None:
    return _analyze_detail(text)[0]


_FRACTION_FIGURES = frozenset({"max_concurrency", "memory_share"})  # counts that are not whole numbers


def _extract_figures(
    text: str, rules: Iterable[ls.FigureRule]
) -> tuple[list[tuple[str, str | None, int | float, bool]], list[ls.FigureRule]]:
    figures: list[tuple[str, str | None, int | float, bool]] = []
    matched: list[ls.FigureRule] = []
    for figure in rules:
        match = figure.regex.search(text)  # type: ignore[union-attr]
        if match is None:
            continue
        groups = match.groupdict()
        value: int | float = _number(groups["value"])
        if not figure.count:
            unit = (groups.get("unit") or figure.unit_default).upper()
            value = round(value * ls.UNIT_BYTES.get(unit, 1))
        elif figure.key not in _FRACTION_FIGURES:
            value = int(value)
        figures.append((figure.key, groups.get("device"), value, figure.per_device))
        matched.append(figure)
    return figures, matched


# Where the echoed text of a logged request or response starts (see ls.ECHO_CUTS): found in the
# original text, so that the cut is right even where lower() changes a line's length.
_ECHO_CUTS = tuple(
    (anchor, re.compile(re.escape(anchor) + (f".*?(?={re.escape(marker)})" if marker else ""), re.I | re.S))
    for anchor, marker in ls.ECHO_CUTS
)


def _without_echo(text: str, low: str) -> tuple[str, str]:
    """The line up to the text it echoes from a request or a response, and its lower case."""
    for anchor, regex in _ECHO_CUTS:
        if anchor in low:
            match = regex.search(text)
            if match is not None:
                kept = text[: match.end()]
                return kept, kept.lower()
    return text, low


def _analyze_detail(text: str) -> tuple[_LineInfo | None, tuple[ls.FigureRule, ...]]:
    """The line's analysis, and the figure rules that matched it (their values are in the info)."""
    text, low = _without_echo(text, text.lower())
    words = _KEYS.intersection(_TOKEN_RE.findall(low))
    substrings = [f"\0{anchor}" for anchor in _SUBSTRINGS if anchor in low]
    if not words and not substrings:
        return None, ()
    # One look-up per word, sorted: the same order in every process.
    filed = [_INDEX[key] for key in (*sorted(words), *substrings) if key in _INDEX]

    best = -1
    for entry in filed:
        for rule in entry[0]:
            if _matches(rule, low):
                index = STAGE_INDEX[rule.stage]
                if index > best:
                    best = index
    stage = STAGES[best] if best >= 0 else None

    if "^" in low and _CARETS_RE.fullmatch(_strip_prefix(text)):
        return _PLAIN, ()  # Python's markers under a traceback's code line, behind an "ERROR" prefix
    frame_match = _FRAME_RE.search(text) if "file" in words and 'file "' in low else None
    exception_match = None
    if frame_match is None and ("error" in low or "exception" in low or "interrupt" in low):
        exception_match = _EXCEPTION_RE.match(_strip_prefix(text).strip())
    warning_level = bool(words & _WARNING_WORDS) and bool(_WARNING_LEVEL_RE.search(low))

    error: ErrorRule | None = None
    if frame_match is None:
        candidates = [item for entry in filed for item in entry[1]]
        if len(candidates) > 1:
            candidates.sort(key=_position)
        for _, rule in candidates:
            if _matches(rule, low):
                if not rule.strong and warning_level:
                    continue
                error = rule
                break

    notices = tuple(rule for entry in filed for rule in entry[2] if _matches(rule, low))
    recovery = any(_matches(rule, low) for entry in filed for rule in entry[3])
    figures, figure_rules = _extract_figures(
        text,
        (
            figure
            for entry in filed
            for figure in entry[4]
            if figure.anchor in low and figure.regex is not None
        ),
    )
    backends = tuple(dict.fromkeys(name for entry in filed for anchor, name in entry[5] if anchor in low))
    frame = frame_match is not None
    memory_heavy = (frame or "(" in low) and any(word in low for word in ls.MEMORY_HEAVY_FRAME_WORDS)
    exception = exception_match.group("name") if exception_match else None
    header = "traceback" in words and "traceback (most recent call last)" in low
    chained = bool(words & _CHAIN_WORDS) and any(marker in low for marker in _CHAINED)
    warning_level = warning_level and error is None and exception is None
    quant_words = bool(substrings or words & _QUANT_WORDS) and any(w in low for w in ls.QUANT_CONFIRM_ANCHORS)
    formats = tuple(name for word, name in _FORMAT_WORDS if word in low) if words & _FORMAT_KEYS else ()
    extras = bool(figures or notices or quant_words or formats)
    bare = not (
        error
        or frame
        or memory_heavy
        or exception
        or header
        or chained
        or warning_level
        or recovery
        or extras
    )
    if bare and stage is None and not backends:
        # Matched a word but no rule: as plain as a line that matched nothing. Code lines under a
        # traceback frame still count (they say where the traceback was).
        return (None if "(" not in low else _PLAIN), ()
    info = _LineInfo(
        stage=stage,
        error=error,
        frame=frame,
        memory_heavy=memory_heavy,
        exception=exception,
        header=header,
        chained=chained,
        warning_level=warning_level,
        notices=notices,
        recovery=recovery,
        figures=tuple(figures),
        backends=backends,
        quant_words=quant_words,
        formats=formats,
        simple=bare,
        extras=extras,
    )
    return info, tuple(figure_rules)


_WARNING_WORDS = frozenset({"warn", "warning", "w"})
_QUANT_WORDS = frozenset(_key_of(word) for word in ls.QUANT_CONFIRM_ANCHORS)
_FORMAT_KEYS = frozenset({"gguf", "awq", "gptq", "safetensors"})
_PLAIN = _LineInfo()
_CHAIN_WORDS = frozenset({"handling", "above"})


# -- lines that differ only in their digits ------------------------------------------------------------
# Real logs make every line unique with timestamps, ids, token counts and timings. A line's analysis
# hardly ever depends on which digits it holds, so lines are memoized by their *mask* (every ASCII digit
# made "0", lengths kept): the token spans, the prefixes and every rule that treats all digits alike
# give the same answer for every line of one mask. What does tell digits apart is derived from the
# rule tables below (anchors and literals with digits, regexes with digit literals); a mask that may
# touch one of them keeps a small table by the outcome of those checks on the real line. Figures are
# re-read from each real line (their values differ), and the rare mask where a digit key could be the
# line's only word, or an exception name holds digits, is analysed line by line.
_DIGIT_MASK = bytes.maketrans(b"0123456789", b"0000000000")
_DIGIT_RE = re.compile(r"[0-9]")
_DIRTY_BYTES_RE = re.compile(rb"[^\x20-\x7e]")  # what clean_line could change: cleaned, then masked


def _mask(text: str) -> str:
    return _DIGIT_RE.sub("0", text)


def _tells_digits_apart(items: list) -> bool:
    """True when a parsed regex can match one digit and not another (a digit literal, a partial range)."""
    for op, av in items:
        if op in (_sre.LITERAL, _sre.NOT_LITERAL) and 48 <= av <= 57:
            return True
        if op is _sre.IN and any(_digit_item(item) for item in av):
            return True
        if op in (_sre.GROUPREF, _sre.GROUPREF_EXISTS):
            return True
        if any(_tells_digits_apart(sub) for sub in _subpatterns(op, av)):
            return True
    return False


# A pattern can name a particular digit only with a digit in its text (a literal, a range, \x31, \061)
# or a character name; the rest need no parse (which keeps the import quick).
_NAMES_A_DIGIT_RE = re.compile(r"[0-9]|\\N\{")


def _regex_tells_digits_apart(regex: re.Pattern[str]) -> bool:
    if _NAMES_A_DIGIT_RE.search(regex.pattern) is None:
        return False
    return _tells_digits_apart(_sre_parser.parse(regex.pattern, regex.flags).data)


def _digit_item(item: tuple) -> bool:
    op, av = item
    if op in (_sre.LITERAL, _sre.NOT_LITERAL):
        return 48 <= av <= 57
    if op is _sre.RANGE:
        low, high = av
        return not (high < 48 or low > 57) and not (low <= 48 and high >= 57)
    return False


def _subpatterns(op: object, av: object) -> list:
    if op is _sre.SUBPATTERN:
        return [av[-1].data]  # type: ignore[index]
    if op is _sre.BRANCH:
        return [branch.data for branch in av[1]]  # type: ignore[index]
    if op in (_sre.MAX_REPEAT, _sre.MIN_REPEAT, _sre.POSSESSIVE_REPEAT):
        return [av[2].data]  # type: ignore[index]
    if op in (_sre.ASSERT, _sre.ASSERT_NOT):
        return [av[1].data]  # type: ignore[index]
    if op is _sre.ATOMIC_GROUP:
        return [av.data]  # type: ignore[attr-defined]
    return []


def _mask_items(items: list) -> None:
    """Rewrite a parsed regex in place so that it matches the mask of every line the original matches."""
    out: list = []
    for op, av in items:
        if op is _sre.LITERAL and 48 <= av <= 57:
            out.append((op, 48))
            continue
        if op is _sre.NOT_LITERAL and 48 <= av <= 57:
            out.append((_sre.ANY, None))
            continue
        if op is _sre.IN:
            negated = bool(av) and av[0][0] is _sre.NEGATE
            kept = [item for item in av if not _digit_item(item) or not negated]
            if not negated and any(_digit_item(item) for item in av):
                kept.append((_sre.LITERAL, 48))
            out.append((op, kept))
            continue
        if op is _sre.ASSERT_NOT and _tells_digits_apart(av[1].data):
            continue  # a lookahead that rules out some digits: dropped, so the mask matches more
        if op in (_sre.GROUPREF, _sre.GROUPREF_EXISTS):
            raise ValueError("back-references compare text")
        for sub in _subpatterns(op, av):
            _mask_items(sub)
        out.append((op, av))
    items[:] = out


def _masked_regex(regex: re.Pattern[str]) -> re.Pattern[str] | None:
    """A regex that matches the mask of every line `regex` matches; None when it cannot be built."""
    try:
        parsed = _sre_parser.parse(regex.pattern, regex.flags)
        _mask_items(parsed.data)
        return _sre_compiler.compile(parsed, regex.flags)
    except Exception:  # a construct the rewrite does not know: fall back on the anchor alone
        return None


def _word_regex(word: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![a-z0-9]){re.escape(word)}(?![a-z0-9])")


@dataclass(frozen=True, slots=True)
class _DigitCheck:
    """One rule or literal that tells digits apart: can a line of this mask hit it, and does this one."""

    anchor: str
    masked_anchor: str
    key: re.Pattern[str] | None = None  # the rule's prefilter word, when it holds digits
    masked_key: re.Pattern[str] | None = None
    regex: re.Pattern[str] | None = None
    masked_regex: re.Pattern[str] | None = None
    on_text: bool = False  # the regex runs on the original line (figures), not the lower-cased one
    # A literal every masked line that may hold the check contains (the masked anchor, or a longer
    # word the masked regex requires: "error: " says more than "0" would). Default: the masked anchor.
    gate: str = ""

    def __post_init__(self) -> None:
        if not self.gate:
            object.__setattr__(self, "gate", self.masked_anchor)

    def may_hold(self, masked_low: str, masked_text: str) -> bool:
        if self.masked_anchor not in masked_low:
            return False
        if self.masked_key is not None and self.masked_key.search(masked_low) is None:
            return False
        target = masked_text if self.on_text else masked_low
        return self.masked_regex is None or self.masked_regex.search(target) is not None

    def holds(self, low: str, text: str) -> bool:
        if self.anchor not in low:
            return False
        if self.key is not None and self.key.search(low) is None:
            return False
        return self.regex is None or self.regex.search(text if self.on_text else low) is not None


def _digit_check(anchor: str, regex: re.Pattern[str] | None, filed: bool, on_text: bool) -> _DigitCheck:
    key = _key_of(anchor) if filed and anchor not in ls.SUBSTRING_ANCHORS else ""
    digit_key = bool(_DIGIT_RE.search(key))
    masked_regex = _masked_regex(regex) if regex is not None else None
    gates = [_mask(anchor)]
    if regex is not None and masked_regex is not None and not on_text:
        gates.extend(_mask(literal) for literal in _required_literals(regex))
    return _DigitCheck(
        anchor=anchor,
        masked_anchor=_mask(anchor),
        key=_word_regex(key) if digit_key else None,
        masked_key=_word_regex(_mask(key)) if digit_key else None,
        regex=regex,
        # When the rewrite fails the anchor alone decides (a superset: the check then runs more often).
        masked_regex=masked_regex,
        on_text=on_text,
        gate=max(gates, key=_gate_strength),
    )


def _gate_strength(literal: str) -> tuple[int, int]:
    return (len(literal) - literal.count("0"), len(literal))  # "0" is in most masked lines


def _required_literals(regex: re.Pattern[str]) -> list[str]:
    """Runs of literal characters at the top level of a regex: every match holds each of them.

    Masked, they are as much a part of every match of the masked regex (the rewrite masks digit
    literals in place and only drops lookaheads).
    """
    if regex.flags & re.IGNORECASE:
        return []  # a literal then stands for its other cases too
    runs: list[str] = []
    run: list[str] = []
    for op, av in _sre_parser.parse(regex.pattern, regex.flags).data:
        if op is _sre.LITERAL:
            run.append(chr(av))
            continue
        if run:
            runs.append("".join(run))
            run = []
    if run:
        runs.append("".join(run))
    return runs


def _build_digit_checks() -> tuple[_DigitCheck, ...]:
    checks: list[_DigitCheck] = []
    tables = (
        (ls.STAGE_RULES, False),
        (ls.ERROR_RULES, False),
        (ls.NOTICE_RULES, False),
        (ls.RECOVERY_RULES, False),
        (ls.FIGURE_RULES, True),
    )
    for rules, on_text in tables:
        for rule in rules:
            regex = rule.regex
            distinguishes = regex is not None and _regex_tells_digits_apart(regex)
            if _DIGIT_RE.search(rule.anchor) or distinguishes:
                checks.append(_digit_check(rule.anchor, regex if distinguishes else None, True, on_text))
    for anchor, _name in ls.BACKEND_MARKS:
        if _DIGIT_RE.search(anchor):
            checks.append(_digit_check(anchor, None, True, False))
    # Literals and words the analysis tests outside the rule tables.
    literals = (
        *ls.QUANT_CONFIRM_ANCHORS,
        *ls.MEMORY_HEAVY_FRAME_WORDS,
        *_CHAINED,
        *(word for word, _name in _FORMAT_WORDS),
        *_SUBSTRINGS,
    )
    for literal in literals:
        if _DIGIT_RE.search(literal):
            checks.append(_digit_check(literal, None, False, False))
    for word in (*_QUANT_WORDS, *_WARNING_WORDS, *_CHAIN_WORDS, *_FORMAT_KEYS, *_OTHER_WORDS):
        if _DIGIT_RE.search(word):
            checks.append(_DigitCheck(word, _mask(word), _word_regex(word), _word_regex(_mask(word))))
    return tuple(dict.fromkeys(checks))


_DIGIT_CHECKS = _build_digit_checks()
# The checks by their gate: a new mask pays one substring test per distinct gate.
_CHECK_GATES: tuple[str, ...] = tuple(dict.fromkeys(check.gate for check in _DIGIT_CHECKS))
_CHECKS_BY_GATE: dict[str, tuple[_DigitCheck, ...]] = {
    gate: tuple(check for check in _DIGIT_CHECKS if check.gate == gate) for gate in _CHECK_GATES
}


def _checks_of(masked_low: str, masked_text: str) -> tuple[_DigitCheck, ...]:
    """The digit checks a line of this mask may hold (none for most lines: one C-level scan)."""
    if not any(map(masked_low.__contains__, _CHECK_GATES)):
        return ()
    return tuple(
        check
        for gate in _CHECK_GATES
        if gate in masked_low
        for check in _CHECKS_BY_GATE[gate]
        if check.masked_anchor in masked_low and check.may_hold(masked_low, masked_text)
    )


# Figure rules whose regex tells digits apart: their groups are found again on every line.
_DIGIT_FIGURES = frozenset(
    id(rule) for rule in ls.FIGURE_RULES if rule.regex is not None and _regex_tells_digits_apart(rule.regex)
)
# Digit-holding prefilter words: one can decide whether a line is analysed at all (its only word).
_MASKED_DIGIT_KEYS = frozenset(_mask(key) for key in _KEYS if _DIGIT_RE.search(key))
_PLAIN_KEYS = frozenset(key for key in _KEYS if not _DIGIT_RE.search(key))


class _Known:
    """One analysis of a mask (for one outcome of its digit checks), and its figures by their text."""

    __slots__ = ("by_figures", "figure_rules", "info", "window")

    def __init__(self, text: str, info: _LineInfo | None, figure_rules: tuple[ls.FigureRule, ...]) -> None:
        self.info = info
        self.figure_rules = figure_rules
        # A regex that treats all digits alike matches every line of one mask at the same places, so
        # the figures of a line are a function of the text in the groups it matched there: of the
        # stretch from the first group to the last, one slice.
        self.window = _figure_window(text, figure_rules) if figure_rules and info is not None else None
        self.by_figures: dict[str, _LineInfo] = {}

    def for_line(self, text: str) -> _LineInfo | None:
        info = self.info
        if not self.figure_rules or info is None:
            return info
        window = self.window
        key = text[window[0] : window[1]] if window is not None else None
        if key is not None:
            known = self.by_figures.get(key)
            if known is not None:
                return known
        figures, _ = _extract_figures(text, self.figure_rules)
        line_info = replace(info, figures=tuple(figures))
        if key is not None and len(self.by_figures) < 256:
            self.by_figures[key] = line_info
        return line_info


def _figure_window(text: str, figure_rules: tuple[ls.FigureRule, ...]) -> tuple[int, int] | None:
    """Where the figure rules' groups sit in this line, first to last; None when they may move."""
    starts: list[int] = []
    ends: list[int] = []
    for figure in figure_rules:
        if id(figure) in _DIGIT_FIGURES or figure.regex is None:
            return None
        match = figure.regex.search(text)
        if match is None:
            return None
        for name in figure.regex.groupindex:
            start, end = match.span(name)
            if start >= 0:  # a group that took no part stays out in every line of the mask
                starts.append(start)
                ends.append(end)
    return (min(starts), max(ends)) if starts else (0, 0)


class _ByDigits:
    """The analyses of one mask, by the outcome of its digit checks on the real line."""

    __slots__ = ("checks", "found")

    def __init__(self, checks: tuple[_DigitCheck, ...]) -> None:
        self.checks = checks
        self.found: dict[tuple[bool, ...], _Known] = {}

    def info(self, text: str) -> _LineInfo | None:
        checks = self.checks
        if not checks:
            outcome: tuple[bool, ...] = ()
        else:
            low = text.lower()
            if len(checks) == 1:
                outcome = (checks[0].holds(low, text),)
            else:
                outcome = tuple([check.holds(low, text) for check in checks])
        known = self.found.get(outcome)
        if known is None:
            info, figure_rules = _analyze_detail(text)
            if len(self.found) < 64:
                self.found[outcome] = _Known(text, info, figure_rules)
            return info
        if known.figure_rules:
            return known.for_line(text)
        return known.info


class _EachLine:
    """A mask whose lines are analysed one by one (see above); `dirty`: raw bytes to clean first."""

    __slots__ = ("dirty",)

    def __init__(self, dirty: bool) -> None:
        self.dirty = dirty


_NO_INFO: object = object()  # a mask whose lines all analyse to None


def _mask_entry(masked_text: str, text: str) -> object:
    """What a mask's memo holds, from its mask and its first real (clean) line."""
    masked_low = masked_text.lower()
    if "(" in masked_low:
        tokens = _TOKEN_RE.findall(masked_low)
        if (
            _MASKED_DIGIT_KEYS.intersection(tokens)
            and not _PLAIN_KEYS.intersection(tokens)
            and not any(anchor in masked_low for anchor in _SUBSTRINGS)
        ):
            return _EACH_LINE  # a digit word may be the line's only word: None or _PLAIN by digits
    # Before the checks: a shared key is only ever stored where no line of its widths can hold one.
    collapsed = _width_key(masked_text)
    known = _COLLAPSED.get(collapsed)
    if known is not None:
        return known
    checks = _checks_of(masked_low, masked_text)
    info, figure_rules = _analyze_detail(text)
    if info is not None and info.exception is not None and _DIGIT_RE.search(info.exception):
        return _EACH_LINE
    if not checks and not figure_rules:
        entry = _NO_INFO if info is None else _intern(info)
        if _run_blind(text) and not _may_hold_a_check(collapsed):
            _remember(_COLLAPSED, collapsed, entry)
        return entry
    if not figure_rules and _DIGIT_RULES_WIDTH_BLIND and _run_blind(text):
        # Shared across widths too: the outcome of every check any width may hold tells the lines apart
        # where their digits matter (a request line's "/v1/" or an exit code); the rest of the analysis
        # is width-blind as above.
        shared = _ByDigits(_checks_at_any_width(collapsed))
        _remember(_COLLAPSED, collapsed, shared)
        return shared
    entry = _ByDigits(checks)
    if not checks:
        entry.found[()] = _Known(text, info, figure_rules)
    return entry


_DIRTY = _EachLine(True)
_EACH_LINE = _EachLine(False)

# -- numbers of other widths ---------------------------------------------------------------------------
# A line's mask keeps the width of each number, so "task 9" and "task 10" are two masks. When no regex
# the analysis ran on can match a digit at all (and no check or figure applies), the answer cannot
# depend on how many digits a run has either: only the digit-free stretches between runs are read, and
# a digit stays a word character for \b. Such an answer is shared by every mask with the same runs
# collapsed to one digit; so is an analysis with digit checks, by the outcome on each real line of
# every check some width may hold. A run exactly _KEPT_RUN_WIDTH wide between two "|" (spaces aside)
# is marked apart in that key, so a regex that reads such a run whole (an HTTP status:
# `\|\s*\d{3}\s*\|`) does not stop the sharing (see _width_safe).
_KEPT_RUN_WIDTH = 3
_FENCED_RUN_RE = re.compile(r"\|(\s*)000(?=\s*\|)")
_FENCED_MARK = "|\\1\0"  # NUL: never in a masked line (control characters are cleaned away first)


def _width_key(masked_text: str) -> str:
    if "|" in masked_text:
        masked_text = _FENCED_RUN_RE.sub(_FENCED_MARK, masked_text)
    # Halving every run until none is left is a few C-level passes (a regex sub costs more).
    while "00" in masked_text:
        masked_text = masked_text.replace("00", "0")
    return masked_text


_COLLAPSED: dict[str, object] = {}
# The checks' gates in the shared key's terms. A gate that a line holds leaves its collapsed form in
# the line's key (collapsing a run inside the gate or at its edges leaves one digit, as in the line;
# no gate holds "|", so none reaches into a run the key marks apart): a key free of them all is free
# of checks at every width it stands for.
_CHECKS_BY_COLLAPSED_GATE = tuple((_width_key(check.gate), check) for check in _DIGIT_CHECKS)
_COLLAPSED_GATES: tuple[str, ...] = tuple(dict.fromkeys(gate for gate, _ in _CHECKS_BY_COLLAPSED_GATE))


def _may_hold_a_check(collapsed: str) -> bool:
    low = collapsed.lower()
    return any(gate in low for gate in _COLLAPSED_GATES)


def _checks_at_any_width(collapsed: str) -> tuple[_DigitCheck, ...]:
    """Every check a line of this shared key may hold, whatever the widths of its runs."""
    low = collapsed.lower()
    return tuple(check for gate, check in _CHECKS_BY_COLLAPSED_GATE if gate in low)


def _digit_rules_width_blind() -> bool:
    """True when no rule with a digit in its anchor has a regex that reads digits but not their value,
    and no figure rule has a digit in its anchor.

    Such a rule would match a line at one width and not at another with the same outcome of its
    check (which, for a regex that treats all digits alike, tests the anchor alone); a figure's
    groups sit elsewhere at another width (see _Known.window). Sharing an analysis that has checks
    across widths then stops.
    """
    if any(_DIGIT_RE.search(figure.anchor) for figure in ls.FIGURE_RULES):
        return False
    tables = (ls.STAGE_RULES, ls.ERROR_RULES, ls.NOTICE_RULES, ls.RECOVERY_RULES)
    return not any(
        _DIGIT_RE.search(rule.anchor)
        and not _regex_tells_digits_apart(rule.regex)
        and _sees_digits(rule.regex)
        for table in tables
        for rule in table
        if rule.regex is not None
    )


_DIGIT_RULES_WIDTH_BLIND = _digit_rules_width_blind()


def _can_match_digit(items: list) -> bool:
    """True when some part of a parsed regex can consume a digit (conservative: unknown parts can)."""
    for op, av in items:
        if op in (_sre.AT, _sre.SUBPATTERN, _sre.BRANCH, _sre.MAX_REPEAT, _sre.MIN_REPEAT):
            if any(_can_match_digit(sub) for sub in _subpatterns(op, av)):
                return True
            continue
        if op is _sre.LITERAL:
            if 48 <= av <= 57:
                return True
            continue
        if op is _sre.IN:
            negated = bool(av) and av[0][0] is _sre.NEGATE
            digits = any(
                (kind is _sre.LITERAL and 48 <= value <= 57)
                or (kind is _sre.RANGE and not (value[1] < 48 or value[0] > 57))
                or (kind is _sre.CATEGORY and value in (_sre.CATEGORY_DIGIT, _sre.CATEGORY_WORD))
                for kind, value in av
            )
            if negated:
                # [^...] matches digits unless it names every one of them.
                names_all = any(
                    (kind is _sre.RANGE and value[0] <= 48 and value[1] >= 57)
                    or (kind is _sre.CATEGORY and value in (_sre.CATEGORY_DIGIT, _sre.CATEGORY_WORD))
                    for kind, value in av
                )
                if not names_all:
                    return True
            elif digits or any(kind is _sre.CATEGORY for kind, _ in av):
                return True
            continue
        return True  # ANY, NOT_LITERAL, lookarounds, back-references ...: assume it can
    return False


def _is_any_stretch(op: object, av: object) -> bool:
    """`.*`: takes any stretch of a line (none holds a newline), so it takes a run of any width."""
    return (
        op in (_sre.MAX_REPEAT, _sre.MIN_REPEAT)
        and av[0] == 0  # type: ignore[index]
        and av[1] == _sre.MAXREPEAT  # type: ignore[index]
        and list(av[2]) == [(_sre.ANY, None)]  # type: ignore[index]
    )


def _is_kept_width_run(op: object, av: object) -> bool:
    r"""`\d{3}` (or `[0-9]{3}`): exactly _KEPT_RUN_WIDTH digits."""
    if op not in (_sre.MAX_REPEAT, _sre.MIN_REPEAT) or av[0] != _KEPT_RUN_WIDTH or av[1] != _KEPT_RUN_WIDTH:  # type: ignore[index]
        return False
    body = list(av[2])  # type: ignore[index]
    return body in (
        [(_sre.IN, [(_sre.CATEGORY, _sre.CATEGORY_DIGIT)])],
        [(_sre.IN, [(_sre.RANGE, (48, 57))])],
    )


def _takes_no_digit(op: object, av: object) -> bool:
    """A part that never takes a digit (`\\s` too, which _can_match_digit, as any class, counts)."""
    if op is _sre.IN and all(item == (_sre.CATEGORY, _sre.CATEGORY_SPACE) for item in av):  # type: ignore[attr-defined]
        return True
    if op in (_sre.MAX_REPEAT, _sre.MIN_REPEAT) and len(av[2]) == 1:  # type: ignore[index]
        return _takes_no_digit(*av[2][0])  # type: ignore[index]
    return not _can_match_digit([(op, av)])


def _fenced(items: list, index: int, step: int) -> bool:
    """True when the part at `index` has a "|" on the `step` side, spaces aside (as _FENCED_RUN_RE)."""
    index += step
    while 0 <= index < len(items):
        op, av = items[index]
        if (op, av) == (_sre.LITERAL, 124):
            return True
        if (
            op is _sre.MAX_REPEAT
            and av[0] == 0
            and list(av[2]) == [(_sre.IN, [(_sre.CATEGORY, _sre.CATEGORY_SPACE)])]
        ):
            index += step  # `\s*`: the part beyond decides
            continue
        return False
    return False


def _width_safe(items: list) -> bool:
    r"""True when whether a parsed regex matches a line cannot change with the widths of its digit runs,
    as long as the runs _FENCED_RUN_RE marks stay so and no other run becomes one of them.

    Conservative: digits may be read only by top-level `.*` parts and by `\d{3}` parts fenced on both
    sides by "|" (spaces aside: they take a whole run, one that _FENCED_RUN_RE marks). A match then maps onto a line with
    other widths: the digit-free parts take the same text, a fenced run the run of the same width, and
    the `.*` parts stretch or shrink over the runs they share with each other or with the line's edges.
    """
    for index, (op, av) in enumerate(items):
        if _is_any_stretch(op, av):
            continue
        if _is_kept_width_run(op, av):
            if _fenced(items, index, -1) and _fenced(items, index, 1):
                continue
            return False
        if not _takes_no_digit(op, av):
            return False
    return True


def _sees_digits(regex: re.Pattern[str] | None) -> bool:
    """True when a regex's answer on a line may change with the width of one of its digit runs."""
    if regex is None:
        return False
    known = _SEES_DIGITS.get(id(regex))
    if known is None:
        try:
            items = _sre_parser.parse(regex.pattern, regex.flags).data
            known = _can_match_digit(items)
            # \b and \B next to a run that a `.*` splits: read where digits meet, so never waved through.
            if known and "\\b" not in regex.pattern and "\\B" not in regex.pattern:
                known = not _width_safe(items)
        except Exception:
            known = True
        _SEES_DIGITS[id(regex)] = known
    return known


_SEES_DIGITS: dict[int, bool] = {}


def _run_blind(text: str) -> bool:
    """True when no regex that _analyze_detail may run on this line can match a digit.

    Mirrors _analyze_detail's conditions, erring towards False: every rule filed under the line's
    words whose anchor it holds counts as run, and so do the frame, exception and warning regexes
    whenever their literal conditions hold.
    """
    low = text.lower()
    if "error" in low or "exception" in low or "interrupt" in low or 'file "' in low:
        return False
    words = _KEYS.intersection(_TOKEN_RE.findall(low))
    if words & _WARNING_WORDS:
        return False
    substrings = [f"\0{anchor}" for anchor in _SUBSTRINGS if anchor in low]
    for key in (*words, *substrings):
        entry = _INDEX.get(key)
        if entry is None:
            continue
        for table in (entry[0], entry[2], entry[3], entry[4]):
            for rule in table:
                if rule.anchor in low and _sees_digits(rule.regex):
                    return False
        for _, rule in entry[1]:
            if rule.anchor in low and _sees_digits(rule.regex):
                return False
    return True


_INTERNED: dict[tuple, _LineInfo] = {}
_INFO_FIELDS = tuple(info_field.name for info_field in fields(_LineInfo))


def _intern(info: _LineInfo) -> _LineInfo:
    """One object for equal analyses: many masks (request lines with numbers of other widths) share it."""
    key = tuple(getattr(info, name) for name in _INFO_FIELDS)
    known = _INTERNED.get(key)
    if known is None:
        if len(_INTERNED) >= _MEMO_LIMIT:
            _INTERNED.clear()
        _INTERNED[key] = known = info
    return known


def _remember(memo: dict[Any, Any], key: bytes | str, value: object) -> None:
    """Store in one of the bounded memos (see _MEMO_LIMIT): a long line is analysed each time instead."""
    if len(key) > _MEMO_LINE_BYTES:
        return
    if len(memo) >= _MEMO_LIMIT:
        memo.clear()
    memo[key] = value


def _resolve(entry: object, text: str) -> _LineInfo | None:
    """The analysis of a clean line from its mask's memo entry."""
    if isinstance(entry, _LineInfo):
        return entry
    if entry is _NO_INFO:
        return None
    if isinstance(entry, _ByDigits):
        return entry.info(text)
    return _analyze(text)


@dataclass
class _Found:
    number: int
    text: str
    rule: ErrorRule | None
    stage: str
    defaulted: bool = False  # no line said where: the stage is the class's default


def detect_backend(scores: dict[str, int]) -> str | None:
    """The backend whose marks the log carries; the one that embeds the others wins."""
    for name in ls.BACKEND_PRECEDENCE:
        if scores.get(name, 0) <= 0:
            continue
        if name == "sglang" and scores.get(name, 0) < 2 and scores.get("vllm", 0) > 2:
            continue  # one "TP0]"-like mark does not outweigh a vLLM log
        return name
    return None


def read_kernel_oom_lines(timeout_s: float = 2.0) -> str | None:
    """The kernel's OOM-killer lines from `dmesg` or the journal, when this user may read them."""
    commands = (["dmesg", "-T"], ["dmesg"], ["journalctl", "-k", "-n", "2000", "--no-pager", "-q"])
    for command in commands:
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, check=False)
        except (OSError, subprocess.SubprocessError):
            continue
        if done.returncode != 0:
            continue
        hits = [
            line
            for line in done.stdout.splitlines()
            if re.search(r"out of memory: kill|killed process|oom-kill|oom_reaper", line, re.IGNORECASE)
        ]
        return "\n".join(hits[-5:]) if hits else ""
    return None


# A kill this long before the log's last line, or this long after it, may be the server's (the log
# stops when the process dies; a saved file's time is its last write).
_KILL_BEFORE_S = 600.0
_KILL_AFTER_S = 120.0
_DMESG_T_RE = re.compile(r"^\[(\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4})\]")  # dmesg -T
_JOURNAL_TIME_RE = re.compile(r"^(\w{3} +\d+ \d\d:\d\d:\d\d) ")  # journalctl -k
_DMESG_RE = re.compile(r"^\[\s*(\d+\.\d+)\]")  # dmesg: seconds since boot


def _kernel_line_time(line: str) -> float | None:
    """When a kernel log line was written (seconds since the epoch, local time), if it says."""
    try:
        if match := _DMESG_T_RE.match(line):
            return time.mktime(time.strptime(" ".join(match.group(1).split()), "%a %b %d %H:%M:%S %Y"))
        if match := _JOURNAL_TIME_RE.match(line):
            year = time.localtime().tm_year
            when = time.mktime(
                time.strptime(f"{' '.join(match.group(1).split())} {year}", "%b %d %H:%M:%S %Y")
            )
            return when if when <= time.time() + 86400 else when - 365 * 86400  # last year's December
        if match := _DMESG_RE.match(line):
            import psutil  # type: ignore[import-untyped]

            return psutil.boot_time() + float(match.group(1))
    except (ValueError, OverflowError, OSError):
        return None
    return None


def _kills_near(kernel_text: str, log_time: float | None) -> tuple[list[str], list[str]]:
    """The kernel's OOM-kill lines that may be this log's process (by time), and the others.

    With no time for the log (text from a pipe), none can be matched: all are "others".
    """
    near: list[str] = []
    others: list[str] = []
    for line in kernel_text.splitlines():
        when = _kernel_line_time(line)
        if (
            log_time is not None
            and when is not None
            and log_time - _KILL_BEFORE_S <= when <= log_time + _KILL_AFTER_S
        ):
            near.append(line)
        else:
            others.append(line)
    return near, others


def _kill_times(lines: list[str]) -> str:
    times = [
        time.strftime("%b %d %H:%M:%S", time.localtime(when))
        for line in lines
        if (when := _kernel_line_time(line))
    ]
    return ", ".join(dict.fromkeys(times)) or "times it does not print"


class LogDiagnoser:
    """Stream a model server's log through the rules, one line at a time."""

    def __init__(
        self,
        backend: str | None = None,
        requested_quant: str | None = None,
        kernel_log: Callable[[], str | None] | None = None,
        host_budget: bool = False,
    ) -> None:
        self.backend = _normalize_backend(backend) if backend else None
        # Under a host memory budget (an address-space cap standing in for a smaller card), a failed
        # host allocation is that budget's out-of-memory, not an unexplained failure.
        self.host_budget = host_budget
        self.requested_quant = requested_quant.lower() if requested_quant else None
        self._kernel_log = kernel_log if kernel_log is not None else read_kernel_oom_lines
        self._kernel_text: str | bool | None = False  # False: not read yet
        # When the log ended (seconds since the epoch): a saved file's last write, a live process's exit.
        # Only a kernel OOM kill near it confirms that the OOM killer ended this process.
        self.log_time: float | None = None
        self._hint: str | None = None  # what the engine says to change, near the first error
        self._memo: dict[str, _LineInfo | None] = {}  # digit-dependent lines, by their text
        self._masks: dict[bytes, object] = {}  # ASCII lines, by their digit mask (see _mask_entry)
        self._text_masks: dict[bytes, object] = {}  # cleaned non-ASCII lines, by the mask of their UTF-8
        self.lines = 0
        self._current: str | None = None
        self._furthest = -1
        self._startup_seen = False
        self._strong: _Found | None = None
        self._weak: _Found | None = None
        self._recovered: list[str] = []
        self._last_stage_line: tuple[int, str] | None = None
        # traceback state
        self._tb_open = False
        self._tb_start: tuple[int, str] | None = None
        self._tb_frames = 0
        self._tb_startup: str | None = None
        self._tb_inference = False
        self._tb_memory = False
        self._after_frame = False
        self._cut_tb: _Found | None = None
        self._cut_memory = False
        # other findings
        self._notices: dict[str, tuple[int, str, str]] = {}
        self._figures: dict[str, dict[str, int | float]] = {}
        self._scores: dict[str, int] = {}
        self._saturated: set[str] = set()
        self._quant_lines: list[str] = []
        self._formats: set[str] = set()
        self._exit_code: int | None = None

    # -- feeding -----------------------------------------------------------------------------------
    def feed(self, line: str) -> LineTag:
        """Take one line of output (with or without its newline) and say what it is."""
        text = line if line.isprintable() else clean_line(line)
        info = self._info_of_text(text)
        self.lines += 1
        if info is None or self._is_noop(info):
            self._after_frame = False
            return LineTag(self.lines, self._current, "info", False)
        severity, first = self._step(self.lines, text, info)
        return LineTag(self.lines, self._current, severity, first)

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
        for piece in _pieces(iter_raw_line_batches(stream)):
            pieces += 1
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
                            self._after_frame = False
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
                    if _DIRTY_BYTES_RE.search(key) is not None:
                        entry = _DIRTY
                        _remember(masks, key, entry)
                    else:
                        entry = self._new_mask(key, raw.decode("ascii"), masks)
                if entry is _NO_INFO:
                    self._after_frame = False
                    quiet.add(entry)
                    continue
                if isinstance(entry, _LineInfo):
                    if probing:
                        _remember(exact_memo, raw, (raw.decode("ascii"), entry))
                    if entry.simple and is_noop(entry):
                        self._after_frame = False
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
            self._after_frame = False
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

    def note_exit(self, returncode: int | None) -> None:
        """The process ended with `returncode` (negative: killed by that signal)."""
        self._exit_code = returncode

    # -- the state machine ---------------------------------------------------------------------------
    def _is_noop(self, info: _LineInfo) -> bool:
        """True when feeding this line cannot change anything: the same stage again, marks counted."""
        return (
            info.simple
            and (
                info.stage is None
                or (info.stage == self._current and info.stage != "ready" and self._startup_seen)
            )
            and not self._after_frame
            and self._saturated.issuperset(info.backends)
        )

    def _step(self, number: int, text: str, info: _LineInfo) -> tuple[str, bool]:
        if info.backends and not self._saturated.issuperset(info.backends):
            for name in info.backends:
                score = self._scores.get(name, 0)
                if score < _SCORE_CAP:
                    self._scores[name] = score + 1
                else:
                    self._saturated.add(name)
        if info.extras:
            if info.formats:
                self._formats.update(info.formats)
            if info.quant_words and len(self._quant_lines) < 64:
                self._quant_lines.append(text.lower())
            for key, device, value, per_device in info.figures:
                self._add_figure(key, device, value, per_device)
            for notice in info.notices:
                if len(self._notices) < MAX_EVIDENCE:
                    self._notices.setdefault(
                        f"{notice.kind}:{notice.message}", (number, text, notice.message)
                    )

        after_frame, self._after_frame = self._after_frame, False
        if info.frame:
            if not self._tb_open:
                self._open_traceback(number, text)
            self._tb_frames += 1
            self._tb_hint(info)
            self._after_frame = True
            return "error", False
        if after_frame and self._tb_open and info.exception is None:
            # The code line under a frame: where it was, not a message of its own.
            self._tb_hint(info)
            return "error", False

        if info.stage is not None:
            self._adopt_stage(number, info.stage)
            if info.stage != self._current or self._last_stage_line is None:
                self._last_stage_line = (number, text)  # where the log entered this stage
            self._current = info.stage
            index = STAGE_INDEX[info.stage]
            if index > self._furthest:
                self._furthest = index
            if info.stage != "inference" or info.error is None:
                self._startup_seen = True
            if info.stage == "ready":
                self._clear_startup_errors(number, text)
        if info.recovery:
            self._clear_startup_errors(number, text, always=True)

        if info.header:
            if self._tb_open and self._tb_frames:
                self._note_cut_traceback()
            self._open_traceback(number, text)
        elif info.chained:
            return "error", False

        rule = info.error
        if info.exception is not None and self._hint is None:
            self._note_hint(number, text)
        if info.exception is not None or (rule is not None and self._tb_open and self._tb_frames):
            stage = self._close_traceback()
            if stage is not None:
                self._adopt_stage(number, stage)  # the frames say where a stage-less first error was
        else:
            stage = None
        if rule is None and info.exception is not None:
            rule = _EXCEPTION_RULE
        if rule is None:
            if info.header:
                return "error", False
            return ("warning" if info.warning_level or info.notices else "info"), False

        if (
            stage is not None
            and self._weak is not None
            and self._weak.defaulted
            and self._tb_start is not None
            and self._weak.number >= self._tb_start[0]
        ):
            self._weak.stage, self._weak.defaulted = stage, False  # the traceback it opened says where
        weak = self._weak
        if (
            weak is not None
            and not rule.strong
            and info.exception is not None
            and weak.rule is not None
            and weak.rule.cause == "traceback"
            and self._tb_start is not None
            and self._tb_start[0] == weak.number
        ):
            # The exception line that ends the traceback says what failed; its header only that
            # something did (in a chain, the first traceback's exception is the first error).
            self._weak = _Found(number, text, rule, weak.stage, weak.defaulted)
            return "error", False
        if (self._strong if rule.strong else self._weak) is not None:
            return "error", False  # not the first: the cause is already known
        known = rule.stage or stage or info.stage or self._current_or_none()
        if known is None and _SAYS_LOADING_RE.search(text):
            known = "load_weights"  # no stage before it, but the error line says it was loading
        found = _Found(number, text, rule, known or _DEFAULT_STAGE[rule.failure], known is None)
        if rule.strong:
            self._strong = found
            return "error", True
        self._weak = found
        return "error", False

    def _note_hint(self, number: int, text: str) -> None:
        """An exception just after the first error that says what to change (the engine's own hint)."""
        found = self._strong or self._weak
        if found is not None and number - found.number <= _HINT_WITHIN_LINES:
            self._hint = _engine_hint(text)

    def _adopt_stage(self, number: int, stage: str) -> None:
        """A first error that no stage line came before takes the first startup stage told soon after.

        Processes interleave their output: a worker's out-of-memory error can reach the log a line
        before the loader's "Loading safetensors checkpoint shards" progress, or before the traceback
        whose frames say it was in from_pretrained. Without this the error would take its class's
        default stage (a request's, for out-of-memory).
        """
        if self._last_stage_line is not None or stage not in _STARTUP_STAGES:
            return
        for found in (self._strong, self._weak):
            if found is not None and found.defaulted and number - found.number <= _ADOPT_WITHIN_LINES:
                found.stage, found.defaulted = stage, False

    def _current_or_none(self) -> str | None:
        return self._current if self._startup_seen or self._current == "inference" else None

    def _open_traceback(self, number: int, text: str) -> None:
        self._tb_open = True
        self._tb_start = (number, text)
        self._tb_frames = 0
        self._tb_startup = None
        self._tb_inference = False
        self._tb_memory = False

    def _tb_hint(self, info: _LineInfo) -> None:
        if info.memory_heavy:
            self._tb_memory = True
        if info.stage is None:
            return
        if info.stage in ("inference", "ready"):
            self._tb_inference = True
        else:
            self._tb_startup = info.stage  # the innermost startup frame wins

    def _traceback_stage(self) -> str | None:
        if self._tb_startup:
            return self._tb_startup
        return "inference" if self._tb_inference else None

    def _close_traceback(self) -> str | None:
        if not self._tb_open:
            return None
        stage = self._traceback_stage()
        self._tb_open = False
        return stage

    def _note_cut_traceback(self) -> None:
        if self._cut_tb is None and self._tb_start is not None:
            stage = self._traceback_stage() or self._current_or_none() or "load_weights"
            self._cut_tb = _Found(self._tb_start[0], self._tb_start[1], None, stage)
            self._cut_memory = self._tb_memory

    def _clear_startup_errors(self, number: int, text: str, always: bool = False) -> None:
        cleared = False
        for name in ("_strong", "_weak", "_cut_tb"):
            found: _Found | None = getattr(self, name)
            if found is not None and (always or STAGE_INDEX[found.stage] < STAGE_INDEX["ready"]):
                setattr(self, name, None)
                cleared = True
        if (cleared or always) and len(self._recovered) < _RECOVERIES_QUOTED:
            self._recovered.append(_quote(number, text))  # a crash loop recovers thousands of times
        if always:
            self._tb_open = False

    def _add_figure(self, key: str, device: str | None, value: int | float, per_device: bool) -> None:
        if per_device:
            devices = self._figures.setdefault(key, {})
            name = device or "?"
            if name in devices:
                devices.clear()  # the same device again: a new load, start a new set
            devices[name] = value
        else:
            self._figures[key] = {"": value}

    # -- the verdict -------------------------------------------------------------------------------
    def result(self) -> Diagnosis:
        backend = self.backend or detect_backend(self._scores)
        found = self._strong
        if (
            backend == "sglang"
            and found is not None
            and found.rule is not None
            and found.rule.cause == "host_killed"
            and self._weak is not None
            and self._weak.number < found.number
        ):
            # SGLang ends a failed launch by SIGKILLing its own process tree: the shell's "Killed" after
            # an error is that, not the OOM killer; the error before it is the failure.
            found = None
        inferred = False
        cut = self._cut_tb
        cut_memory = self._cut_memory
        if cut is None and self._tb_open and self._tb_frames and self._tb_start is not None:
            cut_stage = self._traceback_stage() or self._current_or_none() or "load_weights"
            cut = _Found(self._tb_start[0], self._tb_start[1], None, cut_stage)
            cut_memory = self._tb_memory
        failure = "none"
        cause: str | None = None
        if found is not None and found.rule is not None:
            failure, cause = found.rule.failure, found.rule.cause
        elif self._weak is not None and self._weak.rule is not None:
            found = self._weak
            rule = self._weak.rule
            if rule.hint:
                failure, cause, inferred = rule.hint, rule.cause, True
            elif cut is not None and cut_memory:
                failure, cause, inferred = "cuda_oom", "cut_traceback", True
            else:
                failure, cause = rule.failure, rule.cause
            if cut is not None and cut.number < found.number:
                found = _Found(cut.number, cut.text, rule, cut.stage)
            elif cut is not None and found.defaulted and cut.number >= found.number:
                found = _Found(found.number, found.text, rule, cut.stage)
        elif cut is not None:
            found = cut
            failure, cause, inferred = ("cuda_oom" if cut_memory else "other"), "cut_traceback", True

        if _wrong_format(backend, failure, cause, self._formats):
            failure, cause = "unsupported_quant", "wrong_format"
        if (self.host_budget or "host_budget" in self._figures) and cause in _BUDGET_ALLOCATION_CAUSES:
            failure = "host_oom"
        if (
            failure == "cuda_oom"
            and found is not None
            and found.stage == "kv_cache"
            and "cuda_graphs" not in self._figures  # the engine's "capture finished" figure
            and any(
                key == "mark:graph_capture" and seen[0] < found.number for key, seen in self._notices.items()
            )
        ):
            cause = "cuda_graph_capture"

        exit_code = self._exit_code
        killed_by_signal = exit_code in (137, -9)
        if found is None and exit_code not in (None, 0, 130, 143, -2, -15):
            exit_stage = self._current or "load_weights"
            number = self.lines + 1
            if killed_by_signal:
                failure, cause = "host_oom_killed", "exit_137"
                text = f"process killed (exit {exit_code}) with no error text"
            else:
                failure, cause = "other", "exit_code"
                text = f"process exited with code {exit_code} with no error text"
            found = _Found(number, text, None, exit_stage, defaulted=self._current is None)
            inferred = killed_by_signal

        failed = found is not None
        failure_stage = found.stage if found is not None else None
        furthest = self._furthest
        if failure_stage is not None:
            furthest = max(furthest, STAGE_INDEX[failure_stage])
        stage = STAGES[furthest] if furthest >= 0 else None

        evidence: list[str] = []
        if found is not None:
            evidence.append(_quote(found.number, found.text))
            weak = self._weak
            if (
                self._strong is not None
                and weak is not None
                and weak is not found
                and weak.number < self._strong.number
            ):
                evidence.append(_quote(weak.number, weak.text))
            if cut is not None and cut is not found:
                evidence.append(_quote(cut.number, cut.text))
            if self._last_stage_line is not None and self._last_stage_line[0] < found.number:
                evidence.append(_quote(*self._last_stage_line))
        evidence.extend(f"recovered: {line}" for line in self._recovered)
        evidence = list(dict.fromkeys(evidence))

        kernel_note: str | None = None
        kills_elsewhere: str | None = None
        if failure == "host_oom_killed":
            kernel_text = self._read_kernel()
            kernel_note = kernel_text
            if kernel_text:
                near, others = _kills_near(kernel_text, self.log_time)
                if near:
                    kernel_note = "\n".join(near)
                    evidence.extend(f"kernel: {line}" for line in near[:3])
                else:  # kills at other times (or a log with no time): shown, never called a confirmation
                    kernel_note = None
                    if self.log_time is None:
                        evidence.extend(f"kernel: {line}" for line in others[-3:])
                        kills_elsewhere = (
                            f"This machine's kernel log shows OOM kills ({_kill_times(others)}): if one of them "
                            "was this server, that confirms it (the log does not say when it ran)."
                        )
                    else:
                        kills_elsewhere = (
                            f"This machine's kernel log shows OOM kills only at other times "
                            f"({_kill_times(others)}), not when this log ends: look in the kernel log of the "
                            "machine and the hour the server ran (`dmesg -T`)."
                        )

        warnings = self._quiet_failures()
        figures = self._figures_flat()
        diagnosis = Diagnosis(
            backend=backend,
            stage=stage,
            failed=failed,
            failure_stage=failure_stage,
            failure=failure if failed else "none",
            first_error_line=found.number if found is not None else None,
            first_error_text=found.text[:MAX_QUOTE] if found is not None else None,
            evidence=evidence[:MAX_EVIDENCE],
            warnings=warnings,
            engine_figures=figures,
            cause=cause if failed else None,
            inferred=inferred,
            stage_inferred=found is not None and found.defaulted,
            lines=self.lines,
            exit_code=exit_code,
        )
        formats = set(self._formats)
        confirmations = self._quant_requests_and_confirmations()[1]
        if any(word in line for line in confirmations for word in _QUANTIZED_WORDS):
            formats.add("quantized")  # the log shows quantized weights (advice: no "quantize it" first)
        if "mark:flash_attn_on" in self._notices:
            formats.add("flash_attn")  # llama.cpp's compute buffer then hardly grows with the context
        diagnosis.advice = advise(diagnosis, formats, kernel_note, kills_elsewhere, hint=self._hint)
        diagnosis.summary = summarize(diagnosis, kernel_note)
        return diagnosis

    def _read_kernel(self) -> str | None:
        if self._kernel_text is False:
            try:
                self._kernel_text = self._kernel_log()
            except Exception:  # reading the kernel log is a bonus, never a crash
                self._kernel_text = None
        return self._kernel_text if isinstance(self._kernel_text, str) else None

    def _quiet_failures(self) -> list[str]:
        warnings = [
            f"{message} (line {number}: {_clip(text, 160)})"
            for key, (number, text, message) in self._notices.items()
            if not key.startswith("mark:")
        ]
        requests, confirmations = self._quant_requests_and_confirmations()
        wanted = self.requested_quant or (requests[0] if requests else None)
        if wanted:
            words = ls.QUANT_SYNONYMS.get(wanted, (wanted.replace("-", "_"), wanted))
            confirmed = any(any(word in line for word in words) for line in confirmations)
            per_parameter = self._bytes_per_parameter()
            if per_parameter is not None and wanted in _BNB_REQUESTS:
                # The loaded size settles it (vramtui's transformers runner prints it).
                confirmed = per_parameter < _UNQUANTIZED_BYTES_PER_PARAMETER
                if not confirmed:
                    warnings.append(
                        f"quantization {wanted!r} was requested but the weights take {per_parameter:.2f} bytes "
                        "per parameter: they were loaded unquantized"
                    )
                    return warnings[:MAX_EVIDENCE]
            if not confirmed:
                where = "" if self.requested_quant else " (the log itself asks for it)"
                warnings.append(
                    f"quantization {wanted!r} was requested{where} but no line of the log confirms it: "
                    "the weights may be loading unquantized (16-bit)"
                )
        return warnings[:MAX_EVIDENCE]

    def _bytes_per_parameter(self) -> float | None:
        parameters = self._figures.get("model_parameters", {}).get("")
        loaded = self._figures.get("weights_loaded", {}).get("")
        return loaded / parameters if parameters and loaded else None

    def _quant_requests_and_confirmations(self) -> tuple[list[str], list[str]]:
        """Quantizations the log asks for, and the quantization lines that are not such requests."""
        requests: list[str] = []
        confirmations: list[str] = []
        for line in self._quant_lines:
            asked = False
            for regex, name in ls.QUANT_REQUESTS:
                match = regex.search(line)
                if match is not None:
                    asked = True
                    requests.append(name or match.group("name"))
            if not asked and not any(word in line for word in ls.QUANT_NOT_CONFIRMING):
                confirmations.append(line)
        return requests, confirmations

    def _figures_flat(self) -> dict[str, int | float]:
        flat: dict[str, int | float] = {}
        for key, devices in self._figures.items():
            if list(devices) == [""]:
                flat[key] = devices[""]
                continue
            flat[key] = sum(devices.values())
            # What sits on accelerators (CPU, CPU_Mapped, CUDA_Host ... are host memory).
            on_devices = [value for name, value in devices.items() if not _is_host_buffer(name)]
            if on_devices:
                flat[f"{key}_gpu"] = sum(on_devices)
            for device, value in devices.items():
                flat[f"{key}.{device}"] = value
        return flat


_MISSING: object = object()
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


# An error line that says it happened while loading ("Failed to load model - not enough GPU memory",
# Ollama's "error loading llama server"): its stage when no line before it says one.
_SAYS_LOADING_RE = re.compile(
    r"error loading|failed to load|while loading|loading (?:the )?model", re.IGNORECASE
)
_RECOVERIES_QUOTED = 3
_STARTUP_STAGES = frozenset({"download", "load_weights", "kv_cache"})
_HINT_WITHIN_LINES = 60  # how far after the first error an exception's hint still belongs to it
_ADOPT_WITHIN_LINES = 20  # how far after a stage-less first error its stage may still be told (_adopt_stage)
_SCORE_CAP = 3  # backend marks counted up to here: enough for detect_backend, and repeats cost nothing
_EXCEPTION_RULE = ErrorRule("", "exception", "other", strong=False)


def _wrong_format(backend: str | None, failure: str, cause: str | None, formats: set[str]) -> bool:
    """A file the backend cannot read by format: safetensors/AWQ/GPTQ to llama.cpp, a GGUF to a torch engine.

    A bad magic in a file named .gguf stays a broken download ("other", as the corpus labels it).
    """
    if backend in _LLAMA_FAMILY:
        return (
            cause in ("bad_magic", "bad_file", "load_failed")
            and "gguf" not in formats
            and bool(formats & {"safetensors", "awq", "gptq"})
        )
    if backend in _TORCH_FAMILY and "gguf" in formats:
        return failure == "unknown_arch" or (failure == "other" and cause in _GENERIC_CAUSES)
    return False


_GENERIC_CAUSES = frozenset(
    {"exception", "traceback", "error", "engine_failed", "worker_failed", "load_failed", "cut_traceback"}
)


def _is_host_buffer(name: str) -> bool:
    upper = name.upper()
    return upper.startswith("CPU") or upper.endswith("_HOST") or upper in ("?", "HOST")


def _clip(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _quote(number: int, text: str) -> str:
    return f"line {number}: {_clip(text, MAX_QUOTE)}"


def _normalize_backend(name: str) -> str:
    key = name.strip().lower()
    if key in ls.BACKEND_NAMES:
        return key
    if key in ("text-generation-inference", "tgi"):
        return "tgi"
    if key == "sglang":
        return "sglang"
    from vramtui.core.backends import get_backend

    try:
        return get_backend(key).name
    except VramtuiError as error:
        known = ", ".join(ls.BACKEND_NAMES)
        raise VramtuiError(f"unknown backend {name!r} (known: {known})") from error


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
    return diagnose_lines(
        lines, backend, requested_quant=requested_quant, exit_code=exit_code, kernel_log=kernel_log
    )


def diagnose_file(
    path: str | Path,
    backend: str | None = None,
    *,
    requested_quant: str | None = None,
    exit_code: int | None = None,
    kernel_log: Callable[[], str | None] | None = None,
) -> Diagnosis:
    """Diagnose a log file ("-" is stdin), streaming in chunks: memory stays bounded."""
    diagnoser = LogDiagnoser(backend, requested_quant=requested_quant, kernel_log=kernel_log)
    if str(path) == "-":
        diagnoser._feed_raw_stream(sys.stdin.buffer)
    else:
        file_path = Path(path)
        if file_path.is_dir():
            raise VramtuiError(f"{path} is a folder, not a log file")
        try:
            with file_path.open("rb") as stream:
                diagnoser.log_time = os.fstat(stream.fileno()).st_mtime  # its last line's time, near enough
                diagnoser._feed_raw_stream(stream)
        except FileNotFoundError as error:
            raise VramtuiError(f"no such file: {path}") from error
        except PermissionError as error:
            raise VramtuiError(f"cannot read {path}: permission denied") from error
        except OSError as error:
            raise VramtuiError(f"cannot read {path}: {error.strerror or error}") from error
    diagnoser.note_exit(exit_code)
    return diagnoser.result()


# ------------------------------------------------------------------------------------------------
# Advice: what to change, by failure class and stage, in the flags of the detected backend.
# ------------------------------------------------------------------------------------------------
_LLAMA_FAMILY = ("llama.cpp", "llama-cpp-python", "ollama")
_TORCH_FAMILY = ("vllm", "transformers", "tgi", "sglang")

_HOST_ALLOCATION_CAUSES = frozenset({"host_alloc", "host_ram_short"})
# Bytes per counted parameter from which a bitsandbytes load is taken as unquantized: 16-bit weights take
# 2.0. (bitsandbytes packs two 4-bit weights in a byte and numel() counts the bytes, so a 4-bit load shows
# about 1.0 on the linear layers, 8-bit 1.0; 16-bit embeddings and norms raise the mean, never to 2.0.)
_UNQUANTIZED_BYTES_PER_PARAMETER = 1.9
_BNB_REQUESTS = frozenset({"bnb-4bit", "bnb-8bit", "bitsandbytes"})
# Words on a (non-request) log line that show the weights are quantized.
_QUANTIZED_WORDS = ("bitsandbytes", "linear4bit", "linear8bit", "bnb", "nf4", "awq", "gptq", "is quantized")
# Under vramtui's host budget (no GPU), llama.cpp's context buffers are host allocations too.
_BUDGET_ALLOCATION_CAUSES = _HOST_ALLOCATION_CAUSES | {"kv_alloc_failed", "compute_alloc_failed"}

FAILURE_WORDS: dict[str, str] = {
    "cuda_oom": "the GPU ran out of memory",
    "host_oom": "an allocation failed under the memory budget",
    "host_oom_killed": "the process was killed, most likely by the host's out-of-memory killer",
    "unsupported_quant": "this build cannot read the file's format or quantization",
    "unknown_arch": "the engine does not know this model architecture",
    "shape_mismatch": "the weights do not have the shapes the loader expects",
    "dtype_unsupported": "the data type is not supported on this GPU or build",
    "file_missing": "the model file or repository was not found",
    "network": "the download could not reach the server",
    "disk_full": "the disk is full",
    "kv_cache_too_small": "no room is left for the KV cache",
    "context_too_long": "a request is longer than the context",
    "other": "the run failed",
}
CAUSE_WORDS: dict[str, str] = {
    "host_alloc": "a host-RAM allocation failed",
    "nccl_timeout": "a multi-GPU (NCCL) collective operation timed out: one GPU's process stalled or died",
    "gpu_share_short": "less GPU memory is free than the share the engine was asked to take",
    "prefill_warmup": "the warmup's largest prefill did not fit in GPU memory",
    "removed_ggml_type": "the file uses a tensor type this llama.cpp build removed",
    "torch_checkpoint": "the file is a PyTorch checkpoint, and llama.cpp reads only GGUF",
    "disk_offload": "the model does not fit GPU and host memory, so accelerate would put weights on disk",
    "host_ram_short": "the model needs more host RAM than is free",
    "bad_magic": "the file is not a GGUF (bad magic number)",
    "truncated_file": "the model file is cut short or corrupt",
    "bad_file": "the model file could not be read",
    "gated_repo": "the repository is gated or needs a token",
    "download_failed": "the download step failed",
    "bnb_cpu_dispatch": "the quantized model does not fit the GPU, so modules were sent to the CPU/disk",
    "cut_traceback": "a traceback stops before its exception line",
    "cuda_graph_capture": "the GPU ran out of memory while capturing CUDA graphs",
    "wrong_format": "this backend does not read the model file's format",
    "tokenizer_files": "the tokenizer could not be loaded (its files are missing or cannot be converted)",
    "exception": "a Python exception stopped the run",
}


# With no backend named in the log, the advice names the setting instead of a flag.
_GENERIC_KNOBS: dict[str, str] = {
    "context": "the context length",
    "parallel": "the number of parallel requests",
    "batch": "the batch size",
    "mem_share": "the engine's GPU memory share",
    "kv_dtype": "the KV-cache type",
    "cpu_offload": "CPU offload",
    "gpu_layers": "the layers on the GPU",
    "quant": "the quantization",
}


def _knob(backend: str | None, param: str) -> str | None:
    if backend is None:
        return _GENERIC_KNOBS.get(param)
    if backend in ls.EXTRA_KNOBS:
        return ls.EXTRA_KNOBS[backend].get(param)
    from vramtui.core.backends import get_backend

    try:
        return get_backend(backend).knob(param)
    except VramtuiError:
        return None


def _say(template: str, backend: str | None, **params: str) -> str | None:
    """Fill `{param}` with the backend's flag; drop the advice when the backend has no such knob."""
    values: dict[str, str] = {}
    for name in re.findall(r"\{(\w+)\}", template):
        flag = _knob(backend, name) if name not in params else params[name]
        if flag is None:
            return None
        values[name] = flag
    return template.format(**values)


# A quantized V cache needs flash attention: llama.cpp refuses it otherwise ("V cache quantization
# requires flash_attn"). Knob names as in vramtui.core.backends.
_KV_QUANT_ADVICE: dict[str, str] = {
    "llama.cpp": "Quantize the KV cache: --cache-type-k q8_0 --cache-type-v q8_0 together with "
    "--flash-attn on (llama.cpp refuses a quantized V cache without flash attention).",
    "llama-cpp-python": "Quantize the KV cache: --type_k 8 --type_v 8 (8 is q8_0) together with "
    "--flash_attn true (llama.cpp refuses a quantized V cache without flash attention).",
    "ollama": "Quantize the KV cache: OLLAMA_KV_CACHE_TYPE=q8_0 together with OLLAMA_FLASH_ATTENTION=1 "
    "(Ollama applies the KV cache type only with flash attention on).",
}
_FLASH_ON: dict[str, str] = {"llama.cpp": " on", "llama-cpp-python": " true", "ollama": "=1"}


def _fitted_context(figures: dict[str, int | float], flash_attn: bool) -> int | None:
    """The context whose growing buffers fit the host budget the log names, from the engine's own figures.

    The failed allocation is the KV cache when no KV buffer was printed (else the compute buffer); both
    grow linearly with the context. Without flash attention llama.cpp's compute buffer holds the attention
    scores, n_ctx x n_ubatch x n_head floats, when it was not printed; unknown, it is taken as large as
    the KV cache. The process's own memory is not in the log: rounding down to a power of two leaves room.
    """
    budget = figures.get("host_budget")
    context = int(figures.get("context") or 0)
    failed = figures.get("oom_requested")
    if not budget or not context or not failed:
        return None
    kv_printed = figures.get("kv_buffer")
    kv_per_token = (kv_printed or failed) / context
    if kv_printed:
        compute_per_token = failed / context
    elif flash_attn:
        compute_per_token = 0.0
    elif figures.get("ubatch_tokens") and figures.get("attention_heads"):
        compute_per_token = figures["ubatch_tokens"] * figures["attention_heads"] * 4
    else:
        compute_per_token = kv_per_token
    fixed = (figures.get("model_buffer") or 0) + (figures.get("output_buffer") or 0)
    room = budget - fixed
    if room <= 0:
        return None
    fits = room / (kv_per_token + compute_per_token)
    power = 512
    while power * 2 <= fits:
        power *= 2
    return power if power < context else None


def _smaller_context(figures: dict[str, int | float], flash_attn: bool) -> str:
    """The " N (now M)" of the context advice: fitted to a host budget the log names, else half."""
    context = int(figures.get("context") or figures.get("kv_cache_cells") or 0)
    if not context:
        return ""
    fitted = _fitted_context(figures, flash_attn)
    if fitted is not None:
        budget = int(figures["host_budget"]) >> 20
        return (
            f" {fitted} (now {context}; an estimate: the buffers that grow with the context fit the "
            f"{budget} MiB budget at about that size; `vramtui wizard` measures it)"
        )
    return f" {max(context // 2, 512)} (now {context})"


def _advice_memory(
    stage: str | None,
    backend: str | None,
    figures: dict[str, int | float],
    quantized: bool = False,
    flash_attn: bool = False,
) -> list[str | None]:
    b = backend
    if stage in ("download", "load_weights"):
        if b in ("llama.cpp", "llama-cpp-python"):
            return [
                _say(
                    "The weights do not fit: put fewer layers on the GPU with {gpu_layers} N (the rest run from host RAM).",
                    b,
                ),
                "Or use a smaller quantization of the same model (e.g. a Q4_K_M GGUF instead of Q8_0: the file is the quantization).",
            ]
        if b == "ollama":
            return [
                "The weights do not fit: lower the GPU layers with the model option num_gpu (API options or a Modelfile).",
                "Or pull a smaller quantization tag of the model (e.g. :q4_K_M).",
            ]
        if b == "transformers":
            place = (
                'Let accelerate place the model: from_pretrained(..., device_map="auto", '
                'max_memory={0: "20GiB", "cpu": "64GiB"}) caps each device and puts the rest in host RAM '
                "(vramtui's transformers runner: --device-map auto --max-memory 0=20GiB,cpu=64GiB)."
            )
            prequantized = (
                "load a pre-quantized checkpoint (AWQ/GPTQ): quantizing at load time still reads the "
                "16-bit weights first."
            )
            if quantized:  # already quantized at load: the next steps are placement and a smaller file
                return [place, f"Or {prequantized}"]
            return [
                "Quantize the weights while loading: from_pretrained(..., quantization_config="
                "BitsAndBytesConfig(load_in_4bit=True)) holds about a quarter of the 16-bit weights "
                "(vramtui's transformers runner: --quantization bnb-4bit).",
                place,
                f"Or {prequantized}",
            ]
        return [
            _say(
                "The weights do not fit: serve a pre-quantized checkpoint (AWQ/GPTQ/FP8) and pass {quant} if it is not detected.",
                b,
            ),
            _say("Keep part of the weights in host RAM: {cpu_offload} N (GiB).", b),
            "Or split the model over several GPUs (tensor parallelism), and make sure no other process holds GPU memory.",
        ]
    if stage == "inference":
        if b in _LLAMA_FAMILY:
            return [
                _say(
                    "A request needed more memory than was left: send shorter prompts or lower {context}.", b
                ),
                _say("Smaller batches: {batch} and {ubatch} (e.g. 256).", b),
                _say("Fewer concurrent sequences: {parallel} 1.", b),
            ]
        return [
            "A request needed more memory than was left: shorter inputs, fewer new tokens.",
            _say("Fewer sequences at once: {parallel}.", b),
            _say("Smaller prefill chunks: {batch}.", b),
            _say("Leave headroom for activations: lower {mem_share} a little (e.g. 0.85).", b),
            "PyTorch fragmentation: set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True."
            if b in _TORCH_FAMILY
            else None,
        ]
    # kv_cache, ready or unknown: the context-sized buffers did not fit.
    if b in _LLAMA_FAMILY:
        return [
            _say(
                f"Lower the context: {{context}}{_smaller_context(figures, flash_attn)} (the KV cache and the "
                "compute buffer grow with it).",
                b,
            ),
            _KV_QUANT_ADVICE.get(b or ""),
            _say(
                "Turn on flash attention: {flash_attn}{on} (a much smaller compute buffer at long context).",
                b,
                on=_FLASH_ON.get(b or "", " on"),
            ),
            _say("A smaller micro-batch shrinks the compute buffer: {ubatch} 256.", b),
            _say("Fewer parallel slots: {parallel} 1 (each slot holds its own cache cells).", b),
            _say("Or keep fewer layers on the GPU: {gpu_layers} N.", b),
        ]
    if b == "transformers":
        return [
            _say(
                "Shorter sequences ({context}) and fewer at once ({parallel}): the dynamic KV cache grows with both.",
                b,
            ),
            "PyTorch fragmentation: set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True.",
        ]
    fit = figures.get("max_model_len_fit")
    return [
        _say(
            f"Lower {{context}} {int(fit)} (the engine says that is what fits)."
            if fit
            else "Lower the context: {context}.",
            b,
        ),
        _say(
            "Fewer concurrent sequences: {parallel}, and a smaller {batch}: the profile run sizes activations by them.",
            b,
        ),
        _say("Store the KV cache in fp8: {kv_dtype} fp8.", b),
        _say(
            "If other processes share the GPU, lower {mem_share}; the engine claims that share of the whole card.",
            b,
        ),
        "--enforce-eager skips CUDA-graph memory." if b == "vllm" else None,
    ]


def _advice_graph_capture(backend: str | None) -> list[str | None]:
    """CUDA graphs are captured after the KV cache is sized: a smaller context or KV dtype frees nothing."""
    if backend == "sglang":
        return [
            "CUDA-graph capture ran out of memory: lower --mem-fraction-static (e.g. 0.8 or 0.7) to leave it room.",
            "Or capture fewer batch sizes: a smaller --cuda-graph-max-bs (e.g. 16); or --disable-cuda-graph.",
        ]
    if backend == "tgi":
        return [
            "CUDA-graph capture ran out of memory: lower --cuda-memory-fraction to leave it room.",
            "Or capture fewer batch sizes (--cuda-graphs 1,2,4) or none (--cuda-graphs 0).",
        ]
    return [
        "CUDA-graph capture ran out of memory: the graphs are allocated after the KV cache, outside the "
        '--gpu-memory-utilization share (vLLM: "CUDA graphs can take additional 1~3 GiB memory per GPU"); '
        "lower --gpu-memory-utilization (e.g. 0.85) to leave them room.",
        "Or skip the graphs: --enforce-eager (slower decoding, no graph memory).",
        "Or capture fewer batch sizes: a smaller --max-num-seqs.",
    ]


def _while(diagnosis: Diagnosis) -> str:
    """Where the host ran out, when a line says so."""
    if diagnosis.stage_inferred or diagnosis.failure_stage is None:
        return ""
    return {
        "download": " while loading",
        "load_weights": " while loading",
        "inference": " serving a request",
    }.get(diagnosis.failure_stage, " while setting up the context")


_HIGH_SHARE = 0.9  # a memory share at or above this leaves nothing to raise
_FREE_OF_TOTAL_RE = re.compile(r"\((\d+(?:\.\d+)?)/(\d+(?:\.\d+)?) GiB\)")
_SUPPORTED_LIST_RE = re.compile(r"must be one of \[([^\]]+)\]", re.IGNORECASE)


def _advice_for(
    diagnosis: Diagnosis, formats: set[str], kernel_note: str | None, kills_elsewhere: str | None = None
) -> list[str | None]:
    b = diagnosis.backend
    failure, cause, stage = diagnosis.failure, diagnosis.cause, diagnosis.failure_stage
    figures = diagnosis.engine_figures
    if failure == "cuda_oom" and cause == "cuda_graph_capture":
        return _advice_graph_capture(b)
    if failure == "cuda_oom" and cause == "gpu_share_short":
        free = _FREE_OF_TOTAL_RE.search(diagnosis.first_error_text or "")
        share = (
            f"{max(int((float(free.group(1)) / float(free.group(2)) - 0.02) * 100), 1) / 100:.2f}"
            if free and float(free.group(2)) > 0
            else "0.80"
        )
        return [
            "Something else holds GPU memory, or the share asked for is more than is free: stop what "
            "holds the GPU (`vramtui check` names the holders), or ask for less.",
            _say(
                f"Ask for no more than the free share: {{mem_share}} {share} (the error says what is free).",
                b,
            ),
        ]
    if failure == "cuda_oom" and cause == "prefill_warmup":
        return [
            _say(
                "The warmup's prefill does not fit: lower {batch} (the tokens of one prefill), and "
                "{context} with it.",
                b,
            )
        ]
    if failure == "cuda_oom":
        return _advice_memory(
            stage, b, figures, quantized="quantized" in formats, flash_attn="flash_attn" in formats
        )
    if failure == "kv_cache_too_small":
        fit = figures.get("max_model_len_fit")
        context = _say(
            f"Lower the context to what fits: {{context}} {int(fit)}."
            if fit
            else "Lower the context: {context}.",
            b,
        )
        kv_dtype = _say("Store the KV cache in fp8: {kv_dtype} fp8 (half the bytes per token).", b)
        offload = _say(
            "Move part of the weights to host RAM: {cpu_offload} N, or use a smaller quantization.", b
        )
        memory_share = figures.get("memory_share")
        if memory_share and memory_share >= _HIGH_SHARE:
            # The engine already takes (nearly) the whole card: the room has to come from the weights.
            taken = _say(f"The engine already takes {memory_share:g} of the card ({{mem_share}}): ", b) or ""
            return [
                taken + "the weights leave too little for the KV cache." if taken else None,
                offload,
                kv_dtype,
                context,
            ]
        return [
            _say(
                "Give the KV cache more room: raise {mem_share} (e.g. 0.95) if nothing else uses the GPU.", b
            ),
            context and "Or " + context[0].lower() + context[1:],
            kv_dtype,
            offload,
        ]
    if failure == "context_too_long":
        return [
            _say(
                "The request is longer than the context: send a shorter input or raise {context} (it costs KV-cache memory).",
                b,
            ),
            "llama-server can drop old tokens instead of failing: --context-shift."
            if b == "llama.cpp"
            else None,
            _say("Raise the input limit too: {input}.", b) if b == "tgi" else None,
        ]
    if failure == "host_oom_killed":
        where = (
            kills_elsewhere
            if kills_elsewhere
            else "The kernel log confirms the OOM killer."
            if kernel_note
            else "This machine's kernel log has no OOM-killer line: if the server ran elsewhere (another host, a "
            "container, a pod) look there; otherwise a supervisor or a timeout may have sent the kill."
            if kernel_note == ""
            else "To confirm, look in the kernel log: `sudo dmesg -T | grep -i -E 'killed process|out of memory'` "
            "or `journalctl -k | grep -i oom`; in Docker `docker inspect -f '{{.State.OOMKilled}}' NAME`; "
            "in Kubernetes `kubectl describe pod` (Reason: OOMKilled)."
        )
        out: list[str | None] = [
            where,
            f"Host RAM ran out{_while(diagnosis)}: close other programs, "
            "add swap, or raise the container's memory limit.",
        ]
        if b == "transformers":
            out.append(
                "Load shard by shard straight to the GPU: device_map='auto' (low_cpu_mem_usage) and safetensors files instead of .bin."
            )
        elif b in _LLAMA_FAMILY:
            out.append("Keep memory-mapping on (do not pass --no-mmap) and pick a smaller quantization.")
        else:
            out.append(_say("Keep less in host RAM: lower {cpu_offload} or use a smaller checkpoint.", b))
        return out
    if failure == "unsupported_quant" and cause == "wrong_format":
        if b in _LLAMA_FAMILY:
            return [
                "The file is not a GGUF: llama.cpp and Ollama read only GGUF. Serve a safetensors/AWQ/GPTQ "
                "checkpoint with vLLM or TGI (or transformers), or download a GGUF build of the model "
                "(or convert the original 16-bit checkpoint with llama.cpp's convert_hf_to_gguf.py)."
            ]
        return [
            "GGUF is llama.cpp's format: serve this file with llama.cpp (llama-server -m FILE) or Ollama; "
            f"for {b or 'this engine'} use the original safetensors checkpoint or its AWQ/GPTQ version."
            + (
                " (vLLM's GGUF support is experimental: a single-file GGUF of a supported architecture, "
                "with --tokenizer pointing at the original model.)"
                if b == "vllm"
                else ""
            )
        ]
    if failure == "unsupported_quant":
        if cause == "torch_checkpoint":
            return [
                "Convert the checkpoint to GGUF (llama.cpp's convert_hf_to_gguf.py on the Hugging Face "
                "folder), or download a GGUF of the model."
            ]
        if cause == "removed_ggml_type":
            return [
                "This build no longer reads the file's tensor type (the line names its replacement): get or "
                "make the model in a current type; upgrading will not help, an older build would."
            ]
        if cause == "old_format":
            return [
                "This build predates the file's format (GGUF): upgrade it (pip install -U llama-cpp-python / a newer llama.cpp), or use a file made for this version."
            ]
        supported = _SUPPORTED_LIST_RE.search(diagnosis.first_error_text or "")
        if supported:  # the engine said what it reads: naming the method it refused would not help
            return [
                f"This build of {b or 'the engine'} reads only {supported.group(1).replace(chr(39), '')}: "
                "use a checkpoint quantized that way, or upgrade it."
            ]
        return [
            f"Upgrade {b or 'the engine'} or pick a quantization it supports.",
            _say("Choose the method explicitly: {quant} (awq, gptq, fp8 ...).", b),
        ]
    if failure == "unknown_arch":
        if b == "transformers":
            return [
                "Upgrade transformers (pip install -U transformers); for a model with its own code, pass trust_remote_code=True."
            ]
        if b == "vllm":
            return ["Upgrade vLLM, or pass --trust-remote-code for a model that ships its own code."]
        if b == "ollama":
            return ["Update Ollama: this model needs a newer runner."]
        return ["Use a newer llama.cpp build (or llama-cpp-python release) that knows this architecture."]
    if failure == "shape_mismatch":
        return [
            "The file does not match the architecture the loader builds: re-convert it with the converter of this engine version, or re-download it.",
            "Check that config.json matches the weights (e.g. num_key_value_heads for grouped-query attention).",
        ]
    if failure == "dtype_unsupported":
        if b in ("vllm", "sglang", "tgi"):
            return ["Use float16 on GPUs before compute capability 8.0: --dtype half (or float16)."]
        return ["Load in float16 on the GPU (torch_dtype=torch.float16), float32 on the CPU."]
    if cause == "tokenizer_files":
        return [
            "The tokenizer could not be built from the model folder: it needs tokenizer.json (or "
            "tokenizer.model with tokenizer_config.json); copy the tokenizer files from the original "
            "repository, or pass the tokenizer's repository/path separately.",
            "Converting a slow (SentencePiece/tiktoken) tokenizer needs its library: pip install sentencepiece "
            "(or tiktoken).",
        ]
    if failure == "file_missing":
        if b == "ollama":
            return ["Check the model name and tag, then `ollama pull NAME:TAG`."]
        return ["Check the path or the repository id and revision (and a token for private repositories)."]
    if failure == "network":
        return [
            "Check the connection, proxy and DNS (containers often need --network host or a DNS server).",
            "Download once where it works (`huggingface-cli download` / `ollama pull`) and run offline (HF_HUB_OFFLINE=1), or set HF_ENDPOINT to a mirror.",
        ]
    if failure == "disk_full":
        return ["Free disk space, or point the model cache at a bigger disk (HF_HOME, OLLAMA_MODELS)."]
    # other: by cause
    if failure != "host_oom" and cause == "host_ram_short":
        # The engine compared the whole model with free RAM: the weights are what does not fit.
        return [
            "The model needs more host RAM than is free: use a smaller quantization or a smaller model "
            + (
                _say("(a shorter {context} saves only the KV cache).", b)
                or "(a shorter context saves only the KV cache)."
            ),
            "Close other programs or raise the container's memory limit.",
        ]
    if failure == "host_oom" or cause in _HOST_ALLOCATION_CAUSES:
        smaller = _smaller_context(figures, "flash_attn" in formats) if figures.get("context") else ""
        lower = _say(f"lower {{context}}{smaller}", b) or "lower the context"
        return [
            f"Host RAM could not hold the buffer: {lower} or use a smaller quantization.",
            "Close other programs or raise the container's memory limit.",
        ]
    if cause == "bad_magic":
        return [
            "The file is not a model (often an HTML page saved instead of the weights): download it again and check its size."
        ]
    if cause in ("truncated_file", "bad_file"):
        return [
            "The model file is incomplete or corrupt: download it again and compare its size or checksum."
        ]
    if cause == "gated_repo":
        return [
            "Accept the model's licence on its hub page and log in (`huggingface-cli login` or HF_TOKEN)."
        ]
    if cause == "download_failed":
        return ["The download failed: check the token for gated models (HF_TOKEN) and the network."]
    if cause == "disk_offload":
        return [
            "The model does not fit GPU and host memory: quantize it (load_in_4bit / a pre-quantized "
            "checkpoint), raise max_memory if it was set low, or accept slow disk offload with "
            'offload_folder="...".'
        ]
    if cause == "bnb_cpu_dispatch":
        return [
            "The quantized model does not fit the GPU: use a smaller model, or allow CPU offload with "
            "llm_int8_enable_fp32_cpu_offload=True and a custom device_map."
        ]
    return [_READ_THE_LINE]


def advise(
    diagnosis: Diagnosis,
    formats: Iterable[str] = (),
    kernel_note: str | None = None,
    kills_elsewhere: str | None = None,
    hint: str | None = None,
) -> list[str]:
    """Ordered advice for a diagnosis, naming the detected backend's own flags.

    `hint`: a line near the first error in which the engine says what to change; it leads the advice
    when the rules have nothing specific for the failure.
    """
    if not diagnosis.failed:
        return []
    formats = set(formats)
    advice: list[str | None] = []
    if diagnosis.inferred and diagnosis.cause == "cut_traceback":
        advice.append(
            "The log stops before the exception line: the class is inferred from where it stopped; the full log would confirm it."
        )
    b = diagnosis.backend
    generic_mismatch = diagnosis.cause != "wrong_format"  # wrong_format's own advice names the backend
    if (
        generic_mismatch
        and "gguf" in formats
        and b in _TORCH_FAMILY
        and diagnosis.failure in ("unsupported_quant", "unknown_arch", "file_missing", "other")
    ):
        advice.append("GGUF files need llama.cpp or Ollama (vLLM and transformers read them only partly).")
    if (
        generic_mismatch
        and formats & {"awq", "gptq"}
        and b in _LLAMA_FAMILY
        and diagnosis.failure in ("unsupported_quant", "other")
    ):
        advice.append("AWQ/GPTQ checkpoints need vLLM or TGI; llama.cpp and Ollama read GGUF.")
    own = _advice_for(diagnosis, formats, kernel_note, kills_elsewhere)
    hint = _engine_hint(diagnosis.first_error_text or "") or hint
    if hint and own == [_READ_THE_LINE]:
        own.insert(0, f"The engine says what to change: {hint}")  # better than our generic line
    advice.extend(own)
    return [line for line in dict.fromkeys(advice) if line]


_READ_THE_LINE = "Read the first error line above; the lines before it say which step was running."
# A sentence in which the engine itself says what to change ("Please try lowering `max_num_seqs`",
# "You need to decrease `--max-batch-prefill-tokens`", "try increasing --mamba-full-memory-ratio").
_HINT_RE = re.compile(
    r"\b(?:please|try|you (?:need|may need|should|must) to|consider|make sure)\b.{0,80}?"
    r"(?:\b(?:lower|decrease|increase|raise|reduce|set|use|install|pass|add|upgrade|disable|enable|specify)"
    r"|--[a-z][\w-]+)",
    re.IGNORECASE,
)


def _engine_hint(text: str) -> str | None:
    """The first sentence of the error line that tells the user what to change, if one does."""
    for sentence in re.split(r"(?<=[.!?])\s+", _strip_prefix(text)):
        if _HINT_RE.search(sentence):
            return _clip(sentence.strip(), 240)
    return None


def summarize(diagnosis: Diagnosis, kernel_note: str | None = None) -> str:
    if not diagnosis.failed:
        reached = diagnosis.stage or "no stage"
        return f"No failure in the log (reached: {reached})."
    words = CAUSE_WORDS.get(diagnosis.cause or "", "") or FAILURE_WORDS.get(diagnosis.failure, "it failed")
    if diagnosis.cause == "cut_traceback" and diagnosis.failure != "other":
        words = (
            f"most likely {FAILURE_WORDS[diagnosis.failure]} (the traceback stops before its exception line)"
        )
    if diagnosis.failure == "host_oom_killed" and kernel_note:
        words = "the kernel's out-of-memory killer ended the process"
    where = f" at {diagnosis.failure_stage}" if diagnosis.failure_stage else ""
    if diagnosis.stage_inferred:
        guess_stage = f"; best guess {diagnosis.failure_stage}" if diagnosis.failure_stage else ""
        where = f" (stage unknown: no line says which step was running{guess_stage})"
    line = f" (line {diagnosis.first_error_line})" if diagnosis.first_error_line else ""
    guess = " [inferred]" if diagnosis.inferred else ""
    return f"Failed{where}: {words}{line}{guess}."
