"""The streaming state machine of the diagnosis: stages, tracebacks, the first error, the findings.

Each line's analysis (vramtui.core.logs.analysis) steps it; what it holds at the end is what the
verdict reads.
"""

from __future__ import annotations

import copy
import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass

from vramtui.core.logs import ownlines
from vramtui.core.logs.analysis import _clip, _engine_hint, _LineInfo
from vramtui.core.logs.rules import STAGE_INDEX, ErrorRule
from vramtui.core.logs.ruletypes import (
    CACHE_PART_MARK,
    CACHE_PART_SUMS,
    DRAFT_MARK,
    DRAFT_PREFIX,
    OPTIONAL_WARMUP,
    FrameRule,
    NoticeRule,
)

MAX_EVIDENCE = 10
MAX_QUOTE = 400


# Where an error with no stage context happened, by class. An excerpt with no startup lines at all is
# from a running server, so a bare out-of-memory there is a request's.
_DEFAULT_STAGE: dict[str, str] = {
    "cuda_oom": "inference",
    "host_oom_killed": "load_weights",
    "host_oom": "load_weights",
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


@dataclass
class _Found:
    number: int
    text: str
    rule: ErrorRule | None
    stage: str
    defaulted: bool = False  # no line said where: the stage is the class's default
    framed: bool = False  # its own traceback's frames said where (a load's Module.to, a profile run)
    # the line its report began on (its traceback's header), where that was before it: a stop written
    # while a traceback was still being printed came after the failure, not before it (QA 21 F4)
    began: int | None = None


# An error line that says it happened while loading ("Failed to load model - not enough GPU memory",
# Ollama's "error loading llama server"): its stage when no line before it says one.
_SAYS_LOADING_RE = re.compile(
    r"error loading|failed to load|while loading|loading (?:the )?model|failed to initiali[sz]e|error starting",
    re.IGNORECASE,
)
_RECOVERIES_QUOTED = 3
_STARTUP_STAGES = frozenset({"download", "load_weights", "kv_cache"})
_HINT_WITHIN_LINES = 60  # how far after the first error an exception's hint still belongs to it
_BURST_LINES = 3  # error lines this close after the first error are its own report (_pin_burst_stage)
_ADOPT_WITHIN_LINES = 80  # how far after a stage-less first error its stage may still be told (_adopt_stage)
_SCORE_CAP = 3  # backend marks counted up to here: enough for detect_backend, and repeats cost nothing
_EXCEPTION_RULE = ErrorRule("", "exception", "other", strong=False)
# A frame of an installed package's module body: the traceback is an import (`import torch`) failing.
# IPython's (Jupyter's, Colab's) traceback shows each frame's source with its line numbers ("   1268     raise
# ValueError(", "-> 1267"): quoted code, however much it reads like a message.
_NUMBERED_CODE_RE = re.compile(r"\s*(?:-+>\s*)?\d{1,6}\s{2,}\S")
# a module's top level run on import; not a package's __main__.py, which `python -m` runs as the program
# (QA 26 D2: llama-cpp-python's server failing at its KV cache read as "too small to even import")
_IMPORT_FRAME_RE = re.compile(
    r"[/\\](?:site|dist)-packages[/\\](?:(?!__main__\.py\").)*\", line \d+, in <module>"
)
# Python's multiprocessing starting a child (spawn pickles what the child needs): an engine starting its
# own processes, before they load anything
_SPAWN_FRAME_RE = re.compile(r"[/\\]multiprocessing[/\\](?:popen_spawn_\w+|popen_forkserver|reduction)\.py\"")


# A line that only wraps another error ("EngineCore failed to start", "See root cause above",
# pydantic's "1 validation error for ModelConfig", vLLM's "Error in inspecting model architecture" over a
# subprocess's exit status): it says that something failed, not what.
_WRAPPER_RE = re.compile(
    r"see (?:the )?(?:root cause|stack trace)|failed to start\b|hit an exception|validation errors? for "
    r"|encountered an issue|initialization failed|exception in worker|error executing method|error in inspecting"
    r"|exception in asgi application"  # uvicorn's, over a request handler's traceback (QA 27 N2)
    r"|traceback \(most recent(?: ca| call last\))?|error raised in subprocess:\s*$"
    r"|calledprocesserror: command .{0,400} returned non-zero exit status",
    re.IGNORECASE,
)
_VALIDATION_RE = re.compile(r"validation errors? for \w", re.IGNORECASE)
_GENERIC_WEAK = frozenset({"error", "traceback", "engine_failed", "worker_failed", "worker_method_failed"})


def _weak_rank(rule: ErrorRule, text: str, exception: str | None = None) -> int:
    """How much a generic error line says: a wrapper or header (0), a generic error line (1), the
    statement of an exception (2)."""
    if _WRAPPER_RE.search(text):
        # pydantic's "ValidationError: 1 validation error for ModelConfig" names the check that failed: more
        # than the traceback's header, less than its "Value error, ..." line when one follows (QA 19 F7)
        return 1 if exception is not None and _VALIDATION_RE.search(text) else 0
    if exception is not None or rule.cause == "exception":
        return 2
    return 1 if rule.cause in _GENERIC_WEAK else 2


_HEADER_RE = re.compile(r"traceback \(most recent", re.IGNORECASE)


def _ends_its_header(header: str, text: str, info: _LineInfo) -> bool:
    """`text` is the exception a traceback's header opened, not a header itself."""
    return info.exception is not None and bool(_HEADER_RE.search(header)) and not _HEADER_RE.search(text)


def _frame_rule(frame_rules: tuple[FrameRule, ...], exception: str, refines: str = "") -> ErrorRule | None:
    """What a bare exception (or one whose rule has the cause `refines`) means by the frame it was raised
    in (the innermost that says)."""
    for frame_rule in reversed(frame_rules):
        if frame_rule.refines == refines and frame_rule.exception in ("", exception):
            return frame_rule.rule
    return None


def _unless_stream_stamp(state: LogState, info: _LineInfo) -> ErrorRule | None:
    """The line's error rule, unless it is only a level word on a line that says the run got further
    ("[ERROR] main: server is listening"): a wrapper that stamps every stderr line ERROR (round 82); from
    there on that word is no error."""
    rule = info.error
    if rule is None or rule.cause != "error" or not (info.progress or state.level_is_stream):
        return rule
    state.level_is_stream = state.level_is_stream or bool(info.progress)
    return None


class _ChainWatch:
    """Python's chained tracebacks: after "During handling of the above exception, another exception
    occurred", the exception raised last is what stopped the run; the earlier one was a fallback that also
    failed (QA 11: transformers tried the Hub for a flash-attn kernel offline, then raised "the package for
    FlashAttention2 doesn't seem to be installed"). A "direct cause" link keeps the earlier one: it is the
    cause."""

    def __init__(self) -> None:
        self.first_header: int | None = None  # the first traceback header of the chain now being read
        self.last_link: int | None = None  # the chain's last "During handling ..." / "direct cause" line
        self.handling_from: int | None = None  # a "During handling" line that a later exception may supersede

    def header(self, number: int) -> None:
        if self.last_link is None or number - self.last_link > 3:
            self.first_header = number  # no link just above it: a new chain begins
            self.handling_from = None

    def link(self, number: int, text: str, strong: _Found | None) -> None:
        self.last_link = number
        within = strong is not None and self.first_header is not None and strong.number >= self.first_header
        if within and "during handling" in text.lower():
            self.handling_from = number

    def supersedes(self, number: int, exception: str | None, rule: ErrorRule, strong: _Found | None) -> bool:
        """Does this exception line replace the chain's first strong error? Only the exception that
        closes the traceback after the "During handling" line is asked, and only a strong one of another
        class replaces it (the same class: the earlier line said it)."""
        if self.handling_from is None or exception is None or number <= self.handling_from:
            return False
        self.handling_from = None
        earlier = strong.rule if strong is not None else None
        return rule.strong and earlier is not None and rule.failure != earlier.failure


def _quote(number: int, text: str, what: str = "") -> str:
    """ "line N: text", or "line N (what it shows): text" """
    said = f" ({what})" if what else ""
    return f"line {number}{said}: {_clip(text, MAX_QUOTE)}"


def _adopt_own_traceback(found: _Found | None, start: tuple[int, str] | None, stage: str) -> None:
    """A first error printed just before its own traceback (a script's `print(error)` then
    `traceback.print_exc()`): its frames say where it was, over what the progress lines implied (a
    model.to("cuda") after "Loading checkpoint shards: 100%" is the load, not the cache)."""
    if start is None or found is None or stage not in _STARTUP_STAGES:
        return
    if start[0] - found.number == 1 and found.stage in _STARTUP_STAGES:
        found.stage, found.defaulted, found.framed = stage, False, True


# QA round 38: llama-server's vision encoder warm-up (one 1472 x 1472 image) ran out of device memory and the
# server came up and served text: said as a quiet failure, not as the run's
_SKIPPED = (
    "a warm-up the server can run without ran out of device memory (the line names it): it came up, but "
    "requests that need that part (large images) may fail"
)


def _oom_in_warmup(found: _Found, warmup: tuple[int, str, str] | None) -> bool:
    """A device out-of-memory after the engine began its warm-up (one empty batch; `warmup`: its mark)."""
    rule = found.rule
    return (
        warmup is not None
        and found.number > warmup[0]
        and rule is not None
        and "cuda_oom" in (rule.failure, rule.hint)
    )


# What a new run in the same log does not reset: the reader's settings, the line count, the engine's marks.
_KEPT_ACROSS_RUNS = (
    "starts_before",  # server start-ups before this run's (a log appended to across restarts)
    "host_budget",
    "gpu_absent",
    "requested_quant",
    "log_time",
    "log_start",
    "lines",
    "scores",
    "saturated",
    "exit_code",
)


class LogState:
    """The streaming state machine: the stage the log is in, tracebacks, the first error, findings.

    Fed one analysed line at a time (`_step`); the verdict (vramtui.core.logs.verdict) reads it.
    """

    def __init__(self, requested_quant: str | None = None, host_budget: bool = False) -> None:
        # Under a host memory budget (an address-space cap standing in for a smaller card), a failed
        # host allocation is that budget's out-of-memory, not an unexplained failure.
        self.host_budget = host_budget
        # The machine the log is read on is where the run is, and NVML found no GPU there (the launcher says)
        self.gpu_absent = False
        self.requested_quant = requested_quant.lower() if requested_quant else None
        # When the log ended (seconds since the epoch): a saved file's last write, a live process's exit.
        # Only a kernel OOM kill near it confirms that the OOM killer ended this process.
        self.log_time: float | None = None
        self.log_start: float | None = None  # its first dated line: a kill before it was someone else's
        self.hint: str | None = None  # what the engine says to change, near the first error
        # An earlier run of an appended log that failed: its state, the verdict's if the runs after it
        # neither failed nor came up (a restart cut short); a run that failed too is the verdict instead.
        self.earlier_failure: dict[str, object] | None = None
        self.starts_before = 0
        self.run_line = 0  # where this run's start-up began (0: the log's start)
        self.lines = 0
        self.current: str | None = None
        self.furthest = -1
        self.startup_seen = False
        self.engine_started = False  # the engine's own start line (llama.cpp's build line) was seen
        self.strong: _Found | None = None
        self.weak: _Found | None = None
        self.recovered: list[str] = []
        self.last_stage_line: tuple[int, str] | None = None
        # traceback state
        self.tb_open = False
        self.tb_start: tuple[int, str] | None = None
        self.tb_frames = 0
        self.level_is_stream = False  # a wrapper stamps its stderr lines ERROR: the word says nothing
        self.tb_frame_rules: tuple[FrameRule, ...] = ()
        self.tb_startup: str | None = None
        self.tb_inference = False
        self.tb_memory = False
        self.tb_import = False  # a frame of the traceback is a package's module body
        self.tb_spawn = False  # a frame of the traceback starts a child process (multiprocessing)
        self.spawn_exceptions: set[int] = set()  # exception lines that ended such a traceback
        self.import_exceptions: set[int] = set()  # exception lines that ended an import's traceback
        self.after_frame = False
        self.cut_tb: _Found | None = None
        self.cut_memory = False
        self.chain = _ChainWatch()
        # other findings
        self.notices: dict[str, tuple[int, str, str]] = {}
        self.notice_unless: dict[str, tuple[str, ...]] = {}  # a notice's key -> the marks that silence it
        self.notice_requires: dict[str, str] = {}  # a notice's key -> the mark it needs to be said
        self.figures: dict[str, dict[str, int | float]] = {}
        # each per-device figure's last line and device: a device repeated on the next line is one more
        # part of the same buffer (a split GGUF maps each of its files: one CPU_Mapped line each)
        self.figure_lines: dict[str, tuple[int, str]] = {}
        self.cache_part = False  # inside a load's second cache (CACHE_PART_MARK): its figures add up
        self.scores: dict[str, int] = {}
        self.saturated: set[str] = set()
        self.quant_lines: list[str] = []
        self.formats: set[str] = set()
        self.exit_code: int | None = None
        # How far the run got: each milestone's first line since the last new load (see ruletypes.MILESTONES),
        # the lines where a new load began, and the first line that says the server is stopped on purpose.
        self.progress_seen: set[str] = set()
        self.milestones: list[tuple[int, str]] = []
        self.restarts: list[int] = []
        self.stop_line: int | None = None

    def note_exit(self, returncode: int | None) -> None:
        """The process ended with `returncode` (negative: killed by that signal); None keeps what the log's
        own end line said (QA 38 F12: a saved log's "killed by SIGKILL (signal 9)" read exit_code null)."""
        if returncode is not None:
            self.exit_code = returncode

    # -- the state machine ---------------------------------------------------------------------------
    def _is_noop(self, info: _LineInfo) -> bool:
        """True when feeding this line cannot change anything: the same stage again, marks counted,
        milestones already known."""
        return (
            info.simple
            and (
                info.stage is None
                or (info.stage == self.current and info.stage != "ready" and self.startup_seen)
            )
            and not self.after_frame
            and self.saturated.issuperset(info.backends)
            and (not info.progress or self.progress_seen.issuperset(info.progress))
        )

    def _take_progress(self, number: int, progress: tuple[str, ...], text: str) -> None:
        """Milestones proven, a new load (earlier milestones no longer bound what follows), a stop."""
        for milestone in progress:
            if milestone == "start":
                self._start_again(number)
                # an engine's own start line, not vramtui's launch line: the engine ran far enough to print
                self.engine_started = self.engine_started or ownlines.LAUNCH.rstrip() not in text
            elif milestone == "restart":
                self.restarts.append(number)
                self.progress_seen.clear()
            elif milestone == "stop":
                if self.stop_line is None:
                    self.stop_line = number
                self.progress_seen.add("stop")
            elif milestone not in self.progress_seen:
                self.progress_seen.add(milestone)
                self.milestones.append((number, milestone))

    def _start_again(self, number: int) -> None:
        """A new server process began (a log appended to across restarts, QA 16): the run before it is
        over, its stages, stop, findings and figures with it. A run that failed is kept aside: the verdict
        is its own again if the new one neither fails nor comes up (QA 17 F2: two failing runs read as
        the first one's error beside the second one's figures)."""
        if not (self.startup_seen or self.progress_seen):
            return
        failed = self.strong or self.weak or self.cut_tb
        earlier = (
            {name: value for name, value in vars(self).items() if name in _own_names()} if failed else None
        )
        kept = {name: getattr(self, name) for name in _KEPT_ACROSS_RUNS}
        LogState.__init__(self)  # this class's state only: a subclass's reader (its memo, backend) stays
        self.__dict__.update(kept)
        self.earlier_failure = earlier
        self.starts_before += 1
        self.run_line = number

    def _step(self, number: int, text: str, info: _LineInfo) -> tuple[str, bool]:
        """Take one line's analysis; its severity, and whether it is the first error."""
        if info.backends and not self.saturated.issuperset(info.backends):
            _count_marks(self, info.backends)
        if info.progress:
            self._take_progress(number, info.progress, text)
        if info.extras:
            self._take_findings(number, text, info)

        after_frame, self.after_frame = self.after_frame, False
        if info.frame:
            if not self.tb_open:
                self._open_traceback(number, text)
            self.tb_frames += 1
            if info.frame_rules:
                self.tb_frame_rules += info.frame_rules
            self.tb_import = self.tb_import or bool(_IMPORT_FRAME_RE.search(text))
            self.tb_spawn = self.tb_spawn or bool(_SPAWN_FRAME_RE.search(text))
            self._tb_hint(info)
            self.after_frame = True
            return "error", False
        if self.tb_open and info.exception is None and _NUMBERED_CODE_RE.match(text):
            self._tb_hint(info)
            return "error", False
        if after_frame and self.tb_open and info.exception is None:
            # The code line under a frame: where it was, not a message of its own.
            self._tb_hint(info)
            return "error", False

        if info.stage is not None:
            self._enter_stage(number, text, info.stage, info.error is not None)
        if info.recovery:
            recover(self, number, text, info.recovery)

        if info.header:
            if self.tb_open and self.tb_frames:
                self._note_cut_traceback()
            self._open_traceback(number, text)
            self.chain.header(number)
        elif info.chained:
            self.chain.link(number, text, self.strong)
            return "error", False

        rule = _unless_stream_stamp(self, info)
        if info.exception is not None and self.hint is None:
            self._note_hint(number, text)
        if info.exception is not None or (rule is not None and self.tb_open and self.tb_frames):
            if self.tb_open and self.tb_import:
                self.import_exceptions.add(number)
            if self.tb_open and self.tb_spawn:
                self.spawn_exceptions.add(number)
            start = self.tb_start
            stage = self._close_traceback()
            if stage is not None:
                self._adopt_stage(number, stage)  # the frames say where a stage-less first error was
                _adopt_own_traceback(self.strong or self.weak, start, stage)
        else:
            stage = None
        if info.exception is not None and (rule is None or rule.cause in _GENERIC_WEAK):
            # a bare exception (behind a log level's generic "ERROR" at most): its frame may say more
            rule = _frame_rule(self.tb_frame_rules, info.exception) or rule or _EXCEPTION_RULE
        elif info.exception is not None and rule is not None and self.tb_frame_rules:
            rule = _frame_rule(self.tb_frame_rules, info.exception, rule.cause) or rule
        if rule is None:
            if info.header:
                return "error", False
            # a mark (a GPU in use, the warm-up) is what the verdict reads, not a warning of the line's
            # and a notice a mark already seen silences (eager mode on the CPU build) is not one (QA 14)
            said = info.warning_level or (bool(info.notices) and _says_a_notice(info.notices, self.notices))
            return ("warning" if said else "info"), False

        return self._note_error(number, text, info, rule, stage)

    def _note_error(
        self, number: int, text: str, info: _LineInfo, rule: ErrorRule, stage: str | None
    ) -> tuple[str, bool]:
        """An error line: the first error (of its strength) is kept, with the stage it happened at."""
        if (code := ownlines.exit_code_in(text)) is not None:
            self.exit_code = code
        if (
            stage is not None
            and self.weak is not None
            and self.weak.defaulted
            and self.tb_start is not None
            and self.weak.number >= self.tb_start[0] - 1  # in it, or the wrapper's line that opened it
        ):
            self.weak.stage, self.weak.defaulted = stage, False  # the traceback it opened says where
        if not rule.strong and self._restate(number, text, info, rule):
            return "error", False
        self._pin_burst_stage(number, rule)
        if self.last_stage_line is None and self._defaulted_first() and _SAYS_LOADING_RE.search(text):
            # a later line says the start-up failed ("error starting llama runner"): a first error no
            # stage line placed was a start-up's, not a request's
            self._adopt_stage(number, "load_weights")
        superseded = self.chain.supersedes(number, info.exception, rule, self.strong)
        if (self.strong if rule.strong else self.weak) is not None and not superseded:
            return "error", False  # not the first: the cause is already known
        known = rule.stage or stage or info.stage or self.current_or_none()
        if known is None and _SAYS_LOADING_RE.search(text):
            known = "load_weights"  # no stage before it, but the error line says it was loading
        found = _Found(
            number,
            text,
            rule,
            known or rule.default_stage or _DEFAULT_STAGE[rule.hint or rule.failure],
            known is None,
            framed=stage is not None and not rule.stage,
            began=self.tb_start[0] if self.tb_start is not None and info.exception is not None else None,
        )
        if rule.strong:
            self.strong = found
            return "error", True
        self.weak = found
        return "error", False

    def _restate(self, number: int, text: str, info: _LineInfo, rule: ErrorRule) -> bool:
        """A generic first error (a traceback's header, a wrapper's "failed to start ... see root cause")
        gives way to the line after it that states the failure (the exception's own message) within the
        same report: that line is the first error. The wrapper's stage, and the class its words hint
        at, are kept."""
        weak = self.weak
        if weak is None or weak.rule is None:
            return False
        # a deep traceback opened right after the wrapper (vLLM's "EngineCore failed to start." then 60+
        # frames of Triton and torch) still ends in that wrapper's exception
        own_traceback = self.tb_start is not None and 0 <= self.tb_start[0] - weak.number <= 1
        if number - weak.number > _HINT_WITHIN_LINES and not (own_traceback and info.exception is not None):
            return False
        if _weak_rank(weak.rule, weak.text) > 0:
            return False  # only a wrapper or a header gives way (a generic line with words of its own stays)
        # a header gives way to the exception that ends its traceback, even one that only wraps: it says
        # more than "Traceback (most recent call last):" (round 73: the worker's own cause was not logged)
        if _weak_rank(rule, text, info.exception) == 0 and not _ends_its_header(weak.text, text, info):
            return False
        kept = weak.rule if weak.rule.hint and not rule.hint else rule
        self.weak = _Found(number, text, kept, weak.stage, weak.defaulted)
        return True

    def _defaulted_first(self) -> bool:
        return any(found is not None and found.defaulted for found in (self.strong, self.weak))

    def _pin_burst_stage(self, number: int, rule: ErrorRule) -> None:
        """A stage-less first error takes the later stage the error lines right after it name.

        At llama-server's default verbosity no llama_context line comes before a context buffer fails:
        `ggml_aligned_malloc: insufficient memory` would keep the loader's stage, but the next lines
        ("failed to allocate buffer for kv cache", "failed to allocate compute buffers") say where.
        """
        if rule.stage is None or rule.stage == "ready":
            return
        for found in (self.strong, self.weak):
            if (
                found is not None
                and found.rule is not None
                and found.rule.stage is None
                and 0 < number - found.number <= _BURST_LINES
                and STAGE_INDEX[rule.stage] > STAGE_INDEX[found.stage]
                # a request's report of the same failure (llama.cpp's K-shift out of memory)
                and (rule.stage != "inference" or rule.failure == found.rule.failure)
            ):
                found.stage, found.defaulted = rule.stage, False

    def _take_findings(self, number: int, text: str, info: _LineInfo) -> None:
        """File formats, quantization lines, figures and notices: kept for the verdict."""
        if info.formats:
            self.formats.update(info.formats)
        if info.quant_words and len(self.quant_lines) < 64:
            self.quant_lines.append(text.lower())
        for key, device, value, per_device in info.figures:
            if DRAFT_MARK in self.figures and key != DRAFT_MARK:
                key = DRAFT_PREFIX + key  # the draft model's buffers: the model's own figures stay
            add_figure(self, key, device, value, per_device, number)
        if self.cache_part and any(
            key.removeprefix(DRAFT_PREFIX) == CACHE_PART_SUMS[-1] for key, *_ in info.figures
        ):
            self.cache_part = False  # the second cache's size line closes it
        for notice in info.notices:
            # Marks are few and the verdict reads them: kept even past the warnings' limit.
            if notice.kind == "mark" or len(self.notices) < MAX_EVIDENCE:
                key = f"{notice.kind}:{notice.message}"
                self.notices.setdefault(key, (number, text, notice.message))
                if notice.unless:
                    self.notice_unless[key] = tuple(f"mark:{mark}" for mark in notice.unless.split())
                if notice.requires:
                    self.notice_requires[key] = f"mark:{notice.requires}"

    def _enter_stage(self, number: int, text: str, stage: str, is_error: bool) -> None:
        self._adopt_stage(number, stage)
        if stage != self.current or self.last_stage_line is None:
            self.last_stage_line = (number, text)  # where the log entered this stage
        self.current = stage
        index = STAGE_INDEX[stage]
        if index > self.furthest:
            self.furthest = index
        if stage != "inference" or not is_error:
            self.startup_seen = True
        if stage == "ready":
            clear_startup_errors(self, number, text)

    def _note_hint(self, number: int, text: str) -> None:
        """An exception just after the first error that says what to change (the engine's own hint)."""
        found = self.strong or self.weak
        if found is not None and number - found.number <= _HINT_WITHIN_LINES:
            self.hint = _engine_hint(text)

    def _adopt_stage(self, number: int, stage: str) -> None:
        """A first error that no stage line came before takes the first startup stage told soon after.

        Processes interleave their output: a worker's out-of-memory error can reach the log a line
        before the loader's "Loading safetensors checkpoint shards" progress, or before the traceback
        whose frames say it was in from_pretrained. Without this the error would take its class's
        default stage (a request's, for out-of-memory).
        """
        if self.last_stage_line is not None or stage not in _STARTUP_STAGES:
            return
        for found in (self.strong, self.weak):
            if found is not None and found.defaulted and number - found.number <= _ADOPT_WITHIN_LINES:
                found.stage, found.defaulted = stage, False

    def adopt_cut_traceback_stage(self) -> None:
        """At the log's end, a traceback cut before its exception line tells a stage-less first error
        where it was, as a closed one does (vLLM's engine being built: from_engine_args)."""
        start = self.tb_start
        stage = self.traceback_stage() if self.tb_open else None
        if start is not None and stage is not None:
            self._adopt_stage(start[0], stage)

    def current_or_none(self) -> str | None:
        return self.current if self.startup_seen or self.current == "inference" else None

    def _open_traceback(self, number: int, text: str) -> None:
        self.tb_open = True
        self.tb_start = (number, text)
        self.tb_frames = 0
        self.tb_frame_rules = ()
        self.tb_startup = None
        self.tb_inference = False
        self.tb_memory = False
        self.tb_import = False
        self.tb_spawn = False

    def _tb_hint(self, info: _LineInfo) -> None:
        if info.memory_heavy:
            self.tb_memory = True
        if info.stage is None:
            return
        if info.stage in ("inference", "ready"):
            self.tb_inference = True
        else:
            self.tb_startup = info.stage  # the innermost startup frame wins

    def traceback_stage(self) -> str | None:
        if self.tb_startup:
            return self.tb_startup
        return "inference" if self.tb_inference else None

    def _close_traceback(self) -> str | None:
        if not self.tb_open:
            return None
        stage = self.traceback_stage()
        self.tb_open = False
        return stage

    def _note_cut_traceback(self) -> None:
        if self.cut_tb is None and self.tb_start is not None:
            stage = self.traceback_stage() or self.current_or_none() or "load_weights"
            self.cut_tb = _Found(self.tb_start[0], self.tb_start[1], None, stage)
            self.cut_memory = self.tb_memory


def _count_marks(state: LogState, backends: tuple[str, ...]) -> None:
    """One more mark of each engine the line names; past the cap, the engine is saturated."""
    for name in backends:
        score = state.scores.get(name, 0)
        if score < _SCORE_CAP:
            state.scores[name] = score + 1
        else:
            state.saturated.add(name)


def add_figure(
    state: LogState, key: str, device: str | None, value: int | float, per_device: bool, number: int = 0
) -> None:
    """One figure the engine printed, into the state's figures: per device (a device seen again starts a
    new load's set, unless it follows on the next line: one more part of the same buffer), a second
    cache's parts added to the first's."""
    if key.endswith(CACHE_PART_MARK):
        state.cache_part = True  # a second cache of this load: its figures add to the first's
        state.figures[key] = {"": value}
        return
    adds = state.cache_part and key.removeprefix(DRAFT_PREFIX) in CACHE_PART_SUMS
    if state.cache_part and not adds and key in state.figures:
        return  # the cells, streams ... of the second cache: the first (full) one's stand
    if per_device:
        devices = state.figures.setdefault(key, {})
        name = device or "?"
        follows = state.figure_lines.get(key) == (number - 1, name)
        state.figure_lines[key] = (number, name)
        if (adds or follows) and name in devices:
            devices[name] += value
            return
        if name in devices:
            devices.clear()  # the same device again: a new load, start a new set
        devices[name] = value
    elif adds and key in state.figures:
        state.figures[key] = {"": state.figures[key][""] + value}
    else:
        state.figures[key] = {"": value}


def recover(state: LogState, number: int, text: str, rules: tuple[NoticeRule, ...]) -> None:
    """A line that says the engine recovered: every start-up error, or only the causes its rules name."""
    if any(not rule.clears for rule in rules):
        clear_startup_errors(state, number, text, always=True)
    elif causes := {cause for rule in rules for cause in rule.clears.split()}:
        clear_errors_of(state, number, text, causes)


def clear_startup_errors(state: LogState, number: int, text: str, always: bool = False) -> None:
    """The server came up (or, `always`, the engine retried after all): the start-up errors before it
    were not the run's failure."""
    cleared = state.earlier_failure is not None  # an earlier run's failure, recovered by this one
    state.earlier_failure = None
    optional = state.notices.get(f"mark:{OPTIONAL_WARMUP}")
    for name in ("strong", "weak", "cut_tb"):
        found: _Found | None = getattr(state, name)
        if found is not None and not always and _oom_in_warmup(found, state.notices.get("mark:warmup")):
            if not _oom_in_warmup(found, optional):
                continue  # the server came up, but the smallest batch did not fit: no request will
            # a warm-up the server runs without (a vision encoder's): its failure is said, not the run's
            state.notices.setdefault(
                f"{OPTIONAL_WARMUP}:{found.number}", (found.number, found.text, _SKIPPED)
            )
        if found is not None and (always or STAGE_INDEX[found.stage] < STAGE_INDEX["ready"]):
            setattr(state, name, None)
            cleared = True
    if cleared or always:
        _quote_recovery(state, number, text)
    if always:
        state.tb_open = False


def clear_errors_of(state: LogState, number: int, text: str, causes: set[str]) -> None:
    """A recovery of some causes only (a request served after the KV cache was full): the errors of
    those causes are cleared, wherever they sit; any other error stands."""
    cleared = False
    for name in ("strong", "weak"):
        found: _Found | None = getattr(state, name)
        if found is not None and found.rule is not None and found.rule.cause in causes:
            setattr(state, name, None)
            cleared = True
    if cleared:
        _quote_recovery(state, number, text)


def _quote_recovery(state: LogState, number: int, text: str) -> None:
    if len(state.recovered) < _RECOVERIES_QUOTED:  # a crash loop recovers thousands of times
        state.recovered.append(_quote(number, text))


def _says_a_notice(notices: tuple[NoticeRule, ...], seen: Mapping[str, object]) -> bool:
    """A line's notice the verdict would keep: not a mark, nor one that a mark seen already (or on this
    same line) silences."""
    here = {f"mark:{notice.message}" for notice in notices if notice.kind == "mark"}
    return any(
        notice.kind != "mark"
        and not any(
            f"mark:{mark}" in seen or f"mark:{mark}" in here for mark in (notice.unless or "").split()
        )
        for notice in notices
    )


@functools.cache
def _own_names() -> frozenset[str]:
    """The attributes LogState itself keeps (a subclass's reader, its memo and backend, are not a run's)."""
    return frozenset(vars(LogState()))


def judged_run(state: LogState) -> LogState:
    """The run the verdict is about: the last one, unless it neither failed nor came up after a run that
    failed (the user restarted and cut it short; a crash loop's last start): then that earlier run."""
    earlier = state.earlier_failure
    failed_now = state.strong or state.weak or state.cut_tb or (state.tb_open and state.tb_frames)
    if earlier is None or failed_now:
        return state
    view = copy.copy(state)
    view.__dict__.update({name: value for name, value in earlier.items() if name not in _KEPT_ACROSS_RUNS})
    return view
