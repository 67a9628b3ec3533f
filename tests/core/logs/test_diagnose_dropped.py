"""Two readings from the training part of round 25 (real logs of vllm-project/vllm and ollama/ollama
threads, 2025-2026), each a mechanism beyond its one log."""

from __future__ import annotations

from vramtui.core.logs.diagnose import diagnose_text

PULLED_THEN_EOF = """\
$ ollama run llama4:scout
pulling manifest
pulling 9d507a36062c: 100% |##################|  67 GB
verifying sha256 digest
writing manifest
success
Error: Post "http://127.0.0.1:11434/api/generate": EOF
"""


def test_ollama_client_eof_after_a_pull_is_a_load_killed_with_no_answer() -> None:
    """`ollama run`'s client: the pull finished, then the server dropped the first request with no answer
    (a runner that fails answers with its error; a server killed outright answers nothing). Read before as
    a download failure of no class."""
    diagnosis = diagnose_text(PULLED_THEN_EOF, kernel_log=lambda: None)
    assert (diagnosis.failure_stage, diagnosis.failure) == ("load_weights", "host_oom_killed")
    assert diagnosis.first_error_line == 7
    assert diagnosis.cause == "server_dropped"
    assert any("journalctl -u ollama" in line for line in diagnosis.advice), diagnosis.advice


def test_vllm_negative_kv_memory_gives_way_to_the_error_it_raises() -> None:
    """vLLM prints the negative KV budget, then raises "No available memory for the cache blocks": the
    raise states the failure (three labelled logs); an excerpt that stops at the figure keeps the figure."""
    figure = "(EngineCore pid=1) INFO 01-01 00:00:00 [gpu_worker.py:276] Available KV cache memory: -3.32 GiB"
    raised = "(EngineCore pid=1) ERROR 01-01 00:00:00 [core.py:700] ValueError: No available memory for the cache blocks."
    both = diagnose_text(f"{figure}\n{raised}\n", kernel_log=lambda: None)
    assert (both.failure_stage, both.failure, both.first_error_line) == ("kv_cache", "kv_cache_too_small", 2)
    alone = diagnose_text(f"{figure}\n", kernel_log=lambda: None)
    assert (alone.failure_stage, alone.failure, alone.first_error_line) == (
        "kv_cache",
        "kv_cache_too_small",
        1,
    )
