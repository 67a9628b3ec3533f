"""vLLM's --cpu-offload-gb (issue 15): the estimator moves that many GiB of the decoder layers' weights per
GPU to host RAM (vllm/model_executor/models/utils.py maybe_offload_to_cpu: the first layers' parameters
until N GiB have moved; the embedding and lm_head are outside make_layers and stay), and the wizard's vLLM
load_weights rung proposes the smallest whole GiB that fits, with its speed cost."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from vramtui.cli import main
from vramtui.core.backends.vllm.memory import BLOCK_TOKENS, layer_weights
from vramtui.core.errors import VramtuiError
from vramtui.core.estimate.estimator import Settings, estimate
from vramtui.core.estimate.modelinfo import load_model_info
from vramtui.core.launch.profile import Profile
from vramtui.core.memory.parts import HOST
from vramtui.core.units import GIB
from vramtui.core.wizard.budget import needed_bytes
from vramtui.core.wizard.wizard import Wizard

DATA = Path(__file__).resolve().parents[2] / "data"
# Qwen/Qwen2.5-14B-Instruct's published config.json (the sizing keys): a bf16 model of 29.5 GB.
QWEN25_14B = {
    "architectures": ["Qwen2ForCausalLM"],
    "model_type": "qwen2",
    "hidden_size": 5120,
    "intermediate_size": 13824,
    "num_hidden_layers": 48,
    "num_attention_heads": 40,
    "num_key_value_heads": 8,
    "vocab_size": 152064,
    "max_position_embeddings": 32768,
    "torch_dtype": "bfloat16",
    "tie_word_embeddings": False,
    "rms_norm_eps": 1e-06,
}


@pytest.fixture(scope="module")
def qwen14b(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("qwen2.5-14b")
    (folder / "config.json").write_text(json.dumps(QWEN25_14B))
    return folder


def _vllm(**changes: Any) -> Settings:
    return Settings(backend="vllm", context=8192, device_bytes=24 * GIB, **changes)


def test_the_gib_asked_leave_the_card_and_the_kv_cache_takes_their_room(qwen14b: Path) -> None:
    info = load_model_info(qwen14b)
    base = estimate(info, _vllm())
    four = estimate(info, _vllm(cpu_offload_gb=4))
    ten = estimate(info, _vllm(cpu_offload_gb=10))
    # 27.5 GiB of bf16 weights against 92% of a 24 GiB card: 4 GiB off it are not enough, 10 are
    # (with the profile run's activations and 8192 tokens of KV cache)
    assert not base.fits and not four.fits and ten.fits
    assert four.weights_host_bytes == 4 * GIB and four.bill.get("weights", HOST) == 4 * GIB
    assert four.weights_bytes == base.weights_bytes - 4 * GIB
    # what the 10 GiB free goes to the KV cache, in whole blocks
    per_block = BLOCK_TOKENS * ten.kv_bytes_per_token
    room_before = 0.92 * 24 * GIB - base.weights_bytes - base.activations_bytes - base.overhead_bytes
    room_before -= base.bill.get("cuda_graphs")  # today's vLLM profiles its CUDA graphs inside the budget
    assert ten.kv_cache_bytes // per_block == (room_before + 10 * GIB) // per_block
    assert any("--cpu-offload-gb 4" in note and "slower" in note for note in four.notes)
    # more than the layers hold: every decoder layer moves, the embedding and lm_head stay
    every = estimate(info, _vllm(cpu_offload_gb=1000))
    assert every.weights_host_bytes == layer_weights(info, base.weights_bytes)
    assert every.weights_bytes == base.weights_bytes - every.weights_host_bytes
    embedding = QWEN25_14B["vocab_size"] * QWEN25_14B["hidden_size"] * 2  # bf16
    assert abs(every.weights_bytes - 2 * embedding) <= 0.01 * every.weights_bytes
    assert any("every decoder layer" in note for note in every.notes)


def test_under_tensor_parallel_each_gpu_moves_its_own_gib(qwen14b: Path) -> None:
    info = load_model_info(qwen14b)
    cards = (12 * GIB, 12 * GIB)
    base = estimate(info, _vllm(gpus=cards, tensor_parallel_size=2))
    two = estimate(info, _vllm(gpus=cards, tensor_parallel_size=2, cpu_offload_gb=2))
    assert two.weights_host_bytes == 2 * 2 * GIB  # per GPU, as vLLM's OffloadConfig says
    for before, after in zip(base.devices, two.devices, strict=True):
        assert after.weights_bytes == before.weights_bytes - 2 * GIB


def test_other_engines_say_they_ignore_it_and_bad_values_are_one_line(
    qwen14b: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    info = load_model_info(qwen14b)
    llama = estimate(info, Settings(context=8192, cpu_offload_gb=4))
    assert llama.weights_host_bytes == estimate(info, Settings(context=8192)).weights_host_bytes
    assert any("--cpu-offload-gb is vLLM's" in note for note in llama.notes)
    with pytest.raises(VramtuiError, match="cpu_offload_gb"):
        Settings(cpu_offload_gb=-1)
    assert Settings.from_params({"cpu_offload": "4GiB"}, backend="vllm").cpu_offload_gb == 4.0
    assert main(["estimate", str(qwen14b), "--backend", "vllm", "--cpu-offload-gb", "lots"]) == 2
    assert "--cpu-offload-gb" in capsys.readouterr().err
    argv = ["estimate", str(qwen14b), "--backend", "vllm", "--ctx", "8192", "--gpu-mem", "24GiB"]
    main([*argv, "--cpu-offload-gb", "10", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert (
        out["weights_host_bytes"] == 10 * GIB
        and out["fits"]
        and out["bill"]["host"]["weights_bytes"] == 10 * GIB
    )


def _replayed(log: Path) -> Any:
    def run(profile: Profile) -> Any:
        return SimpleNamespace(
            ready=False, stage="load_weights", failure_stage="load_weights", failure="cuda_oom",
            diagnosis=None, smoke=None, log_file=str(log),
        )  # fmt: skip

    return run


def test_the_wizard_offloads_the_fewest_gib_that_fit_after_a_lower_quant(
    qwen14b: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A real vLLM weight-loading OOM (vllm-project/vllm#31273): PyTorch names only the last 80 MiB piece.
    entry = next(
        json.loads(line)
        for line in (DATA / "logs" / "unseen.jsonl").read_text().splitlines()
        if '"07-vllm-v1-oom-weight-loading-h20"' in line
    )
    log = tmp_path / "vllm.log"
    log.write_text(entry["log"])
    monkeypatch.setattr("vramtui.core.wizard.budget._first_gpu_bytes", lambda: 24 * GIB)  # NVML's answer
    profile = Profile(backend="vllm", model=str(qwen14b), params={"context": 8192}, port=0)
    wizard = Wizard(profile, runner=_replayed(log), record=False)
    first = wizard.start().observation
    assert first is not None and first.failure_stage == "load_weights"
    assert first.figures["failed_alloc"] == 80 * 1024 * 1024
    # the 80 MiB piece is no measure of the room: the whole weights were asked for
    room = wizard.model.room()
    assert room is not None and room > 20 * GIB
    quant = wizard.propose()
    assert quant is not None and quant.param == "quant"  # fp8 first: little quality lost, and faster
    wizard.skip(quant)
    offload = wizard.propose()
    assert offload is not None and offload.param == "cpu_offload" and offload.knob == "--cpu-offload-gb"
    gib = int(offload.to)  # type: ignore[call-overload]
    at = {n: wizard.model.predict(profile.with_param("cpu_offload", n)) for n in (gib - 1, gib)}
    assert wizard.model.fits(at[gib]) and not wizard.model.fits(at[gib - 1])  # type: ignore[arg-type]
    now = wizard.model.predict(profile)
    assert now is not None and at[gib] is not None
    assert now.get("weights", 0) - at[gib].get("weights", 0) == gib * GIB
    assert needed_bytes(at[gib]) <= 0.9 * room
    assert "much slower generation" in offload.why and "PCIe" in offload.why
