"""vLLM (`vllm serve MODEL`): how it names the shared parameters, its defaults, how it launches.

Flags from vllm/engine/arg_utils.py; the rungs it has are in ladder.py.
"""

from __future__ import annotations

from vramtui.core.backends.base import (
    Backend,
    Launch,
    Translation,
    bad_value,
    gib,
    kv_dtype_name,
    no_such,
    switch,
    whole,
)
from vramtui.core.backends.vllm.ladder import KV_DTYPE_ORDER, LADDER, QUANT_ORDER

FAMILY = "vllm"

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
        return no_such(
            backend, "flash_attn=off", "vLLM picks its attention backend: set VLLM_ATTENTION_BACKEND in [env]"
        )
    flag = backend.flags.get(param)
    if flag is None:
        why = {
            "gpu_layers": "it offloads by size: use cpu_offload (GiB)",
            "ubatch": "max-num-batched-tokens (batch) is the nearest",
        }.get(param, "")
        return no_such(backend, param, why)
    if param == "kv_dtype":
        mapped = _VLLM_KV.get(kv_dtype_name(value))
        if mapped is None:
            return bad_value(backend, param, value, "auto, fp8, fp8_e4m3, fp8_e5m2")
        return Translation(args=(flag, mapped))
    if param == "mem_share":
        share = float(value)  # type: ignore[arg-type]
        if not 0 < share <= 1:
            return bad_value(backend, param, value, "a share of the card between 0 and 1")
        return Translation(args=(flag, f"{share:g}"))
    if param == "cpu_offload":
        return Translation(args=(flag, f"{gib(param, value):g}"))
    if param == "quant":
        return Translation(args=(flag, str(value)))
    if param in ("max_loras", "max_lora_rank"):  # LoRA slots exist only with --enable-lora
        return Translation(args=("--enable-lora", flag, str(whole(param, value))))
    return Translation(args=(flag, str(whole(param, value))))


VLLM = Backend(
    name="vllm",
    accounting="vllm",
    family=FAMILY,
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
        "max_loras": "--max-loras",
        "max_lora_rank": "--max-lora-rank",
        "tensor_parallel_size": "--tensor-parallel-size",
        "pipeline_parallel_size": "--pipeline-parallel-size",
    },
    env={"flash_attn": "VLLM_ATTENTION_BACKEND"},
    # gpu_layers "all": every layer sits on the GPU (it has no per-layer knob).
    defaults={
        "parallel": 256,
        "mem_share": 0.9,
        "kv_dtype": "auto",
        "batch": 2048,
        "gpu_layers": "all",
        "flash_attn": False,
    },
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
    ladder=LADDER,
    kv_dtype_order=KV_DTYPE_ORDER,
    quant_order=QUANT_ORDER,
)

BACKENDS: tuple[Backend, ...] = (VLLM,)
