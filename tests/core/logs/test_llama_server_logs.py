"""Real llama-server logs at its default verbosity (captured in tests/data/llama-server, see its README)."""

from __future__ import annotations

from pathlib import Path

import pytest

from vramtui.core.logs.diagnose import diagnose_file, diagnose_text

SERVER_LOGS = Path(__file__).resolve().parents[2] / "data" / "llama-server"


def test_kv_cache_too_big_is_kv_cache() -> None:
    diagnosis = diagnose_file(SERVER_LOGS / "kv-too-big.log")
    assert diagnosis.failed and diagnosis.failure_stage == "kv_cache"
    assert diagnosis.cause != "compute_alloc_failed"


def test_compute_buffer_too_big_is_kv_cache_with_its_own_advice() -> None:
    diagnosis = diagnose_file(SERVER_LOGS / "compute-too-big.log")
    assert diagnosis.failed and diagnosis.failure_stage == "kv_cache"
    assert diagnosis.cause == "compute_alloc_failed"
    # run with -fa off, but the log at the default verbosity does not say so (QA 32 D6): the micro-batch
    # first, flash attention as a condition; vramtui's own launch line says it, and it comes first then
    assert "--ubatch-size" in diagnosis.advice[0]
    assert (
        diagnosis.advice[1].startswith("If flash attention is off")
        and "--flash-attn on" in diagnosis.advice[1]
    )
    text = (SERVER_LOGS / "compute-too-big.log").read_text()
    launched = f"vramtui: launch llama-server -m m.gguf -c 65536 -fa off\n{text}"
    assert diagnose_text(launched).advice[0].startswith("Turn on flash attention: --flash-attn on")


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


def test_a_request_over_its_slot_names_the_slots_the_log_shows() -> None:
    """QA 7: a -np 2 server's refused request was advised with 'llama-server's auto is 4': at its default
    verbosity llama-server prints no llama_context lines, only its own 'initializing, n_slots = 2,
    n_ctx_slot = 2048, kv_unified = 'false''. The error line is the same binary's, from that QA run."""
    from vramtui.core.logs.diagnose import diagnose_text

    log = (SERVER_LOGS / "parallel-not-unified.log").read_text()
    refused = (
        "5.31.902.761 E srv    send_error: task id = 56, error: request (7505 tokens) exceeds the available "
        "context size (2048 tokens), try increasing it"
    )
    body, stop = log.rstrip("\n").rsplit("\n", 1)  # the request came before its stop
    diagnosis = diagnose_text(f"{body}\n{refused}\n{stop}\n", backend="llama.cpp")
    assert (diagnosis.failure_stage, diagnosis.failure) == ("inference", "context_too_long")
    assert diagnosis.engine_figures["server_slots"] == 2
    advice = " ".join(diagnosis.advice)
    assert "Each of the 2 slots gets 2,048 of the context's 4,096 tokens" in advice, advice
    assert "auto is 4" not in advice


@pytest.mark.parametrize(
    "fault",
    [
        "decode() failed: vk::Device::waitForFences: ErrorDeviceLost",
        "decode() failed: CUDA error: an illegal memory access was encountered",
    ],
)
def test_a_gpu_fault_on_a_server_error_line_is_the_fault(fault: str) -> None:
    """Round 62: llama-server's "E srv update_slots: decode() failed: ...ErrorDeviceLost" while serving read
    as a bare error, and gdb's "30<tab>.../wait4.c: No such file or directory." in the crash's backtrace
    after it as a missing file. The fault is the failure, with its own advice; the debugger's line is none."""
    from vramtui.core.logs.diagnose import diagnose_text

    log = (
        "main: server is listening on http://127.0.0.1:8080 - starting the main loop\n"
        f"5.09.055.305 E srv  update_slots: {fault}\n"
        "terminate called after throwing an instance of 'vk::DeviceLostError'\n"
        "30\t../sysdeps/unix/sysv/linux/wait4.c: No such file or directory.\n"
    )
    diagnosis = diagnose_text(log, backend="llama.cpp", kernel_log=lambda: None)
    assert (diagnosis.cause, diagnosis.failure_stage, diagnosis.first_error_line) == (
        "kernel_fault",
        "inference",
        2,
    )
    assert diagnosis.advice[0].startswith("Not a memory failure: the GPU faulted")
    gdb_only = diagnose_text(log.splitlines()[0] + "\n" + log.splitlines()[3] + "\n", backend="llama.cpp")
    assert gdb_only.cause != "not_found_local"
