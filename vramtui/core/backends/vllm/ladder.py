"""vLLM's downgrade ladders, per failing stage: it offloads by size (cpu_offload), never by layer."""

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
    Ladder,
    Rung,
)

MEM_SHARE_UP = Rung(
    "mem_share", "up", "a larger memory share for the engine", "less room for other processes"
)

LADDER: Ladder = {
    "kv_cache": (PARALLEL_DOWN, KV_DTYPE_DOWN, CONTEXT_DOWN, MEM_SHARE_UP, FLASH_ATTN_ON),
    "load_weights": (QUANT_DOWN, PREQUANTIZED_FILE, CPU_OFFLOAD_UP, SMALLER_MODEL),
    "inference": (SHORTER_INPUT, BATCH_DOWN, PARALLEL_DOWN, CHUNKING),
}
KV_DTYPE_ORDER: tuple[str, ...] = ("auto", "fp8")
# On-the-fly quantization from largest to smallest (None: 16-bit).
QUANT_ORDER: tuple[str | None, ...] = (None, "fp8")
