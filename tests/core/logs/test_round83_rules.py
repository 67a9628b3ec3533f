"""Rules written from round 83's training logs (tests/data/logs/round83.jsonl, sources in each record), each
checked on its training log and against a near miss it must not catch."""

from __future__ import annotations

from tests.core.logs import corpus
from vramtui.core.logs.advice import CAUSE_WORDS
from vramtui.core.logs.diagnose import diagnose_text


def _diagnose(text: str):
    return diagnose_text(text, kernel_log=lambda: None)


def test_tritons_shared_memory_limit_is_no_out_of_memory() -> None:
    # sglang#6001: torch.compile's Triton kernel wants 196608 B of shared memory on a 65536 B card; SGLang's
    # capture failure around it lists the OOM's hints (a smaller --mem-fraction-static), read as an OOM
    d = _diagnose(corpus.training_log("r83-sglang-046-rocm-mi308-torch-compile-triton-shared-memory"))
    assert (d.failure_stage, d.failure, d.cause, d.first_error_line) == (
        "kv_cache", "other", "triton_shared_memory", 548,
    )  # fmt: skip
    assert "not its VRAM" in CAUSE_WORDS["triton_shared_memory"]
    memory = _diagnose(
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity "
        "of 23.52 GiB of which 1.10 GiB is free.\n"
    )
    assert memory.failure == "cuda_oom"  # the card's own memory stays an OOM


def test_glibcs_double_free_is_the_first_error_before_the_signal_handlers_line() -> None:
    # vllm#15687: "free(): double free detected in tcache 2" in a Ray worker's NCCL set-up, then Abseil's
    # "*** SIGABRT received"; the run had not loaded its weights (init_device in the stack)
    d = _diagnose(corpus.training_log("r83-vllm-v1-tp16-ray-h20-ncclcomminit-double-free-killed"))
    assert (d.failure_stage, d.failure, d.cause, d.first_error_line) == (
        "load_weights", "other", "heap_corruption", 40,
    )  # fmt: skip


def test_a_heap_abort_after_an_error_is_that_errors_teardown() -> None:
    # round 21: "key not found" failed the load, and "free(): invalid pointer" came as it unwound
    d = _diagnose(corpus.training_log("r21-ikllama-moonlight-missing-yarn-key"))
    assert (d.failure, d.first_error_line) == ("other", 55) and d.cause != "heap_corruption"
    alone = _diagnose("munmap_chunk(): invalid pointer\nAborted (core dumped)\n")
    assert (alone.cause, alone.first_error_line) == ("heap_corruption", 1)


def test_vllm_v1s_list_of_methods_it_lacks_is_no_cache_stage() -> None:
    # V1's Ray worker warns "Methods determine_num_available_blocks,...,initialize_cache not implemented":
    # the names of the cache's steps, not the cache being sized (a crash in NCCL set-up read as kv_cache)
    warned = _diagnose(
        "(RayWorkerWrapper pid=331) WARNING 03-27 22:16:52 [utils.py:2379] Methods determine_num_available_"
        "blocks,device_config,get_cache_block_size_bytes,initialize_cache not implemented in <vllm.v1.worker."
        "gpu_worker.Worker object at 0x7edec44b2810>\n"
        "(RayWorkerWrapper pid=336) free(): double free detected in tcache 2\n"
    )
    assert warned.failure_stage != "kv_cache"
    sized = _diagnose(
        "INFO 03-27 22:20:01 [worker.py:267] determine_num_available_blocks: memory profiling takes 4.1 s\n"
        "(RayWorkerWrapper pid=336) free(): double free detected in tcache 2\n"
    )
    assert sized.failure_stage == "kv_cache"
