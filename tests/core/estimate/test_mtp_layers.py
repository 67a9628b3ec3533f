"""A GGUF's MTP (nextn) layers are the last of its block_count. llama.cpp places them as layers (the split
over devices counts them: builds of 2026 print `n_layer_all`) but skips their tensors ("model has unused
tensor blk.78... -- ignoring") and keeps them out of the main KV cache (create_memory's filter, `il <
n_layer()`); ik_llama.cpp skips their tensors too (TENSOR_SKIP since its GLM-4.5 support, #668) and
cached every layer until its #843 (build 3918; round 64's 2026 GLM-4.5-Air printout: 46 of 47). A GLM-5.2 run on 4 GPUs (round 29's printouts,
build 10505) holds 78 layers of KV over 79 placed; its last GPU's weights were x1.22 of the printed with
the MTP layer counted, and its DeepSeek-sparse-attention indexer keeps a key cache of its own (128 wide,
in 21 of 78 layers), 6% of its KV."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gguf_writing import dense_tensors, write_gguf

from vramtui.core.estimate.estimator import Settings, estimate
from vramtui.core.estimate.modelinfo import load_model_info
from vramtui.core.units import GIB

LAYERS, HIDDEN, HEADS, KV_HEADS, HEAD, CONTEXT = 6, 256, 4, 2, 64, 8192


def _write(path: Path, nextn: int, indexer: int = 0) -> Path:
    def keys(writer: Any) -> None:
        writer.add_block_count(LAYERS)
        writer.add_context_length(CONTEXT)
        writer.add_embedding_length(HIDDEN)
        writer.add_feed_forward_length(512)
        writer.add_head_count(HEADS)
        writer.add_head_count_kv(KV_HEADS)
        writer.add_vocab_size(1000)
        if nextn:
            writer.add_uint32("llama.nextn_predict_layers", nextn)
        if indexer:
            writer.add_uint32("llama.attention.indexer.key_length", indexer)
            writer.add_array("llama.attention.indexer.types", [1, 0, 1, 0, 1, 0][:LAYERS])

    tensors = dense_tensors(LAYERS, HIDDEN, HEADS, KV_HEADS, HEAD)
    return write_gguf(path, "llama", keys, tensors)


def _estimate(path: Path, backend: str, **more: Any) -> Any:
    settings = Settings(
        backend=backend, context=CONTEXT, parallel=1, device_bytes=24 * GIB, flash_attn=True, **more
    )
    return estimate(load_model_info(path), settings)


def _kv(path: Path, backend: str, **more: Any) -> int:
    return _estimate(path, backend, **more).kv_cache_bytes


def test_llama_cpp_keeps_the_mtp_layer_out_of_its_kv_cache_and_ik_llama_cpp_did_before_its_843(
    tmp_path: Path,
) -> None:
    per_layer = CONTEXT * KV_HEADS * HEAD * 2 * 2  # K and V, f16
    with_mtp = _write(tmp_path / "mtp.gguf", nextn=1)
    info = load_model_info(with_mtp)
    assert (info.n_layers, info.mtp_layers) == (LAYERS, 1)  # placed as a layer, weights and all
    assert _kv(with_mtp, "llama.cpp") == (LAYERS - 1) * per_layer
    assert _kv(with_mtp, "ik_llama.cpp", engine_build=3917) == LAYERS * per_layer
    assert _kv(with_mtp, "ik_llama.cpp", engine_build=3918) == (LAYERS - 1) * per_layer
    # a file without MTP layers: every layer holds its K and V
    assert _kv(_write(tmp_path / "plain.gguf", nextn=0), "llama.cpp") == LAYERS * per_layer


def test_llama_cpp_skips_the_mtp_layers_weights_unless_asked_for_them(tmp_path: Path) -> None:
    with_mtp, plain = _write(tmp_path / "mtp.gguf", nextn=1), _write(tmp_path / "plain.gguf", nextn=0)
    layer = load_model_info(plain).layer_bytes[-1]  # type: ignore[index]
    assert (
        _estimate(with_mtp, "llama.cpp").weights_bytes == _estimate(plain, "llama.cpp").weights_bytes - layer
    )
    for build in (3917, 4500):  # skipped at load in every build that reads the layer (its #668 on)
        ik = _estimate(with_mtp, "ik_llama.cpp", engine_build=build).weights_bytes
        assert ik == _estimate(plain, "ik_llama.cpp", engine_build=build).weights_bytes - layer


def test_the_sparse_attention_indexer_keeps_its_keys_in_the_layers_the_file_names(tmp_path: Path) -> None:
    per_layer = CONTEXT * KV_HEADS * HEAD * 2 * 2
    indexed = _write(tmp_path / "dsa.gguf", nextn=0, indexer=128)
    info = load_model_info(indexed)
    assert (info.indexer_key_length, info.indexer_layers) == (128, frozenset({0, 2, 4}))
    assert _kv(indexed, "llama.cpp") == LAYERS * per_layer + 3 * CONTEXT * 128 * 2  # K only, f16
