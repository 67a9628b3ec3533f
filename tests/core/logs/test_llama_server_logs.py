"""Real llama-server logs at its default verbosity (captured in tests/data/llama-server, see its README)."""

from __future__ import annotations

from pathlib import Path

import pytest

from vramtui.core.logs.diagnose import diagnose_file

SERVER_LOGS = Path(__file__).resolve().parents[2] / "data" / "llama-server"


def test_kv_cache_too_big_is_kv_cache() -> None:
    diagnosis = diagnose_file(SERVER_LOGS / "kv-too-big.log")
    assert diagnosis.failed and diagnosis.failure_stage == "kv_cache"
    assert diagnosis.cause != "compute_alloc_failed"


def test_compute_buffer_too_big_is_kv_cache_with_its_own_advice() -> None:
    diagnosis = diagnose_file(SERVER_LOGS / "compute-too-big.log")
    assert diagnosis.failed and diagnosis.failure_stage == "kv_cache"
    assert diagnosis.cause == "compute_alloc_failed"
    assert "--flash-attn on" in diagnosis.advice[0] and "--ubatch-size" in diagnosis.advice[1]


def test_quantized_v_without_flash_attention_is_its_error_first() -> None:
    diagnosis = diagnose_file(SERVER_LOGS / "quantized-v-no-fa.log")
    assert diagnosis.cause == "v_cache_needs_flash_attn"
    assert "quantized v cache requires flash_attn" in (diagnosis.first_error_text or "").lower()
    # the advice names the two ways out in llama-server's flags, not "read the first error line"
    assert diagnosis.advice[0].startswith("Turn on flash attention: --flash-attn on")
    assert "--cache-type-v f16" in diagnosis.advice[1]


@pytest.mark.parametrize("name", ["healthy.log", "healthy-defaults.log", "compute-fits-fa-auto.log"])
def test_healthy_reaches_ready(name: str) -> None:
    """`llama_server: model loaded` / `listening on http://` at default verbosity are `ready`."""
    diagnosis = diagnose_file(SERVER_LOGS / name)
    assert diagnosis.stage == "ready" and not diagnosis.failed


def test_port_in_use_is_a_failure() -> None:
    diagnosis = diagnose_file(SERVER_LOGS / "port-in-use.log")
    assert diagnosis.failed and diagnosis.cause == "port_in_use"
    assert "couldn't bind" in (diagnosis.first_error_text or "")
    assert any("another port" in line for line in diagnosis.advice)


def test_a_kv_cache_that_did_not_fit_is_not_told_to_shrink_the_micro_batch() -> None:
    """The buffer that failed was the KV cache (the lines after the failed allocation say so): a smaller
    micro-batch or weights file does not shrink it; an 8-bit cache does (QA 14)."""
    host = diagnose_file(SERVER_LOGS / "kv-too-big.log")
    assert host.cause == "kv_alloc_failed"
    assert host.advice[0].startswith("Host RAM could not hold the KV cache: lower --ctx-size")
    assert "--cache-type-k q8_0 --cache-type-v q8_0" in host.advice[1]
    compute = diagnose_file(SERVER_LOGS / "compute-too-big.log")
    assert compute.cause == "compute_alloc_failed"
