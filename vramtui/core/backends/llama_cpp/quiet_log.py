"""llama.cpp's own words for a run that starts but does less than asked: a kernel it converts around, a
setting it caps or turns off, a GPU library that did not load. Each wording is llama.cpp's (src/,
common/, tools/server): a healthy-looking start-up whose one line says the run is slower or shorter.
"""

from __future__ import annotations

from vramtui.core.logs.ruletypes import NoticeRule

_LLAMA = "llama.cpp"
_FA_OFF = (
    "flash attention cannot run where this model's layers are (usually a device or type it does not support): "
    "it is turned off, so the KV cache and compute buffers are larger and a quantized V cache cannot be used"
)

LLAMA_QUIET_NOTICES: tuple[NoticeRule, ...] = (
    NoticeRule(
        "converting k and v to f16 instead",
        "kernel_fallback",
        "no flash-attention kernel was compiled for this pair of K/V cache types: K and V are converted to "
        "f16 at every step (slow); use the same type for both, or a build with GGML_CUDA_FA_ALL_QUANTS=ON",
        backend=_LLAMA,
    ),
    NoticeRule(
        "flash attention",
        "kernel_fallback",
        _FA_OFF,
        r"flash attention not supported, set to disabled"
        r"|is assigned to device \S+ but (?:the )?flash attention (?:tensor )?is assigned to device",
        backend=_LLAMA,
    ),
    NoticeRule(
        "exceeds the training context of the model",
        "setting_ignored",
        "the context asked for per slot is over the model's trained length: llama-server caps it there, so "
        "the context is shorter than asked",
        backend=_LLAMA,
    ),
    NoticeRule(
        "fallback to cpu",
        "cpu_fallback",
        "a LoRA adapter's tensors cannot use the GPU's buffer: they stay on the CPU and run there (slow)",
        r"lora for .* cannot use buft .*fallback to cpu",
        backend=_LLAMA,
    ),
    # the dynamic-backend build: a GPU library that does not load leaves the CPU, unless another loaded
    NoticeRule(
        "failed to load",
        "cpu_fallback",
        "a GPU backend library of llama.cpp did not load (a missing driver library, or one built for another "
        "runtime): the model runs on the CPU",
        r"load_backend: failed to load .*ggml-(?:cuda|hip|rocm|vulkan|sycl|metal|musa|cann|opencl)",
        backend=_LLAMA,
        unless="gpu_used",
    ),
)
