"""The arithmetic per backend: the worked numbers of the field, then each engine's own accounting."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from vramtui.core.errors import VramtuiError
from vramtui.core.estimate.estimator import (
    Settings,
    estimate,
    fit_gpu_layers,
    kv_bytes_per_token,
    llama_cpp_weights,
    max_context,
    max_parallel,
)
from vramtui.core.estimate.modelinfo import ModelInfo, info_from_config, info_from_flags, load_model_info
from vramtui.core.units import GIB, MIB

CONFIGS = Path(__file__).resolve().parents[2] / "data" / "configs"

LLAMA_70B = ModelInfo(
    source="llama-70b",
    n_params=70_553_706_496,
    n_layers=80,
    hidden=8192,
    n_heads=64,
    n_kv_heads=8,
    head_dim_k=128,
    head_dim_v=128,
    vocab=128256,
    intermediate=28672,
    max_context=131072,
    params_exact=True,
)
LLAMA_8B = replace(LLAMA_70B, source="llama-8b", n_params=8_030_261_248, n_layers=32, hidden=4096, n_heads=32)
LLAMA_8B = replace(LLAMA_8B, intermediate=14336)


# --- the worked arithmetic -------------------------------------------------------------------------------


def test_one_layer_of_8_kv_heads_of_128_in_fp16_is_4096_bytes_per_token() -> None:
    one_layer = replace(LLAMA_70B, n_layers=1)
    assert kv_bytes_per_token(one_layer, "f16") == 8 * 128 * 2 * 2 == 4096


def test_80_layers_are_327680_bytes_per_token_and_8_bit_halves_it() -> None:
    assert kv_bytes_per_token(LLAMA_70B, "f16") == 327_680
    assert kv_bytes_per_token(LLAMA_70B, "fp8") == 327_680 // 2
    # q8_0 stores 32 values in 34 bytes: half of f16 plus its scales
    assert kv_bytes_per_token(LLAMA_70B, "q8_0") == 327_680 // 2 * 34 // 32
    assert kv_bytes_per_token(LLAMA_70B, "q4_0") == 327_680 // 4 * 18 // 16


def test_24_gib_card_at_the_default_safety_share_has_19_2_gib_usable() -> None:
    est = estimate(LLAMA_8B, Settings(device_bytes=24 * GIB, context=4096))
    assert est.usable_bytes == int(24 * GIB * 0.8)
    assert est.usable_bytes / GIB == pytest.approx(19.2)


# --- llama.cpp ----------------------------------------------------------------------------------------------


def test_llama_cpp_pads_cells_to_256_and_sizes_kv_per_layer() -> None:
    est = estimate(LLAMA_8B, Settings(context=1000, flash_attn=True))
    assert est.kv_cells == 1024
    assert est.kv_cache_bytes == 1024 * 32 * 8 * 128 * 2 * 2
    q8 = estimate(LLAMA_8B, Settings(context=1000, flash_attn=True, kv_dtype="q8_0"))
    assert q8.kv_cache_bytes == 1024 * 32 * 2 * (8 * 128 // 32 * 34)


def test_sliding_window_layers_hold_window_plus_ubatch_cells() -> None:
    gemma2 = info_from_config(
        {
            "model_type": "gemma2",
            "hidden_size": 3584,
            "intermediate_size": 14336,
            "num_hidden_layers": 42,
            "num_attention_heads": 16,
            "num_key_value_heads": 8,
            "head_dim": 256,
            "sliding_window": 4096,
            "vocab_size": 256000,
            "max_position_embeddings": 8192,
        },
        "gemma2-9b",
        exact_params=False,
    )
    est = estimate(gemma2, Settings(context=32768, parallel=1, ubatch=512, flash_attn=True))
    per_cell_layer = 8 * 256 * 2 * 2
    # 21 global layers at 32768 cells, 21 sliding ones at pad(4096 + 512, 256) = 4608
    assert est.kv_cache_bytes == 21 * 32768 * per_cell_layer + 21 * 4608 * per_cell_layer
    # a build before llama.cpp's sliding-window cache (#13194, May 2025) kept every cell in every layer, as
    # gemma-3 printouts of b4879 and b5050 show (tests/data/printouts/round8.jsonl)
    old = estimate(
        gemma2, Settings(context=32768, parallel=1, ubatch=512, flash_attn=True, engine_build=5050)
    )
    assert old.kv_cache_bytes == 42 * 32768 * per_cell_layer


def test_builds_before_kv_streams_score_every_slot_against_the_whole_cache() -> None:
    """Before llama.cpp's KV streams (kv_unified, July 2025) all slots shared one cache, so one KQ spans
    every cell: an Ollama 0.5 runner with 4 slots of 2048 (kv_size 8192, flash attention off) printed 696
    MiB of compute where a stream per slot gives a quarter of the scores (tests/data/printouts/round11)."""
    settings = Settings(backend="ollama", context=2048, parallel=4, ubatch=512, flash_attn=False)
    today = estimate(LLAMA_8B, settings)
    old = estimate(LLAMA_8B, replace(settings, engine_build=4000))
    assert old.kv_cache_bytes == today.kv_cache_bytes  # the same cells either way
    kq = 32 * 8192 * 512 * 4  # heads x every cell x ubatch x f32
    assert old.compute_buffer_bytes >= kq > today.compute_buffer_bytes
    assert old.compute_buffer_bytes - today.compute_buffer_bytes >= kq * 3 // 4 - 1


def test_compute_buffer_holds_the_kq_matrix_without_flash_attention() -> None:
    no_fa = estimate(LLAMA_8B, Settings(context=16384, ubatch=512, flash_attn=False))
    fa = estimate(LLAMA_8B, Settings(context=16384, ubatch=512, flash_attn=True))
    kq = 32 * 16384 * 512 * 4  # heads x cells x ubatch x f32
    assert no_fa.compute_buffer_bytes >= kq
    assert fa.compute_buffer_bytes < kq / 2
    # with a short context the logits dominate in builds that reserve them for every token of the
    # micro-batch (vocab x ubatch x 4 beside the last hidden state and its norm, up to ~b9090 in
    # llama-server, and in llama-cpp-python's library) ...
    old = estimate(LLAMA_8B, Settings(context=512, ubatch=512, flash_attn=True, engine_build=7000))
    assert old.compute_buffer_bytes == (128256 + 2 * 4096) * 512 * 4
    library = estimate(
        LLAMA_8B,
        # every layer on the GPU, asked (its server's own default is none: QA 26 D1)
        Settings(backend="llama-cpp-python", context=512, ubatch=512, flash_attn=True, gpu_layers=33),
    )
    assert library.compute_buffer_bytes == old.compute_buffer_bytes
    # ... while today's llama-server reserves one logits row per slot: the feed-forward is the widest phase
    today = estimate(LLAMA_8B, Settings(context=512, ubatch=512, flash_attn=True))
    assert today.compute_buffer_bytes < old.compute_buffer_bytes / 2
    assert today.compute_buffer_bytes >= 3 * 14336 * 512 * 4  # gate, up and their product


def test_gguf_file_type_plan_matches_published_file_sizes() -> None:
    # Llama 3 8B Q4_K_M is 4.58 GiB and Q8_0 7.95 GiB as llama.cpp prints "model size"
    q4 = llama_cpp_weights(LLAMA_8B, "q4_k_m")
    total = sum(q4.layers) + q4.token_embd + q4.output + q4.other
    assert total / GIB == pytest.approx(4.58, rel=0.02)
    q8 = llama_cpp_weights(LLAMA_8B, "q8_0")
    assert (sum(q8.layers) + q8.token_embd + q8.output + q8.other) / GIB == pytest.approx(7.95, rel=0.01)


def test_partial_offload_moves_layers_and_their_kv_to_the_host() -> None:
    info = replace(LLAMA_70B, quant="q4_k_m", file_type="q4_k_m")
    settings = Settings(context=8192, flash_attn=True, device_bytes=24 * GIB)
    full = estimate(info, settings)
    assert not full.fits
    n = fit_gpu_layers(info, settings)
    assert 0 < n < 80
    part = estimate(info, replace(settings, gpu_layers=n))
    assert part.fits and part.total_bytes <= part.usable_bytes
    assert not estimate(info, replace(settings, gpu_layers=n + 1)).fits
    # today's llama-server fills the output layer's slot first ("offloading output layer to GPU"), then
    # n - 1 repeating layers: their KV cache is on the GPU, the other layers' in host RAM
    assert part.kv_cache_bytes == (n - 1) * 8192 * 4096
    weights = llama_cpp_weights(info, "q4_k_m")
    host = weights.token_embd + sum(weights.layers[: 80 - (n - 1)])
    assert part.weights_host_bytes == host
    assert len(set(weights.layers)) == 2  # Q4_K_M: half the layers carry Q6_K attn_v / ffn_down
    assert part.host_bytes_needed >= part.weights_host_bytes + (80 - n + 1) * 8192 * 4096
    assert full.gpu_layers_fit == n
    # builds before ~b7300 filled the repeating layers first: n layers, the output on the host
    older = estimate(info, replace(settings, gpu_layers=n, engine_build=7000))
    assert older.kv_cache_bytes == n * 8192 * 4096
    assert (
        older.weights_host_bytes
        == weights.token_embd + sum(weights.layers[: 80 - n]) + weights.output + weights.other
    )


def test_max_context_and_max_parallel_are_the_edge_of_fitting() -> None:
    settings = Settings(device_bytes=16 * GIB, flash_attn=True, quant="q8_0")
    edge = max_context(LLAMA_8B, settings)
    assert edge % 256 == 0 and 0 < edge < 131072
    assert estimate(LLAMA_8B, replace(settings, context=edge)).fits
    assert not estimate(LLAMA_8B, replace(settings, context=edge + 256)).fits
    per_seq = replace(settings, context=4096)
    p = max_parallel(LLAMA_8B, per_seq)
    assert p >= 1
    assert estimate(LLAMA_8B, replace(per_seq, parallel=p, context=4096 * p)).fits
    assert not estimate(LLAMA_8B, replace(per_seq, parallel=p + 1, context=4096 * (p + 1))).fits


def test_ollama_uses_its_defaults_and_places_layers_itself() -> None:
    small = estimate(LLAMA_8B, Settings(backend="ollama", device_bytes=12 * GIB, quant="q4_k_m"))
    big = estimate(LLAMA_8B, Settings(backend="ollama", device_bytes=24 * GIB, quant="q4_k_m"))
    assert small.context == 4096 and big.context == 32768
    assert big.compute_buffer_bytes > 32 * 32768 * 512 * 4  # flash attention off by default
    huge = estimate(LLAMA_70B, Settings(backend="ollama", device_bytes=24 * GIB, quant="q4_k_m"))
    assert huge.fits and 0 < huge.gpu_layers < 81 and huge.weights_host_bytes > 20 * GIB


# --- vLLM -----------------------------------------------------------------------------------------------------


def test_vllm_budget_blocks_and_concurrency() -> None:
    info = replace(LLAMA_8B, weights_bytes=int(14.96 * GIB), dtype="bf16")
    est = estimate(info, Settings(backend="vllm", device_bytes=int(79.22 * GIB), context=8192))
    assert est.usable_bytes == int(79.22 * GIB * 0.92)  # its default gpu_memory_utilization (0.9 before 0.11)
    assert est.kv_bytes_per_token == 131072
    # weights, the profile's activations, non-torch memory and (from 0.21) the CUDA graphs come off the budget
    available = est.usable_bytes - est.weights_bytes - est.activations_bytes - 288 * MIB - 256 * MIB
    blocks = available // (16 * 131072)
    assert est.kv_cache_tokens == blocks * 16
    assert est.kv_cache_bytes == blocks * 16 * 131072
    assert est.max_concurrency == pytest.approx(blocks * 16 / 8192, abs=0.01)
    assert est.max_context == min(blocks * 16, 131072)
    assert est.fits


def test_vllm_refuses_when_one_request_does_not_fit() -> None:
    info = replace(LLAMA_8B, weights_bytes=int(14.96 * GIB))
    est = estimate(info, Settings(backend="vllm", device_bytes=24 * GIB, context=131072))
    assert not est.fits
    assert 0 < est.max_context < 131072
    assert any("refuses" in note for note in est.notes)
    assert estimate(info, Settings(backend="vllm", device_bytes=24 * GIB, context=est.max_context)).fits


def test_vllm_mla_caches_one_latent_per_token() -> None:
    ds = replace(LLAMA_8B, kv_lora_rank=512, qk_rope_head_dim=64, n_kv_heads=32, head_dim_k=192)
    assert kv_bytes_per_token(ds, "bf16", "vllm") == 32 * (512 + 64) * 2
    # transformers keeps decompressed per-head keys and values
    assert kv_bytes_per_token(ds, "bf16", "transformers") == 32 * 32 * (192 + 128) * 2


# --- transformers -------------------------------------------------------------------------------------------


def test_transformers_bnb_keeps_embeddings_in_16_bit_and_has_no_16_bit_load_peak() -> None:
    est = estimate(LLAMA_8B, Settings(backend="transformers", quant="nf4", context=2048))
    embed = 128256 * 4096
    linear = LLAMA_8B.n_params - 2 * embed - (2 * 32 + 1) * 4096
    assert est.weights_bytes == int(linear * 4.5 / 8 + (2 * embed + 65 * 4096) * 2)
    # transformers quantizes each weight as it loads it (its Bnb4bitQuantize op, one parameter at a time):
    # the whole model is never on the card at 16 bits (QA 21 F6: 8 bits "did not fit" 12 GiB for that peak)
    assert est.load_peak_bytes is None
    assert any("quantizes each weight as it loads" in note for note in est.notes)
    prequantized = replace(LLAMA_8B, quant="nf4")
    assert estimate(prequantized, Settings(backend="transformers", context=2048)).load_peak_bytes is None


def test_transformers_logits_kv_and_eager_scores() -> None:
    sdpa = estimate(LLAMA_8B, Settings(backend="transformers", context=4096))
    assert sdpa.kv_cache_bytes == 4096 * 131072
    # generate() keeps the logits of the last position only (logits_to_keep=1): bf16, fp32 copy, scores
    mlp = 4096 * 3 * 14336 * 2
    assert sdpa.activations_bytes == mlp + 128256 * (2 + 4 + 4)
    eager = estimate(LLAMA_8B, Settings(backend="transformers", context=4096, flash_attn=False))
    assert eager.activations_bytes - sdpa.activations_bytes == 2 * 32 * 4096 * 4096 * 2
    assert sdpa.fragmentation_bytes > 0


def test_transformers_gives_every_sequence_of_a_batch_the_whole_context() -> None:
    """QA 5: 4 sequences at context 131072 billed 4 x 131072 tokens of cache, but said "131,072 cells", and
    the concurrency solver spoke of "sequences of 32,768 tokens" (llama.cpp's split of one context)."""
    est = estimate(
        LLAMA_8B, Settings(backend="transformers", context=8192, parallel=4, device_bytes=80 * GIB)
    )
    assert est.kv_cache_bytes == 4 * 8192 * 131072 and est.kv_cells == 4 * 8192
    assert est.max_parallel_tokens == 8192 and est.max_parallel is not None and est.max_parallel > 4


def test_moe_counts_every_expert() -> None:
    mixtral = info_from_config(
        {
            "model_type": "mixtral",
            "hidden_size": 4096,
            "intermediate_size": 14336,
            "num_hidden_layers": 32,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "num_local_experts": 8,
            "num_experts_per_tok": 2,
            "vocab_size": 32000,
        },
        "mixtral",
        exact_params=False,
    )
    assert mixtral.n_params == pytest.approx(46.7e9, rel=0.01)
    est = estimate(mixtral, Settings(backend="vllm", device_bytes=80 * GIB, context=4096))
    assert est.weights_bytes == mixtral.n_params * 2


# --- settings -------------------------------------------------------------------------------------------------


def test_settings_from_a_launch_profile() -> None:
    settings = Settings.from_params(
        {
            "context": 8192,
            "parallel": "4",
            "kv_dtype": "q8_0",
            "flash_attn": "on",
            "gpu_layers": 20,
            "mem_share": 0.85,
        },
        backend="llama.cpp",
        device_bytes="24GiB",
    )
    assert (settings.context, settings.parallel, settings.kv_dtype, settings.flash_attn) == (
        8192,
        4,
        "q8_0",
        True,
    )
    assert settings.gpu_layers == 20 and settings.share == 0.85 and settings.device_bytes == 24 * GIB
    assert Settings.from_params({"gpu_layers": "all"}).gpu_layers is None
    assert Settings.from_params({"gpu_layers": -1}).gpu_layers is None
    vllm = Settings.from_params({"context": 4096}, backend="vllm")
    assert vllm.share == 0.92  # vLLM's default --gpu-memory-utilization of today
    with pytest.raises(VramtuiError):
        Settings.from_params({"context": "lots"})
    with pytest.raises(VramtuiError):
        Settings(backend="tensorrt")
    with pytest.raises(VramtuiError):
        Settings(safety=1.5)


def test_flags_only_model_and_to_dict_keys() -> None:
    info = info_from_flags(params=70_000_000_000, layers=80, kv_heads=8, head_dim=128, quant="q4_k_m")
    est = estimate(info, Settings(context=8192))
    assert est.kv_bytes_per_token == 327_680
    data = est.to_dict()
    for key in (
        "weights_bytes",
        "kv_cache_bytes",
        "kv_bytes_per_token",
        "activations_bytes",
        "overhead_bytes",
        "fragmentation_bytes",
        "total_bytes",
        "device_bytes",
        "usable_bytes",
        "fits",
        "max_context",
        "max_parallel",
        "gpu_layers_fit",
        "host_bytes_needed",
        "notes",
    ):
        assert key in data
    assert data["total_bytes"] == sum(
        data[k] for k in ("weights_bytes", "kv_cache_bytes", "activations_bytes", "overhead_bytes")
    )
    # Q4_K_M of a 70B is about 40 GiB (39.6 GiB published)
    assert (est.weights_bytes + est.weights_host_bytes) / GIB == pytest.approx(39.6, rel=0.04)


def test_engine_probe_reads_llama_cpp_log_lines() -> None:
    from vramtui.core.estimate.engine_probe import parse_probe_log

    log = (
        "llama_context:  CUDA_Host  output buffer size =     0.40 MiB\n"
        "llama_kv_cache:      CUDA0 KV buffer size =   800.00 MiB\n"
        "llama_kv_cache: size =  800.00 MiB (  4096 cells,  40 layers,  1/1 seqs), K (f16):  400.00 MiB, V (f16):  400.00 MiB\n"
        "llama_context:      CUDA0 compute buffer size =   353.01 MiB\n"
        "llama_context:  CUDA_Host compute buffer size =    23.01 MiB\n"
    )
    kv, cells, compute, output = parse_probe_log(log)
    assert kv == 800 * MIB and cells == 4096
    assert compute == {"CUDA0": round(353.01 * MIB), "CUDA_Host": round(23.01 * MIB)}
    assert output == round(0.40 * MIB)


BASE_CONFIG = {"vocab_size": 32000, "max_position_embeddings": 32768}
ARCHITECTURES = [
    # published shapes -> K+V bytes per token in f16 for llama.cpp
    ({"model_type": "qwen2", "hidden_size": 3584, "intermediate_size": 18944, "num_hidden_layers": 28,
      "num_attention_heads": 28, "num_key_value_heads": 4}, 28 * 4 * 128 * 4),
    ({"model_type": "qwen3", "hidden_size": 4096, "intermediate_size": 12288, "num_hidden_layers": 36,
      "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128}, 36 * 8 * 128 * 4),
    ({"model_type": "mistral", "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
      "num_attention_heads": 32, "num_key_value_heads": 8, "sliding_window": None}, 32 * 8 * 128 * 4),
    ({"model_type": "phi3", "hidden_size": 3072, "intermediate_size": 8192, "num_hidden_layers": 32,
      "num_attention_heads": 32, "num_key_value_heads": 32}, 32 * 32 * 96 * 4),
    ({"model_type": "internlm2", "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
      "num_attention_heads": 32, "num_key_value_heads": 8, "bias": False}, 32 * 8 * 128 * 4),
    ({"model_type": "deepseek_v2", "hidden_size": 2048, "intermediate_size": 10944, "num_hidden_layers": 27,
      "num_attention_heads": 16, "num_key_value_heads": 16, "kv_lora_rank": 512, "qk_rope_head_dim": 64,
      "qk_nope_head_dim": 128, "v_head_dim": 128, "n_routed_experts": 64, "n_shared_experts": 2,
      "num_experts_per_tok": 6, "moe_intermediate_size": 1408, "first_k_dense_replace": 1},
     27 * 576 * 2),  # llama.cpp keeps the latent alone since its V-less cache (#19067, b7820)
]  # fmt: skip


@pytest.mark.parametrize(
    ("config", "per_token"), ARCHITECTURES, ids=[c["model_type"] for c, _ in ARCHITECTURES]
)
def test_architectures_across_every_backend(config: dict, per_token: int) -> None:
    info = info_from_config({**BASE_CONFIG, **config}, config["model_type"], exact_params=False)
    assert kv_bytes_per_token(info, "f16", "llama.cpp") == per_token
    for backend in ("llama.cpp", "ollama", "vllm", "transformers"):
        est = estimate(info, Settings(backend=backend, context=8192, device_bytes=48 * GIB))
        assert est.weights_bytes + est.weights_host_bytes > 0 and est.kv_cache_bytes > 0
        assert est.total_bytes >= est.weights_bytes + est.kv_cache_bytes
    if info.kv_lora_rank:  # DeepSeek-V2-Lite: vLLM caches the 576-wide latent only
        assert kv_bytes_per_token(info, "bf16", "vllm") == 27 * 576 * 2
        assert info.is_moe and info.n_params == pytest.approx(15.7e9, rel=0.02)


# --- QA fixes ---------------------------------------------------------------------------------------------


def test_ollama_gives_every_parallel_slot_the_full_num_ctx() -> None:
    settings = Settings(backend="ollama", device_bytes=12 * GIB, quant="q4_k_m", context=4096)
    one = estimate(LLAMA_8B, settings)
    four = estimate(LLAMA_8B, replace(settings, parallel=4))
    assert one.kv_cells == 4096 and four.kv_cells == 4 * 4096
    assert four.kv_cache_bytes == 4 * one.kv_cache_bytes
    # about what llama.cpp with the same total cells (and flash attention off, as Ollama runs) allows
    llama = estimate(LLAMA_8B, replace(settings, backend="llama.cpp", parallel=1, flash_attn=False))
    assert 2 <= one.max_parallel < 1024 and abs(one.max_parallel - llama.max_parallel) <= 1
    assert estimate(LLAMA_8B, replace(settings, parallel=one.max_parallel, gpu_layers=33)).fits
    assert not estimate(LLAMA_8B, replace(settings, parallel=one.max_parallel + 1, gpu_layers=33)).fits


def test_applied_quant_is_reported_with_its_bits() -> None:
    est = estimate(LLAMA_8B, Settings(quant="q4_k_m", device_bytes=12 * GIB))
    assert est.quant == "q4_k_m" and est.quant_applied and est.bits_per_weight == pytest.approx(4.89)
    own = estimate(replace(LLAMA_8B, dtype="bf16", bits_per_weight=16.0), Settings(device_bytes=24 * GIB))
    assert own.quant == "bf16" and not own.quant_applied and own.bits_per_weight == 16.0


def test_cpu_run_has_no_gpu_layer_advice() -> None:
    est = estimate(LLAMA_70B, Settings(on_gpu=False, device_bytes=16 * GIB, context=4096))
    assert not est.fits and est.device == "host"
    assert est.gpu_layers_fit is None
    assert not any("--gpu-layers" in note for note in est.notes)


def test_implausible_layer_counts_are_refused_not_looped() -> None:
    with pytest.raises(VramtuiError, match="not a plausible model"):
        estimate(replace(LLAMA_8B, n_layers=10**8), Settings())


def test_transformers_prefill_logits_are_for_the_last_token_only() -> None:
    # Llama-3-8B at 8192 tokens: full-sequence fp32 logits would be 3.9 GiB and push it past a 24 GiB card
    est = estimate(LLAMA_8B, Settings(backend="transformers", context=8192, device_bytes=24 * GIB))
    assert est.fits
    assert est.activations_bytes < 8192 * 3 * 14336 * 2 + 8 * MIB


def test_load_peak_that_does_not_fit_is_the_stated_reason() -> None:
    # vLLM's online fp8 reads the 16-bit weights first, then quantizes them
    est = estimate(LLAMA_8B, Settings(backend="vllm", quant="fp8", device_bytes=12 * GIB, context=8192))
    assert not est.fits and est.load_peak_fits is False
    assert est.reason is not None and "the load peak (the 15.0 GiB of 16-bit weights" in est.reason
    assert est.max_context is None and est.max_concurrency is None  # no context helps: not a misleading 0


def test_context_past_the_trained_length_is_noted_and_the_solver_capped() -> None:
    short = replace(LLAMA_8B, max_context=8192)
    est = estimate(short, Settings(context=20000, parallel=1, device_bytes=48 * GIB))
    assert est.past_trained_context and est.to_dict()["past_trained_context"] is True
    assert any("past the model's trained length 8192" in note for note in est.notes)
    assert est.max_context == 8192
    assert any("capped at the model's trained length" in note for note in est.notes)
    inside = estimate(short, Settings(context=8192, device_bytes=48 * GIB))
    assert not inside.past_trained_context
    assert not any("trained length" in note for note in inside.notes if "capped" not in note)


def test_vllm_breakdown_stays_within_its_budget_and_agrees_with_the_verdict() -> None:
    info = replace(LLAMA_8B, weights_bytes=int(14.96 * GIB), dtype="bf16", max_context=32768)
    est = estimate(info, Settings(backend="vllm", device_bytes=24 * GIB, context=32768))
    assert est.total_bytes <= est.usable_bytes  # the KV cache takes what the budget leaves
    assert est.fits == (est.kv_cache_tokens >= 32768)
    if not est.fits:
        assert est.reason and f"--max-model-len {est.kv_cache_tokens}" in est.reason


def test_vllm_profile_peak_is_gate_up_plus_two_hidden_rows_and_the_sampler() -> None:
    # vllm-n3 of the corpus: Llama-3.1-8B on an RTX 3090 (23.58 GiB), max_model_len 20000, V0 profile run
    # (V0 ran its profile at the model length: batch 20000 says so; V1 chunks prefill, see the next test)
    info = replace(LLAMA_8B, weights_bytes=int(14.9888 * GIB), dtype="bf16")
    settings = Settings(
        backend="vllm", device_bytes=int(23.58 * GIB), context=20000, safety=0.9, batch=20000, engine_build=7
    )
    est = estimate(info, settings)
    forward = 20000 * (2 * 14336 + 2 * 4096) * 2
    sampler = 256 * 128256 * 24  # the last token of max_num_seqs sequences, not of every token
    assert est.activations_bytes == forward + sampler
    assert est.activations_bytes == pytest.approx(2.07 * GIB, rel=0.03)  # peak_torch - weights it printed
    assert est.kv_cache_bytes == pytest.approx(3.81 * GIB, rel=0.06)  # its kv_cache_size


def test_vllm_v1_profiles_at_its_chunked_prefill_budget_by_card() -> None:
    """V1 always chunks prefill: its profile run is max_num_batched_tokens (2048 under 70 GiB, 8192 above),
    not the model length as V0's was: 2.6 GiB of compute less for a 7B-class model at 32k on 24 GiB."""
    info = replace(LLAMA_8B, weights_bytes=int(14.96 * GIB), dtype="bf16")
    small = estimate(info, Settings(backend="vllm", device_bytes=24 * GIB, context=32768))
    big = estimate(info, Settings(backend="vllm", device_bytes=80 * GIB, context=32768))
    per_token = (3 * 14336 + 2 * 4096) * 2  # V1's MLP: gate_up and act_fn's output, the residual, the input
    # the sampler's run (the forward's hidden states, 8-byte rows of 256 or 1024 sequences) is the peak
    assert small.activations_bytes == 2048 * 4096 * 2 + 256 * 128256 * 8 > 2048 * per_token
    assert big.activations_bytes == 8192 * 4096 * 2 + 1024 * 128256 * 8 > 8192 * per_token
    v0 = estimate(info, Settings(backend="vllm", device_bytes=24 * GIB, context=32768, batch=32768))
    assert v0.activations_bytes == 32768 * per_token  # a long profile's forward outgrows its sampler
    assert v0.activations_bytes - small.activations_bytes > 2.5 * GIB
    assert any("profile run at 2048 batched tokens" in note for note in small.notes)


def test_vllm_v1_profile_peak_is_the_larger_of_its_forward_and_its_sampler() -> None:
    """V1 frees the forward's activations before its dummy sampler run: the peak is the larger, not the sum.
    Qwen2.5-0.5B, LLM() defaults on an RTX 4090 with vLLM 0.27.1 (8192 batched tokens, 256 sequences): it
    printed 0.31 GiB for peak activation (tests/data/printouts/round2.jsonl); the sum was 1.05 GiB."""
    info = load_model_info(CONFIGS / "Qwen--Qwen2.5-0.5B-Instruct.config.json")
    settings = Settings(backend="vllm", device_bytes=24 * GIB, batch=8192, parallel=256, safety=0.92)
    est = estimate(info, settings)
    assert est.activations_bytes == pytest.approx(0.31 * GIB, rel=0.05)
    # before 0.20 the native top-k/top-p sorted the logits: 24 bytes an entry, still not added to the forward
    older = estimate(info, replace(settings, engine_build=19))
    assert older.activations_bytes == 8192 * 896 * 2 + 256 * 151936 * 24


def test_vllm_online_quantization_needs_room_for_the_16_bit_load() -> None:
    """Issue 22 #20: fp8 in flight reads the 16-bit weights first: the verdict says so (it said FITS)."""
    big = replace(LLAMA_70B, weights_bytes=None, dtype="bf16")
    est = estimate(big, Settings(backend="vllm", device_bytes=96 * GIB, context=4096, quant="fp8"))
    assert not est.fits and est.reason is not None and "load peak" in est.reason


def test_ollama_and_vllm_say_what_they_do_past_the_trained_length() -> None:
    short = replace(LLAMA_8B, max_context=8192)
    ollama = estimate(short, Settings(backend="ollama", context=20000, device_bytes=48 * GIB, quant="q4_k_m"))
    assert ollama.context == 8192 and ollama.past_trained_context
    assert any("Ollama clamps num_ctx 20000 to the model's trained length 8192" in n for n in ollama.notes)
    vllm = estimate(short, Settings(backend="vllm", context=20000, device_bytes=80 * GIB))
    assert vllm.past_trained_context and any("VLLM_ALLOW_LONG_MAX_MODEL_LEN" in n for n in vllm.notes)


# --- issue 13: what a new user hit -----------------------------------------------------------------------


def test_context_zero_is_the_models_own_trained_context() -> None:
    short = replace(LLAMA_8B, max_context=16384)
    for backend in ("llama.cpp", "vllm", "transformers"):
        est = estimate(short, Settings(backend=backend, context=0, device_bytes=80 * GIB))
        assert est.context == 16384, backend
        assert est.notes[0] == "context 0: the model's own trained context, 16,384 tokens"
    # a model that does not say its trained length: never a silent 4096
    with pytest.raises(VramtuiError, match="context 0 means the model's own trained context"):
        estimate(replace(LLAMA_8B, max_context=None), Settings(context=0))


def test_vllm_refuses_a_context_past_the_trained_length_llama_cpp_notes_it() -> None:
    short = replace(LLAMA_8B, max_context=32768)
    vllm = estimate(short, Settings(backend="vllm", context=131072, device_bytes=80 * GIB))
    assert not vllm.fits and vllm.past_trained_context
    assert vllm.reason is not None and "vLLM refuses to start" in vllm.reason
    assert "--max-model-len 131072 is past the model's trained length 32768" in vllm.reason
    # the same length on the same card fits by memory alone: the refusal is the reason, not the bytes
    memory_only = estimate(
        replace(short, max_context=None), Settings(backend="vllm", context=131072, device_bytes=80 * GIB)
    )
    assert memory_only.fits
    llama = estimate(short, Settings(backend="llama.cpp", context=65536, parallel=1, device_bytes=80 * GIB))
    assert llama.fits and llama.past_trained_context and llama.reason is None
    assert any("unless RoPE scaling is configured" in note for note in llama.notes)


def test_zero_attention_heads_is_one_error_about_that_field() -> None:
    config = {"model_type": "llama", "hidden_size": 256, "num_hidden_layers": 2, "num_attention_heads": 0}
    with pytest.raises(VramtuiError) as caught:
        info_from_config(config, "cfg")
    assert str(caught.value) == "cfg: config.json gives num_attention_heads as 0; it must be at least 1"
    with pytest.raises(VramtuiError, match=r"lacks hidden_size$"):
        info_from_config({"model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 4}, "cfg")


def test_largest_concurrency_is_the_same_whether_the_default_context_is_typed_or_not() -> None:
    # llama-server with no -c sizes the trained context; typing that same -c must not change the answer
    for backend in ("llama.cpp", "ollama", "vllm", "transformers"):
        default = estimate(LLAMA_8B, Settings(backend=backend, device_bytes=24 * GIB, quant="q4_k_m"))
        typed = estimate(
            LLAMA_8B,
            Settings(backend=backend, device_bytes=24 * GIB, quant="q4_k_m", context=default.context),
        )
        assert typed.context == default.context and typed.parallel == default.parallel, backend
        assert default.max_parallel == typed.max_parallel, backend


def test_another_engines_flags_are_left_out_and_said() -> None:
    # vLLM's -tp under llama.cpp, llama.cpp's --cpu-moe under vLLM or Ollama: sized without, and a note
    moe = replace(LLAMA_8B, is_moe=True, n_experts=8, n_experts_used=2)
    cases = [  # "an ollama setting" (issue 22 defect 40: it read "a ollama")
        ("llama.cpp", {"tensor_parallel_size": 2}, "--tensor-parallel-size", "a"),
        ("vllm", {"cpu_moe": True, "tensor_split": (1.0, 1.0)}, "--tensor-split, --cpu-moe", "a"),
        ("ollama", {"n_cpu_moe": 4}, "--n-cpu-moe", "an"),
        ("transformers", {"pipeline_parallel_size": 2}, "--pipeline-parallel-size", "a"),
    ]
    for backend, given, flags, article in cases:
        plain = Settings(
            backend=backend, device_bytes=24 * GIB, gpus=(24 * GIB, 24 * GIB), quant="q4_k_m", context=8192
        )
        est = estimate(moe, replace(plain, **given))
        assert est.notes[0] == f"{flags}: not {article} {backend} setting, left out"
        assert est.to_dict() | {"notes": []} == estimate(moe, plain).to_dict() | {"notes": []}
    # an engine's own flag is no such note
    own = estimate(moe, Settings(device_bytes=24 * GIB, quant="q4_k_m", context=8192, cpu_moe=True))
    assert not any("left out" in note for note in own.notes) and own.weights_host_bytes > 0


def test_another_engines_multi_gpu_flags_on_one_card_are_left_out_not_refused() -> None:
    # Issue 22 #34: `-tp 2` under llama.cpp with one card was "2 ranks need as many cards", exit 2
    cases = [
        ("llama.cpp", {"tensor_parallel_size": 2}, "--tensor-parallel-size"),
        (
            "llama.cpp",
            {"tensor_parallel_size": 2, "pipeline_parallel_size": 2},
            "--tensor-parallel-size, --pipeline-parallel-size",
        ),
        ("vllm", {"tensor_split": (3.0, 1.0), "main_gpu": 1}, "--tensor-split, --main-gpu"),
        ("transformers", {"tensor_parallel_size": 4}, "--tensor-parallel-size"),
    ]
    for backend, given, flags in cases:
        plain = Settings(backend=backend, device_bytes=24 * GIB, quant="q4_k_m", context=8192)
        est = estimate(LLAMA_8B, replace(plain, **given))
        assert est.notes[0] == f"{flags}: not a {backend} setting, left out"
        assert est.to_dict() | {"notes": []} == estimate(LLAMA_8B, plain).to_dict() | {"notes": []}
    # the engine's own flag is still checked against the cards
    with pytest.raises(VramtuiError, match="2 ranks need as many cards; 1 given"):
        Settings(backend="vllm", device_bytes=24 * GIB, tensor_parallel_size=2)
    with pytest.raises(VramtuiError, match="--tensor-split names 2 devices but 1 card"):
        Settings(backend="llama.cpp", device_bytes=24 * GIB, tensor_split=(3.0, 1.0))


def test_an_engines_own_flag_is_no_left_out_note() -> None:
    moe = replace(LLAMA_8B, is_moe=True, n_experts=8, n_experts_used=2)
    own = estimate(moe, Settings(device_bytes=24 * GIB, quant="q4_k_m", context=8192, cpu_moe=True))
    assert not any("left out" in note for note in own.notes) and own.weights_host_bytes > 0


def test_llama_cpp_runs_at_most_256_sequences_whatever_memory_holds() -> None:
    """Issue 22 #25: llama.cpp refuses more than 256 sequences ("n_seq_max must be <= 256", LLAMA_MAX_SEQ),
    so a small model on a big card gets 256 as its concurrency, said in a note, and 300 does not run."""
    from vramtui.core.estimate.grid import build_table

    info = info_from_flags(params=500_000_000, layers=24, kv_heads=2, head_dim=64, quant="q4_k_m")
    small = Settings(backend="llama.cpp", context=2048, parallel=1, device_bytes=80 * GIB)
    est = estimate(info, small)
    assert est.max_parallel == 256 and est.fits
    assert any("at most 256 sequences at once: llama.cpp runs no more" in note for note in est.notes)
    # memory alone would hold more: vLLM, whose limit is its --max-num-seqs (1024 by default on 80 GiB), gets more
    assert 256 < estimate(info, replace(small, backend="vllm", parallel=None)).max_parallel <= 1024
    over = estimate(info, replace(small, parallel=300))
    assert not over.fits and "at most 256 sequences at once, not 300" in (over.reason or "")
    assert over.max_context is None  # QA 38 F13: no context starts 300 slots ("largest context 384,000")
    assert (
        estimate(info, replace(small, backend="ollama", parallel=300)).fits is False
    )  # its runner is llama.cpp
    table = build_table(info, small, contexts=[1024, 2048])
    assert max(cell.max_parallel for row in table.rows for cell in row.cells) == 256
    assert any("at most 256 sequences" in note for note in table.notes)


def test_sizes_under_a_gib_in_the_notes_read_in_mib(tiny_gguf) -> None:  # type: ignore[no-untyped-def]
    """Issue 22 defect 40: "the rest needs 0.06 GiB of host RAM" beside "host RAM needed 66.53 MiB"."""
    import re

    from vramtui.core.estimate.modelinfo import load_model_info
    from vramtui.core.units import format_bytes

    # 550 MiB: two of its layers fit (at 200 MiB not even none does: the runtime alone is over the line)
    est = estimate(load_model_info(tiny_gguf), Settings(device_bytes=550 * MIB, context=4096, on_gpu=True))
    assert not est.fits and est.host_bytes_needed and est.host_bytes_needed < GIB
    note = next(note for note in est.notes if note.startswith("with --gpu-layers"))
    assert f"the rest needs {format_bytes(est.host_bytes_needed)} of host RAM" in note, note
    assert not any(re.search(r"\b0\.\d+ GiB", note) for note in est.notes), est.notes


def test_vllm_concurrency_stops_at_max_num_seqs() -> None:
    """vLLM batches at most --max-num-seqs requests (256 by default under 70 GiB), however many its KV
    pool holds: a 0.5B model at 4096 tokens on 24 GiB holds hundreds, the scheduler runs 256 or the
    value given, and the note names the flag; the grid's cells stop there too."""
    from vramtui.core.estimate.grid import build_table

    info = load_model_info(CONFIGS / "Qwen--Qwen2.5-0.5B-Instruct.config.json")
    base = Settings(backend="vllm", context=4096, device_bytes=24 * GIB)
    default = estimate(info, base)
    assert default.kv_cache_tokens // 4096 > 256  # the pool alone would hold more
    assert default.max_parallel == 256 and default.to_dict()["max_parallel_capped"] is True
    assert any("--max-num-seqs 256 caps it" in note for note in default.notes)
    given = estimate(info, replace(base, parallel=16))
    assert given.max_parallel == 16 and given.fits
    table = build_table(info, replace(base, parallel=16), contexts=[1024, 4096])
    assert max(cell.max_parallel for row in table.rows for cell in row.cells) == 16
    assert any("--max-num-seqs 16 caps it" in note for note in table.notes)


def test_vllm_refuses_more_sequences_than_batched_tokens() -> None:
    """vLLM's SchedulerConfig: max_num_batched_tokens must be >= max_num_seqs, else it will not start
    (QA: --parallel 4096 on a 16 GiB card said FITS); its default max_num_seqs is at most the batch."""
    info = load_model_info(CONFIGS / "Qwen--Qwen2.5-0.5B-Instruct.config.json")
    base = Settings(backend="vllm", context=1024, device_bytes=16 * GIB)
    over = estimate(info, replace(base, parallel=4096))
    assert not over.fits and "max_num_batched_tokens (2048) must be greater than or equal to" in (
        over.reason or ""
    )
    assert over.refused and over.to_dict()["refused"] is True  # not memory: said as such
    assert estimate(info, replace(base, parallel=4096, batch=4096)).fits
    assert estimate(info, replace(base, batch=512)).parallel == 256
    assert estimate(info, replace(base, batch=100)).parallel == 100


def test_max_parallel_stops_at_the_engines_own_limit() -> None:
    """QA: `ps --fits` said "1024 at once" for llama.cpp, which runs at most 256 sequences (the estimate
    itself said so); a short context on a big card is where memory alone would allow more."""
    from vramtui.core.estimate.estimator import capped_parallel

    settings = Settings(backend="llama.cpp", device_bytes=140 * GIB, quant="q4_k_m", context=256)
    assert max_parallel(LLAMA_8B, settings) > 256  # memory would hold more
    assert capped_parallel(LLAMA_8B, settings) == 256


def test_transformers_largest_context_is_the_exact_flip() -> None:
    """QA 17 F10: transformers' cache has no cell padding, yet its largest context was rounded down to a
    multiple of 256 (3,072 where 3,139 fit): the verdict flips exactly there now."""
    info = replace(LLAMA_8B, weights_bytes=int(14.96 * GIB))
    settings = Settings(backend="transformers", device_bytes=20 * GIB, context=4096)
    largest = estimate(info, settings).max_context
    assert largest % 256 and 0 < largest < info.max_context
    assert estimate(info, replace(settings, context=largest)).fits
    assert not estimate(info, replace(settings, context=largest + 1)).fits


def test_llama_cpp_pythons_server_keeps_its_layers_on_the_host_unless_told() -> None:
    """QA 26 D1: `estimate --backend llama-cpp-python` sized every layer on the GPU, while its server's own
    n_gpu_layers default is 0 and vramtui launches it with no flag: the run put none there."""
    left_out = estimate(LLAMA_8B, Settings(backend="llama-cpp-python", context=4096))
    assert left_out.gpu_layers == 0 and left_out.weights_bytes == 0  # no weights on the card
    said = " ".join(left_out.notes)
    assert "puts 0 of 33 layers on the GPU unless told (its --n_gpu_layers default)" in said
    assert "all 33 would fit (--n_gpu_layers -1)" in said  # a 24 GiB card holds the 8B model
    # and what the card still holds is said (QA 28 M4: "everything runs from host RAM" beside 448 MiB on it)
    assert "the GPU holds only the engine's context and its compute buffers" in said
    asked = estimate(LLAMA_8B, Settings(backend="llama-cpp-python", context=4096, gpu_layers=33))
    assert asked.gpu_layers == 33 and asked.weights_bytes > 4 * GIB
    assert "unless told" not in " ".join(asked.notes)
    # llama-server's own default is every layer: nothing changes there
    server = estimate(LLAMA_8B, Settings(context=4096))
    assert server.weights_bytes == asked.weights_bytes and "unless told" not in " ".join(server.notes)


def test_vllms_longest_fit_past_the_trained_length_is_the_trained_length() -> None:
    """QA 36 F6: --max-model-len 131072 on a 40960-token model: the note offered 87184, refused as well."""
    info = replace(LLAMA_8B, weights_bytes=int(14.96 * GIB), max_context=40960)
    est = estimate(info, Settings(backend="vllm", device_bytes=24 * GIB, context=131072, kv_dtype="fp8"))
    refusal = next(note for note in est.notes if "the longest that fits is" in note)
    assert refusal.endswith("--max-model-len 40960"), refusal
