"""Rules written from round 51's training logs (committed server logs), each tested on the real log and on
the same log cut where the rule's evidence is not yet there, so that each assertion can fail."""

from __future__ import annotations

import corpus  # tests/core/logs/corpus.py
import pytest

from vramtui.core.logs.diagnose import diagnose_text


def _diagnose(text: str):  # type: ignore[no-untyped-def]
    return diagnose_text(text, kernel_log=lambda: None)


def test_a_full_kv_cache_that_llama_server_worked_around_is_a_quiet_warning_not_a_failure() -> None:
    # "failed to find a memory slot", a purged slot, "retrying with smaller batch size", then the prompt done
    # and every request answered 200: the server made room; its slots' share of the context is small
    log = corpus.training_log("r51-llamacpp-qwen25-3b-metal-kv-slot-purge")
    served = _diagnose(log)
    assert not served.failed and served.stage == "inference"
    assert any(
        "the KV cache filled while serving" in warning and "--parallel" in warning
        for warning in served.warnings
    )
    assert any(line.startswith("recovered: ") and "prompt done" in line for line in served.evidence)
    # the same log cut after the retry, before the prompt went through: the full cache is the failure
    lines = log.split("\n")
    cut = "\n".join(
        lines[: next(n for n, line in enumerate(lines) if "retrying with smaller batch" in line) + 1]
    )
    stuck = _diagnose(cut)
    assert stuck.failed and (stuck.failure_stage, stuck.failure) == ("inference", "context_too_long")
    assert stuck.first_error_line == 266


def test_no_kernel_image_in_a_quantized_gemm_is_the_quantizations_kernel_missing() -> None:
    log = corpus.training_log("r51-vllm-nemotron-nano-nvfp4-gb10-nokernel")
    found = _diagnose(log)
    assert (found.failure_stage, found.failure, found.cause) == (
        "kv_cache",
        "unsupported_quant",
        "quant_kernel_missing",
    )
    assert found.first_error_line == 239
    assert "Not a memory failure: the GEMM kernel for this checkpoint's quantization" in found.advice[0]
    # the card's missing-FP4 notice is said once, not once per rule that reads its line
    assert sum("no native" in warning for warning in found.warnings) == 1
    # the frames are what say it: without FlashInfer's mm_fp4 frames it is CUDA's generic "no kernel image"
    kept = [line for line in log.split("\n") if "mm_fp4" not in line and "gemm_base" not in line]
    generic = _diagnose("\n".join(kept))
    assert (generic.failure, generic.cause) == ("other", "no_kernel_image")


@pytest.mark.parametrize("keep", [13, 26])
def test_a_vllm_log_that_stops_after_its_architecture_resolved_is_incomplete(keep: int) -> None:
    # the API server resolved the model's architecture (its files are there), then the log stops without an
    # error: still loading, or killed with its shell; "no failure" would let `diagnose && deploy` pass
    lines = corpus.training_log("r51-vllm-laguna-nvfp4-shell-exit").split("\n")
    found = _diagnose("\n".join(lines[:keep]))
    assert found.incomplete and not found.failed and found.stage == "load_weights"
    # before that line nothing shows the run started: a banner and its arguments are no start-up yet
    before = _diagnose("\n".join(lines[:12]))
    assert not before.incomplete and before.stage is None
