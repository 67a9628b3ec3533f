"""vLLM (`vllm serve MODEL`): how it names the shared parameters, its defaults, how it launches.

Flags and defaults as vLLM 0.32 has them (`vllm serve --help=all`, vllm/engine/arg_utils.py; checked
against the real parser by tests/engines/test_vllm_flags.py); the rungs it has are in ladder.py.
"""

from __future__ import annotations

from collections.abc import Mapping

from vramtui.core.backends.base import (
    Backend,
    Launch,
    Translation,
    bad_value,
    gib,
    kv_dtype_name,
    no_such,
    size_bytes,
    switch,
    whole,
)
from vramtui.core.backends.vllm.addressing import CPU_WORKER_ADDRESS_BYTES
from vramtui.core.backends.vllm.ladder import KV_DTYPE_ORDER, LADDER, QUANT_ORDER, named_fix
from vramtui.core.backends.vllm.version import minor_of
from vramtui.core.estimate.quant import is_gguf_only
from vramtui.core.units import GIB

FAMILY = "vllm"
# --gpu-memory-utilization when unset (0.9 before 0.11). On the CPU build the same flag is the share of
# NUMA node 0's memory the worker may take, checked against what is free at start.
DEFAULT_SHARE = 0.92

_VLLM_KV = {
    "auto": "auto",
    "f16": "auto",
    "bf16": "auto",
    "fp8": "fp8",
    "fp8_e4m3": "fp8_e4m3",
    "fp8_e5m2": "fp8_e5m2",
}
# flash_attn on/off as --attention-backend names them (VLLM_ATTENTION_BACKEND is gone since 0.11).
_ATTENTION = {True: "FLASH_ATTN", False: "TRITON_ATTN", "auto": "auto"}


def serve_defaults(device_bytes: int | None, on_cpu: bool, world_size: int = 1) -> dict[str, object]:
    """`vllm serve`'s max-num-seqs and max-num-batched-tokens when unset (EngineArgs.get_batch_defaults).

    V1 always chunks prefill: the profile run and every step take at most max-num-batched-tokens tokens.
    """
    if on_cpu:
        return {"parallel": 128 * world_size, "batch": 2048 * world_size}
    memory = device_bytes or 0
    if memory >= 160 * GIB:
        return {"parallel": 1024, "batch": 16384}
    if memory >= 70 * GIB:  # an A100 80GB keeps the smaller batch; its name is not known here
        return {"parallel": 1024, "batch": 8192}
    return {"parallel": 256, "batch": 2048}


def _translate_vllm(backend: Backend, param: str, value: object) -> Translation:
    if param == "flash_attn":
        return Translation(args=("--attention-backend", _ATTENTION[switch(value)]))
    if param == "context" and str(value).strip().lower() in ("auto", "-1"):
        return Translation(args=("--max-model-len", "auto"))  # the largest length that fits
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
    if param == "kv_cache_memory":
        return Translation(args=(flag, str(size_bytes(param, value))))
    if param == "quant":
        if is_gguf_only(str(value)):  # QA 18: IQ2_M, Q6_K_L were taken as vLLM methods
            return bad_value(
                backend,
                param,
                value,
                "a method it applies while loading: fp8, bitsandbytes, ...; a GGUF file "
                "type is the file's own: give vLLM the .gguf",
            )
        return Translation(args=(flag, str(value)))
    if param in ("max_loras", "max_lora_rank"):  # LoRA slots exist only with --enable-lora
        return Translation(args=("--enable-lora", flag, str(whole(param, value))))
    return Translation(args=(flag, str(whole(param, value))))


def _device_defaults(device_bytes: int | None, on_cpu: bool) -> Mapping[str, object]:
    return serve_defaults(device_bytes, on_cpu)


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
        "flash_attn": "--attention-backend",
        "cpu_offload": "--cpu-offload-gb",
        "kv_cache_memory": "--kv-cache-memory-bytes",
        "max_loras": "--max-loras",
        "max_lora_rank": "--max-lora-rank",
        "tensor_parallel_size": "--tensor-parallel-size",
        "pipeline_parallel_size": "--pipeline-parallel-size",
    },
    env_sizes={"VLLM_CPU_KVCACHE_SPACE": ("kv_cache_memory", "GiB")},
    # gpu_layers "all": every layer sits on the GPU (it has no per-layer knob). parallel and batch are
    # those of a card under 70 GiB; serve_defaults has them for every device.
    defaults={
        "parallel": 256,
        "mem_share": DEFAULT_SHARE,
        "kv_dtype": "auto",
        "batch": 2048,
        "gpu_layers": "all",
        "flash_attn": "auto",
    },
    device_defaults=_device_defaults,
    engine_build_of=minor_of,
    parallel_caps_requests=True,
    cpu_bill_holds_engine=True,  # memory.py's CPU_WORKER_BYTES + CPU_FRONTEND_BYTES
    address_space_floor=CPU_WORKER_ADDRESS_BYTES,  # its CPU worker's, under a host budget (QA 29)
    # SchedulerConfig's check (vllm/config/scheduler.py), checked on vLLM 0.32's CPU build
    # vllm/config/model.py: the derived max_model_len (max_position_embeddings, with its rope scaling)
    context_limit_words=(
        'vLLM refuses to start: "User-specified max_model_len ({context}) is greater than the derived '
        'max_model_len (max_position_embeddings={trained})"'
    ),
    context_limit_env="VLLM_ALLOW_LONG_MAX_MODEL_LEN",
    # "Cannot use AttentionBackendEnum.FLASH_ATTN backend on CPU": it runs on its own CPU attention
    cpu_ignored=("flash_attn",),
    # torch.ops._C.static_scaled_fp8_quant is not built for the CPU: "expected at most 0 argument(s)"
    cpu_refused=(("quant", "fp8"),),
    # the server list in vLLM's own terms (QA 14: "ctx 1024, slots 4, KV auto*")
    setting_words=(
        ("context", "max-model-len"),
        ("parallel", "max-num-seqs"),
        ("kv_dtype", "kv-cache-dtype"),
    ),
    cpu_share_words=(
        "vLLM's CPU build takes {share} of this machine's memory ({size}) for itself and its KV cache: "
        "set kv_cache_memory (or VLLM_CPU_KVCACHE_SPACE in [env]) to hold less"
    ),
    batch_limit_words=(
        'vLLM refuses to start: "max_num_batched_tokens ({batch}) must be greater than or equal to '
        'max_num_seqs ({sequences})"'
    ),
    named_fix=named_fix,
    context_auto=True,
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
            "block_size": "--block-size",
        },
        value_names={"flash_attn": {name: state for state, name in _ATTENTION.items()}},
        switches={
            "enforce_eager": (("--enforce-eager",), ()),
            "trust_remote_code": (("--trust-remote-code",), ()),
            "enable_prefix_caching": (("--enable-prefix-caching",), ("--no-enable-prefix-caching",)),
        },
        install="pip install vllm; with no GPU, its CPU build: scripts/install_vllm.sh in vramtui's repository",
    ),
    ladder=LADDER,
    kv_dtype_order=KV_DTYPE_ORDER,
    quant_order=QUANT_ORDER,
)

BACKENDS: tuple[Backend, ...] = (VLLM,)
