"""The estimate at today's llama-server defaults against what a real llama-server printed.

tests/data/llama-server/*.verbose.log are real runs of the built binary (see their headers) on the
machine that captured them: an x86 CPU, by a build with AMX (its log prints an `AMX model buffer`), flash attention
left on `auto` (which this build turns on for the CPU too)."""

from __future__ import annotations

from pathlib import Path

import pytest

from vramtui.core.backends.llama_cpp import memory
from vramtui.core.demo.tinygguf import TinyModelSpec, write_tiny_gguf
from vramtui.core.estimate.estimator import Settings, estimate
from vramtui.core.estimate.modelinfo import load_model_info
from vramtui.core.logs.diagnose import diagnose_file
from vramtui.core.memory.parts import HOST, bill_from_figures

LOGS = Path(__file__).resolve().parents[2] / "data" / "llama-server"


@pytest.fixture
def x86_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CPU the logs came from (x86 with AVX2): the repacked copy of q4_0 depends on it."""
    monkeypatch.setattr(memory, "_cpu_has", lambda flag: flag == "avx2")


def _printed(name: str):
    return bill_from_figures(diagnose_file(LOGS / name).engine_figures)


def test_the_estimate_at_the_defaults_matches_the_printed_buffers(x86_machine: None, tmp_path: Path) -> None:
    # The model of healthy.verbose.log's header, written again (the writer is deterministic in shape).
    model = write_tiny_gguf(tmp_path / "l4.gguf", TinyModelSpec(n_layer=4, n_embd=512, n_head=8, n_head_kv=8))
    est = estimate(load_model_info(model), Settings(backend="llama.cpp", context=2048, on_gpu=False)).bill
    printed = _printed("healthy.verbose.log")
    assert est.get("kv_cache", HOST) == printed.get("kv_cache", HOST)  # KV exactly
    # The mapped file; this build (compiled with AMX) also printed an AMX copy of the f16 weights, which
    # depends on the build, not on the model or the CPU, and is not counted.
    weights = printed.get("weights", HOST) - diagnose_file(LOGS / "healthy.verbose.log").engine_figures.get(
        "model_buffer.AMX", 0
    )
    assert abs(est.get("weights", HOST) - weights) <= 0.03 * weights
    compute = printed.get("compute", HOST)  # with flash attention on, as `auto` gave it
    assert abs(est.get("compute", HOST) - compute) <= 0.25 * compute


def test_flash_attention_defaults_follow_the_engine(tmp_path: Path) -> None:
    info = load_model_info(write_tiny_gguf(tmp_path / "f16.gguf", TinyModelSpec()))
    server = estimate(info, Settings(backend="llama.cpp", context=8192, on_gpu=False))
    python = estimate(info, Settings(backend="llama-cpp-python", context=8192, on_gpu=False))
    off = estimate(info, Settings(backend="llama.cpp", context=8192, on_gpu=False, flash_attn=False))
    assert server.compute_buffer_bytes < off.compute_buffer_bytes  # auto is on: no KQ matrix
    assert python.compute_buffer_bytes == off.compute_buffer_bytes  # its server leaves it off


def test_the_repacked_copy_is_counted_on_the_cpu_only(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(memory, "_cpu_has", lambda flag: flag == "avx2")  # x86 without AMX
    q4 = load_model_info(write_tiny_gguf(tmp_path / "q4.gguf", TinyModelSpec(dtype="q4_0")))
    f16 = load_model_info(write_tiny_gguf(tmp_path / "f16.gguf", TinyModelSpec()))
    cpu = estimate(q4, Settings(backend="llama.cpp", context=4096, on_gpu=False))
    assert cpu.counts_repack and cpu.bill.get("weights", HOST) > 1.9 * (q4.weights_bytes or 0) * 0.95
    plain = estimate(f16, Settings(backend="llama.cpp", context=4096, on_gpu=False))
    assert plain.bill.get("weights", HOST) <= (f16.weights_bytes or 0) * 1.01  # only an AMX build repacks f16
    gpu = estimate(q4, Settings(backend="llama.cpp", context=4096))
    assert gpu.bill.get("weights", HOST) < (q4.weights_bytes or 0)  # offloaded layers get no copy


def test_builds_before_the_run_time_repack_hold_the_file_once(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A May 2024 CUDA build with every layer on the host (round 59's finetune run of a Q4_0 Llama-3-8B)
    printed its 4437.80 MiB file once: the repacked copy came with llama.cpp#9921 (November 2024)."""
    monkeypatch.setattr(memory, "_cpu_has", lambda flag: flag == "avx2")
    q4 = load_model_info(write_tiny_gguf(tmp_path / "q4.gguf", TinyModelSpec(dtype="q4_0")))
    old = estimate(q4, Settings(backend="llama.cpp", context=4096, gpu_layers=0, engine_build=3000))
    new = estimate(q4, Settings(backend="llama.cpp", context=4096, gpu_layers=0, engine_build=4500))
    assert not old.counts_repack and old.bill.get("weights", HOST) <= (q4.weights_bytes or 0) * 1.01
    assert new.counts_repack and new.bill.get("weights", HOST) > 1.5 * (q4.weights_bytes or 0)


def test_slots_without_a_context_get_the_trained_length_each(tmp_path: Path) -> None:
    """`-np 2` alone: fit gives each KV stream the trained length (parallel-auto-context.verbose.log: "using
    524288 for 2 sequences", then the 4096 MB cache that failed); the slots llama-server picks itself share
    one cache of the trained length."""
    model = write_tiny_gguf(tmp_path / "l4.gguf", TinyModelSpec(n_layer=4, n_embd=512, n_head=8, n_head_kv=8))
    info = load_model_info(model)
    figures = diagnose_file(LOGS / "parallel-auto-context.verbose.log").engine_figures
    two = estimate(info, Settings(backend="llama.cpp", parallel=2, on_gpu=False))
    assert two.bill.get("kv_cache", HOST) == figures["oom_requested"] == 4096 << 20
    assert figures["context"] == 524288
    auto = estimate(info, Settings(backend="llama.cpp", on_gpu=False))  # -np auto: 4 slots, one cache
    assert auto.bill.get("kv_cache", HOST) == 2048 << 20
    python = estimate(info, Settings(backend="llama-cpp-python", parallel=2, context=0, on_gpu=False))
    assert python.bill.get("kv_cache", HOST) == 2048 << 20  # no fit step in the library


def test_the_wizard_leaves_unset_slots_to_the_engine(tmp_path: Path) -> None:
    """A profile without `parallel` runs llama-server's -np auto: 4 slots in one unified cache (its KQ mask
    spans every cell), not 4 streams given; with `parallel = 2` and no context, fit's 2 x trained length."""
    from vramtui.core.launch.profile import Profile
    from vramtui.core.wizard.budget import MemoryModel

    model = write_tiny_gguf(tmp_path / "l4.gguf", TinyModelSpec(n_layer=4, n_embd=512, n_head=8, n_head_kv=8))
    unset = Profile(backend="llama-server", model=str(model), params={})
    assert MemoryModel(unset)._settings(unset, load_model_info(model))["parallel"] is None
    two = unset.with_param("parallel", 2)
    bill = MemoryModel(two).raw(two)
    assert bill is not None and bill.get("kv_cache", HOST) + bill.get("kv_cache") == 4096 << 20
