"""Llama 4's chunked attention: llama.cpp keeps an 8192-token window in 3 of every 4 layers unless the file
sets its sliding window to 0 (llama-model.cpp), though a Llama 4 GGUF names no window. Sized as full
attention in every layer, Scout's KV cache at 128k came out 3.3x what llama.cpp allocates (12 global
layers of 131072 cells and 36 of 8704); a printout of Scout on a Strix Halo (b6040) shows the two caches
and the two masks of its host buffer (26 MiB printed, 18 estimated before, 26 after)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gguf_writing import dense_tensors, write_gguf

from vramtui.core.estimate.estimator import Settings, estimate
from vramtui.core.estimate.modelinfo import load_model_info
from vramtui.core.units import GIB

LAYERS, HIDDEN, HEADS, KV_HEADS, HEAD = 8, 256, 4, 2, 64


def _write_llama4(path: Path, window: int | None = None) -> Path:
    """A small Llama 4 as llama.cpp's converter names its keys and tensors (no window key, as Scout's)."""

    def keys(writer: Any) -> None:
        writer.add_block_count(LAYERS)
        writer.add_context_length(1 << 20)
        writer.add_embedding_length(HIDDEN)
        writer.add_feed_forward_length(512)
        writer.add_head_count(HEADS)
        writer.add_head_count_kv(KV_HEADS)
        writer.add_key_length(HEAD)
        writer.add_value_length(HEAD)
        writer.add_vocab_size(1000)
        if window is not None:
            writer.add_sliding_window(window)

    tensors = dense_tensors(LAYERS, HIDDEN, HEADS, KV_HEADS, HEAD)
    return write_gguf(path, "llama4", keys, tensors)


def test_llama4_keeps_a_chunk_of_8192_tokens_in_three_of_four_layers(tmp_path: Path) -> None:
    info = load_model_info(_write_llama4(tmp_path / "llama4.gguf"))
    assert (info.sliding_window, info.swa_layers) == (8192, LAYERS - LAYERS // 4)
    context = 131072
    est = estimate(info, Settings(backend="llama.cpp", context=context, parallel=1, device_bytes=24 * GIB))
    per_cell = KV_HEADS * HEAD * 2 * 2  # K and V, f16, one layer
    full = LAYERS // 4 * context * per_cell
    chunked = (LAYERS - LAYERS // 4) * (8192 + 512) * per_cell  # the window and a micro-batch
    assert est.kv_cache_bytes == full + chunked


def test_a_llama4_file_that_sets_its_window_to_0_attends_everywhere(tmp_path: Path) -> None:
    info = load_model_info(_write_llama4(tmp_path / "llama4-full.gguf", window=0))
    assert not info.swa_layers
