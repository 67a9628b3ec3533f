"""What the estimator needs to know about a model, read from the model's own files or from flags.

Sources, most exact first:
- a `.gguf` file: metadata and the tensor table through `ggufheader` (exact bytes per tensor, so per
  layer, per embedding and for the output matrix);
- a Hugging Face folder: `config.json` (the text config of multimodal models), the `*.safetensors` headers
  read through `safetensors` without loading a tensor (or the index's `total_size` while shards are
  missing), `quantization_config`;
- a bare `config.json` (before downloading): the parameter count comes from building the model on PyTorch's
  meta device through transformers (lazily imported), with a pure-arithmetic fallback;
- flags alone (`--params 30B --layers 48 ...`).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from vramtui.core.errors import VramtuiError
from vramtui.core.estimate import hfquant, layerplan, recurrent, vision
from vramtui.core.estimate import quant as q

# safetensors dtype -> bytes per element
_ST_DTYPE_BYTES: dict[str, float] = {
    "F64": 8,
    "I64": 8,
    "U64": 8,
    "F32": 4,
    "I32": 4,
    "U32": 4,
    "F16": 2,
    "BF16": 2,
    "I16": 2,
    "U16": 2,
    "I8": 1,
    "U8": 1,
    "BOOL": 1,
    "F8_E4M3": 1,
    "F8_E5M2": 1,
    "F8_E8M0": 1,
    "F4": 0.5,
}

# Architectures whose sliding-window layers come in a fixed pattern (llama.cpp's and transformers' own).
# pattern n: every n-th layer is global, the others slide (Gemma 2: 2, Gemma 3: 6, Cohere 2: 4).
_SWA_PATTERN: dict[str, int] = {
    "gemma2": 2,
    "gemma3": 6,
    "gemma3_text": 6,
    "cohere2": 4,
    "gpt_oss": 2,
    "gpt-oss": 2,
    "llama4": 4,  # chunked attention in 3 of every 4 layers (llama.cpp: set_swa_pattern(4))
}
# Llama 4's attention chunk, as llama.cpp sets it when the file does not say 0 (llama-model.cpp): its cache
# keeps a sliding window of that many tokens in the chunked layers.
LLAMA4_CHUNK = 8192
_TIED_BY_DEFAULT = ("gemma", "gemma2", "gemma3", "gemma3_text", "gpt_neox_japanese")
# Encoders that pool their hidden states (embedding and reranker models): no output matrix, no logits.
# llama.cpp's architecture names, then config.json's model types.
ENCODER_ARCHS = frozenset(
    {
        "bert", "nomic-bert", "nomic-bert-moe", "neo-bert", "jina-bert-v2", "jina-bert-v3", "modern-bert",
        "eurobert", "t5encoder",
        "roberta", "xlm-roberta", "nomic_bert", "modernbert", "distilbert", "mpnet", "electra", "new",
    }
)  # fmt: skip
_GEMMA3N_KV_LAYERS = 20
_QKV_BIAS = ("qwen2", "qwen2_moe", "qwen2_vl", "qwen2_5_vl", "gpt_neox", "internlm2")
_FUSED_QKV = ("phi3", "internlm2", "gpt_neox", "phi3small")


@dataclass
class ModelInfo:
    """A model's shape and stored size. Sizes in bytes; None where the source does not say."""

    source: str
    arch: str = "llama"
    n_params: int | None = None
    n_layers: int = 0
    hidden: int = 0
    n_heads: int = 0
    n_kv_heads: int = 0
    head_dim_k: int = 0
    head_dim_v: int = 0
    vocab: int = 32000
    tied_embeddings: bool = False
    encoder_only: bool = (
        False  # an embedding or reranker encoder (ENCODER_ARCHS): no output matrix, no logits
    )
    max_context: int | None = None
    sliding_window: int | None = None
    swa_layers: int = 0  # how many layers use the sliding window
    head_dim_swa: int = 0  # K and V width per head on the sliding layers, where it differs (Gemma 4: 256)
    kv_layers: int | None = None  # only the first N layers store K and V, the rest reuse them (Gemma 3n/4)
    mtp_layers: int = 0  # the last N of n_layers are MTP (nextn) layers: a GGUF's block_count holds them
    # DeepSeek sparse attention's indexer (GLM-5, DeepSeek-V3.2): one key head of this width per token, in
    # a cache of its own, in the layers listed (None: every layer)
    indexer_key_length: int = 0
    indexer_layers: frozenset[int] | None = None
    weights_bytes: int | None = None  # exact stored bytes, when files say so
    quant: str | None = None  # f16, bf16, q4_k_m, nf4, gptq-g128, ...
    bits_per_weight: float | None = None
    is_moe: bool = False
    n_experts: int = 0
    n_experts_used: int = 0
    n_shared_experts: int = 0
    n_dense_layers: int = 0  # leading dense layers of a MoE (DeepSeek)
    kv_lora_rank: int = 0  # MLA latent width (DeepSeek V2/V3); 0: plain per-head K/V
    # llama.cpp caches MLA's latent only for a GGUF converted with its MLA split (key_length_mla, April
    # 2025 on); an older conversion of the same model is cached as per-head K and V (n_head_kv = n_head)
    mla_latent: bool = True
    # The MLA file holds attn_kv_b, the matrix that decompresses the latent into per-head K and V (None: not
    # known). ik_llama.cpp needs it for every -mla but 1, and runs -mla 1 without it (llama_kv_cache_init:
    # "missing wkv_b tensor(s)", "changing MLA from 0 to 1"; mainline's split conversion drops it)
    mla_kv_b: bool | None = None
    qk_rope_head_dim: int = 0
    qk_nope_head_dim: int = 0
    q_lora_rank: int = 0
    intermediate: int | None = None
    moe_intermediate: int | None = None
    shared_intermediate: int | None = None
    moe_latent: int = 0  # Nemotron-3's latent MoE: the experts work in this width, projected in and out
    attn_bias: bool = False
    ffn_gated: bool = True
    fused_qkv: bool = False
    dtype: str = "bf16"  # stored dtype of unquantized tensors
    file_type: str | None = None  # GGUF file type, lower case (q4_k_m)
    kv_heads_per_layer: tuple[int, ...] | None = None
    # hybrid / recurrent models (core/estimate/recurrent.py): which layers keep a recurrent state instead of
    # a KV cache, and its f32 conv and SSM elements per layer and sequence (llama.cpp's n_embd_r, n_embd_s)
    recurrent_flags: tuple[bool, ...] | None = None
    rs_conv_elements: int = 0
    rs_state_elements: int = 0
    rs_ssm_f32: bool = (
        False  # config.json's mamba_ssm_dtype float32: the HF engines keep the SSM state in f32
    )
    # Gated DeltaNet linear attention (Qwen3-Next, Qwen3.5/3.6) in the recurrent layers: key heads, key
    # head size, value heads, value head size, conv kernel
    delta_net: tuple[int, int, int, int, int] | None = None
    # the full-attention layers' query projection also yields a gate on the output (Qwen3-Next, Qwen3.5)
    attn_output_gate: bool = False
    # GGUF: exact bytes per repeating layer, token embedding, output matrix (None: tied) and the rest
    layer_bytes: tuple[int, ...] | None = None
    # GGUF: (name, bytes) of every repeating-layer tensor, so --override-tensor patterns can place each one
    layer_tensors: tuple[tuple[str, int], ...] | None = None
    # GGUF: (name, part, offset, bytes) of every tensor as the file(s) hold them, by part and offset:
    # llama.cpp maps each part and its host buffer spans a part from its first host tensor to its last
    # (get_mapping_range)
    file_order: tuple[tuple[str, int, int, int], ...] | None = None
    token_embd_bytes: int | None = None
    output_bytes: int | None = None
    # their tensor types, where a GGUF says them (q4_K, q6_K ...): what an engine does per type with them
    token_embd_type: str | None = None
    output_type: str | None = None
    other_bytes: int = 0
    weights_by_dtype: dict[str, int] = field(default_factory=dict)
    # the largest safetensors file on disk: what a loader maps at once, beside the weights it fills
    largest_shard_bytes: int | None = None
    weights_source: str = "params"  # gguf | safetensors | index | params
    params_exact: bool = False
    # a quant_method in config.json vramtui does not know: its weights are sized as 16-bit, an upper bound
    unknown_quant: str | None = None
    # the checkpoint's quantization layout from config.json (core/estimate/hfquant.py), when it has one
    quant_spec: hfquant.QuantSpec | None = None
    notes: list[str] = field(default_factory=list)
    # a multimodal config.json's vision tower (core/estimate/vision.py): vLLM's profile run sizes it
    vision: Any = None
    # the vision tower's parameters added to a count made from the text config (they stay 16-bit)
    vision_params: int = 0
    # layers that differ in heads or MLP width (None: every layer has n_heads and intermediate)
    layer_plan: layerplan.LayerPlan | None = None

    @property
    def logits_width(self) -> int:
        """Logits per output token: the vocabulary, none for an encoder (it outputs its hidden state)."""
        return 0 if self.encoder_only else self.vocab

    def kv_heads_at(self, layer: int) -> int:
        if self.kv_heads_per_layer and layer < len(self.kv_heads_per_layer):
            return self.kv_heads_per_layer[layer]
        return self.n_kv_heads

    def heads_at(self, layer: int) -> int:
        plan = self.layer_plan
        return plan.heads[layer] if plan and layer < len(plan.heads) else self.n_heads

    def ffn_at(self, layer: int) -> int:
        plan = self.layer_plan
        if plan and layer < len(plan.ffn):
            return plan.ffn[layer]
        return self.intermediate or 4 * self.hidden

    def replaced_by_linear(self, layer: int) -> tuple[bool, bool]:
        """(attention, MLP) of this layer replaced by one hidden x hidden linear."""
        plan = self.layer_plan
        if plan is None:
            return False, False
        attn = layer < len(plan.attn_linear) and plan.attn_linear[layer]
        return attn, layer < len(plan.ffn_linear) and plan.ffn_linear[layer]

    def is_recurrent(self, layer: int) -> bool:
        flags = self.recurrent_flags
        return bool(flags) and layer < len(flags) and flags[layer]

    @property
    def n_recurrent_layers(self) -> int:
        return sum(1 for flag in (self.recurrent_flags or ())[: self.n_layers] if flag)

    def to_dict(self) -> dict[str, Any]:
        skip = ("layer_bytes", "layer_tensors", "file_order", "vision", "layer_plan")
        out = {k: v for k, v in self.__dict__.items() if k not in skip}
        out["vision"] = asdict(self.vision) if self.vision is not None else None
        out["layer_plan"] = asdict(self.layer_plan) if self.layer_plan is not None else None
        out["kv_heads_per_layer"] = list(self.kv_heads_per_layer) if self.kv_heads_per_layer else None
        out["recurrent_flags"] = list(self.recurrent_flags) if self.recurrent_flags else None
        out["quant_spec"] = asdict(self.quant_spec) if self.quant_spec else None
        # fields that mean nothing for this model say so (QA 16: "mla_latent": true for a plain llama, and
        # "dtype": "bf16" beside a GGUF's own file_type "f16")
        if not self.kv_lora_rank:
            out["mla_latent"] = None
        if self.file_type:
            out["dtype"] = None
        return out


# --- shapes and parameter arithmetic -----------------------------------------------------------------------


@dataclass(frozen=True)
class TensorGroup:
    """Tensors of one role: `count` matrices of `rows x cols` (rows = output features)."""

    kind: str
    layer: int
    rows: int
    cols: int
    count: int = 1

    @property
    def n_elements(self) -> int:
        return self.rows * self.cols * self.count


def tensor_groups(info: ModelInfo) -> list[TensorGroup]:
    """The tensors a decoder of this shape has, as llama.cpp and transformers lay them out."""
    h, v = info.hidden, info.vocab
    groups = [TensorGroup("token_embd", -1, v, h)]
    if not info.tied_embeddings and not info.encoder_only:
        groups.append(TensorGroup("output", -1, v, h))
    groups.append(TensorGroup("norm", -1, 1, h))
    for layer in range(info.n_layers):
        mixer = _mamba_groups(info, layer) or _delta_net_groups(info, layer)
        attention = [] if mixer and info.delta_net else _attention_groups(info, layer)
        ffn = _ffn_groups(info, layer)
        # a norm before each block the layer has (a no-op block has none)
        norms = (1 if attention else 0) + (1 if ffn else 0) + (1 if mixer else 0)
        if norms:
            groups.append(TensorGroup("norm", layer, 1, norms * h))
        groups += mixer + attention + ffn
    return groups


def _mamba_groups(info: ModelInfo, layer: int) -> list[TensorGroup]:
    plan = info.layer_plan
    if plan is None or plan.mixer is None or layer >= len(plan.mamba) or not plan.mamba[layer]:
        return []
    m = plan.mixer
    return [
        TensorGroup("ssm_in", layer, m.in_rows, info.hidden),
        TensorGroup("ssm_conv1d", layer, m.conv_dim, m.d_conv + 1),  # the kernel and its bias
        TensorGroup("ssm_out", layer, info.hidden, m.d_inner),
        TensorGroup("ssm_misc", layer, 1, 3 * m.heads + m.d_inner),  # A_log, D, dt_bias; the gated norm
    ]


def _delta_net_groups(info: ModelInfo, layer: int) -> list[TensorGroup]:
    """A Gated DeltaNet layer as llama.cpp's qwen35 holds it: the q, k, v projection (the conv's input), the
    z gate, beta and alpha, the conv kernel, dt, A and the gated norm, and the output projection. Qwen3-Next
    fuses q, k, v and z into one ssm_in: the same bytes."""
    if info.delta_net is None or not info.is_recurrent(layer):
        return []
    h = info.hidden
    k_heads, k_dim, v_heads, v_dim, kernel = info.delta_net
    value = v_heads * v_dim
    conv = 2 * k_heads * k_dim + value
    if info.arch in ("qwen3next", "qwen3_next"):
        beta_alpha = [TensorGroup("ssm_ba", layer, 2 * v_heads, h)]
    else:
        beta_alpha = [TensorGroup("ssm_beta", layer, v_heads, h), TensorGroup("ssm_alpha", layer, v_heads, h)]
    return [
        TensorGroup("attn_qkv", layer, conv, h),
        TensorGroup("attn_gate", layer, value, h),
        *beta_alpha,
        TensorGroup("ssm_conv1d", layer, conv, kernel),
        TensorGroup("ssm_misc", layer, 1, 2 * v_heads + v_dim),
        TensorGroup("ssm_out", layer, h, value),
    ]


def _attention_groups(info: ModelInfo, layer: int) -> list[TensorGroup]:
    h = info.hidden
    if info.replaced_by_linear(layer)[0]:
        return [TensorGroup("attn_output", layer, h, h)]  # DeciLM's linear_attn (llama.cpp: wo alone)
    if info.kv_lora_rank:
        nope = info.qk_nope_head_dim or info.head_dim_k - info.qk_rope_head_dim
        rope, hv = info.qk_rope_head_dim, info.head_dim_v
        groups = []
        if info.q_lora_rank:
            groups.append(TensorGroup("attn_q_a", layer, info.q_lora_rank, h))
            groups.append(TensorGroup("attn_q_b", layer, info.n_heads * (nope + rope), info.q_lora_rank))
        else:
            groups.append(TensorGroup("attn_q", layer, info.n_heads * (nope + rope), h))
        groups.append(TensorGroup("attn_kv_a_mqa", layer, info.kv_lora_rank + rope, h))
        groups.append(TensorGroup("attn_kv_b", layer, info.n_heads * (nope + hv), info.kv_lora_rank))
        groups.append(TensorGroup("attn_output", layer, h, info.n_heads * hv))
        return groups
    heads = info.heads_at(layer)
    if not heads:
        return []
    q_rows = heads * info.head_dim_k * (2 if info.attn_output_gate else 1)
    k_rows = info.kv_heads_at(layer) * info.head_dim_k
    v_rows = info.kv_heads_at(layer) * info.head_dim_v
    if info.fused_qkv:
        groups = [TensorGroup("attn_qkv", layer, q_rows + k_rows + v_rows, h)]
    else:
        groups = [
            TensorGroup("attn_q", layer, q_rows, h),
            TensorGroup("attn_k", layer, k_rows, h),
            TensorGroup("attn_v", layer, v_rows, h),
        ]
    groups.append(TensorGroup("attn_output", layer, h, heads * info.head_dim_v))
    if info.attn_bias:
        groups.append(TensorGroup("bias", layer, 1, q_rows + k_rows + v_rows))
    return groups


def _ffn_groups(info: ModelInfo, layer: int) -> list[TensorGroup]:
    h = info.hidden
    if info.replaced_by_linear(layer)[1]:
        return [TensorGroup("ffn_linear", layer, h, h)]  # DeciLM's linear_mlp
    ff = info.ffn_at(layer)
    if _has_experts(info, layer):
        return _moe_groups(info, layer, info.moe_intermediate or ff)
    if not ff:
        return []
    groups = [TensorGroup("ffn_gate", layer, ff, h)] if info.ffn_gated else []
    groups.append(TensorGroup("ffn_up", layer, ff, h))
    groups.append(TensorGroup("ffn_down", layer, h, ff))
    if not info.ffn_gated and info.attn_bias:  # GPT-NeoX style: biases everywhere
        groups.append(TensorGroup("bias", layer, 1, ff + 2 * h))
    return groups


def _has_experts(info: ModelInfo, layer: int) -> bool:
    if not info.is_moe:
        return False
    plan = info.layer_plan
    if plan is not None and plan.moe:
        return layer < len(plan.moe) and plan.moe[layer]
    return layer >= info.n_dense_layers


def _moe_groups(info: ModelInfo, layer: int, moe_ff: int) -> list[TensorGroup]:
    h, n = info.hidden, info.n_experts
    width = info.moe_latent or h  # a latent MoE's experts read and write the latent
    groups = [TensorGroup("ffn_gate_inp", layer, n, h)]
    if info.moe_latent:
        groups += [
            TensorGroup("ffn_latent_in", layer, width, h),
            TensorGroup("ffn_latent_out", layer, h, width),
        ]
    if info.ffn_gated:
        groups.append(TensorGroup("ffn_gate_exps", layer, moe_ff, width, n))
    groups += [
        TensorGroup("ffn_up_exps", layer, moe_ff, width, n),
        TensorGroup("ffn_down_exps", layer, width, moe_ff, n),
    ]
    shared = info.shared_intermediate or (moe_ff * info.n_shared_experts)
    if shared:
        if info.ffn_gated:
            groups.append(TensorGroup("ffn_gate_shexp", layer, shared, h))
        groups += [
            TensorGroup("ffn_up_shexp", layer, shared, h),
            TensorGroup("ffn_down_shexp", layer, h, shared),
        ]
    return groups


def count_params_arithmetic(info: ModelInfo) -> int:
    """Parameters from the shape alone (embeddings once when tied, lm_head otherwise)."""
    return sum(g.n_elements for g in tensor_groups(info))


_LINEAR_KINDS_EXCLUDED = ("token_embd", "output", "norm", "bias", "ffn_gate_inp", "ssm_conv1d", "ssm_misc")


def expert_params(info: ModelInfo) -> int:
    """Parameters in the routed experts' matrices (ffn_{gate,up,down}_exps)."""
    return sum(g.n_elements for g in tensor_groups(info) if g.kind.endswith("_exps"))


def split_params(info: ModelInfo) -> tuple[int, int]:
    """(parameters in quantizable linear layers, parameters kept 16-bit: embeddings, lm_head, norms)."""
    linear = kept = 0
    for g in tensor_groups(info):
        if g.kind in _LINEAR_KINDS_EXCLUDED:
            kept += g.n_elements
        else:
            linear += g.n_elements
    if info.n_params and linear + kept:
        # scale to the exact count when we have it (keeps the split, fixes what the shapes miss)
        linear = max(0, info.n_params - kept)
    return linear, kept


def _per_layer_norms(info: ModelInfo) -> int:
    """Per-head q/k norms (Qwen3's q_norm and k_norm over head_dim)."""
    return 2 * info.head_dim_k


# Parameters transformers' modules hold beyond `tensor_groups`' matrices, per layer, for the architectures
# where the arithmetic then equals the meta-device count exactly (a test checks each against transformers).
_EXTRA_LAYER_PARAMS: dict[str, Callable[[ModelInfo], int]] = {
    "llama": lambda info: 0,
    "mistral": lambda info: 0,
    "qwen2": lambda info: 0,
    "gemma": lambda info: 0,
    "mixtral": lambda info: 0,
    "granite": lambda info: 0,
    "qwen3": _per_layer_norms,
    "qwen3_moe": _per_layer_norms,
    # pre/post feed-forward norms beside the attention ones
    "gemma2": lambda info: 2 * info.hidden,
    "gemma3_text": lambda info: 2 * info.hidden + _per_layer_norms(info),
    # q_norm over every query head, k_norm over the KV heads
    "olmo2": lambda info: (info.n_heads + info.n_kv_heads) * info.head_dim_k,
    # DeciLM / Nemotron-NAS: per-layer matrices and RMSNorm weights only (its plan lays them out)
    "nemotron-nas": lambda info: 0,
    # the shared expert's gate (one row of hidden) in every MoE layer
    "qwen2_moe": lambda info: info.hidden if info.shared_intermediate or info.n_shared_experts else 0,
}
# config.json keys that add tensors the arithmetic does not lay out: let transformers count those.
_UNCOUNTED_KEYS = ("mlp_bias", "text_config", "vision_config", "audio_config", "rope_scaling_layers")


def count_params_exact(config: dict[str, Any], info: ModelInfo) -> int | None:
    """The exact parameter count from the shapes, for the architectures whose every tensor the arithmetic
    lays out; None when transformers has to build the model to know."""
    extra = _EXTRA_LAYER_PARAMS.get(info.arch)
    if extra is None or any(config.get(key) for key in _UNCOUNTED_KEYS):
        return None
    if info.attn_bias and info.arch not in ("qwen2", "qwen2_moe"):  # o_proj gets a bias too: not laid out
        return None
    return count_params_arithmetic(info) + info.n_layers * extra(info)


def _params_cache_path() -> Path:
    import platformdirs

    return Path(platformdirs.user_cache_dir("vramtui")) / "param_counts.json"


def cached_count_params_meta(config: dict[str, Any]) -> int | None:
    """`count_params_meta`, remembered per config (its hash) in the user cache dir: importing torch and
    transformers takes seconds, the second estimate of the same config.json should not."""
    import hashlib

    key = hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()
    path = _params_cache_path()
    try:
        known = json.loads(path.read_text(encoding="utf-8"))
        known = known if isinstance(known, dict) else {}
    except (OSError, ValueError):
        known = {}
    if isinstance(known.get(key), int):
        return int(known[key])
    count = count_params_meta(config)
    if count:
        known[key] = count
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(known), encoding="utf-8")
        except OSError:
            pass  # a read-only cache costs time, never the answer
    return count


def count_params_meta(config: dict[str, Any]) -> int | None:
    """Exact parameter count: build the model on PyTorch's meta device (no memory) through transformers.

    Tied weights are one Parameter, so they count once; an untied lm_head counts (accelerate's estimator
    forgets it). Returns None when transformers or torch are missing or do not know the architecture.
    """
    model_type = config.get("model_type")
    if not model_type:
        return None
    try:
        import torch
        import transformers
    except Exception:
        return None
    try:
        conf = transformers.AutoConfig.for_model(
            model_type, **{k: v for k, v in config.items() if k != "model_type"}
        )
    except Exception:
        return None
    builders = ("AutoModelForCausalLM", "AutoModelForImageTextToText", "AutoModel")
    for builder_name in builders:
        builder = getattr(transformers, builder_name, None)
        if builder is None:
            continue
        try:
            with torch.device("meta"):
                model = builder.from_config(conf)
        except Exception:
            continue
        return int(sum(p.numel() for p in model.parameters()))
    return None


def _unknown_model_type(config: dict[str, Any]) -> str | None:
    """A note when the installed transformers does not know the config's model_type (QA 4: nothing was said,
    and from_pretrained then refuses it), unless the config brings its own code (auto_map)."""
    model_type = config.get("model_type")
    if not isinstance(model_type, str) or not model_type or config.get("auto_map"):
        return None
    try:
        import transformers
        from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    except Exception:
        return None
    if model_type in CONFIG_MAPPING:
        return None
    return (
        f"model_type {model_type!r} is not one transformers {transformers.__version__} knows: loading it needs "
        "a newer transformers (or the model's own code, trust_remote_code)"
    )


# --- Hugging Face config.json ------------------------------------------------------------------------------


def _text_config(config: dict[str, Any]) -> dict[str, Any]:
    for key in ("text_config", "llm_config", "language_config"):
        sub = config.get(key)
        if isinstance(sub, dict) and sub.get("num_hidden_layers"):
            merged = dict(sub)
            merged.setdefault("model_type", sub.get("model_type") or config.get("model_type"))
            if "tie_word_embeddings" not in merged and "tie_word_embeddings" in config:
                merged["tie_word_embeddings"] = config["tie_word_embeddings"]
            if "quantization_config" in config:
                merged.setdefault("quantization_config", config["quantization_config"])
            for k in ("torch_dtype", "dtype"):
                if k in config:
                    merged.setdefault(k, config[k])
            return merged
    return config


def _int(cfg: dict[str, Any], *keys: str, default: int | None = None) -> int | None:
    for key in keys:
        value = cfg.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise VramtuiError(f"config.json: {key} should be a number, not {value!r}")
        if value < 0 or not math.isfinite(value):
            raise VramtuiError(f"config.json: {key} is {value!r}")
        if value != int(value):  # QA: 4.5 layers was sized as 4
            raise VramtuiError(f"config.json: {key} should be a whole number, not {value!r}")
        return int(value)
    return default


def quant_from_config(qc: dict[str, Any] | None) -> str | None:
    """quantization_config -> nf4 / nf4-dq / int8 / gptq-g128 / awq-g128 / fp8 / mxfp4; a method vramtui
    does not know comes back as its own name (the caller marks it unknown)."""
    spec = hfquant.spec_from_config(qc)
    if spec is not None:
        return spec.name
    if not isinstance(qc, dict):
        return None
    method = str(qc.get("quant_method", "")).lower()
    return method or None


_SHAPE_ALIASES = {
    "num_hidden_layers": ("num_hidden_layers", "n_layer", "num_layers"),
    "hidden_size": ("hidden_size", "n_embd", "d_model"),
    "num_attention_heads": ("num_attention_heads", "n_head"),
}


class ShapeNotGiven(VramtuiError):
    """A config.json without (or with a 0 for) a shape key the estimate needs; the engine would load it with
    its class's defaults and fail on the first weight."""


def _require_shape(cfg: dict[str, Any], source: str, **values: int | None) -> None:
    """A field given as 0 is named on its own; the ones missing are listed (only those)."""
    for name, value in values.items():
        if value == 0:
            given = next(key for key in _SHAPE_ALIASES[name] if cfg.get(key) is not None)
            raise ShapeNotGiven(f"{source}: config.json gives {given} as 0; it must be at least 1")
    missing = [name for name, value in values.items() if value is None]
    if (
        missing
        and len(missing) == len(values)
        and ({"quant_method", "quantization", "quant_algo"} & set(cfg))
    ):
        raise VramtuiError(
            f"{source}: this is a quantization config, not the model's: pass the model's config.json or "
            "its folder (the quantization config beside it is read from there)"
        )
    if missing:
        raise ShapeNotGiven(f"{source}: config.json lacks {' / '.join(missing)}")


# Past these no published model goes (the widest vocabularies are ~260k, hidden sizes 16k, 128 layers):
# a config.json beyond them is a typo, refused as the flags refuse theirs.
_CONFIG_LIMITS = {
    "vocab_size": 16_000_000,
    "hidden_size": 1 << 20,
    "num_hidden_layers": 10_000,
    "num_attention_heads": 1 << 16,
    "num_key_value_heads": 1 << 16,
    "intermediate_size": 1 << 24,
    "max_position_embeddings": 2**31 - 1,
}


def _require_plausible(cfg: dict[str, Any], source: str) -> None:
    """A config.json's shape that no model has is one clear error (QA: vocab_size 1e30 was sized as a
    10^22-parameter model, num_key_value_heads 0 read as one per query head)."""
    for key, limit in _CONFIG_LIMITS.items():
        value = _int(cfg, key)
        if value is not None and value > limit:
            said = f"{value:,}" if value < 10**15 else f"{float(value):.3g}"
            raise VramtuiError(f"{source}: {key} is {said}, past any model's (at most {limit:,})")
    heads, kv_heads = (
        _int(cfg, "num_attention_heads", "n_head"),
        _int(cfg, "num_key_value_heads", "num_kv_heads"),
    )
    if kv_heads == 0:
        raise VramtuiError(f"{source}: num_key_value_heads is 0: a model has at least one KV head")
    if heads and kv_heads and kv_heads > heads:
        raise VramtuiError(
            f"{source}: num_key_value_heads {kv_heads} is more than num_attention_heads {heads}: each KV "
            "head serves one or more query heads"
        )
    if heads and kv_heads and heads % kv_heads:  # QA: 3 KV heads for 4 was sized; no engine builds it
        raise VramtuiError(
            f"{source}: num_attention_heads {heads} is not a multiple of num_key_value_heads {kv_heads}: each "
            "KV head serves the same number of query heads"
        )
    hidden = _int(cfg, "hidden_size", "n_embd", "d_model")
    if heads and hidden and not _int(cfg, "head_dim") and hidden % heads:
        raise VramtuiError(
            f"{source}: hidden_size {hidden} does not divide into num_attention_heads {heads} and no "
            "head_dim is given"
        )


def info_from_config(config: Any, source: str, exact_params: bool = True) -> ModelInfo:
    """ModelInfo from a parsed config.json (the text part of multimodal models). A bad value is said with
    the file it is in (QA 19 F13: "config.json: num_hidden_layers ..." named no folder)."""
    try:
        return _info_from_config(config, source, exact_params)
    except VramtuiError as error:
        said = str(error)
        if not said.startswith("config.json: "):
            raise
        where = source if source.endswith("config.json") else f"{source.rstrip('/')}/config.json"
        raise VramtuiError(f"{where}: {said.removeprefix('config.json: ')}") from None


def _info_from_config(config: Any, source: str, exact_params: bool) -> ModelInfo:
    if not isinstance(config, dict):
        raise VramtuiError(f"{source}: config.json is not a JSON object")
    full = _text_config(config)
    cfg = layerplan.scalar_view(full)  # per-layer lists read as their largest here, per layer below
    model_type = str(cfg.get("model_type") or config.get("model_type") or "llama")
    n_layers = _int(cfg, "num_hidden_layers", "n_layer", "num_layers")
    hidden = _int(cfg, "hidden_size", "n_embd", "d_model")
    n_heads = _int(cfg, "num_attention_heads", "n_head")
    _require_shape(cfg, source, num_hidden_layers=n_layers, hidden_size=hidden, num_attention_heads=n_heads)
    _require_plausible(cfg, source)
    per_layer = layerplan.from_config(full, source, n_layers, hidden, n_heads)
    n_kv = _int(cfg, "num_key_value_heads", "num_kv_heads", "n_head_kv", default=n_heads) or n_heads
    head_dim = _int(cfg, "head_dim") or hidden // n_heads
    vocab = _int(cfg, "vocab_size", default=32000) or 32000
    encoder = model_type in ENCODER_ARCHS
    tied = cfg.get("tie_word_embeddings")
    if tied is None or encoder:  # an encoder's flag (True in BERT's config) ties no head: it has none
        tied = model_type in _TIED_BY_DEFAULT
    info = ModelInfo(
        source=source,
        arch=model_type,
        n_layers=n_layers,
        hidden=hidden,
        n_heads=n_heads,
        n_kv_heads=n_kv,
        head_dim_k=head_dim,
        head_dim_v=head_dim,
        vocab=vocab,
        tied_embeddings=bool(tied),
        encoder_only=encoder,
        max_context=_int(cfg, "max_position_embeddings", "n_positions", "seq_length"),
        intermediate=_int(cfg, "intermediate_size", "ffn_hidden_size", "n_inner"),
        attn_bias=bool(cfg.get("attention_bias", cfg.get("bias", model_type in _QKV_BIAS))),
        ffn_gated=model_type not in ("gpt_neox", "gpt2", "phi", "falcon", "starcoder2")
        and str(cfg.get("mlp_hidden_act") or cfg.get("hidden_act")) != "relu2",
        fused_qkv=model_type in _FUSED_QKV,
    )
    dtype = str(cfg.get("torch_dtype") or cfg.get("dtype") or "bfloat16")
    info.dtype = q.ALIASES.get(dtype.replace("torch.", ""), "bf16")
    if per_layer is not None:
        apply_per_layer(info, per_layer)
    _config_sliding_window(info, cfg)
    _config_experts(info, cfg)
    _config_mla(info, cfg)
    recurrent.from_config(info, cfg)
    # a nested config's count is the text model's (its own shapes, or transformers building it): the tower
    # of vision_config is counted here; a flat one's meta-device build has it already
    tower = vision.tower_params(config, hidden)
    _config_quant_and_params(info, cfg, exact_params, tower, nested=full is not config)
    info.vision = vision.from_config(config, source, hidden)
    return info


def apply_per_layer(info: ModelInfo, per_layer: layerplan.PerLayer) -> None:
    """Each layer's own heads, KV heads and MLP width; the scalars keep the largest (the widest activation)."""
    if per_layer.kv_heads is not None:
        info.kv_heads_per_layer = per_layer.kv_heads
        info.n_kv_heads = max(per_layer.kv_heads, default=0) or info.n_kv_heads
    plan = per_layer.plan
    if plan is None:
        return
    info.layer_plan = plan
    info.n_heads = max(plan.heads, default=0) or info.n_heads
    info.intermediate = max(plan.ffn, default=0) or info.intermediate
    info.notes.append(plan.describe())


def _config_sliding_window(info: ModelInfo, cfg: dict[str, Any]) -> None:
    """Explicit layer_types first, then the architecture's fixed pattern."""
    n_layers, model_type = info.n_layers, info.arch
    window = _int(cfg, "sliding_window")
    layer_types = cfg.get("layer_types")
    if isinstance(layer_types, list) and window:
        info.swa_layers = sum(1 for t in layer_types[:n_layers] if "sliding" in str(t))
    elif window and model_type in _SWA_PATTERN:
        pattern = _int(cfg, "sliding_window_pattern") or _SWA_PATTERN[model_type]
        info.swa_layers = n_layers - n_layers // pattern
    elif window and cfg.get("use_sliding_window"):
        info.swa_layers = n_layers - (_int(cfg, "max_window_layers", default=0) or 0)
    if info.swa_layers:
        info.sliding_window = window
    _config_shared_kv(info, cfg)


def _config_shared_kv(info: ModelInfo, cfg: dict[str, Any]) -> None:
    """Gemma 3n / 4: the last num_kv_shared_layers reuse an earlier layer's K and V (no cache of their own);
    Gemma 4's global layers have their own head width (global_head_dim) and KV heads."""
    shared = _int(cfg, "num_kv_shared_layers", default=0) or 0
    if shared:
        info.kv_layers = max(info.n_layers - shared, 0)
    global_dim = _int(cfg, "global_head_dim", default=0) or 0
    if global_dim and info.swa_layers and global_dim != info.head_dim_k:
        info.head_dim_swa = info.head_dim_k
        info.head_dim_k = info.head_dim_v = global_dim
    global_kv = _int(cfg, "num_global_key_value_heads", default=0) or 0
    if global_kv and info.swa_layers and global_kv != info.n_kv_heads:
        from vramtui.core.estimate.kvcache import is_swa

        info.kv_heads_per_layer = tuple(
            info.kv_heads_at(il) if is_swa(info, il) else global_kv for il in range(info.n_layers)
        )


def _config_experts(info: ModelInfo, cfg: dict[str, Any]) -> None:
    """Mixture of experts: every expert is resident."""
    experts = _int(cfg, "num_local_experts", "num_experts", "n_routed_experts", default=0) or 0
    if experts > 1:
        info.is_moe = True
        info.n_experts = experts
        info.n_experts_used = _int(cfg, "num_experts_per_tok", "moe_topk", default=2) or 2
        info.moe_intermediate = _int(cfg, "moe_intermediate_size") or info.intermediate
        info.n_shared_experts = _int(cfg, "n_shared_experts", default=0) or 0
        info.shared_intermediate = _int(
            cfg, "shared_expert_intermediate_size", "moe_shared_expert_intermediate_size"
        )
        info.moe_latent = _int(cfg, "moe_latent_size", default=0) or 0
        info.n_dense_layers = _int(cfg, "first_k_dense_replace", default=0) or 0


def _config_mla(info: ModelInfo, cfg: dict[str, Any]) -> None:
    """DeepSeek MLA: the cache holds one latent per token, not per-head K/V."""
    kv_lora = _int(cfg, "kv_lora_rank", default=0) or 0
    if kv_lora:
        info.kv_lora_rank = kv_lora
        info.qk_rope_head_dim = _int(cfg, "qk_rope_head_dim", default=64) or 64
        info.qk_nope_head_dim = _int(cfg, "qk_nope_head_dim", default=128) or 128
        info.q_lora_rank = _int(cfg, "q_lora_rank", default=0) or 0
        info.head_dim_k = info.qk_nope_head_dim + info.qk_rope_head_dim
        info.head_dim_v = _int(cfg, "v_head_dim", default=128) or 128
        info.n_kv_heads = info.n_heads


def _config_quant_and_params(
    info: ModelInfo, cfg: dict[str, Any], exact_params: bool, tower: int = 0, nested: bool = False
) -> None:
    qc = cfg.get("quantization_config")
    info.quant_spec = hfquant.with_expert_dtype(hfquant.spec_from_config(qc), cfg.get("expert_dtype"))
    info.quant = quant_from_config(qc)
    if qc not in (None, {}) and not isinstance(qc, dict):
        # QA: "fp8" or a list there was sized as 16-bit without a word; no loader reads that shape
        info.unknown_quant = f"{qc!r:.40} as the whole quantization_config (an object belongs there)"
    if info.quant and info.quant_spec is None:
        info.unknown_quant, info.quant = info.quant, None
        if isinstance(qc, dict) and str(qc.get("quant_method", "")).lower() == "compressed-tensors":
            info.unknown_quant = "compressed-tensors (a scheme vramtui does not lay out)"
    if exact_params:
        exact = count_params_exact(cfg, info)
        if exact:
            info.n_params, info.params_exact = exact, True
            info.notes.append("parameters counted exactly from the config's shapes")
        else:
            meta = cached_count_params_meta({**cfg, "quantization_config": None} if qc else cfg)
            if meta:
                info.n_params, info.params_exact = meta, True
                info.notes.append("parameters counted by building the model on the meta device (cached)")
                tower = tower if nested else 0
    if not info.n_params:
        info.n_params = count_params_arithmetic(info)
        if exact_params:
            info.notes.append("parameter count from the config's shapes (transformers could not build it)")
            unknown = _unknown_model_type(cfg)
            if unknown:
                info.notes.append(unknown)
        else:  # --no-meta, or a folder whose safetensors give the weights' own sizes
            info.notes.append("parameter count computed from the config's shapes")
    if tower:
        info.n_params += tower
        info.vision_params = tower
        info.notes.append(f"vision tower: {tower / 1e9:.3f}B parameters from vision_config, kept 16-bit")
    info.bits_per_weight = q.bits_per_weight(info.quant) if info.quant else q.bits_per_weight(info.dtype)
    if info.quant_spec is not None and info.n_params:  # the average over the quantized and 16-bit parts
        from vramtui.core.estimate.weights import hf_quantized_bytes

        sized = hf_quantized_bytes(info, info.quant_spec)
        info.bits_per_weight = sized.total * 8 / info.n_params
        info.notes.append(f"quantization_config: {info.quant_spec.describe()}")


def read_config_file(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise VramtuiError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as error:
        raise VramtuiError(f"{path}: cannot read ({error})") from None
    try:
        config = json.loads(text)
    except json.JSONDecodeError as error:
        raise VramtuiError(f"{path}: malformed JSON at line {error.lineno} ({error.msg})") from None
    if not isinstance(config, dict):
        raise VramtuiError(f"{path}: config.json is not a JSON object")
    names = config.get("architectures")
    if names is not None and not (isinstance(names, list) and all(isinstance(n, str) for n in names)):
        # the engines refuse it while validating (vLLM: "Input should be a valid list"): said before a launch
        raise VramtuiError(f"{path}: architectures should be a list of class names, not {names!r}")
    return config


# --- safetensors headers -----------------------------------------------------------------------------------


def read_safetensors_header(path: Path) -> dict[str, tuple[str, tuple[int, ...]]]:
    """name -> (dtype, shape) from one file's header; no tensor is loaded."""
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(str(path), framework="numpy") as handle:
            out = {}
            for name in handle.keys():  # noqa: SIM118 - safe_open is not a mapping
                tensor = handle.get_slice(name)
                out[name] = (str(tensor.get_dtype()), tuple(int(d) for d in tensor.get_shape()))
            return out
    except SafetensorError as error:
        raise VramtuiError(f"{path}: bad safetensors header ({error})") from None
    except OSError as error:
        raise VramtuiError(f"{path}: cannot read ({error})") from None


def safetensors_bytes(files: Iterable[Path]) -> tuple[int, int, dict[str, int]]:
    """(total bytes, total elements, bytes per dtype) over the given files' headers."""
    total = elements = 0
    by_dtype: dict[str, int] = {}
    for path in files:
        for dtype, shape in read_safetensors_header(path).values():
            n = math.prod(shape)
            size = math.ceil(n * _ST_DTYPE_BYTES.get(dtype, 2))
            total += size
            elements += n
            by_dtype[dtype] = by_dtype.get(dtype, 0) + size
    return total, elements, by_dtype


def _with_modelopt_file(config: dict[str, Any], folder: Path) -> dict[str, Any]:
    """ModelOpt checkpoints may say how they are quantized in hf_quant_config.json alone (vLLM reads it
    there): the config gets it as its quantization_config."""
    quant_file = folder / "hf_quant_config.json"
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else {}
    if "quantization_config" in config or "quantization_config" in text or not quant_file.is_file():
        return config
    return {**config, "quantization_config": {"quant_method": "modelopt", **read_config_file(quant_file)}}


# The shape keys an engine builds the model from: a string, a fraction or a negative there fails its load.
_SHAPE_KEYS = (
    "num_hidden_layers", "hidden_size", "num_attention_heads", "num_key_value_heads", "intermediate_size",
    "vocab_size", "head_dim",
)  # fmt: skip


def check_hf_folder(folder: Path) -> None:
    """Before a launch: the folder's config.json parses to an object whose shape keys are whole numbers that
    some model could have, and every safetensors file's header reads and covers its file (QA: a malformed config.json was launched,
    and the engine's JSONDecodeError came back 30 s later as "failed at load weights (other)")."""
    whole = read_config_file(folder / "config.json")
    config = _text_config(whole)
    _check_shape_given(whole, folder)
    # a shape no model has (1e30 layers, 8 heads over 3 KV heads), refused as `estimate` refuses it, not
    # after a start of minutes (QA 23 D2)
    _require_plausible(config, str(folder / "config.json"))
    for key in _SHAPE_KEYS:
        value = _int(config, key)
        if value is not None and config[key] != value:
            raise VramtuiError(
                f"{folder / 'config.json'}: {key} should be a whole number, not {config[key]!r}"
            )
    for shard in sorted(folder.glob("*.safetensors")):
        read_safetensors_header(shard)
    index = folder / "model.safetensors.index.json"
    if index.is_file():  # the estimate sizes from the index alone; a load needs every shard it names
        weight_map = read_config_file(index).get("weight_map")
        names = sorted(set(map(str, weight_map.values()))) if isinstance(weight_map, dict) else []
        missing = [name for name in names if not (folder / name).is_file()]
        if missing:
            raise VramtuiError(
                f"{folder}: {len(missing)} of the {len(names)} shards {index.name} names are not in the folder "
                f"({missing[0]}{', ...' if len(missing) > 1 else ''}): a download that did not finish?"
            )


def _check_shape_given(config: Any, folder: Path) -> None:
    """The shape keys the estimate needs are there: a config.json without hidden_size loads in the engine with
    its class's default (4096) and fails on the first weight (QA 16: `estimate` refused it, `check` launched
    it and read the engine's shape error 30 s later)."""
    try:
        info_from_config(config, str(folder))
    except ShapeNotGiven:
        raise
    except VramtuiError:
        pass  # any other problem of the config is the engine's to say (an architecture not sized here)


def info_from_hf_folder(folder: Path, exact_params: bool = True) -> ModelInfo:
    config_path = folder / "config.json"
    if not config_path.is_file():
        raise VramtuiError(f"{folder}: no config.json in this folder (is it a Hugging Face model?)")
    config = _with_modelopt_file(read_config_file(config_path), folder)
    index_path = folder / "model.safetensors.index.json"
    shards = sorted(folder.glob("*.safetensors"))
    # with weights on disk the exact count comes from them; skip building the model
    info = info_from_config(config, str(folder), exact_params=exact_params and not shards)
    if index_path.is_file():
        index = read_config_file(index_path)
        weight_map = index.get("weight_map")
        if not isinstance(weight_map, dict):
            raise VramtuiError(f"{index_path}: no weight_map")
        names = sorted(set(map(str, weight_map.values())))
        missing = [n for n in names if not (folder / n).is_file()]
        total_size = (index.get("metadata") or {}).get("total_size")
        if not missing:
            shards = [folder / n for n in names]
        elif isinstance(total_size, int | float) and total_size > 0:
            info.weights_bytes = int(total_size)
            info.weights_source = "index"
            info.notes.append(f"{len(missing)} of {len(names)} shards not on disk: size from the index")
            return info
        else:
            shards = []
    if shards:
        total, elements, by_dtype = safetensors_bytes(shards)
        info.weights_bytes = total
        info.weights_by_dtype = by_dtype
        info.weights_source = "safetensors"
        info.largest_shard_bytes = max(shard.stat().st_size for shard in shards)
        if not info.quant:
            info.n_params, info.params_exact = elements, True
            big = max(by_dtype, key=lambda k: by_dtype[k]) if by_dtype else "BF16"
            info.dtype = {"F32": "f32", "F16": "f16", "BF16": "bf16", "F8_E4M3": "fp8"}.get(big, info.dtype)
        if info.n_params:
            info.bits_per_weight = total * 8 / info.n_params
    return info


# --- GGUF ----------------------------------------------------------------------------------------------------

_BLK = re.compile(r"^blk\.(\d+)\.")


def _field(reader: Any, key: str) -> Any:
    """A key's value as the header holds it (a long array, such as the token list, as its count only)."""
    return reader.fields.get(key)


def _gguf_int(reader: Any, key: str) -> int | None:
    value = _field(reader, key)
    if isinstance(value, list):
        nums = [int(v) for v in value if isinstance(v, int | float)]
        return max(nums) if nums else None
    if isinstance(value, int | float) and not isinstance(value, bool):
        return int(value)
    return None


_SPLIT_NAME = re.compile(r"^(?P<stem>.*)-(?P<no>\d{5})-of-(?P<count>\d{5})\.gguf$")


def _open_gguf(path: Path) -> Any:
    """The file's header and tensor table (ggufheader: read once per file, tokenizer arrays skipped)."""
    from vramtui.core.estimate.ggufheader import read_header

    return read_header(path)


def _gguf_split_siblings(path: Path, reader: Any) -> list[tuple[Path, Any]]:
    """The other files of a split GGUF (name-00001-of-00003.gguf); llama.cpp loads them all."""
    count = _gguf_int(reader, "split.count") or 1
    match = _SPLIT_NAME.match(path.name)
    if count <= 1 or not match:
        return []
    siblings = []
    for number in range(1, count + 1):
        part = path.with_name(f"{match.group('stem')}-{number:05d}-of-{count:05d}.gguf")
        if part == path:
            continue
        if not part.is_file():
            raise VramtuiError(f"{path}: split GGUF is missing {part.name}")
        siblings.append((part, _open_gguf(part)))
    return siblings


@dataclass
class _GgufTensors:
    """A GGUF's tensor table summed the way the estimator reads it: bytes per layer, embedding, output."""

    layer_bytes: list[int]
    layer_tensors: list[tuple[str, int]] = field(default_factory=list)
    order: list[tuple[str, int, int, int]] = field(default_factory=list)  # (name, part, offset, bytes)
    token_embd: int = 0
    output: int = 0
    other: int = 0
    n_elements: int = 0
    has_output: bool = False
    by_type: dict[str, int] = field(default_factory=dict)
    token_embd_type: str | None = None
    output_type: str | None = None

    @property
    def total(self) -> int:
        return sum(self.layer_bytes) + self.token_embd + self.output + self.other


def _gguf_tensors(path: Path, readers: list[tuple[Path, Any]], n_layers: int) -> _GgufTensors:
    found = _GgufTensors(layer_bytes=[0] * n_layers)
    all_tensors = [
        (i, part, part.stat().st_size, t) for i, (part, r) in enumerate(readers) for t in r.tensors
    ]
    for index, part, file_size, tensor in all_tensors:
        size = int(tensor.n_bytes)
        end = int(tensor.data_offset) + size
        if end > file_size:
            raise VramtuiError(f"{part}: truncated GGUF file (tensor {tensor.name} ends past the file)")
        found.order.append((tensor.name, index, int(tensor.data_offset), size))
        found.n_elements += int(tensor.n_elements)
        type_name = tensor.type_name
        found.by_type[type_name] = found.by_type.get(type_name, 0) + size
        match = _BLK.match(tensor.name)
        if match and int(match.group(1)) < n_layers:
            found.layer_bytes[int(match.group(1))] += size
            found.layer_tensors.append((tensor.name, size))
        elif tensor.name == "token_embd.weight":
            found.token_embd += size
            found.token_embd_type = type_name
        elif tensor.name == "output.weight":
            found.output += size
            found.has_output = True
            found.output_type = type_name
        else:
            found.other += size
    if not all_tensors:
        raise VramtuiError(f"{path}: GGUF file has no tensors (a vocabulary-only file?)")
    return found


def _gguf_file_type(reader: Any) -> str | None:
    import gguf

    ftype_num = _gguf_int(reader, "general.file_type")
    if ftype_num is None:
        return None
    try:
        return gguf.LlamaFileType(ftype_num).name.lower().replace("mostly_", "").replace("all_", "")
    except ValueError:
        return None


def _gguf_first_split(path: Path) -> Path:
    split = _SPLIT_NAME.match(path.name)
    if split and split.group("no") != "00001":  # metadata lives in the first file
        first = path.with_name(f"{split.group('stem')}-00001-of-{split.group('count')}.gguf")
        if first.is_file():
            return first
    return path


def _gguf_experts_mla_swa(info: ModelInfo, reader: Any, key: Any) -> None:
    """Mixture of experts, DeepSeek's MLA cache and sliding-window layers, as the GGUF's metadata says."""
    n_layers = info.n_layers
    experts = key("expert_count") or 0
    if experts > 1:
        info.is_moe, info.n_experts = True, experts
        info.n_experts_used = key("expert_used_count") or 0
        info.moe_intermediate = key("expert_feed_forward_length")
        info.n_shared_experts = key("expert_shared_count") or 0
        info.n_dense_layers = key("leading_dense_block_count") or 0
    kv_lora = key("attention.kv_lora_rank") or 0
    if kv_lora:
        # llama.cpp's MLA cache: K holds latent + rope part, V the latent (key/value_length say so)
        info.kv_lora_rank = kv_lora
        info.qk_rope_head_dim = key("rope.dimension_count") or 64
        info.mla_latent = key("attention.key_length_mla") is not None
    window = key("attention.sliding_window")
    if window is None and info.arch == "llama4":
        window = LLAMA4_CHUNK
    if window:
        pattern_field = _field(reader, f"{info.arch}.attention.sliding_window_pattern")
        if isinstance(pattern_field, list):
            info.swa_layers = sum(1 for flag in pattern_field[:n_layers] if flag)
        elif isinstance(pattern_field, int) and pattern_field > 0:
            info.swa_layers = n_layers - n_layers // pattern_field
        elif info.arch in _SWA_PATTERN:
            info.swa_layers = n_layers - n_layers // _SWA_PATTERN[info.arch]
        if info.swa_layers:
            info.sliding_window = window
            swa_width = key("attention.key_length_swa")
            if swa_width and swa_width != info.head_dim_k:
                info.head_dim_swa = swa_width
    shared = key("attention.shared_kv_layers")
    if info.arch == "gemma3n":  # llama.cpp's fixed split (models/gemma3n.cpp): the first 20 layers
        info.kv_layers = min(_GEMMA3N_KV_LAYERS, n_layers)
    elif shared:
        info.kv_layers = max(n_layers - shared, 0)
    nextn = key("nextn_predict_layers") or 0
    if 0 < nextn < n_layers:
        info.mtp_layers = nextn
    info.indexer_key_length = key("attention.indexer.key_length") or 0
    if info.indexer_key_length:
        types = _field(reader, f"{info.arch}.attention.indexer.types")
        trunk = n_layers - info.mtp_layers
        info.indexer_layers = indexer_layers(info.arch, trunk, key("context_length") or 0, types)


# GLM-5.2's indexers (its config.json's indexer_types, llama.cpp's models/glm-dsa.cpp): a full one in the
# first two layers and every fourth from the third; the others reuse the last full one's top-k. GLM-5 and
# 5.1 (trained on less than 1M tokens) have one in every layer, as DeepSeek-V3.2 has.
_GLM_5_2_CONTEXT = 1 << 20


def indexer_layers(arch: str, trunk: int, trained: int, types: Any = None) -> frozenset[int] | None:
    """Which layers keep the indexer's key cache: the file's `attention.indexer.types` where it has them,
    else GLM-5.2's pattern for a glm-dsa model trained on 1M tokens; None (all) otherwise."""
    if isinstance(types, list) and types:
        return frozenset(il for il, full in enumerate(types[:trunk]) if full)
    if arch == "glm-dsa" and trained >= _GLM_5_2_CONTEXT:
        return frozenset(il for il in range(trunk) if il < 2 or (il - 2) % 4 == 0)
    return None


def info_from_gguf(path: Path) -> ModelInfo:
    """ModelInfo from a GGUF file's header and tensor table (no tensor data is read)."""
    path = _gguf_first_split(path)
    reader = _open_gguf(path)
    readers = [(path, reader), *_gguf_split_siblings(path, reader)]
    arch = str(_field(reader, "general.architecture") or "llama")
    a = arch

    def key(name: str) -> int | None:
        return _gguf_int(reader, f"{a}.{name}")

    n_layers = key("block_count")
    hidden = key("embedding_length")
    n_heads = key("attention.head_count")
    attention_free = arch in recurrent.ALL_RECURRENT  # Mamba / RWKV: may have no attention head at all
    if not n_layers or not hidden or not (n_heads or attention_free):
        raise VramtuiError(f"{path}: GGUF metadata lacks {a}.block_count / embedding_length / head_count")
    kv_field = _field(reader, f"{a}.attention.head_count_kv")
    kv_per_layer: tuple[int, ...] | None = None
    if isinstance(kv_field, list) and kv_field:
        kv_per_layer = tuple(int(v) for v in kv_field)
        n_kv = max(kv_per_layer)
    else:
        n_kv = key("attention.head_count_kv") or n_heads or 0
    head_dim_k = key("attention.key_length") or (hidden // n_heads if n_heads else 0)
    head_dim_v = key("attention.value_length") or head_dim_k
    tokens = reader.fields.get("tokenizer.ggml.tokens")  # its length only: the tokens are not read
    vocab = key("vocab_size") or (len(tokens) if tokens is not None else 0) or 32000
    file_type = _gguf_file_type(reader)
    found = _gguf_tensors(path, readers, n_layers)
    total = found.total
    info = ModelInfo(
        source=str(path),
        arch=arch,
        n_params=found.n_elements,
        n_layers=n_layers,
        hidden=hidden,
        n_heads=n_heads or 0,
        n_kv_heads=n_kv,
        head_dim_k=head_dim_k,
        head_dim_v=head_dim_v,
        vocab=vocab,
        # no output.weight: the head is the embedding, unless the model is an encoder, which has none
        tied_embeddings=not found.has_output and arch not in ENCODER_ARCHS,
        encoder_only=arch in ENCODER_ARCHS,
        max_context=key("context_length"),
        weights_bytes=total,
        quant=file_type,
        file_type=file_type,
        bits_per_weight=total * 8 / found.n_elements if found.n_elements else None,
        intermediate=key("feed_forward_length"),
        kv_heads_per_layer=kv_per_layer,
        layer_bytes=tuple(found.layer_bytes),
        layer_tensors=tuple(found.layer_tensors),
        file_order=tuple(sorted(found.order, key=lambda row: (row[1], row[2]))),  # by part, then offset
        token_embd_bytes=found.token_embd,
        output_bytes=found.output if found.has_output else None,
        token_embd_type=found.token_embd_type,
        output_type=found.output_type,
        other_bytes=found.other,
        weights_by_dtype=found.by_type,
        weights_source="gguf",
        params_exact=True,
    )
    _gguf_experts_mla_swa(info, reader, key)
    if info.kv_lora_rank:
        info.mla_kv_b = any(name.endswith(".attn_kv_b.weight") for name, _ in found.layer_tensors)
    info.layer_plan = layerplan.from_gguf(
        arch,
        n_layers,
        _field(reader, f"{a}.attention.head_count"),
        kv_field,
        _field(reader, f"{a}.feed_forward_length"),
    )
    recurrent.from_gguf(info, lambda name: _field(reader, f"{a}.{name}"), key)
    return info


# --- entry point ---------------------------------------------------------------------------------------------


_HF_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt")


def load_model_info(path: str | Path, exact_params: bool = True) -> ModelInfo:
    """ModelInfo from an HF folder, a config.json, a .gguf file, an Ollama name or an HF repo id in the cache."""
    candidate = Path(path).expanduser()
    if candidate.is_dir():
        ggufs = sorted(candidate.glob("*.gguf"))
        if not (candidate / "config.json").is_file() and ggufs:
            firsts = [g for g in ggufs if not _SPLIT_NAME.match(g.name) or "-00001-of-" in g.name]
            if len(firsts) == 1:
                return info_from_gguf(firsts[0])
            names = ", ".join(g.name for g in firsts[:4])
            raise VramtuiError(f"{candidate}: holds {len(firsts)} GGUF models ({names}...): name one")
        return info_from_hf_folder(candidate, exact_params=exact_params)
    if candidate.is_file():
        if candidate.suffix == ".json" or candidate.name == "config.json":
            return info_from_config(read_config_file(candidate), str(candidate), exact_params=exact_params)
        if candidate.suffix.lower() == ".toml":
            # a launch profile names a model and its settings: the commands that take one say how it runs
            raise VramtuiError(
                f"{path}: a launch profile, not a model: `vramtui check {path}` launches it and bills what "
                f"it used; `vramtui ps --fits {path}` sizes it beside what already runs; `estimate` takes "
                "its model file"
            )
        if candidate.suffix.lower() in _HF_WEIGHT_SUFFIXES:
            # a shard of a Hugging Face checkpoint: the shapes live in the config.json beside it
            raise VramtuiError(
                f"{path}: a weights file, not a model: point at the folder that holds config.json"
                f" ({candidate.parent})"
            )
        return info_from_gguf(candidate)
    if candidate.suffix in (".gguf", ".json") or str(path).startswith(("/", ".", "~")):
        raise VramtuiError(f"{path}: no such file or folder")
    from vramtui.core.estimate.discover import resolve_model_name

    resolved = resolve_model_name(str(path))
    if resolved is None:
        raise VramtuiError(
            f"{path}: not a file, a folder, an Ollama model or a Hugging Face repo in the local cache"
        )
    return load_model_info(resolved, exact_params=exact_params)


GQA_KV_HEADS = 8  # KV heads assumed for a model given by flags without --kv-heads


def info_from_flags(
    *,
    params: int | None = None,
    layers: int | None = None,
    hidden: int | None = None,
    heads: int | None = None,
    kv_heads: int | None = None,
    head_dim: int | None = None,
    vocab: int | None = None,
    quant: str | None = None,
) -> ModelInfo:
    """A model described by flags only. Missing shape numbers are derived the way Llama-family models are."""
    if not params and not (layers and hidden):
        raise VramtuiError(
            "give a model path, or at least --params (with --layers/--kv-heads for the KV cache)"
        )
    # Llama-family proportions fill in what is missing: MLP width 3.5 x hidden, head dim 128, about
    # 12.5 x hidden^2 parameters per layer, and about hidden/110 layers (8B: 4096 x 32, 70B: 8192 x 80)
    if hidden is None and params:
        hidden = math.sqrt(params / (12.5 * layers)) if layers else (params * 110 / 12.5) ** (1 / 3)
        hidden = max(256, round(hidden / 256) * 256)
    hidden = hidden or 4096
    if layers is None and params:
        layers = max(1, round(params / (12.5 * hidden * hidden)))
    heads = heads or max(1, hidden // (head_dim or 128))
    head_dim = head_dim or hidden // heads
    if kv_heads and kv_heads > heads:
        raise VramtuiError(
            f"--kv-heads {kv_heads} is more than --heads {heads}: each KV head serves one or more query heads"
        )
    info = ModelInfo(
        source="flags",
        n_layers=int(layers or 1),
        hidden=hidden,
        n_heads=heads,
        # grouped-query attention with 8 KV heads, as nearly every model since 2024 (Llama 3, Qwen 2.5-3,
        # Mistral, Gemma 2-3): one per query head would size the KV cache 4x and more too large
        n_kv_heads=kv_heads or min(heads, GQA_KV_HEADS),
        head_dim_k=head_dim,
        head_dim_v=head_dim,
        vocab=vocab or 32000,
        intermediate=round(hidden * 3.5 / 256) * 256,
    )
    info.notes.append("shape not given in full: Llama-family proportions assumed for what is missing")
    if not kv_heads and info.n_kv_heads < heads:
        info.notes.append(
            f"KV heads not given: {info.n_kv_heads} assumed (grouped-query attention); pass --kv-heads "
            f"(--kv-heads {heads} for one per attention head)"
        )
    return apply_overrides(info, params=params, quant=quant)


def apply_overrides(info: ModelInfo, **flags: Any) -> ModelInfo:
    """Flags override what the files say. Keys: params, layers, hidden, heads, kv_heads, head_dim, vocab, quant."""
    changes: dict[str, Any] = {}
    mapping = {
        "layers": "n_layers",
        "hidden": "hidden",
        "heads": "n_heads",
        "kv_heads": "n_kv_heads",
        "vocab": "vocab",
    }
    for flag, attr in mapping.items():
        value = flags.get(flag)
        if value is not None:
            changes[attr] = int(value)
    if flags.get("head_dim") is not None:
        changes["head_dim_k"] = changes["head_dim_v"] = int(flags["head_dim"])
    if "n_kv_heads" in changes:
        changes["kv_heads_per_layer"] = None
    if {"n_layers", "n_heads", "hidden"} & set(changes):
        changes["layer_plan"] = None  # the per-layer shapes no longer describe this model
    shape_changed = bool(changes)
    if flags.get("params") is not None:
        changes["n_params"] = int(flags["params"])
        changes["params_exact"] = False
    if shape_changed or "n_params" in changes:
        # the file's exact per-layer bytes no longer describe this model
        changes.update(layer_bytes=None, layer_tensors=None, token_embd_bytes=None, output_bytes=None)
        changes["file_order"] = None
        changes["other_bytes"] = 0
        changes.update(weights_bytes=None, weights_source="params")
    quant = flags.get("quant")
    if quant:
        key = q.normalize_quant(quant)
        if key != info.quant:
            changes.update(quant=key, weights_bytes=None, weights_source="params", layer_bytes=None)
            changes["layer_tensors"] = changes["file_order"] = None
            changes["quant_spec"] = None  # the user's --quant replaces the checkpoint's layout
            changes.update(token_embd_bytes=None, output_bytes=None, other_bytes=0)
            named = key in q.FILE_TYPE_BPW or key in q.PUBLISHER_MIXES
            changes["file_type"] = key if info.weights_source == "gguf" or named else None
            changes["bits_per_weight"] = q.bits_per_weight(key)
    new = replace(info, **changes, notes=list(info.notes))
    if changes.get("quant"):
        new.notes.extend(q.mix_notes(changes["quant"]))
    if not new.n_params:
        new.n_params = count_params_arithmetic(new)
    attention = (new.n_heads, new.n_kv_heads, new.head_dim_k)
    if new.n_recurrent_layers >= new.n_layers:  # Mamba / RWKV: no attention shape to check
        attention = ()
    for value in (new.n_layers, new.hidden, *attention, new.vocab):
        if value <= 0:
            raise VramtuiError("layers, hidden, heads, kv heads, head dim and vocab must be positive")
    if attention and ("n_heads" in changes or "n_kv_heads" in changes) and new.n_kv_heads > new.n_heads:
        raise VramtuiError(
            f"--kv-heads {new.n_kv_heads} is more than --heads {new.n_heads}: each KV head serves one or more "
            "query heads"
        )
    return new
