"""Quantization methods in config.json (issue 15): gpt-oss's MXFP4 experts-only checkpoint sizes near its
real files, and a method vramtui does not know says so in the verdict instead of a silent 16-bit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vramtui.cli import main
from vramtui.core.backends.vllm.memory import mxfp4_padding
from vramtui.core.estimate import modelinfo as mi
from vramtui.core.estimate.estimator import Settings, estimate
from vramtui.core.estimate.modelinfo import expert_params, info_from_config
from vramtui.core.estimate.weights import hf_quantized_bytes
from vramtui.core.memory.parts import HOST
from vramtui.core.units import GIB

# openai/gpt-oss-20b's published config.json (huggingface.co/openai/gpt-oss-20b/blob/main/config.json)
GPT_OSS_20B = {
    "architectures": ["GptOssForCausalLM"],
    "attention_bias": True,
    "head_dim": 64,
    "hidden_act": "silu",
    "hidden_size": 2880,
    "initial_context_length": 4096,
    "intermediate_size": 2880,
    "layer_types": ["sliding_attention", "full_attention"] * 12,
    "max_position_embeddings": 131072,
    "model_type": "gpt_oss",
    "num_attention_heads": 64,
    "num_experts_per_tok": 4,
    "num_hidden_layers": 24,
    "num_key_value_heads": 8,
    "num_local_experts": 32,
    "quantization_config": {
        "modules_to_not_convert": [
            "model.layers.*.self_attn",
            "model.layers.*.mlp.router",
            "model.embed_tokens",
            "lm_head",
        ],
        "quant_method": "mxfp4",
    },
    "rms_norm_eps": 1e-05,
    "rope_scaling": {
        "beta_fast": 32.0,
        "beta_slow": 1.0,
        "factor": 32.0,
        "original_max_position_embeddings": 4096,
        "rope_type": "yarn",
        "truncate": False,
    },
    "rope_theta": 150000,
    "sliding_window": 128,
    "swiglu_limit": 7.0,
    "tie_word_embeddings": False,
    "vocab_size": 201088,
}
# ggml-org's gpt-oss-20b MXFP4 GGUF (MXFP4 experts, Q8_0 elsewhere), as llama.cpp loads it
GGUF_FILE_BYTES = 11.27 * GIB
# MXFP4: 32 four-bit values share one 8-bit scale, 17 bytes per 32 weights
EXPERT_BYTES = 24 * 32 * 3 * 2880 * 2880 * 17 // 32


@pytest.fixture
def gpt_oss(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(mi, "_params_cache_path", lambda: tmp_path / "param_counts.json")
    path = tmp_path / "config.json"
    path.write_text(json.dumps(GPT_OSS_20B))
    return path


def test_gpt_oss_20b_sizes_near_its_mxfp4_file(gpt_oss: Path) -> None:
    info = mi.load_model_info(gpt_oss)
    assert info.quant == "mxfp4" and info.unknown_quant is None and info.is_moe
    llama = estimate(info, Settings(device_bytes=80 * GIB))
    on_file = llama.weights_bytes + llama.weights_host_bytes
    assert on_file == pytest.approx(GGUF_FILE_BYTES, rel=0.03)  # was 37.9 GiB, sized as 16-bit
    # the checkpoint as published: the experts MXFP4, everything else 16-bit; vLLM's Marlin MoE kernel then
    # pads the experts (issue 23: test_hf_quant_configs.py measures that against vLLM's own figure)
    experts = expert_params(info)
    checkpoint = hf_quantized_bytes(info, info.quant_spec).total
    assert checkpoint == int(experts * 4.25 / 8 + (info.n_params - experts) * 2)
    vllm = estimate(info, Settings(backend="vllm", device_bytes=80 * GIB))
    assert vllm.weights_bytes == checkpoint + mxfp4_padding(info, None)
    assert 11 * GIB < vllm.weights_bytes < 14 * GIB
    assert 4.25 < info.bits_per_weight < 6  # the average, not the experts' width alone


def test_gpt_oss_20b_with_every_expert_on_the_host(gpt_oss: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # read without mmap: the host holds exactly its tensors (mmapped, it maps the file's span between the
    # first and the last of them, most of the file: test_compute_buffers.py)
    assert main(["estimate", str(gpt_oss), "--cpu-moe", "--no-mmap", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["expert_host_bytes"] == EXPERT_BYTES
    host = data["bill"]["host"]["weights_bytes"]
    device = data["bill"]["0"]["weights_bytes"]
    assert host + device == pytest.approx(GGUF_FILE_BYTES, rel=0.03)
    # llama.cpp keeps the token embedding (Q8_0: 34 bytes per 32) on the host beside the experts; the
    # attention and the output matrix are what the GPU holds
    token_embd = 201088 * 2880 * 34 // 32
    assert host == EXPERT_BYTES + token_embd
    assert device == pytest.approx(GGUF_FILE_BYTES - EXPERT_BYTES - token_embd, rel=0.10)
    info = mi.load_model_info(gpt_oss)
    est = estimate(info, Settings(cpu_moe=True, mmap=False))
    assert est.bill.get("weights", HOST) == host


def test_an_unknown_quant_method_says_the_weights_are_unknown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = dict(model_type="llama", hidden_size=512, intermediate_size=1024, num_hidden_layers=4)
    config.update(num_attention_heads=8, quantization_config={"quant_method": "hqq", "nbits": 4})
    info = info_from_config(config, "hqq-model", exact_params=False)
    assert info.quant is None and info.unknown_quant == "hqq"
    est = estimate(info, Settings())
    assert est.weights_unknown == "hqq"
    assert any(
        note.startswith("the weights are unknown: quant_method 'hqq' is not one") for note in est.notes
    )
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    main(["estimate", str(path), "--no-meta"])
    verdict = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("verdict"))
    assert "WEIGHTS UNKNOWN (quant_method 'hqq', sized as 16-bit)" in verdict
    # with --quant the user says what they are: no longer unknown
    assert estimate(info, Settings(quant="q4_k_m")).weights_unknown is None
