"""The on-GPU goal: the one change that keeps every layer on the device, by the estimator's word.

Real GPU logs from public issues (tests/data/logs/offloaded.jsonl, sources kept) give the model's shape,
the per-device buffers, n_ctx and the card's free memory; a real tiny GGUF checks the choice itself.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from vramtui.core.errors import VramtuiError
from vramtui.core.estimate.estimator import Settings, _estimate_core
from vramtui.core.estimate.modelinfo import load_model_info
from vramtui.core.logs.diagnose import diagnose_text
from vramtui.core.units import MIB
from vramtui.core.wizard.ongpu import info_from_figures, plan_from_figures, plan_on_gpu, with_engine_margin
from vramtui.core.wizard.propose import _nice_below

DATA = Path(__file__).resolve().parents[2] / "data" / "logs" / "offloaded.jsonl"
ENTRIES = {entry["id"]: entry for entry in map(json.loads, DATA.read_text().splitlines())}
SHAPE_KEYS = ("heads", "kv_heads", "head_dim_k", "head_dim_v", "experts", "experts_used", "moe_ff")


def _figures(entry_id: str) -> dict[str, float]:
    entry = ENTRIES[entry_id]
    return diagnose_text(entry["log"], backend=entry["backend"]).engine_figures


def _qwen3_moe_heads() -> dict[str, int]:
    """The attention and expert shape Qwen3-30B-A3B's print_info shows (ollama/ollama#10458)."""
    figures = _figures("gpu-2-qwen3-30b-a3b-ollama-4090-print-info")
    return {key: int(figures[f"model_{key}"]) for key in SHAPE_KEYS}


def test_the_log_prints_the_shape_the_split_and_the_card():
    figures = _figures("gpu-1-qwen3-30b-a3b-4080s-30of49")
    assert (figures["model_layers"], figures["model_hidden"], figures["model_trained_context"]) == (
        48,
        2048,
        40960,
    )
    assert figures["device_free.CUDA0"] == 15035 * MIB
    assert (figures["layers_offloaded"], figures["layers_total"]) == (30, 49)
    heads = _qwen3_moe_heads()
    assert heads == {
        "heads": 32, "kv_heads": 4, "head_dim_k": 128, "head_dim_v": 128,
        "experts": 128, "experts_used": 8, "moe_ff": 768,
    }  # fmt: skip


def test_weights_rebuilt_from_the_buffers_add_up_to_what_the_log_printed():
    figures = _figures("gpu-1-qwen3-30b-a3b-4080s-30of49")
    info = info_from_figures(figures, _qwen3_moe_heads())
    total = sum(info.layer_bytes or ()) + (info.token_embd_bytes or 0) + (info.output_bytes or 0)
    printed = (10750.86 + 6940.48) * MIB
    assert abs(total - printed) / printed < 0.001
    # the run's own split, sized back by the estimator at 30 layers, is the CUDA0 buffer it printed
    # (a build of mid-2025: -ngl 30 filled 30 repeating layers, the output stayed on the host)
    est = _estimate_core(
        info, Settings(context=4096, parallel=1, gpu_layers=30, device_bytes=15035 * MIB, engine_build=6000)
    )
    assert abs(est.weights_bytes - 10750.86 * MIB) / (10750.86 * MIB) < 0.01


def test_qwen3_30b_on_a_16gb_card_no_single_change_keeps_every_layer_and_experts_go_first():
    """17.3 GiB of Q4_K_M weights on a card with 14.7 GiB free: no context or KV type helps; the
    estimator's expert offload keeps every layer's attention on the GPU instead."""
    figures = _figures("gpu-1-qwen3-30b-a3b-4080s-30of49")
    plan = plan_from_figures(figures, given=_qwen3_moe_heads())
    assert (plan.layers_on_gpu, plan.layers_total) == (30, 49)
    assert not plan.fits_as_is and plan.chosen is None
    assert plan.weights_mib > plan.usable_mib
    assert "weights and the runtime alone" in plan.reason
    n = plan.n_cpu_moe
    assert n is not None and 0 < n < 48
    info = info_from_figures(figures, _qwen3_moe_heads())
    # usable: the card less llama-server's own fit margin, as the plan counts it
    settings = with_engine_margin(Settings(context=4096, parallel=1, ubatch=512, device_bytes=15035 * MIB))
    assert _estimate_core(info, replace(settings, n_cpu_moe=n)).fits
    assert not _estimate_core(info, replace(settings, n_cpu_moe=n - 1)).fits


def test_a_log_without_the_heads_is_one_clear_error():
    figures = _figures("gpu-1-qwen3-30b-a3b-4080s-30of49")
    with pytest.raises(VramtuiError, match="heads"):
        plan_from_figures(figures)


def test_the_chosen_change_is_the_least_drastic_that_fits_on_a_real_gguf(tiny_gguf):
    """A long context on a small card: with every layer on it, the estimate does not fit; the plan's
    change fits and the value just above it does not."""
    info = load_model_info(tiny_gguf)
    settings = Settings(context=65536, parallel=1, kv_dtype="f16", flash_attn=True, device_bytes=1 << 40)
    # a card that holds every layer's weights and 60% of this context's cache
    whole = _estimate_core(info, settings)
    kv = whole.kv_cache_bytes
    settings = replace(settings, device_bytes=int((whole.total_bytes - kv * 2 // 5) / settings.share))
    plan = plan_on_gpu(info, settings)
    assert not plan.fits_as_is
    assert plan.chosen is not None
    params = [option.param for option in plan.options]
    assert params[0] == "kv_dtype"  # q8_0 KV comes first: the cheapest in speed
    for option in plan.options:
        changed = replace(settings, **{option.param: option.to}, **option.also)
        assert _estimate_core(info, changed).fits
    context = next(option for option in plan.options if option.param == "context")
    above = [v for v in _nice_below(65536) if v > int(context.to)]  # the values tried before it
    assert above and not any(_estimate_core(info, replace(settings, context=v)).fits for v in above)


def test_the_goal_plans_against_llama_servers_own_fit_margin_not_the_80_percent_line():
    """Issue 22 #22: with 80% of the card usable the plan shortened a context that llama-server's fit
    (1024 MiB kept free per device, `--fit-target`'s default) runs whole on the card."""
    from vramtui.core.estimate.modelinfo import info_from_flags
    from vramtui.core.units import GIB

    info = info_from_flags(params=8_000_000_000, layers=32, kv_heads=8, head_dim=128, quant="q4_k_m")
    settings = Settings(backend="llama.cpp", context=32768, parallel=1, kv_dtype="f16", device_bytes=GIB)
    whole = _estimate_core(info, replace(settings, device_bytes=1 << 40)).total_bytes
    card = whole + 1536 * MIB  # the whole run and 1.5 GiB more: over 80% of it, under card - 1 GiB
    assert whole > 0.8 * card
    plan = plan_on_gpu(info, replace(settings, device_bytes=card))
    assert plan.fits_as_is and plan.usable_mib == pytest.approx(card / MIB - 1024, abs=1)
    # a share the user gave is theirs; an engine with no fit of its own keeps its share
    assert not plan_on_gpu(info, replace(settings, device_bytes=card, safety=0.8)).fits_as_is
    assert plan_on_gpu(info, replace(settings, device_bytes=card, safety=0.8)).options[0].param == "kv_dtype"
    ollama = plan_on_gpu(info, replace(settings, backend="ollama", device_bytes=card))
    assert ollama.usable_mib == pytest.approx(card / MIB * Settings(backend="ollama").share, abs=1)


def test_a_small_card_is_sized_against_the_engines_fit_margin_and_each_cache_type_has_its_cost(tiny_gguf):
    """QA 16: on a 2 GiB card the plan counted 80% (1638 MiB) where llama-server's fit keeps 1024 MiB free,
    and a q4_0 cache was costed as q8_0's "about the same speed and quality"."""
    info = load_model_info(tiny_gguf)
    settings = Settings(backend="llama.cpp", context=262144, parallel=1, device_bytes=2048 * MIB)
    assert round(plan_on_gpu(info, settings).usable_mib) == 1024
    costs = {}
    for card in (2560, 3072):  # 1536 and 2048 MiB usable: q4_0 fits the first, q8_0 the second
        plan = plan_on_gpu(info, replace(settings, device_bytes=card * MIB))
        kv = next(option for option in plan.options if option.param == "kv_dtype")
        costs[kv.to] = kv.cost
    assert set(costs) == {"q4_0", "q8_0"}
    assert costs["q4_0"].startswith("a q4_0 KV cache") and "quality lost" in costs["q4_0"]
    assert costs["q8_0"].startswith("a q8_0 KV cache")
    # a card no larger than the margin: the engine's fit would keep it all; the 80% line stands
    tiny_card = plan_on_gpu(info, replace(settings, device_bytes=1024 * MIB))
    assert round(tiny_card.usable_mib) == round(1024 * 0.8)
