"""vLLM's quantization methods of today (issue 23), sized as the checkpoint stores them: ModelOpt (NVFP4, FP8,
MIXED_PRECISION; config.json or hf_quant_config.json), compressed-tensors NVFP4, AutoRound, FP-Quant and the
Marlin names. The quantization_config blocks are real ones (tests/data/configs, sources in its README); the
model they are laid over is Qwen3-30B-A3B's published config."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from vramtui.core.estimate import hfquant
from vramtui.core.estimate import modelinfo as mi
from vramtui.core.estimate.estimator import Settings, estimate
from vramtui.core.estimate.modelinfo import info_from_config, load_model_info
from vramtui.core.estimate.weights import hf_quantized_bytes
from vramtui.core.units import GIB

CONFIGS = Path(__file__).resolve().parents[2] / "data" / "configs"
# Qwen3-30B-A3B: 48 layers of 128 experts of 768 x 2048 (gate, up) and 2048 x 768 (down)
EXPERT_MATRICES = 48 * 128 * 3
EXPERT_N = 768 * 2048


def config(name: str) -> dict:
    return json.loads((CONFIGS / name).read_text())


@pytest.fixture(autouse=True)
def _private_param_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mi, "_params_cache_path", lambda: tmp_path / "param_counts.json")


@pytest.fixture(scope="module")
def qwen3_moe() -> dict:
    return config("Qwen--Qwen3-30B-A3B.config.json")


def nvfp4_matrix(n: int, globals_: int = 2) -> int:
    # weight uint8 [N, K/2], weight_scale e4m3 [N, K/16], float32 per-tensor scalars (weight, input)
    return n // 2 + n // 16 + 4 * globals_


def sized(qwen3_moe: dict, qc: dict) -> tuple[mi.ModelInfo, int]:
    info = info_from_config({**qwen3_moe, "quantization_config": qc}, "q", exact_params=False)
    assert info.quant_spec is not None and info.unknown_quant is None
    return info, hf_quantized_bytes(info, info.quant_spec).total


def test_modelopt_nvfp4_from_hf_quant_config_json(qwen3_moe: dict, tmp_path: Path) -> None:
    folder = tmp_path / "nvfp4"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(qwen3_moe))
    hf_quant = config("vipertsniper--DeepSeek-R1-Distill-Qwen-32B-NVFP4.hf_quant_config.json")
    (folder / "hf_quant_config.json").write_text(json.dumps(hf_quant))
    info = load_model_info(folder, exact_params=False)
    spec = info.quant_spec
    assert info.quant == "nvfp4" and spec is not None  # was unknown: sized as 16-bit
    assert hfquant.is_skipped(spec, "lm_head") and not hfquant.is_skipped(spec, "model.layers.0.mlp.gate")
    assert hf_quantized_bytes(info, spec).experts == EXPERT_MATRICES * nvfp4_matrix(EXPERT_N)
    est = estimate(info, Settings(backend="vllm", context=4096, device_bytes=80 * GIB))
    assert est.weights_unknown is None
    assert 4.5 < info.bits_per_weight < 5.5  # 4.5 for the linears, 16 for embeddings and lm_head
    assert est.weights_bytes < info.n_params * 0.7


def test_modelopt_fp8_keeps_a_float32_weight_and_input_scale_per_tensor(qwen3_moe: dict) -> None:
    qc = {"quant_method": "modelopt", **config("tencent--Hunyuan-1.8B-Instruct-FP8.hf_quant_config.json")}
    info, total = sized(qwen3_moe, qc)
    spec = info.quant_spec
    assert info.quant == "fp8"
    assert hfquant.matrix_bytes(spec, 768, 2048) == EXPERT_N + 2 * 4
    # its exclude_modules are globs and names: lm_head and the embedding stay 16-bit
    assert hfquant.is_skipped(spec, "lm_head") and hfquant.is_skipped(spec, "model.embed_tokens")
    assert info.n_params < total < info.n_params * 1.1


def test_modelopt_mixed_precision_quantizes_only_the_modules_it_lists(qwen3_moe: dict) -> None:
    qc = config("modelopt-MIXED_PRECISION-experts-NVFP4.quantization_config.json")
    info, total = sized(qwen3_moe, qc)
    spec = info.quant_spec
    layer3 = "model.layers.3.mlp.experts.0.gate_proj"  # its key is model.language_model.layers.3.mlp.experts
    assert hfquant.spec_for_module(spec, layer3).name == "nvfp4"
    assert hfquant.spec_for_module(spec, "model.layers.4.mlp.experts.0.gate_proj") is None
    bf16 = info.n_params * 2
    one_layer = 128 * 3 * EXPERT_N
    assert total == bf16 - one_layer * 2 + 128 * 3 * nvfp4_matrix(EXPERT_N)


def test_compressed_tensors_nvfp4_packs_two_codes_a_byte_with_a_scale_byte_per_16(qwen3_moe: dict) -> None:
    qc = config("BrainForge--Devstral-2-123B-Instruct-2512-NVFP4.quantization_config.json")
    info, _total = sized(qwen3_moe, qc)
    spec = info.quant_spec
    assert info.quant == "nvfp4" and spec.method == "nvfp4"  # was "compressed-tensors ... does not lay out"
    # weight_packed, weight_scale, weight_global_scale and input_global_scale (activations are FP4 too)
    assert hfquant.matrix_bytes(spec, 768, 2048) == nvfp4_matrix(EXPERT_N)
    weight_only = {
        **qc,
        "config_groups": {"g": {**qc["config_groups"]["group_0"], "input_activations": None}},
    }
    w4a16 = hfquant.spec_from_config(weight_only)
    assert hfquant.matrix_bytes(w4a16, 768, 2048) == nvfp4_matrix(EXPERT_N, globals_=1)


def test_auto_round_packs_as_gptq_without_g_idx(qwen3_moe: dict) -> None:
    qc = config("Intel--DeepSeek-R1-0528-Qwen3-8B-int4-AutoRound.quantization_config.json")
    info, _total = sized(qwen3_moe, qc)
    spec = info.quant_spec
    assert spec.method == "auto-round" and info.quant == "gptq-g128"
    groups = 2048 // 128
    # qweight int32 (4 bits each), qzeros (4 bits per group and row), scales fp16; no g_idx
    assert hfquant.matrix_bytes(spec, 768, 2048) == EXPERT_N // 2 + groups * 768 // 2 + groups * 768 * 2
    gptq = hfquant.spec_from_config({"quant_method": "gptq", "bits": 4, "group_size": 128})
    assert hfquant.matrix_bytes(gptq, 768, 2048) - hfquant.matrix_bytes(spec, 768, 2048) == 2048 * 4
    # extra_config: a module given 16 bits is kept, one given 8 bits is stored at 8
    extra = {**qc, "extra_config": {"lm_head": {"bits": 16}, "model.layers.0.mlp.gate": {"bits": 8}}}
    with_extra = hfquant.spec_from_config(extra)
    assert hfquant.spec_for_module(with_extra, "lm_head") is None
    assert hfquant.spec_for_module(with_extra, "model.layers.0.mlp.gate").bits == 8
    assert hfquant.spec_for_module(with_extra, "model.layers.1.mlp.down_proj").bits == 4


def test_fp_quant_stores_mxfp4_codes_scales_and_two_hadamard_matrices(qwen3_moe: dict) -> None:
    # vLLM's FPQuantConfig keys and defaults (hadamard_group_size 32, forward_dtype mxfp4)
    qc = {"quant_method": "fp_quant", "forward_dtype": "mxfp4", "hadamard_group_size": 32}
    qc.update(forward_method="abs_max", pseudoquantization=False, modules_to_not_convert=["lm_head"])
    info, _total = sized(qwen3_moe, qc)
    expected = EXPERT_N // 2 + EXPERT_N // 32 + 2 * 4 + 2 * 32 * 32 * 2
    assert hfquant.matrix_bytes(info.quant_spec, 768, 2048) == expected
    assert (
        hfquant.spec_from_config({**qc, "pseudoquantization": True}) is None
    )  # 16-bit weights: not laid out


@pytest.mark.parametrize(("marlin", "plain"), [("gptq_marlin", "gptq"), ("awq_marlin", "awq")])
def test_the_marlin_names_are_their_checkpoints(marlin: str, plain: str) -> None:
    qc = {"bits": 4, "group_size": 128, "sym": True}
    a = hfquant.spec_from_config({**qc, "quant_method": marlin})
    b = hfquant.spec_from_config({**qc, "quant_method": plain})
    assert a is not None and a == b


def test_nvfp4_and_mxfp8_are_names_the_cli_takes(qwen3_moe: dict) -> None:
    info = info_from_config(qwen3_moe, "bf16", exact_params=False)
    est = estimate(info, Settings(backend="vllm", quant="nvfp4", context=4096, device_bytes=80 * GIB))
    n = info.n_params
    assert n * 0.5 < est.weights_bytes < n * 0.7
    assert math.isclose(hfquant.matrix_bytes(hfquant.spec_from_name("mxfp8"), 32, 32), 1024 + 32 + 0)


def test_deepseek_v4_s_fp4_experts_beside_its_fp8_config() -> None:
    """DeepSeek-V4-Flash's config.json says `expert_dtype: fp4` beside an FP8 block config: its routed
    experts are 4-bit with a one-byte scale per 32 weights, the rest FP8. Read as FP8 throughout, its 284B
    parameters were 272 GiB, where vLLM printed 74.1 GiB per GPU at tensor-parallel 2 (round 22)."""
    info = load_model_info(CONFIGS / "deepseek-ai--DeepSeek-V4-Flash.config.json")
    spec = info.quant_spec
    assert spec is not None and spec.method == "fp8" and spec.overrides
    expert = hfquant.spec_for_module(spec, "model.layers.3.mlp.experts.7.down_proj")
    attention = hfquant.spec_for_module(spec, "model.layers.3.self_attn.q_proj")
    assert expert is not None and expert.method == "mxfp4" and attention is spec
    weights = hf_quantized_bytes(info, spec)
    assert 145 * GIB < weights.total < 156 * GIB  # 2 x 74.1 GiB printed, with the 16-bit remainder
    fp8_only = hf_quantized_bytes(
        info,
        hfquant.spec_from_config(config("deepseek-ai--DeepSeek-V4-Flash.config.json")["quantization_config"]),
    )
    assert fp8_only.total > 1.7 * weights.total
