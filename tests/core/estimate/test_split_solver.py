"""Two unequal cards (issue 22 #21, issue 23): `-ts 1,1` is over on the small card while another split of
the layers fits both; the estimate offers it (JSON and text) before the moves that cost speed, and the
wizard's first rung proposes it when the failed run printed no per-device buffers to move layers by."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from vramtui.cli import main
from vramtui.core.estimate import devices
from vramtui.core.estimate.estimator import Settings, estimate, fit_tensor_split
from vramtui.core.estimate.modelinfo import load_model_info
from vramtui.core.launch.profile import Profile
from vramtui.core.units import GIB, MIB
from vramtui.core.wizard.wizard import Wizard

# Qwen2.5-14B's published shape: 48 layers, 8 KV heads of 128
QWEN25_14B = dict(
    architectures=["Qwen2ForCausalLM"], model_type="qwen2", hidden_size=5120, intermediate_size=13824,
    num_attention_heads=40, num_key_value_heads=8, num_hidden_layers=48, vocab_size=152064,
    max_position_embeddings=131072, tie_word_embeddings=False, torch_dtype="bfloat16",
)  # fmt: skip
CARDS = (24 * GIB, 12 * GIB)


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(QWEN25_14B))
    return path


def _settings(**more: Any) -> Settings:
    return Settings(context=65536, quant="q4_k_m", **{"gpus": CARDS, "tensor_split": (1, 1), **more})


def test_the_split_that_fits_two_unequal_cards_is_offered(config: Path) -> None:
    info = load_model_info(str(config), exact_params=False)
    even = estimate(info, _settings())
    assert not even.fits and "device 1 over by" in (even.reason or "")
    split = even.tensor_split_fit
    assert split is not None and split[0] > split[1]  # more layers on the bigger card
    fitted = estimate(info, _settings(tensor_split=tuple(float(part) for part in split)))
    assert fitted.fits
    # the split leaves both cards room: the tightest card's room is the most one layer more or less gives
    spare = min(row.usable_bytes - row.total_bytes for row in fitted.devices)
    assert spare > 1 * GIB
    # said before the moves that cost speed (whole layers to the host)
    notes = even.notes
    split_note = next(i for i, note in enumerate(notes) if "--tensor-split" in note)
    layers_note = next(i for i, note in enumerate(notes) if "--gpu-layers" in note)
    assert split_note < layers_note and "no speed lost" in notes[split_note]


def test_the_split_is_said_in_the_smallest_proportions() -> None:
    # 48 layers + the output slot: 37 slots on the first card, 12 on the second is llama.cpp's 3,1
    assert devices.simplest_split(48, (37, 12)) == (3, 1)
    assert devices.layer_devices(48, 0, 49, (3, 1)) == devices.layer_devices(48, 0, 49, (37, 12))
    # a split no small proportions reproduce stays in layers
    found = devices.simplest_split(48, (25, 24))
    assert devices.layer_devices(48, 0, 49, found) == devices.layer_devices(48, 0, 49, (25, 24))


def test_no_split_is_offered_when_none_fits_or_one_card_is_given(config: Path) -> None:
    info = load_model_info(str(config), exact_params=False)
    assert fit_tensor_split(info, _settings(gpus=(6 * GIB, 4 * GIB))) is None
    assert estimate(info, _settings(gpus=(6 * GIB, 4 * GIB))).tensor_split_fit is None
    assert fit_tensor_split(info, Settings(context=65536, quant="q4_k_m", device_bytes=12 * GIB)) is None
    # the row split multiplies every layer on every card: no layer split to give
    assert fit_tensor_split(info, _settings(split_mode="row")) is None


def test_estimate_json_and_text_show_the_split(config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["estimate", str(config), "--ctx", "65536", "--quant", "q4_k_m", "--gpu-mem", "24GiB,12GiB"]
    assert main([*args, "--tensor-split", "1,1", "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    split = data["tensor_split_fit"]
    assert isinstance(split, list) and len(split) == 2
    assert main([*args, "--tensor-split", "1,1"]) == 1
    text = capsys.readouterr().out
    shown = ",".join(map(str, split))
    assert f"split that fits --tensor-split {shown}" in text
    assert main([*args, "--tensor-split", shown]) == 0  # and it does fit


# llama.cpp's lines when the second card cannot take its share of the weights (no per-device buffer was
# printed yet, so the wizard has no buffers to move layers by): each card's free memory, then the failure.
SPLIT_OOM = (
    "llama_model_load_from_file_impl: using device CUDA0 (NVIDIA GeForce RTX 4090) - 24000 MiB free\n"
    "llama_model_load_from_file_impl: using device CUDA1 (NVIDIA GeForce RTX 3060) - 12000 MiB free\n"
    "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 9000.00 MiB on device 1: cudaMalloc failed: "
    "out of memory\nllama_model_load: error loading model: unable to allocate CUDA1 buffer\n"
)


def test_the_wizard_proposes_the_split_that_fits_first(
    config: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    info = load_model_info(str(config), exact_params=False)
    monkeypatch.setattr("vramtui.core.wizard.budget._first_gpu_bytes", lambda: 24000 * MIB)
    log = tmp_path / "oom.log"
    log.write_text(SPLIT_OOM)

    def run(profile: Profile) -> Any:
        return SimpleNamespace(
            ready=False, stage="load_weights", failure_stage="load_weights", failure="cuda_oom",
            diagnosis=None, smoke=None, log_file=str(log),
        )  # fmt: skip

    params = {"context": 65536, "parallel": 1, "quant": "q4_k_m", "tensor_split": "1,1"}
    profile = Profile(backend="llama.cpp", model=str(config), params=params)
    wizard = Wizard(profile, record=False, runner=run, device_bytes=24000 * MIB)
    wizard.model._info_cache[profile.model] = info
    assert wizard.start().observation is not None
    proposal = wizard.propose()
    assert proposal is not None and proposal.param == "tensor_split"
    split = tuple(int(part) for part in str(proposal.to).split(","))
    cards = (24000 * MIB, 12000 * MIB)
    assert split == fit_tensor_split(info, Settings(**{**_settings().__dict__, "gpus": cards, "parallel": 1}))
    assert "no speed is given up" in proposal.why
