"""llama.cpp's KV cache as its builds and files lay it out (issue 23): an MLA model's cache by era (per-head
K and V before the MLA split, the latent with a copy as V, the latent alone since the V-less cache), K and
V of different types, and a cache kept in host RAM (--no-kv-offload). Each is checked against the printout
that showed it (tests/data/printouts/round5.jsonl) through the estimator's own arithmetic."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import gguf
import numpy as np
import pytest

from vramtui.core.backends import get_backend
from vramtui.core.estimate.estimator import Settings, estimate
from vramtui.core.estimate.kvcache import kv_layer_bytes
from vramtui.core.estimate.modelinfo import ModelInfo, load_model_info
from vramtui.core.memory.parts import HOST
from vramtui.core.units import GIB, MIB

LAYERS, HEADS, ROPE, RANK = 2, 4, 8, 16


def _deepseek_gguf(path: Path, mla_split: bool, kv_b: bool = False) -> Path:
    """A DeepSeek-shaped GGUF header: converted with llama.cpp's MLA split (key_length_mla, one KV head of
    the latent) or before it (per-head K of nope + rope, V of v_head)."""
    writer = gguf.GGUFWriter(str(path), "deepseek2")
    writer.add_block_count(LAYERS)
    writer.add_context_length(4096)
    writer.add_embedding_length(64)
    writer.add_feed_forward_length(128)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(1 if mla_split else HEADS)
    writer.add_key_length(RANK + ROPE if mla_split else 24)
    writer.add_value_length(RANK)
    if mla_split:
        writer.add_uint32("deepseek2.attention.key_length_mla", 24)
        writer.add_uint32("deepseek2.attention.value_length_mla", 16)
    writer.add_kv_lora_rank(RANK)
    writer.add_rope_dimension_count(ROPE)
    writer.add_vocab_size(32)
    writer.add_tensor("token_embd.weight", np.zeros((32, 64), dtype=np.float16))
    for layer in range(LAYERS):
        writer.add_tensor(f"blk.{layer}.attn_norm.weight", np.zeros(64, dtype=np.float32))
        if kv_b:  # the matrix that decompresses the latent (older conversions and ik_llama.cpp's own)
            writer.add_tensor(f"blk.{layer}.attn_kv_b.weight", np.zeros((HEADS * 40, RANK), dtype=np.float16))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def _kv(info: ModelInfo, **settings: object) -> int:
    est = estimate(info, Settings(context=1024, parallel=1, device_bytes=8 * GIB, **settings))  # type: ignore[arg-type]
    return est.kv_cache_bytes


def test_an_mla_file_converted_before_the_split_is_cached_per_head(tmp_path: Path) -> None:
    """DeepSeek-R1 converted before April 2025, read by b5276: n_embd_head_k_mla = 0 and 44408 MiB of
    per-head K (q4_0) and V (f16) at 16384 cells, where its latent would take 2% of that."""
    old = load_model_info(_deepseek_gguf(tmp_path / "old.gguf", mla_split=False))
    new = load_model_info(_deepseek_gguf(tmp_path / "new.gguf", mla_split=True))
    assert not old.mla_latent and new.mla_latent
    assert _kv(old) == 1024 * LAYERS * HEADS * (24 + 16) * 2
    assert _kv(new) == 1024 * LAYERS * (RANK + ROPE) * 2  # the latent alone, today's build


def test_mainline_kept_a_copy_of_the_latent_as_v_until_its_v_less_cache(tmp_path: Path) -> None:
    info = load_model_info(_deepseek_gguf(tmp_path / "new.gguf", mla_split=True))
    assert _kv(info, engine_build=5331) == 1024 * LAYERS * (RANK + ROPE + RANK) * 2  # b5331 printed K and V
    assert _kv(info, engine_build=7820) == 1024 * LAYERS * (RANK + ROPE) * 2


def test_ik_llama_cpp_runs_mla_1_on_a_file_without_the_decompressing_matrix(tmp_path: Path) -> None:
    """ik_llama.cpp needs attn_kv_b for -mla 0, 2 and 3; without it, "missing wkv_b tensor(s)", "changing
    MLA from 0 to 1" (llama_kv_cache_init): the latent cache, not per-head K and V (round 62: a DeepSeek-V3
    UD-Q2_K_XL at -mla 0 printed c^KV 1098 MiB, sized as 74 GiB of K and V before)."""
    split = load_model_info(_deepseek_gguf(tmp_path / "split.gguf", mla_split=True))
    whole = load_model_info(_deepseek_gguf(tmp_path / "whole.gguf", mla_split=True, kv_b=True))
    assert (split.mla_kv_b, whole.mla_kv_b) == (False, True)
    ik = {"backend": "ik_llama.cpp", "flash_attn": True, "mla": 0}
    latent = 1024 * LAYERS * (RANK + ROPE) * 2
    assert _kv(split, **ik) == latent
    assert _kv(whole, **ik) > latent  # -mla 0 with the matrix: per-head K and V, as asked


def test_k_and_v_of_different_types() -> None:
    """`-ctk q4_0` alone leaves V at f16: "q4_0/f16" sizes each, and llama-server is given both flags."""
    info = ModelInfo(
        source="t",
        arch="llama",
        n_layers=1,
        hidden=4096,
        n_heads=32,
        n_kv_heads=8,
        head_dim_k=128,
        head_dim_v=128,
    )
    assert kv_layer_bytes(info, 0, "q4_0/f16", "") == 1024 * 18 // 32 + 1024 * 2
    assert kv_layer_bytes(info, 0, "q8_0", "") == 2 * 1024 * 34 // 32
    translated = get_backend("llama.cpp").translate("kv_dtype", "q4_0/f16")
    assert translated.problem is None and translated.args == (
        "--cache-type-k",
        "q4_0",
        "--cache-type-v",
        "f16",
    )
    assert get_backend("llama.cpp").translate("kv_dtype", "q4_0/q3").problem is not None


PHI4_MINI = ModelInfo(
    source="t",
    arch="phi3",
    n_layers=32,
    hidden=3072,
    n_heads=24,
    n_kv_heads=8,
    head_dim_k=128,
    head_dim_v=128,
    vocab=200064,
    intermediate=8192,
    max_context=131072,
    dtype="bf16",
    weights_bytes=int(7.6 * GIB),
)


@pytest.mark.parametrize("context", [8192, 131072])
def test_no_kv_offload_keeps_the_cache_and_its_scores_in_host_ram(context: int) -> None:
    """Phi-4-mini with -nkvo at 131072 cells on a Tesla M60 (b941): the KV cache (16384 MiB) and the
    attention scores (24 heads x cells x 512 tokens, f32: 6144 MiB, with its mask 6410 MiB printed) sit in
    host RAM; the GPU's compute buffer keeps the projections and the feed-forward (397 MiB printed)."""
    settings = Settings(context=context, parallel=1, ubatch=512, flash_attn=False, device_bytes=16 * GIB)
    offloaded = estimate(PHI4_MINI, settings)
    kept = estimate(PHI4_MINI, replace(settings, kv_offload=False))
    assert kept.bill.get("kv_cache", HOST) == offloaded.kv_cache_bytes > 0
    assert kept.kv_cache_bytes == kept.bill.get("kv_cache", 0) == 0  # none of it on the GPU
    scores = 24 * context * 512 * 4
    # the GPU's widest phase is then the feed-forward or the projections, the same at any context
    assert kept.bill.get("compute", 0) < min(offloaded.bill.get("compute", 0), 450 * MIB)
    assert kept.bill.get("compute", HOST) - offloaded.bill.get("compute", HOST) == scores


def test_the_panes_extras_take_no_kv_offload_as_typed() -> None:
    from vramtui.core.estimate.inputs import parse_inputs, settings_from, split_flags

    for typed in ("-nkvo", "--no-kv-offload", "--n-cpu-moe 2 -nkvo"):
        texts = split_flags(typed)
        assert texts["kv_offload"] == "off"
        assert settings_from(parse_inputs(texts)[0]).kv_offload is False
    assert settings_from(parse_inputs(split_flags("--n-cpu-moe 2"))[0]).kv_offload is True


def test_what_each_engine_says_of_these_settings() -> None:
    """-nkvo is llama.cpp's: vLLM's estimate leaves it out and says so; a quantized K beside an f16 V needs
    no flash attention (llama.cpp refuses only a quantized V without it)."""
    base = Settings(context=8192, parallel=1, device_bytes=24 * GIB, flash_attn=False)
    kept = estimate(PHI4_MINI, replace(base, kv_offload=False))
    assert any(note.startswith("--no-kv-offload: the KV cache") for note in kept.notes)
    vllm = estimate(PHI4_MINI, replace(base, backend="vllm", flash_attn=None, kv_offload=False))
    assert "--no-kv-offload: not a vllm setting, left out" in vllm.notes
    assert vllm.kv_cache_bytes > 0  # on the GPU, as vLLM keeps it
    k_only = estimate(PHI4_MINI, replace(base, kv_dtype="q4_0/f16"))
    assert k_only.fits and k_only.reason is None
    both = estimate(PHI4_MINI, replace(base, kv_dtype="q4_0"))
    assert both.reason and "refuses a quantized V cache (q4_0)" in both.reason


def test_what_llama_cpp_refuses_to_start_is_no_fit(monkeypatch: pytest.MonkeyPatch) -> None:
    """A quantized V cache without flash attention, and -nkvo with a cache past this machine's RAM: the
    verdict says llama.cpp will not start, whatever the card holds; a malformed K/V pair is a clear error."""
    base = Settings(context=8192, parallel=1, device_bytes=24 * GIB, flash_attn=False)
    refused = estimate(PHI4_MINI, replace(base, kv_dtype="q8_0"))
    assert not refused.fits and refused.reason and "without flash attention" in refused.reason
    assert refused.refused  # not memory: WILL NOT START, whatever the card holds (QA: read "DOES NOT FIT")
    on_cpu = estimate(PHI4_MINI, replace(base, kv_dtype="q8_0", on_gpu=False))  # QA 5: FITS with --cpu
    assert on_cpu.refused and not on_cpu.fits
    assert estimate(PHI4_MINI, replace(base, kv_dtype="q8_0/f16")).fits
    assert estimate(PHI4_MINI, replace(base, kv_dtype="q8_0", flash_attn=True)).fits
    import psutil

    class _Small:
        total = 4 * GIB

    monkeypatch.setattr(psutil, "virtual_memory", lambda: _Small())
    kept = estimate(PHI4_MINI, replace(base, context=65536, kv_offload=False))
    assert not kept.fits and kept.reason and "--no-kv-offload puts the KV cache in host RAM" in kept.reason
    # the largest context is then host RAM's: under 4 GiB of host-held cache and scores
    assert 0 < kept.max_context < 65536
    assert not any("it fits; the rest needs" in note for note in kept.notes)
    for typed in ("q4_0/", "/f16", "q4_0/f16/q8_0"):
        problem = get_backend("llama.cpp").translate("kv_dtype", typed).problem
        assert problem and "K/V" in problem


def test_ollama_keeps_an_f16_cache_where_llama_cpp_would_refuse() -> None:
    """Ollama does not fail on a quantized OLLAMA_KV_CACHE_TYPE without flash attention: it warns and keeps
    the cache f16 (its server.go), so that is what is sized and said."""
    base = Settings(backend="ollama", context=8192, parallel=1, device_bytes=24 * GIB, kv_dtype="q8_0")
    kept = estimate(PHI4_MINI, base)
    assert kept.fits and kept.kv_dtype == "f16"
    assert any("OLLAMA_FLASH_ATTENTION=1" in note for note in kept.notes)
    quantized = estimate(PHI4_MINI, replace(base, flash_attn=True))
    assert quantized.kv_dtype == "q8_0" and quantized.kv_cache_bytes < kept.kv_cache_bytes
