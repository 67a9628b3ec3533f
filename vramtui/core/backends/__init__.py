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

import sys
from collections.abc import Callable
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
class Translation:
    """What one shared parameter becomes for one backend."""

    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    # Options a backend takes per request, not per launch (Ollama's num_gpu, num_batch).
    request_options: dict[str, object] = field(default_factory=dict)
    # Set when the backend cannot take this parameter or this value: said, never dropped.
    problem: str | None = None


Translator = Callable[["Backend", str, object], Translation]


@dataclass(frozen=True)
class Launch:
    """How a backend's server is started and how it says it is ready."""

    # The program and its fixed leading arguments; "{python}" is the interpreter vramtui runs on.
    program: tuple[str, ...]
    # The flag that names the model; None: the model is the first positional argument.
    model_flag: str | None
    host_flag: str | None
    port_flag: str | None
    default_port: int
    # GET paths that answer 200 once the model is loaded (tried in order).
    health_paths: tuple[str, ...]
    # Lowercase substrings of the log line the server prints when it listens.
    ready_patterns: tuple[str, ...]
    # Shared parameter (and value) -> arguments/environment for this backend.
    translate: Translator
    # Backend-specific profile parameters that pass straight through as flags.
    extra_params: dict[str, str] = field(default_factory=dict)
    # Ollama takes host:port from its environment, not a flag.
    host_port_env: str | None = None
    # The model is named at request time, not at launch (Ollama).
    model_at_request: bool = False

    def argv_prefix(self) -> list[str]:
        return [sys.executable if part == "{python}" else part for part in self.program]


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
    # How its server is launched; filled in below, next to each backend's own translator.
    launch: Launch | None = None
    # Values the engine always has: asking for exactly that value is no unsupported parameter.
    fixed: dict[str, object] = field(default_factory=dict)

    def flag(self, param: str) -> str | None:
        return self.flags.get(param)

    def knob(self, param: str) -> str | None:
        """What a user changes for `param`: the flag, else the environment variable, else None."""
        return self.flags.get(param) or self.env.get(param)

    def translate(self, param: str, value: object) -> Translation:
        """The arguments/environment that give this backend `param = value` (or why it cannot)."""
        if self.launch is None:
            return Translation(problem=f"{self.name} cannot be launched by vramtui")
        if param in self.fixed and _same(self.fixed[param], value):
            return Translation()  # the engine always behaves this way: nothing to pass
        return self.launch.translate(self, param, value)


# --- value spellings shared by the translators -------------------------------------------------------

_KV_ALIASES = {
    "fp16": "f16",
    "float16": "f16",
    "half": "f16",
    "bfloat16": "bf16",
    "fp32": "f32",
    "float32": "f32",
}
_TRUE = {"1", "true", "on", "yes", "enabled"}
_FALSE = {"0", "false", "off", "no", "disabled"}


def _same(a: object, b: object) -> bool:
    return str(a).strip().lower() == str(b).strip().lower()


def kv_dtype_name(value: object) -> str:
    """The user's KV cache type in llama.cpp's spelling (f16, q8_0 ...)."""
    text = str(value).strip().lower()
    return _KV_ALIASES.get(text, text)


def switch(value: object) -> bool | str:
    """flash_attn and friends: True, False or "auto"."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    if text == "auto":
        return "auto"
    raise VramtuiError(f"not an on/off value: {value!r} (use true, false or auto)")


def whole(param: str, value: object) -> int:
    """An integer parameter; a clear error for anything else."""
    if isinstance(value, bool):
        raise VramtuiError(f"{param} must be a whole number, not {value!r}")
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise VramtuiError(f"{param} must be a whole number, not {value!r}") from None
    if not number.is_integer():
        raise VramtuiError(f"{param} must be a whole number, not {value!r}")
    return int(number)


def _gib(param: str, value: object) -> float:
    """cpu_offload: a number of GiB or a size string ("4GiB")."""
    from vramtui.core.units import GIB, parse_size

    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return parse_size(str(value)) / GIB


def _is_all(value: object) -> bool:
    return str(value).strip().lower() in {"all", "-1"}


def _no_such(backend: Backend, param: str, why: str = "") -> Translation:
    return Translation(problem=f"{backend.name} has no {param} setting" + (f": {why}" if why else ""))


def _bad_value(backend: Backend, param: str, value: object, accepted: str) -> Translation:
    return Translation(problem=f"{backend.name} does not take {param}={value!r} (it takes {accepted})")


def _kv_check(backend: Backend, value: object) -> str | Translation:
    name = kv_dtype_name(value)
    if name not in backend.kv_dtypes:
        return _bad_value(backend, "kv_dtype", value, ", ".join(backend.kv_dtypes))
    return name


# --- one translator per backend ------------------------------------------------------------------------
# Flags checked against each program's own source; tests/test_backends.py records where from.


def _translate_llama_cpp(backend: Backend, param: str, value: object) -> Translation:
    flag = backend.flags.get(param)
    if flag is None:
        why = {"quant": "the GGUF file is the quantization: pick another file"}.get(param, "")
        return _no_such(backend, param, why)
    if param == "kv_dtype":
        name = _kv_check(backend, value)
        if isinstance(name, Translation):
            return name
        return Translation(args=("--cache-type-k", name, "--cache-type-v", name))
    if param == "flash_attn":
        state = switch(value)
        return Translation(args=(flag, "auto" if state == "auto" else ("on" if state else "off")))
    if param == "gpu_layers":
        # 999 rather than "all": every build takes a number, only new ones take "all".
        return Translation(args=(flag, "999" if _is_all(value) else str(whole(param, value))))
    return Translation(args=(flag, str(whole(param, value))))


# ggml_type numbers: llama-cpp-python's server takes --type_k/--type_v as integers (llama_cpp.py enum).
GGML_TYPES = {
    "f32": 0,
    "f16": 1,
    "q4_0": 2,
    "q4_1": 3,
    "q5_0": 6,
    "q5_1": 7,
    "q8_0": 8,
    "iq4_nl": 20,
    "bf16": 30,
}


def _translate_llama_cpp_python(backend: Backend, param: str, value: object) -> Translation:
    flag = backend.flags.get(param)
    if flag is None:
        why = {
            "parallel": "its server runs one sequence at a time",
            "quant": "the GGUF file is the quantization: pick another file",
        }.get(param, "")
        return _no_such(backend, param, why)
    if param == "kv_dtype":
        name = _kv_check(backend, value)
        if isinstance(name, Translation):
            return name
        number = str(GGML_TYPES[name])
        return Translation(args=("--type_k", number, "--type_v", number))
    if param == "flash_attn":
        state = switch(value)
        if state == "auto":
            return _bad_value(backend, param, value, "true or false")
        return Translation(args=(flag, "true" if state else "false"))
    if param == "gpu_layers":
        return Translation(args=(flag, "-1" if _is_all(value) else str(whole(param, value))))
    return Translation(args=(flag, str(whole(param, value))))


_VLLM_KV = {
    "auto": "auto",
    "f16": "auto",
    "bf16": "auto",
    "fp8": "fp8",
    "fp8_e4m3": "fp8_e4m3",
    "fp8_e5m2": "fp8_e5m2",
}


def _translate_vllm(backend: Backend, param: str, value: object) -> Translation:
    if param == "flash_attn":
        state = switch(value)
        if state is True:
            return Translation(env={"VLLM_ATTENTION_BACKEND": "FLASH_ATTN"})
        return _no_such(
            backend, "flash_attn=off", "vLLM picks its attention backend: set VLLM_ATTENTION_BACKEND in [env]"
        )
    flag = backend.flags.get(param)
    if flag is None:
        why = {
            "gpu_layers": "it offloads by size: use cpu_offload (GiB)",
            "ubatch": "max-num-batched-tokens (batch) is the nearest",
        }.get(param, "")
        return _no_such(backend, param, why)
    if param == "kv_dtype":
        mapped = _VLLM_KV.get(kv_dtype_name(value))
        if mapped is None:
            return _bad_value(backend, param, value, "auto, fp8, fp8_e4m3, fp8_e5m2")
        return Translation(args=(flag, mapped))
    if param == "mem_share":
        share = float(value)  # type: ignore[arg-type]
        if not 0 < share <= 1:
            return _bad_value(backend, param, value, "a share of the card between 0 and 1")
        return Translation(args=(flag, f"{share:g}"))
    if param == "cpu_offload":
        return Translation(args=(flag, f"{_gib(param, value):g}"))
    if param == "quant":
        return Translation(args=(flag, str(value)))
    return Translation(args=(flag, str(whole(param, value))))


_BNB = {
    "bnb-4bit": "bnb-4bit",
    "4bit": "bnb-4bit",
    "nf4": "bnb-4bit",
    "bnb-8bit": "bnb-8bit",
    "8bit": "bnb-8bit",
}


def _translate_transformers(backend: Backend, param: str, value: object) -> Translation:
    flag = backend.flags.get(param)
    if flag is None:
        why = {"kv_dtype": "the dynamic cache takes the model's dtype: set dtype"}.get(param, "")
        return _no_such(backend, param, why)
    if param == "quant":
        mapped = _BNB.get(str(value).strip().lower())
        if mapped is None:
            return _bad_value(backend, param, value, "bnb-4bit or bnb-8bit")
        return Translation(args=(flag, mapped))
    if param == "flash_attn":
        state = switch(value)
        if state == "auto":
            return _bad_value(backend, param, value, "true or false")
        return Translation(args=(flag, "flash_attention_2" if state else "sdpa"))
    if param == "cpu_offload":
        return Translation(args=(flag, f"cpu={_gib(param, value):g}GiB"))
    return Translation(args=(flag, str(whole(param, value))))


def _translate_ollama(backend: Backend, param: str, value: object) -> Translation:
    knob = backend.env.get(param)
    if knob is None:
        return _no_such(backend, param)
    if not knob.isupper():  # a model option (num_gpu, num_batch): sent with each request
        amount = -1 if param == "gpu_layers" and _is_all(value) else whole(param, value)
        return Translation(request_options={knob: amount})
    if param == "kv_dtype":
        name = _kv_check(backend, value)
        if isinstance(name, Translation):
            return name
        return Translation(env={knob: name})
    if param == "flash_attn":
        state = switch(value)
        if state == "auto":
            return _bad_value(backend, param, value, "true or false")
        return Translation(env={knob: "1" if state else "0"})
    return Translation(env={knob: str(whole(param, value))})


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
    launch=Launch(
        program=("llama-server",),
        model_flag="--model",
        host_flag="--host",
        port_flag="--port",
        default_port=8080,
        # /health answers 503 while loading and 200 once the model is loaded (tools/server/README.md).
        health_paths=("/health",),
        ready_patterns=("server is listening on", "all slots are idle"),
        translate=_translate_llama_cpp,
        extra_params={"threads": "--threads", "alias": "--alias", "fit": "--fit", "mmap": "--mmap"},
    ),
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
    launch=Launch(
        program=("{python}", "-m", "llama_cpp.server"),
        model_flag="--model",
        host_flag="--host",
        port_flag="--port",
        default_port=8000,
        # No health endpoint: the model is loaded before uvicorn starts, so /v1/models answering means ready.
        health_paths=("/v1/models",),
        ready_patterns=("uvicorn running on", "application startup complete"),
        translate=_translate_llama_cpp_python,
        extra_params={
            "threads": "--n_threads",
            "chat_format": "--chat_format",
            "model_alias": "--model_alias",
            "use_mmap": "--use_mmap",
        },
    ),
    fixed={"parallel": 1},
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
    launch=Launch(
        program=("vllm", "serve"),
        model_flag=None,  # `vllm serve MODEL`
        host_flag="--host",
        port_flag="--port",
        default_port=8000,
        health_paths=("/health", "/v1/models"),
        ready_patterns=("application startup complete",),
        translate=_translate_vllm,
        extra_params={
            "dtype": "--dtype",
            "served_model_name": "--served-model-name",
            "tensor_parallel": "--tensor-parallel-size",
            "enforce_eager": "--enforce-eager",
        },
    ),
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
    launch=Launch(
        # vramtui's own small OpenAI-compatible runner (vramtui/runners/transformers_server.py).
        program=("{python}", "-m", "vramtui.runners.transformers_server"),
        model_flag="--model",
        host_flag="--host",
        port_flag="--port",
        default_port=8000,
        health_paths=("/health",),
        ready_patterns=("vramtui-runner: ready",),
        translate=_translate_transformers,
        extra_params={
            "dtype": "--dtype",
            "device_map": "--device-map",
            "max_memory": "--max-memory",
            "attn_implementation": "--attn-implementation",
            "threads": "--threads",
            "served_model_name": "--served-model-name",
        },
    ),
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
    launch=Launch(
        program=("ollama", "serve"),
        model_flag=None,
        host_flag=None,
        port_flag=None,
        default_port=11434,
        health_paths=("/api/version",),
        ready_patterns=("listening on",),
        translate=_translate_ollama,
        host_port_env="OLLAMA_HOST",
        model_at_request=True,
    ),
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
