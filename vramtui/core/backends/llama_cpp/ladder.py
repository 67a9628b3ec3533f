"""The llama.cpp family's downgrade ladders (llama-server, llama-cpp-python, Ollama), per failing stage.

Whether a backend has a rung's knob is read from its Backend entry (`Backend.rungs`), so
llama-cpp-python's one-sequence server never sees the parallel rung. Layers off the GPU come last:
they work, but the offloaded layers run on the CPU.
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
    Ladder,
    Rung,
)

GPU_LAYERS_DOWN = Rung(
    "gpu_layers",
    "down",
    "fewer layers on the GPU",
    "much slower: the offloaded layers run from host RAM on the CPU",
)
UBATCH_DOWN = Rung("ubatch", "down", "a smaller micro-batch", "slower prompt processing")

LADDER: Ladder = {
    # With several GPUs, moving layers off the card that ran out comes first: it costs nothing while
    # another card has room (the rung has no value on one GPU, so it is skipped there).
    "kv_cache": (
        TENSOR_SPLIT_MOVE,
        PARALLEL_DOWN,
        KV_DTYPE_DOWN,
        CONTEXT_DOWN,
        FLASH_ATTN_ON,
        GPU_LAYERS_DOWN,
    ),
    "load_weights": (
        TENSOR_SPLIT_MOVE,
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
