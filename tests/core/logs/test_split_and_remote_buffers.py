"""llama.cpp lines first seen in log round 53's training part: a split GGUF's mapped files, fit's
overflow, an RPC device's allocation, the MTP draft context."""

from __future__ import annotations

from vramtui.core.logs.diagnose import LogDiagnoser, diagnose_text

_FIT_OVERFLOW = """\
I llama_params_fit_impl:   - CUDA0 (NVIDIA GeForce RTX 4060): 49 layers (47 overflowing),   5767 MiB used,   1201 MiB free
I llama_params_fit: successfully fit params to free device memory
I load_tensors: offloaded 49/49 layers to GPU
I load_tensors:   CPU_Mapped model buffer size = 16827.13 MiB
I load_tensors:   CPU_Mapped model buffer size = 16669.74 MiB
I load_tensors:   CPU_Mapped model buffer size = 16428.38 MiB
I load_tensors:   CPU_Mapped model buffer size =  3996.72 MiB
I load_tensors:        CUDA0 model buffer size =  4147.99 MiB
I llama_kv_cache:      CUDA0 KV buffer size =   960.00 MiB
I sched_reserve:      CUDA0 compute buffer size =   583.69 MiB
I main: server is listening on http://127.0.0.1:8080
"""


def _figures(text: str) -> dict[str, dict[str, int | float]]:
    diagnoser = LogDiagnoser(None, kernel_log=lambda: None)
    diagnoser.feed_lines(text.splitlines())
    return diagnoser.figures


def test_a_split_ggufs_mapped_files_add_up() -> None:
    mapped = _figures(_FIT_OVERFLOW)["model_buffer"]["CPU_Mapped"]
    assert round(mapped / 2**20, 2) == round(16827.13 + 16669.74 + 16428.38 + 3996.72, 2)


def test_the_same_device_after_other_lines_is_still_a_new_load() -> None:
    second = _FIT_OVERFLOW + "I load_tensors:   CPU_Mapped model buffer size =  100.00 MiB\n"
    assert _figures(second)["model_buffer"] == {"CPU_Mapped": 100 * 2**20}


def test_fits_overflow_is_a_quiet_slow_run_in_its_own_words() -> None:
    result = diagnose_text(_FIT_OVERFLOW, kernel_log=lambda: None)
    assert not result.failed
    (warning,) = result.warnings
    assert "fit left the experts of 47 layers in host memory" in warning and "52.66 GiB" in warning
    assert "no kernels" not in warning  # not the missing-kernel explanation


def test_a_remote_rpc_devices_buffer_is_the_first_error_and_device_memory() -> None:
    log = (
        "ggml_gallocr_reserve_n_impl: failed to allocate RPC0[10.0.3.67:50053] buffer of size 500926080\n"
        "graph_reserve: failed to allocate compute buffers\n"
        "llama_init_from_model: failed to initialize the context: failed to allocate compute pp buffers\n"
    )
    result = diagnose_text(log, kernel_log=lambda: None)
    assert (result.failure_stage, result.failure, result.first_error_line) == ("kv_cache", "cuda_oom", 1)


def test_the_mtp_draft_context_comes_after_the_weights() -> None:
    log = (
        "creating MTP draft context against the target model ...\n"
        "E ggml_backend_cuda_buffer_type_alloc_buffer: allocating 1184.06 MiB on device 0: cudaMalloc failed: "
        "out of memory\n"
        "E common_speculative_init_result: failed to create MTP context\n"
    )
    result = diagnose_text(log, kernel_log=lambda: None)
    assert (result.failure_stage, result.failure, result.first_error_line) == ("kv_cache", "cuda_oom", 2)
