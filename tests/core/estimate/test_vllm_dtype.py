"""vLLM's --dtype auto runs a float32 checkpoint in 16-bit (config/model.py _resolve_auto_dtype: float32 is
downcast to the platform's first dtype, bfloat16 or float16): the estimate sizes what it runs. The real CPU
run of such a checkpoint (QA round 14) printed 262,144 KV tokens for 256 MiB, as a 16-bit cache holds."""

from __future__ import annotations

from pathlib import Path

from vramtui.core.demo.tinyhf import write_tiny_hf
from vramtui.core.estimate.estimator import Settings, estimate
from vramtui.core.estimate.modelinfo import load_model_info
from vramtui.core.units import MIB


def test_a_float32_checkpoint_is_sized_in_16_bit(tmp_path: Path) -> None:
    info = load_model_info(write_tiny_hf(tmp_path / "m"))
    assert info.dtype == "f32"
    settings = Settings(backend="vllm", context=2048, on_gpu=False, kv_cache_memory=256 * MIB)
    est = estimate(info, settings)
    assert est.kv_cache_tokens == 262144
    assert any("float32 checkpoint" in note for note in est.notes)
    f32_bytes = info.weights_bytes or 0
    assert 0 < est.bill.get("weights", "host") <= f32_bytes // 2 + MIB
    kept = estimate(
        info, Settings(backend="vllm", context=2048, on_gpu=False, kv_cache_memory=256 * MIB, dtype="float32")
    )
    assert kept.kv_cache_tokens == 131072  # --dtype float32 (vramtui's own vLLM tests run so)
    transformers = estimate(info, Settings(backend="transformers", context=2048, on_gpu=False))
    assert not any("float32 checkpoint" in note for note in transformers.notes)  # it keeps what it loads


def test_the_cpu_builds_share_verdict_agrees_with_its_headroom(tmp_path: Path) -> None:
    """QA 14: `total 22.68 GiB`, `usable 21.66 GiB` and FITS (headroom_bytes -1.1 GB): the share sizes the
    worker's KV cache, and the API server's process comes on top of it, so the whole run is held to the
    node's memory and the room left is said."""
    from vramtui.core.units import GIB

    info = load_model_info(write_tiny_hf(tmp_path / "m"))
    node = 23 * GIB
    est = estimate(info, Settings(backend="vllm", context=1024, on_gpu=False, device_bytes=node))
    assert est.total_bytes > int(node * 0.92)  # the front-end is past the share
    assert est.fits and est.usable_bytes == node and est.to_dict()["headroom_bytes"] >= 0
    assert any("left for the OS and everything else" in note for note in est.notes)
