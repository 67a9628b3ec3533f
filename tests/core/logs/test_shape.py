"""The model's shape from a real GPU log (ollama/ollama#10458, tests/data/logs/offloaded.jsonl) in one line."""

from __future__ import annotations

import json
from pathlib import Path

from vramtui.core.logs.diagnose import diagnose_text
from vramtui.core.logs.shape import SHAPE_FIGURES, devices_words, shape_words

DATA = Path(__file__).resolve().parents[2] / "data" / "logs" / "offloaded.jsonl"


def _figures(entry_id: str) -> dict[str, float]:
    entry = next(e for e in map(json.loads, DATA.read_text().splitlines()) if e["id"] == entry_id)
    return diagnose_text(entry["log"], backend=entry["backend"]).engine_figures


def test_the_shape_of_qwen3_30b_a3b_reads_as_one_line():
    figures = _figures("gpu-2-qwen3-30b-a3b-ollama-4090-print-info")
    words = shape_words(figures)
    assert words is not None
    assert "32 heads / 4 KV heads of 128" in words
    assert "128 experts (8 used, 768 wide)" in words
    # every shape figure the log printed is said in the line (n_swa = 0: no sliding window, nothing to say)
    for key in SHAPE_FIGURES & set(figures):
        assert not figures[key] or f"{int(figures[key])}" in words, key


def test_layers_and_hidden_from_the_gguf_header():
    words = shape_words(_figures("gpu-1-qwen3-30b-a3b-4080s-30of49"))
    assert words == "48 layers, 2048 hidden, trained context 40960"


def test_no_shape_is_none():
    assert shape_words({"kv_buffer": 1.0}) is None


def test_the_cards_free_memory_reads_as_one_devices_line():
    # llama.cpp#13729: "using device CUDA0 (NVIDIA GeForce RTX 4080 SUPER) - 15035 MiB free"
    figures = _figures("gpu-1-qwen3-30b-a3b-4080s-30of49")
    assert devices_words(figures) == f"CUDA0 {figures['device_free.CUDA0'] / 2**20:.0f} MiB free"
    assert devices_words({"kv_buffer": 1.0}) is None
