"""One line -> its analysis: what the rule tables say about it, as a pure function of its text.

The prefilter files every rule under one word of its anchor; a line's words are found with one regex
scan and only the rules filed under them are tried. The echoed text of a logged request is cut first
(ECHO_CUTS), and the figures the engine printed are read with their values.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from vramtui.core.logs import rules as ls
from vramtui.core.logs.rules import STAGE_INDEX, STAGES, ErrorRule, NoticeRule
from vramtui.core.logs.ruletypes import NOT_AN_ERROR

_CARETS_RE = re.compile(r"\s*[\^~]+[\s\^~]*")
# Python's note for a recursion it folded in a traceback: a frame, never what failed
_REPEATED_RE = re.compile(r"\s*\[previous line repeated \d+ more times?\]\s*")
_FRAME_RE = re.compile(r'File "([^"]+)", line \d+, in (\S+)')
# IPython's (Jupyter's, Colab's) frame: "/usr/lib/.../configuration_auto.py in from_pretrained(cls, ...)", the
# path a Markdown link in Colab's copy ("[/usr/.../x.py](https://localhost:8080/#) in f(...)")
_IPYTHON_FRAME_RE = re.compile(r"^\[?(/\S+\.py)\]?(?:\([^)\s]*\))? in (\w+)\(")
# What a log collector puts before the engine's line: docker compose's "name  | ", journald's, a Kubernetes
# node's stream after its time stamp (CRI). A bare time stamp is no collector's: TGI's own lines begin with one.
_COMPOSE = r"[\w.\[\]-]+\s+\|\s?"
_JOURNALD = r"[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \S+ [\w.-]+(?:\[\d+\])?: "
_CRI_STREAM = r"(?:stdout|stderr) [FP] "
_PREFIX_RES = (
    re.compile(r"^\s*\d+\.\d+\.\d+\.\d+ [IWEDT] "),  # llama.cpp's timestamped log
    re.compile("^" + _COMPOSE),
    re.compile(r"^\([\w-]+(?: pid=\d+)?[^)]*\)\s?"),  # "(EngineCore_DP0 pid=1)" / Ray actors
    re.compile(r"^\[rank\d+\]:\s?"),
    # FastChat/LLaVA workers, after the date: "| ERROR | stderr | "
    re.compile(r"^\|\s*(?:INFO|WARNING|ERROR|DEBUG|CRITICAL)\s*\|\s*[\w.]+\s*\|\s?"),
    re.compile(
        r"^(?:INFO|WARNING|ERROR|DEBUG|CRITICAL|WARN)\s+\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?\s+(?:\[[^\]]+\]|[\w.]+:\d+\])\s?"
    ),
    re.compile(r"^\d{4}-\d\d-\d\d[T ][\d:.,]+Z?\s*(?:>\s?)?"),
    re.compile("^" + _CRI_STREAM),
    re.compile(r"^\[\d{4}-\d\d-\d\d [\d:]+(?: [\w]+)?\]\s?"),
    re.compile("^" + _JOURNALD),
)
# a private class may lead with underscores: numpy's "numpy._core._exceptions._ArrayMemoryError: ..." (QA 26 D2)
_EXCEPTION_RE = re.compile(
    r"^(?:[A-Za-z_]\w*\.)*(?P<name>_*[A-Z]\w*(?:Error|Exception|Interrupt)|Exception)(?::\s|:?$)"
)
# pydantic's message under "ValidationError: 1 validation error for ModelConfig" (vLLM's config checks):
# the line that says what is wrong.
_PYDANTIC_RE = re.compile(r"^(?P<name>Value|Assertion|Type) error, ")
# "warn" quoted is a setting's value (vLLM's config dump: jit_monitor_mode='warn'), not a log level (QA 14)
_WARNING_LEVEL_RE = re.compile(r"(?<!['\"])\bwarn(?:ing)?\b(?!['\"])|^\s*\d+\.\d+\.\d+\.\d+ w |level=warn")
_CHAINED = ("during handling of the above exception", "the above exception was the direct cause")
_FORMAT_WORDS = ((".gguf", "gguf"), ("awq", "awq"), ("gptq", "gptq"), (".safetensors", "safetensors"))


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
    recovery: tuple[NoticeRule, ...] = ()  # the recoveries the line says
    figures: tuple[tuple[str, str | None, int | float, bool], ...] = ()
    backends: tuple[str, ...] = ()
    quant_words: bool = False
    formats: tuple[str, ...] = ()
    simple: bool = False  # a stage marker, backend marks and/or progress, nothing else
    extras: bool = False  # figures, notices, quantization words or file formats
    # Milestones the line proves (ruletypes.MILESTONES), "restart" (a new load) or "stop" (a stop on purpose)
    progress: tuple[str, ...] = ()
    frame_rules: tuple[ls.FrameRule, ...] = ()  # a frame's: what a bare exception closing it means


def strip_log_prefix(text: str) -> str:
    """A line without its timestamps, level letters and process tags (what it says, for a sentence)."""
    return _strip_prefix(text).strip()


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
_PROGRESS_INDEX: dict[str, list] = {}
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
for _progress in ls.PROGRESS_RULES:
    _file(_PROGRESS_INDEX, _progress.anchor, _progress)
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
    | set(_PROGRESS_INDEX)
    | _OTHER_WORDS
)
_SUBSTRINGS: tuple[str, ...] = (*ls.SUBSTRING_ANCHORS, "quant")
# word -> (stage rules, (position, error rule)s, notices, recoveries, figures, backend marks, progress)
_TABLES = (
    _STAGE_INDEX,
    _ERROR_INDEX,
    _NOTICE_INDEX,
    _RECOVERY_INDEX,
    _FIGURE_INDEX,
    _MARK_INDEX,
    _PROGRESS_INDEX,
)
_INDEX: dict[str, tuple[tuple, ...]] = {
    key: tuple(tuple(table.get(key, ())) for table in _TABLES) for table_ in _TABLES for key in table_
}


def _position(item: tuple[int, ErrorRule]) -> int:
    return item[0]


def _marks(filed: list[tuple[tuple, ...]], low: str) -> tuple[str, ...]:
    """The engines whose marks the line carries (a guarded mark only where its guard finds it)."""
    return tuple(dict.fromkeys(name for entry in filed for anchor, name in entry[5] if _marked(anchor, low)))


def _marked(anchor: str, low: str) -> bool:
    if anchor not in low:
        return False
    guard = ls.MARK_GUARDS.get(anchor)
    return guard is None or guard.search(low) is not None


def _matches(rule: object, low: str) -> bool:
    regex = rule.regex  # type: ignore[attr-defined]
    if rule.anchor not in low:  # type: ignore[attr-defined]
        return False
    if regex is None or regex.search(low) is not None:
        return True
    # a rule written for the engine's line start holds behind a log collector's prefix (docker compose's
    # "name  | ", journald's, a Kubernetes node's)
    if not regex.pattern.startswith("^"):
        return False
    line = _engine_line(low)
    return line != low and regex.search(line) is not None


_COLLECTOR_RE = re.compile(
    rf"^(?:{_COMPOSE}|{_JOURNALD}|\d{{4}}-\d\d-\d\d[T ][\d:.,]+Z?\s+{_CRI_STREAM})+", re.IGNORECASE
)


def _engine_line(low: str) -> str:
    """The lower-case line without the prefixes a log collector adds."""
    return _COLLECTOR_RE.sub("", low, count=1) if low[:1].isalnum() else low


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
        value: int | float = figure.constant if figure.constant is not None else _number(groups["value"])
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


def _stage_of(filed: list[tuple[tuple, ...]], low: str) -> str | None:
    """The furthest stage among the stage rules the line matches."""
    best = -1
    for entry in filed:
        for rule in entry[0]:
            if _matches(rule, low):
                index = STAGE_INDEX[rule.stage]
                if index > best:
                    best = index
    return STAGES[best] if best >= 0 else None


# A hint that mentions running out of memory is advice, not the error: vLLM's "If you are running out of
# memory, consider decreasing `gpu_memory_utilization`" at every start, llama.cpp's "try reducing
# --n-gpu-layers if you're running out of VRAM" after any load failure.
_MEMORY_HINT_RE = re.compile(
    r"\bif (?:you(?:'re| are) running out of (?:memory|vram)|out-of-memory (?:error )?occurs)"
)
_MEMORY_FAILURES = frozenset({"cuda_oom", "host_oom", "host_oom_killed"})


def _error_of(filed: list[tuple[tuple, ...]], low: str, warning_level: bool) -> ErrorRule | None:
    """The first error rule (in table order) the line matches; a generic one not on a warning line."""
    candidates = [item for entry in filed for item in entry[1]]
    if len(candidates) > 1:
        candidates.sort(key=_position)
    hint = "out of" in low and _MEMORY_HINT_RE.search(low) is not None
    for _, rule in candidates:
        if _matches(rule, low):
            if not rule.strong and warning_level:
                continue
            if hint and rule.failure in _MEMORY_FAILURES:
                continue  # the hint's memory words; a rule that names the line's own failure may follow
            return rule
    return None


def _frame_or_exception(
    text: str, low: str, words: set[str]
) -> tuple[re.Match[str] | None, re.Match[str] | None]:
    """A traceback's frame line (Python's, IPython's), else the line that states an exception."""
    frame = _FRAME_RE.search(text) if "file" in words and 'file "' in low else None
    if frame is None and ".py" in low and " in " in low:
        frame = _IPYTHON_FRAME_RE.match(_strip_prefix(text).strip())
    if frame is not None or not ("error" in low or "exception" in low or "interrupt" in low):
        return frame, None
    stripped = _strip_prefix(text).strip()
    return None, _EXCEPTION_RE.match(stripped) or _PYDANTIC_RE.match(stripped)


# Python's own warning format ("<frozen runpy>:128: RuntimeWarning: ..."): a warning, whatever the level
# the logger that relays it gives it.
_PY_WARNING_RE = re.compile(r"^\S[^:]*:\d+: [A-Z]\w*Warning: ")


def _says_nothing(message: str) -> bool:
    return not message or bool(_PY_WARNING_RE.match(message))


def _no_failure(notice: ls.NoticeRule) -> bool:
    """A notice whose line, at ERROR level, says no failure: a slower kernel, an engine's own context."""
    return notice.kind == "kernel_fallback" or (notice.kind == "mark" and notice.message == NOT_AN_ERROR)


def _analyze_detail(text: str) -> tuple[_LineInfo | None, tuple[ls.FigureRule, ...]]:
    """The line's analysis, and the figure rules that matched it (their values are in the info)."""
    text, low = _without_echo(text, text.lower())
    words = _KEYS.intersection(_TOKEN_RE.findall(low))
    substrings = [f"\0{anchor}" for anchor in _SUBSTRINGS if anchor in low]
    if not words and not substrings:
        return None, ()
    # One look-up per word, sorted: the same order in every process.
    filed = [_INDEX[key] for key in (*sorted(words), *substrings) if key in _INDEX]

    stage = _stage_of(filed, low)

    if "^" in low and _CARETS_RE.fullmatch(_strip_prefix(text)):
        return _PLAIN, ()  # Python's markers under a traceback's code line, behind an "ERROR" prefix
    if "repeated" in low and _REPEATED_RE.fullmatch(_strip_prefix(text).lower()):
        return _PLAIN, ()
    frame_match, exception_match = _frame_or_exception(text, low, words)
    warning_level = bool(words & _WARNING_WORDS) and bool(_WARNING_LEVEL_RE.search(low))

    # the error rules read the engine's own line (a collector's prefix, a host "gpu-box", says nothing)
    error = _error_of(filed, _engine_line(low), warning_level) if frame_match is None else None

    if error is not None and error.cause == "error" and _says_nothing(_strip_prefix(text).strip()):
        error = None  # an ERROR level over no message, or over a Python warning (a subprocess's stderr)
    notices = tuple(rule for entry in filed for rule in entry[2] if _matches(rule, low))
    if error is not None and not error.strong and any(_no_failure(n) for n in notices):
        error = None  # a slower kernel chosen, logged at ERROR level (vLLM's fa_utils): the run goes on
    recovery = tuple(rule for entry in filed for rule in entry[3] if _matches(rule, low))
    figures, figure_rules = _extract_figures(
        text,
        (
            figure
            for entry in filed
            for figure in entry[4]
            if figure.anchor in low and figure.regex is not None
        ),
    )
    backends = _marks(filed, low)
    progress = tuple(
        dict.fromkeys(rule.milestone for entry in filed for rule in entry[6] if _matches(rule, low))
    )
    frame = frame_match is not None
    frame_rules = tuple(rule for rule in ls.FRAME_RULES if rule.anchor in low) if frame else ()
    memory_heavy = (frame or "(" in low) and any(word in low for word in ls.MEMORY_HEAVY_FRAME_WORDS)
    exception = exception_match.group("name") if exception_match else None
    if exception in ("Value", "Assertion", "Type"):
        exception += "Error"  # pydantic's "Value error, ..."
    header = "traceback" in words and "traceback (most recent call last)" in low
    chained = bool(words & _CHAIN_WORDS) and any(marker in low for marker in _CHAINED)
    warning_level = warning_level and error is None and exception is None
    quant_words = bool(substrings or words & _QUANT_WORDS) and any(w in low for w in ls.QUANT_CONFIRM_ANCHORS)
    formats = tuple(name for word, name in _FORMAT_WORDS if word in low) if words & _FORMAT_KEYS else ()
    extras = bool(figures or notices or quant_words or formats)
    bare = not any((error, frame, memory_heavy, exception, header, chained, warning_level, recovery, extras))
    if bare and stage is None and not backends and not progress:
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
        progress=progress,
        frame_rules=frame_rules,
    )
    return info, tuple(figure_rules)


_WARNING_WORDS = frozenset({"warn", "warning", "w"})
_QUANT_WORDS = frozenset(_key_of(word) for word in ls.QUANT_CONFIRM_ANCHORS)
_FORMAT_KEYS = frozenset({"gguf", "awq", "gptq", "safetensors"})
_PLAIN = _LineInfo()
_CHAIN_WORDS = frozenset({"handling", "above"})

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


def _clip(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def clip_words(text: str, limit: int) -> str:
    """`text` in at most `limit` characters, cut between words and marked "…" (QA: a line cut at 200
    characters read "you tried to allocate 22682" where the log said 22682927104 bytes)."""
    text = text.strip()
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit // 2 else cut).rstrip() + "…"
