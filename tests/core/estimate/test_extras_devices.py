"""What rides along, on several GPUs (issue 15): each extra's device bytes land on the card llama.cpp puts
them on, inside that card's `devices` row, and the tightest card decides the verdict with them.

Where llama.cpp puts them (its source): the draft is loaded with a copy of the model's parameters, so it
is split over the cards as the model is unless --device-draft names one (tools/server: `params_dft =
params_base; params_dft.devices = params_base.speculative.devices`); the projector goes to the first GPU
(clip.cpp: ggml_backend_init_by_type(GPU)) unless MTMD_BACKEND_DEVICE names another; a LoRA tensor goes
to the buffer of the model tensor it modifies, so to its layer's card."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from vramtui.core.demo.tinygguf import TinyModelSpec, write_tiny_gguf
from vramtui.core.demo.tinymmproj import write_tiny_mmproj
from vramtui.core.estimate.devices import layer_devices, shares_for
from vramtui.core.estimate.estimator import Settings, estimate
from vramtui.core.estimate.modelinfo import load_model_info
from vramtui.core.memory.parts import HOST
from vramtui.core.units import GIB

CARDS = (8 * GIB, 8 * GIB)
RANK = 8
EVEN = (1.0, 1.0)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    import gguf

    folder = tmp_path_factory.mktemp("extras-devices")
    spec = TinyModelSpec()
    lora = folder / "lora.gguf"
    writer = gguf.GGUFWriter(str(lora), "llama")
    writer.add_string("general.type", "adapter")
    writer.add_string("adapter.type", "lora")
    writer.add_float32("adapter.lora.alpha", 16.0)
    rng = np.random.default_rng(1)
    for layer in range(spec.n_layer):  # A (rank x in) and B (out x rank) of each layer's q projection
        writer.add_tensor(f"blk.{layer}.attn_q.weight.lora_a", rng.random((RANK, spec.n_embd), np.float32))
        writer.add_tensor(f"blk.{layer}.attn_q.weight.lora_b", rng.random((spec.n_embd, RANK), np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    draft = TinyModelSpec(n_layer=2, n_embd=256, n_head=4, n_head_kv=4, n_ff=512, seed=3)
    return {
        "model": write_tiny_gguf(folder / "model.gguf", spec),
        "draft": write_tiny_gguf(folder / "draft.gguf", draft),
        "mmproj": write_tiny_mmproj(folder / "mmproj.gguf"),
        "lora": lora,
    }


def _rows(est) -> list[int]:  # type: ignore[no-untyped-def]
    return [row.total_bytes for row in est.devices]


def _device_bytes(entry: dict, index: int) -> int:
    return sum(entry["bill"].get(str(index), {}).values())


def test_each_extra_lands_in_its_cards_row(files: dict[str, Path]) -> None:
    info = load_model_info(files["model"])
    base = estimate(info, Settings(context=4096, gpus=CARDS))
    extras = {
        "mmproj": str(files["mmproj"]),
        "model_draft": str(files["draft"]),
        "lora": (str(files["lora"]),),
    }
    est = estimate(info, Settings(context=4096, gpus=CARDS, **extras))  # type: ignore[arg-type]
    by_name = {entry["name"]: entry for entry in est.extras}
    assert set(by_name) == {"mmproj", "draft", "lora"}
    # every device byte of every extra is in its card's row, and nothing else moved
    for index, (before, after) in enumerate(zip(_rows(base), _rows(est), strict=True)):
        assert after - before == sum(_device_bytes(entry, index) for entry in est.extras)
    assert est.total_bytes == sum(_rows(est)) and est.total_bytes > base.total_bytes
    # the projector: the first GPU only
    assert _device_bytes(by_name["mmproj"], 0) > 0 and _device_bytes(by_name["mmproj"], 1) == 0
    # the draft: split over both cards as the model is
    assert _device_bytes(by_name["draft"], 0) > 0 and _device_bytes(by_name["draft"], 1) > 0
    # a LoRA tensor sits with its layer: the layers each card holds, by llama.cpp's split
    where = layer_devices(info.n_layers, 0, info.n_layers + 1, shares_for(CARDS, ()))
    per_layer = 2 * RANK * TinyModelSpec().n_embd * 4  # A and B, f32
    for index in (0, 1):
        held = sum(1 for layer in range(info.n_layers) if where[layer] == index)
        assert by_name["lora"]["bill"].get(str(index), {}).get("weights_bytes", 0) == held * per_layer
    # the weights column of each row holds the extras' weights too
    for index, row in enumerate(est.devices):
        weights = sum(entry["bill"].get(str(index), {}).get("weights_bytes", 0) for entry in est.extras)
        assert row.weights_bytes == base.devices[index].weights_bytes + weights


def test_device_draft_puts_the_whole_draft_on_one_card(files: dict[str, Path]) -> None:
    info = load_model_info(files["model"])
    base = estimate(info, Settings(context=4096, gpus=CARDS))
    split = estimate(info, Settings(context=4096, gpus=CARDS, model_draft=str(files["draft"])))
    one = estimate(
        info, Settings(context=4096, gpus=CARDS, model_draft=str(files["draft"]), device_draft="CUDA1")
    )
    (entry,) = one.extras
    assert _device_bytes(entry, 0) == 0 and _device_bytes(entry, 1) > 0
    assert _rows(one)[0] == _rows(base)[0] and _rows(one)[1] == _rows(base)[1] + _device_bytes(entry, 1)
    # split, each card holds one compute buffer of its own; on one card there is one: less in all
    assert sum(_rows(one)) < sum(_rows(split))
    host = estimate(
        info, Settings(context=4096, gpus=CARDS, model_draft=str(files["draft"]), device_draft="none")
    )
    assert _rows(host) == _rows(base) and host.extras[0]["bill"][HOST]


def test_the_tightest_card_decides_with_the_extras(files: dict[str, Path]) -> None:
    info = load_model_info(files["model"])
    base = estimate(info, Settings(context=4096, gpus=CARDS, tensor_split=EVEN))
    proj = estimate(info, Settings(context=4096, gpus=CARDS, tensor_split=EVEN, mmproj=str(files["mmproj"])))
    (entry,) = proj.extras
    added = _device_bytes(entry, 0)
    # card 0 with room (the split fixed, so the layers stay where they are as the card shrinks) for the model but not for the projector too; card 1 as before
    card0 = int((base.devices[0].total_bytes + added // 2) / 0.8) + 1
    tight = estimate(
        info, Settings(context=4096, gpus=(card0, CARDS[1]), tensor_split=EVEN, mmproj=str(files["mmproj"]))
    )
    assert not tight.fits and not tight.devices[0].fits and tight.devices[1].fits
    assert estimate(info, Settings(context=4096, gpus=(card0, CARDS[1]), tensor_split=EVEN)).fits
    assert tight.reason and tight.reason.startswith("device 0 over by") and "device 1" not in tight.reason
