"""Rules written from rounds 68 and 69's training logs (tests/data/logs/round68.jsonl, round69.jsonl, sources
in each record): Mesa's AMD Vulkan driver out of device memory, ggml-vulkan's refused pinned buffer, a crash
in the warm-up run that only ggml's backtrace places, vLLM's ten-minute warm-up, and SGLang's own warm-up
request failing."""

from __future__ import annotations

from tests.core.logs import corpus
from vramtui.core.logs.diagnose import Diagnosis, diagnose_text


def _read(text: str) -> Diagnosis:
    return diagnose_text(text, kernel_log=lambda: None)


def test_the_amd_vulkan_driver_out_of_memory_while_loading_is_the_devices() -> None:
    # 49/49 layers to Vulkan0 on a Strix Halo APU: ".radv/amdgpu: Not enough memory for command submission."
    # then "vk::Queue::submit: ErrorDeviceLost" (read as a kernel fault before)
    diagnosis = _read(corpus.training_log("r68-llamacpp-strix-vulkan-load-oom"))
    assert (diagnosis.failure_stage, diagnosis.failure) == ("load_weights", "cuda_oom"), diagnosis.summary
    assert diagnosis.first_error_line == 180
    assert "not enough memory for command submission" in (diagnosis.first_error_text or "").lower()


def test_a_crash_whose_backtrace_shows_the_warm_up_decode_is_at_start_up_after_the_weights() -> None:
    text = corpus.training_log("r68-llamacpp-ds4-vulkan-warmup-oom")
    diagnosis = _read(text)
    # the pinned-memory lines before it are ggml-vulkan falling back to pageable memory, not the failure
    assert diagnosis.first_error_line == 18, diagnosis.first_error_text
    assert (diagnosis.failure_stage, diagnosis.failure) == ("kv_cache", "cuda_oom"), diagnosis.summary
    # without the backtrace's common_init_from_params frame, nothing places it past the weights
    cut = "\n".join(line for line in text.splitlines() if "common_init_from_params" not in line)
    assert _read(cut).failure_stage == "load_weights"


def test_a_warm_up_run_of_ten_minutes_is_a_quiet_warning_and_a_short_one_is_not() -> None:
    text = corpus.training_log("r68-vllm-spark-qwen36-slow-warmup")
    diagnosis = _read(text)
    assert not diagnosis.failed
    assert any("ten minutes or more" in w for w in diagnosis.warnings), diagnosis.warnings
    quick = text.replace(
        "Initial profiling/warmup run took 621.57 s", "Initial profiling/warmup run took 21.57 s"
    )
    assert not any("ten minutes or more" in w for w in _read(quick).warnings)


def test_sglangs_own_warm_up_request_failing_is_a_start_that_never_came_up() -> None:
    # SGLang on Ascend: Uvicorn listened, its warm-up chat request failed in the NPU's image preprocessing,
    # then "Initialization failed. warmup error" and it killed itself (read as a request's failure before)
    text = corpus.training_log("r69-sglang-ascend-qwen35-warmup-aclnn")
    diagnosis = _read(text)
    assert (diagnosis.failure_stage, diagnosis.first_error_line) == ("ready", 167), diagnosis.summary
    without = "\n".join(line for line in text.splitlines() if "warmup error" not in line)
    assert _read(without).failure_stage == "inference"
