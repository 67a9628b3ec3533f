"""Rules written from round 82's training logs (tests/data/logs/round82.jsonl, sources in each record), each
checked on its training log and against a near miss it must not catch."""

from __future__ import annotations

from tests.core.logs import corpus
from vramtui.core.logs.diagnose import diagnose_text


def _diagnose(text: str):
    return diagnose_text(text, kernel_log=lambda: None)


def test_pytorchs_nvml_assert_in_the_caching_allocator_is_its_out_of_memory() -> None:
    # pytorch#112377: the allocator asks NVML for the usage to word its OOM error, and asserts instead
    d = _diagnose(corpus.training_log("r82-vllm-064-qwen25-14b-nvml-assert-in-allocator-oom-path"))
    assert (d.failure_stage, d.failure, d.first_error_line) == ("load_weights", "cuda_oom", 53)
    init = _diagnose(
        "RuntimeError: NVML_SUCCESS == DriverAPI::get()->nvmlInit_v2_() INTERNAL ASSERT FAILED at "
        '"../c10/cuda/CUDACachingAllocator.cpp":813, please report a bug to PyTorch.\n'
    )
    assert init.failure != "cuda_oom"  # NVML that would not start at all is no OOM


def test_a_prefill_servers_failed_kv_transfer_fails_while_serving() -> None:
    d = _diagnose(corpus.training_log("r82-sglang-pd-prefill-h200-rdma-register-memory-bad-address"))
    assert (d.failure_stage, d.failure, d.cause, d.first_error_line) == (
        "inference", "other", "kv_transfer_failed", 124,
    )  # fmt: skip


def test_vllms_engine_step_that_timed_out_failed_while_serving() -> None:
    d = _diagnose(corpus.training_log("r82-vllm-gptq-int8-p40-long-prompt-engine-iteration-timeout"))
    assert (d.failure_stage, d.cause, d.first_error_line) == ("inference", "engine_step_timeout", 71)
    elsewhere = _diagnose(
        "Traceback (most recent call last):\n"
        '  File "/app/client.py", line 12, in fetch\n'
        "    await asyncio.wait_for(call(), 5)\n"
        "asyncio.exceptions.TimeoutError\n"
    )
    assert elsewhere.cause != "engine_step_timeout"  # only the engine loop's frame says it


def test_a_workers_crash_is_the_first_error_and_its_stage_is_the_engines_traceback() -> None:
    # Abseil's "*** SIGSEGV received at time=" on a Ray worker, its faulthandler stack (40 lines), then the
    # engine's traceback through _initialize_kv_caches: the crash, at the cache's stage (graph capture)
    d = _diagnose(corpus.training_log("r82-vllm-v1-deepseek-r1-tp16-multinode-segfault-cuda-graph-capture"))
    assert (d.failure_stage, d.failure, d.first_error_line) == ("kv_cache", "other", 1)
    stopped = _diagnose("*** SIGTERM received at time=1746566409 on cpu 3 ***\n")
    assert stopped.cause != "crash"  # a stop, not a crash


def test_a_wrapper_that_stamps_stderr_error_is_no_error() -> None:
    d = _diagnose(corpus.training_log("r82-llamacpp-server-b7786-router-mode-gtx1070-stderr-tagged-error"))
    assert (d.failed, d.failure, d.first_error_line) == (False, "none", None)
    real = _diagnose(
        "[2026-01-21T04:20:06.322Z] [ERROR] main: router server is listening on http://127.0.0.1:8134\n"
        "[2026-01-21T04:21:00.000Z] [ERROR] error: failed to open models/m.gguf: No such file or directory\n"
    )
    assert real.failure == "file_missing"  # a rule of its own still reads the line
