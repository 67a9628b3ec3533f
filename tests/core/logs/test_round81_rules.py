"""Rules written from round 81's training logs (tests/data/logs/round81.jsonl, sources in each record), each
checked on its training log and against a near miss it must not catch."""

from __future__ import annotations

from tests.core.logs import corpus
from vramtui.core.logs.diagnose import diagnose_text


def _diagnose(text: str):
    return diagnose_text(text, kernel_log=lambda: None)


def test_vllms_kill_of_its_own_tree_after_a_worker_failed_is_not_the_oom_killer() -> None:
    # vllm#16150: a torch.compile ValueError in determine_available_memory, "Got fatal signal from worker
    # processes, shutting down", then the shell's "Killed"
    d = _diagnose(
        corpus.training_log(
            "r81-vllm-v1-llama4-scout-tp8-h100-compile-unpack-error-in-determine-available-memory"
        )
    )
    assert (d.failure_stage, d.failure, d.first_error_line) == ("kv_cache", "other", 16)
    alone = _diagnose("INFO 04-07 10:50:01 [core.py:58] Initializing a V1 LLM engine (v0.8.3)\nKilled\n")
    assert alone.failure == "host_oom_killed"  # a "Killed" with no error before it is still the kill


def test_neurons_device_allocation_failure_is_a_device_out_of_memory() -> None:
    d = _diagnose(corpus.training_log("r81-vllm-neuron-inf2-llama32-1b-nrt-tensor-allocate-failure"))
    assert d.failure == "cuda_oom" and d.first_error_line == 19, d.first_error_text
    # its traceback, over 20 lines on, says it was loading (the window a stage-less error looks in: 80 lines)
    assert d.failure_stage == "load_weights"
    other = _diagnose('ERROR 01-26 10:27:42 engine.py:381] nrt_tensor_allocate status=1 message="Invalid"\n')
    assert other.failure != "cuda_oom"


def test_a_fused_moe_refusing_the_checkpoints_scales_is_an_unsupported_quantization() -> None:
    d = _diagnose(
        corpus.training_log("r81-vllm-v0-rocm-mi300x-llama4-maverick-fp8-tp4-moe-channel-scales-unsupported")
    )
    assert (d.failure_stage, d.failure, d.first_error_line) == ("load_weights", "unsupported_quant", 68)


def test_sglang_retracting_requests_in_decode_has_served() -> None:
    d = _diagnose(
        corpus.training_log("r81-sglang-deepseek-r1-fp8-tp16-2node-h100-decode-oom-retract-then-segfault")
    )
    assert (d.failure_stage, d.failure) == ("inference", "other")


def test_a_ggml_abort_message_is_the_failure_not_gdbs_missing_source_file() -> None:
    d = _diagnose(
        corpus.training_log(
            "r81-llamacpp-server-b5435-vulkan-7900xtx-gemma3-27b-q8kv-preallocated-tensor-cpy-abort"
        )
    )
    assert (d.failure, d.first_error_line) == ("other", 4), d.first_error_text
    missing = _diagnose("error: failed to open ./models/m.gguf: No such file or directory\n")
    assert missing.failure == "file_missing"  # the engine's own missing file still is one
