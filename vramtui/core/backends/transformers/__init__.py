"""transformers, through vramtui's own small OpenAI-compatible runner (vramtui/runners/transformers_server.py).

How it names the shared parameters, its defaults, how it launches; the rungs it has are in ladder.py.
"""

from __future__ import annotations

from vramtui.core.backends.base import Backend, Launch, Translation, bad_value, gib, no_such, switch, whole
from vramtui.core.backends.transformers.ladder import LADDER, QUANT_ORDER

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
        install="pip install 'vramtui[transformers]'",
    ),
    ladder=LADDER,
    quant_order=QUANT_ORDER,
    model_is_folder=True,
    version_packages=("transformers", "torch", "accelerate"),
    arg_packages={
        "flash_attention_2": ("flash_attn", "flash-attn"),
        "bnb-4bit": ("bitsandbytes", "bitsandbytes"),
        "bnb-8bit": ("bitsandbytes", "bitsandbytes"),
    },
)

BACKENDS: tuple[Backend, ...] = (TRANSFORMERS,)
