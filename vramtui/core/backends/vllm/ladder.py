"""vLLM's downgrade ladders, per failing stage: it offloads by size (cpu_offload), never by layer."""

from __future__ import annotations

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
    Ladder,
    Rung,
)

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

LADDER: Ladder = {
    # No flash-attention rung: the attention backend changes neither the paged KV cache nor the profile.
    "kv_cache": (PARALLEL_DOWN, KV_DTYPE_DOWN, CONTEXT_DOWN, MEM_SHARE_UP),
    "load_weights": (QUANT_DOWN, PREQUANTIZED_FILE, CPU_OFFLOAD_GB_UP, SMALLER_MODEL),
    "inference": (SHORTER_INPUT, BATCH_DOWN, PARALLEL_DOWN, CHUNKING),
}
KV_DTYPE_ORDER: tuple[str, ...] = ("auto", "fp8")
# On-the-fly quantization from largest to smallest (None: 16-bit).
QUANT_ORDER: tuple[str | None, ...] = (None, "fp8")
