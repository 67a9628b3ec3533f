"""A real llama-server with a vision projector and a draft model: the estimate against what it prints.

Tiny GGUFs written here with the `gguf` package (vramtui.core.demo): a Gemma 3 style mmproj that
llama.cpp's mtmd loads and warms up, and a draft that shares the model's vocabulary. CPU only (no GPU on
this machine): every buffer is host RAM, which is where the estimate puts them for `on_gpu=False`.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from llama_server_capture import log_until_listening

from vramtui.core.demo.tinygguf import TinyModelSpec, write_tiny_gguf
from vramtui.core.demo.tinymmproj import TinyProjectorSpec, write_tiny_mmproj
from vramtui.core.estimate.estimator import Settings, estimate
from vramtui.core.estimate.modelinfo import load_model_info

MIB = 1 << 20
DRAFT = TinyModelSpec(n_layer=2, n_embd=256, n_head=4, n_head_kv=4, n_ff=512, seed=3, name="vramtui-draft")
# Three projector shapes: the input phase (the default), the MLP phase and, without flash attention,
# the KQ scores decide the compute buffer.
PROJECTORS = {
    "small": TinyProjectorSpec(),
    "wide": TinyProjectorSpec(image_size=448, n_embd=256, n_ff=1024, n_head=4),
    "deep": TinyProjectorSpec(image_size=336, n_embd=192, n_ff=768, n_head=6, n_layer=3),
}


def _mib(pattern: str, text: str) -> list[float]:
    return [float(value) for value in re.findall(pattern, text)]


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("extras")
    found = {
        "model": write_tiny_gguf(folder / "model.gguf"),
        "draft": write_tiny_gguf(folder / "draft.gguf", DRAFT),
    }
    for name, spec in PROJECTORS.items():
        found[name] = write_tiny_mmproj(folder / f"mmproj-{name}.gguf", spec)
    return found


def _extra(est, name: str) -> dict:
    return next(entry for entry in est.extras if entry["name"] == name)


@pytest.mark.parametrize("flash", ["on", "off"])
@pytest.mark.parametrize("shape", sorted(PROJECTORS))
def test_projector_weights_and_compute_match_llama_server(
    llama_server_bin: Path, models: dict[str, Path], shape: str, flash: str
) -> None:
    log = log_until_listening(
        llama_server_bin,
        ["-m", str(models["model"]), "--mmproj", str(models[shape]), "-c", "2048", "-fa", flash],
    )
    assert "loaded multimodal model" in log, log[-2000:]
    (printed_weights,) = _mib(r"load_hparams: model size:\s+([\d.]+) MiB", log)
    (printed_compute,) = _mib(r"reserve_compute_meta:\s+CPU compute buffer size =\s+([\d.]+) MiB", log)
    info = load_model_info(models["model"])
    settings = Settings(context=2048, on_gpu=False, flash_attn=flash == "on", mmproj=str(models[shape]))
    bill = _extra(estimate(info, settings), "mmproj")["bill"]["host"]
    # printed to 2 decimals of a MiB: 0.005 MiB of rounding beside the 3% (weights) and 1% (compute)
    assert abs(bill["weights_bytes"] / MIB - printed_weights) <= 0.03 * printed_weights + 0.005
    assert abs(bill["compute_buffer_bytes"] / MIB - printed_compute) <= 0.01 * printed_compute + 0.005


def test_draft_weights_and_kv_match_llama_server(llama_server_bin: Path, models: dict[str, Path]) -> None:
    log = log_until_listening(
        llama_server_bin, ["-m", str(models["model"]), "--model-draft", str(models["draft"]), "-c", "2048"]
    )
    assert "loading draft model" in log, log[-2000:]
    draft_log = log.split("loading draft model", 1)[1]
    printed_weights = sum(_mib(r"CPU_Mapped model buffer size =\s+([\d.]+) MiB", draft_log))
    (printed_kv,) = _mib(r"CPU KV buffer size =\s+([\d.]+) MiB", draft_log)
    info = load_model_info(models["model"])
    est = estimate(info, Settings(context=2048, on_gpu=False, model_draft=str(models["draft"])))
    bill = _extra(est, "draft")["bill"]["host"]
    assert abs(bill["weights_bytes"] / MIB - printed_weights) <= 0.03 * printed_weights + 0.005
    assert abs(bill["kv_cache_bytes"] / MIB - printed_kv) <= 0.01 * printed_kv
    # the model's own figures are unchanged by the draft: its KV is the first KV line
    (model_kv,) = _mib(r"CPU KV buffer size =\s+([\d.]+) MiB", log.split("loading draft model", 1)[0])
    assert (
        abs((est.bill.get("kv_cache", "host") - bill["kv_cache_bytes"]) / MIB - model_kv) <= 0.01 * model_kv
    )


def test_draft_agrees_with_the_engines_dry_run(models: dict[str, Path]) -> None:
    from vramtui.core.estimate.engine_probe import llama_cpp_available, probe_llama_cpp

    if not llama_cpp_available():
        pytest.skip("llama-cpp-python is not installed")
    info = load_model_info(models["model"])
    est = estimate(info, Settings(context=2048, on_gpu=False, model_draft=str(models["draft"])))
    entry = _extra(est, "draft")
    engine = probe_llama_cpp(models["draft"], context=entry["context"], parallel=est.parallel, gpu_layers=0)
    assert engine is not None and engine.context_ok
    bill = entry["bill"]["host"]
    assert abs(bill["kv_cache_bytes"] - engine.kv_bytes) <= 0.01 * engine.kv_bytes
    assert abs(bill["weights_bytes"] - engine.model_bytes) <= 0.03 * engine.model_bytes
