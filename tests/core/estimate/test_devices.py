"""Several GPUs against what real multi-GPU runs printed (tests/data/logs/printouts.jsonl and
tests/data/printouts/devices.jsonl, each with its source). Each model's shape is the one its log prints
(n_layer, KV width, buffers) with the rest from its published config.json; tolerances are stated."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vramtui.core.errors import VramtuiError
from vramtui.core.estimate import devices
from vramtui.core.estimate.estimator import Settings, estimate
from vramtui.core.estimate.modelinfo import load_model_info
from vramtui.core.logs.diagnose import diagnose_text
from vramtui.core.units import GIB, MIB

DATA = Path(__file__).resolve().parents[2] / "data"


def _case(name: str) -> dict:
    for path in (DATA / "logs" / "printouts.jsonl", DATA / "printouts" / "devices.jsonl"):
        for line in path.read_text().splitlines():
            case = json.loads(line)
            if case["id"] == name:
                return case
    raise KeyError(name)


def _printed(name: str) -> dict[str, int | float]:
    return diagnose_text(_case(name)["log"], kernel_log=lambda: None).engine_figures


def _config(tmp_path: Path, **config: object) -> object:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    return load_model_info(str(path), exact_params=False)


# Command-R v01 (CohereForCausalLM): the log prints 40 layers, a KV of 5120 MiB for 4096 f16 cells (8192
# wide: 64 KV heads x 128) and a CPU buffer of 1640.62 MiB = the tied 256000 x 8192 embedding at q6_K; the
# intermediate size is its config's. The layer buffers (17783 MiB over 40 layers of 822M weights, 4.53
# bits/weight) say Q4_K_S, not Q4_K_M (~4.8).
COMMAND_R = dict(
    architectures=["CohereForCausalLM"], model_type="cohere", hidden_size=8192, intermediate_size=22528,
    num_attention_heads=64, num_key_value_heads=64, num_hidden_layers=40, vocab_size=256000,
    max_position_embeddings=8192, tie_word_embeddings=True, torch_dtype="float16",
)  # fmt: skip


def test_layer_split_matches_the_printed_buffers_of_two_cards(tmp_path: Path) -> None:
    """split-1: RTX 4070 Ti + 3090 Ti, all 41 layers, pipeline parallelism on (n_copies=4)."""
    printed = _printed("split-1-4070ti-3090ti-pipeline")
    info = _config(tmp_path, **COMMAND_R)
    # the printed KV split is 1536:3584 MiB = 12:28 layers; the free memory llama.cpp split by is not in the
    # log, so the split is given as the one that places 12 layers: 12 of 41 slots (the output is the 41st)
    settings = Settings(
        context=4096,
        parallel=1,
        quant="q4_k_s",
        flash_attn=False,
        gpus=(12 * GIB, 24 * GIB),
        tensor_split=(12, 29),
    )
    est = estimate(info, settings)
    cuda0, cuda1 = est.devices
    assert (cuda0.layers, cuda1.layers) == (12, 28)
    assert (
        cuda0.kv_cache_bytes == printed["kv_buffer.CUDA0"]
        and cuda1.kv_cache_bytes == printed["kv_buffer.CUDA1"]
    )
    for row, key in ((cuda0, "model_buffer.CUDA0"), (cuda1, "model_buffer.CUDA1")):
        assert row.weights_bytes == pytest.approx(printed[key], rel=0.03)  # 3% on weights
    assert est.weights_host_bytes == pytest.approx(printed["model_buffer.CPU"], rel=0.001)
    # the compute buffer with 4 copies of the split inputs: printed 672.01 MiB (10%)
    assert cuda0.compute_buffer_bytes == pytest.approx(printed["compute_buffer.CUDA0"], rel=0.10)
    assert any("pipeline parallelism on" in note for note in est.notes)


def test_the_split_points_are_llama_cpps_upper_bound_over_the_slots() -> None:
    # 4 equal devices, 48 layers + the output: 13, 12, 12 and 11 layers (+ output on the last)
    where = devices.layer_devices(48, 0, 49, [1, 1, 1, 1])
    assert [where[:48].count(i) for i in range(4)] == [13, 12, 12, 11] and where[48] == 3
    # a split equal to the layer counts gives one layer more to the first card: the output takes a slot
    assert devices.layer_devices(40, 0, 41, [12, 28])[:40].count(0) == 13
    # partial offload: the first layers stay on the host, the output too
    partial = devices.layer_devices(40, 10, 30, [1, 1])
    assert partial[:10] == [None] * 10 and partial[40] is None and partial[10:40].count(0) == 15


QWEN3_30B_A3B = dict(
    architectures=["Qwen3MoeForCausalLM"], model_type="qwen3_moe", hidden_size=2048, intermediate_size=6144,
    moe_intermediate_size=768, num_experts=128, num_experts_per_tok=8, num_attention_heads=32,
    num_key_value_heads=4, head_dim=128, num_hidden_layers=48, vocab_size=151936,
    max_position_embeddings=40960, tie_word_embeddings=False, torch_dtype="bfloat16",
)  # fmt: skip


def test_row_split_keeps_the_experts_and_the_kv_with_the_layers_device(tmp_path: Path) -> None:
    """row-1: Qwen3-30B-A3B Q8_0 row-split over 4 K80 dies (default split: equal cards), n_ctx 30016."""
    printed = _printed("row-1-qwen3-30b-a3b-4xk80-row-split")
    info = _config(tmp_path, **QWEN3_30B_A3B)
    settings = Settings(
        context=30016, parallel=1, quant="q8_0", flash_attn=True, gpus=(12 * GIB,) * 4, split_mode="row"
    )
    est = estimate(info, settings)
    rows = est.devices
    assert [row.layers for row in rows] == [13, 12, 12, 11]
    # the KV cache per layer's device: printed for CUDA2 and CUDA3 (1%: that build padded to 32 cells, 256 here)
    assert rows[2].kv_cache_bytes == pytest.approx(printed["kv_buffer.CUDA2"], rel=0.01)
    assert rows[3].kv_cache_bytes == pytest.approx(printed["kv_buffer.CUDA3"], rel=0.01)
    # weights: its layers' experts and norms plus a quarter of every layer's 2D matrices (3%)
    for i in (0, 1, 2):
        both = printed[f"model_buffer.CUDA{i}"] + printed[f"model_buffer.CUDA{i}_Split"]
        assert rows[i].weights_bytes == pytest.approx(both, rel=0.03)
    # every device multiplies every layer's rows: one compute buffer each, the same size
    assert len({row.compute_buffer_bytes for row in rows}) == 1
    assert not any("pipeline parallelism on" in note for note in est.notes)


QWEN3_235B = dict(
    architectures=["Qwen3MoeForCausalLM"], model_type="qwen3_moe", hidden_size=4096, intermediate_size=12288,
    moe_intermediate_size=1536, num_experts=128, num_experts_per_tok=8, num_attention_heads=64,
    num_key_value_heads=4, head_dim=128, num_hidden_layers=94, vocab_size=151936,
    max_position_embeddings=40960, tie_word_embeddings=False, torch_dtype="bfloat16",
)  # fmt: skip


def test_vllm_tp_splits_the_kv_heads_over_the_ranks(tmp_path: Path) -> None:
    """vllm-tp-4: 4 KV heads over 4 ranks, one each: the printed token capacity of the printed KV memory."""
    info = _config(tmp_path, **QWEN3_235B)
    (rank, *_others) = devices.vllm_ranks(info, 235 * 10**9, "bf16", "latent", 4, 1)
    assert rank.kv_bytes_per_token == 94 * 2 * 1 * 128 * 2
    # "Available KV cache memory: 8.11 GiB" -> "GPU KV cache size: 178,880 tokens" (2%: 8.11 is rounded,
    # and the count is the smallest over the ranks)
    assert 8.11 * GIB / rank.kv_bytes_per_token == pytest.approx(178_880, rel=0.02)
    # with more ranks than KV heads each keeps one head (replicated): no smaller per rank than at TP 4
    (wide, *_rest) = devices.vllm_ranks(info, 235 * 10**9, "bf16", "latent", 8, 1)
    assert wide.kv_bytes_per_token == rank.kv_bytes_per_token


QWEN25_14B = dict(
    architectures=["Qwen2ForCausalLM"], model_type="qwen2", hidden_size=5120, intermediate_size=13824,
    num_attention_heads=40, num_key_value_heads=8, num_hidden_layers=48, vocab_size=152064,
    max_position_embeddings=131072, tie_word_embeddings=False, torch_dtype="bfloat16",
)  # fmt: skip


def test_vllm_tp_weights_per_rank(tmp_path: Path) -> None:
    """vllm-tp-5: DeepSeek-R1-Distill-Qwen-14B under TP 2: 'Loading model weights took 13.9476 GB' per rank."""
    info = _config(tmp_path, **QWEN25_14B)
    est = estimate(
        info, Settings(backend="vllm", context=8192, gpus=(24 * GIB, 24 * GIB), tensor_parallel_size=2)
    )
    assert len(est.devices) == 2
    for row in est.devices:
        assert row.weights_bytes == pytest.approx(13.9476 * GIB, rel=0.03)  # 3% on weights


def test_pipeline_stages_take_the_layers_as_vllm_does() -> None:
    assert devices.pp_layer_counts(94, 4) == [23, 24, 24, 23]
    assert devices.pp_layer_counts(48, 2) == [24, 24]


def test_the_tightest_card_decides(tmp_path: Path) -> None:
    info = _config(tmp_path, **COMMAND_R)
    roomy = Settings(context=4096, parallel=1, quant="q4_k_s", gpus=(24 * GIB, 24 * GIB))
    assert estimate(info, roomy).fits
    # the same model, the same total memory, most of it on one card: the small card is over
    lopsided = Settings(
        context=4096, parallel=1, quant="q4_k_s", gpus=(40 * GIB, 8 * GIB), tensor_split=(1, 1)
    )
    est = estimate(info, lopsided)
    assert not est.fits and "device 1 over by" in (est.reason or "")
    assert [row.fits for row in est.devices] == [True, False]
    # the context solver respects it: its answer fits on both cards
    assert est.max_context is not None
    at_max = estimate(info, Settings(**{**lopsided.__dict__, "context": max(est.max_context, 256)}))
    assert at_max.fits or est.max_context == 0


def test_one_card_keeps_todays_output(tmp_path: Path) -> None:
    info = _config(tmp_path, **COMMAND_R)
    one = estimate(info, Settings(context=4096, parallel=1, quant="q4_k_s", device_bytes=48 * GIB))
    assert one.devices == [] and "devices" not in one.to_dict()


def test_bad_layouts_are_one_line_errors() -> None:
    with pytest.raises(VramtuiError, match="--tensor-split names 3 devices"):
        Settings(gpus=(GIB, GIB), tensor_split=(1, 1, 1))
    with pytest.raises(VramtuiError, match="--main-gpu 2"):
        Settings(gpus=(GIB, GIB), main_gpu=2)
    with pytest.raises(VramtuiError, match="ranks need as many cards"):
        Settings(backend="vllm", gpus=(GIB, GIB), tensor_parallel_size=4)
    with pytest.raises(ValueError):
        devices.parse_split("0,0")


def test_the_diagnosis_names_the_device_that_ran_out() -> None:
    assert _printed("oom-1-5gpu-device4-compute-pipeline")["oom_device"] == 4
    assert _printed("oom-2-minimax-m3-device1-compute-3gpu")["oom_device"] == 1
    # no per-device buffers printed: nothing to move layers by
    assert devices.split_moves(_printed("oom-1-5gpu-device4-compute-pipeline"), 40) == []


def test_a_split_move_off_the_card_that_ran_out() -> None:
    """split-1's printed per-device buffers, had CUDA1 then failed a 700 MiB allocation (the OOM is
    supposed here: the arithmetic of the move, on real buffers)."""
    figures = {**_printed("split-1-4070ti-3090ti-pipeline"), "oom_device": 1, "oom_requested": 700 * MIB}
    first = devices.split_moves(figures, 40)[0]
    # CUDA1 held (13989.53 + 3584) MiB over its 28 layers (the KV split says 12:28): 628 MiB a layer, so
    # 2 layers free the 700 MiB
    assert (first.source, first.target, first.layers) == (1, 0, 2)
    assert first.split == (14, 27)  # 14 layers, 26 layers + the output slot
    assert first.describe() == "move 2 layers from CUDA1 to CUDA0 (--tensor-split 14,27)"
    assert devices.layer_devices(40, 0, 41, first.split)[:40].count(0) == 14
