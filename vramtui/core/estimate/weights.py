"""Weights as each loader sizes them: llama.cpp's per-tensor types from the tensor groups, and the
Hugging Face loaders' (vLLM, transformers) bytes with the quantization they apply."""

from __future__ import annotations

from dataclasses import dataclass, replace

from vramtui.core.estimate import hfquant
from vramtui.core.estimate import quant as q
from vramtui.core.estimate.modelinfo import (
    ModelInfo,
    TensorGroup,
    tensor_groups,
)


def dtype_bytes(dtype: str) -> int:
    return 4 if dtype == "f32" else 2


_KQUANT_FALLBACK = {
    "q4_k": "q5_0", "q5_k": "q5_1", "q6_k": "q8_0", "q2_k": "iq4_nl", "q3_k": "iq4_nl",
    # the i-quants of 256-element blocks (llama-quant.cpp's fallback), and the ternary types
    **dict.fromkeys(("iq1_s", "iq1_m", "iq2_xxs", "iq2_xs", "iq2_s", "iq3_xxs", "iq3_s", "iq4_xs"), "iq4_nl"),
    "tq1_0": "q4_0", "tq2_0": "q4_0",
}  # fmt: skip


def stored_type(group: TensorGroup, type_name: str) -> str:
    """The type llama-quantize writes for a group planned at `type_name`: its fallback when the rows do
    not split into that type's blocks (gemma-3's 1152 columns in a K-quant: Q6_K -> Q8_0, Q4_K -> Q5_0)."""
    if group.cols % q._ggml_sizes()[type_name][0]:
        type_name = _KQUANT_FALLBACK.get(type_name, "f16")
        if group.cols % q._ggml_sizes()[type_name][0]:
            type_name = "f16"
    return type_name


def _group_bytes(group: TensorGroup, type_name: str) -> int:
    type_name = stored_type(group, type_name)
    return q.ggml_row_bytes(type_name, group.cols) * group.rows * group.count


@dataclass(frozen=True)
class LayerWeights:
    layers: tuple[int, ...]
    token_embd: int
    output: int  # what the output layer puts on the GPU (the embedding again when tied)
    other: int
    # (name, layer, bytes) of each repeating-layer tensor, as GGUF names them (blk.3.ffn_up_exps.weight)
    tensors: tuple[tuple[str, int, int], ...] = ()


def before_layer(weights: LayerWeights, first: int) -> LayerWeights:
    """The weights without the layers from `first` on (MTP layers an engine does not load)."""
    layers = tuple(size if il < first else 0 for il, size in enumerate(weights.layers))
    tensors = tuple(entry for entry in weights.tensors if entry[1] < first)
    return replace(weights, layers=layers, tensors=tensors)


def _layer_of(name: str) -> int:
    return int(name.split(".", 2)[1])


def llama_cpp_weights(info: ModelInfo, file_type: str | None = None) -> LayerWeights:
    """Bytes per layer as llama.cpp loads them: exact from a GGUF, else llama-quantize's choices."""
    if info.layer_bytes is not None and info.token_embd_bytes is not None and file_type is None:
        # no output.weight: llama.cpp loads the embedding again as the head; an encoder has no head
        output = info.output_bytes if info.output_bytes is not None else info.token_embd_bytes
        output = 0 if info.encoder_only else output
        named = [(name, _layer_of(name), size) for name, size in info.layer_tensors or ()]
        # A layer known only by its bytes (weights read from a log's buffers) is one tensor, so that
        # whatever places tensors places its bytes too.
        covered = {layer for _name, layer, _size in named}
        named += [
            (f"blk.{il}.layer", il, size)
            for il, size in enumerate(info.layer_bytes)
            if il not in covered and size
        ]
        return LayerWeights(info.layer_bytes, info.token_embd_bytes, output, info.other_bytes, tuple(named))
    ftype = (
        file_type or info.file_type or info.quant or ("f16" if info.dtype in ("bf16", "f32") else info.dtype)
    )
    ftype = q.normalize_quant(ftype)
    if ftype in q.EXPERTS_ONLY:  # gpt-oss's MXFP4 checkpoint converts to the MXFP4 MoE file type
        ftype = "mxfp4_moe"
    if q.is_hf_quant(ftype):
        ftype = "q4_0" if q.bits_per_weight(ftype) < 6 else "q8_0"
    layers = [0] * info.n_layers
    token_embd = output = other = 0
    planned_params = 0
    named: list[tuple[str, int, int]] = []
    gqa = info.n_heads // max(1, info.n_kv_heads)
    for group in tensor_groups(info):
        type_name = q.gguf_tensor_type(
            ftype,
            q.TensorRole(group.kind, group.layer),
            info.n_layers,
            info.tied_embeddings,
            gqa,
            info.n_experts,
        )
        size = _group_bytes(group, type_name)
        planned_params += group.n_elements
        if group.layer >= 0:
            layers[group.layer] += size
            named.append((f"blk.{group.layer}.{group.kind}.weight", group.layer, size))
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
        scale = (info.n_params - info.vision_params) / planned_params  # the tower is llama.cpp's mmproj
        if abs(scale - 1) > 0.01:
            layers = [int(b * scale) for b in layers]
            token_embd, output, other = int(token_embd * scale), int(output * scale), int(other * scale)
            named = [(name, layer, int(size * scale)) for name, layer, size in named]
    return LayerWeights(tuple(layers), token_embd, output, other, tuple(named))


# The Hugging Face module each tensor group is (Llama / Qwen / DeepSeek names), for matching a config's
# lists of modules kept unquantized; an expert group is named by its first expert.
_HF_MODULES: dict[str, str] = {
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_qkv": "self_attn.qkv_proj",
    "attn_output": "self_attn.o_proj",
    "attn_q_a": "self_attn.q_a_proj",
    "attn_q_b": "self_attn.q_b_proj",
    "attn_kv_a_mqa": "self_attn.kv_a_proj_with_mqa",
    "attn_kv_b": "self_attn.kv_b_proj",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
    "ffn_gate_inp": "mlp.gate",
    "ffn_gate_exps": "mlp.experts.0.gate_proj",
    "ffn_up_exps": "mlp.experts.0.up_proj",
    "ffn_down_exps": "mlp.experts.0.down_proj",
    "ffn_gate_shexp": "mlp.shared_expert.gate_proj",
    "ffn_up_shexp": "mlp.shared_expert.up_proj",
    "ffn_down_shexp": "mlp.shared_expert.down_proj",
}
# Architectures whose decoder layer holds the router and the experts beside its dense MLP, not inside it:
# Gemma 4's MoE (transformers' Gemma4TextDecoderLayer: `mlp`, `router.proj`, `experts.gate_up_proj`), which
# is why NVIDIA's NVFP4 checkpoint keeps `layers.N.mlp*` 16-bit and quantizes its experts.
_ARCH_MODULES: dict[str, dict[str, str]] = {
    arch: {
        "ffn_gate_inp": "router.proj",
        "ffn_gate_exps": "experts.gate_up_proj",
        "ffn_up_exps": "experts.gate_up_proj",
        "ffn_down_exps": "experts.down_proj",
    }
    for arch in ("gemma4", "gemma4_text")
}
_KEPT_KINDS = ("token_embd", "norm", "bias")


def hf_module_name(group: TensorGroup, arch: str = "") -> str:
    if group.kind == "token_embd":
        return "model.embed_tokens"
    if group.kind == "output":
        return "lm_head"
    name = _ARCH_MODULES.get(arch, {}).get(group.kind) or _HF_MODULES.get(group.kind, group.kind)
    return f"model.layers.{group.layer}.{name}"


def group_layout(spec: hfquant.QuantSpec, group: TensorGroup, arch: str = "") -> hfquant.QuantSpec | None:
    """The layout this tensor group is stored in (a per-module one where the config gives it); None: 16-bit."""
    if group.kind in _KEPT_KINDS:
        return None
    module = hf_module_name(group, arch)
    if spec.overrides or spec.only_listed:  # the config names modules: its list decides
        return hfquant.spec_for_module(spec, module)
    if spec.experts_only:
        quantized = group.kind.endswith("_exps")
    elif group.kind == "output":
        quantized = spec.quantizes_lm_head
    elif group.kind == "ffn_gate_inp":
        quantized = spec.quantizes_router
    else:
        quantized = True
    return hfquant.spec_for_module(spec, module) if quantized else None


@dataclass(frozen=True)
class HfWeights:
    """A quantized checkpoint's bytes, summed per tensor group as its layout stores them."""

    total: int
    quantized_params: int
    kept_params: int  # 16-bit: embeddings, norms, skipped modules
    experts: int  # bytes of the routed experts (ffn_*_exps)


def hf_quantized_bytes(info: ModelInfo, spec: hfquant.QuantSpec) -> HfWeights:
    """Bytes of every tensor as the method lays it out; parameters the shapes do not lay out (a hybrid's
    recurrent mixers, gpt-oss's sinks and biases) at the rate of the quantized share, or 16-bit for an
    experts-only method."""
    unquantized = dtype_bytes(info.dtype if info.dtype in ("f32", "f16", "bf16") else "bf16")
    total = experts = quantized = kept = 0
    quantized_bytes = 0
    for group in tensor_groups(info):
        layout = group_layout(spec, group, info.arch)
        if layout is not None:
            size = hfquant.matrix_bytes(layout, group.rows, group.cols) * group.count
            quantized += group.n_elements
            quantized_bytes += size
        else:
            size = group.n_elements * unquantized
            kept += group.n_elements
        if group.kind.endswith("_exps"):
            experts += size
        total += size
    # the vision tower stays 16-bit (every quantizer's config keeps it: visual, model.visual*, mm_projector)
    total += info.vision_params * unquantized
    kept += info.vision_params
    rest = (info.n_params or 0) - quantized - kept
    if rest > 0:
        rate = unquantized if spec.experts_only or not quantized else quantized_bytes / quantized
        total += int(rest * rate)
        kept += rest if spec.experts_only else 0
    return HfWeights(total, quantized, kept, experts)


def _spec_for(info: ModelInfo, method: str, wanted: str | None) -> hfquant.QuantSpec | None:
    if wanted in (None, info.quant) and info.quant_spec is not None:
        return info.quant_spec
    return hfquant.spec_from_name(method)


def hf_weights_bytes(
    info: ModelInfo, quant: str | None, bnb_as_nf4_dq: bool = False
) -> tuple[int, int | None, list[str]]:
    """(runtime weight bytes, load-time peak or None, notes) for vLLM and transformers.

    `bnb_as_nf4_dq`: the engine's in-flight bitsandbytes loader always quantizes to NF4 with double
    quantization (vLLM's does)."""
    notes: list[str] = []
    wanted = q.normalize_quant(quant) if quant else None
    if info.weights_bytes is not None and (wanted is None or wanted == info.quant):
        return info.weights_bytes, None, notes
    method = wanted or info.quant
    if bnb_as_nf4_dq and wanted in ("nf4", "fp4") and info.quant is None:
        method = "nf4-dq"
        notes.append("vLLM quantizes bitsandbytes in flight as NF4 with double quantization")
    n_params = info.n_params or 0
    unquantized = dtype_bytes(info.dtype)
    if method is None or method in ("f16", "bf16", "f32"):
        size = n_params * (dtype_bytes(method) if method else unquantized)
        return size, None, notes
    spec = _spec_for(info, method, wanted) if q.is_hf_quant(method) or method in q.EXPERTS_ONLY else None
    if spec is not None:
        size = hf_quantized_bytes(info, spec).total
    else:  # a GGUF type through vLLM's GGUF loader: everything at that width
        size = int(n_params * q.bits_per_weight(method) / 8)
    peak = None
    if wanted and info.quant is None and info.weights_source != "gguf":
        peak = n_params * 2
        notes.append(q.load_peak_note(method))
    return size, peak, notes


@dataclass(frozen=True)
class HfModules:
    """A causal LM's weights by the modules transformers builds, as accelerate's device map places them:
    model.embed_tokens, each model.layers.i (kept whole: no_split_module_classes), model.norm, lm_head
    (0 when tied: the embedding's weight, not counted twice)."""

    embedding: int
    layers: tuple[int, ...]
    norm: int
    lm_head: int
    bitsandbytes: bool = False  # quantized at load by bitsandbytes (its quantizer caps each device at 90%)

    @property
    def total(self) -> int:
        return self.embedding + sum(self.layers) + self.norm + self.lm_head


def hf_module_bytes(info: ModelInfo, quant: str | None, total: int) -> HfModules:
    """Each module's bytes, tensor group by tensor group as `hf_weights_bytes` sizes them, the layers
    scaled so that the modules add up to `total` (what the shapes do not lay out, a hybrid's mixers or a
    file's exact size, is in the layers)."""
    wanted = q.normalize_quant(quant) if quant else None
    method = wanted or info.quant
    spec = None
    if method and (q.is_hf_quant(method) or method in q.EXPERTS_ONLY):
        spec = _spec_for(info, method, wanted)
    width = dtype_bytes(info.dtype if info.dtype in ("f32", "f16", "bf16") else "bf16")
    if method in ("f16", "bf16", "f32"):
        width = dtype_bytes(method)
    layers = [0] * info.n_layers
    embedding = norm = lm_head = 0
    for group in tensor_groups(info):
        layout = group_layout(spec, group, info.arch) if spec is not None else None
        if layout is not None:
            size = hfquant.matrix_bytes(layout, group.rows, group.cols) * group.count
        elif spec is None and method and method not in ("f16", "bf16", "f32"):
            size = int(group.n_elements * q.bits_per_weight(method) / 8)  # a GGUF type: all at that width
        else:
            size = group.n_elements * width
        if group.layer >= 0:
            layers[group.layer] += size
        elif group.kind == "token_embd":
            embedding = size
        elif group.kind == "output":
            lm_head = size
        else:
            norm += size
    body = max(0, total - embedding - norm - lm_head)
    planned = sum(layers)
    scaled = tuple(int(size * body / planned) for size in layers) if planned else tuple(layers)
    bnb = spec is not None and spec.method == "bitsandbytes"
    return HfModules(embedding, scaled, norm, lm_head, bnb)


_LOAD_DTYPES = {
    "float32": "f32", "float": "f32", "f32": "f32", "fp32": "f32",
    "float16": "f16", "half": "f16", "f16": "f16", "fp16": "f16",
    "bfloat16": "bf16", "bf16": "bf16",
}  # fmt: skip


def as_loaded(info: ModelInfo, dtype: str | None) -> tuple[ModelInfo, list[str]]:
    """The model as the engine's --dtype loads it (transformers' from_pretrained(dtype=...), vLLM's
    --dtype): a 16- or 32-bit checkpoint cast to that width, weights, activations and the cache alike
    (QA 11: --dtype float32 billed the bf16 file's size)."""
    target = _LOAD_DTYPES.get(str(dtype or "").strip().lower().removeprefix("torch."))
    if target is None or info.quant or info.dtype not in ("f16", "bf16", "f32") or target == info.dtype:
        return info, []
    weights = info.weights_bytes * dtype_bytes(target) // dtype_bytes(info.dtype) if info.weights_bytes else 0
    note = f"dtype {dtype}: the {info.dtype} checkpoint is cast to {target} at load (weights, activations, cache)"
    return replace(info, dtype=target, weights_bytes=weights or info.weights_bytes), [note]
