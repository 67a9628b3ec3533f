"""vLLM's vision encoder share in the profile run (issue 15), from a config.json with `vision_config`.

vLLM V1 (vllm/v1/worker/gpu_model_runner.py profile_run) profiles budget // max_tokens_per_mm_item images
of the largest size (vllm-project/vllm#11210), the budget being max(max_num_batched_tokens, the tokens of
one largest image): a Qwen-VL image is 16384 tokens, the budget users see in the log (vllm-project/vllm
#34209: "Encoder cache will be initialized with a budget of 16384 tokens, and profiled with 1 image items
of the maximum feature size"). Their embeddings stay in the encoder cache while the decoder's dummy batch
runs, so the KV cache gets less."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from vramtui.core.backends.vllm.memory import BLOCK_TOKENS, activation_peak
from vramtui.core.estimate import modelinfo as mi
from vramtui.core.estimate import vision
from vramtui.core.estimate.estimator import Settings, estimate
from vramtui.core.estimate.modelinfo import info_from_config, load_model_info
from vramtui.core.estimate.vision import profile_share
from vramtui.core.estimate.weights import hf_quantized_bytes
from vramtui.core.units import GIB

CONFIGS = Path(__file__).resolve().parents[2] / "data" / "configs"

# Qwen/Qwen2.5-VL-7B-Instruct's published config.json (the sizing keys) and preprocessor_config.json.
QWEN25_VL_7B = {
    "architectures": ["Qwen2_5_VLForConditionalGeneration"],
    "model_type": "qwen2_5_vl",
    "hidden_size": 3584,
    "intermediate_size": 18944,
    "num_hidden_layers": 28,
    "num_attention_heads": 28,
    "num_key_value_heads": 4,
    "vocab_size": 152064,
    "max_position_embeddings": 128000,
    "torch_dtype": "bfloat16",
    "tie_word_embeddings": False,
    "vision_config": {
        "depth": 32,
        "hidden_size": 1280,
        "intermediate_size": 3420,
        "num_heads": 16,
        "in_chans": 3,
        "out_hidden_size": 3584,
        "patch_size": 14,
        "spatial_merge_size": 2,
        "temporal_patch_size": 2,
        "window_size": 112,
    },
}
QWEN25_VL_PREPROCESSOR = {"max_pixels": 12845056, "min_pixels": 3136, "patch_size": 14, "merge_size": 2}
# google/gemma-3-4b-it: a fixed 896x896 SigLIP image pooled to 256 tokens.
GEMMA3_4B = {
    "architectures": ["Gemma3ForConditionalGeneration"],
    "model_type": "gemma3",
    "mm_tokens_per_image": 256,
    "text_config": {
        "model_type": "gemma3_text",
        "hidden_size": 2560,
        "intermediate_size": 10240,
        "num_hidden_layers": 34,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "head_dim": 256,
        "vocab_size": 262208,
        "max_position_embeddings": 131072,
    },
    "vision_config": {
        "model_type": "siglip_vision_model",
        "hidden_size": 1152,
        "intermediate_size": 4304,
        "num_hidden_layers": 27,
        "num_attention_heads": 16,
        "image_size": 896,
        "patch_size": 14,
    },
    "torch_dtype": "bfloat16",
}


def _folder(root: Path, name: str, config: dict, **files: dict) -> Path:
    folder = root / name
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    for filename, content in files.items():
        (folder / f"{filename}.json").write_text(json.dumps(content))
    return folder


def test_a_qwen_vl_image_is_16384_tokens_and_the_budget_decides_how_many(tmp_path: Path) -> None:
    folder = _folder(tmp_path, "qwen", QWEN25_VL_7B, preprocessor_config=QWEN25_VL_PREPROCESSOR)
    tower = load_model_info(folder).vision
    assert tower is not None
    assert tower.max_tokens == 16384  # 12845056 pixels / (14 x 2)^2
    assert tower.max_patches == 4 * 16384 and tower.out_hidden == 3584
    assert profile_share(tower, 8192, 0).images == 1  # the budget rises to one whole image
    assert profile_share(tower, 16384, 0).budget_tokens == 16384
    assert profile_share(tower, 32768, 0).images == 2  # --max-num-batched-tokens 32768: two
    # without a preprocessor_config.json: the processor's own default, the same here
    bare = _folder(tmp_path, "qwen-bare", QWEN25_VL_7B)
    assert load_model_info(bare).vision.max_tokens == 16384


def test_the_profile_peak_grows_and_the_kv_cache_shrinks_by_it(tmp_path: Path) -> None:
    with_tower = load_model_info(
        _folder(tmp_path, "qwen", QWEN25_VL_7B, preprocessor_config=QWEN25_VL_PREPROCESSOR)
    )
    text_only = replace(with_tower, vision=None)  # the same model, its tower not sized
    assert (
        load_model_info(
            _folder(tmp_path, "text", {k: v for k, v in QWEN25_VL_7B.items() if k != "vision_config"})
        ).vision
        is None
    )
    settings = Settings(backend="vllm", context=8192, device_bytes=48 * GIB, batch=8192)
    plain, vision = estimate(text_only, settings), estimate(with_tower, settings)
    tokens, seqs = 8192, 256
    decoder = activation_peak(with_tower, tokens, seqs)
    share = profile_share(with_tower.vision, tokens, decoder, seqs)
    # one image: 16384 x 3584 bf16 embeddings cached; the tower's forward over 65536 patches is larger
    assert share.cache_bytes == 16384 * 3584 * 2
    assert share.forward_bytes == 65536 * (2 * 3420 + 2 * 1280) * 2
    assert share.added_bytes == max(share.forward_bytes - decoder, share.cache_bytes) > 0
    assert vision.activations_bytes == plain.activations_bytes + share.added_bytes
    per_block = BLOCK_TOKENS * vision.kv_bytes_per_token
    assert plain.kv_cache_bytes - vision.kv_cache_bytes == pytest.approx(share.added_bytes, abs=per_block)
    assert any(note.startswith("vision encoder: vLLM profiles 1 image(s)") for note in vision.notes)


def test_a_fixed_size_tower_pools_to_its_tokens(tmp_path: Path) -> None:
    tower = load_model_info(_folder(tmp_path, "gemma", GEMMA3_4B)).vision
    assert tower is not None
    assert tower.max_tokens == 256 and tower.max_patches == 64 * 64  # 896 / 14 = 64 patches a side
    share = profile_share(tower, 8192, 0, max_seqs=256)
    assert share.images == 8192 // 256 and share.cache_bytes == 32 * 256 * 2560 * 2
    assert profile_share(tower, 8192, 0, max_seqs=4).images == 4  # at most one per sequence


def test_a_nested_configs_count_has_its_tower(tmp_path: Path) -> None:
    # issue 23: a count from text_config's shapes left the SigLIP tower out (the hub lists 4.3B parameters)
    gemma = load_model_info(_folder(tmp_path, "gemma", GEMMA3_4B))
    assert gemma.vision_params == vision.tower_params(GEMMA3_4B, 2560) > 0.4e9
    assert gemma.n_params == pytest.approx(4.3e9, abs=0.05e9)
    est = estimate(gemma, Settings(backend="vllm", context=8192, device_bytes=24 * GIB))
    assert est.weights_bytes == gemma.n_params * 2
    assert any("vision encoder: vLLM profiles" in note for note in est.notes)


QWEN36 = CONFIGS / "Qwen--Qwen3.6-35B-A3B.config.json"


def test_qwen36_keeps_its_vision_tower(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mi, "_params_cache_path", lambda: tmp_path / "param_counts.json")
    config = json.loads(QWEN36.read_text())
    info = load_model_info(QWEN36, exact_params=False)
    tower = info.vision
    # its processor's largest image, 16777216 pixels, in 32 x 32 merged patches: was lost (no tower at all)
    assert tower is not None and tower.max_tokens == 16384 and tower.out_hidden == 2048
    text = info_from_config(config["text_config"], "text", exact_params=False)
    assert info.vision_params == tower.params and info.n_params == text.n_params + tower.params
    est = estimate(info, Settings(backend="vllm", context=8192, batch=8192, device_bytes=80 * GIB))
    assert any(note.startswith("vision encoder: vLLM profiles 1 image(s)") for note in est.notes)
    # a quantized checkpoint keeps the tower 16-bit (QuantTrio's AWQ names `visual` among its kept modules)
    awq = json.loads((CONFIGS / "QuantTrio--Qwen3.6-35B-A3B-AWQ.quantization_config.json").read_text())
    quantized = info_from_config({**config, "quantization_config": awq}, "awq", exact_params=False)
    no_tower = info_from_config({**config, "quantization_config": awq, "vision_config": None}, "awq", False)
    added = hf_quantized_bytes(quantized, quantized.quant_spec).total
    added -= hf_quantized_bytes(no_tower, no_tower.quant_spec).total
    assert added == tower.params * 2


def test_the_tower_count_equals_transformers_build_of_it() -> None:
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    modeling = pytest.importorskip("transformers.models.qwen3_5_moe.modeling_qwen3_5_moe")
    config = json.loads(QWEN36.read_text())
    conf = transformers.AutoConfig.for_model(
        config["model_type"], **{k: v for k, v in config.items() if k != "model_type"}
    )
    with torch.device("meta"):
        built = modeling.Qwen3_5MoeVisionModel._from_config(conf.vision_config)
    assert vision.tower_params(config, 2048) == sum(p.numel() for p in built.parameters())
