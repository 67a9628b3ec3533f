"""The llama.cpp family's downgrade ladders (llama-server, llama-cpp-python, Ollama), per failing stage.

Whether a backend has a rung's knob is read from its Backend entry (`Backend.rungs`), so
llama-cpp-python's one-sequence server never sees the parallel rung. Layers off the GPU come last:
they work, but the offloaded layers run on the CPU. A MoE model's experts go to the CPU first
(`--n-cpu-moe`): only the few active experts per token are read there.
"""

from __future__ import annotations

from vramtui.core.backends.base import (
    BATCH_DOWN,
    CHUNKING,
    CONTEXT_DOWN,
    CPU_OFFLOAD_UP,
    FLASH_ATTN_ON,
    KV_DTYPE_DOWN,
    PARALLEL_DOWN,
    PREQUANTIZED_FILE,
    QUANT_DOWN,
    SHORTER_INPUT,
    SMALLER_MODEL,
    TENSOR_SPLIT_MOVE,
    FailedRun,
    Ladder,
    Rung,
    whole,
)
from vramtui.core.errors import VramtuiError
from vramtui.core.memory.room import slots_whose_threads_fit

GPU_LAYERS_DOWN = Rung(
    "gpu_layers",
    "down",
    "fewer layers on the GPU",
    "much slower: the offloaded layers run from host RAM on the CPU",
)
# MoE models: the routed experts of the first N layers go to host RAM (llama.cpp's --n-cpu-moe), the
# attention, router and KV cache stay on the GPU. Cheaper than a lower quantization (no quality lost)
# and than whole layers off the GPU (only the active experts of each token are read on the CPU).
N_CPU_MOE_UP = Rung(
    "n_cpu_moe",
    "up",
    "experts of N more layers to the CPU (--n-cpu-moe N)",
    "slower generation: each token the CPU reads the active experts of those layers from host RAM "
    "(tokens/s drops with the share of experts moved); no quality lost",
)
UBATCH_DOWN = Rung("ubatch", "down", "a smaller micro-batch", "slower prompt processing")

LADDER: Ladder = {
    # With several GPUs, moving layers off the card that ran out comes first: it costs nothing while
    # another card has room (the rung has no value on one GPU, so it is skipped there).
    "kv_cache": (
        TENSOR_SPLIT_MOVE,
        PARALLEL_DOWN,
        KV_DTYPE_DOWN,
        # a MoE model whose weights leave the cache no room: experts out keep the context it asked for
        N_CPU_MOE_UP,
        CONTEXT_DOWN,
        FLASH_ATTN_ON,
        GPU_LAYERS_DOWN,
    ),
    # The compute buffer (the graph's scratch, reserved after the cache) is what did not fit: it grows
    # with the micro-batch, and with the context only while flash attention is off.
    "kv_cache:compute_alloc_failed": (
        TENSOR_SPLIT_MOVE,
        FLASH_ATTN_ON,
        UBATCH_DOWN,
        CONTEXT_DOWN,
        GPU_LAYERS_DOWN,
    ),
    "load_weights": (
        TENSOR_SPLIT_MOVE,
        N_CPU_MOE_UP,  # MoE models only (no candidates otherwise): before any quality is given up
        QUANT_DOWN,
        PREQUANTIZED_FILE,
        CPU_OFFLOAD_UP,
        GPU_LAYERS_DOWN,
        SMALLER_MODEL,
    ),
    "inference": (SHORTER_INPUT, BATCH_DOWN, UBATCH_DOWN, PARALLEL_DOWN, CHUNKING),
}
# KV cache types from largest to smallest element.
KV_DTYPE_ORDER: tuple[str, ...] = ("f32", "f16", "q8_0", "q4_0")


# LLAMA_MAX_SEQ (src/llama-cparams.h): libllama refuses more sequences ("n_seq_max must be <= 256")
MAX_SEQUENCES = 256


def named_fix(run: FailedRun) -> tuple[str, object, str] | None:
    """(param, value, why) for llama.cpp's refusals that name their own fix: more slots than it runs
    ("n_seq_max must be <= 256"), a quantized V cache with flash attention off."""
    if run.cause == "too_many_sequences":
        return "parallel", MAX_SEQUENCES, f"llama.cpp runs at most {MAX_SEQUENCES} sequences at once"
    if run.cause == "v_cache_needs_flash_attn":
        return "flash_attn", "on", "llama.cpp quantizes the V cache only with flash attention on"
    if run.cause == "http_threads_start":
        return _fewer_slots(run)
    return None


def _fewer_slots(run: FailedRun) -> tuple[str, object, str] | None:
    """llama-server starts its HTTP pool (a thread per slot and a few) before loading: under a budget
    whose address space has no room for their stacks, fewer slots let it start."""
    threads, budget = run.figures.get("http_threads"), run.figures.get("host_budget")
    try:
        slots = whole("parallel", run.params.get("parallel"))
    except (VramtuiError, TypeError, ValueError):
        return None  # not set: the engine's own count, which the log has not said yet
    if not threads or not budget or not slots or slots <= 1:
        return None
    value = slots_whose_threads_fit(threads, slots, budget)
    return (
        "parallel",
        value,
        f"the server starts {int(threads)} HTTP threads (a stack each) before loading; with {value} slots "
        "their stacks take at most a quarter of the budget",
    )
