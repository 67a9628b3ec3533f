"""transformers, through vramtui's own small OpenAI-compatible runner (vramtui/runners/transformers_server.py).

How it names the shared parameters, its defaults, how it launches; the rungs it has are in ladder.py.
"""

from __future__ import annotations

import difflib
import re

from vramtui.core.backends.base import Backend, Launch, Translation, bad_value, gib, no_such, switch, whole
from vramtui.core.backends.transformers.ladder import LADDER, QUANT_ORDER
from vramtui.core.backends.transformers.torchbuild import device_map_here
from vramtui.core.units import MIB

FAMILY = "transformers"

_BNB = {
    "bnb-4bit": "bnb-4bit",
    "4bit": "bnb-4bit",
    "nf4": "bnb-4bit",
    "bnb-8bit": "bnb-8bit",
    "8bit": "bnb-8bit",
    "int8": "bnb-8bit",  # the estimator's word for bitsandbytes' 8-bit
    "bnb-nf4": "bnb-4bit",
}


def _translate_transformers(backend: Backend, param: str, value: object) -> Translation:
    flag = backend.flags.get(param)
    if flag is None:
        why = {"kv_dtype": "the dynamic cache takes the model's dtype: set dtype"}.get(param, "")
        return no_such(backend, param, why)
    if param == "quant":
        mapped = _BNB.get(str(value).strip().lower())
        if mapped is None:
            return bad_value(
                backend,
                param,
                value,
                "bnb-4bit (nf4) or bnb-8bit (int8) at load; awq and gptq are checkpoints quantized so",
            )
        return Translation(args=(flag, mapped))
    if param == "flash_attn":
        state = switch(value, param)
        if state == "auto":
            return bad_value(backend, param, value, "true or false")
        return Translation(args=(flag, "flash_attention_2" if state else "sdpa"))
    if param == "cpu_offload":
        return Translation(args=(flag, f"cpu={gib(param, value):g}GiB"))
    return Translation(args=(flag, str(whole(param, value))))


# the runner's --dtype (vramtui/runners/transformers_server.py): "auto", or torch's name of the type
_DTYPES = ("auto", "float16", "bfloat16", "float32")
# accelerate's device maps by name; a device ("cpu", "cuda:1", "mps") or a GPU's number puts it all there
_DEVICE_MAPS = ("auto", "balanced", "balanced_low_0", "sequential")
_DEVICE_RE = re.compile(r"(?:cpu|mps|xpu|npu|cuda|cuda:\d+|\d+)")


def _check_dtype(value: object) -> str | None:
    text = str(value).strip()
    if text in _DTYPES:
        return None
    if text.lower() in ("float8", "fp8", "int8", "int4", "float4", "fp4", "nf4"):
        hint = ' (8-bit and 4-bit loads are quant = "bnb-8bit" or "bnb-4bit")'
    else:
        near = difflib.get_close_matches(text.lower(), _DTYPES, n=1, cutoff=0.6)
        hint = f'; did you mean "{near[0]}"?' if near else ""
    return f"dtype = {value!r}: transformers loads at {', '.join(_DTYPES)}{hint}"


def _check_max_memory(value: object) -> str | None:
    from vramtui.core.errors import VramtuiError
    from vramtui.core.estimate.devices import parse_max_memory

    try:
        caps = parse_max_memory(str(value))
    except VramtuiError as error:
        return f"{error} (max_memory = {value!r})"
    if any(size <= 0 for size in caps.values()):
        return f"max_memory = {value!r}: each device's cap must be above 0, such as 0=20GiB,cpu=64GiB"
    return None


def _check_device_map(value: object) -> str | None:
    text = str(value).strip().lower()
    if text in _DEVICE_MAPS or _DEVICE_RE.fullmatch(text):
        return None
    return (
        f"device_map = {value!r}: accelerate takes {', '.join(_DEVICE_MAPS)}, or one device for the whole "
        'model ("cpu", "cuda:0", "mps")'
    )


TRANSFORMERS = Backend(
    name="transformers",
    accounting="transformers",
    family=FAMILY,
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
    # gpu_layers "all": device_map puts the whole model on the GPU unless max_memory says otherwise.
    defaults={"parallel": 1, "kv_dtype": "bf16", "gpu_layers": "all", "flash_attn": False},
    kv_dtypes=("f16", "bf16", "f32"),
    aliases=("hf", "huggingface", "accelerate"),
    launch=Launch(
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
        value_checks={
            "dtype": _check_dtype,
            "max_memory": _check_max_memory,
            "device_map": _check_device_map,
        },
        # QA 26 D9: device_map = "cuda:0" on a CPU-only torch loaded for 5 s before failing
        machine_checks={"device_map": device_map_here},
        install="pip install 'vramtui[transformers]'",
    ),
    ladder=LADDER,
    quant_order=QUANT_ORDER,
    model_is_folder=True,
    # The address space its runner maps beyond the resident runtime row its CPU bill holds (~404 MiB).
    # Measured here (QA 26 D5, torch 2.13 CPU, transformers 5.25): on a 0.1M-parameter model it came up
    # under a 900 MiB budget, not under 850 ("can't start new thread"): ~880 MiB in all. The generic
    # 256 MiB said 850 MiB fit with 70 MiB to spare.
    host_baseline_bytes=480 * MIB,
    kv_grows_per_request=True,
    param_words={
        "load_in_4bit": 'quant = "bnb-4bit"',
        "load_in_8bit": 'quant = "bnb-8bit"',
        "quantization_config": 'quant = "bnb-4bit" or "bnb-8bit"',
        "max_new_tokens": "context (the runner's --max-length: prompt and answer together)",
        "max_length": "context",
    },
    version_packages=("transformers", "torch", "accelerate"),
    arg_packages={
        "flash_attention_2": ("flash_attn", "flash-attn"),
        "bnb-4bit": ("bitsandbytes", "bitsandbytes"),
        "bnb-8bit": ("bitsandbytes", "bitsandbytes"),
    },
)

BACKENDS: tuple[Backend, ...] = (TRANSFORMERS,)
