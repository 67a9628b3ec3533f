"""Quiet failures in the engines' own words (issue 21): each line as Ollama's or llama.cpp's source prints it,
inside a healthy start-up. A run that goes on after one of these lines is slower or shorter than asked:
warned, never failed. The lines each wording must not warn about (a skipped iGPU beside a card in use, a
setting chosen on purpose) are checked beside them."""

from __future__ import annotations

import pytest

from vramtui.core.logs.diagnose import diagnose_lines

OLLAMA_START = [
    'time=2025-03-01T10:00:00.000Z level=INFO source=routes.go:1238 msg="Listening on 127.0.0.1:11434 (version 0.6.0)"',
    'time=2025-03-01T10:00:00.001Z level=INFO source=gpu.go:217 msg="looking for compatible GPUs"',
]
OLLAMA_SERVED = [
    'time=2025-03-01T10:00:05.000Z level=INFO source=server.go:619 msg="llama runner started in 2.51 seconds"',
    '[GIN] 2025/03/01 - 10:00:09 | 200 |  4.2s |       127.0.0.1 | POST     "/api/chat"',
]
OLLAMA_GPU_USED = (
    'time=x level=INFO source=types.go:130 msg="inference compute" id=GPU-8a2f library=cuda variant=v12 '
    'compute=8.9 driver=12.4 name="NVIDIA GeForce RTX 4090" total="23.6 GiB" available="22.9 GiB"'
)
LLAMA_START = [
    "ggml_cuda_init: found 1 CUDA devices:",
    "  Device 0: NVIDIA GeForce RTX 3090, compute capability 8.6, VMM: yes",
    "main: loading model",
    "load_tensors: CUDA0 model buffer size =  4403.49 MiB",
    "llama_context: n_ctx         = 8192",
]
LLAMA_SERVED = [
    "llama_context:      CUDA0 compute buffer size =   560.00 MiB",
    "main: server is listening on http://127.0.0.1:8080 - starting the main loop",
    "srv  update_slots: all slots are idle",
]


def _ollama(line: str, *before: str) -> list[str]:
    return [*OLLAMA_START, *before, f"time=2025-03-01T10:00:01.000Z {line}", *OLLAMA_SERVED]


@pytest.mark.parametrize(
    ("line", "words"),
    [
        (
            'level=INFO source=amd_windows.go:127 msg="unsupported Radeon iGPU detected skipping" id=0',
            "integrated",
        ),
        (
            'level=INFO source=amd_linux.go:300 msg="amdgpu appears to be an iGPU, skipping" gpu=1',
            "integrated",
        ),
        (
            'level=WARN source=amd_linux.go:378 msg="unable to verify rocm library, will use cpu" error="x"',
            "ROCm",
        ),
        (
            'level=WARN source=amd_windows.go:97 msg="failed to lookup supported GFX types, falling back to CPU '
            'mode" error="exit status 1"',
            "GFX types",
        ),
        (
            'level=WARN source=amd_linux.go:378 msg="amdgpu detected, but no compatible rocm library found.  '
            'Either install rocm v6, or follow manual install instructions"',
            "ROCm",
        ),
        (
            'level=WARN source=amd_windows.go:97 msg="amdgpu is not supported" gpu=0 gpu_type=gfx1031 '
            'library=C:\\rocm supported_types="[gfx1030 gfx1100]"',
            "HSA_OVERRIDE_GFX_VERSION",
        ),
        (
            'level=WARN source=amd_linux.go:116 msg="amdgpu [0] gfx1103 is not supported by /tmp/ollama1/rocm '
            '[gfx1030 gfx1100]"',
            "HSA_OVERRIDE_GFX_VERSION",
        ),
        (
            'level=WARN source=amd.go:470 msg="dropping ROCm device — no rocblas support for gfx target" '
            "gfx=gfx1036",
            "HSA_OVERRIDE_GFX_VERSION",
        ),
        ('level=WARN source=gpu.go:728 msg="unable to locate gpu dependency libraries"', "runtime libraries"),
        (
            'level=INFO source=gpu.go:312 msg="[0] CUDA GPU is too old. Compute Capability detected: 3.0"',
            "compute capability is older",
        ),
        (
            'level=WARN source=config.go:263 msg="invalid environment variable, using default" '
            "key=OLLAMA_CONTEXT_LENGTH value=32k default=4096",
            "cannot parse",
        ),
        ('level=INFO source=amd_linux.go:320 msg="AMD ROCm reports no devices found"', "no usable AMD"),
        ('level=INFO source=amd_linux.go:403 msg="no compatible amdgpu devices detected"', "no usable AMD"),
        (
            'level=INFO source=gpu.go:620 msg="unable to load cuda driver library" library=/usr/lib/libcuda.so '
            'error="cuda driver library init failure: 999"',
            "CUDA library",
        ),
        (
            'level=WARN source=gpu.go:622 msg="unknown error initializing cuda driver library '
            '/usr/lib/wsl/lib/libcuda.so.1: cuda driver library init failure: 500"',
            "CUDA library",
        ),
        (
            'level=WARN source=gpu.go:631 msg="version mismatch between driver and cuda driver library - reboot '
            'or upgrade may be required"',
            "CUDA library",
        ),
        (
            'level=WARN source=amd.go:485 msg="AMD driver is too old. Update your AMD driver to enable GPU inference."',
            "update the driver",
        ),
        (
            'level=WARN source=cuda_compat.go:65 msg="NVIDIA driver too old" driver=12.2 required=12.4',
            "update the driver",
        ),
        (
            'level=INFO source=llama_server.go:299 msg="skipping CUDA device — compute capability not in compiled '
            'architectures" id=GPU-1 compute=5.0',
            "compute capability",
        ),
        (
            'level=INFO source=runner.go:522 msg="failure during llama-server GPU discovery" error="runner crashed"',
            "discovery failed",
        ),
        (
            'level=WARN source=runner.go:584 msg="llama-server GPU discovery watchdog timed out"',
            "discovery failed",
        ),
        (
            'level=DEBUG source=memory.go:166 msg="gpu has too little memory to allocate any layers" id=0 '
            'library=cuda total="4.0 GiB" available="322.0 MiB"',
            "single layer",
        ),
        (
            'level=WARN source=llama_server.go:1091 msg="llama-server startup failed with projector GPU offload; '
            'retrying with projector CPU offload" model=/m',
            "vision projector",
        ),
        (
            'level=WARN source=sched.go:652 msg="llama-server load failed; reducing automatic context and '
            'retrying once" model=/m',
            "smaller one",
        ),
        (
            'level=WARN source=server.go:227 msg="OLLAMA_FLASH_ATTENTION must be enabled to use a quantized '
            'OLLAMA_KV_CACHE_TYPE"',
            "OLLAMA_KV_CACHE_TYPE",
        ),
        (
            'level=WARN source=server.go:230 msg="unsupported OLLAMA_KV_CACHE_TYPE" type=q3',
            "OLLAMA_KV_CACHE_TYPE",
        ),
        (
            'level=INFO source=server.go:821 msg="model layout did not fit, applying backoff" backoff=0.10',
            "backs off",
        ),
        (
            'level=WARN source=server.go:416 msg="unable to start runner with compatible gpu" error="fork/exec '
            '/usr/lib/ollama/runner: no such file" compatible=[cuda_v12]',
            "could not start its runner",
        ),
        (
            'level=DEBUG source=server.go:1545 msg="prediction aborted, token repeat limit reached"',
            "cut short",
        ),
        (
            'level=WARN source=runner.go:1135 msg="model does not support caching, disabling parallel processing"',
            "OLLAMA_NUM_PARALLEL",
        ),
        # today's chat handler and MLX runner (server/routes.go, x/mlxrunner/runner.go)
        (
            'level=DEBUG source=routes.go:3087 msg="truncating native chat messages which exceed context length" truncated=3',
            "messages were dropped",
        ),
        (
            'level=WARN source=runner.go:155 msg="MLX model exceeds the recommended working set; performance may be degraded" active="30.1 GiB"',
            "working set",
        ),
        # Ollama's sources of v0.1.32 (gpu/gpu.go, gpu/amd_linux.go, llm/server.go), v0.3 and v0.5
        (
            'time=2024-04-20T10:00:00Z level=WARN source=gpu.go:164 msg="CPU does not have AVX or AVX2, disabling GPU support."',
            "AVX",
        ),
        (
            'level=WARN source=gpu.go:201 msg="CPU does not have minimum vector extensions, GPU inference disabled" required=avx detected="no vector extensions"',
            "AVX",
        ),
        (
            'level=INFO source=common.go:131 msg="GPU runner incompatible with host system, CPU does not have AVX" runner=cuda_v12_avx',
            "AVX",
        ),
        (
            'level=INFO source=amd_linux.go:92 msg="all detected amdgpus are skipped, falling back to CPU"',
            "every AMD GPU",
        ),
        (
            'level=WARN source=server.go:51 msg="requested context length is greater than model max context length" requested=32768 model=8192',
            "trained length",
        ),
    ],
)
def test_ollamas_own_quiet_words_are_warned(line: str, words: str) -> None:
    diagnosis = diagnose_lines(_ollama(line), "ollama")
    assert not diagnosis.failed and any(words in warning for warning in diagnosis.warnings), (
        diagnosis.warnings
    )


@pytest.mark.parametrize(
    "line",
    [
        'level=INFO source=amd_linux.go:300 msg="amdgpu appears to be an iGPU, skipping" gpu=1',
        'level=INFO source=runner.go:405 msg="dropping integrated GPU; to enable, set OLLAMA_IGPU_ENABLE=1"',
        'level=INFO source=llama_server.go:299 msg="skipping CUDA device — compute capability not in compiled '
        'architectures" id=GPU-2 compute=5.0',
        'level=WARN source=server.go:416 msg="unable to start runner with compatible gpu" error="x" compatible=[a]',
    ],
)
def test_a_device_skipped_beside_a_gpu_in_use_is_not_news(line: str) -> None:
    # the card the model runs on was found: leaving an iGPU or an old second card out costs nothing
    diagnosis = diagnose_lines(_ollama(line, OLLAMA_GPU_USED), "ollama")
    assert not diagnosis.failed and not diagnosis.warnings, diagnosis.warnings
    alone = diagnose_lines(_ollama(line), "ollama")  # and without one, the same line is the CPU fallback
    assert not alone.failed and alone.warnings


@pytest.mark.parametrize(
    ("line", "words"),
    [
        (
            "llama_context: no FlashAttention vector kernel compiled for K/V types q8_0-q4_0, converting K and V "
            "to f16 instead (slow). Recompile with GGML_CUDA_FA_ALL_QUANTS=ON",
            "GGML_CUDA_FA_ALL_QUANTS",
        ),
        ("resolve_fused_ops: Flash Attention not supported, set to disabled", "flash attention cannot run"),
        (
            "resolve_fused_ops: layer 0 is assigned to device CPU but Flash Attention is assigned to device CUDA0 "
            "(usually due to missing support)",
            "flash attention cannot run",
        ),
        (
            "srv    load_model: the slot context (65536) exceeds the training context of the model (32768) - capping",
            "caps it there",
        ),
        (
            "llama_adapter_lora_init_impl: lora for 'blk.0.attn_q.weight' cannot use buft 'CUDA0', fallback to CPU",
            "LoRA",
        ),
        # server-context.cpp releases a slot that ran out of context with its truncated flag set
        (
            "slot      release: id  0 | task 0 | stop processing: n_tokens = 4095, truncated = 1",
            "truncated = 1",
        ),
        (
            "slot      release: id  0 | task 7 | stop processing: n_past = 2047, truncated = 1",
            "truncated = 1",
        ),
    ],
)
def test_llama_cpps_own_quiet_words_are_warned(line: str, words: str) -> None:
    diagnosis = diagnose_lines([*LLAMA_START, line, *LLAMA_SERVED], "llama.cpp")
    assert not diagnosis.failed and any(words in warning for warning in diagnosis.warnings), (
        diagnosis.warnings
    )


def test_a_gpu_library_that_did_not_load_is_news_only_when_no_layer_went_to_a_gpu() -> None:
    failed = "load_backend: failed to load /app/libggml-cuda.so: libcuda.so.1: cannot open shared object file"
    alone = diagnose_lines(["main: loading model", failed, *LLAMA_SERVED], "llama.cpp")
    assert any("GPU backend library" in warning for warning in alone.warnings)
    # a second backend (the Vulkan one) took the layers: the CUDA library's absence changed nothing
    offloaded = "load_tensors: offloaded 33/33 layers to GPU"
    used = diagnose_lines(["main: loading model", failed, offloaded, *LLAMA_SERVED], "llama.cpp")
    assert not any("GPU backend library" in warning for warning in used.warnings)


@pytest.mark.parametrize(
    "line",
    [
        "llama_context: n_ctx_per_seq (8192) < n_ctx_train (131072) -- the full capacity of the model will not be utilized",
        "llama_context: Flash Attention was auto, set to enabled",
        "llama_model_loader: tensor overrides to CPU are used with mmap enabled - consider using --load-mode none",
        "model has unused tensor blk.32.nextn.eh_proj.weight (size = 41943040 bytes) -- ignoring",
        "llama_kv_cache_iswa: using full-size SWA cache (ref: https://github.com/ggml-org/llama.cpp/pull/13194)",
        "slot      release: id  0 | task 0 | stop processing: n_tokens = 180, truncated = 0",
    ],
)
def test_llama_cpps_notes_on_choices_made_on_purpose_are_calm(line: str) -> None:
    diagnosis = diagnose_lines([*LLAMA_START, line, *LLAMA_SERVED], "llama.cpp")
    assert not diagnosis.failed and not diagnosis.warnings, diagnosis.warnings


def test_a_prompt_past_generates_max_length_is_warned() -> None:
    # transformers' generation/utils.py: the prompt alone reaches max_length, so little or nothing comes out
    line = (
        "Input length of input_ids is 5000, but `max_length` is set to 4096. This can lead to unexpected "
        "behavior. You should consider increasing `max_length` or, better yet, setting `max_new_tokens`."
    )
    diagnosis = diagnose_lines(["Loading checkpoint shards: 100%", line, "done"], "transformers")
    assert not diagnosis.failed and any("max_new_tokens" in warning for warning in diagnosis.warnings)


def test_advice_under_a_forced_engine_names_its_own_kv_type_and_never_starts_with_or() -> None:
    """QA 13 #14: a vLLM cache-too-small log read with --backend llama.cpp advised "1. Or lower the context"
    and `--cache-type-k fp8`, a type llama.cpp refuses."""
    line = (
        "ValueError: To serve at least one request with the models's max seq len (131072), (18.00 GiB KV "
        "cache is needed, which is larger than the available KV cache memory (4.37 GiB). Based on the "
        "available memory, the estimated maximum model length is 31824. Try increasing "
        "`gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine."
    )
    forced = diagnose_lines([line], "llama.cpp")
    assert forced.failed and forced.advice and not forced.advice[0].startswith("Or "), forced.advice
    kv = [advice for advice in forced.advice if "--cache-type-k" in advice]
    assert kv and "q8_0" in kv[0] and "fp8" not in kv[0], forced.advice
    own = diagnose_lines([line], "vllm")
    assert any("--kv-cache-dtype fp8" in advice for advice in own.advice), own.advice


def _ollama_engine_load(version: str, offloaded: int, layers: int, weights: dict[str, str]) -> list[str]:
    """A load by Ollama's own engine as its source logs it: 0.6-0.11 name the buffer ("model weights"
    buffer=CUDA0, ml/backend/ggml/ggml.go), 0.12 on the device (ml/device.go), both with the layer count."""
    key = "device" if version >= "0.12" else "buffer"
    return [
        *OLLAMA_START,
        f'time=x level=INFO source=ggml.go:494 msg="offloaded {offloaded}/{layers} layers to GPU"',
        *(
            f'time=x level=INFO source=device.go:245 msg="model weights" {key}={name} size="{size}"'
            for name, size in weights.items()
        ),
        *OLLAMA_SERVED,
    ]


@pytest.mark.parametrize("version", ["0.10.0", "0.12.5"])
def test_ollama_engine_placement(version: str) -> None:
    def warnings(offloaded: int, weights: dict[str, str]) -> list[str]:
        lines = [OLLAMA_GPU_USED, *_ollama_engine_load(version, offloaded, 33, weights)]
        diagnosis = diagnose_lines(lines, "ollama", kernel_log=lambda: None)
        assert not diagnosis.failed
        return diagnosis.warnings

    assert warnings(33, {"CUDA0": "12.6 GiB", "CPU": "417.3 MiB"}) == []  # the embeddings stay on the CPU
    assert any("13 of 33 layers" in w for w in warnings(20, {"CUDA0": "8.0 GiB", "CPU": "5.0 GiB"}))
    assert any("no layer was offloaded" in w for w in warnings(0, {"CPU": "13.0 GiB"}))


def test_ollama_with_no_runner_library_for_its_gpu_runs_on_the_cpu() -> None:
    line = 'level=DEBUG source=server.go:262 msg="compatible gpu libraries" compatible=[]'
    diagnosis = diagnose_lines(_ollama(line), "ollama")
    assert not diagnosis.failed and any("compatible=[]" in warning for warning in diagnosis.warnings)
    found = diagnose_lines(_ollama(line.replace("[]", "[cuda_v12]")), "ollama")
    assert not found.warnings


def test_an_old_servers_truncated_prompt_is_warned() -> None:
    # Ollama's embedded llama.cpp server of 2024 words its slot's cut this way
    line = "INFO [update_slots] input truncated | n_ctx=2048 n_erase=1090 n_keep=4 n_left=2044 n_shift=1022"
    diagnosis = diagnose_lines([*LLAMA_START, *LLAMA_SERVED, line], "llama.cpp")
    assert not diagnosis.failed and any("prompt was cut" in warning for warning in diagnosis.warnings)


FULL_OFFLOAD = [
    "load_tensors: offloading 64 repeating layers to GPU",
    "load_tensors: offloaded 65/65 layers to GPU",
    "load_tensors:        CUDA0 model buffer size =  1489.27 MiB",
    "load_tensors:   CPU_Mapped model buffer size = 10646.73 MiB",
]


def test_weights_left_on_the_host_though_every_layer_is_offloaded_are_warned() -> None:
    """A TQ2_0 file on CUDA: 65/65 layers offloaded, 10.6 of 12 GiB of weights in a CPU buffer (llama.cpp
    has no CUDA kernels for the type). Moved there on purpose (-ot, --n-cpu-moe), it is not news."""
    diagnosis = diagnose_lines([*LLAMA_START[:3], *FULL_OFFLOAD, *LLAMA_SERVED], "llama.cpp")
    assert not diagnosis.failed and any("every layer is offloaded" in w for w in diagnosis.warnings)
    asked = diagnose_lines(
        ["main: command: llama-server -m m.gguf -ngl 99 -ot exps=CPU", *FULL_OFFLOAD], "llama.cpp"
    )
    assert not any("every layer is offloaded" in w for w in asked.warnings)
    # a small model whose token embeddings outweigh its layers keeps them on the host by design
    small = [line.replace("10646.73", "600.00") for line in FULL_OFFLOAD]
    assert not diagnose_lines([*LLAMA_START[:3], *small, *LLAMA_SERVED], "llama.cpp").warnings


def test_ollamas_own_vram_based_default_capped_to_the_trained_length_is_calm() -> None:
    # server/routes.go picks 262144 on 47 GiB of VRAM; the cap to the model's length is Ollama's own doing
    auto = 'level=INFO source=routes.go:1860 msg="vram-based default context" total_vram="640.0 GiB" default_num_ctx=262144'
    capped = 'level=WARN source=server.go:169 msg="requested context size too large for model" num_ctx=262144 n_ctx_train=131072'
    assert not diagnose_lines(_ollama(capped, auto), "ollama").warnings
    assert diagnose_lines(_ollama(capped), "ollama").warnings  # a num_ctx the user set is still said


def test_vllms_no_cudagraph_word_of_the_profile_run_is_settled_by_the_capture() -> None:
    """vLLM 0.11 (round 24, a healthy ROCm run) says "No cudagraph will be used" while profiling, then
    captures its graphs: only a run that never captured them is warned."""
    warned = (
        "(EngineCore_DP0 pid=278) WARNING 09-25 13:39:34 [cudagraph_dispatcher.py:106] cudagraph dispatching "
        "keys are not initialized. No cudagraph will be used."
    )
    captured = (
        "(EngineCore_DP0 pid=278) INFO 09-25 13:40:49 [gpu_model_runner.py:3388] Graph capturing finished in "
        "22 secs, took 1.02 GiB"
    )
    assert any("no CUDA graph" in w for w in diagnose_lines([warned], backend="vllm").warnings)
    assert not diagnose_lines([warned, captured], backend="vllm").warnings
