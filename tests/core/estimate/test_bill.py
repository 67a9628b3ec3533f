"""The estimate in the one memory vocabulary: its bill by place adds up to the legacy figures, and nothing
in the estimator asks a backend's name."""

from __future__ import annotations

from pathlib import Path

import pytest

from vramtui.core.estimate.estimator import Settings, estimate
from vramtui.core.estimate.modelinfo import info_from_flags
from vramtui.core.memory.parts import HOST, JSON_KEYS, PARTS
from vramtui.core.units import GIB, MIB

ROOT = Path(__file__).resolve().parents[3]
MODEL = info_from_flags(params=8e9, layers=32, kv_heads=8, head_dim=128)


def test_llama_cpp_bill_splits_the_device_and_the_host() -> None:
    est = estimate(MODEL, Settings(context=8192, parallel=1, gpu_layers=20, device_bytes=16 * GIB))
    assert est.fits  # (when it does not, host_bytes_needed is for the placement that would)
    assert est.bill.total(0) == est.total_bytes
    assert est.bill.total(HOST) == est.host_bytes_needed > 0
    assert est.bill.get("weights", HOST) == est.weights_host_bytes
    assert est.bill.get("output", HOST) == est.output_buffer_bytes == MODEL.vocab * 4
    assert est.bill.get("runtime", 0) == est.overhead_bytes == 400 * MIB


def test_cpu_only_run_is_all_host() -> None:
    est = estimate(MODEL, Settings(context=4096, on_gpu=False))
    assert est.bill.devices() == [] and est.bill.total(HOST) == est.total_bytes
    assert est.to_dict()["runtime_bytes"] == 0


def test_vllm_cuda_graphs_are_on_the_card_outside_the_budget_before_0_21() -> None:
    est = estimate(MODEL, Settings(backend="vllm", context=8192, device_bytes=80 * GIB, engine_build=20))
    assert est.bill.get("cuda_graphs") == 256 * MIB
    assert est.bill.total(0) == est.total_bytes + 256 * MIB
    assert est.total_bytes <= est.usable_bytes


def test_vllm_0_21_on_takes_the_cuda_graphs_off_the_budget_before_the_kv_cache() -> None:
    """vLLM 0.21 profiles the graphs and sizes the KV cache past them (gpu_worker.py,
    VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1 by default): the same card holds 256 MiB less KV cache."""
    old = estimate(MODEL, Settings(backend="vllm", context=8192, device_bytes=80 * GIB, engine_build=20))
    for build in (21, None):  # None: today's vLLM
        est = estimate(
            MODEL, Settings(backend="vllm", context=8192, device_bytes=80 * GIB, engine_build=build)
        )
        assert est.bill.get("cuda_graphs") == 256 * MIB
        assert est.bill.total(0) == est.total_bytes <= est.usable_bytes
        assert old.kv_cache_bytes - est.kv_cache_bytes == pytest.approx(256 * MIB, abs=2 * MIB)


def test_transformers_fragmentation_is_the_margin() -> None:
    est = estimate(MODEL, Settings(backend="transformers", context=4096))
    assert est.bill.get("margin") == est.fragmentation_bytes > 0
    assert est.bill.total(0) == est.total_bytes


@pytest.mark.parametrize("backend", ["llama.cpp", "ollama", "vllm", "transformers"])
def test_to_dict_keeps_the_scripted_keys_and_adds_every_part(backend: str) -> None:
    est = estimate(MODEL, Settings(backend=backend, context=8192))
    data = est.to_dict()
    legacy = ("weights_bytes", "weights_host_bytes", "kv_cache_bytes", "activations_bytes", "total_bytes")
    legacy += (
        "compute_buffer_bytes",
        "usable_bytes",
        "fits",
        "max_context",
        "max_parallel",
        "gpu_layers_fit",
    )
    legacy += ("overhead_bytes", "fragmentation_bytes")
    assert all(key in data for key in legacy)
    assert all(JSON_KEYS[part] in data for part in PARTS)
    assert data["runtime_bytes"] == est.overhead_bytes
    device = data["bill"]["0"]
    assert device["weights_bytes"] == est.weights_bytes and device["kv_cache_bytes"] == est.kv_cache_bytes
    assert sum(device.values()) == est.bill.total(0)


def test_when_the_cuda_graphs_take_the_last_room_the_note_says_so_and_how_to_go_without() -> None:
    """QA 17 F6: on a card where weights, activations and the runtime fit but the graphs do not, the note
    blamed the weights; it names the graphs and --enforce-eager, which leaves the KV cache room."""
    from vramtui.core.estimate.modelinfo import info_from_flags

    info = info_from_flags(params=1e6)
    card = 640 * MIB
    est = estimate(info, Settings(backend="vllm", context=512, device_bytes=card))
    assert not est.fits and est.kv_cache_bytes == 0
    assert any("CUDA graphs" in note and "--enforce-eager" in note for note in est.notes), est.notes
    assert not any(note.startswith("weights and activations exceed") for note in est.notes)
    eager = estimate(info, Settings(backend="vllm", context=512, device_bytes=card, enforce_eager=True))
    assert eager.fits and eager.kv_cache_bytes > 0


def test_a_tensor_parallel_ranks_row_adds_up_with_its_cuda_graphs() -> None:
    """QA 36 F7: under -tp 2 each GPU's row left out the 256 MiB of CUDA graphs its total held."""
    info = info_from_flags(params=8e9)
    est = estimate(info, Settings(backend="vllm", context=8192, gpus=(24 * GIB,) * 2, tensor_parallel_size=2))
    for row in est.devices:
        terms = (
            row.weights_bytes + row.kv_cache_bytes + row.recurrent_state_bytes + row.compute_buffer_bytes
            + row.runtime_bytes + row.cuda_graphs_bytes
        )  # fmt: skip
        assert row.cuda_graphs_bytes > 0 and terms == row.total_bytes, row
