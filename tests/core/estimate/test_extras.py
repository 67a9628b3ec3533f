"""The extras on the bill (core/estimate/extras.py): their files read, their places, the CLI and JSON."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from vramtui.core.demo.tinygguf import TinyModelSpec, write_tiny_gguf
from vramtui.core.demo.tinymmproj import TinyProjectorSpec, write_tiny_mmproj
from vramtui.core.errors import VramtuiError
from vramtui.core.estimate.estimator import Settings, estimate
from vramtui.core.estimate.extras import read_projector
from vramtui.core.estimate.inputs import parse_settings
from vramtui.core.estimate.modelinfo import load_model_info
from vramtui.core.memory.parts import HOST

MIB = 1 << 20
ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("extras-unit")
    return {
        "model": write_tiny_gguf(folder / "model.gguf"),
        "draft": write_tiny_gguf(
            folder / "draft.gguf", TinyModelSpec(n_layer=2, n_embd=256, n_head=4, n_head_kv=4)
        ),
        "mmproj": write_tiny_mmproj(folder / "mmproj.gguf"),
    }


def test_projector_weights_are_every_stored_tensor(files: dict[str, Path]) -> None:
    import gguf

    reader = gguf.GGUFReader(str(files["mmproj"]))
    proj = read_projector(str(files["mmproj"]))
    assert proj.weights_bytes == sum(int(t.n_bytes) for t in reader.tensors)
    spec = TinyProjectorSpec()
    assert (proj.image_size, proj.patch_size, proj.n_patches) == (
        spec.image_size,
        spec.patch_size,
        spec.n_patches,
    )


def test_extras_land_on_the_device_of_a_gpu_run_and_the_totals_add_up(files: dict[str, Path]) -> None:
    info = load_model_info(files["model"])
    plain = estimate(info, Settings(context=2048))
    both = estimate(
        info, Settings(context=2048, mmproj=str(files["mmproj"]), model_draft=str(files["draft"]))
    )
    added = sum(entry["device_bytes"] for entry in both.extras)
    assert added > 0
    assert both.total_bytes == plain.total_bytes + added == both.bill.total(0)
    assert both.weights_bytes == both.bill.get("weights", 0) > plain.weights_bytes
    # the draft's CUDA context is the process's own: runtime counted once
    assert both.bill.get("runtime", 0) == plain.bill.get("runtime", 0)
    # the projector keeps its warmup image in a CPU compute buffer beside the device one
    mmproj = next(entry for entry in both.extras if entry["name"] == "mmproj")
    assert mmproj["bill"][HOST]["compute_buffer_bytes"] == 3 * 224 * 224 * 4


def test_no_extras_keeps_the_estimate_as_it_was(files: dict[str, Path]) -> None:
    info = load_model_info(files["model"])
    out = estimate(info, Settings(context=2048)).to_dict()
    assert out["extras"] == []
    for key in ("weights_bytes", "kv_cache_bytes", "compute_buffer_bytes", "total_bytes", "fits"):
        assert key in out


def test_the_draft_off_the_gpu_goes_to_host_ram(files: dict[str, Path]) -> None:
    info = load_model_info(files["model"])
    est = estimate(info, Settings(context=2048, model_draft=str(files["draft"]), device_draft="none"))
    draft = next(entry for entry in est.extras if entry["name"] == "draft")
    assert set(draft["bill"]) == {HOST} and draft["device_bytes"] == 0


def test_prompt_cache_is_host_ram_only_when_a_limit_is_given(files: dict[str, Path]) -> None:
    info = load_model_info(files["model"])
    gpu_total = estimate(info, Settings(context=2048)).total_bytes
    est = estimate(info, Settings(context=2048, cache_ram=1024))
    assert est.total_bytes == gpu_total  # nothing on the device
    cache = next(entry for entry in est.extras if entry["name"] == "prompt_cache")
    assert cache["bill"][HOST]["kv_cache_bytes"] == 1024 * MIB
    unlimited = estimate(info, Settings(context=2048, cache_ram=-1))
    assert not unlimited.extras and any("no limit" in note for note in unlimited.notes)


def test_vllm_lora_slots_grow_with_loras_and_rank(files: dict[str, Path]) -> None:
    info = load_model_info(files["model"])
    one = estimate(info, Settings(backend="vllm", context=2048, max_loras=1, max_lora_rank=8))
    four = estimate(info, Settings(backend="vllm", context=2048, max_loras=4, max_lora_rank=16))
    slots = [next(e for e in est.extras if e["name"] == "lora_slots")["device_bytes"] for est in (one, four)]
    assert slots[1] == 8 * slots[0] > 0


def test_a_projector_for_vllm_is_refused_plainly(files: dict[str, Path]) -> None:
    info = load_model_info(files["model"])
    with pytest.raises(VramtuiError, match=r"llama\.cpp"):
        estimate(info, Settings(backend="vllm", context=2048, mmproj=str(files["mmproj"])))


def test_the_inputs_parse_like_the_cli(files: dict[str, Path]) -> None:
    settings = parse_settings({"cache_ram": "-1", "lora": "a.gguf,b.gguf", "gpu_layers_draft": "all"})
    assert (settings.cache_ram, settings.lora, settings.gpu_layers_draft) == (-1, ("a.gguf", "b.gguf"), None)
    with pytest.raises(VramtuiError, match="--cache-ram"):
        parse_settings({"cache_ram": "-5"})


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    return subprocess.run(
        [sys.executable, "-m", "vramtui", "estimate", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def test_cli_json_names_each_extra_and_a_missing_file_is_one_line(files: dict[str, Path]) -> None:
    done = _cli(
        str(files["model"]), "--ctx", "2048", "--mmproj", str(files["mmproj"]), "--cache-ram", "512", "--json"
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert [entry["name"] for entry in out["extras"]] == ["mmproj", "prompt_cache"]
    assert out["bill"]["host"]["kv_cache_bytes"] >= 512 * MIB
    text = _cli(str(files["model"]), "--ctx", "2048", "-md", str(files["draft"]))
    assert "+ draft model" in text.stdout
    bad = _cli(str(files["model"]), "--mmproj", str(files["model"].with_name("nope.gguf")))
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "Traceback" not in bad.stderr
    not_clip = _cli(str(files["model"]), "--mmproj", str(files["model"]))
    assert not_clip.returncode == 2 and "not a projector" in not_clip.stderr


def test_llama_servers_default_prompt_cache_is_said_not_billed(files: dict[str, Path]) -> None:
    # the default limit is llama-server's own, as its --help prints it
    help_text = (Path(__file__).resolve().parents[2] / "data/llama-server/help.txt").read_text()
    assert "--cache-ram N" in help_text and "(default: 8192," in help_text
    info = load_model_info(files["model"])
    unset = estimate(info, Settings(context=2048))
    assert any("prompt cache fills up to 8192 MiB" in note for note in unset.notes)
    off = estimate(info, Settings(context=2048, cache_ram=0))
    assert not any("prompt cache" in note for note in off.notes)
    assert unset.bill.get("kv_cache", HOST) == off.bill.get("kv_cache", HOST)  # it fills with use: no bill
    given = estimate(info, Settings(context=2048, cache_ram=4096))
    assert given.bill.get("kv_cache", HOST) - off.bill.get("kv_cache", HOST) == 4096 * 2**20
    # an engine without llama-server's prompt cache says nothing of it
    python_server = estimate(info, Settings(backend="llama-cpp-python", context=2048))
    assert not any("prompt cache" in note for note in python_server.notes)
