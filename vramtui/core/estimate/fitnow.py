"""Does one more model fit in what is free now (`vramtui ps --fits`): the estimator against each card's free
memory, not its total; on a machine without a GPU, against the host's available memory.

An engine that takes a share of the whole card (vLLM's --gpu-memory-utilization) needs that share free:
its answer names the share that fits in what is free.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

from vramtui.core.estimate.estimator import Estimate, Settings, capped_parallel, estimate, max_context
from vramtui.core.estimate.modelinfo import ModelInfo
from vramtui.core.units import GIB, MIB, format_bytes

# What a share asked of a whole card leaves free for the rest (the CUDA context of other processes).
_SHARE_SLACK = 512 * MIB


@dataclass
class FitAnswer:
    """One place (a GPU, or the host) and whether the model fits there now, with which settings."""

    place: str
    free_bytes: int
    total_bytes: int | None
    fits: bool
    context: int
    max_context: int | None
    max_parallel: int | None
    share: float | None = None  # for an engine that takes a share of the card: the one that fits
    needs_bytes: int = 0
    usable_bytes: int | None = None  # what the estimate lets the model use of the room (its safety line)
    runtime_bytes: int = 0  # of needs_bytes: the engine's own (CUDA context, or the process measured)
    notes: list[str] = field(default_factory=list)
    room_words: str = "free now"  # what bounds `free_bytes`: what is free, or the profile's budget
    # each of max_parallel's sequences holds this many tokens; where the engine's context is the whole cache
    # its slots share (llama.cpp's -c split by -np), the flags that give each that many (QA 25 P2)
    parallel_tokens: int | None = None
    parallel_flags: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "place": self.place,
            "free_mib": round(self.free_bytes / MIB, 1),
            "room": self.room_words,  # what bounds free_mib: "free now", or the profile's memory_budget
            "total_mib": None if self.total_bytes is None else round(self.total_bytes / MIB, 1),
            "fits": self.fits,
            "context": self.context,
            "max_context": self.max_context,
            "max_parallel": self.max_parallel,
            "parallel_tokens": self.parallel_tokens,
            "parallel_flags": self.parallel_flags,
            "share": self.share,
            "needs_mib": round(self.needs_bytes / MIB, 1),
            "usable_mib": None if self.usable_bytes is None else round(self.usable_bytes / MIB, 1),
            "runtime_mib": round(self.runtime_bytes / MIB, 1),
            "notes": self.notes,
        }

    def describe(self) -> str:
        verdict = "FITS" if self.fits else "does not fit"
        said = (
            f"{self.place}: {format_bytes(self.free_bytes, 1)} {self.room_words} — {verdict} at context {self.context:,} "
            f"(needs {format_bytes(self.needs_bytes, 1)})"
        )
        if not self.fits and self.usable_bytes and self.needs_bytes <= self.free_bytes:
            # it would squeeze into what is free, but past the line kept for spikes and fragmentation
            said += f", over the {self._line()} ({format_bytes(self.usable_bytes, 1)} usable)"
        if self.max_context:
            said += f"; the largest context that fits: {self.max_context:,}"
        if self.max_parallel and self.fits:
            each = f" of {self.parallel_tokens:,} tokens" if self.parallel_tokens else ""
            flags = f" ({self.parallel_flags})" if self.parallel_flags else ""
            said += f", {self.max_parallel} sequences{each} at once{flags}"
        if self.share is not None:
            said += f"; with a share of {self.share:.2f} of {self._whole()} (what is free of it)"
        return "\n".join([said, *(f"  note: {note}" for note in self.notes)])

    def _whole(self) -> str:
        return "host RAM" if self.place.startswith("host") else "the card"

    def _line(self) -> str:
        room = self.total_bytes if self.share is not None and self.total_bytes else self.free_bytes
        of = self._whole() if self.share is not None else "what is free"
        return f"{100 * (self.usable_bytes or 0) / max(room, 1):.0f}% line of {of}"


def fits_now(
    info: ModelInfo,
    settings: Settings,
    now: Any,
    budget: int | None = None,
    engine_bytes: int = 0,
    calibrate: bool = False,
) -> list[FitAnswer]:
    """An answer per GPU (`now`: a servers.Snapshot), or one for the host when there is none; `budget`: a
    profile's memory_budget, which caps what is free; `engine_bytes`: what the engine process itself holds
    of a host budget before any model buffer (its idle footprint), which the budget's buffers do not get;
    `calibrate`: add earlier runs' measured terms on this machine, as `estimate` does."""
    gpus = [gpu for gpu in now.gpus if gpu.free_bytes is not None]
    if budget:  # the room is the budget's: the wizard's line, not a card's 80% (QA 36 F3)
        settings = replace(settings, room_is_budget=True)
    if not gpus:
        room = budget - engine_bytes if budget else now.host_available_bytes
        available = min(now.host_available_bytes, max(room, 0))
        host = replace(settings, device_bytes=max(available, MIB), on_gpu=False, gpus=())
        if calibrate and not engine_bytes:  # a measured footprint already is the engine's own share
            _calibrated(host)
        place = "host (no GPU here)"
        if budget and _share_of_machine(host):
            answers = [_under_budget(place, budget, now.host_total_bytes, info, host)]
        elif host.memory.kv_from_budget and not host.kv_cache_memory and now.host_total_bytes:
            # vLLM's CPU build takes its share of the machine's whole memory, and refuses to start when that
            # is not free (QA 10: FITS at 0.92 of 23.5 GiB with 21.5 GiB free; vLLM refused it)
            answers = [_on_card(place, available, now.host_total_bytes, info, host)]
        else:
            answers = [_answer(place, available, now.host_total_bytes, info, host)]
        if not answers[0].runtime_bytes and not engine_bytes:
            answers[0].notes.append(
                "the engine process's own memory is not in this figure: no measured run of this engine "
                "on this machine is used (`vramtui check` or `record` makes one)"
            )
        elif host.calibration is not None:
            answers[0].notes.append(host.calibration.describe())
    else:
        if calibrate:
            settings = _calibrated(replace(settings))
        answers = []
        for gpu in gpus:
            free = min(max(int(gpu.free_bytes), 0), budget or int(gpu.free_bytes))
            answers.append(_on_card(f"GPU {gpu.index} {gpu.name}", free, gpu.total_bytes, info, settings))
            if settings.calibration is not None:
                answers[-1].notes.append(settings.calibration.describe())
    if budget:
        less = f" after the engine's own {engine_bytes / MIB:.0f} MiB" if engine_bytes and not gpus else ""
        limit = max(budget - engine_bytes, 0) if not gpus else budget
        for answer in answers:
            if answer.free_bytes < limit:  # the machine has less free than the budget: it bounds the room
                answer.notes.append(f"within the profile's memory_budget of {format_bytes(budget, 1)}{less}")
                continue
            # the budget, not the machine, bounds the room (QA 12: "almost nothing is free here" with 22 GiB
            # free, and the budget said as 0.24 GiB)
            answer.notes = [note for note in answer.notes if note != _NEARLY_NOTHING]
            answer.room_words = f"left in the profile's memory_budget of {format_bytes(budget, 1)}{less}"
    return sorted(answers, key=lambda answer: (not answer.fits, -answer.free_bytes))


_NEARLY_NOTHING = "almost nothing is free here"


def _share_of_machine(settings: Settings) -> bool:
    """An engine whose CPU cache, unless set outright, is a share of the whole machine whatever a budget
    says (vLLM's CPU build)."""
    from vramtui.core.backends import get_backend

    return bool(settings.memory.kv_from_budget and get_backend(settings.backend).cpu_share_words)


def _under_budget(
    place: str, budget: int, total: int | None, info: ModelInfo, settings: Settings
) -> FitAnswer:
    """Under a budget, an engine whose cache is a share of the machine: sized as `estimate --memory-budget`
    sizes it (the budget holds the whole run, the worker's address space its runtime row; the share is the
    machine's), with the cache size that fits the budget where none is set. No context helps a cache the
    share sizes (QA 29 Q5: "does not fit at context 1,024 (needs 1.6 GiB)" beside "2.0 GiB left" and "the
    largest context that fits: 4,096")."""
    from vramtui.core.backends import get_backend
    from vramtui.core.estimate.inputs import cpu_run_card
    from vramtui.core.logs.advice import engine_size

    sized = replace(settings, device_bytes=budget, share_of_bytes=cpu_run_card(), gpus=())
    answer = _answer(place, budget, total, info, sized)
    if settings.kv_cache_memory:
        return answer
    answer.max_context = answer.max_parallel = None
    fit = estimate(info, sized).kv_cache_memory_fit
    if fit:
        size, flag = engine_size(fit, down=True), get_backend(settings.backend).knob("kv_cache_memory")
        answer.notes.append(
            "the KV cache is a share of the whole machine, not of the budget: set it outright, "
            f'kv_cache_memory = "{size}" in the profile ({flag} {size})'
        )
    return answer


def _calibrated(settings: Settings) -> Settings:
    """The settings with this machine's calibration (core/estimate/calibrate.py) for their device kind."""
    from vramtui.core.estimate.calibrate import calibration_for

    settings.calibration, _notes = calibration_for(settings)
    return settings


def _on_card(place: str, free: int, total: int | None, info: ModelInfo, settings: Settings) -> FitAnswer:
    if settings.memory.kv_from_budget and total:
        # it takes its share of the whole card, and refuses to start when that share is not free
        # rounded down: --gpu-memory-utilization 0.37 of 80 GiB is more than 0.3687 of it
        share = math.floor(min(settings.share, (free - _SHARE_SLACK) / total) * 100) / 100
        if share <= 0:
            answer = FitAnswer(place, free, total, False, settings.context or 0, None, None, share=None)
            answer.notes.append("less is free than the engine's runtime needs alone")
            return answer
        sized = replace(settings, device_bytes=total, safety=share, gpus=())
        answer = _answer(place, free, total, info, sized)
        over = answer.needs_bytes + _SHARE_SLACK - free
        if over > 0:
            # what the share leaves out needs room too (vLLM's CPU build: its API server and engine core
            # beside the worker whose share it is): a share that smaller
            share = math.floor((share - over / total) * 100) / 100
            if share <= 0:
                answer.fits, answer.share = False, None
                return answer
            answer = _answer(place, free, total, info, replace(sized, safety=share))
        answer.share = share
        return answer
    return _answer(place, free, total, info, replace(settings, device_bytes=max(free, MIB), gpus=()))


def _sequences(answer: FitAnswer, settings: Settings) -> None:
    """How long each of the sequences at once is, and, where the slots share one context, the engine's
    flags that give each that much (`-c 2359296 -np 9`, not `-c 262144 -np 9`: 29k tokens a slot)."""
    from vramtui.core.backends import get_backend

    if not answer.max_parallel:
        return
    per_sequence = answer.context  # max_parallel's sequences are each the context asked for
    answer.parallel_tokens = per_sequence
    if settings.memory.context_is_per_sequence or answer.max_parallel < 2:
        return
    backend = get_backend(settings.backend)
    context, parallel = backend.knob("context"), backend.knob("parallel")
    if context and parallel:
        total = per_sequence * answer.max_parallel
        answer.parallel_flags = (
            f"{context} {total} {parallel} {answer.max_parallel}: the slots share {context}"
        )


def _answer(place: str, free: int, total: int | None, info: ModelInfo, settings: Settings) -> FitAnswer:
    est: Estimate = estimate(info, settings)
    answer = FitAnswer(
        place,
        free,
        total,
        est.fits,
        est.context,
        max_context(info, settings) or None,
        capped_parallel(info, settings) or None,
        needs_bytes=est.total_bytes,
        usable_bytes=est.usable_bytes,
        runtime_bytes=est.overhead_bytes,
    )
    _sequences(answer, settings)
    if est.reason:
        answer.notes.append(est.reason)
    if free < GIB // 4:
        answer.notes.append(_NEARLY_NOTHING)
    return answer
