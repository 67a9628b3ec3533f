"""A KV pool too small for what the engine was asked, in the words of round 27's training logs (real
logs of sgl-project/sglang, kvcache-ai/ktransformers and vllm-project/recipes threads)."""

from __future__ import annotations

from vramtui.core.logs.diagnose import diagnose_text

SGLANG_READY = """\
[2026-04-11 14:34:09] Capture cuda graph end. Time elapsed: 15.54 s. mem usage=0.12 GB. avail mem=0.58 GB.
[2026-04-11 14:34:10] max_total_num_tokens={pool}, chunked_prefill_size=4096, max_prefill_tokens=16384, max_running_requests=1, context_len=40960, available_gpu_mem=0.58 GB
[2026-04-11 14:34:11] INFO:     Started server process [135790]
[2026-04-11 14:34:11] INFO:     Application startup complete.
[2026-04-11 14:34:11] INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)
[2026-04-11 14:34:21] The server is fired up and ready to roll!
"""


def test_an_sglang_pool_under_the_context_caps_every_request_quietly() -> None:
    """SGLang takes no request longer than its pool: 12,079 tokens of a 40,960 context is a context of
    12,079, said nowhere else."""
    short = diagnose_text(SGLANG_READY.format(pool=12079), kernel_log=lambda: None)
    assert short.failure == "none"
    assert any("pool holds 12,079 tokens, fewer than the context of 40,960" in w for w in short.warnings)
    roomy = diagnose_text(SGLANG_READY.format(pool=104273), kernel_log=lambda: None)
    assert not roomy.warnings


def test_sglang_retracting_requests_when_decode_runs_out_is_a_quiet_failure() -> None:
    log = "[2025-03-07 21:49:33 TP13] Decode out of memory happened. #retracted_reqs: 1, #new_token_ratio: 0.1474 -> 0.1845\n"
    diagnosis = diagnose_text(log * 3, kernel_log=lambda: None)
    assert diagnosis.failure == "none"
    assert any("retracted running requests" in w for w in diagnosis.warnings), diagnosis.warnings


def test_vllm_more_sequences_than_mamba_cache_blocks_is_a_cache_too_small() -> None:
    log = (
        "ValueError: max_num_seqs (1024) exceeds available Mamba cache blocks (939).\n"
        "Each decode sequence requires one Mamba cache block, so CUDA graph capture cannot\n"
        "proceed. Please lower max_num_seqs to at most 939 or increase gpu_memory_utilization.\n"
    )
    diagnosis = diagnose_text(log, kernel_log=lambda: None)
    assert (diagnosis.failure_stage, diagnosis.failure, diagnosis.first_error_line) == (
        "kv_cache",
        "kv_cache_too_small",
        1,
    )


def test_round_28s_readings_of_engines_own_words() -> None:
    """Round 28's training logs: an SGLang request over its allowed length, vLLM capping its graph sizes
    to the Mamba blocks (quiet), vllm-ascend's zero memory left for the cache, llama.cpp's KV type whose
    block does not divide the head size, and Ollama relaying a buffer llama.cpp could not allocate."""
    cases = {
        "[2025-03-03 06:49:28 TP5] Input length (160062 tokens) exceeds the maximum allowed length (59862 "
        "tokens). Use a shorter input or enable --allow-auto-truncate.": ("inference", "context_too_long"),
        "(Worker_TP2 pid=554) INFO 10-28 21:14:48 [worker_v1.py:259] Available memory: 0, total memory: "
        "65452113920\n(EngineCore_DP0 pid=415) ERROR 10-28 21:14:49 [core.py:708] EngineCore failed to start.": (
            "kv_cache",
            "kv_cache_too_small",
        ),
        "llama_init_from_model: K cache type turbo4 with block size 128 does not divide n_embd_head_k=576": (
            None,
            "unsupported_quant",
        ),
        "Error: llama runner process has terminated: error loading model: unable to allocate backend buffer": (
            "load_weights",
            "cuda_oom",
        ),
    }
    for log, (stage, failure) in cases.items():
        diagnosis = diagnose_text(log + "\n", kernel_log=lambda: None)
        assert diagnosis.failure == failure, (log, diagnosis.failure)
        assert stage is None or diagnosis.failure_stage == stage, (log, diagnosis.failure_stage)
    capped = (
        "(EngineCore_DP0 pid=387) WARNING 03-08 16:44:29 [compilation.py:1233] Capping cudagraph capture sizes "
        "from max 512 to 352 to fit Mamba cache blocks (361 blocks available).\n"
    )
    diagnosis = diagnose_text(capped, kernel_log=lambda: None)
    assert diagnosis.failure == "none" and any("capped its CUDA-graph" in w for w in diagnosis.warnings)
