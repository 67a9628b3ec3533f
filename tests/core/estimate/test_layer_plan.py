"""Decoders whose layers differ (issue 23): DeciLM / Nemotron-NAS `block_configs` and per-layer lists in
config.json, and a GGUF's per-layer arrays. The published configs of Llama-3.1-Nemotron-Ultra-253B-v1 and
Llama-3.3-Nemotron-Super-49B-v1 are in tests/data/configs (sources in its README); llama.cpp's printout of the
Ultra's GGUF (ik_llama.cpp#377, quoted in the README) gives the parameters and the per-layer heads and widths."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from vramtui.core.demo.tinygguf import _vocab
from vramtui.core.errors import VramtuiError
from vramtui.core.estimate import modelinfo as mi
from vramtui.core.estimate.estimator import Settings, estimate
from vramtui.core.estimate.modelinfo import info_from_config, load_model_info
from vramtui.core.estimate.weights import llama_cpp_weights
from vramtui.core.units import GIB

CONFIGS = Path(__file__).resolve().parents[2] / "data" / "configs"
ULTRA = CONFIGS / "nvidia--Llama-3_1-Nemotron-Ultra-253B-v1.config.json"
SUPER = CONFIGS / "nvidia--Llama-3_3-Nemotron-Super-49B-v1.config.json"
# llama.cpp (ik_llama.cpp#377) on the Ultra's GGUF: "model params = 253.401 B", "repeating layers = ...
# 249.199 B parameters", and the first entries of its n_ff and n_head_kv arrays
ULTRA_PARAMS_B, ULTRA_REPEATING_B = 253.401, 249.199
ULTRA_N_FF_HEAD = [5376, 10752, 16128, 16128, 16128, 16128, 16128, 16128, 21504, 0, 0, 0, 0, 21504, 21504]
ULTRA_N_HEAD_KV_HEAD = [8, 8, 8, 8, 8, 8, 8, 8, 8, 0, 0, 0, 0, 8, 8]


@pytest.fixture(autouse=True)
def _private_param_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mi, "_params_cache_path", lambda: tmp_path / "param_counts.json")


def test_nemotron_ultra_counts_253b_parameters_as_llama_cpp_does() -> None:
    info = load_model_info(ULTRA)
    assert info.n_params == pytest.approx(ULTRA_PARAMS_B * 1e9, abs=0.0005e9)  # was 700B: every layer whole
    repeating = sum(g.n_elements for g in mi.tensor_groups(info) if g.layer >= 0)
    assert repeating == pytest.approx(ULTRA_REPEATING_B * 1e9, abs=0.0005e9)
    assert list(info.layer_plan.ffn[:15]) == ULTRA_N_FF_HEAD
    assert [info.kv_heads_at(i) for i in range(15)] == ULTRA_N_HEAD_KV_HEAD
    # 64 attention layers of 8 KV heads x 128, K and V
    attention = sum(1 for i in range(info.n_layers) if info.kv_heads_at(i))
    assert attention == 64
    est = estimate(info, Settings(backend="vllm", context=32768, device_bytes=80 * GIB))
    assert est.kv_bytes_per_token == attention * 8 * 128 * 2 * 2  # was x40: 162 layers of 128 KV heads
    assert est.weights_bytes == info.n_params * 2


def test_nemotron_super_counts_the_hubs_49_9b_and_keeps_kv_in_49_layers() -> None:
    info = load_model_info(SUPER)
    blocks = json.loads(SUPER.read_text())["block_configs"]
    assert info.n_params == pytest.approx(49.9e9, abs=0.05e9)  # the hub's "49.9B params"; was 88B
    attention = [not b["attention"]["no_op"] for b in blocks]
    assert [bool(info.kv_heads_at(i)) for i in range(info.n_layers)] == attention
    est = estimate(info, Settings(backend="transformers", context=4096, device_bytes=200 * GIB))
    assert est.kv_bytes_per_token == sum(attention) * 8 * 128 * 2 * 2


def test_a_no_op_layer_weighs_nothing_and_places_nothing() -> None:
    info = load_model_info(ULTRA)
    layers = llama_cpp_weights(info, "q4_k_m").layers
    assert layers[9] == 0  # block 9: attention and MLP both no-ops
    assert layers[16] > layers[8] > layers[0] > 0  # 53248, 21504 and 5376 wide
    # llama.cpp offloads the output and then the last N-1 layers: one more that has no attention adds
    # its bytes and no KV
    n = info.n_layers
    j = max(i for i in range(n) if not info.kv_heads_at(i))
    settings = dict(context=4096, device_bytes=400 * GIB, quant="q4_k_m")
    without = estimate(info, Settings(gpu_layers=n - j, **settings))
    with_it = estimate(info, Settings(gpu_layers=n - j + 1, **settings))
    assert with_it.kv_cache_bytes == without.kv_cache_bytes
    assert with_it.weights_bytes - without.weights_bytes == layers[j]


def _deci_config(blocks: list[dict]) -> dict:
    return {
        "model_type": "nemotron-nas",
        "hidden_size": 96,
        "num_attention_heads": 4,
        "num_hidden_layers": len(blocks),
        "num_key_value_heads": None,
        "intermediate_size": None,
        "vocab_size": 260,
        "tie_word_embeddings": False,
        "block_configs": blocks,
    }


def _block(attention: dict, ffn: dict) -> dict:
    base_attn = {"n_heads_in_group": None, "no_op": False, "replace_with_linear": False}
    base_ffn = {"ffn_mult": None, "no_op": False, "replace_with_linear": False}
    return {"attention": {**base_attn, **attention}, "ffn": {**base_ffn, **ffn}}


TINY_BLOCKS = [
    _block({"n_heads_in_group": 2}, {"ffn_mult": 2.625}),  # GQA, 2 KV heads; 2 x 2.625 x 96 / 3 = 168 -> 256
    _block({"no_op": True}, {"ffn_mult": 5.25}),  # no attention; 336 -> 512
    _block({"replace_with_linear": True}, {"no_op": True}),  # one linear for attention, no MLP
]


def test_block_configs_lay_out_each_block_as_decilm_builds_it() -> None:
    info = info_from_config(_deci_config(TINY_BLOCKS), "tiny-deci", exact_params=False)
    plan = info.layer_plan
    assert plan is not None and plan.ffn == (256, 512, 0) and plan.heads == (4, 0, 0)
    assert plan.attn_linear == (False, False, True)
    assert info.kv_heads_per_layer == (2, 0, 0)
    h, hd = 96, 24
    layer0 = h * 4 * hd + 2 * h * 2 * hd + 4 * hd * h + 3 * h * 256 + 2 * h
    layer1 = 3 * h * 512 + h
    layer2 = h * h + h
    assert info.n_params == 2 * 260 * h + h + layer0 + layer1 + layer2


def write_deci_gguf(path: Path) -> Path:
    """The tiny DeciLM above as llama.cpp's convert writes it: per-layer head_count, head_count_kv and
    feed_forward_length arrays, and per layer only the tensors llama.cpp's deci loader asks for (f32)."""
    import gguf

    rng = np.random.default_rng(0)
    w = gguf.GGUFWriter(str(path), "deci")
    w.add_name("tiny-deci")
    w.add_context_length(4096)
    w.add_embedding_length(96)
    w.add_block_count(3)
    w.add_head_count([4, 0, 4])
    w.add_head_count_kv([2, 0, 0])
    w.add_feed_forward_length([256, 512, 0])
    w.add_key_length(24)
    w.add_value_length(24)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    tokens, scores, types = _vocab()
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)

    def tensor(name: str, shape: tuple[int, ...]) -> None:
        w.add_tensor(name, (rng.standard_normal(shape) * 0.02).astype(np.float32))

    h = 96
    tensor("token_embd.weight", (len(tokens), h))
    tensor("blk.0.attn_norm.weight", (h,))
    for name, rows in (("attn_q", 96), ("attn_k", 48), ("attn_v", 48)):
        tensor(f"blk.0.{name}.weight", (rows, h))
    tensor("blk.0.attn_output.weight", (h, h))
    tensor("blk.2.attn_norm.weight", (h,))
    tensor("blk.2.attn_output.weight", (h, h))  # the linear replacement
    for layer, ff in ((0, 256), (1, 512)):
        tensor(f"blk.{layer}.ffn_norm.weight", (h,))
        tensor(f"blk.{layer}.ffn_gate.weight", (ff, h))
        tensor(f"blk.{layer}.ffn_up.weight", (ff, h))
        tensor(f"blk.{layer}.ffn_down.weight", (h, ff))
    tensor("output_norm.weight", (h,))
    tensor("output.weight", (len(tokens), h))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def test_the_gguf_and_the_config_json_of_one_model_agree(tmp_path: Path) -> None:
    from_gguf = load_model_info(write_deci_gguf(tmp_path / "tiny-deci.gguf"))
    config = {**_deci_config(TINY_BLOCKS), "vocab_size": from_gguf.vocab}
    from_json = info_from_config(config, "tiny-deci", exact_params=False)
    assert from_gguf.layer_plan is not None
    assert from_gguf.layer_plan.heads == from_json.layer_plan.heads
    assert from_gguf.layer_plan.attn_linear == from_json.layer_plan.attn_linear
    assert from_gguf.layer_plan.ffn == from_json.layer_plan.ffn
    assert from_gguf.n_params == from_json.n_params
    # re-quantizing the GGUF lays its tensors out from the plan: f32 everywhere is the file again
    relaid = llama_cpp_weights(from_gguf, "f32")
    assert list(relaid.layers) == list(from_gguf.layer_bytes)
    for backend in ("llama.cpp", "vllm"):
        a = estimate(from_gguf, Settings(backend=backend, context=1024, device_bytes=8 * GIB))
        b = estimate(from_json, Settings(backend=backend, context=1024, device_bytes=8 * GIB))
        assert a.kv_bytes_per_token == b.kv_bytes_per_token == 2 * 24 * 2 * 2  # layer 0 only, f16/bf16


def test_per_layer_lists_give_each_layer_its_heads_and_width() -> None:
    config = {
        "model_type": "llama",
        "hidden_size": 128,
        "num_hidden_layers": 3,
        "num_attention_heads": [4, 8, 8],
        "num_key_value_heads": [1, 2, 4],
        "intermediate_size": [256, 512, 384],
        "head_dim": 16,
        "vocab_size": 300,
    }
    info = info_from_config(config, "lists", exact_params=False)
    assert info.n_heads == 8 and info.n_kv_heads == 4 and info.intermediate == 512  # the widest
    assert info.kv_heads_per_layer == (1, 2, 4)
    assert info.layer_plan is not None and info.layer_plan.ffn == (256, 512, 384)
    groups = {(g.kind, g.layer): g for g in mi.tensor_groups(info)}
    assert groups[("attn_q", 0)].rows == 4 * 16 and groups[("attn_k", 2)].rows == 4 * 16
    assert groups[("ffn_up", 1)].rows == 512
    est = estimate(info, Settings(backend="vllm", context=1024, device_bytes=8 * GIB))
    assert est.kv_bytes_per_token == (1 + 2 + 4) * 16 * 2 * 2


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"num_key_value_heads": [1, 2]}, "one per layer"),
        ({"block_configs": TINY_BLOCKS[:2]}, "2 block_configs for num_hidden_layers 3"),
        ({"block_configs": [_block({}, {"ffn_mult": 1.0})] * 3}, "n_heads_in_group"),
    ],
)
def test_a_per_layer_field_that_does_not_fit_is_one_clear_error(change: dict, words: str) -> None:
    config = {**_deci_config(TINY_BLOCKS), **change}
    if "block_configs" not in change:
        config.pop("block_configs")
    with pytest.raises(VramtuiError, match=words):
        info_from_config(config, "bad", exact_params=False)


NEMOTRON_3_SUPER = CONFIGS / "nvidia--NVIDIA-Nemotron-3-Super-120B-A12B.config-fields.json"
# transformers 5.24's NemotronHForCausalLM built from these fields on the meta device counts 120,668,687,360
# parameters (the "120B" of its name); every layer read as attention plus 512 gated experts at hidden width
# gave 1,495B (2.72 TiB in bf16)
NEMOTRON_3_SUPER_PARAMS = 120_668_687_360


def test_nemotron_h_lays_out_one_block_per_layer_with_latent_experts() -> None:
    cfg = json.loads(NEMOTRON_3_SUPER.read_text())
    info = info_from_config(cfg, "Nemotron-3-Super", exact_params=False)
    assert info.n_params == NEMOTRON_3_SUPER_PARAMS
    pattern = cfg["hybrid_override_pattern"]
    kinds: dict[str, set[str]] = {}
    for group in mi.tensor_groups(info):
        if group.layer >= 0 and group.kind != "norm":
            kinds.setdefault(pattern[group.layer], set()).add(group.kind)
    assert kinds["M"] == {"ssm_in", "ssm_conv1d", "ssm_out", "ssm_misc"}
    assert kinds["*"] == {"attn_q", "attn_k", "attn_v", "attn_output"}
    # relu2 experts have no gate; they read and write the 1024-wide latent (llama.cpp's check_tensor_dims
    # expects ffn_down_exps 2688 x 1024 x 512 for this model)
    assert "ffn_gate_exps" not in kinds["E"] and {"ffn_latent_in", "ffn_latent_out"} <= kinds["E"]
    down = next(g for g in mi.tensor_groups(info) if g.kind == "ffn_down_exps")
    assert (down.cols, down.rows, down.count) == (2688, 1024, 512)
    assert "experts in 40, a Mamba mixer in 40" in info.notes[0]
    est = estimate(info, Settings(backend="llama.cpp", context=4096, device_bytes=400 * GIB))
    assert 220 * GIB < est.weights_bytes < 230 * GIB  # 120.7B in bf16: 224.8 GiB, not 2.72 TiB


def test_nemotron_h_counts_as_transformers_builds_it() -> None:
    pytest.importorskip("transformers")
    cfg = json.loads(NEMOTRON_3_SUPER.read_text())
    assert mi.count_params_meta(cfg) == NEMOTRON_3_SUPER_PARAMS


@pytest.mark.parametrize("pattern", ["MEM", "MEMX" * 22])
def test_a_hybrid_pattern_that_does_not_fit_is_one_clear_error(pattern: str) -> None:
    cfg = {**json.loads(NEMOTRON_3_SUPER.read_text()), "hybrid_override_pattern": pattern}
    with pytest.raises(VramtuiError, match="hybrid_override_pattern should be 88 of M"):
        info_from_config(cfg, "Nemotron-3-Super", exact_params=False)


def test_ik_llama_cpp_multiplies_host_experts_on_the_gpu_only_at_32_tokens_per_expert(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """ik_llama.cpp's offload_op sends a host expert matmul to the GPU only when micro-batch x experts used
    >= 32 x experts: Qwen3-30B-A3B (128 experts, 8 used) at -ub 256 is multiplied in host RAM, so the first
    GPU's compute buffer holds no copy of a layer's experts; at -ub 512 it does. Mainline copies at both."""
    from vramtui.cli import main

    config = Path(__file__).resolve().parents[2] / "data" / "configs" / "Qwen--Qwen3-30B-A3B.config.json"
    expert_tensor = 128 * 768 * 2048 * 34 // 32  # one layer's ffn_up_exps at q8_0

    def compute(backend: str, ubatch: int) -> int:
        argv = ["estimate", str(config), "--backend", backend, "--quant", "q8_0", "--cpu-moe"]
        main([*argv, "--ubatch", str(ubatch), "--ctx", "8192", "--gpu-mem", "24GiB", "--json"])
        return int(json.loads(capsys.readouterr().out)["compute_buffer_bytes"])

    assert compute("ik_llama.cpp", 256) < expert_tensor < compute("ik_llama.cpp", 512)
    assert compute("llama.cpp", 256) > expert_tensor  # mainline: 32 tokens are enough
