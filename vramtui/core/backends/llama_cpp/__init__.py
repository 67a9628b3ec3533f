"""The llama.cpp family: llama-server, llama-cpp-python's server, Ollama (which runs llama-server) and
ik_llama.cpp (a fork of llama.cpp: its llama-server with its own flags, defaults and MLA cache).

How each names the shared parameters, its defaults, how it launches and says it is ready, and
(ladder.py) the rungs it has. Flags checked against each program's own source; see
tests/core/backends/test_backends.py for where from.
"""

from __future__ import annotations

from dataclasses import replace

from vramtui.core.backends.base import (
    MIB,
    PARAMS,
    Backend,
    Launch,
    SettingsEcho,
    Translation,
    bad_value,
    is_all,
    kv_check,
    no_such,
    switch,
    whole,
)
from vramtui.core.backends.llama_cpp import echo
from vramtui.core.backends.llama_cpp.ladder import KV_DTYPE_ORDER, LADDER, MAX_SEQUENCES, named_fix
from vramtui.core.errors import VramtuiError
from vramtui.core.estimate import offload

FAMILY = "llama_cpp"
_GGUF_IS_THE_QUANT = "the GGUF file is the quantization: pick another file"


def _kv_types(backend: Backend, value: object) -> tuple[str, str] | Translation:
    """The K and V cache types: one type for both, or "K/V" apart (`-ctk q4_0` alone leaves V f16)."""
    parts = [part.strip() for part in str(value).split("/")]
    if len(parts) > 2 or not all(parts):
        return bad_value(backend, "kv_dtype", value, "one type for K and V, or two as K/V: q8_0, q4_0/f16")
    names = [kv_check(backend, text) for text in (parts[0], parts[-1])]
    refused = next((name for name in names if isinstance(name, Translation)), None)
    if refused is not None:
        return refused
    return str(names[0]), str(names[1])


def _translate_llama_cpp(backend: Backend, param: str, value: object) -> Translation:
    flag = backend.flags.get(param)
    if flag is None:
        return no_such(backend, param, _GGUF_IS_THE_QUANT if param == "quant" else "")
    if param == "kv_dtype":
        types = _kv_types(backend, value)
        if isinstance(types, Translation):
            return types
        return Translation(args=("--cache-type-k", types[0], "--cache-type-v", types[1]))
    if param == "flash_attn":
        state = switch(value, param)
        return Translation(args=(flag, "auto" if state == "auto" else ("on" if state else "off")))
    if param == "gpu_layers":
        # 999 rather than "all": every build takes a number, only new ones take "all".
        return Translation(args=(flag, "999" if is_all(value) else str(whole(param, value))))
    if param == "parallel" and str(value).strip().lower() in {"auto", "-1"}:
        return Translation(args=(flag, "-1"))  # -1: llama-server picks the slots (4, one unified cache)
    if param == "cpu_moe":
        return Translation(args=(flag,) if switch(value, param) is True else ())
    if param == "override_tensor":
        rules = [value] if isinstance(value, str) else list(value)  # type: ignore[call-overload]
        if not all(isinstance(rule, str) and _override_ok(rule) for rule in rules):
            return bad_value(backend, param, value, "PATTERN=DEVICE with a llama.cpp device (CPU, CUDA0 ...)")
        return Translation(args=tuple(part for rule in rules for part in (flag, rule)))
    extra = _translate_extra(backend, flag, param, value)
    if extra is not None:
        return extra
    if param == "tensor_split":
        parts = value if isinstance(value, list | tuple) else str(value).split(",")
        return Translation(args=(flag, ",".join(f"{float(part):g}" for part in parts)))
    if param == "split_mode":
        if str(value).strip().lower() not in ("layer", "row", "none", "tensor"):
            return bad_value(backend, param, value, "layer, row or none")
        return Translation(args=(flag, str(value).strip().lower()))
    return Translation(args=(flag, str(whole(param, value))))


def _override_ok(rule: str) -> bool:
    try:
        offload.parse_override(rule)
    except VramtuiError:
        return False
    return True


def _translate_extra(backend: Backend, flag: str, param: str, value: object) -> Translation | None:
    """The projector, draft, LoRA, prompt cache and MTP parameters (None: a plain whole number)."""
    if param in ("mmproj", "model_draft", "device_draft"):
        return Translation(args=(flag, str(value)))
    if param == "lora":  # llama-server takes several adapters comma-separated
        files = [value] if isinstance(value, str) else list(value)  # type: ignore[call-overload]
        return Translation(args=(flag, ",".join(str(path) for path in files)))
    if param == "gpu_layers_draft":
        return Translation(args=(flag, "999" if is_all(value) else str(whole(param, value))))
    if param == "cache_ram":
        mib = whole(param, value)
        if mib < -1:
            return bad_value(backend, param, value, "MiB, -1 (no limit) or 0 (off)")
        return Translation(args=(flag, str(mib)))
    if param == "mtp":  # the model's own MTP layers as the speculative drafter
        return Translation(args=(flag, "draft-mtp") if switch(value) is True else ())
    return None


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
        why = {"parallel": "its server runs one sequence at a time", "quant": _GGUF_IS_THE_QUANT}
        return no_such(backend, param, why.get(param, ""))
    if param == "kv_dtype":
        types = _kv_types(backend, value)
        if isinstance(types, Translation):
            return types
        return Translation(
            args=("--type_k", str(GGML_TYPES[types[0]]), "--type_v", str(GGML_TYPES[types[1]]))
        )
    if param == "flash_attn":
        state = switch(value)
        if state == "auto":
            return bad_value(backend, param, value, "true or false")
        return Translation(args=(flag, "true" if state else "false"))
    if param == "gpu_layers":
        return Translation(args=(flag, "-1" if is_all(value) else str(whole(param, value))))
    return Translation(args=(flag, str(whole(param, value))))


def _translate_ollama(backend: Backend, param: str, value: object) -> Translation:
    knob = backend.env.get(param)
    if knob is None:
        return no_such(backend, param)
    if not knob.isupper():  # a model option (num_gpu, num_batch): sent with each request
        amount = -1 if param == "gpu_layers" and is_all(value) else whole(param, value)
        return Translation(request_options={knob: amount})
    if param == "kv_dtype":
        name = kv_check(backend, value)
        if isinstance(name, Translation):
            return name
        return Translation(env={knob: name})
    if param == "flash_attn":
        state = switch(value)
        if state == "auto":
            return bad_value(backend, param, value, "true or false")
        return Translation(env={knob: "1" if state else "0"})
    return Translation(env={knob: str(whole(param, value))})


# llama-server's other spellings of the flags vramtui writes (`llama-server --help`, 0.5.0-dev: each
# option's names side by side).
LLAMA_SERVER_SPELLINGS = {
    "-c": "--ctx-size",
    "-np": "--parallel",
    "-b": "--batch-size",
    "-ub": "--ubatch-size",
    "-ngl": "--n-gpu-layers",
    "--gpu-layers": "--n-gpu-layers",
    "-fa": "--flash-attn",
    "-ctk": "--cache-type-k",
    "-ctv": "--cache-type-v",
    "-m": "--model",
    "-t": "--threads",
    "-a": "--alias",
    "-ot": "--override-tensor",
    "-cmoe": "--cpu-moe",
    "-ncmoe": "--n-cpu-moe",
    "-sm": "--split-mode",
    "-ts": "--tensor-split",
    "-mg": "--main-gpu",
    "-mm": "--mmproj",
    "-cram": "--cache-ram",
    "-md": "--model-draft",
    "--spec-draft-model": "--model-draft",
    "-ngld": "--gpu-layers-draft",
    "--n-gpu-layers-draft": "--gpu-layers-draft",
    "--spec-draft-ngl": "--gpu-layers-draft",
    "-devd": "--device-draft",
    "--spec-draft-device": "--device-draft",
}

# What the family shares: GGUF files, llama.cpp's accounting, its ladder, its KV types' order.
_FAMILY = {
    "accounting": "llama.cpp",
    "family": FAMILY,
    "ladder": LADDER,
    "kv_dtype_order": KV_DTYPE_ORDER,
    "quantized_v_needs_flash_attn": True,
    # LLAMA_MAX_SEQ (src/llama-cparams.h); checked on llama-server 0.5.0-dev: `-np 300` exits with
    # "n_seq_max must be <= 256". Ollama's runner is llama.cpp: the same limit.
    "max_sequences": MAX_SEQUENCES,
    "sequence_limit_words": '"n_seq_max must be <= {cap}"',
    "named_fix": named_fix,
    # llama.cpp rounds each KV stream's share of the context up to 256 cells, and prints that n_ctx
    "context_pad_cells": 256,
    "echo": SettingsEcho(echo.read_settings, echo.file_type_word),
}

LLAMA_CPP = Backend(
    name="llama.cpp",
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
        "cpu_moe": "--cpu-moe",
        "n_cpu_moe": "--n-cpu-moe",
        "override_tensor": "--override-tensor",
        "mmproj": "--mmproj",
        "model_draft": "--model-draft",
        "gpu_layers_draft": "--gpu-layers-draft",
        "device_draft": "--device-draft",
        "ctx_size_draft": None,  # today's llama-server sizes the draft at the main context
        "cache_ram": "--cache-ram",
        "lora": "--lora",
        "max_loras": None,
        "max_lora_rank": None,
        "mtp": "--spec-type",
        "tensor_split": "--tensor-split",
        "split_mode": "--split-mode",
        "main_gpu": "--main-gpu",
    },
    # Today's llama-server (`llama-server --help`, 0.5.0-dev): -c 0 is the model's trained length;
    # -np -1 (auto) is 4 slots sharing one unified KV cache (the context is the whole cache, so the
    # slots do not multiply it); -fa auto is on wherever the backend supports it, the CPU included;
    # --fit on. The estimator and the wizard start from these.
    defaults={
        "context": 0,
        "parallel": 4,
        "batch": 2048,
        "ubatch": 512,
        "kv_dtype": "f16",
        "gpu_layers": "all",
        "flash_attn": "auto",
        "fit": "on",
        "cache_ram": 8192,  # MiB of prompt cache in host RAM (-1 no limit, 0 off)
    },
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
        extra_params={"threads": "--threads", "alias": "--alias"},
        # No `--mmap true|false` in today's llama-server: mmap is its default load mode, and
        # `--load-mode none` turns it off. `--fit` takes on|off.
        switches={
            "mmap": ((), ("--load-mode", "none")),
            "fit": (("--fit", "on"), ("--fit", "off")),
            "kv_unified": (("--kv-unified",), ()),  # off: llama-server's own choice (see Settings.kv_unified)
            "swa_full": (("--swa-full",), ()),
        },
        fit_target_flag="--fit-target",
        fit_margin_mib=1024,  # --fit-target's default (common/arg.cpp)
        spellings=LLAMA_SERVER_SPELLINGS,
        also_flags={"kv_dtype": ("--cache-type-v",)},
        # At its default verbosity (3) llama-server prints no buffer sizes, n_ctx, flash attention or
        # fit lines; 4 prints them (checked on 0.5.0-dev). A flag on the command line still wins.
        log_env={"LLAMA_ARG_LOG_VERBOSITY": "4"},
        install="a release from github.com/ggml-org/llama.cpp/releases, or build it with cmake",
    ),
    model_is_file=True,
    # llama-server's own idle footprint, measured here (0.5.0-dev, context 2048): about 200 MiB RSS and
    # 240 MiB of address space (it dies under a 240 MiB RLIMIT_AS); the address space is what a host
    # budget limits. `host_footprint` measures the binary at hand and caches it.
    host_baseline_bytes=240 * MIB,
    measures_footprint=True,
    context_zero_is_trained=True,
    parallel_auto_slots=4,
    threads_per_slot=1,
    flash_attn_auto_is_on=True,
    caps_slot_at_trained=True,
    **_FAMILY,  # type: ignore[arg-type]
)

LLAMA_CPP_PYTHON = Backend(
    name="llama-cpp-python",
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
    # Its server keeps every layer on the host unless told (n_gpu_layers = 0).
    defaults={
        "context": 2048,
        "parallel": 1,
        "batch": 512,
        "ubatch": 512,
        "kv_dtype": "f16",
        "gpu_layers": 0,
        "flash_attn": False,
    },
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
        also_flags={"kv_dtype": ("--type_v",)},
        extra_params={
            "threads": "--n_threads",
            "chat_format": "--chat_format",
            "model_alias": "--model_alias",
            "use_mmap": "--use_mmap",
        },
        install="pip install 'llama-cpp-python[server]' into the Python vramtui runs on",
    ),
    fixed={"parallel": 1},
    model_is_file=True,
    context_zero_is_trained=True,
    # Measured here: 290-380 MiB of address space besides its buffers (Python, numpy, uvicorn,
    # thread stacks and malloc arenas) with no limit; the figure where it cannot be measured. Under a
    # host budget it is measured, as llama-server's is (QA 31 W4: this figure assumed, the wizard cut
    # the context to 512 under a 400 MiB budget where 4096 ran): with one malloc arena,
    # llama-cpp-python 0.3.36 comes up on the tiny model from a 224 MiB limit.
    host_baseline_bytes=352 * MIB,
    measures_footprint=True,
    # its server puts every request behind one lock (llama_cpp.server's llama_outer_lock): one at a time
    **{**_FAMILY, "max_sequences": 1, "sequence_limit_words": ""},  # type: ignore[arg-type]
)

OLLAMA = Backend(
    name="ollama",
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
    defaults={
        "context": 4096,
        "parallel": 1,
        "kv_dtype": "f16",
        "ubatch": 512,
        "gpu_layers": "all",
        "flash_attn": False,
    },
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
        install="https://ollama.com/download; on Linux: curl -fsSL https://ollama.com/install.sh | sh",
    ),
    host_baseline_bytes=128 * MIB,
    **_FAMILY,  # type: ignore[arg-type]
)

# ik_llama.cpp (github.com/ikawrakow/ik_llama.cpp, read at 8337e4cd): mainline's llama-server flags as of
# its fork, plus its own: -mla (0-3), -amb (MiB), -rtr (repack at load, which turns mmap off), -no-fmoe
# (fused MoE is on by default). `--fit` is a bare switch there; no --fit-target, no --load-mode (it has
# --no-mmap), no --spec-type draft-mtp. Its log is mainline's wording: it is diagnosed as llama.cpp.
IK_LLAMA_CPP = replace(
    LLAMA_CPP,
    name="ik_llama.cpp",
    accounting="ik_llama.cpp",
    flags={**LLAMA_CPP.flags, "mtp": None},
    # common/common.h: n_ctx 0 (the trained length), one slot, flash attention on, -ngl -1 (all layers
    # where a GPU is found), an 8 GiB prompt cache; -mla 3 and -amb 256 are the estimator's (memory.py)
    defaults={
        "context": 0,
        "parallel": 1,
        "batch": 2048,
        "ubatch": 512,
        "kv_dtype": "f16",
        "gpu_layers": "all",
        "flash_attn": True,
        "cache_ram": 8192,
    },
    kv_dtypes=(*LLAMA_CPP.kv_dtypes, "q6_0"),
    aliases=("ik_llama", "ik-llama.cpp", "ik_llama_cpp", "ik-llama"),
    launch=replace(
        LLAMA_CPP.launch,  # type: ignore[arg-type]
        extra_params={"threads": "--threads", "alias": "--alias", "mla": "-mla", "attn_max_batch": "-amb"},
        switches={
            "mmap": ((), ("--no-mmap",)),
            "fit": (("--fit",), ()),
            "run_time_repack": (("-rtr",), ()),
            "fused_moe": ((), ("-no-fmoe",)),
        },
        fit_target_flag=None,
        spellings={
            **LLAMA_SERVER_SPELLINGS,
            "--mla-use": "-mla",
            "--attention-max-batch": "-amb",
            "--run-time-repack": "-rtr",
            "--no-fused-moe": "-no-fmoe",
        },
        log_env={},
        install="build it from github.com/ikawrakow/ik_llama.cpp with cmake (its llama-server)",
    ),
    # a llama-server command line with one of these is ik_llama.cpp's (mainline has none of them)
    own_flags=("-mla", "--mla-use", "-amb", "--attention-max-batch", "-fmoe", "-rtr", "-no-fmoe"),
    parallel_auto_slots=None,
)

BACKENDS: tuple[Backend, ...] = (LLAMA_CPP, LLAMA_CPP_PYTHON, OLLAMA, IK_LLAMA_CPP)
