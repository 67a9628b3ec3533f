"""What the wizard knows besides each engine's own ladder: failures no memory setting fixes, and sizes.

The ladders themselves (per failing stage, the order users are taught, one parameter a rung) live
with each engine family (`vramtui.core.backends.<family>.ladder`); a `Backend` gives its rungs with
`backend.rungs(stage)`, holding only those its engine can take.
"""

from __future__ import annotations

from vramtui.core.backends import Backend, Rung, get_backend

__all__ = [
    "KV_DTYPE_BYTES",
    "MEMORY_FAILURES",
    "NOT_MEMORY",
    "Rung",
    "ladder_for",
    "quantized_v_needs_flash_attn",
]

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


def ladder_for(stage: str | None, backend: str | Backend) -> list[Rung]:
    """The rungs for a failing stage that this backend can take (a name is looked up once)."""
    return get_backend(backend).rungs(stage)


def quantized_v_needs_flash_attn(backend: str | Backend, kv_dtype: object) -> bool:
    """llama.cpp refuses a quantized V cache without flash attention ("quantized V cache requires
    flash_attn to be enabled"): the wizard turns flash attention on first, as its own step."""
    return get_backend(backend).needs_flash_attn_for(kv_dtype)
