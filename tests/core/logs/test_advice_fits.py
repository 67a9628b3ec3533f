"""Advice that fits the case (issue 22 #35): no "a Q4_K_M instead" for a file that already is one, no host-RAM
advice for a GPU's compute buffer, no KV-cache advice when the weights alone are more than the engine's share.
The logs are real ones of the corpus (tests/data/logs), read by their id."""

from __future__ import annotations

import json
from pathlib import Path

from vramtui.core.logs.diagnose import diagnose_text

LOGS = Path(__file__).resolve().parents[2] / "data" / "logs"
CORPUS = (LOGS.parent / "corpus.jsonl", *sorted(LOGS.glob("*.jsonl")))


def _log(case_id: str) -> str:
    for path in CORPUS:
        if not path.is_file():
            continue
        for row in path.read_text(encoding="utf-8").splitlines():
            if f'"{case_id}"' in row:
                case = json.loads(row)
                if case.get("id") == case_id:
                    return case["log"]
    raise LookupError(case_id)


def test_a_4bit_file_is_not_told_to_use_q4_k_m() -> None:
    """Jan's `...alpha.Q4_K_M\\model.gguf` and ik_llama's `Kimi-K2-Instruct-IQ4_XS.gguf` ran out of GPU
    memory loading: the next step down is 3-bit, not the Q4_K_M they already are."""
    for case_id in (
        "r9-llamacpp-jan-vulkan-intel-arc-memory-allocation-failed",
        "r10-llamacpp-ik-kimik2-load-cudamalloc-44g",
    ):
        diagnosis = diagnose_text(_log(case_id))
        assert diagnosis.failure == "cuda_oom" and diagnosis.failure_stage == "load_weights", case_id
        said = "\n".join(diagnosis.advice)
        assert "Q4_K_M" not in said, said
        assert "already 4-bit" in said and "Q3_K_M" in said, said
        assert diagnosis.advice[0].startswith("The weights do not fit: put fewer layers on the GPU")


def test_the_quantization_step_follows_the_files_own() -> None:
    """The same load failure with the file type llama.cpp prints: Q8_0 still gets Q4_K_M, Q2_K nothing smaller."""
    log = _log("r9-llamacpp-jan-vulkan-intel-arc-memory-allocation-failed")
    for file_type, expected, absent in (
        ("Q8_0", "a Q4_K_M GGUF (this file is 8-bit", "already"),
        ("Q2_K - Medium", "no smaller quantization is left", "Q4_K_M"),
    ):
        said = "\n".join(diagnose_text(f"print_info: file type   = {file_type}\n" + log).advice)
        assert expected in said and absent not in said, said


def test_an_ollama_gpu_compute_buffer_gets_gpu_advice() -> None:
    """Ollama's runner failing to allocate its compute buffer on CUDA0/CUDA1/ROCm0: what shrinks that buffer
    or frees the card, in Ollama's NAME=value and model options; nothing about other programs' RAM."""
    for case_id in (
        "ollama-7",
        "r10-ollama-two-gpus-compute-graph-9g-oom-backoff",
        "r10-ollama-llama3-64k-kv-on-host-compute-4.5g-oom",
    ):
        diagnosis = diagnose_text(_log(case_id))
        assert diagnosis.backend == "ollama" and diagnosis.failure == "cuda_oom", case_id
        said = "\n".join(diagnosis.advice)
        assert "memory limit" not in said and "Close other programs" not in said, said
        assert "OLLAMA_FLASH_ATTENTION=1" in said and "OLLAMA_CONTEXT_LENGTH" in said, said
        assert "the model option num_gpu" in said and "num_batch" in said, said


def test_weights_over_the_share_get_no_kv_cache_advice() -> None:
    """SGLang's DeepSeek-V4-Pro: 125.65 GB of weights per GPU, more than 0.88 of the ~137.9 GB it had."""
    diagnosis = diagnose_text(_log("sglang-1"))
    assert diagnosis.failure == "kv_cache_too_small"
    said = "\n".join(diagnosis.advice)
    assert "fp8" not in said.replace("FP8", "") and "--kv-cache-dtype" not in said, said
    assert "--context-length" not in said, said
    assert diagnosis.advice[0].startswith("The weights alone (125.65 GiB) are more than the engine's share")
    assert "--mem-fraction-static above 0.92" in said and "--tp-size N" in said, said


def test_vllm_weights_over_the_share_get_share_quantization_and_tensor_parallel() -> None:
    """vllm-project/vllm#13882's V0 profile (RTX 4060, 8 GiB) with the share at 0.50 instead of 0.70: the
    5.20 GiB of weights are more than the 4.00 GiB share. At 0.70 (the real log) they are not, and the KV
    cache advice stays."""
    real = _log("r2-06-vllm-rtx4060-negative-kv")
    low_share = real.replace(
        "gpu_memory_utilization (0.70) = 5.60GiB", "gpu_memory_utilization (0.50) = 4.00GiB"
    )
    diagnosis = diagnose_text(low_share)
    assert diagnosis.failure == "kv_cache_too_small"
    said = "\n".join(diagnosis.advice)
    assert "--kv-cache-dtype" not in said and "--max-model-len" not in said, said
    assert "--gpu-memory-utilization above 0.66" in said, said
    assert "--quantization" in said and "--tensor-parallel-size N" in said, said
    as_logged = "\n".join(diagnose_text(real).advice)
    assert "--kv-cache-dtype fp8" in as_logged and "weights alone" not in as_logged, as_logged


def test_vllm_v0s_kv_too_small_advice_names_the_context_that_fits() -> None:
    """Issue 22 #17: V0 says how many tokens its KV cache can store ("... stored in KV cache (4752)"):
    the advice is the context that fits, with its number, not a bare `--max-model-len`. (Training-part
    logs of the corpus.)"""
    for case_id, fits in (
        ("r10-vllm-v0-gpustack-8k-len-4752-kv-tokens", 4752),
        ("r4-24-vllm-qwen15-gptq-3090-kv-oneline", 24320),
    ):
        diagnosis = diagnose_text(_log(case_id), backend="vllm")
        assert diagnosis.failure == "kv_cache_too_small", case_id
        assert diagnosis.engine_figures["max_model_len_fit"] == fits
        said = [line for line in diagnosis.advice if "--max-model-len" in line]
        assert said == [f"Or lower the context to what fits: --max-model-len {fits}."], diagnosis.advice
