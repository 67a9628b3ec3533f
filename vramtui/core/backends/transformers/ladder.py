"""transformers' downgrade ladders, per failing stage: bitsandbytes quantization at load comes first."""

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

DOUBLE_QUANT = Rung(
    "double_quant",
    "advice",
    "double quantization (bitsandbytes nf4)",
    "a little slower",
    needs="bitsandbytes",
)

LADDER: Ladder = {
    "kv_cache": (PARALLEL_DOWN, KV_DTYPE_DOWN, CONTEXT_DOWN, FLASH_ATTN_ON),
    "load_weights": (QUANT_DOWN, PREQUANTIZED_FILE, DOUBLE_QUANT, CPU_OFFLOAD_UP, SMALLER_MODEL),
    "inference": (SHORTER_INPUT, BATCH_DOWN, PARALLEL_DOWN, CHUNKING),
}
# On-the-fly quantization from largest to smallest (bitsandbytes; None: 16-bit).
QUANT_ORDER: tuple[str | None, ...] = (None, "bnb-8bit", "bnb-4bit")
