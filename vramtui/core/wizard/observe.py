"""What one run showed, as the wizard reasons about it: an `Observation` built from a CheckResult.

The sizes come from the log diagnosis (`Diagnosis.engine_figures`, the one parser of the engine's
buffer lines) and are read as the one memory vocabulary (`vramtui.core.memory.parts`). Besides the
sizes, verification compares a few settings the engine echoes (file type, KV type; flash attention as a
figure of the diagnosis).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vramtui.core.backends import get_backend
from vramtui.core.backends.base import SettingsEcho
from vramtui.core.errors import VramtuiError
from vramtui.core.logs.stages import STAGES
from vramtui.core.memory.parts import MemoryBill, Part, bill_from_figures
from vramtui.core.units import MIB

# The parts a run's buffers are compared by (what the wizard predicts and the engine prints).
BUFFER_PARTS: tuple[Part, ...] = ("weights", "kv_cache", "compute")

# Our figure name -> the diagnosis' engine_figures key (bytes); names as the step record saves them.
ENGINE_FIGURE_NAMES = {
    "model_buffer": "model_buffer",
    "weights_loaded": "weights_loaded",  # vLLM's "Loading model weights took X GiB"
    "kv_buffer": "kv_buffer",
    "kv_cache_available": "kv_cache_available",  # vLLM's "Available KV cache memory" (QA 39 F3: steps had {})
    "compute_buffer": "compute_buffer",
    "activation_peak": "activation_peak",  # vLLM's profile run's activations
    "failed_alloc": "oom_requested",
}

_TAIL_BYTES = 8 * MIB  # startup logs are small; a runaway one is read from its tail, where the failure is


def part_bytes(bill: MemoryBill, part: Part) -> int:
    """One part's bytes wherever it sits (every device and the host)."""
    return sum(bill.get(part, place) for place in bill.places)


@dataclass
class Observation:
    """One run, as the wizard reasons about it."""

    ready: bool
    smoke_ok: bool | None
    stage: str | None
    failure_stage: str | None
    failure: str | None
    first_error: str | None = None
    figures: dict[str, int] = field(default_factory=dict)  # ENGINE_FIGURE_NAMES, in bytes
    facts: dict[str, str] = field(default_factory=dict)
    engine: dict[str, int] = field(default_factory=dict)  # the diagnosis' engine_figures, as they are
    replay_ok: bool | None = None  # the saved (long) request, when one was replayed
    unsupported: list[str] = field(default_factory=list)  # parameters the launcher could not pass on
    replay_meaning: str = ""
    advice: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    peak_mib: float | None = None
    resident_mib: float | None = None
    samples: int = 0  # memory samples taken of the run (0: not known); one is no peak (QA 22 #10)
    load_time_s: float | None = None
    ttft_s: float | None = None
    tokens_per_s: float | None = None
    log_file: str | None = None
    log_offset: int = 0  # where this run's lines start in log_file (a restart that appended to it)
    command: list[str] = field(default_factory=list)
    message: str = ""
    cause: str | None = None  # the diagnosis' finer cause (cpu_share_short, kv_bytes_over_free ...)
    # The tree's resident memory when the weights had loaded (before the KV cache and the profile run):
    # what a failure after it had left to grow into is its peak minus this.
    weights_rss_mib: float | None = None
    budget_mib: float | None = None  # the memory budget the run was judged by
    # The series peak_mib and resident_mib are read from ("process", "gpu:0"; core.memory.series): the
    # memory pane shows the same figures on that series, and says its name as the wizard does.
    memory_series: str | None = None

    @property
    def memory_words(self) -> str | None:
        """What peak_mib and resident_mib measure, in words ('process tree RSS (host)')."""
        from vramtui.core.memory.series import series_name

        return series_name(self.memory_series) if self.memory_series else None

    @property
    def runs_over_budget(self) -> bool:
        """Up and answering the smallest request, judged over the budget by its measured peak (a server
        vramtui attached to): no stage failed, it holds more than the budget allows."""
        return (
            not self.ready
            and bool(self.smoke_ok)
            and self.budget_mib is not None
            and self.peak_mib is not None
            and self.peak_mib > self.budget_mib
        )

    def over_budget_text(self) -> str:
        return f"it runs at {self.peak_mib or 0:.0f} MiB, over the {self.budget_mib or 0:.0f} MiB budget"

    @property
    def works(self) -> bool:
        """Up, answering the smallest request, and the saved failing request too when one was replayed."""
        return self.ready and bool(self.smoke_ok) and self.replay_ok is not False

    @property
    def reached(self) -> int:
        """How far it got, as a number: the failing stage's index, or past `ready` when it answered."""
        if self.works:
            return len(STAGES) + 1
        if self.ready:
            return STAGES.index("ready")
        stage = self.failure_stage or self.stage
        return STAGES.index(stage) if stage in STAGES else -1

    @property
    def signature(self) -> tuple[object, ...]:
        """Where and how it failed, with every size the engine printed: equal means nothing changed."""
        return (
            self.failure_stage,
            self.failure,
            tuple(sorted(self.figures.items())),
            tuple(sorted(self.engine.items())),
        )

    @property
    def has_sizes(self) -> bool:
        return bool(self.figures or self.engine)

    @property
    def measured(self) -> MemoryBill:
        """What the engine printed it holds, by part and place (the memory vocabulary)."""
        return bill_from_figures(self.engine)

    def held_bytes(self) -> int:
        """The buffers the engine printed (weights, KV cache, compute), wherever they sit."""
        measured = self.measured
        return sum(part_bytes(measured, part) for part in BUFFER_PARTS)

    def allocated_bytes(self) -> int:
        """What the engine had allocated (printed) plus the allocation that failed."""
        return self.held_bytes() + self.figures.get("failed_alloc", 0)


def _diagnosis_of(check: Any) -> Any | None:
    """The run's diagnosis; a check without one (a replayed run) has its log file diagnosed here."""
    diagnosis = getattr(check, "diagnosis", None)
    log_file = getattr(check, "log_file", None)
    if diagnosis is None and log_file and Path(log_file).is_file():
        from vramtui.core.logs.diagnose import diagnose_file

        diagnosis = diagnose_file(log_file)
    return diagnosis


def _settings_of(backend: str, log_file: str | None, offset: int = 0) -> dict[str, str]:
    """The settings the engine echoed in this run's part of the log (from `offset`: a restarted server may
    append to the file the one before it wrote), in its own words (its Backend's `echo`)."""
    echo = _echo_of(backend)
    if echo is None or not log_file or not Path(log_file).is_file():
        return {}
    with open(log_file, "rb") as handle:
        handle.seek(0, 2)
        size = handle.tell()
        handle.seek(max(offset if offset <= size else 0, size - _TAIL_BYTES))
        return echo.read(handle.read().decode("utf-8", "replace"))


def _echo_of(backend: str) -> SettingsEcho | None:
    try:
        return get_backend(backend).echo if backend else None
    except VramtuiError:  # a record of an engine this version does not know
        return None


def _engine_figures(diagnosis: Any | None) -> dict[str, int]:
    engine = getattr(diagnosis, "engine_figures", None) or {}
    return {k: int(v) for k, v in engine.items() if isinstance(v, int | float) and not isinstance(v, bool)}


def step_memory(check: Any) -> tuple[float | None, float | None]:
    """A step's peak and resident (plateau) figures: the readings of its own samples, taken as the
    memory pane and `vramtui replay` take them; the launcher's running figures when none were kept."""
    return step_memory_of(check)[:2]


def step_memory_of(check: Any) -> tuple[float | None, float | None, str | None]:
    """`step_memory` and the series key it was read from (None: the launcher's running figures)."""
    from vramtui.core.memory.series import run_series

    key, readings = run_series(getattr(check, "samples", None) or [], getattr(check, "events", None) or [])
    # a process holds some memory: 0 is no sample taken (QA 6: a fast failure read "peak RSS 0 B")
    peak = getattr(check, "peak_mib", None) or None
    resident = getattr(check, "resident_mib", None) or None
    if readings is None:
        return peak, resident, None
    plateau = readings.plateau_mib if readings.plateau_mib is not None else resident
    return readings.peak_mib or None, plateau or None, key


def observe(check: Any) -> Observation:
    """Turn a CheckResult (or anything shaped like one) into an Observation."""
    diagnosis = _diagnosis_of(check)
    smoke = getattr(check, "smoke", None)
    replayed = getattr(check, "replay", None)
    log_file = getattr(check, "log_file", None)
    engine = _engine_figures(diagnosis)
    figures = {name: engine[key] for name, key in ENGINE_FIGURE_NAMES.items() if engine.get(key, 0) > 0}
    log_offset = int(getattr(check, "log_offset", 0) or 0)
    facts = _settings_of(str(getattr(check, "backend", "") or ""), log_file, log_offset)
    if engine.get("context"):
        facts["n_ctx"] = str(engine["context"])  # llama.cpp's "n_ctx = ...", as the diagnosis read it
    failure = getattr(check, "failure", None)
    peak_mib, resident_mib, memory_series = step_memory_of(check)
    return Observation(
        ready=bool(getattr(check, "ready", False)),
        smoke_ok=None if smoke is None else bool(getattr(smoke, "ok", False)),
        replay_ok=None if replayed is None else bool(getattr(replayed, "ok", False)),
        replay_meaning=str(getattr(replayed, "meaning", "") or ""),
        unsupported=[str(p) for p in getattr(check, "unsupported", None) or []],
        stage=getattr(check, "stage", None),
        failure_stage=getattr(check, "failure_stage", None),
        failure=None if failure in ("none", "") else failure,
        first_error=getattr(getattr(check, "diagnosis", None), "first_error_text", None),
        figures=figures,
        facts=facts,
        engine=engine,
        advice=list(getattr(getattr(check, "diagnosis", None), "advice", None) or []),
        warnings=list(getattr(getattr(check, "diagnosis", None), "warnings", None) or [])
        + list(getattr(check, "warnings", None) or []),
        peak_mib=peak_mib,
        resident_mib=resident_mib,
        samples=len(getattr(check, "samples", None) or []),
        load_time_s=getattr(check, "load_time_s", None),
        ttft_s=getattr(check, "ttft_s", None),
        tokens_per_s=getattr(check, "tokens_per_s", None),
        log_file=log_file,
        log_offset=log_offset,
        command=list(getattr(check, "command", None) or []),
        message=str(getattr(check, "message", "") or ""),
        cause=getattr(diagnosis, "cause", None),
        weights_rss_mib=_rss_at(check, "weights_loaded"),
        budget_mib=getattr(check, "memory_budget_mib", None),
        memory_series=memory_series,
    )


def _rss_at(check: Any, kind: str) -> float | None:
    """The tree's resident MiB at the run's first event of `kind` (the last sample before it)."""
    at = next((event.t for event in getattr(check, "events", None) or [] if event.kind == kind), None)
    if at is None:
        return None
    rss = None
    for sample in getattr(check, "samples", None) or []:
        host = getattr(sample, "host", None)
        if sample.t > at:
            break
        if host is not None and host.tree_rss:
            rss = host.tree_rss
    return rss / MIB if rss else None
