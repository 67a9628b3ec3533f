"""One place per backend: how it names the shared parameters, its defaults, how it is launched.

The shared vocabulary (what a profile, the estimator, the diagnosis and the wizard speak):

    context      tokens of context per sequence (llama.cpp: the whole cache, split across slots)
    parallel     concurrent sequences (slots / max-num-seqs / OLLAMA_NUM_PARALLEL)
    batch        logical batch size
    ubatch       micro-batch (llama.cpp's n_ubatch; vLLM's max-num-batched-tokens is the nearest)
    kv_dtype     KV cache element type (f16, bf16, fp8, q8_0, q4_0)
    gpu_layers   layers on the GPU (llama.cpp family); the rest run from host RAM
    mem_share    share of the card the engine may take (vLLM's gpu-memory-utilization)
    quant        quantization the engine applies at load (vLLM --quantization, transformers bnb-4bit...)
    flash_attn   flash attention on/off
    cpu_offload  GiB of weights kept in host RAM (vLLM --cpu-offload-gb; transformers max_memory)

A parameter a backend does not have maps to None here, and the launcher says so instead of dropping it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from vramtui.core.errors import VramtuiError

PARAMS: tuple[str, ...] = (
    "context",
    "parallel",
    "batch",
    "ubatch",
    "kv_dtype",
    "gpu_layers",
    "mem_share",
    "quant",
    "flash_attn",
    "cpu_offload",
)


@dataclass(frozen=True)
class Backend:
    name: str
    # How the estimator accounts memory for it: "llama.cpp", "vllm" or "transformers".
    accounting: str
    # Shared parameter -> the backend's own command-line flag (None: the backend has no such knob).
    flags: dict[str, str | None]
    # Shared parameter -> environment variable, for knobs a backend only takes from its environment.
    env: dict[str, str] = field(default_factory=dict)
    # Values the engine uses when the user says nothing.
    defaults: dict[str, object] = field(default_factory=dict)
    # KV cache types the backend accepts, in the user's spelling.
    kv_dtypes: tuple[str, ...] = ("f16",)
    aliases: tuple[str, ...] = ()

    def flag(self, param: str) -> str | None:
        return self.flags.get(param)

    def knob(self, param: str) -> str | None:
        """What a user changes for `param`: the flag, else the environment variable, else None."""
        return self.flags.get(param) or self.env.get(param)


LLAMA_CPP = Backend(
    name="llama.cpp",
    accounting="llama.cpp",
    flags={
        "context": "--ctx-size",
        "parallel": "--parallel",
        "batch": "--batch-size",
        "ubatch": "--ubatch-size",
        "kv_dtype": "--cache-type-k",  # and --cache-type-v with the same value
        "gpu_layers": "--n-gpu-layers",
        "mem_share": None,
        "quant": None,  # the GGUF file is the quantization: pick another file
        "flash_attn": "--flash-attn",
        "cpu_offload": None,
    },
    defaults={"context": 4096, "parallel": 1, "batch": 2048, "ubatch": 512, "kv_dtype": "f16"},
    kv_dtypes=("f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "iq4_nl"),
    aliases=("llama-server", "llamacpp", "llama_cpp", "llama-cli"),
)

LLAMA_CPP_PYTHON = Backend(
    name="llama-cpp-python",
    accounting="llama.cpp",
    flags={
        "context": "--n_ctx",
        "parallel": None,  # its server runs one sequence at a time
        "batch": "--n_batch",
        "ubatch": "--n_ubatch",
        "kv_dtype": "--type_k",  # and --type_v; it takes ggml type numbers
        "gpu_layers": "--n_gpu_layers",
        "mem_share": None,
        "quant": None,
        "flash_attn": "--flash_attn",
        "cpu_offload": None,
    },
    defaults={"context": 2048, "parallel": 1, "batch": 512, "ubatch": 512, "kv_dtype": "f16"},
    kv_dtypes=("f32", "f16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1"),
    aliases=("llama_cpp_python", "llama_cpp.server", "llama-cpp-python-server"),
)

VLLM = Backend(
    name="vllm",
    accounting="vllm",
    flags={
        "context": "--max-model-len",
        "parallel": "--max-num-seqs",
        "batch": "--max-num-batched-tokens",
        "ubatch": None,
        "kv_dtype": "--kv-cache-dtype",
        "gpu_layers": None,  # vLLM offloads by size, not by layer: see cpu_offload
        "mem_share": "--gpu-memory-utilization",
        "quant": "--quantization",
        "flash_attn": None,  # chosen through VLLM_ATTENTION_BACKEND
        "cpu_offload": "--cpu-offload-gb",
    },
    env={"flash_attn": "VLLM_ATTENTION_BACKEND"},
    defaults={"parallel": 256, "mem_share": 0.9, "kv_dtype": "auto", "batch": 2048},
    kv_dtypes=("auto", "fp8", "fp8_e4m3", "fp8_e5m2"),
    aliases=("vllm-serve",),
)

TRANSFORMERS = Backend(
    name="transformers",
    accounting="transformers",
    flags={
        "context": "--max-length",
        "parallel": "--batch-size",
        "batch": None,
        "ubatch": None,
        "kv_dtype": None,  # the dynamic cache takes the model's dtype
        "gpu_layers": None,
        "mem_share": None,
        "quant": "--quantization",  # bnb-4bit | bnb-8bit, applied at load time
        "flash_attn": "--attn-implementation",
        "cpu_offload": "--max-memory",
    },
    defaults={"parallel": 1, "kv_dtype": "bf16"},
    kv_dtypes=("f16", "bf16", "f32"),
    aliases=("hf", "huggingface", "accelerate"),
)

OLLAMA = Backend(
    name="ollama",
    accounting="llama.cpp",
    # Ollama takes model options through its API and the rest from its server's environment.
    flags={param: None for param in PARAMS},
    env={
        "context": "OLLAMA_CONTEXT_LENGTH",
        "parallel": "OLLAMA_NUM_PARALLEL",
        "kv_dtype": "OLLAMA_KV_CACHE_TYPE",
        "flash_attn": "OLLAMA_FLASH_ATTENTION",
        "gpu_layers": "num_gpu",  # a model option (API / Modelfile), not an environment variable
        "batch": "num_batch",
    },
    defaults={"context": 4096, "parallel": 1, "kv_dtype": "f16", "ubatch": 512},
    kv_dtypes=("f16", "q8_0", "q4_0"),
    aliases=(),
)

BACKENDS: dict[str, Backend] = {b.name: b for b in (LLAMA_CPP, LLAMA_CPP_PYTHON, VLLM, TRANSFORMERS, OLLAMA)}


def get_backend(name: str) -> Backend:
    """Look a backend up by its name or an alias, case-insensitively."""
    key = name.strip().lower()
    for backend in BACKENDS.values():
        if key == backend.name or key in backend.aliases:
            return backend
    known = ", ".join(BACKENDS)
    raise VramtuiError(f"unknown backend {name!r} (known: {known})")
