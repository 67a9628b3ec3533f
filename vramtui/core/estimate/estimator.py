"""Memory arithmetic per backend: will this model fit this card, and what to cut if it does not.

Each backend accounts memory its own way, so each has its own function:
- llama.cpp (and Ollama, which runs it): exact tensor bytes per layer; KV cells = context padded to 256;
  sliding-window layers keep min(cells, window*streams + ubatch) cells; q8_0/q4_0 caches use ggml block sizes
  (34/32, 18/32 bytes per element); a compute buffer sized by the worst-case graph of one micro-batch (with
  the KQ matrix when flash attention is off, or the logits of the micro-batch); layers not offloaded and
  the token embedding live in host RAM.
- vLLM: the budget is device x gpu_memory_utilization; weights, non-torch memory and the activation peak of a
  profile run at max_num_batched_tokens come off it; the rest is KV blocks of 16 tokens (so the rows never
  exceed the budget; CUDA graphs are captured outside it). Its token
  capacity and "maximum concurrency" are reported as it prints them.
- transformers: weights with bitsandbytes/GPTQ/AWQ leaving embeddings, lm_head and norms in 16-bit (and the
  16-bit load-time peak of on-the-fly quantization); a dynamic KV cache that grows with the sequence;
  generate()'s prefill: the MLP of every token, logits of the last position only (logits_to_keep=1) and,
  with eager attention, the score matrices.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from vramtui.core.backends import get_backend
from vramtui.core.errors import VramtuiError
from vramtui.core.estimate import quant as q
from vramtui.core.estimate.modelinfo import (
    ModelInfo,
    TensorGroup,
    load_model_info,
    split_params,
    tensor_groups,
)
from vramtui.core.units import GIB, MIB, parse_size

DEFAULT_DEVICE_BYTES = 24 * GIB
DEFAULT_SAFETY = 0.8
VLLM_DEFAULT_UTILIZATION = 0.9
VLLM_BLOCK_TOKENS = 16
LLAMA_CPP_CELL_PAD = 256
# CUDA context + cuBLAS/cuDNN workspaces a process holds before any model byte (300-500 MiB on current
# drivers; nvidia-smi shows it, the engines' own logs do not).
CUDA_CONTEXT_BYTES = 400 * MIB
# vLLM's "non_torch_memory": CUDA context share, NCCL and cuBLAS buffers outside PyTorch's allocator.
VLLM_NON_TORCH_BYTES = 512 * MIB
# vLLM captures CUDA graphs for batch sizes up to 512 after the KV cache is allocated (outside the profile).
VLLM_CUDA_GRAPH_BYTES = 256 * MIB
# Far past any real model (the deepest have under 200 layers); bounds the per-layer loops the solvers repeat.
MAX_LAYERS = 2048
# The context solver searches no further than this (a trained length of 10**30 in a config is a typo).
MAX_CONTEXT_SEARCH = 1 << 27
# PyTorch's caching allocator keeps freed blocks; transformers runs grow by this share of the dynamic part.
TORCH_FRAGMENTATION = 0.10


@dataclass
class Settings:
    """How the model is run. None means the backend's own default."""

    backend: str = "llama.cpp"
    context: int | None = None
    parallel: int | None = None
    batch: int | None = None
    ubatch: int | None = None
    kv_dtype: str | None = None
    flash_attn: bool | None = None
    gpu_layers: int | None = None  # llama.cpp family: None = all layers
    quant: str | None = None  # quantization applied at load (overrides the model's)
    device_bytes: int = DEFAULT_DEVICE_BYTES
    safety: float | None = None  # usable share (vLLM: gpu_memory_utilization); None: 0.8 (vLLM 0.9)
    on_gpu: bool = True  # False: what the engine allocates on a CPU-only run (no CUDA context)

    def __post_init__(self) -> None:
        self.backend = get_backend(self.backend).name
        for name in ("context", "parallel", "batch", "ubatch", "gpu_layers"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                raise VramtuiError(f"{name} must be a non-negative whole number, not {value!r}")
        if self.parallel == 0:
            raise VramtuiError("parallel must be at least 1")
        if self.safety is not None and not 0 < self.safety <= 1:
            raise VramtuiError(f"safety must be a share between 0 and 1, not {self.safety!r}")
        if self.device_bytes <= 0:
            raise VramtuiError("device memory must be positive")
        if self.kv_dtype is not None:
            q.kv_bytes_per_element(self.kv_dtype)  # validates
        if self.quant is not None:
            self.quant = q.normalize_quant(self.quant)

    @property
    def accounting(self) -> str:
        return get_backend(self.backend).accounting

    @property
    def share(self) -> float:
        if self.safety is not None:
            return self.safety
        return VLLM_DEFAULT_UTILIZATION if self.accounting == "vllm" else DEFAULT_SAFETY

    @classmethod
    def from_params(
        cls,
        params: Mapping[str, Any],
        backend: str = "llama.cpp",
        device_bytes: int | str | None = None,
        safety: float | None = None,
    ) -> Settings:
        """From a launch profile's shared vocabulary (context, parallel, batch, ubatch, kv_dtype, gpu_layers,
        mem_share, quant, flash_attn). Unknown keys are ignored; mem_share becomes the usable share."""

        def as_int(name: str) -> int | None:
            value = params.get(name)
            if value is None or value == "" or str(value).strip().lower() in ("all", "auto", "max"):
                return None
            if name == "gpu_layers" and str(value).strip() == "-1":  # llama.cpp's "all layers"
                return None
            try:
                return int(value)
            except (TypeError, ValueError):
                raise VramtuiError(f"{name} must be a whole number, not {value!r}") from None

        flash = params.get("flash_attn")
        if isinstance(flash, str):
            flash = {"on": True, "true": True, "1": True, "off": False, "false": False, "0": False}.get(
                flash.strip().lower()
            )
        share = params.get("mem_share")
        if safety is None and share is not None:
            try:
                safety = float(share)
            except (TypeError, ValueError):
                raise VramtuiError(f"mem_share must be a share such as 0.9, not {share!r}") from None
        kv = params.get("kv_dtype")
        return cls(
            backend=backend,
            context=as_int("context"),
            parallel=as_int("parallel"),
            batch=as_int("batch"),
            ubatch=as_int("ubatch"),
            kv_dtype=str(kv) if kv not in (None, "", "auto") else None,
            flash_attn=flash if isinstance(flash, bool) else None,
            gpu_layers=as_int("gpu_layers"),
            quant=str(params["quant"]) if params.get("quant") else None,
            device_bytes=parse_size(device_bytes) if device_bytes is not None else DEFAULT_DEVICE_BYTES,
            safety=safety,
        )


@dataclass
class Estimate:
    """Bytes on the device, a verdict, and the solvers' answers."""

    backend: str
    context: int
    parallel: int
    weights_bytes: int  # on the device
    weights_host_bytes: int  # in host RAM (layers not offloaded, llama.cpp's token embedding)
    kv_cache_bytes: int
    kv_bytes_per_token: int
    activations_bytes: int
    overhead_bytes: int
    fragmentation_bytes: int
    total_bytes: int
    device_bytes: int
    usable_bytes: int
    fits: bool
    max_context: int | None = None
    max_parallel: int | None = None
    gpu_layers_fit: int | None = None
    host_bytes_needed: int = 0
    gpu_layers: int | None = None
    n_layers: int = 0
    kv_cells: int = 0
    kv_dtype: str = "f16"
    compute_buffer_bytes: int = 0
    output_buffer_bytes: int = 0
    load_peak_bytes: int | None = None
    kv_cache_tokens: int | None = None  # vLLM: token capacity of the KV blocks
    max_concurrency: float | None = None  # vLLM: as it prints "Maximum concurrency ... x"
    load_peak_fits: bool | None = None  # transformers: None when there is no separate load peak
    reason: str | None = None  # why it does not fit when the total is not the cause
    past_trained_context: bool = False  # the context asked for exceeds max_position_embeddings/context_length
    quant: str | None = None  # the weights' type as sized: --quant when given, else the model's own
    bits_per_weight: float | None = None
    quant_applied: bool = False  # True when --quant changed the model's own type
    # Where the breakdown lives: "gpu", or "host" for a CPU-only run (then the device is host RAM).
    device: str = "gpu"
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["usable_share"] = round(self.usable_bytes / self.device_bytes, 4) if self.device_bytes else None
        out["headroom_bytes"] = self.usable_bytes - self.total_bytes
        return out


# --- shared helpers ------------------------------------------------------------------------------------------


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def _kv_dtype(info: ModelInfo, settings: Settings) -> str:
    if settings.kv_dtype:
        return settings.kv_dtype.lower()
    if settings.accounting == "llama.cpp":
        return "f16"
    return info.dtype if info.dtype in ("f16", "bf16", "f32") else "bf16"


def _is_swa(info: ModelInfo, layer: int) -> bool:
    # the pattern puts the global layer last in each group (Gemma: layers 5, 11, ... are global)
    if not info.swa_layers:
        return False
    if info.swa_layers >= info.n_layers:
        return True
    pattern = max(2, round(info.n_layers / max(1, info.n_layers - info.swa_layers)))
    return (layer + 1) % pattern != 0


def _kv_row_elements(info: ModelInfo, layer: int, accounting: str) -> tuple[int, int]:
    """(K elements, V elements) one token stores in one layer."""
    if info.kv_lora_rank:
        latent = info.kv_lora_rank + info.qk_rope_head_dim
        if accounting == "vllm":
            return latent, 0  # one joint latent per token
        if accounting == "llama.cpp":
            return latent, info.kv_lora_rank
        # transformers caches the decompressed per-head keys and values
        return info.n_heads * info.head_dim_k, info.n_heads * info.head_dim_v
    kv_heads = info.kv_heads_at(layer)
    return kv_heads * info.head_dim_k, kv_heads * info.head_dim_v


def kv_bytes_per_token(info: ModelInfo, kv_dtype: str = "f16", accounting: str = "llama.cpp") -> int:
    """Bytes of K and V one token takes over all layers (no padding, every layer full)."""
    total = 0
    for layer in range(info.n_layers):
        k, v = _kv_row_elements(info, layer, accounting)
        total += q.kv_row_bytes(kv_dtype, k) + (q.kv_row_bytes(kv_dtype, v) if v else 0)
    return total


def _dtype_bytes(dtype: str) -> int:
    return 4 if dtype == "f32" else 2


# --- weights --------------------------------------------------------------------------------------------------

_KQUANT_FALLBACK = {"q4_k": "q5_0", "q5_k": "q5_1", "q6_k": "q8_0", "q2_k": "iq4_nl", "q3_k": "iq4_nl"}


def _group_bytes(group: TensorGroup, type_name: str) -> int:
    block = q._ggml_sizes()[type_name][0]
    if group.cols % block:
        type_name = _KQUANT_FALLBACK.get(type_name, "f16")  # llama-quantize's fallback for odd rows
        if group.cols % q._ggml_sizes()[type_name][0]:
            type_name = "f16"
    return q.ggml_row_bytes(type_name, group.cols) * group.rows * group.count


@dataclass(frozen=True)
class LayerWeights:
    layers: tuple[int, ...]
    token_embd: int
    output: int  # what the output layer puts on the GPU (the embedding again when tied)
    other: int


def llama_cpp_weights(info: ModelInfo, file_type: str | None = None) -> LayerWeights:
    """Bytes per layer as llama.cpp loads them: exact from a GGUF, else llama-quantize's choices."""
    if info.layer_bytes is not None and info.token_embd_bytes is not None and file_type is None:
        output = info.output_bytes if info.output_bytes is not None else info.token_embd_bytes
        return LayerWeights(info.layer_bytes, info.token_embd_bytes, output, info.other_bytes)
    ftype = (
        file_type or info.file_type or info.quant or ("f16" if info.dtype in ("bf16", "f32") else info.dtype)
    )
    ftype = q.normalize_quant(ftype)
    if q.is_hf_quant(ftype):
        ftype = "q4_0" if q.bits_per_weight(ftype) < 6 else "q8_0"
    layers = [0] * info.n_layers
    token_embd = output = other = 0
    planned_params = 0
    for group in tensor_groups(info):
        type_name = q.gguf_tensor_type(
            ftype, q.TensorRole(group.kind, group.layer), info.n_layers, info.tied_embeddings
        )
        size = _group_bytes(group, type_name)
        planned_params += group.n_elements
        if group.layer >= 0:
            layers[group.layer] += size
        elif group.kind == "token_embd":
            token_embd = size
        elif group.kind == "output":
            output = size
        else:
            other += size
    if info.tied_embeddings:
        output = token_embd
    # a parameter count given by the user rules over the shapes we guessed
    if info.n_params and not info.params_exact and planned_params:
        scale = info.n_params / planned_params
        if abs(scale - 1) > 0.01:
            layers = [int(b * scale) for b in layers]
            token_embd, output, other = int(token_embd * scale), int(output * scale), int(other * scale)
    return LayerWeights(tuple(layers), token_embd, output, other)


def hf_weights_bytes(
    info: ModelInfo, quant: str | None, accounting: str = "transformers"
) -> tuple[int, int | None, list[str]]:
    """(runtime weight bytes, load-time peak or None, notes) for vLLM and transformers."""
    notes: list[str] = []
    wanted = q.normalize_quant(quant) if quant else None
    if info.weights_bytes is not None and (wanted is None or wanted == info.quant):
        return info.weights_bytes, None, notes
    method = wanted or info.quant
    if accounting == "vllm" and wanted in ("nf4", "fp4") and info.quant is None:
        # vLLM's in-flight bitsandbytes loader always quantizes to NF4 with double quantization
        method = "nf4-dq"
        notes.append("vLLM quantizes bitsandbytes in flight as NF4 with double quantization")
    n_params = info.n_params or 0
    unquantized = _dtype_bytes(info.dtype)
    if method is None or method in ("f16", "bf16", "f32"):
        size = n_params * (_dtype_bytes(method) if method else unquantized)
        return size, None, notes
    linear, kept = split_params(info)
    if q.is_hf_quant(method):
        size = int(linear * q.bits_per_weight(method) / 8 + kept * 2)
    else:  # a GGUF type through vLLM's GGUF loader: everything at that width
        size = int(n_params * q.bits_per_weight(method) / 8)
    peak = None
    if wanted and info.quant is None and info.weights_source != "gguf":
        peak = n_params * 2
        notes.append(q.load_peak_note(method))
    return size, peak, notes


# --- llama.cpp ------------------------------------------------------------------------------------------------


def _llama_defaults(info: ModelInfo, settings: Settings) -> dict[str, Any]:
    backend = get_backend(settings.backend)
    ollama = backend.name == "ollama"
    context = settings.context
    if context is None:
        if ollama:  # Ollama picks the context from the free VRAM
            dev = settings.device_bytes
            context = 4096 if dev < 23 * GIB else 32768 if dev < 47 * GIB else 262144
        else:
            context = int(backend.defaults.get("context", 4096))
    if context == 0:  # -c 0: the model's training context
        context = info.max_context or 4096
    parallel = settings.parallel or int(backend.defaults.get("parallel", 1))
    if ollama:
        # Ollama clamps num_ctx to the trained length, then gives the runner num_ctx x OLLAMA_NUM_PARALLEL
        # cells (server/sched.go: NumCtx * numParallel): every slot gets the full num_ctx
        if info.max_context:
            context = min(context, info.max_context)
        context *= parallel
    batch = settings.batch or int(backend.defaults.get("batch", 2048))
    ubatch = min(settings.ubatch or int(backend.defaults.get("ubatch", 512)), batch)
    flash = settings.flash_attn
    if flash is None:
        # llama.cpp's "auto" turns flash attention on where the GPU backend supports it; Ollama: off
        flash = settings.on_gpu and not ollama
    return {
        "context": context,
        "parallel": parallel,
        "ubatch": ubatch,
        "flash": flash,
        "kv_dtype": _kv_dtype(info, settings),
    }


def llama_cpp_kv_cells(info: ModelInfo, context: int, parallel: int, ubatch: int) -> tuple[int, int]:
    """(cells of full-attention layers, cells of sliding-window layers) as llama.cpp sizes its cache."""
    cells = _round_up(max(context, 1), LLAMA_CPP_CELL_PAD)
    swa_cells = cells
    if info.swa_layers and info.sliding_window:
        swa_cells = min(cells, _round_up(info.sliding_window * parallel + ubatch, LLAMA_CPP_CELL_PAD))
    return cells, swa_cells


def _llama_compute_bytes(info: ModelInfo, cells: int, ubatch: int, flash: bool) -> int:
    """The graph allocator's peak for one micro-batch: the largest set of f32 tensors alive at once.

    The KQ mask (cells x ubatch; f16 with flash attention, else f32) is an input every layer reads, so it
    stays alive through the layers. Phases: attention (residual, normed input, Q, K, V, and without flash
    attention the KQ scores of all heads; soft_max runs in place), the MLP (gate, up and their product,
    residual and normed input) and the output (logits of every token of the micro-batch, as the worst
    case llama.cpp reserves for).
    """
    f32 = 4
    h = info.hidden
    ub = min(ubatch, cells)  # llama.cpp clamps the batch to the context
    q_width = info.n_heads * info.head_dim_k
    kv_width = info.n_kv_heads * (info.head_dim_k + info.head_dim_v)
    mask = cells * _round_up(ub, 64) * (2 if flash else f32)
    out_phase = (info.vocab + h) * ub * f32
    attn_phase = mask + (3 * h + q_width + kv_width) * ub * f32
    if not flash:
        attn_phase += info.n_heads * cells * ub * f32
    ff = info.intermediate or 4 * h
    if info.is_moe:
        ff = max(
            ff if info.n_dense_layers else 0, (info.moe_intermediate or ff) * max(1, info.n_experts_used)
        )
    ffn_phase = mask + (3 * ff + 4 * h) * ub * f32
    return max(out_phase, attn_phase, ffn_phase)


def _llama_cpp(info: ModelInfo, settings: Settings, file_type: str | None) -> Estimate:
    d = _llama_defaults(info, settings)
    context, parallel, ubatch, flash, kv_dtype = (
        d["context"],
        d["parallel"],
        d["ubatch"],
        d["flash"],
        d["kv_dtype"],
    )
    notes: list[str] = []
    weights = llama_cpp_weights(info, file_type)
    n = info.n_layers
    gpu_layers = n + 1 if settings.gpu_layers is None else min(settings.gpu_layers, n + 1)
    if not settings.on_gpu:
        gpu_layers = 0
    # llama.cpp offloads the last layers first; the output layer is the (n+1)-th
    first_gpu_layer = n - min(gpu_layers, n)
    cells, swa_cells = llama_cpp_kv_cells(info, context, parallel, ubatch)
    kv_gpu = kv_host = 0
    for layer in range(n):
        k, v = _kv_row_elements(info, layer, "llama.cpp")
        layer_cells = swa_cells if _is_swa(info, layer) else cells
        size = layer_cells * (q.kv_row_bytes(kv_dtype, k) + (q.kv_row_bytes(kv_dtype, v) if v else 0))
        if layer >= first_gpu_layer and settings.on_gpu:
            kv_gpu += size
        else:
            kv_host += size
    per_token = kv_bytes_per_token(info, kv_dtype, "llama.cpp")
    output_on_gpu = settings.on_gpu and gpu_layers > n
    w_gpu = sum(weights.layers[first_gpu_layer:]) if settings.on_gpu else 0
    if output_on_gpu:
        w_gpu += weights.output + weights.other  # tied: a copy of the embedding goes to the GPU
    # the token embedding is always read on the host (llama.cpp keeps the input layer there)
    w_host = weights.token_embd + sum(weights.layers[:first_gpu_layer])
    if not output_on_gpu:
        w_host += weights.other + (0 if info.tied_embeddings else weights.output)
    if not settings.on_gpu:
        w_host = weights.token_embd + sum(weights.layers) + weights.other
        w_host += 0 if info.tied_embeddings else weights.output
    compute = _llama_compute_bytes(info, cells, ubatch, flash)
    output_buffer = info.vocab * parallel * 4  # logits of the last token of each sequence, host side
    if settings.on_gpu and gpu_layers > 0:
        activations, overhead = compute, CUDA_CONTEXT_BYTES
        host_compute = 0 if output_on_gpu else compute
    else:
        activations, overhead, host_compute = 0, 0, compute
    if settings.on_gpu and gpu_layers == 0:
        notes.append("no layer on the GPU: everything runs from host RAM")
    if not flash and kv_dtype not in ("f16", "bf16", "f32"):
        notes.append("llama.cpp refuses a quantized V cache without flash attention: add --flash-attn")
    if not flash and settings.on_gpu:
        notes.append("flash attention off: the compute buffer holds the KQ matrix (heads x cells x ubatch)")
    total = w_gpu + kv_gpu + activations + overhead
    usable = int(settings.device_bytes * settings.share)
    host_needed = w_host + kv_host + host_compute + output_buffer
    if info.swa_layers and info.sliding_window:
        notes.append(f"{info.swa_layers} sliding-window layers keep {swa_cells} cells, the others {cells}")
    est = Estimate(
        backend=settings.backend,
        context=context,
        parallel=parallel,
        weights_bytes=w_gpu,
        weights_host_bytes=w_host,
        kv_cache_bytes=kv_gpu if settings.on_gpu else kv_host,
        kv_bytes_per_token=per_token,
        activations_bytes=activations if settings.on_gpu else compute,
        overhead_bytes=overhead,
        fragmentation_bytes=0,
        total_bytes=total if settings.on_gpu else w_host + kv_host + compute + output_buffer,
        device_bytes=settings.device_bytes,
        usable_bytes=usable,
        fits=total <= usable,
        host_bytes_needed=host_needed,
        gpu_layers=gpu_layers,
        n_layers=n,
        kv_cells=cells,
        kv_dtype=kv_dtype,
        compute_buffer_bytes=compute,
        output_buffer_bytes=output_buffer,
        notes=notes,
    )
    if not settings.on_gpu:
        # A CPU-only run: every row is host RAM, and the rows add up to the total.
        est.device = "host"
        est.weights_bytes, est.weights_host_bytes = w_host, 0
        est.activations_bytes = compute + output_buffer
        est.host_bytes_needed = est.total_bytes
        est.fits = est.total_bytes <= usable
    return est


# --- vLLM -----------------------------------------------------------------------------------------------------


def _vllm(info: ModelInfo, settings: Settings) -> Estimate:
    notes: list[str] = []
    context = settings.context or info.max_context or 4096
    max_seqs = settings.parallel or 256
    kv_dtype = _kv_dtype(info, settings)
    weights, _peak, wnotes = hf_weights_bytes(info, settings.quant, "vllm")
    notes += wnotes
    per_token = kv_bytes_per_token(info, kv_dtype, "vllm")
    budget = int(settings.device_bytes * settings.share)
    # the profile run: one batch of max_num_batched_tokens (V0 without chunked prefill: the model length)
    tokens = settings.batch or (max(context, 2048) if context <= 32768 else 8192)
    act_bytes = 2
    ff = info.intermediate or 4 * info.hidden
    if info.is_moe:
        ff = max(
            ff if info.n_dense_layers else 0, (info.moe_intermediate or ff) * max(1, info.n_experts_used)
        )
    # the profile forward at `tokens`: its peak is the fused gate_up output (2 ff wide) with two hidden-width
    # tensors (the residual and the normed input) alive; the two V0 runs of the corpus (8192 and 20000
    # tokens, same model) differ by exactly that per token
    activation = tokens * (2 * ff + 2 * info.hidden) * act_bytes
    # the sampler's dummy run: fp32 logits, probabilities and logprobs of every sequence's last token, and the
    # top-k/top-p sort (values + int64 indices) the profile asks for: 24 bytes per vocabulary entry
    activation += min(max_seqs, tokens) * info.vocab * 24
    non_torch = VLLM_NON_TORCH_BYTES
    kv_available = budget - weights - non_torch - activation
    block_bytes = VLLM_BLOCK_TOKENS * per_token
    blocks = max(0, kv_available // block_bytes) if block_bytes else 0
    kv_tokens = blocks * VLLM_BLOCK_TOKENS
    kv_bytes = blocks * block_bytes
    fits = kv_available > 0 and kv_tokens >= context
    reason = None
    if kv_available <= 0:
        notes.append("weights and activations exceed the budget: vLLM fails before the KV cache")
    elif kv_tokens < context:
        reason = (
            f"one {context}-token request needs {context * per_token / GIB:.2f} GiB of KV cache but only "
            f"{max(kv_available, 0) / GIB:.2f} GiB is left in the budget: vLLM refuses to start; "
            f"the longest that fits is --max-model-len {kv_tokens}"
        )
        notes.append(reason)
    notes.append(f"profile run at {tokens} batched tokens; {blocks} KV blocks of {VLLM_BLOCK_TOKENS} tokens")
    concurrency = kv_tokens / context if context else None
    # the KV cache takes what the budget leaves, so the budget's rows add up to at most the budget; the CUDA
    # graphs are captured afterwards, outside it, and only have to fit on the card
    total = weights + non_torch + activation + kv_bytes
    graphs_fit = budget + VLLM_CUDA_GRAPH_BYTES <= settings.device_bytes
    if not graphs_fit:
        notes.append(
            f"CUDA graphs (~{VLLM_CUDA_GRAPH_BYTES // MIB} MiB) are captured outside the budget and would not "
            "fit on the card: lower --safety (gpu-memory-utilization) or run with --enforce-eager"
        )
    return Estimate(
        backend=settings.backend,
        context=context,
        parallel=max_seqs,
        weights_bytes=weights,
        weights_host_bytes=0,
        kv_cache_bytes=kv_bytes,
        kv_bytes_per_token=per_token,
        activations_bytes=activation,
        overhead_bytes=non_torch,
        fragmentation_bytes=0,
        total_bytes=total,
        device_bytes=settings.device_bytes,
        usable_bytes=budget,
        fits=fits and graphs_fit,
        n_layers=info.n_layers,
        kv_dtype=kv_dtype,
        kv_cells=kv_tokens,
        kv_cache_tokens=kv_tokens,
        max_concurrency=round(concurrency, 2) if concurrency is not None else None,
        reason=reason,
        notes=notes,
    )


# --- transformers ---------------------------------------------------------------------------------------------


def _transformers(info: ModelInfo, settings: Settings) -> Estimate:
    notes: list[str] = []
    context = settings.context or min(info.max_context or 4096, 4096)
    batch = settings.parallel or 1
    kv_dtype = _kv_dtype(info, settings)
    weights, peak, wnotes = hf_weights_bytes(info, settings.quant)
    notes += wnotes
    per_token = kv_bytes_per_token(info, kv_dtype, "transformers")
    kv = 0
    for layer in range(info.n_layers):
        k, v = _kv_row_elements(info, layer, "transformers")
        tokens = (
            min(context, info.sliding_window) if _is_swa(info, layer) and info.sliding_window else context
        )
        kv += tokens * batch * (q.kv_row_bytes(kv_dtype, k) + q.kv_row_bytes(kv_dtype, v))
    tokens = context * batch
    act = _dtype_bytes(info.dtype if info.dtype != "fp8" else "bf16")
    # generate() passes logits_to_keep=1: the prefill projects only the last position of each sequence
    # (lm_head output in the model dtype, then the fp32 copy and the processed scores generate() keeps)
    logits = info.vocab * batch * (act + 4 + 4)
    ff = info.intermediate or 4 * info.hidden
    mlp = tokens * 3 * ff * act
    scores = 0
    if settings.flash_attn is False:  # eager attention materialises heads x q x k scores (and softmax)
        scores = 2 * info.n_heads * context * context * batch * act
        notes.append("eager attention: score matrices grow with context squared")
    activations = logits + mlp + scores
    overhead = CUDA_CONTEXT_BYTES
    fragmentation = int(TORCH_FRAGMENTATION * (kv + activations))
    total = weights + kv + activations + overhead + fragmentation
    usable = int(settings.device_bytes * settings.share)
    load_peak_fits = peak is None or peak + overhead <= usable
    fits = total <= usable and load_peak_fits
    reason = None
    if not load_peak_fits:
        reason = (
            f"loading quantizes on the fly: the load peak {(peak or 0) / GIB:.2f} GiB does not fit; "
            f"a pre-quantized checkpoint would need {total / GIB:.2f} GiB"
        )
        notes.append(reason)
    notes.append("dynamic cache: KV grows with the sequence; the figure is at the full context")
    return Estimate(
        backend=settings.backend,
        context=context,
        parallel=batch,
        weights_bytes=weights,
        weights_host_bytes=0,
        kv_cache_bytes=kv,
        kv_bytes_per_token=per_token,
        activations_bytes=activations,
        overhead_bytes=overhead,
        fragmentation_bytes=fragmentation,
        total_bytes=total,
        device_bytes=settings.device_bytes,
        usable_bytes=usable,
        fits=fits,
        n_layers=info.n_layers,
        kv_dtype=kv_dtype,
        kv_cells=context,
        load_peak_bytes=peak,
        load_peak_fits=load_peak_fits,
        reason=reason,
        notes=notes,
    )


# --- entry points ---------------------------------------------------------------------------------------------


def _estimate_core(info: ModelInfo, settings: Settings) -> Estimate:
    if info.n_layers <= 0 or info.n_heads <= 0:
        raise VramtuiError("the model has no layers or heads: give --layers and --heads")
    if info.n_layers > MAX_LAYERS:
        # every estimate walks the layers, and the solvers run dozens of estimates
        raise VramtuiError(f"{info.n_layers} layers is not a plausible model (at most {MAX_LAYERS})")
    accounting = settings.accounting
    if accounting == "llama.cpp":
        file_type = settings.quant if settings.quant and settings.quant != info.quant else None
        if settings.quant and info.weights_source == "gguf" and file_type:
            info = replace(
                info, layer_bytes=None, token_embd_bytes=None, output_bytes=None, params_exact=False
            )
        return _llama_cpp(info, settings, file_type)
    if accounting == "vllm":
        return _vllm(info, settings)
    return _transformers(info, settings)


def _fits(info: ModelInfo, settings: Settings) -> bool:
    return _estimate_core(info, settings).fits


def _largest(lo: int, hi: int, ok: Any) -> int:
    """Largest value in [lo, hi] with ok(value) true, ok monotone (true then false); lo-1 when none."""
    if not ok(lo):
        return lo - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def _solver_step(settings: Settings) -> int:
    return LLAMA_CPP_CELL_PAD if settings.accounting == "llama.cpp" else 256


def _check_trained_context(info: ModelInfo, settings: Settings, est: Estimate) -> None:
    """A context past the trained length is accepted by the engines but the model was never trained there."""
    if not info.max_context or settings.context is None:
        return
    per_sequence = settings.context
    if settings.accounting == "llama.cpp" and settings.backend != "ollama":
        per_sequence = settings.context // max(1, est.parallel)  # llama.cpp splits its cache across slots
    if per_sequence > info.max_context and settings.backend == "ollama":
        est.past_trained_context = True
        est.notes.append(
            f"Ollama clamps num_ctx {per_sequence} to the model's trained length {info.max_context}"
        )
    elif per_sequence > info.max_context:
        est.past_trained_context = True
        est.notes.append(
            f"context {per_sequence} is past the model's trained length {info.max_context}: "
            "output degrades beyond it unless RoPE scaling is configured"
            + (
                " (vLLM refuses it unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1)"
                if settings.accounting == "vllm"
                else ""
            )
        )


def max_context(info: ModelInfo, settings: Settings) -> int:
    """The largest context that fits at the given concurrency (0 when none does)."""
    if settings.accounting == "vllm":
        est = _vllm(info, settings)
        tokens = est.kv_cache_tokens or 0
        return min(tokens, info.max_context) if info.max_context else tokens
    step = _solver_step(settings)
    # the model's trained context caps the answer; with no such figure, search up to 1M tokens
    limit = min(info.max_context or (1 << 20), MAX_CONTEXT_SEARCH)
    found = _largest(1, limit // step, lambda k: _fits(info, replace(settings, context=k * step)))
    return max(0, found * step)


def max_parallel(info: ModelInfo, settings: Settings, limit: int = 1024) -> int:
    """How many sequences of `context` tokens each run at once (0 when not even one)."""
    if settings.accounting == "vllm":
        est = _vllm(info, settings)
        return int(est.kv_cache_tokens // max(1, est.context)) if est.kv_cache_tokens else 0
    if settings.backend == "ollama":  # the context is per sequence; Ollama multiplies it by parallel
        return max(0, _largest(1, limit, lambda p: _fits(info, replace(settings, parallel=p))))
    if settings.accounting == "llama.cpp":
        per_seq = _llama_defaults(info, settings)["context"]
        # llama.cpp's context is the whole cache, split across the slots
        return max(
            0, _largest(1, limit, lambda p: _fits(info, replace(settings, parallel=p, context=per_seq * p)))
        )
    return max(0, _largest(1, limit, lambda p: _fits(info, replace(settings, parallel=p))))


def fit_gpu_layers(info: ModelInfo, settings: Settings) -> int:
    """llama.cpp family: how many layers (the output layer counts as one more) fit on the GPU."""
    if settings.accounting != "llama.cpp":
        return info.n_layers if _fits(info, settings) else 0
    found = _largest(
        0, info.n_layers + 1, lambda n: _fits(info, replace(settings, gpu_layers=n, on_gpu=True))
    )
    return max(0, found)


def estimate(info: ModelInfo, settings: Settings) -> Estimate:
    """The breakdown and verdict, with the solvers' answers filled in."""
    settings = replace(settings)
    requested_gpu_layers = settings.gpu_layers
    if get_backend(settings.backend).name == "ollama" and settings.gpu_layers is None and settings.on_gpu:
        # Ollama places as many layers as fit, like llama.cpp's --fit
        settings.gpu_layers = fit_gpu_layers(info, settings)
    est = _estimate_core(info, settings)
    est.quant_applied = bool(settings.quant) and settings.quant != info.quant
    if est.quant_applied:
        est.quant, est.bits_per_weight = settings.quant, q.bits_per_weight(settings.quant)
    else:
        est.quant, est.bits_per_weight = info.quant or info.dtype, info.bits_per_weight
    if est.load_peak_fits is False:
        # no context or batch helps while the 16-bit load itself does not fit; the reason says so
        est.notes = list(dict.fromkeys(info.notes + est.notes))
        return est
    _check_trained_context(info, settings, est)
    est.max_context = max_context(info, settings)
    if info.max_context and est.max_context >= info.max_context - _solver_step(settings) + 1:
        grown = replace(settings, context=info.max_context + _solver_step(settings))
        if settings.accounting == "vllm":
            more = (est.kv_cache_tokens or 0) > info.max_context
        else:
            more = _fits(info, grown)
        if more:
            est.notes.append(
                f"largest context capped at the model's trained length {info.max_context}; "
                "memory alone would allow more"
            )
    per_sequence = est.context if settings.accounting == "vllm" else est.context // max(1, est.parallel)
    # Ollama's layer placement shrinks as slots are added; the concurrency answer is for the layers asked
    # for (all of them by default), not for the placement this one request got
    est.max_parallel = max_parallel(
        info,
        replace(settings, context=settings.context and per_sequence, gpu_layers=requested_gpu_layers)
        if settings.backend == "ollama"
        else replace(settings, context=settings.context and per_sequence),
    )
    if settings.accounting == "llama.cpp" and settings.on_gpu:  # a CPU-only run places no layer
        est.gpu_layers_fit = fit_gpu_layers(info, settings)
        if not est.fits and est.gpu_layers_fit < info.n_layers + 1:
            part = replace(settings, gpu_layers=est.gpu_layers_fit)
            est.host_bytes_needed = _estimate_core(info, part).host_bytes_needed
            est.notes.append(
                f"with --gpu-layers {est.gpu_layers_fit} it fits; the rest needs "
                f"{est.host_bytes_needed / GIB:.2f} GiB of host RAM"
            )
    if not est.fits and est.max_context:
        est.notes.append(f"largest context that fits: {est.max_context}")
    if info.is_moe:
        est.notes.append(
            f"MoE: all {info.n_experts} experts are resident, {info.n_experts_used} active per token"
        )
    if info.kv_lora_rank:
        est.notes.append("MLA: the cache holds a latent per token, not per-head K/V")
    est.notes = list(dict.fromkeys(info.notes + est.notes))
    return est


def describe_math(info: ModelInfo, kv_dtype: str = "f16") -> str:
    """The worked arithmetic of the KV cache, for humans."""
    k, v = _kv_row_elements(info, 0, "llama.cpp")
    per_layer = q.kv_row_bytes(kv_dtype, k) + q.kv_row_bytes(kv_dtype, v)
    return (
        f"{info.n_kv_heads} KV heads x {info.head_dim_k} x {kv_dtype} (K and V) = {per_layer:,} B per token per "
        f"layer; x {info.n_layers} layers = {per_layer * info.n_layers:,} B per token"
    )


def bytes_per_param(dtype: str) -> float:
    return q.bits_per_weight(dtype) / 8


__all__ = [
    "Estimate",
    "Settings",
    "describe_math",
    "estimate",
    "fit_gpu_layers",
    "kv_bytes_per_token",
    "llama_cpp_weights",
    "load_model_info",
    "max_context",
    "max_parallel",
]
