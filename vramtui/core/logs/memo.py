"""The digit-mask memo: lines that differ only in their digits share one analysis.

Real logs make every line unique with timestamps and counters, but the rules rarely care which digits
a line holds, and where they do (derived from the rule tables) the real line decides. Masks that
differ only in how wide their numbers are share one analysis where no rule reads a width (see
_width_key). This memo is what makes the pure-Python diagnosis fast; memory stays bounded whatever
the log (see _remember).
"""

from __future__ import annotations

import re
import re._compiler as _sre_compiler  # type: ignore[import-not-found]  # see _masked_regex
import re._constants as _sre  # type: ignore[import-not-found]
import re._parser as _sre_parser  # type: ignore[import-not-found]
from dataclasses import dataclass, fields, replace
from typing import Any

from vramtui.core.logs import rules as ls
from vramtui.core.logs.analysis import (
    _CHAIN_WORDS,
    _CHAINED,
    _FORMAT_KEYS,
    _FORMAT_WORDS,
    _INDEX,
    _KEYS,
    _OTHER_WORDS,
    _QUANT_WORDS,
    _SUBSTRINGS,
    _TOKEN_RE,
    _WARNING_WORDS,
    _analyze,
    _analyze_detail,
    _extract_figures,
    _key_of,
    _LineInfo,
    _strip_prefix,
)

# The memos that let lines share an analysis hold at most this many entries (then start over), and
# never a line longer than _MEMO_LINE_BYTES: such lines (a prompt echoed in a request line, a config
# dump) are rarely met twice, and memory stays bounded whatever the log (see _remember).
_MEMO_LIMIT = 65536
_MEMO_LINE_BYTES = 1024


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
        (ls.PROGRESS_RULES, False),
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
    key = _shared_key(masked_text, text)
    known = _COLLAPSED.get(key)
    if known is not None:
        return known
    checks = _checks_of(masked_low, masked_text)
    info, figure_rules = _analyze_detail(text)
    if info is not None and info.exception is not None and _DIGIT_RE.search(info.exception):
        return _EACH_LINE
    if not checks and not figure_rules:
        entry = _NO_INFO if info is None else _intern(info)
        if _run_blind(text) and not _may_hold_a_check(collapsed):
            _remember(_COLLAPSED, key, entry)
        return entry
    if not figure_rules and _DIGIT_RULES_WIDTH_BLIND and _run_blind(text):
        # Shared across widths too: the outcome of every check any width may hold tells the lines apart
        # where their digits matter (a request line's "/v1/" or an exit code); the rest of the analysis
        # is width-blind as above.
        shared = _ByDigits(_checks_at_any_width(collapsed))
        _remember(_COLLAPSED, key, shared)
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


def _shared_key(masked_text: str, text: str) -> str:
    """The width key, with the log prefix that was cut kept apart: the prefixes' regexes read widths
    (a date's four-digit year), so "2026-12-05T... ^^^" loses its date where "26-12-5T... ^^^" keeps it
    as text, and the two must not share an analysis."""
    cut = len(text) - len(_strip_prefix(text))
    if cut <= 0 or len(masked_text) != len(text):
        return f"{min(cut, 1)}\x01{_width_key(masked_text)}"  # no cut, or a cut apart from the rest
    return f"{_width_key(masked_text[:cut])}\x01{_width_key(masked_text[cut:])}"


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
        for table in (entry[0], entry[2], entry[3], entry[4], entry[6]):
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
