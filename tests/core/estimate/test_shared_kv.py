"""Gemma 3n and Gemma 4 keep K and V in their first layers only (the last num_kv_shared_layers reuse them),
and Gemma 4's global layers are wider than its sliding ones: the KV cache is sized per layer, from a GGUF
written here and from config.json. A real printout (tests/data/printouts/round4.jsonl, Gemma-4-E2B on an
Apple M4: 102.00 + 9.56 MiB) is checked by test_printouts.py."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from vramtui.core.estimate.estimator import Settings, estimate
from vramtui.core.estimate.kvcache import kv_bytes_per_token, kv_row_elements
from vramtui.core.estimate.modelinfo import load_model_info

LAYERS, SHARED, PATTERN = 10, 4, 5  # layers 4 and 9 are global; layers 6..9 reuse earlier K and V
GLOBAL_DIM, SWA_DIM = 64, 32


def _gemma4_gguf(path: Path) -> Path:
    import gguf

    writer = gguf.GGUFWriter(str(path), "gemma4")
    writer.add_block_count(LAYERS)
    writer.add_context_length(4096)
    writer.add_embedding_length(128)
    writer.add_feed_forward_length(256)
    writer.add_head_count(4)
    writer.add_head_count_kv(1)
    writer.add_key_length(GLOBAL_DIM)
    writer.add_value_length(GLOBAL_DIM)
    writer.add_uint32("gemma4.attention.key_length_swa", SWA_DIM)
    writer.add_uint32("gemma4.attention.value_length_swa", SWA_DIM)
    writer.add_uint32("gemma4.attention.sliding_window", 64)
    writer.add_array(
        "gemma4.attention.sliding_window_pattern", [(il + 1) % PATTERN != 0 for il in range(LAYERS)]
    )
    writer.add_uint32("gemma4.attention.shared_kv_layers", SHARED)
    writer.add_file_type(1)
    writer.add_tensor("token_embd.weight", np.zeros((512, 128), dtype=np.float16))
    for il in range(LAYERS):
        writer.add_tensor(f"blk.{il}.attn_q.weight", np.zeros((128, 128), dtype=np.float16))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_a_gemma4_gguf_sizes_only_the_layers_that_keep_k_and_v(tmp_path: Path) -> None:
    info = load_model_info(str(_gemma4_gguf(tmp_path / "g4.gguf")))
    assert info.kv_layers == LAYERS - SHARED and info.head_dim_swa == SWA_DIM and info.swa_layers == 8
    widths = [kv_row_elements(info, il)[0] for il in range(LAYERS)]
    assert widths == [SWA_DIM] * 4 + [GLOBAL_DIM] + [SWA_DIM] + [0] * 4
    # f16 K and V over the six layers that store them
    assert kv_bytes_per_token(info) == 2 * 2 * (5 * SWA_DIM + GLOBAL_DIM)
    est = estimate(info, Settings(backend="llama.cpp", context=4096, parallel=1, flash_attn=True))
    # the global layer holds the whole context, the five sliding ones their window (+ the micro-batch)
    global_bytes = 4096 * 2 * 2 * GLOBAL_DIM
    assert global_bytes < est.kv_cache_bytes < 2 * global_bytes


def test_gemma3n_keeps_k_and_v_in_its_first_twenty_layers(tmp_path: Path) -> None:
    config = {
        "model_type": "gemma3n",
        "text_config": {
            "model_type": "gemma3n_text",
            "num_hidden_layers": 30,
            "hidden_size": 2048,
            "intermediate_size": 8192,
            "num_attention_heads": 8,
            "num_key_value_heads": 2,
            "head_dim": 256,
            "vocab_size": 262400,
            "max_position_embeddings": 32768,
            "sliding_window": 512,
            "layer_types": ["sliding_attention" if (il + 1) % 5 else "full_attention" for il in range(30)],
            "num_kv_shared_layers": 10,
        },
    }
    (tmp_path / "config.json").write_text(json.dumps(config))
    info = load_model_info(str(tmp_path / "config.json"))
    assert info.kv_layers == 20
    assert [kv_row_elements(info, il)[0] for il in (19, 20, 29)] == [2 * 256, 0, 0]


def test_gemma4s_global_layers_take_their_own_width_and_heads(tmp_path: Path) -> None:
    """google/gemma-4-31B's text config: sliding layers 16 KV heads of 256, global ones 4 of 512."""
    config = {
        "model_type": "gemma4_text",
        "num_hidden_layers": 12,
        "hidden_size": 1024,
        "intermediate_size": 4096,
        "num_attention_heads": 32,
        "num_key_value_heads": 16,
        "num_global_key_value_heads": 4,
        "head_dim": 256,
        "global_head_dim": 512,
        "vocab_size": 262144,
        "max_position_embeddings": 262144,
        "sliding_window": 1024,
        "layer_types": ["sliding_attention" if (il + 1) % 6 else "full_attention" for il in range(12)],
    }
    (tmp_path / "config.json").write_text(json.dumps(config))
    info = load_model_info(str(tmp_path / "config.json"))
    assert info.kv_layers is None and info.head_dim_swa == 256 and info.head_dim_k == 512
    assert kv_row_elements(info, 0) == (16 * 256, 16 * 256)  # a sliding layer
    assert kv_row_elements(info, 5) == (4 * 512, 4 * 512)  # a global one
