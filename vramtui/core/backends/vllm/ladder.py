"""vLLM's downgrade ladders, per failing stage: it offloads by size (cpu_offload), never by layer."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from vramtui.core.backends.base import (
    BATCH_DOWN,
    CHUNKING,
    CONTEXT_DOWN,
    KV_DTYPE_DOWN,
    PARALLEL_DOWN,
    PREQUANTIZED_FILE,
    QUANT_DOWN,
    SHORTER_INPUT,
    SMALLER_MODEL,
    FailedRun,
    Ladder,
    Rung,
)
from vramtui.core.backends.vllm.addressing import engine_held  # the Backend's address_space_floor
from vramtui.core.memory.room import (
    kv_bytes_for_budget,
    kv_bytes_for_request,
    kv_set_aside,
    one_request_kv_bytes,
)
from vramtui.core.units import format_bytes

MEM_SHARE_UP = Rung(
    "mem_share", "up", "a larger memory share for the engine", "less room for other processes"
)

# vLLM's --cpu-offload-gb: the first layers' weights stay in pinned host RAM and are read over PCIe by
# every forward pass. It keeps the model and its quality, so it comes after a lower quantization
# (fp8 loses little and runs faster) and before a smaller model.
CPU_OFFLOAD_GB_UP = Rung(
    "cpu_offload",
    "up",
    "keep N GiB of the weights in host RAM (--cpu-offload-gb N)",
    "much slower generation: every forward pass reads those weights from host RAM over PCIe "
    "(tokens/s falls with the GiB moved)",
)

# A KV cache set outright (--kv-cache-memory-bytes) is held whole from the start: fewer sequences, a shorter
# context or fp8 free none of it; fewer bytes do (QA 29 Q6). None where the share sizes the cache.
KV_BYTES_DOWN = Rung(
    "kv_cache_memory",
    "down",
    "a smaller KV cache, set outright (--kv-cache-memory-bytes)",
    "fewer tokens cached at once: fewer or shorter requests at a time",
)

# vLLM has one smaller KV type: its cost in vLLM's words, not llama.cpp's q4_0/q8_0 (QA 9)
FP8_KV = replace(KV_DTYPE_DOWN, cost="slightly lower answer quality (fp8 keys and values)")

LADDER: Ladder = {
    # No flash-attention rung: the attention backend changes neither the paged KV cache nor the profile.
    "kv_cache": (KV_BYTES_DOWN, PARALLEL_DOWN, FP8_KV, CONTEXT_DOWN, MEM_SHARE_UP),
    # the cache cannot hold ONE request of --max-model-len: fewer sequences change nothing (vLLM sizes
    # that check by one request), a smaller type or a shorter context does (QA 10: max-num-seqs 4 -> 2)
    "kv_cache:kv_too_small": (FP8_KV, CONTEXT_DOWN, MEM_SHARE_UP),
    "load_weights": (QUANT_DOWN, PREQUANTIZED_FILE, CPU_OFFLOAD_GB_UP, SMALLER_MODEL),
    "inference": (SHORTER_INPUT, BATCH_DOWN, PARALLEL_DOWN, CHUNKING),
}
KV_DTYPE_ORDER: tuple[str, ...] = ("auto", "fp8")
# On-the-fly quantization from largest to smallest (None: 16-bit).
QUANT_ORDER: tuple[str | None, ...] = (None, "fp8")


# --- the change vLLM's own failure message names ------------------------------------------------------

_MIB = 1 << 20


def _size(nbytes: float) -> str:
    """A kv_cache_memory value: whole MiB, at least 16."""
    return f"{max(16, int(nbytes // _MIB))}MiB"


def named_fix(run: FailedRun) -> tuple[str, object, str] | None:
    """(param, value, why) for the failures whose message says what to change, with the figure it gives.

    - the CPU build's share of NUMA node 0 is more than is free: ask for what is free;
    - the KV bytes asked for are more than is free: ask for about half of what is free;
    - the KV cache (sized outright) cannot hold one request of --max-model-len: raise it to hold one;
      sized by the share, lower --max-model-len to the length vLLM says fits;
    - the kernel killed the worker while its KV cache was being set up: size the cache to the room the
      tree still had once the weights were in (its peak less its memory then);
    - --max-model-len past the model's own length: the model's own length.
    """
    figures, params = run.figures, run.params
    kv_bytes = figures.get("kv_cache_memory_bytes")
    budget = figures.get("host_budget")
    if run.cause == "cpu_share_short" and budget and figures.get("node_free_memory"):
        # under a host budget no share of the machine fits it (QA 5: 0.92 -> 0.86 -> 0.82 of 23.5 GiB for a
        # 6 GiB budget): the KV cache sized outright, half of what the budget leaves beside the engine
        size = kv_bytes_for_budget(
            min(budget, figures["node_free_memory"]), budget, engine_held(run.peak_bytes or 0)
        )
        why = (
            f"vLLM's CPU build takes --gpu-memory-utilization of NUMA node 0's memory, and no share of the "
            f"machine keeps within the {budget / 2**30:.1f} GiB budget: the KV cache sized outright does "
            "(the share then does not count)"
        )
        return "kv_cache_memory", _size(size), why
    if run.cause == "cpu_share_short" and figures.get("node_free_memory") and figures.get("node_memory"):
        share = int((figures["node_free_memory"] / figures["node_memory"] - 0.02) * 100) / 100
        if share > 0:
            why = (
                f"vLLM's CPU build takes --gpu-memory-utilization of NUMA node 0's memory, and only "
                f"{figures['node_free_memory'] / 2**30:.2f} of {figures['node_memory'] / 2**30:.2f} GiB was "
                "free at start: its message says to ask for less"
            )
            return "mem_share", share, why
    if run.cause == "kv_bytes_over_free" and figures.get("node_free_memory"):
        why = (
            f"--kv-cache-memory-bytes asked for more than the {figures['node_free_memory'] / 2**30:.2f} GiB "
            "node 0 had free: half of that leaves the worker room for the rest"
        )
        return "kv_cache_memory", _size(figures["node_free_memory"] / 2), why
    if run.failure == "kv_cache_too_small":
        return _kv_too_small(figures, kv_bytes, _room_beside_engine(run))
    if run.failure == "host_oom_killed" and run.stage == "kv_cache" and kv_bytes:
        return _killed_kv(run, kv_bytes)
    if run.failure == "host_oom" and run.stage == "kv_cache" and figures.get("host_budget"):
        return _kv_over_budget(run)
    if run.cause == "max_len_over_model" and figures.get("max_model_len_derived"):
        derived = int(figures["max_model_len_derived"])
        return "context", derived, f"the model's own length is {derived} tokens (max_position_embeddings)"
    del params
    return None


def _room_beside_engine(run: FailedRun) -> float | None:
    """What the host budget leaves beside the engine this run measured (None: no budget)."""
    budget = run.figures.get("host_budget")
    return budget - engine_held(run.peak_bytes or 0) if budget else None


def _kv_too_small(
    figures: Mapping[str, float], kv_bytes: float | None, room: float | None
) -> tuple[str, object, str] | None:
    context, fit = figures.get("context"), figures.get("max_model_len_fit")
    request = one_request_kv_bytes(figures)
    needed = kv_bytes_for_request(request) if request else None
    if kv_bytes and needed and room is not None and needed > room and fit and context:
        # QA 31 W1: a cache that holds one request would not fit the budget beside the engine (1016 MiB ->
        # 4096 MiB under 4 GiB beside 2 GiB, a relaunch that could only fail): the context the cache holds
        why = (
            f"the KV cache set outright ({kv_bytes / _MIB:.2f} MiB) holds {int(fit)} tokens, and one "
            f"{int(context)}-token request needs {needed // _MIB} MiB, more than the {max(room, 0) / _MIB:.0f} MiB "
            "the budget leaves beside the engine: a shorter context fits the cache there is"
        )
        return "context", int(fit), why
    if kv_bytes and needed:
        held = f"holds {int(fit)} tokens, not" if fit else "cannot hold"
        why = (
            f"the KV cache is set outright ({kv_bytes / _MIB:.2f} MiB) and {held} one "
            f"{int(context or 0)}-token request: {needed // _MIB} MiB holds one (the share does not count here)"
        )
        return "kv_cache_memory", _size(needed), why
    if fit and context:
        why = f"vLLM says the KV cache holds a request of {int(fit)} tokens at most: its message names --max-model-len"
        return "context", int(fit), why
    return None


def _kv_over_budget(run: FailedRun) -> tuple[str, object, str] | None:
    """The KV cache vLLM set aside (asked for, or its share of the machine) did not fit the budget: the
    context does not size it, its bytes do; half of what the budget leaves beside the engine."""
    figures = run.figures
    kv = kv_set_aside(figures)
    if not kv:
        return None
    budget, used = figures["host_budget"], engine_held(run.peak_bytes or 0)
    size = kv_bytes_for_budget(kv, budget, used)
    how = "as asked" if figures.get("kv_cache_memory_bytes") else "its share of the machine's memory"
    why = (
        f"vLLM set aside {format_bytes(kv, 1)} of KV cache ({how}), more than the {format_bytes(budget, 1)} "
        f"budget holds beside the engine's {format_bytes(used, 1)}: sized outright, the context does not size it"
    )
    return "kv_cache_memory", _size(size), why


def _killed_kv(run: FailedRun, kv_bytes: float) -> tuple[str, object, str] | None:
    """The worker was killed while its KV cache was set up: the room left after the weights is the cap."""
    if run.peak_bytes and run.weights_rss_bytes and run.peak_bytes > run.weights_rss_bytes:
        room = run.peak_bytes - run.weights_rss_bytes
        size = min(kv_bytes / 2, room * 0.6)
        why = (
            f"the kernel killed the worker while {kv_bytes / _MIB:.0f} MiB of KV cache was being set up; the "
            f"tree had about {room / _MIB:.0f} MiB to grow into once the weights were in"
        )
    else:
        size = kv_bytes / 2
        why = (
            f"the kernel killed the worker while {kv_bytes / _MIB:.0f} MiB of KV cache was being set up: half"
        )
    return "kv_cache_memory", _size(size), why
