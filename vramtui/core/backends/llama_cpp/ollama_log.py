"""Ollama's own words for a GPU it found but did not use, and for a setting it did not apply.

Each wording is Ollama's (its discover/, gpu/, llm/ and server/ sources, v0.3 to v0.33): a device skipped,
a driver or runtime library it could not load, a discovery that failed. On a box with one GPU each means
the model runs on the CPU; where another GPU was used after all (a discrete card beside a skipped iGPU)
the skip is not news, so each is said only when no GPU was put to work (the mark `gpu_used`).
"""

from __future__ import annotations

from vramtui.core.logs.ruletypes import NoticeRule

_OLLAMA = "ollama"
_CPU = "the model runs on the CPU"


def _skipped(anchor: str, why: str, pattern: str | None = None) -> NoticeRule:
    """A GPU Ollama found and left out: news only where no other GPU was used."""
    return NoticeRule(anchor, "cpu_fallback", f"{why}: {_CPU}", pattern, backend=_OLLAMA, unless="gpu_used")


OLLAMA_NOTICES: tuple[NoticeRule, ...] = (
    # a GPU at work: the skips below are then about another device
    NoticeRule(
        "inference compute", "mark", "gpu_used", r"inference compute.*library=(?!cpu\b)\w", backend=_OLLAMA
    ),
    NoticeRule("offloaded", "mark", "gpu_used", r"offloaded [1-9]\d*/\d+ layers to gpu", backend=_OLLAMA),
    NoticeRule("offload to", "mark", "gpu_used", r'msg="offload to (?!cpu\b)\w', backend=_OLLAMA),
    # its wait for the runner to load (llm/server.go WaitUntilRunning) wraps what killed the runner: a
    # load failure, never a request's
    NoticeRule(
        "terminated",
        "mark",
        "load_failed",
        r"llama runner process has terminated|error loading llama server",
        backend=_OLLAMA,
    ),
    # its POST of the load to the runner failed: the runner died while loading (server.go's load)
    NoticeRule("do load request", "mark", "load_failed", r'"do load request" error', backend=_OLLAMA),
    _skipped(
        "igpu",
        "Ollama skipped an integrated GPU (an iGPU is not used by default; OLLAMA_IGPU_ENABLE=1 on new versions)",
        r"unsupported radeon igpu detected|amdgpu appears to be an igpu|dropping integrated gpu",
    ),
    _skipped(
        "rocm",
        "Ollama found an AMD GPU but no ROCm library it can use with it (install ROCm, or set "
        "HSA_OVERRIDE_GFX_VERSION for an unlisted gfx)",
        r"unable to verify rocm library|no compatible rocm library found",
    ),
    _skipped(
        "falling back to cpu mode",
        "Ollama could not read which AMD GPUs its ROCm library supports (failed to lookup supported GFX types)",
    ),
    # a gfx its ROCm library has no kernels for (gpu/amd_*.go to v0.4, discover/amd.go after): skipped
    _skipped(
        "amdgpu",
        "Ollama's ROCm library has no kernels for this AMD GPU's gfx target (HSA_OVERRIDE_GFX_VERSION can map "
        "it to a supported one)",
        r"amdgpu is not supported|amdgpu \[\d+\] gfx\w+ is not supported",
    ),
    _skipped(
        "dropping rocm device",
        "Ollama's ROCm library has no kernels for this AMD GPU's gfx target (HSA_OVERRIDE_GFX_VERSION can map "
        "it to a supported one)",
    ),
    # its scheduler found no runner library for the GPU it planned the layers on (llm/server.go, debug level)
    _skipped(
        "compatible gpu libraries",
        "Ollama found no runner library for the GPU it planned the layers on (compatible=[]): a broken or "
        "CPU-only install",
        r'compatible gpu libraries"? compatible=\[\]',
    ),
    _skipped(
        "unable to locate gpu dependency libraries",
        "Ollama did not find its GPU runtime libraries next to its executable (a broken or partial install)",
    ),
    _skipped(
        "devices",
        "Ollama's ROCm runtime reports no usable AMD device",
        r"amd rocm reports no devices found|no compatible amdgpu devices detected",
    ),
    _skipped(
        "cuda driver library",
        "Ollama could not load the NVIDIA driver's CUDA library (libcuda / nvcuda): a driver that does not "
        "match its kernel module, or none in the container",
        r"unable to load cuda driver library|unknown error initializing cuda driver library"
        r"|version mismatch between driver and cuda driver library",
    ),
    _skipped(
        "too old",
        "the GPU driver (or the AMD GPU) is older than Ollama's runtime supports: update the driver",
        r"amd driver is too old|nvidia driver too old|amdgpu too old",
    ),
    _skipped(
        "cuda gpu is too old",
        "the NVIDIA GPU's compute capability is older than this Ollama build supports: it is skipped",
    ),
    _skipped(
        "compute capability not in compiled",
        "the GPU's compute capability is not one this Ollama build was compiled for: it is skipped",
    ),
    _skipped(
        "gpu discovery",
        "Ollama's GPU discovery failed (its probe runner crashed or timed out)",
        r"failure during (?:llama-server )?gpu discovery|gpu discovery watchdog timed out",
    ),
    # a CPU without AVX: its GPU runners are built with AVX, so none of them is used (gpu/gpu.go to v0.3,
    # runners/common.go in v0.5)
    _skipped(
        "avx",
        "the CPU lacks AVX, which Ollama's GPU runners are built with: it does not use the GPU at all",
        r"cpu does not have avx or avx2, disabling gpu support|cpu does not have minimum vector extensions, gpu "
        r"inference disabled|gpu runner incompatible with host system, cpu does not have avx",
    ),
    _skipped(
        "all detected amdgpus are skipped",
        "Ollama skipped every AMD GPU it found (an iGPU, or a gfx its ROCm library has no kernels for)",
    ),
    _skipped(
        "too little memory to allocate any layers",
        "the GPU had too little free memory for a single layer: Ollama loads the model in host RAM",
    ),
    # its GPU runner would not start (a library missing, the fork failed): it starts the next library in
    # its list, the CPU's last (llm/server.go)
    _skipped(
        "unable to start runner with compatible gpu",
        "Ollama could not start its runner for the GPU and went on to the next library it has",
    ),
    # its new engine's fit loop (llm/server.go): the first layout did not fit, so fewer layers go to the GPU
    NoticeRule(
        "applying backoff",
        "cpu_fallback",
        "Ollama's layout did not fit in GPU memory: it backs off to fewer layers on the GPU, and the rest run "
        "on the CPU (slow)",
        r"model layout did not fit, applying backoff",
        backend=_OLLAMA,
    ),
    # a prediction stopped early: the answer is cut (debug level only)
    # its own engine's runner with a model whose cache cannot be shared (runner/ollamarunner)
    NoticeRule(
        "disabling parallel processing",
        "setting_ignored",
        "this model's cache cannot serve requests in parallel: Ollama runs one at a time (OLLAMA_NUM_PARALLEL "
        "is ignored)",
        r"model does not support caching, disabling parallel processing",
        backend=_OLLAMA,
    ),
    NoticeRule(
        "token repeat limit reached",
        "setting_ignored",
        "Ollama stopped an answer that repeated the same token: that reply is cut short",
        backend=_OLLAMA,
    ),
    NoticeRule(
        "retrying with projector cpu offload",
        "cpu_fallback",
        "the vision projector did not start on the GPU: Ollama runs it on the CPU (images are slow)",
        backend=_OLLAMA,
    ),
    NoticeRule(
        "reducing automatic context",
        "setting_ignored",
        "the load failed at the context Ollama chose: it retried with a smaller one, so long prompts are cut",
        backend=_OLLAMA,
    ),
    # envconfig: a value it cannot parse (OLLAMA_CONTEXT_LENGTH=32k, OLLAMA_NUM_PARALLEL=two) is dropped
    NoticeRule(
        "invalid environment variable",
        "setting_ignored",
        "an environment variable Ollama reads has a value it cannot parse: it uses its default instead (the "
        "line names the variable)",
        r"invalid environment variable, using default",
        backend=_OLLAMA,
    ),
    NoticeRule(
        "ollama_kv_cache_type",
        "setting_ignored",
        "the KV cache type asked for (OLLAMA_KV_CACHE_TYPE) is not applied: a quantized type needs "
        "OLLAMA_FLASH_ATTENTION=1, and only f16, q8_0 and q4_0 are known; the cache stays f16",
        r"must be enabled to use a quantized ollama_kv_cache_type|unsupported ollama_kv_cache_type",
        backend=_OLLAMA,
    ),
)
