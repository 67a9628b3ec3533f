"""One package per engine family: what each Backend answers, so callers never compare its name."""

from __future__ import annotations

from pathlib import Path

import pytest

from vramtui.core.backends import BACKENDS, get_backend, llama_cpp, transformers, vllm
from vramtui.core.errors import VramtuiError
from vramtui.core.launch.profile import Profile, profile_from_dict

PACKAGE = Path(__file__).resolve().parents[3] / "vramtui"
NAMES = {b.name for b in BACKENDS.values()} | {"llama_cpp", "sglang", "tgi"}
# The parts of vramtui that hold a Backend and ask it (the log and estimate engines name backends in
# their own rules and are checked where they live).
ASKING = (
    "core/launch",
    "core/wizard",
    "core/demo",
    *(f"cli/{name}.py" for name in ("check", "run", "wizard", "demo", "common", "app_entry", "__init__")),
)


def test_every_backend_lives_in_its_family_package() -> None:
    families = {module.FAMILY: module for module in (llama_cpp, vllm, transformers)}
    for backend in BACKENDS.values():
        module = families[backend.family]
        assert backend in module.BACKENDS
        assert str(backend) == backend.name and backend.launchable
    assert {b.name for b in llama_cpp.BACKENDS} == {"llama.cpp", "llama-cpp-python", "ollama", "ik_llama.cpp"}


def test_rungs_come_from_the_family_ladder_and_the_knobs() -> None:
    python = get_backend("llama-cpp-python")
    assert [r.param for r in python.rungs("kv_cache")] == ["kv_dtype", "context", "flash_attn", "gpu_layers"]
    # it has no slots, tensor split or expert-offload (--n-cpu-moe) knob vramtui passes
    no_knob = ("parallel", "tensor_split", "n_cpu_moe")
    assert python.rungs("kv_cache") == [r for r in llama_cpp.LADDER["kv_cache"] if r.param not in no_knob]
    assert get_backend("llama.cpp").rungs("kv_cache")[0].param == "tensor_split"
    assert "mem_share" in [r.param for r in get_backend("vllm").rungs("kv_cache")]
    # an advice rung that needs bitsandbytes: taught where vramtui's Python imports it, not elsewhere
    transformers = get_backend("transformers")
    taught = "double_quant" in [r.param for r in transformers.rungs("load_weights")]
    assert taught == transformers.importable("bitsandbytes")
    assert get_backend("vllm").rungs(None) == [] and get_backend("vllm").rungs("download") == []


def test_what_callers_ask_instead_of_the_name() -> None:
    server, python, ollama = (get_backend(n) for n in ("llama-server", "llama-cpp-python", "ollama"))
    vllm_backend = get_backend("vllm")
    assert python.default("gpu_layers") == 0 and server.default("gpu_layers") == "all"
    # Issue 14: today's llama-server defaults to -fa auto (on wherever it runs); the others to off.
    assert server.default("flash_attn") == "auto" and server.flash_attn_effective(None)
    # vLLM picks its attention backend itself (--attention-backend auto); the others default to off.
    assert vllm_backend.default("flash_attn") == "auto" and not vllm_backend.flash_attn_effective(None)
    ik = get_backend("ik_llama.cpp")  # its common.h: flash attention on by default
    assert ik.default("flash_attn") is True and ik.flash_attn_effective(None)
    others = (server, vllm_backend, ik)
    assert all(b.default("flash_attn") is False for b in BACKENDS.values() if b not in others)
    # vLLM sizes its batch by the device (engine/arg_utils.py get_batch_defaults): the CPU, a 24 GiB card,
    # an 80 GiB one.
    assert vllm_backend.default("parallel", on_cpu=True) == 128 and vllm_backend.default("batch") == 2048
    assert vllm_backend.default("batch", 80 << 30) == 8192 and vllm_backend.default("mem_share") == 0.92
    # llama-server's own idle footprint (240 MiB of address space) is above Ollama's, below Python's.
    assert python.host_baseline_bytes > server.host_baseline_bytes > ollama.host_baseline_bytes
    # its server keeps every position's logits (logits_all): its accounting bills them, llama-server's not
    from vramtui.core.backends.llama_cpp.memory import MEMORY, RunShape
    from vramtui.core.estimate.modelinfo import ModelInfo

    info, run = ModelInfo(source="flags", vocab=1000), RunShape(4096, 1, 512, True, "f16")
    assert MEMORY["llama-cpp-python"].host_logits(info, run) > 0 == MEMORY["llama.cpp"].host_logits(info, run)
    assert server.offloads_layers and ollama.offloads_layers and not vllm_backend.offloads_layers
    assert python.needs_flash_attn_for("q8_0") and not python.needs_flash_attn_for("f16")
    assert not vllm_backend.needs_flash_attn_for("fp8")
    assert ollama.model_at_request and not server.model_at_request
    assert server.model_is_file and not vllm_backend.model_is_file
    assert vllm_backend.kv_dtype_order == ("auto", "fp8") and server.quant_order == ()


def test_a_profile_holds_its_backend_resolved_once(tmp_path: Path) -> None:
    profile = profile_from_dict({"backend": "llama-server", "model": "m.gguf"}, folder=tmp_path)
    assert profile.backend is get_backend("llama.cpp")
    assert profile.to_dict()["backend"] == "llama.cpp"  # saved by name
    assert Profile(backend="hf", model="gpt2").backend is get_backend("transformers")
    with pytest.raises(VramtuiError, match=r"unknown backend 'lama\.cpp'"):
        profile_from_dict({"backend": "lama.cpp", "model": "m.gguf"})
