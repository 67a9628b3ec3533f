"""The downgrade ladders, as data: per failing stage, the order users are taught, one parameter a rung.

A rung names a parameter of the shared vocabulary (see `vramtui.core.backends`), or `model` (another
file: a pre-quantized or smaller model), and the direction it moves. Whether a backend has the knob is
read from its `Backend` entry, so the ladder a user sees only holds rungs their engine can take; rungs
with no knob anywhere (chunking, double quantization on a GGUF engine) are advice, said with their cost.
"""

from __future__ import annotations

from dataclasses import dataclass

from vramtui.core.backends import Backend, get_backend


@dataclass(frozen=True)
class Rung:
    param: str  # a shared parameter, "model" (another file), or a request-side name (input_length ...)
    move: str  # "down" | "on" | "off" | "up" | "file" | "advice"
    label: str  # what the user reads
    cost: str = ""  # what it costs, said plainly
    # Only these accounting families (llama.cpp | vllm | transformers); empty: any backend.
    families: tuple[str, ...] = ()

    def knob(self, backend: Backend) -> str | None:
        """The flag or environment variable a user changes for this rung on `backend` (None: none)."""
        if self.param == "model":
            return backend.launch.model_flag if backend.launch else None
        return backend.knob(self.param)

    def applies_to(self, backend: Backend) -> bool:
        if self.families and backend.accounting not in self.families:
            return False
        if self.move == "advice":
            return True
        if self.param == "model":
            return True
        if self.param in backend.fixed:
            return False  # the engine cannot change it (llama-cpp-python: one sequence)
        return self.knob(backend) is not None


KV_CACHE: tuple[Rung, ...] = (
    Rung("parallel", "down", "fewer concurrent sequences", "fewer users served at once"),
    Rung(
        "kv_dtype", "down", "a smaller KV cache type", "slightly lower answer quality (q4_0 more than q8_0)"
    ),
    Rung("context", "down", "a shorter context", "long prompts and long chats no longer fit"),
    Rung(
        "mem_share", "up", "a larger memory share for the engine", "less room for other processes", ("vllm",)
    ),
    Rung("flash_attn", "on", "flash attention on", "none on most GPUs; some older cards lack it"),
    Rung(
        "gpu_layers",
        "down",
        "fewer layers on the GPU",
        "much slower: the offloaded layers run from host RAM on the CPU",
        ("llama.cpp",),
    ),
)

LOAD_WEIGHTS: tuple[Rung, ...] = (
    Rung("quant", "down", "a lower quantization level (16 → 8 → 4 bit)", "some answer quality"),
    Rung(
        "model",
        "file",
        "a pre-quantized file of the same model",
        "some answer quality (and no near-16-bit load peak, unlike on-the-fly quantization)",
    ),
    Rung(
        "double_quant",
        "advice",
        "double quantization (bitsandbytes nf4)",
        "a little slower",
        ("transformers",),
    ),
    Rung("cpu_offload", "up", "keep part of the weights in host RAM", "much slower for the offloaded part"),
    Rung(
        "gpu_layers",
        "down",
        "fewer layers on the GPU",
        "much slower: the offloaded layers run from host RAM on the CPU",
        ("llama.cpp",),
    ),
    Rung("smaller_model", "advice", "a smaller model", "a less capable model"),
)

INFERENCE: tuple[Rung, ...] = (
    Rung("input_length", "advice", "a shorter input (replay the failing request shortened)", "less context"),
    Rung("batch", "down", "a smaller batch", "slower prompt processing"),
    Rung("ubatch", "down", "a smaller micro-batch", "slower prompt processing", ("llama.cpp",)),
    Rung("parallel", "down", "fewer concurrent sequences", "fewer users served at once"),
    Rung(
        "chunking",
        "advice",
        "split the input into chunks",
        "the model no longer sees the whole input at once",
    ),
)

LADDERS: dict[str, tuple[Rung, ...]] = {
    "kv_cache": KV_CACHE,
    "load_weights": LOAD_WEIGHTS,
    "inference": INFERENCE,
}

# Failures that no memory setting fixes: what to change instead.
NOT_MEMORY: dict[str, str] = {
    "unsupported_quant": "this backend cannot load this quantization format: use a backend that can "
    "(GGUF: llama.cpp or Ollama; AWQ/GPTQ: vLLM or TGI) or a file in a format it reads",
    "unknown_arch": "this backend version does not know the model's architecture: upgrade the backend "
    "or pick a model it supports",
    "shape_mismatch": "the weights do not match the model's config: re-download the model or fix config.json",
    "dtype_unsupported": "the GPU or backend lacks this data type: choose another dtype (e.g. float16 "
    "instead of bfloat16 on older cards)",
    "file_missing": "the model file is not where the profile says: fix the model path or download it",
    "network": "the model could not be downloaded: check the network or point the profile at a local copy",
    "disk_full": "the disk is full: free space or point the cache somewhere larger",
    "other": "the log shows a failure that is not about memory: read the first error line",
}

MEMORY_FAILURES = frozenset({"cuda_oom", "host_oom_killed", "kv_cache_too_small", "context_too_long"})

# KV cache types from largest to smallest element, per accounting family.
KV_DTYPE_ORDER: dict[str, tuple[str, ...]] = {
    "llama.cpp": ("f32", "f16", "q8_0", "q4_0"),
    "vllm": ("auto", "fp8"),
}
# Bytes per element of each KV type (llama.cpp block sizes: q8_0 34/32, q4_0 18/32).
KV_DTYPE_BYTES: dict[str, float] = {
    "f32": 4.0,
    "f16": 2.0,
    "bf16": 2.0,
    "auto": 2.0,
    "fp8": 1.0,
    "q8_0": 34 / 32,
    "q4_0": 18 / 32,
}
# On-the-fly quantization from largest to smallest (transformers / vLLM spelling; None: 16-bit).
QUANT_ORDER: dict[str, tuple[str | None, ...]] = {
    "transformers": (None, "bnb-8bit", "bnb-4bit"),
    "vllm": (None, "fp8"),
}
# GGUF file types from largest to smallest, as they appear in file names and llama.cpp's log.
GGUF_QUANT_ORDER: tuple[str, ...] = (
    "f32",
    "bf16",
    "f16",
    "q8_0",
    "q6_k",
    "q5_k_m",
    "q5_0",
    "q4_k_m",
    "q4_0",
    "iq4_xs",
    "q3_k_m",
    "q2_k",
)


def ladder_for(stage: str | None, backend: str | Backend) -> list[Rung]:
    """The rungs for a failing stage that this backend can take, in the order users are taught."""
    engine = backend if isinstance(backend, Backend) else get_backend(backend)
    return [rung for rung in LADDERS.get(stage or "", ()) if rung.applies_to(engine)]


def quantized_v_needs_flash_attn(backend: str | Backend, kv_dtype: object) -> bool:
    """llama.cpp refuses a quantized V cache without flash attention ("quantized V cache requires
    flash_attn to be enabled"): the wizard turns flash attention on first, as its own step."""
    engine = backend if isinstance(backend, Backend) else get_backend(backend)
    return engine.accounting == "llama.cpp" and str(kv_dtype).lower().startswith(("q", "iq"))
