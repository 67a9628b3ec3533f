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
