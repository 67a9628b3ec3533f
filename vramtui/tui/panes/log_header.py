"""The log pane's pinned header: stage strip, verdict, first error, advice and quiet failures.

It holds a few rows (HEADER_ROWS): what does not fit is left out whole, never cut mid-sentence. The
strip and the verdict come first, then the first piece of advice (one that names a flag and its value
before one that does not), then the first error's text (cut at a word, the view shows the line),
then the second piece of advice, the quiet failures, llama.cpp fit's projection (one line of figures)
and the rest of the advice while rows remain.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from rich.text import Text
from textual.content import Content

from vramtui.core.logs.advice import START_UP_WORDS, before_the_model
from vramtui.core.logs.analysis import clip_words, strip_log_prefix
from vramtui.core.logs.stages import STAGES
from vramtui.tui.palette import theme_style
from vramtui.tui.themes import stage_variable
from vramtui.tui.widgets.tail import Progress
from vramtui.tui.words import cause_words, failure_words, stage_words

# The header's rows at most (its CSS max-height less its bottom border).
HEADER_ROWS = 8
MAX_ADVICE = 4
MAX_WARNINGS = 2
ERROR_CHARS = 300  # the first error's text, at most (the view shows the whole line)
GLIMPSE_WORDS = 6  # the error's words kept before the first piece of advice takes the rows

# A flag with its value (`--ctx-size 16384`, `--flash-attn on`, `-c 4096`) or a setting (`NAME=value`):
# the advice a user can act on as it stands.
_FLAG_AND_VALUE = re.compile(
    r"(?:^|[\s(`])--?[A-Za-z][\w-]*(?:=|\s+(?:\(e\.g\.\s+)?)"
    r"(?:[\w.:/-]*\d[\w.:/-]*|on|off|true|false|auto|all|none)\b"
    r"|\b[A-Z][A-Z0-9_]{2,}=\S"
)


# The line a failed launch's advice starts with when the wizard has a move (tui.session sizes it).
FIRST_MOVE = "First move (the wizard's, n): "


def with_values_first(advice: list[str]) -> list[str]:
    """The advice that names a flag and its value first; otherwise in the diagnosis' own order."""
    return sorted(advice, key=lambda line: _FLAG_AND_VALUE.search(line) is None)


def _strip(app: Any, text: Text, reached: str | None, failing: str | None, at_start: bool = False) -> None:
    """The stages, each passed (✔), failed (✖) or not reached (·); `at_start`: it failed before any stage
    (a flag refused, a port held, no file at the path), marked on a start-up step of its own (QA 32 D5)."""
    reached_index = STAGES.index(reached) if reached and not at_start else -1
    if at_start:
        text.append("✖ start-up", style=theme_style(app, "log-error", "log-error-background", bold=True))
        text.append(" › ", style=theme_style(app, "log-gutter"))
    for index, stage in enumerate(STAGES):
        if index:
            text.append(" › ", style=theme_style(app, "log-gutter"))
        label = stage_words(stage)
        if stage == failing:
            text.append(f"✖ {label}", style=theme_style(app, "log-error", "log-error-background", bold=True))
        elif index <= reached_index:
            text.append(f"✔ {label}", style=theme_style(app, stage_variable(stage), bold=True))
        else:
            text.append(f"· {label}", style=theme_style(app, "log-gutter"))
    text.append("\n")


def _verdict(
    app: Any, diagnosis: Any, line_count: int, first_error_line: int | None, settled: bool = False
) -> tuple[Text, str]:
    """The strip and the verdict line, and the first error's text that ends it ("" for none). `settled`:
    the log is read to its end (a file read, a stream that ended), so what it lacks is missing."""
    text = Text(no_wrap=False, overflow="fold")
    reached = diagnosis.stage if diagnosis.stage in STAGES else None
    failing = diagnosis.failure_stage if diagnosis.failed else None
    # a port held or a flag refused stops the run before any stage: no stage is marked failed (QA 15) or
    # passed (QA 32 D5)
    at_start = diagnosis.failed and before_the_model(diagnosis)
    _strip(app, text, reached, None if at_start else failing, at_start)
    backend = getattr(diagnosis, "backend", None) or "unknown backend"
    error = ""
    if diagnosis.failed:
        text.append("FAILED", style=theme_style(app, "verdict-fails", bold=True, reverse=True))
        cause = getattr(diagnosis, "cause", None)
        said = cause_words(cause) if cause and cause != diagnosis.failure else None
        detail = f", {said}" if said else ""
        where = f" at {stage_words(failing)}" if failing else ""
        if before_the_model(diagnosis):
            where = f" at {START_UP_WORDS}"
        elif failing and getattr(diagnosis, "stage_inferred", False):
            where += " (a guess: no line says where)"  # as the CLI's "best guess"
        text.append(f"{where}: {failure_words(diagnosis.failure)} ({backend}{detail})")
        if diagnosis.first_error_line:
            text.append(f" — first error, line {first_error_line or diagnosis.first_error_line} (key e): ")
            # what it says, without its time stamps and level letters (QA 5: at 80 columns the header
            # showed a run log's time stamp and then "…")
            error = strip_log_prefix(diagnosis.first_error_text or "")[:ERROR_CHARS]
        elif diagnosis.first_error_text:
            text.append(" — no line of the log states it: ")
            error = clip_words(diagnosis.first_error_text, ERROR_CHARS)
    elif getattr(diagnosis, "incomplete", False) and settled:
        text.append("NOT READY", style=theme_style(app, "log-warning", bold=True, reverse=True))
        why = (
            "stopped on purpose (a signal, ctrl-c) before it was ready"
            if getattr(diagnosis, "stopped", False)
            else "still loading, or stopped without a message"
        )
        text.append(
            f" no error, reached {stage_words(reached) if reached else 'no stage yet'} ({backend}), "
            f"{line_count:,} lines: {why}"
        )
    elif settled and (line_count == 0 or getattr(diagnosis, "unrecognised", False)):
        # as `vramtui diagnose` refuses them: not "no failure" (nothing here says a server came up)
        text.append("NOT A SERVER LOG", style=theme_style(app, "log-warning", bold=True, reverse=True))
        from vramtui.core.logs.verdict import UNRECOGNISED_WORDS

        text.append(" the log is empty: nothing to diagnose" if line_count == 0 else f" {UNRECOGNISED_WORDS}")
    elif not settled and reached not in ("ready", "inference"):
        # a launch still coming up: no verdict yet (QA 7: "NO FAILURE reached no stage yet" while it started)
        text.append("STARTING", style=theme_style(app, "accent", bold=True, reverse=True))
        text.append(
            f" no error so far, {stage_words(reached) if reached else 'no stage reached yet'} ({backend}), "
            f"{line_count:,} lines"
        )
    else:
        text.append("NO FAILURE", style=theme_style(app, "verdict-fits", bold=True, reverse=True))
        text.append(
            f" reached {stage_words(reached) if reached else 'no stage yet'} ({backend}), {line_count:,} lines"
        )
    return text, error


def _notes(app: Any, diagnosis: Any, sized: list[str]) -> tuple[list[Text], int]:
    """Advice (flag and value first), quiet failures and fit's projection: one block each, in the order
    they are shown while rows remain; and how many lines the caps left out."""
    blocks = []
    marks = (("→ ", "accent"), ("⚠ ", "log-warning"), ("≈ ", "accent"))
    # a failed launch's advice as `vramtui check` says it: the wizard's first move, then the other ways,
    # each with the arithmetic's word (the session's AdviceSized); else the diagnosis' own
    advice = with_values_first(sized or [str(line) for line in getattr(diagnosis, "advice", None) or []])
    advice.sort(key=lambda line: not line.startswith(FIRST_MOVE))  # the wizard's move leads
    warnings = [str(line) for line in getattr(diagnosis, "warnings", None) or []]
    backend = getattr(diagnosis, "backend", None) or "unknown backend"
    fit = _fit_summary(getattr(diagnosis, "engine_figures", None) or {}, backend)
    capped = max(0, len(advice) - MAX_ADVICE) + max(0, len(warnings) - MAX_WARNINGS)
    advice = advice[:MAX_ADVICE]
    # The first two advice lines, the quiet failures and fit's one line of figures before the advice
    # that comes third (the rows left decide how much is shown, in this order).
    groups = ((marks[0], advice[:2]), (marks[1], warnings[:MAX_WARNINGS]))
    groups += ((marks[2], [fit] if fit else []), (marks[0], advice[2:]))
    for (mark, colour), lines in groups:
        for line in lines:
            block = Text("\n")
            block.append(mark, style=theme_style(app, colour, bold=True))
            block.append(line)
            blocks.append(block)
    return blocks, capped


def header_text(
    pane: Any,
    diagnosis: Any,
    source: str,
    line_count: int,
    *,
    width: int = 0,
    rows: int = HEADER_ROWS,
    first_error_line: int | None = None,
    progress: Progress | None = None,
    sized_advice: list[str] | None = None,
    settled: bool = False,
) -> Text:
    """The header in `rows` rows of `width` cells (0: not laid out yet, everything in).

    `first_error_line`: the first error's number as the view's gutter shows it (default: the
    diagnosis' own numbering). `progress`: a file still being read, so no verdict yet. `sized_advice`:
    the advice as the wizard's arithmetic sized it (a failed launch), shown in place of the bare lines."""
    app = pane.app
    text = Text(no_wrap=False, overflow="fold")
    if progress is not None:
        text.append(f"READING {progress.percent}%", style=theme_style(app, "accent", bold=True, reverse=True))
        text.append(
            f" of {source or 'the log'}: {line_count:,} lines so far; the verdict comes once the whole"
            " file is read"
        )
        return text
    if diagnosis is None:
        text.append(
            source or "no log yet: start a model (vramtui run PROFILE) or open one (vramtui --log FILE)"
        )
        return text
    head, error = _verdict(app, diagnosis, line_count, first_error_line, settled)
    blocks, capped = _notes(app, diagnosis, sized_advice or [])
    return _fitted(app, head, error, blocks, width, rows, capped)


def _more(app: Any, count: int) -> Text:
    block = Text("\n")
    block.append(
        f"… {count} more not shown here: `vramtui diagnose` lists them all", style=theme_style(app, "accent")
    )
    return block


def _fitted(
    app: Any, head: Text, error: str, blocks: list[Text], width: int, rows: int, capped: int = 0
) -> Text:
    """The head, then the first block, the error text and the other blocks while they fit whole; a last
    line says how many were left out (never silently: QA found advice missing with no sign of it)."""
    style = theme_style(app, "log-error")

    def height(text: Text) -> int:
        return len(Content.from_rich_text(text, console=app.console).wrap(width))

    def joined(error_text: str, chosen: list[Text]) -> Text:
        text = head.copy()
        if error_text:
            text.append(error_text, style=style)
        for block in chosen:
            text.append_text(block)
        return text

    if width <= 0 or height(joined(error, blocks)) <= rows - (1 if capped else 0):
        return joined(error, [*blocks, _more(app, capped)] if capped else blocks)
    room = rows - 1  # a row for the line that says what was left out
    # The first advice comes before the error's text, but not at the cost of all of it: the verdict's
    # "first error, line N (key e):" must not end in nothing (QA 17 F19, at 160 columns with the keys open)
    glimpse = _glimpse(error)
    chosen = [block for block in blocks[:1] if height(joined(glimpse, [block])) <= room]
    if blocks and not chosen:
        # the first advice is the move that matters: cut to the room, never skipped for a later "Or ..."
        # that happens to be shorter (QA 24 F3, at 80x24)
        cut = _clipped(blocks[0], lambda part: height(joined(glimpse, [part])) <= room)
        chosen = [cut] if cut is not None else []
    shown = _longest_error(error, lambda cut: height(joined(cut, chosen)) <= room)
    for block in blocks[1 if chosen else 0 :]:
        if height(joined(shown, [*chosen, block])) <= room:
            chosen.append(block)
    left = len(blocks) - len(chosen) + capped
    return joined(shown, [*chosen, _more(app, left)] if left else chosen)


def _clipped(block: Text, fits: Any) -> Text | None:
    """The most words of `block` (then " …") for which `fits(text)` holds; None when not even its first
    few do."""
    spaces = [index for index, char in enumerate(block.plain) if char == " "]
    low, high = 0, len(spaces)  # cut at spaces[i]: low fits (or none does), high does not
    best: Text | None = None
    while low < high:
        mid = (low + high + 1) // 2
        part = block[: spaces[mid - 1]]
        part.append(" …")
        if fits(part):
            best, low = part, mid
        else:
            high = mid - 1
    return best if low >= GLIMPSE_WORDS else None


def _glimpse(error: str) -> str:
    """The error's first words, the least of it the header shows."""
    words = error.split(" ")
    return error if len(words) <= GLIMPSE_WORDS else " ".join(words[:GLIMPSE_WORDS]) + " …"


def _longest_error(error: str, fits: Any) -> str:
    """The most words of the error text (then " …") for which `fits(text)` holds."""
    if fits(error):
        return error
    words = error.split(" ")
    low, high = 0, len(words)  # fits with `low` words; not with `high`
    while high - low > 1:
        middle = (low + high) // 2
        if fits(" ".join(words[:middle]) + " …"):
            low = middle
        else:
            high = middle
    return " ".join(words[:low]) + " …" if low else ""


_FIT_KEYS = ("fit_", "model_", "context", "ubatch", "layers_", "device_free", "flash_attn")  # compare_fit's


@functools.lru_cache(maxsize=32)
def _fit_for(figures: tuple[tuple[str, float], ...], backend: str) -> str:
    from vramtui.core.wizard.fitcompare import compare_fit

    comparison = compare_fit(dict(figures), backend if backend != "unknown backend" else None)
    return comparison.summary() if comparison is not None else ""


def _fit_summary(figures: dict[str, Any], backend: str) -> str:
    """llama.cpp's fit projection beside vramtui's estimate, one line; the estimate is made once per
    set of figures (the header repaints as lines arrive)."""
    if not any(key.startswith("fit_projected") for key in figures):
        return ""
    key = tuple(sorted((k, v) for k, v in figures.items() if k.startswith(_FIT_KEYS)))
    return _fit_for(key, backend)
