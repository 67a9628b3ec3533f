"""The verdict: from what the state machine saw to a Diagnosis (the failure class, its cause, where).

Also the checks a verdict needs beyond the first error: the kernel's confirmation of an OOM kill, a
file in a format the engine cannot read, and the quiet failures (a quantization that did not take).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from vramtui.core.logs import rules as ls
from vramtui.core.logs.analysis import _clip
from vramtui.core.logs.kernel import kill_times, kills_near
from vramtui.core.logs.rules import STAGE_INDEX, STAGES, LogProfile
from vramtui.core.logs.ruletypes import MILESTONE_FLOOR
from vramtui.core.logs.state import MAX_EVIDENCE, MAX_QUOTE, LogState, _Found, _quote
from vramtui.core.memory.parts import is_cpu_backend_buffer, is_host_buffer
from vramtui.core.memory.room import threads_take_the_budget


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
    stopped_by_vramtui: bool = False  # vramtui stopped the server itself (its "stopping the server" line)
    # No error, but the log stops before the server was ready: still loading, or killed without a message.
    incomplete: bool = False
    stopped: bool = False  # the engine says it was stopped on purpose (a signal, ctrl-c)
    # A terminal's hard wrap at this column, joined back before reading (line numbers are the file's)
    wrapped_at: int | None = None
    # The server start-ups the log holds (appended to across restarts), and the line the judged one began
    # at (QA 27 N7: a crash loop's 3,700 starts read as one, "First error, line 517601")
    starts: int = 1
    start_line: int | None = None

    def to_dict(self) -> dict[str, object]:
        return asdict(self)

    @property
    def unrecognised(self) -> bool:
        """No engine, no stage, no failure and no notice: text that is not a server's log, which must not
        read as a healthy server (`diagnose log && deploy`, the log pane's verdict)."""
        return not (self.failed or self.backend or self.stage or self.warnings)


UNRECOGNISED_WORDS = (
    "Nothing in it is an engine's start-up or serving line: is it the server's own log (not the client's)?"
)


def detect_backend(scores: dict[str, int]) -> str | None:
    """The backend whose marks the log carries; the one that embeds the others wins."""
    for name in ls.BACKEND_PRECEDENCE:
        score = scores.get(name, 0)
        if score <= 0:
            continue
        profile = ls.LOG_PROFILES.get(name)
        if (
            profile is not None
            and score < 2
            and any(scores.get(other, 0) > 2 for other in profile.outweighed_by)
        ):
            continue  # one mark does not outweigh a log full of another engine's
        return name
    return None


@dataclass
class Verdict:
    """What the verdict found, before the advice: the diagnosis, and what the advice reads beside it."""

    diagnosis: Diagnosis
    formats: set[str]  # file formats the log names, "quantized" and "flash_attn" when it shows them
    kernel_note: str | None  # the kernel's OOM-kill lines near the log's end ("" none; None unread)
    kills_elsewhere: str | None  # a note on OOM kills at other times
    hint: str | None  # what the engine says to change, near the first error


@dataclass
class _Pick:
    found: _Found | None
    failure: str = "none"
    cause: str | None = None
    inferred: bool = False
    cut: _Found | None = None


def judge(state: LogState, backend: str | None, read_kernel: Callable[[], str | None]) -> Verdict:
    """The verdict on everything `state` was fed (`backend`: named or detected)."""
    profile = ls.LOG_PROFILES.get(backend or "")
    pick = _first_failure(state, profile)
    _refine(pick, state, profile)
    _exit_failure(pick, state)
    _died_at_start(pick, state)
    _own_stop(pick, state)
    _engine_stop(pick, state)
    _floor_stage(pick, state)
    _not_up(pick, state)  # after the floor: "listening" would put it at a request
    found = pick.found
    failed = found is not None
    failure_stage = found.stage if found is not None else None
    furthest = _furthest(state, found)
    if pick.cause == "died_at_start":  # it reached no stage: --json says so too (QA 20 D4, QA 22)
        # nor did it fail at one (QA 23 D6: failure_stage read load_weights beside a stage of none)
        furthest, failure_stage = -1, None
    incomplete = _incomplete(state, failed, furthest)
    if incomplete:  # it stops past what its milestones prove (weights loaded: no longer loading them)
        floor = stage_floor(state, state.lines + 1)
        furthest = max(furthest, STAGE_INDEX[floor] if floor is not None else -1)
    evidence = _evidence(state, pick)
    pick = _model_folder(pick, evidence)
    kernel_note, kills_elsewhere = None, None
    # The log's own line names the OOM killer (systemd's unit, the kernel's): nothing to confirm here, and
    # this machine's kernel log may not be the one the server ran on.
    says_oom_killer = pick.cause in SAYS_KILLED
    if (
        (pick.failure == "host_oom_killed" and not says_oom_killer)
        or incomplete
        or pick.cause == "worker_died"
    ):
        names = profile.process_names if profile is not None else ()
        kernel_text = read_kernel()
        kernel_note, kills_elsewhere = _kernel_confirmation(
            kernel_text, (state.log_time, state.log_start), evidence, names
        )
        # vramtui saw the kill of a server it ran here: this kernel log is the one that would show its OOM kill
        if pick.cause == "killed_signal" and kernel_text is not None and not kernel_note and state.log_time:
            pick = _killed_outside(pick)
        if kernel_note and (incomplete or pick.cause == "worker_died"):
            # The log stops without a word (or a worker died without one) and the kernel killed a
            # process just then: that kill is the failure.
            pick, failed, incomplete = _killed_then(pick, state, furthest), True, False
            found = pick.found
            failure_stage = found.stage if found is not None else None
    diagnosis = Diagnosis(
        backend=backend,
        stage=STAGES[furthest] if furthest >= 0 else None,
        failed=failed,
        failure_stage=failure_stage,
        failure=pick.failure if failed else "none",
        # a finding made from the exit code or the kernel states no line of the log: it names none
        first_error_line=found.number if found is not None and _in_log(found, state) else None,
        first_error_text=found.text[:MAX_QUOTE] if found is not None else None,
        evidence=evidence[:MAX_EVIDENCE],
        warnings=_quiet_failures(
            state,
            failed_starting=pick.cause == "died_at_start"
            # one that never came up (its readiness probe failing) served nothing either (QA 26 D3)
            or (failure_stage is not None and STAGE_INDEX[failure_stage] <= STAGE_INDEX["ready"]),
            cause=pick.cause if failed else None,
        ),
        engine_figures=_exact(_figures_flat(state.figures), profile),
        cause=pick.cause if failed else None,
        inferred=pick.inferred,
        stage_inferred=found is not None and found.defaulted,
        lines=state.lines,
        exit_code=state.exit_code,
        stopped_by_vramtui="mark:own_stop" in state.notices,
        incomplete=incomplete,
        stopped=state.stop_line is not None and not failed,
        starts=state.starts_before + 1,
        start_line=state.run_line or None,
    )
    return Verdict(diagnosis, _shown_formats(state), kernel_note, kills_elsewhere, state.hint)


def _first_failure(state: LogState, profile: LogProfile | None) -> _Pick:
    """The first error that names a cause; else a generic one, a cut-off traceback, or nothing."""
    found = state.strong
    if (
        profile is not None
        and profile.kills_own_tree
        and found is not None
        and found.rule is not None
        and found.rule.cause == "host_killed"
        and state.weak is not None
        and state.weak.number < found.number
    ):
        found = None  # its own SIGKILL after an error: the error before it is the failure
    if _teardown_crash(found, state.weak):
        found = None  # "free(): invalid pointer" as a failed load unwinds: the error before it is the failure
    cut = state.cut_tb
    cut_memory = state.cut_memory
    if cut is None and state.tb_open and state.tb_frames and state.tb_start is not None:
        cut_stage = state.traceback_stage() or state.current_or_none() or "load_weights"
        cut = _Found(state.tb_start[0], state.tb_start[1], None, cut_stage)
        cut_memory = state.tb_memory
        state.adopt_cut_traceback_stage()
    if found is not None and found.rule is not None:
        return _Pick(found, found.rule.failure, found.rule.cause, cut=cut)
    weak = state.weak
    if weak is not None and weak.rule is not None:
        rule = weak.rule
        pick = _Pick(weak, rule.failure, rule.cause, cut=cut)
        if rule.hint:
            pick.failure, pick.inferred = rule.hint, True
        elif cut is not None and cut_memory:
            pick.failure, pick.cause, pick.inferred = _memory_of(state), "cut_traceback", True
        if cut is not None and cut.number < weak.number:
            pick.found = _Found(cut.number, cut.text, rule, cut.stage)
        elif cut is not None and weak.defaulted and cut.number >= weak.number:
            pick.found = _Found(weak.number, weak.text, rule, cut.stage)
        return pick
    if cut is not None:
        return _Pick(cut, _memory_of(state) if cut_memory else "other", "cut_traceback", True, cut)
    return _Pick(found, cut=cut)


def _teardown_crash(found: _Found | None, weak: _Found | None) -> bool:
    """glibc's heap abort after an error line: the process broke its heap while it shut down from that error
    (round 21's "key not found" load, then "free(): invalid pointer"), not before it (round 83's double free
    in a worker's NCCL set-up, the first thing that went wrong)."""
    if found is None or found.rule is None or found.rule.cause != "heap_corruption":
        return False
    return weak is not None and weak.rule is not None and weak.number < found.number


def _broken_import(pick: _Pick, state: LogState) -> bool:
    """An import that broke part-way, before the model was read: an ImportError other than a module not
    installed (a package half imported, a compiled module that failed to load), that ended an import's
    traceback. Under a host budget it is the budget's: the same install imports it without one."""
    found = pick.found
    if found is None or pick.failure != "other" or pick.cause not in _GENERIC_CAUSES:
        return False
    if found.number not in state.import_exceptions or STAGE_INDEX[found.stage] > STAGE_INDEX["load_weights"]:
        return False
    return bool(_BROKEN_IMPORT.search(found.text)) and "no module named" not in found.text.lower()


_BROKEN_IMPORT = re.compile(r"\bImportError: ")


def _importing_engine(found: _Found | None, state: LogState) -> bool:
    """The error ended an import's traceback before any weights: the engine failing to import itself, not
    a module imported late (uvicorn's HTTP protocol, after the model and its cache: QA 26)."""
    return (
        found is not None
        and found.number in state.import_exceptions
        and STAGE_INDEX[found.stage] <= STAGE_INDEX["load_weights"]
    )


def _memory_of(state: LogState) -> str:
    """The memory a run that ran out most likely lacked: the host's where no GPU is in play (a CPU build,
    a host budget, no GPU found), else the device's (QA 17 F9: "the GPU ran out" on vLLM's CPU build)."""
    on_host = "mark:cpu_platform" in state.notices or state.host_budget or state.gpu_absent
    return "host_oom" if on_host else "cuda_oom"


def _refine(pick: _Pick, state: LogState, profile: LogProfile | None) -> None:
    """Classes the first error alone does not tell: a wrong format, a host budget, graph capture."""
    if _wrong_format(profile, pick.failure, pick.cause, state.formats):
        pick.failure, pick.cause = "unsupported_quant", "wrong_format"
    found = pick.found
    _refine_buffer(pick, state)
    under_budget = state.host_budget or "host_budget" in state.figures
    # Under the budget, a thread the engine could not start (no room for its stack), or a crash before the
    # engine printed a line of its own (the loader could not map its libraries): the budget's doing.
    after_weights = found is not None and STAGE_INDEX[found.stage] >= STAGE_INDEX["kv_cache"]
    if under_budget and pick.cause == "thread_start" and after_weights:
        # OpenMP's workers start at the first graph, after the weights and the cache: those took the room
        pick.failure, pick.cause = "host_oom", "thread_no_room"
    elif under_budget and (
        pick.cause == "thread_start"
        or (pick.cause == "crash" and not (state.startup_seen or state.engine_started))
    ):
        pick.failure = "host_oom"
        threads, budget = (state.figures.get(key, {}).get("") for key in ("http_threads", "host_budget"))
        pick.cause = "http_threads_start" if threads_take_the_budget(threads, budget) else "budget_start"
    if pick.cause == "library_map":
        # QA 39 F1: the loader could not map libstdc++ under a 20 MiB budget, read as a missing library
        pick.failure, pick.cause = "host_oom", "budget_start" if under_budget else "host_import"
    if under_budget and pick.cause == "loader_threads":
        pick.failure = "host_oom"  # QA 11: the loader's threads had no room for their stacks
    spawning = found is not None and found.number in state.spawn_exceptions
    if under_budget and pick.cause in _HOST_ALLOCATION_CAUSES and spawning:
        # QA 29: the MemoryError of pickling vLLM's config to start its engine core: before any weight
        pick.failure, pick.cause = "host_oom", "budget_start"
    if under_budget and _broken_import(pick, state):
        # QA 29: numpy's OpenBLAS could not map its buffers under the limit and left modules half made
        # ("cannot import name 'Any' from partially initialized module 'typing'"): the budget's
        pick.failure, pick.cause = "host_oom", "budget_import"
    if under_budget and pick.cause in _BUDGET_ALLOCATION_CAUSES:
        pick.failure = "host_oom"
        blas_at_start = pick.cause == "blas_alloc" and not (state.startup_seen or state.engine_started)
        if _importing_engine(found, state) or blas_at_start:  # BLAS maps its buffers as numpy is imported
            pick.cause = "budget_import"
    elif (
        pick.cause in _HOST_ALLOCATION_CAUSES
        and _importing_engine(found, state)
        and state.furthest < STAGE_INDEX["load_weights"]
        and not state.milestones  # nothing proved read or loaded: a late import is no start-up's
    ):
        # QA 29 Q9: no budget, yet host RAM ran out while the engine imported its own modules (a ulimit, a
        # full machine): a smaller file cannot help what fails before the model is read
        pick.failure, pick.cause = "host_oom", "host_import"
    if found is not None and (
        _still_starting(pick, state, profile)
        or _start_failed_after(state, found)
        or _warm_up_crash(state, found)
    ):
        found.stage = "kv_cache"
    elif found is not None and _load_failed_at(state, found):
        found.stage = "load_weights"  # raised past the weights below where the log proved them loaded
    if (
        pick.failure == "cuda_oom"
        and found is not None
        and found.stage == "kv_cache"
        and "cuda_graphs" not in state.figures  # the engine's "capture finished" figure
        and any(key == "mark:graph_capture" and seen[0] < found.number for key, seen in state.notices.items())
    ):
        pick.cause = "cuda_graph_capture"


# Causes whose own line says what killed the process (the kernel's OOM killer, systemd's unit, Ray's memory
# monitor): no kernel log is needed to confirm it, and this machine's may not be the one the server ran on
SAYS_KILLED = frozenset({"host_oom_killer", "memory_monitor"})
_SERVING_HOLDS = 0.8  # of the card: an engine serving holds its share (0.9 by default) of it


def _still_starting(pick: _Pick, state: LogState, profile: LogProfile | None) -> bool:
    """A device OOM that no line placed, in an engine that takes its whole share while starting, whose
    own report says the process held well under the card: it was still starting, after the weights
    (the allocation that failed is the profile's or the cache's), not serving a request."""
    found = pick.found
    if profile is None or not profile.holds_its_share or found is None or not found.defaulted:
        return False
    if pick.failure != "cuda_oom" or found.stage != "inference":
        return False
    used = state.figures.get("oom_process_used", {}).get("")
    total = state.figures.get("device_total", {}).get("")
    return bool(used and total and used < _SERVING_HOLDS * total)


def _start_failed_after(state: LogState, found: _Found) -> bool:
    """An error no line placed, that the engine's own wrapper then calls a start-up failure ("EngineCore
    failed to start"): it was not serving a request. Its weight load has lines of its own that would have
    placed it there, so it failed in the start-up's later steps (profiling, cache, graph capture)."""
    return _unplaced_then_marked(state, found, "start_failed", found.number + 1)


def _warm_up_crash(state: LogState, found: _Found) -> bool:
    """ggml's backtrace just after the error shows a decode called from the common start-up: the empty
    warm-up run, after the weights and before the server listens (round 68: read as load_weights)."""
    decode, init = (state.notices.get(f"mark:{mark}") for mark in ("decode_frame", "init_frame"))
    if decode is None or init is None:
        return False
    return found.number <= decode[0] < init[0] <= found.number + _BACKTRACE_LINES


def _not_up(pick: _Pick, state: LogState) -> None:
    """A run that never passed its readiness probe failed at ready; under a host budget, with no cause of
    its own, the budget's: its handlers failing on each probe (a JSONDecodeError reading the request, a
    MemoryError later) had no room, and without the budget it answers at once (QA 27 N2)."""
    if pick.found is None or not _never_ready(state, pick.found):
        return
    pick.found.stage = "ready"
    if pick.failure == "other" and (state.host_budget or "host_budget" in state.figures):
        pick.failure, pick.cause, pick.inferred = "host_oom", "budget_no_serve", True


def _never_ready(state: LogState, found: _Found) -> bool:
    """An error placed at a request, in a run that served none and whose readiness probe never passed
    (vramtui's own "not ready ..." line, or its "... before it was ready" when the server died), or whose
    own warm-up request failed (SGLang's "warmup error":
    round 69): it failed coming up, answering the probe with errors (QA 26 D3: "failed at inference" for a
    server that answered HTTP 500 from its first poll)."""
    never = {"mark:ready_timeout", "mark:warmup_failed", "mark:died_before_ready"}
    if found.stage != "inference" or not never & state.notices.keys():
        return False
    return not any(milestone == "served" and line < found.number for line, milestone in state.milestones)


def _load_failed_at(state: LogState, found: _Found) -> bool:
    """An error no line placed, that the engine's own wrapper of its model load repeats or follows
    (Ollama's "llama runner process has terminated: ..."): its runner died loading, before serving. With
    no line to say which buffer, the first and largest: the weights'."""
    return _unplaced_then_marked(state, found, "load_failed", found.number)


def _unplaced_then_marked(state: LogState, found: _Found, mark: str, from_line: int) -> bool:
    """An error whose stage only defaulted to a request's, with the engine's `mark` at or after `from_line`."""
    seen = state.notices.get(f"mark:{mark}")
    return found.defaulted and found.stage == "inference" and seen is not None and seen[0] >= from_line


def _mark_soon_after(state: LogState, mark: str, number: int) -> bool:
    """The mark's first line comes within a few lines after line `number` (the same error report)."""
    seen = state.notices.get(f"mark:{mark}")
    return seen is not None and 0 <= seen[0] - number <= _SAME_REPORT_LINES


def _mark_before(state: LogState, mark: str, number: int) -> bool:
    seen = state.notices.get(f"mark:{mark}")
    return seen is not None and seen[0] < number


def _refine_buffer(pick: _Pick, state: LogState) -> None:
    """Which buffer an out-of-memory was, from the lines of the same report after the first error.

    ggml reports a failed allocation first (`ggml_aligned_malloc`, `cudaMalloc failed`) and only then
    whose it was: the compute buffer (`graph_reserve`), or a device memory query that ran out because
    the GPU was already full before loading.
    """
    found = pick.found
    if found is None:
        return
    if pick.cause == "compute_alloc_failed" or (
        pick.cause in _BUFFER_CAUSES and _mark_soon_after(state, "compute_buffer", found.number)
    ):
        pick.cause = "compute_alloc_failed"
        if found.defaulted and found.stage == "load_weights":
            found.stage = "kv_cache"  # the compute buffers are reserved after the weights and the cache
    elif pick.cause in _BUFFER_CAUSES and _mark_soon_after(state, "kv_buffer", found.number):
        pick.cause = "kv_alloc_failed"
    elif pick.failure == "cuda_oom" and _mark_soon_after(state, "device_query", found.number):
        pick.cause = "gpu_full_at_start"
    elif pick.failure == "cuda_oom" and found.defaulted and _mark_before(state, "llama_banner", found.number):
        # Out of memory after llama.cpp's banner and before any load line: its device enumeration
        # failed (ggml_cuda_init), before a byte of the model was allocated.
        pick.cause = "gpu_full_at_start"
        found.stage = "load_weights"


def _own_stop(pick: _Pick, state: LogState) -> None:
    """vramtui stopped the server itself: a kill or an exit after that line is its stop, not a failure."""
    stop = state.notices.get("mark:own_stop")
    found = pick.found
    if stop is not None and found is not None and min(found.number, found.began or found.number) > stop[0]:
        pick.found, pick.failure, pick.cause, pick.inferred = None, "none", None, False


def _engine_stop(pick: _Pick, state: LogState) -> None:
    """The engine says it is being stopped on purpose (a signal, ctrl-c): what fails after that line is
    the stop's doing (vLLM's engine dies under its API server's output handler), unless a new load began.
    An error on the stop's own line is the stop (vLLM V0's KeyboardInterrupt("MQLLMEngine terminated"))."""
    stop, found = state.stop_line, pick.found
    if stop is None or found is None or found.number < stop:
        return
    if any(stop < restart < found.number for restart in state.restarts):
        return
    pick.found, pick.failure, pick.cause, pick.inferred = None, "none", None, False


def _furthest(state: LogState, found: _Found | None) -> int:
    """How far the run got: its furthest stage line, and at least where it failed. A run that failed
    while starting got no further, whatever later lines name (Ollama's front end answers requests with
    500 while its runner never loaded), unless it came up after all (a listening or served line after the
    failure: a retry)."""
    furthest = state.furthest
    if found is None:
        return furthest
    failed_at = STAGE_INDEX[found.stage]
    if failed_at < STAGE_INDEX["ready"]:
        came_up = any(line > found.number and m in ("listening", "served") for line, m in state.milestones)
        return max(furthest, failed_at) if came_up else failed_at
    return max(furthest, failed_at)


def stage_floor(state: LogState, number: int) -> str | None:
    """The earliest stage a failure at line `number` can be at: past the furthest milestone the log proved
    before it, since the last new load (weights loaded: not a load failure; a request served: the
    request's)."""
    start = max((line for line in state.restarts if line < number), default=0)
    best = -1
    for line, milestone in state.milestones:
        if start < line < number:
            best = max(best, STAGE_INDEX[MILESTONE_FLOOR[milestone]])
    return STAGES[best] if best >= 0 else None


def _floor_stage(pick: _Pick, state: LogState) -> None:
    found = pick.found
    if found is None:
        return
    floor = stage_floor(state, found.number)
    if found.framed and floor == "kv_cache":
        # "weights" read (transformers' "Loading checkpoint shards: 100%") is not weights placed: a
        # traceback through the load's own frames (model.to("cuda")) says the load is where it failed
        return
    if floor is not None and STAGE_INDEX[floor] > STAGE_INDEX[found.stage]:
        found.stage, found.defaulted = floor, False


def _incomplete(state: LogState, failed: bool, furthest: int) -> bool:
    """No error and no sign the server came up, in a log that shows a start: still loading, killed without
    a message (what an OOM-killed llama-server leaves behind), or stopped on purpose before it was ready
    (a ctrl-c during the load: it never served, so `diagnose && deploy` must not pass it)."""
    timed_out = "mark:ready_timeout" in state.notices  # vramtui's own stop after the ready timeout
    if failed or ("mark:own_stop" in state.notices and not timed_out):
        return False
    if state.exit_code not in (None, 0):
        return False
    came_up = furthest >= STAGE_INDEX["ready"] or state.progress_seen & {"listening", "served"}
    # a milestone shows a start as well as a stage line does (vLLM's "Resolved architecture": files found)
    # ... and so does vramtui's own launch line (QA 35 F8: a program that printed no engine line in the
    # ready_timeout read "No failure", exit 0)
    started = (
        state.startup_seen
        or bool(state.progress_seen & {"files", "weights", "cache"})
        or "mark:own_launch" in state.notices
    )
    return started and not came_up


def _killed_outside(pick: _Pick) -> _Pick:
    """A SIGKILL vramtui saw, when this machine's kernel log shows no OOM kill of it then (QA 32 D4: a
    `kill -9` by hand of an idle server read "the OOM killer, most often", and the wizard's first move was
    a smaller batch): a kill from outside, which no memory setting prevents."""
    return _Pick(pick.found, "other", "killed_outside", inferred=pick.inferred, cut=pick.cut)


# A path a line names: quoted, or after "from" (llama.cpp's "failed to load model from /x", "from file: /x")
_NAMED_PATH_RE = re.compile(
    r"""['"`]((?:/|~|\.{1,2}/)[^'"`]+)['"`]|\bfrom (?:file:? )?((?:/|~|\.{1,2}/)\S+)"""
)
_UNREADABLE_FILE = frozenset({"truncated_file", "bad_magic", "bad_file"})


def folder_named(lines: list[str]) -> str | None:
    """The first path the lines name that is a folder on this machine, or None."""
    for line in lines:
        for found in _NAMED_PATH_RE.finditer(line):
            path = found.group(1) or found.group(2)
            if Path(path).expanduser().is_dir():
                return path
    return None


def _model_folder(pick: _Pick, evidence: list[str]) -> _Pick:
    """A model "file" that does not read because it is a folder here (QA 32 D2: `llama-server -m DIR` read
    "cut short or corrupt", and the advice was to download it again): the path is wrong, not the file."""
    if pick.cause not in _UNREADABLE_FILE or folder_named(evidence) is None:
        return pick
    return _Pick(pick.found, "file_missing", "model_folder", inferred=pick.inferred, cut=pick.cut)


def _killed_then(pick: _Pick, state: LogState, furthest: int) -> _Pick:
    """The failure of a log that stops (or a worker that died) when the kernel's OOM killer struck."""
    found = pick.found
    if found is None:
        stage = STAGES[furthest] if 0 <= furthest < STAGE_INDEX["ready"] else "load_weights"
        text = "the log stops without an error while the kernel's OOM killer ended a process"
        found = _Found(state.lines + 1, text, None, stage)
    return _Pick(found, "host_oom_killed", "oom_killer", inferred=True, cut=pick.cut)


# a shell's 128 + N, or Python's -N, for the signals a crash sends itself
_CRASH_SIGNALS = {
    code: name
    for number, name in ((4, "SIGILL"), (6, "SIGABRT, an abort or failed assert"), (7, "SIGBUS"),
                         (8, "SIGFPE"), (11, "SIGSEGV, a segmentation fault"))
    for code in (128 + number, -number)
}  # fmt: skip


def _exit_failure(pick: _Pick, state: LogState) -> None:
    """No error line, but the process exited with an error code (137: killed, most likely for memory)."""
    exit_code = state.exit_code
    if pick.found is not None or exit_code in (None, 0, 130, 143, -2, -15):
        return
    killed_by_signal = exit_code in (137, -9)
    if killed_by_signal:
        pick.failure, pick.cause = "host_oom_killed", "exit_137"
        text = f"process killed (exit {exit_code}) with no error text"
    elif (signal_name := _CRASH_SIGNALS.get(exit_code)) is not None:
        pick.failure, pick.cause = "other", "crash"
        text = f"process crashed (exit {exit_code}: {signal_name}) with no error text"
    else:
        pick.failure, pick.cause = "other", "exit_code"
        text = f"process exited with code {exit_code} with no error text"
    exit_stage = state.current or "load_weights"
    pick.found = _Found(state.lines + 1, text, None, exit_stage, defaulted=state.current is None)
    pick.inferred = killed_by_signal


def _died_at_start(pick: _Pick, state: LogState) -> None:
    """The process ended (an exit status, a crash) before it printed any line of an engine: no stage was
    running, nothing was loaded (QA 19 F5: a script that died at once read "an error at load weights").
    Only in a log vramtui's launcher wrote from the start: an excerpt may have left the start-up out."""
    if (
        pick.found is None
        or pick.cause not in ("exit_code", "crash")
        or "mark:own_launch" not in state.notices
    ):
        return
    if state.startup_seen or state.engine_started or state.current is not None or state.progress_seen:
        return
    pick.cause = "died_at_start"
    pick.found.stage, pick.found.defaulted = "load_weights", False


def _in_log(found: _Found, state: LogState) -> bool:
    """False for a finding made from the exit code or the kernel: it sits after the log's last line."""
    return found.number <= state.lines


def _evidence(state: LogState, pick: _Pick) -> list[str]:
    """The lines that show the verdict: the first error, the generic one before it, where it was."""
    evidence: list[str] = []
    found = pick.found
    if found is not None and not _in_log(found, state):
        evidence.append(f"after the last line ({state.lines}): {found.text}")
    elif found is not None:
        evidence.append(_quote(found.number, found.text))
        weak = state.weak
        if (
            state.strong is not None
            and weak is not None
            and weak is not found
            and weak.number < state.strong.number
        ):
            evidence.append(_quote(weak.number, weak.text))
        if pick.cut is not None and pick.cut is not found:
            evidence.append(_quote(pick.cut.number, pick.cut.text))
        if state.last_stage_line is not None and state.last_stage_line[0] < found.number:
            # said as what it is: a served request's "200 OK" is where the stage began, not a failure
            evidence.append(
                _quote(*state.last_stage_line, what=f"{state.current} began" if state.current else "")
            )
    evidence.extend(f"recovered: {line}" for line in state.recovered)
    return list(dict.fromkeys(evidence))


def _kernel_confirmation(
    kernel_text: str | None,
    log_times: tuple[float | None, float | None],
    evidence: list[str],
    names: tuple[str, ...] = (),
) -> tuple[str | None, str | None]:
    """The kernel's OOM-kill lines that confirm a kill (added to `evidence`), and a note on others.
    `log_times`: when the log ended, and when it began (either None where not known).

    `names`: the engine's process names; a kill near the log's end of a process named otherwise (a
    browser, a build) is no confirmation, and is not listed as evidence."""
    if not kernel_text:
        return kernel_text, None
    log_time, log_start = log_times
    near, others = kills_near(kernel_text, log_time, log_start)
    if near and names:
        mine = _own_kills(near, names)
        if not mine:
            return "", (
                f"The kernel killed other processes when this log ends ({', '.join(_killed_names(near))}), "
                "not one of this engine's: a supervisor, a timeout or a crash may have ended this one."
            )
        near = mine
    if near:
        evidence.extend(f"kernel: {line}" for line in near[:3])
        return "\n".join(near), None
    # Kills at other times (or a log with no time): shown, never called a confirmation; a log with no
    # time shows only kills of this engine's processes (another engine's kill says nothing of it).
    if log_time is None:
        others = _own_kills(others, names) if names else []
        if not others:
            return None, None
        evidence.extend(f"kernel: {line}" for line in others[-3:])
        return None, (
            f"This machine's kernel log shows OOM kills ({kill_times(others)}): if one of them "
            "was this server, that confirms it (the log does not say when it ran)."
        )
    return None, (
        f"This machine's kernel log shows OOM kills only at other times "
        f"({kill_times(others)}), not when this log ends: look in the kernel log of the "
        "machine and the hour the server ran (`dmesg -T`)."
    )


# The victim as the kernel names it: "Killed process 42 (name)" and "oom-kill:...,task=name,pid=42".
_KILLED_NAME_RE = re.compile(r"killed process \d+ \(([^)]*)\)|\btask=([^,]+),pid=", re.IGNORECASE)


def _own_kills(lines: list[str], names: tuple[str, ...]) -> list[str]:
    """The lines of kills of this engine's processes. One kill prints several lines, and only some name
    the victim ("X invoked oom-killer" names the process that asked for memory): the victims named
    decide, and a line naming none may be ours only when no line names one."""
    named = bool(_killed_names(lines))
    return [line for line in lines if _kills_one_of(line, names, named=named)]


def _killed_names(lines: list[str]) -> list[str]:
    return list(dict.fromkeys(name for line in lines if (name := _killed_name(line))))


def _killed_name(line: str) -> str | None:
    found = _KILLED_NAME_RE.search(line)
    return (found.group(1) or found.group(2)) if found is not None else None


def _kills_one_of(line: str, names: tuple[str, ...], named: bool = False) -> bool:
    """The kernel's line names a process of this engine (or names none: then it may be, unless
    `named`: other lines of the same kills name their victims)."""
    victim = _killed_name(line)
    if victim is None:
        return not named
    killed = victim.lower()
    return any(name.lower() in killed or killed in name.lower() for name in names)


def _shown_formats(state: LogState) -> set[str]:
    formats = set(state.formats)
    confirmations = _quant_requests_and_confirmations(state.quant_lines)[1]
    if any(word in line for line in confirmations for word in _QUANTIZED_WORDS):
        formats.add("quantized")  # the log shows quantized weights (advice: no "quantize it" first)
    if "mark:flash_attn_on" in state.notices or state.figures.get("flash_attn", {}).get("") == 1:
        formats.add("flash_attn")  # llama.cpp's compute buffer then hardly grows with the context
    if "mark:cpu_platform" in state.notices:
        formats.add("cpu_platform")  # the engine runs on the CPU: its memory knobs are the host's
    if "mark:weights_16bit" in state.notices:
        formats.add("weights_16bit")  # the weights load at 16 bits already: "load at 16 bits" is no advice
    if "mark:eager_attention" in state.notices:
        formats.add("eager_attention")  # eager attention's frames: its score matrices took the memory
    return formats


# Notices a failure's cause already tells, better: a shift the model could not make is no shift made.
_TOLD_BY_CAUSE = {
    "shift_unsupported": ("context_shift:",),
    # the model was sent to a GPU torch cannot use: it failed, it does not run on the CPU
    "no_gpu_torch": ("cpu_fallback:",),
}


def _quiet_failures(state: LogState, failed_starting: bool = False, cause: str | None = None) -> list[str]:
    """What went wrong quietly; where the run failed while starting, not where its model would run (it
    never ran: "runs but slow" would be wrong)."""
    told = _TOLD_BY_CAUSE.get(cause or "", ())
    warnings = [
        f"{message} (line {number}: {_clip(text, 160)})"
        for key, (number, text, message) in state.notices.items()
        if not key.startswith(("mark:", *told)) and _said(state, key)
    ]
    if not failed_starting:
        warnings.extend(_placement_warnings(state))
        warnings.extend(_short_context(state))
        warnings.extend(_pool_below_context(state))
    requests, confirmations = _quant_requests_and_confirmations(state.quant_lines)
    wanted = state.requested_quant or (requests[0] if requests else None)
    if wanted:
        words = ls.QUANT_SYNONYMS.get(wanted, (wanted.replace("-", "_"), wanted))
        confirmed = any(any(word in line for word in words) for line in confirmations)
        per_parameter = _bytes_per_parameter(state.figures)
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
            where = "" if state.requested_quant else " (the log itself asks for it)"
            warnings.append(
                f"quantization {wanted!r} was requested{where} but no line of the log confirms it: "
                "the weights may be loading unquantized (16-bit)"
            )
    return warnings[:MAX_EVIDENCE]


# A context per request this short, of a model trained on four times more, is a surprise (Ollama's old
# 2048 default, or its context split over parallel slots): a longer prompt is cut or refused.
_SHORT_CONTEXT = 2048


def _short_context(state: LogState) -> list[str]:
    per_request, trained = (
        state.figures.get(key, {}).get("") for key in ("context_per_sequence", "model_trained_context")
    )
    if not per_request or not trained or per_request > _SHORT_CONTEXT or trained < 4 * per_request:
        return []
    return [
        f"each request gets only {per_request:.0f} tokens of context (the model was trained on {trained:.0f}): "
        "longer prompts are cut or refused; raise the context (per slot, where several requests share it)"
    ]


def _pool_below_context(state: LogState) -> list[str]:
    """A KV pool that holds fewer tokens than the context the engine states beside it (`pool_context`: an
    engine whose scheduler takes no request longer than its pool, SGLang's): the context is the pool's."""
    pool, context = (state.figures.get(key, {}).get("") for key in ("kv_cache_tokens", "pool_context"))
    if not pool or not context or pool >= context:
        return []
    return [
        f"the KV cache pool holds {pool:,.0f} tokens, fewer than the context of {context:,.0f}: a request is "
        "capped at the pool's length and long prompts are refused; give the pool more memory or lower the "
        "context"
    ]


def _said(state: LogState, key: str) -> bool:
    """A notice is said unless a mark it yields to was seen, or a mark it needs was not."""
    needs = state.notice_requires.get(key)
    silenced = any(mark in state.notices for mark in state.notice_unless.get(key, ()))
    return not silenced and (needs is None or needs in state.notices)


_HOST_SHARE_WARNED = 0.10  # a host part of the model at least this large (of all its buffers) is "slow"


def _placement_warnings(state: LogState) -> list[str]:
    """Quiet changes in where the model runs: fit's own changes, layers and weights left on the host."""
    figures = {key: devices.get("") for key, devices in state.figures.items()}
    warnings: list[str] = []
    before, after = figures.get("fit_context_from"), figures.get("fit_context_to")
    if before and after:
        warnings.append(f"llama.cpp's fit lowered the context from {before:.0f} to {after:.0f}")
    on_gpu, layers = figures.get("layers_offloaded"), figures.get("layers_total")
    if on_gpu and layers and on_gpu < layers:  # 0 of M is the CPU fallback's own warning
        if "mark:fit" in state.notices:
            warnings.append(f"fit kept {on_gpu:.0f} of {layers:.0f} layers on the GPU")
        warnings.append(
            f"runs but slow: {layers - on_gpu:.0f} of {layers:.0f} layers "
            f"({(layers - on_gpu) / layers:.0%} of the model) run on the host CPU"
        )
        return warnings
    if on_gpu and layers and on_gpu >= layers:
        # every layer on the GPU: the host part is the token embeddings llama.cpp keeps there, unless most
        # of the weights stayed (a type the GPU backend has no kernels for, TQ1_0/TQ2_0 on CUDA)
        return warnings + _weights_left_on_host(state)
    if _on_host_alone(state) and not state.gpu_absent:
        warnings.append(
            f"{NOTHING_ON_GPU}: every buffer and layer the log shows is in host RAM (the CPU). If this "
            "machine has a GPU, the engine did not use it (a CPU-only build, a driver or library not found)"
        )
        return warnings
    host, devices = _model_buffers(state)
    if devices and host / (host + devices) >= _HOST_SHARE_WARNED:
        warnings.append(
            f"runs but slow: {host / 2**30:.2f} GiB of the model's {(host + devices) / 2**30:.2f} GiB "
            f"({host / (host + devices):.0%}) sit in host memory (CPU buffers): layers or experts run on the CPU"
        )
    return warnings


# the CPU-alone placement warning's opening words (the on-GPU goal finds it by them)
NOTHING_ON_GPU = "nothing runs on a GPU"


def _model_buffers(state: LogState) -> tuple[float, float]:
    """The weights' buffers the log printed: (in host memory, on devices)."""
    buffers = state.figures.get("model_buffer", {})
    host = sum(value for name, value in buffers.items() if is_host_buffer(name))
    return host, sum(value for name, value in buffers.items() if not is_host_buffer(name))


_HOST_MAJORITY_FLOOR = 1 << 30  # a small model's token embeddings can outweigh its layers; 1 GiB cannot


def _weights_left_on_host(state: LogState) -> list[str]:
    """Every layer offloaded, yet most of the weights in host buffers, not moved there on purpose."""
    if "mark:tensors_overridden" in state.notices:
        return []
    host, devices = _model_buffers(state)
    if not devices or host <= devices or host < _HOST_MAJORITY_FLOOR:
        return []
    if overflow := state.figures.get("fit_overflow_layers", {}).get(""):
        return [
            f"runs but slow: every layer counts as offloaded, yet llama.cpp's fit left the experts of "
            f"{overflow:.0f} layers in host memory ({host / 2**30:.2f} GiB of the model's "
            f"{(host + devices) / 2**30:.2f} GiB): they run on the CPU"
        ]
    return [
        f"runs but slow: every layer is offloaded, yet {host / 2**30:.2f} GiB of the model's "
        f"{(host + devices) / 2**30:.2f} GiB stay in host memory (CPU buffers): the GPU backend has no "
        "kernels for some of the file's tensor types (TQ1_0/TQ2_0 on CUDA, for one), so they run on the CPU"
    ]


_PLACED_FIGURES = ("model_buffer", "kv_buffer", "compute_buffer", "rs_buffer")


def _on_host_alone(state: LogState) -> bool:
    """Every buffer and layer the log places is on the CPU backend, none on a device, and no other line
    already said the model runs on the CPU (an engine built for the CPU says so by its own mark, and a
    vramtui launch whose budget is enforced on the host ran where no GPU was found)."""
    if any(f"mark:{mark}" in state.notices for mark in ("cpu_platform", "cpu_intent", "layer_on_device")):
        return False
    if state.host_budget or "host_budget" in state.figures:
        return False  # vramtui launched it under a budget on the host: it found no GPU to enforce one on
    if any(key.startswith("cpu_fallback:") and _said(state, key) for key in state.notices):
        return False
    names = [name for key in _PLACED_FIGURES for name in state.figures.get(key, {}) if name]
    if not all(is_cpu_backend_buffer(name) for name in names):  # a pinned CUDA_Host proves a GPU too
        return False
    return bool(names) or "mark:layer_on_host" in state.notices


def _bytes_per_parameter(figures: dict[str, dict[str, int | float]]) -> float | None:
    parameters = figures.get("model_parameters", {}).get("")
    loaded = figures.get("weights_loaded", {}).get("")
    return loaded / parameters if parameters and loaded else None


def _quant_requests_and_confirmations(quant_lines: list[str]) -> tuple[list[str], list[str]]:
    """Quantizations the log asks for, and the quantization lines that are not such requests."""
    requests: list[str] = []
    confirmations: list[str] = []
    for line in quant_lines:
        asked = False
        for regex, name in ls.QUANT_REQUESTS:
            match = regex.search(line)
            if match is not None:
                asked = True
                requests.append(name or match.group("name"))
        if not asked and not any(word in line for word in ls.QUANT_NOT_CONFIRMING):
            confirmations.append(line)
    return requests, confirmations


def _exact(flat: dict[str, int | float], profile: LogProfile | None) -> dict[str, int | float]:
    """Each rounded figure the engine also stated exactly (its own setting of the same bytes), as that."""
    for rounded, (exact, within) in (profile.exact_figures if profile is not None else {}).items():
        if rounded in flat and exact in flat and abs(flat[rounded] - flat[exact]) <= within:
            flat[rounded] = flat[exact]
    return flat


def _figures_flat(figures: dict[str, dict[str, int | float]]) -> dict[str, int | float]:
    flat: dict[str, int | float] = {}
    for key, devices in figures.items():
        if list(devices) == [""]:
            flat[key] = devices[""]
            continue
        flat[key] = sum(devices.values())
        # What sits on accelerators (CPU, CPU_Mapped, CUDA_Host ... are host memory).
        on_devices = [value for name, value in devices.items() if not is_host_buffer(name)]
        if on_devices:
            flat[f"{key}_gpu"] = sum(on_devices)
        for device, value in devices.items():
            flat[f"{key}.{device}"] = value
    return flat


def _wrong_format(profile: LogProfile | None, failure: str, cause: str | None, formats: set[str]) -> bool:
    """A file the backend cannot read by format: safetensors/AWQ/GPTQ to llama.cpp, a GGUF to a torch engine.

    A bad magic in a file named .gguf stays a broken download ("other", as the corpus labels it).
    """
    if profile is None:
        return False
    if profile.reads_gguf:
        return (
            cause in ("bad_magic", "bad_file", "load_failed")
            and "gguf" not in formats
            and bool(formats & {"safetensors", "awq", "gptq"})
        )
    if profile.is_torch and "gguf" in formats:
        return failure == "unknown_arch" or (failure == "other" and cause in _GENERIC_CAUSES)
    return False


_GENERIC_CAUSES = frozenset(
    {"exception", "traceback", "error", "engine_failed", "worker_failed", "load_failed", "cut_traceback"}
)


_HOST_ALLOCATION_CAUSES = frozenset({"host_alloc", "host_ram_short", "blas_alloc"})
# Bytes per counted parameter from which a bitsandbytes load is taken as unquantized: 16-bit weights take
# 2.0. (bitsandbytes packs two 4-bit weights in a byte and numel() counts the bytes, so a 4-bit load shows
# about 1.0 on the linear layers, 8-bit 1.0; 16-bit embeddings and norms raise the mean, never to 2.0.)
_UNQUANTIZED_BYTES_PER_PARAMETER = 1.9
_BNB_REQUESTS = frozenset({"bnb-4bit", "bnb-8bit", "bitsandbytes"})
# Words on a (non-request) log line that show the weights are quantized.
_QUANTIZED_WORDS = ("bitsandbytes", "linear4bit", "linear8bit", "bnb", "nf4", "awq", "gptq", "is quantized")
# Under vramtui's host budget (no GPU), llama.cpp's context buffers are host allocations too.
_BUDGET_ALLOCATION_CAUSES = _HOST_ALLOCATION_CAUSES | {
    "kv_alloc_failed",
    "compute_alloc_failed",
    "null_return",
}
# The first error of a failed buffer allocation, before the line that says whose buffer it was.
_BUFFER_CAUSES = frozenset({"host_alloc", "cuda_oom", "device_alloc"})
_SAME_REPORT_LINES = 5
_BACKTRACE_LINES = 40  # ggml_print_backtrace's frames of one crash
