"""llama.cpp's out-of-memory reports in its own words (issue 21), each at the stage the source says it
happens: ggml's buffers are allocated while starting (the weights first, then the KV cache, then the
compute buffers the scheduler reserves); a request or the warm-up allocates only from the CUDA pool, and
the K-shift re-reserves its graph while serving. Each report is read alone (a user's pasted excerpt),
inside a start-up, and after the weights loaded or the server came up, where the log says more."""

from __future__ import annotations

import pytest

from vramtui.core.logs.diagnose import diagnose_text

BOOT = """ggml_cuda_init: found 1 CUDA devices:
  Device 0: NVIDIA GeForce RTX 3090, compute capability 8.6, VMM: yes
build: 6550 (5ed5659) with cc (GCC) 12.2.0 for x86_64-linux-gnu
main: loading model
srv    load_model: loading model '/models/Qwen3-32B-Q4_K_M.gguf'
llama_model_load_from_file_impl: using device CUDA0 (NVIDIA GeForce RTX 3090) - 23800 MiB free
llama_model_loader: loaded meta data with 30 key-value pairs and 707 tensors from /models/Qwen3-32B-Q4_K_M.gguf
print_info: file type   = Q4_K - Medium
print_info: n_layer          = 64
load_tensors: loading model tensors, this can take a while... (mmap = true)"""
LOADED = """load_tensors: offloaded 65/65 layers to GPU
load_tensors:        CUDA0 model buffer size = 18427.64 MiB
load_tensors:   CPU_Mapped model buffer size =   417.30 MiB
llama_context: constructing llama_context
llama_context: n_ctx         = 40960
llama_context:  CUDA_Host  output buffer size =     0.58 MiB"""
WARMING = """llama_kv_cache:      CUDA0 KV buffer size = 10240.00 MiB
llama_context:      CUDA0 compute buffer size =   306.00 MiB
llama_context:  CUDA_Host compute buffer size =    90.01 MiB
common_init_from_params: warming up the model with an empty run - please wait ... (--no-warmup to disable)"""
SERVING = """srv          init: initializing slots, n_slots = 1
main: model loaded
main: server is listening on http://127.0.0.1:8080 - starting the main loop
srv  update_slots: all slots are idle
slot launch_slot_: id  0 | task 0 | processing task
slot update_slots: id  0 | task 0 | new prompt, n_ctx_slot = 40960, n_keep = 0, n_prompt_tokens = 18000"""

CUDA_MALLOC = (
    "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 18427.64 MiB on device 0: cudaMalloc failed: "
    "out of memory"
)
WEIGHTS = f"""{CUDA_MALLOC}
alloc_tensor_range: failed to allocate CUDA0 buffer of size 19322748928
llama_model_load: error loading model: unable to allocate CUDA0 buffer"""
KV = """ggml_backend_cuda_buffer_type_alloc_buffer: allocating 10240.00 MiB on device 0: cudaMalloc failed: out of memory
alloc_tensor_range: failed to allocate CUDA0 buffer of size 10737418240
llama_init_from_model: failed to initialize the context: failed to allocate buffer for kv cache"""
COMPUTE = """ggml_backend_cuda_buffer_type_alloc_buffer: allocating 5304.00 MiB on device 0: cudaMalloc failed: out of memory
ggml_gallocr_reserve_n: failed to allocate CUDA0 buffer of size 5561647104
graph_reserve: failed to allocate compute buffers"""
K_SHIFT = """ggml_backend_cuda_buffer_type_alloc_buffer: allocating 9866.00 MiB on device 1: cudaMalloc failed: out of memory
ggml_gallocr_reserve_n: failed to allocate CUDA1 buffer of size 10345253120
llama_kv_cache_update_impl: failed to allocate compute buffers"""
VULKAN_WEIGHTS = """ggml_vulkan: Device memory allocation of size 4294967296 failed.
ggml_vulkan: vk::Device::allocateMemory: ErrorOutOfDeviceMemory
llama_model_load: error loading model: vk::Device::allocateMemory: ErrorOutOfDeviceMemory"""
METAL_WEIGHTS = (
    "ggml_backend_metal_buffer_type_alloc_buffer: error: failed to allocate buffer, size = 20480.00 MiB"
)
CANN_WEIGHTS = (
    "ggml_backend_cann_buffer_type_alloc_buffer: allocating 8192.00 MiB on device 0: aclrtMalloc failed: "
    "EL0004: Failed to allocate memory."
)
SYCL_WEIGHTS = (
    "ggml_backend_sycl_buffer_type_alloc_buffer: can't allocate 8589934592 Bytes of memory on device"
)
CUDA_POOL = """CUDA error: out of memory
  current device: 0, in function ggml_cuda_pool_vmm::alloc at /app/ggml/src/ggml-cuda/ggml-cuda.cu:412
  cuMemCreate(&handle, reserve_size, &prop, 0)
/app/ggml/src/ggml-cuda/ggml-cuda.cu:88: CUDA error"""
ROCM_POOL = """ROCm error: out of memory
  current device: 0, in function alloc at /app/ggml/src/ggml-cuda/ggml-cuda.cu:421
  hipMalloc((void **) &ptr, look_ahead_size)"""
OLD_CUDA = "CUDA error 2 at /tmp/llama.cpp/ggml-cuda.cu:7636: out of memory\ncurrent device: 0"
METAL_RUN = """ggml_metal_graph_compute: command buffer 0 failed with status 5
error: Insufficient Memory (00000008:kIOGPUCommandBufferCallbackErrorOutOfMemory)"""


def _stage_of(text: str) -> str:
    diagnosis = diagnose_text(text, "llama.cpp", kernel_log=lambda: None)
    assert diagnosis.failure == "cuda_oom", (diagnosis.failure, diagnosis.cause)
    return diagnosis.stage


@pytest.mark.parametrize(
    ("report", "alone"),
    [
        (WEIGHTS, "load_weights"),
        (CUDA_MALLOC, "load_weights"),  # the allocator's line alone: the first and largest buffer
        (KV, "kv_cache"),
        (COMPUTE, "kv_cache"),
        ("ggml_gallocr_reserve_n: failed to allocate CUDA0 buffer of size 5561647104", "kv_cache"),
        (VULKAN_WEIGHTS, "load_weights"),
        (VULKAN_WEIGHTS.splitlines()[0], "load_weights"),
        (METAL_WEIGHTS, "load_weights"),
        (CANN_WEIGHTS, "load_weights"),
        (SYCL_WEIGHTS, "load_weights"),
        (K_SHIFT, "inference"),  # a decode's: only a request shifts the cache
        (CUDA_POOL, "inference"),
        (ROCM_POOL, "inference"),
        (OLD_CUDA, "inference"),
        (METAL_RUN, "inference"),
    ],
)
def test_a_report_alone_is_placed_by_its_own_words(report: str, alone: str) -> None:
    assert _stage_of(report) == alone


@pytest.mark.parametrize("report", [WEIGHTS, CUDA_MALLOC, VULKAN_WEIGHTS, METAL_WEIGHTS, CANN_WEIGHTS, KV])
def test_a_buffer_while_loading(report: str) -> None:
    expected = "kv_cache" if report is KV else "load_weights"
    assert _stage_of(f"{BOOT}\n{report}") == expected


@pytest.mark.parametrize("report", [CUDA_MALLOC, VULKAN_WEIGHTS.splitlines()[0], KV, COMPUTE])
def test_a_buffer_after_the_weights_loaded_is_the_cache_or_compute(report: str) -> None:
    assert _stage_of(f"{BOOT}\n{LOADED}\n{report}") == "kv_cache"


@pytest.mark.parametrize("report", [CUDA_POOL, ROCM_POOL, OLD_CUDA, METAL_RUN])
def test_the_pool_in_warm_up_is_the_start_and_in_a_request_the_request(report: str) -> None:
    assert _stage_of(f"{BOOT}\n{LOADED}\n{WARMING}\n{report}") == "kv_cache"
    assert _stage_of(f"{BOOT}\n{LOADED}\n{WARMING}\n{SERVING}\n{report}") == "inference"


def test_the_k_shift_while_serving_is_the_request() -> None:
    assert _stage_of(f"{BOOT}\n{LOADED}\n{WARMING}\n{SERVING}\n{K_SHIFT}") == "inference"


def test_llama_cpp_python_reports_the_cache_under_its_traceback() -> None:
    text = (
        f"{BOOT}\n{LOADED}\n{KV}\nTraceback (most recent call last):\n"
        '  File "/app/run.py", line 3, in <module>\n'
        "    llm = Llama(model_path='/models/q.gguf', n_gpu_layers=-1, n_ctx=40960)\n"
        "ValueError: Failed to create llama_context"
    )
    diagnosis = diagnose_text(text, kernel_log=lambda: None)
    assert (diagnosis.stage, diagnosis.failure) == ("kv_cache", "cuda_oom")
    assert "cudaMalloc failed" in (diagnosis.first_error_text or "")


def test_the_drivers_own_refusals_are_the_first_error() -> None:
    """Mesa's AMD Vulkan driver and NVIDIA's kernel module say it before the engine does: the first line of
    the report is theirs (a Raspberry Pi with an RX 7600 XT; a DGX Spark loading a speculative drafter)."""
    radv = """radv/amdgpu: Failed to allocate a buffer:
radv/amdgpu:    size      : 4248715264 bytes
ggml_vulkan: Device memory allocation of size 4248715264 failed.
ggml_vulkan: vk::Device::allocateMemory: ErrorOutOfDeviceMemory
llama_model_load: error loading model: unable to allocate Vulkan0 buffer"""
    diagnosis = diagnose_text(radv, kernel_log=lambda: None)
    assert (diagnosis.failure, diagnosis.failure_stage, diagnosis.first_error_line) == (
        "cuda_oom",
        "load_weights",
        1,
    )
    nvrm = """(Worker_TP0 pid=9) INFO 08-03 18:03:00 [gpu_model_runner.py:5332] Loading drafter model...
kernel: NVRM: nvCheckOkFailedNoLog: Check failed: Out of memory [NV_ERR_NO_MEMORY]"""
    diagnosis = diagnose_text(nvrm, kernel_log=lambda: None)
    assert (diagnosis.failure, diagnosis.failure_stage, diagnosis.first_error_line) == (
        "cuda_oom",
        "load_weights",
        2,
    )
