"""Words the engines' and libraries' own sources print for a failure family (issue 21: a family takes any
engine's words), each checked on the line as the source prints it, with the lines around it a log has."""

from __future__ import annotations

from pathlib import Path

import pytest

from vramtui.core.logs.diagnose import diagnose_file, diagnose_lines

LOGS = Path(__file__).resolve().parents[2] / "data" / "logs"


def no_kernel_log() -> None:
    return None


@pytest.mark.parametrize(
    ("backend", "line", "failure", "cause"),
    [
        # PyTorch's host allocator (c10/core/impl/alloc_cpu.cpp), under any engine on torch
        (
            "vllm",
            "RuntimeError: [enforce fail at alloc_cpu.cpp:117] err == 0. DefaultCPUAllocator: can't allocate "
            "memory: you tried to allocate 1073741824 bytes. Error code 12 (Cannot allocate memory)",
            "host_oom",
            "host_alloc",
        ),
        (
            "transformers",
            "RuntimeError: [enforce fail at alloc_cpu.cpp:114] data. DefaultCPUAllocator: not enough memory: "
            "you tried to allocate 4294967296 bytes.",
            "host_oom",
            "host_alloc",
        ),
        # ggml-metal's and ggml-sycl's buffer allocators
        (
            "llama.cpp",
            "ggml_backend_metal_buffer_type_alloc_buffer: error: failed to allocate buffer, size = 20480.00 MiB",
            "cuda_oom",
            "device_alloc",
        ),
        (
            "llama.cpp",
            "ggml_backend_sycl_buffer_type_alloc_buffer: can't allocate 8589934592 Bytes of memory on device",
            "cuda_oom",
            "device_alloc",
        ),
        # ggml-metal since its device split (ggml-metal-device.m, ggml-metal.cpp), and OpenCL's own code
        (
            "llama.cpp",
            "ggml_metal_buffer_init: error: failed to allocate buffer, size = 20480.00 MiB",
            "cuda_oom",
            "device_alloc",
        ),
        (
            "llama.cpp",
            "ggml_backend_metal_buffer_type_alloc_buffer: failed to allocate Metal buffer of 21474836480 bytes "
            "(out of memory)",
            "cuda_oom",
            "cuda_oom",
        ),
        (
            "llama.cpp",
            "ggml_opencl: clCreateBuffer error -4 (CL_MEM_OBJECT_ALLOCATION_FAILURE) at ggml-opencl.cpp:2210",
            "cuda_oom",
            "device_alloc",
        ),
        # Ray's memory monitor (its OOM-prevention docs) and vLLM's engine core ended by SIGKILL
        (
            "vllm",
            "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory. Memory on "
            "the node (IP: 10.0.0.2) where the task was running was 30.53GB / 31.27GB (0.976263), which exceeds "
            "the memory usage threshold of 0.95.",
            "host_oom_killed",
            "memory_monitor",
        ),
        (
            "vllm",
            "(APIServer pid=1) RuntimeError: Engine core initialization failed. See root cause above. Failed core "
            "proc(s): {'EngineCore_DP0': -9}",
            "host_oom_killed",
            "worker_killed",
        ),
        # vLLM's --chat-template given as a path that is not there (entrypoints/chat_utils.py)
        (
            "vllm",
            "ValueError: The supplied chat template string (tool_use) appears path-like, but doesn't exist!",
            "file_missing",
            "not_found_local",
        ),
        # SGLang's scheduler: the KV token pool ran dry while serving (managers/schedule_batch.py)
        (
            "sglang",
            "Decode out of memory. Try to lower your batch size.",
            "kv_cache_too_small",
            "kv_pool_exhausted",
        ),
        (
            "sglang",
            "RuntimeError: Prefill out of memory. Try to lower your batch size.",
            "kv_cache_too_small",
            "kv_pool_exhausted",
        ),
        # ggml's own aligned host allocation (ggml.c) failing
        (
            "llama.cpp",
            "ggml_aligned_malloc: insufficient memory (attempted to allocate 24576.00 MB)",
            "host_oom",
            "host_alloc",
        ),
        # vLLM's default weight loader, and TGI asked to --quantize a checkpoint that is not
        (
            "vllm",
            "AssertionError: Attempted to load weight (torch.Size([4096, 512])) into parameter "
            "(torch.Size([4096, 1024]))",
            "shape_mismatch",
            "shape_mismatch",
        ),
        (
            "tgi",
            "RuntimeError: Cannot load `awq` weight, make sure the model is already quantized.",
            "unsupported_quant",
            "quant_not_in_checkpoint",
        ),
        # Windows' access violation, in a llama.cpp build's crash report
        ("llama.cpp", "Exception Code: 0xC0000005", "other", "crash"),
        # round 42 (training): torch's dispatcher with no kernel for a type, a view of the wrong size, and
        # vLLM with no attention backend for the KV cache type asked for
        (
            "sglang",
            "NotImplementedError: \"fill_cuda\" not implemented for 'Float4_e2m1fn_x2'",
            "dtype_unsupported",
            "dtype_op_missing",
        ),
        (
            "vllm",
            "(EngineCore pid=175) RuntimeError: shape '[512, 2, 32, 4, 512]' is invalid for input of size 37748736",
            "shape_mismatch",
            "shape_mismatch",
        ),
        (
            "vllm",
            "(EngineCore pid=125) ValueError: No valid attention backend found for cuda with "
            "AttentionSelectorConfig(head_size=256, dtype=torch.bfloat16, kv_cache_dtype=nvfp4, block_size=None)",
            "dtype_unsupported",
            "kv_dtype_no_backend",
        ),
    ],
)
def test_a_family_takes_the_sources_own_words(backend: str, line: str, failure: str, cause: str) -> None:
    lines = ["INFO starting the server", line]
    diagnosis = diagnose_lines(lines, backend, kernel_log=no_kernel_log)
    assert (diagnosis.failure, diagnosis.cause, diagnosis.first_error_line) == (failure, cause, 2)


def test_sglangs_exhausted_pool_fails_while_serving_and_names_its_knobs() -> None:
    lines = [
        "[2026-01-05 06:12:41] Prefill batch. #new-seq: 1, #new-token: 1024, #running-req: 167, #queue-req: 88",
        "[2026-01-05 06:12:41] Decode out of memory. Try to lower your batch size.",
        "Try to allocate 168 tokens.",
        "Available tokens: 3200 (available_size=3200 + evictable_size=0)",
    ]
    diagnosis = diagnose_lines(lines, "sglang", kernel_log=no_kernel_log)
    assert (diagnosis.failure_stage, diagnosis.failure) == ("inference", "kv_cache_too_small")
    assert "--max-running-requests" in diagnosis.advice[0] and "--mem-fraction-static" in diagnosis.advice[1]


def test_an_ipython_traceback_reads_its_frames_and_skips_its_numbered_code() -> None:
    # Colab's copy of a transformers traceback: the frames are "path in function(...)" lines and the code
    # is listed with line numbers; the ValueError's own message line was cut, the KeyError stands
    lines = [
        "KeyError                                  Traceback (most recent call last)",
        "[/usr/local/lib/python3.11/dist-packages/transformers/models/auto/configuration_auto.py]"
        "(https://localhost:8080/#) in from_pretrained(cls, pretrained_model_name_or_path, **kwargs)",
        "   1264             try:",
        '-> 1265                 config_class = CONFIG_MAPPING[config_dict["model_type"]]',
        "KeyError: 'hunyuan_v1_dense'",
        "",
        "During handling of the above exception, another exception occurred:",
        "",
        "ValueError                                Traceback (most recent call last)",
        "/usr/local/lib/python3.11/dist-packages/transformers/models/auto/configuration_auto.py in "
        "from_pretrained(cls, pretrained_model_name_or_path, **kwargs)",
        "-> 1267                 raise ValueError(",
        '   1268                     f"The checkpoint you are trying to load has model type `{x}` "',
        '   1269                     "but Transformers does not recognize this architecture. This could be "',
    ]
    diagnosis = diagnose_lines(lines, "transformers", kernel_log=no_kernel_log)
    assert (diagnosis.failure, diagnosis.first_error_line) == ("unknown_arch", 5)


@pytest.mark.parametrize(
    ("backend", "line", "words"),
    [
        (
            "ollama",
            'time=xxx level=INFO source=llm.go:111 msg="not enough vram available, falling back to CPU only"',
            "falls back to the CPU",
        ),
        (
            "llama.cpp",
            "slot update_slots: id  0 | task 0 | input truncated, n_ctx = 4096, n_keep = 0, n_left = 4096, "
            "n_prompt_tokens = 2048",
            "a prompt was cut to fit",
        ),
        ("llama.cpp", "ggml_vulkan: No devices found.", "found no GPU"),
        (
            "ollama",
            'time=x level=WARN source=server.go:216 msg="quantized kv cache requested but flash attention '
            'disabled" type=q8_0',
            "the cache stays f16",
        ),
        (
            "ollama",
            'time=x level=WARN source=server.go:181 msg="flash attention enabled but not supported by gpu"',
            "this GPU does not support it",
        ),
        (
            "ollama",
            'time=x level=WARN source=gpu.go:213 msg="CPU does not have minimum vector extensions, GPU '
            'inference disabled" required=avx detected="no vector extensions"',
            "the model runs on the CPU",
        ),
        (
            "ollama",
            "qwen3:30b      e50831eb2d91    21 GB    48%/52% CPU/GPU    4 minutes from now",
            "ollama ps",
        ),
        (
            "ollama",
            'time=x level=WARN source=prompt.go:96 msg="truncating input messages which exceed context length" '
            "truncated=12",
            "earlier chat messages were dropped",
        ),
        (
            "ollama",
            'time=x level=DEBUG source=cache.go:250 msg="context limit hit - shifting" id=0 limit=2048 input=2048',
            "context shift",
        ),
        (
            "ollama",
            'time=x level=WARN source=server.go:100 msg="flash attention enabled but not supported by model"',
            "this model does not support it",
        ),
        (
            "vllm",
            "WARNING 01-01 00:00:00 [__init__.py:221] No platform detected, vLLM is running on UnspecifiedPlatform",
            "no GPU platform",
        ),
        (
            "vllm",
            "WARNING 01-01 00:00:00 [config.py:1000] The model's config.json does not contain any of the "
            "following keys to determine the original maximum length of the model: ['max_position_embeddings']. "
            "Assuming the model's maximum length is 2048.",
            "--max-model-len",
        ),
        ("sglang", "[2025-01-01 00:00:00] Disable cuda graph because of low memory", "CUDA graphs off"),
        (
            "tgi",
            "2025-01-01T00:00:00.000000Z  WARN text_generation_launcher: Flash attention is not installed",
            "flash kernels",
        ),
        (
            "transformers",
            "UserWarning: You are calling .generate() with the `input_ids` being on a device type different "
            "than your model's device. `input_ids` is on cpu, whereas the model is on cuda.",
            ".to(model.device)",
        ),
        (
            "transformers",
            "Token indices sequence length is longer than the specified maximum sequence length for this model "
            "(5000 > 4096). Running this sequence through the model will result in indexing errors",
            "longer than the model's maximum sequence length",
        ),
    ],
)
def test_quiet_words_are_warned_not_failed(backend: str, line: str, words: str) -> None:
    diagnosis = diagnose_lines(["INFO starting", line], backend, kernel_log=no_kernel_log)
    assert not diagnosis.failed and any(words in warning for warning in diagnosis.warnings)


def test_a_vllm_log_that_stops_after_the_worker_joined_is_incomplete_at_load() -> None:
    lines = [
        "(EngineCore pid=24644) INFO 04-14 13:41:01 [parallel_state.py:1400] world_size=1 rank=0 local_rank=0 "
        "distributed_init_method=tcp://192.168.68.154:46985 backend=nccl",
    ]
    diagnosis = diagnose_lines(lines, "vllm", kernel_log=no_kernel_log)
    assert diagnosis.incomplete and diagnosis.stage == "load_weights"


def test_ollama_weights_in_host_ram_are_news_by_their_share() -> None:
    """Ollama's own engine prints a "model weights" device=CPU line on every load (the token embeddings stay
    on the CPU, ml/device.go): only a real share of the weights there is news."""
    gpu = (
        'time=x level=INFO source=types.go:130 msg="inference compute" id=GPU-1 library=cuda variant=v12 '
        'compute=8.6 driver=12.4 name="NVIDIA GeForce RTX 3060" total="12.0 GiB" available="11.1 GiB"'
    )

    def weights(device: str, size: str) -> str:
        return f'time=x level=INFO source=device.go:245 msg="model weights" device={device} size="{size}"'

    def said(*lines: str) -> list[str]:
        return diagnose_lines([gpu, *lines], "ollama", kernel_log=no_kernel_log).warnings

    assert any("nothing runs on a GPU" in warning for warning in said(weights("CPU", "8.9 GiB")))
    split = said(weights("CUDA0", "5.0 GiB"), weights("CPU", "3.9 GiB"))
    assert any("3.90 GiB of the model's 8.90 GiB (44%) sit in host memory" in warning for warning in split)
    assert said(weights("CUDA0", "8.5 GiB"), weights("CPU", "0.4 GiB")) == []  # the embeddings alone
    # 0.6 to 0.11 named the buffer
    old = 'time=x level=INFO source=ggml.go:289 msg="model weights" buffer={} size="{}"'
    assert any(
        "sit in host memory" in w for w in said(old.format("CUDA0", "5.0 GiB"), old.format("CPU", "3.9 GiB"))
    )


def test_an_engine_core_that_exited_with_an_error_code_is_not_called_killed() -> None:
    # only -9 (SIGKILL) is the OOM killer's; exit code 1 is the engine's own error, told above it
    line = "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {'EngineCore_DP0': 1}"
    diagnosis = diagnose_lines([line], "vllm", kernel_log=no_kernel_log)
    assert diagnosis.failed and diagnosis.failure != "host_oom_killed", diagnosis.failure


def test_ollamas_runner_that_died_loading_failed_at_the_load_not_a_request() -> None:
    # llm/server.go's wait for its runner wraps what killed it: the load failed, no request was served
    line = "Error: llama runner process has terminated: cudaMalloc failed: out of memory"
    diagnosis = diagnose_lines([line], "ollama", kernel_log=no_kernel_log)
    assert (diagnosis.stage, diagnosis.failure) == ("load_weights", "cuda_oom")
    # the same error while serving, with no such wrapper, stays the request's
    alone = diagnose_lines(["CUDA error: out of memory"], "ollama", kernel_log=no_kernel_log)
    assert alone.stage == "inference"


# Lines of round 29's training part, as their sources printed them: PyTorch's MPS buffer limit in
# from_pretrained's warm-up (load, device memory; not TGI's Warmup), vLLM's KV error whose terminal wrapped
# it (the ValueError's first line states it), and vLLM's weight-only FP4 on an older card (quiet).
ROUND_29 = {
    "mps-buffer-limit": (
        [
            'File ".../transformers/modeling_utils.py", line 4832, in caching_allocator_warmup',
            "    _ = torch.empty(int(byte_count // 2), dtype=torch.float16, device=device, requires_grad=False)",
            "RuntimeError: Invalid buffer size: 15.44 GB",
        ],
        ("transformers", "cuda_oom", "load_weights", 3, None),
    ),
    "vllm-kv-error-wrapped": (
        [
            "Profiling CUDA graph memory: PIECEWISE=6 (largest=32), FULL=4 (largest=16)",
            "Available KV cache memory: -1.42 GiB",
            "ValueError: To serve at least one request with the model's max seq len",
            "(1000000), 3.09 GiB KV cache is needed, which is larger than the available",
        ],
        ("vllm", "kv_cache_too_small", "kv_cache", 3, None),
    ),
    "vllm-fp4-weight-only": (
        [
            "Using 'MARLIN' NvFp4 MoE backend out of potential backends: [...]",
            "WARNING: Your GPU does not have native support for FP4 computation but",
            "Application startup complete.",
        ],
        ("vllm", None, None, None, "Marlin"),
    ),
}


@pytest.mark.parametrize("name", list(ROUND_29))
def test_round_29s_training_words(name: str) -> None:
    lines, (backend, failure, stage, first, warned) = ROUND_29[name]
    found = diagnose_lines(lines, None, kernel_log=no_kernel_log)
    assert found.backend == backend
    assert (found.failure if found.failed else None, found.failure_stage if found.failed else None) == (
        failure,
        stage,
    )
    assert found.first_error_line == first
    assert warned is None or any(warned in warning for warning in found.warnings)


def test_round_31s_training_words() -> None:
    """Round 31's training part: a cache in host RAM beside a GPU's buffers is news (llama.cpp with
    --no-kv-offload), as is pinned host memory refused (ROCm's hipErrorOutOfMemory); a wrapper's line that
    opens a traceback takes the stage its frames name (vLLM's memory profile: the KV cache's stage)."""
    kv_on_host = [
        "llama_context: n_ctx         = 202752",
        "llama_kv_cache:        CPU KV buffer size =  5561.79 MiB",
        "sched_reserve:    Vulkan0 compute buffer size =   892.67 MiB",
        "srv    load_model: initializing slots, n_slots = 1",
    ]
    found = diagnose_lines(kv_on_host, "llama.cpp", kernel_log=no_kernel_log)
    assert not found.failed and any("KV cache sits in host RAM" in w for w in found.warnings)
    cpu_only = [
        "llama_kv_cache:        CPU KV buffer size =  512.00 MiB",
        "sched_reserve:        CPU compute buffer size = 300.00 MiB",
    ]
    assert not any(
        "KV cache sits in host RAM" in w
        for w in diagnose_lines(cpu_only, "llama.cpp", kernel_log=no_kernel_log).warnings
    )
    pinned = ["ggml_cuda_host_malloc: failed to allocate 10.01 MiB of pinned memory: hipErrorOutOfMemory"]
    found = diagnose_lines(pinned, "llama.cpp", kernel_log=no_kernel_log)
    assert not found.failed and any("pinned host memory" in w for w in found.warnings)
    prefix = "(EngineCore_DP0 pid=1) ERROR 12-23 12:56:15 [core.py:868] "
    frames = [
        '  File "/v/vllm/v1/engine/core.py", line 242, in _initialize_kv_caches',
        '  File "/v/vllm/v1/worker/gpu_model_runner.py", line 4531, in profile_run',
        *[f'  File "/t/torch/nn/modules/module.py", line {n}, in _call_impl' for n in range(40)],
    ]
    said = ["EngineCore failed to start.", "Traceback (most recent call last):", *frames]
    said.append("RuntimeError: addmm: NPU function error: call aclnnAddmm failed")
    wrapped = [prefix + line for line in said]
    found = diagnose_lines(wrapped, None, kernel_log=no_kernel_log)
    assert (found.failure_stage, found.stage_inferred, found.first_error_line) == ("kv_cache", False, 45)


def test_round_32s_training_words() -> None:
    """Round 32's training part: a GGUF whose bytes end early is a file to fetch again (the files family);
    Ollama's failed POST of the load to its runner places a kernel fault at the load, not a request; a
    traceback through torch's Module.to is the weights moving to the device (load), not a request."""
    truncated = [
        "llama_model_load: error loading model: tensor 'blk.22.ffn_gate.weight' data is not within the file "
        "bounds, model is corrupted or incomplete"
    ]
    found = diagnose_lines(truncated, "llama.cpp", kernel_log=no_kernel_log)
    assert (found.failure, found.failure_stage) == ("file_missing", "load_weights")
    fault = [
        'time=2026-03-30T13:42:50.544-04:00 level=DEBUG source=ggml.go:852 msg="compute graph" nodes=1258',
        "ROCm error: invalid device function",
        'time=2026-03-30T13:42:51.742-04:00 level=ERROR source=server.go:1207 msg="do load request" error="Post '
        '\\"http://127.0.0.1:57002/load\\": read tcp: An existing connection was forcibly closed"',
    ]
    found = diagnose_lines(fault, "ollama", kernel_log=no_kernel_log)
    assert (found.failure_stage, found.first_error_line) == ("load_weights", 2)
    moving = [
        "Traceback (most recent call last):",
        '  File "/v/sentence_transformers/SentenceTransformer.py", line 367, in __init__',
        "    self.to(device)",
        '  File "/v/torch/nn/modules/module.py", line 1340, in to',
        '  File "/v/torch/nn/modules/module.py", line 900, in _apply',
        "torch.OutOfMemoryError: HIP out of memory. Tried to allocate 978.00 MiB. GPU 0 has a total capacity "
        "of 15.98 GiB of which 630.00 MiB is free.",
    ]
    found = diagnose_lines(moving, "transformers", kernel_log=no_kernel_log)
    assert (found.failure, found.failure_stage) == ("cuda_oom", "load_weights")
    # the same error with no such frames stays where the engine's default puts it
    alone = diagnose_lines(moving[-1:], "transformers", kernel_log=no_kernel_log)
    assert alone.failure_stage == "inference"


def test_ollama_giving_up_on_its_runner_s_load_is_the_failure_with_its_own_knob() -> None:
    """Round 37 (training part): "Load failed ... error=\"timed out waiting for llama runner to start -
    progress 0.82 - \"" is logged at INFO; the run read as no failure. It is the load's failure, and the
    advice names Ollama's own knob (OLLAMA_LOAD_TIMEOUT)."""
    from vramtui.core.logs.diagnose import diagnose_text

    log = (
        'time=2026-01-04T10:00:46.198-06:00 level=INFO source=server.go:1372 msg="waiting for server to '
        'become available" status="llm server loading model"\n'
        'time=2026-01-04T10:23:12.805-06:00 level=INFO source=sched.go:470 msg="Load failed" '
        'model=A:\\Ollama_Data\\blobs\\sha256-6a07 error="timed out waiting for llama runner to start - '
        'progress 0.82 - "\n'
        '[GIN] 2026/01/04 - 10:27:13 | 500 |        27m45s |       127.0.0.1 | POST     "/api/chat"\n'
    )
    diagnosis = diagnose_text(log, backend="ollama", kernel_log=lambda: None)
    assert diagnosis.failed and diagnosis.failure_stage == "load_weights" and diagnosis.first_error_line == 2
    assert any("OLLAMA_LOAD_TIMEOUT" in line for line in diagnosis.advice), diagnosis.advice


def test_a_stop_while_a_download_waited_on_the_network_is_the_download_hanging() -> None:
    """Round 37 (training part): vLLM killed (SIGTERM: KeyboardInterrupt "terminated") while huggingface_hub
    still waited in httpcore's read: the download hung, a network failure, not a Python error at the load."""
    from vramtui.core.logs.diagnose import diagnose_text

    log = "\n".join(
        [
            "(APIServer pid=8410) Traceback (most recent call last):",
            '(APIServer pid=8410)   File "/venv/lib/python3.14/site-packages/huggingface_hub/file_download.py",'
            " line 1020, in hf_hub_download",
            '(APIServer pid=8410)   File "/venv/lib/python3.14/site-packages/httpcore/_backends/sync.py",'
            " line 128, in read",
            "(APIServer pid=8410)     return self._sock.recv(max_bytes)",
            '(APIServer pid=8410)   File "/usr/lib/python3.14/ssl.py", line 1297, in recv',
            "(APIServer pid=8410)     return self.read(buflen)",
            '(APIServer pid=8410)   File "/venv/lib/python3.14/site-packages/vllm/entrypoints/openai/api_server.py",'
            " line 579, in signal_handler",
            '(APIServer pid=8410)     raise KeyboardInterrupt("terminated")',
            "(APIServer pid=8410) KeyboardInterrupt: terminated",
        ]
    )
    diagnosis = diagnose_text(log, backend="vllm", kernel_log=lambda: None)
    assert diagnosis.failed and diagnosis.failure == "network" and diagnosis.first_error_line == 9


def test_a_prompt_longer_than_its_slot_is_advised_with_the_slots_not_context_shift() -> None:
    """QA 6: `-c 16384 -np 2` refused a 15752-token prompt at "8192 tokens"; the advice said raise
    --ctx-size and --context-shift (which acts on generation, not on a prompt longer than its slot)."""
    from vramtui.core.logs.diagnose import diagnose_text

    refused = (
        "0.19.178.941 E srv    send_error: task id = 67, error: request (15752 tokens) exceeds the available "
        "context size (8192 tokens), try increasing it\n"
    )
    printed = "llama_context: n_ctx         = 16384\nllama_context: n_ctx_seq     = 8192\n"
    with_figures = diagnose_text(printed + refused, backend="llama.cpp", kernel_log=lambda: None)
    assert with_figures.failure == "context_too_long" and with_figures.cause == "prompt_over_slot"
    assert any(
        line.startswith("Each of the 2 slots gets 8,192 of the context's 16,384")
        for line in with_figures.advice
    )
    assert not any("--context-shift" in line for line in with_figures.advice)
    bare = diagnose_text(refused, backend="llama.cpp", kernel_log=lambda: None)
    assert any("divided among the slots (--parallel" in line for line in bare.advice), bare.advice


def test_a_vision_warm_up_out_of_memory_in_a_server_that_came_up_is_quiet() -> None:
    """Round 38 (training part): llama-server's vision encoder warm-up (one 1472 x 1472 image) ran out of
    device memory, and the server came up and served text: read as the run's failure (cuda_oom)."""
    from vramtui.core.logs.diagnose import diagnose_text

    log = "\n".join(
        [
            "common_init_from_params: warming up the model with an empty run - please wait ... (--no-warmup to disable)",
            "warmup: warmup with image size = 1472 x 1472",
            "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 4657.81 MiB on device 0: cudaMalloc failed: out of memory",
            "ggml_gallocr_reserve_n_impl: failed to allocate CUDA0 buffer of size 4884066560",
            "srv    load_model: loaded multimodal model, '/models/mmproj-F16.gguf'",
            "main: model loaded",
            "main: server is listening on http://127.0.0.1:8000",
        ]
    )
    diagnosis = diagnose_text(log, backend="llama.cpp", kernel_log=lambda: None)
    assert not diagnosis.failed, diagnosis.summary
    assert any("warm-up the server can run without ran out of device memory" in w for w in diagnosis.warnings)
    # the text model's own warm-up running out is still the run's: no request would fit
    text_only = diagnose_text(
        "\n".join([*log.split("\n")[:1], *log.split("\n")[2:4], *log.split("\n")[5:]]),
        backend="llama.cpp",
        kernel_log=lambda: None,
    )
    assert text_only.failed and text_only.failure == "cuda_oom"


def test_vllm_finding_no_kernel_for_the_checkpoint_s_quantization_is_unsupported_quant() -> None:
    """Round 38 (training part): an NVFP4 checkpoint on a GPU none of vLLM's ScaledMM kernels runs."""
    from vramtui.core.logs.diagnose import diagnose_text

    line = (
        "(EngineCore pid=277) ERROR 08-14 08:00:55 [core.py:1330] ValueError: Failed to find a kernel that can "
        "implement the ScaledMM linear layer. Reasons: "
    )
    diagnosis = diagnose_text(line, backend="vllm", kernel_log=lambda: None)
    assert diagnosis.failure == "unsupported_quant" and diagnosis.failure_stage == "load_weights"


def test_a_model_sent_to_a_gpu_a_cpu_only_torch_cannot_use_is_said_so() -> None:
    """QA 21 F2: device_map = "cuda:3" on a machine with no GPU (vramtui's real runner, torch 2.13+cpu) read
    "an error at load weights" with generic advice, and a quiet "the model runs on the CPU" beside it."""
    diagnosis = diagnose_file(LOGS / "transformers-device-map-cuda-cpu-torch.log", kernel_log=lambda: None)
    assert (diagnosis.failure, diagnosis.cause, diagnosis.failure_stage) == (
        "other",
        "no_gpu_torch",
        "load_weights",
    )
    assert diagnosis.first_error_text.endswith("AssertionError: Torch not compiled with CUDA enabled")
    assert "torch.cuda.is_available()" in diagnosis.advice[0]
    assert not any("runs on the CPU" in warning for warning in diagnosis.warnings), diagnosis.warnings


def test_a_memory_failure_with_no_stage_line_gets_both_sides_advice() -> None:
    """QA 22: an excerpt of vLLM's engine core dying of CUDA OOM (vllm#31273, loading a 72B FP8 model)
    has no line that says which step ran: the stage is a guess (inference), and the advice was a request's
    only. The other side's first line is said too, as a possibility."""
    lines = [
        "(EngineCore_DP0 pid=556790) ERROR 12-24 08:50:35 [core.py:866] torch.OutOfMemoryError: CUDA out of "
        "memory. Tried to allocate 80.00 MiB. GPU 0 has a total capacity of 139.72 GiB of which 60.69 MiB is "
        "free.",
        "(EngineCore_DP0 pid=556790) Process EngineCore_DP0:",
    ]
    diagnosis = diagnose_lines(lines, kernel_log=lambda: None)
    assert diagnosis.failure == "cuda_oom" and diagnosis.stage_inferred
    other = [line for line in diagnosis.advice if line.startswith("If it failed while it was starting")]
    assert len(other) == 1 and "(the log does not say)" in other[0], diagnosis.advice
    # a log whose stage lines say where: no such line
    staged = diagnose_lines(["Loading weights took 10.1 seconds", "Model loading took 15.27 GiB", *lines])
    assert not any(line.startswith("If it failed") for line in staged.advice), staged.advice


def test_requests_refused_without_a_reason_name_the_engine_that_sends_it() -> None:
    """QA 30 S12: a hand-started llama-cpp-python server answering HTTP 400 to a prompt past its context was
    told "vLLM sends the reason to the client"."""
    from pathlib import Path

    from vramtui.core.logs.diagnose import diagnose_file

    log = Path(__file__).resolve().parents[2] / "data" / "logs" / "llama-cpp-python-http-400.log"
    diagnosis = diagnose_file(log)
    said = " ".join(diagnosis.advice)
    assert diagnosis.backend == "llama-cpp-python"
    assert "llama-cpp-python sends the reason to the client" in said and "vLLM" not in said, said
