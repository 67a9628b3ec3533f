"""Hybrid and recurrent models: which layers keep attention KV, and the recurrent state the others keep.

A recurrent layer (Mamba, Mamba-2, Gated DeltaNet linear attention, LFM2's short convolution, RWKV)
keeps no per-token keys and values: it keeps one state per sequence whatever the context. llama.cpp
(llama-memory-recurrent.cpp) allocates per recurrent layer and per sequence one row of `n_embd_r` conv
elements and one of `n_embd_s` state elements, both f32 (its "RS buffer"); llama-hparams.cpp sizes them:

- Mamba / Mamba-2 / Gated DeltaNet: r = (d_conv - 1) * (d_inner + 2 * n_group * d_state),
  s = d_state * d_inner;
- LFM2 short convolution: r = n_embd * (L_cache - 1), s = 0;
- RWKV: r = token_shift_count * n_embd, s = n_embd * wkv_head_size.

Which layers are recurrent, as llama.cpp's model loaders decide: every layer of Mamba / RWKV; the layers
not at each `full_attention_interval` (Qwen3-Next, Qwen3.5); the layers with no KV head (Granite 4 hybrid,
Jamba, LFM2) and, for Nemotron-H, with neither KV head nor feed-forward.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vramtui.core.estimate.modelinfo import ModelInfo

STATE_BYTES = 4  # llama.cpp's conv and SSM states are f32 (type_r, type_s)
# Every layer is recurrent.
ALL_RECURRENT = ("mamba", "mamba2", "rwkv6", "rwkv6qwen2", "rwkv7", "arwkv7")
# Linear attention except every full_attention_interval-th layer (llama.cpp's default interval: 4).
INTERVAL_ARCHS = ("qwen3next", "qwen35", "qwen35moe", "qwen3_next", "qwen3_5", "qwen3_5_moe")
DEFAULT_FULL_ATTENTION_INTERVAL = 4


def conv_elements(d_conv: int, d_inner: int, n_group: int, d_state: int) -> int:
    """Mamba-style conv state of one sequence in one layer (the first column is shifted out: d_conv - 1)."""
    return max(0, d_conv - 1) * (d_inner + 2 * n_group * d_state)


def ssm_elements(d_state: int, d_inner: int) -> int:
    return d_state * d_inner


def interval_flags(n_layers: int, interval: int) -> tuple[bool, ...]:
    """Linear attention except every interval-th layer (layers 3, 7, ... for 4)."""
    interval = max(1, interval)
    return tuple((layer + 1) % interval != 0 for layer in range(n_layers))


def state_bytes_per_layer(info: ModelInfo) -> int:
    """One sequence's conv + SSM state in one recurrent layer, in bytes."""
    return (info.rs_conv_elements + info.rs_state_elements) * STATE_BYTES


def recurrent_state_bytes(
    info: ModelInfo, sequences: int, layers: Sequence[int] | range | None = None
) -> int:
    """The RS buffer of `sequences` sequences over `layers` (every layer by default); context plays no part."""
    chosen = range(info.n_layers) if layers is None else layers
    count = sum(1 for layer in chosen if info.is_recurrent(layer))
    return count * state_bytes_per_layer(info) * max(1, sequences)


def hf_state_bytes_per_sequence(info: ModelInfo, model_dtype_bytes: int, ssm_f32: bool = False) -> int:
    """One sequence's state over every recurrent layer as vLLM and transformers keep it: the same conv and
    SSM elements as llama.cpp (vLLM's MambaStateShapeCalculator: mamba2 conv (d_conv - 1) x (d_inner +
    2 n_groups d_state), temporal n_heads x head_dim x d_state; gated delta net conv (kernel - 1) x
    (2 k_heads k_dim + v_heads v_dim), temporal v_heads x v_dim x k_dim; short conv (L - 1) x hidden), in the
    model dtype (its mamba_cache_dtype "auto"); `ssm_f32`: the temporal state in float32 (a
    `mamba_ssm_cache_dtype` / config `mamba_ssm_dtype` of float32)."""
    ssm_bytes = 4 if ssm_f32 else model_dtype_bytes
    per_layer = info.rs_conv_elements * model_dtype_bytes + info.rs_state_elements * ssm_bytes
    return info.n_recurrent_layers * per_layer


def describe(info: ModelInfo, sequences: int) -> str:
    n = info.n_recurrent_layers
    per_layer = state_bytes_per_layer(info)
    return (
        f"hybrid/recurrent: {n} of {info.n_layers} layers keep a recurrent state, not a KV cache: "
        f"{info.rs_conv_elements:,} conv + {info.rs_state_elements:,} state f32 = {per_layer:,} B per layer "
        f"per sequence, x {max(1, sequences)} sequences, whatever the context"
    )


# --- GGUF metadata ---------------------------------------------------------------------------------------------


def from_gguf(info: ModelInfo, field: Callable[[str], Any], key: Callable[[str], int | None]) -> None:
    """Fill the recurrent layers and their state sizes from a GGUF's `<arch>.ssm.*` / `shortconv` / `wkv` keys.

    `field(name)` reads `<arch>.name` raw (lists stay lists); `key(name)` reads it as one int."""
    flags = _gguf_flags(info, field)
    if flags is None or not any(flags):
        return
    info.recurrent_flags = flags
    wkv = key("wkv.head_size") or 0
    l_cache = key("shortconv.l_cache") or 0
    if wkv:
        info.rs_conv_elements = (key("token_shift_count") or 2) * info.hidden
        info.rs_state_elements = info.hidden * wkv
    elif l_cache:
        info.rs_conv_elements = info.hidden * (l_cache - 1)
    else:
        d_inner, d_state = key("ssm.inner_size") or 0, key("ssm.state_size") or 0
        n_group = key("ssm.group_count") or 0
        info.rs_conv_elements = conv_elements(key("ssm.conv_kernel") or 0, d_inner, n_group, d_state)
        info.rs_state_elements = ssm_elements(d_state, d_inner)
        v_heads = key("ssm.time_step_rank") or 0
        if info.arch in INTERVAL_ARCHS and v_heads and n_group and d_state:
            # llama.cpp's qwen35 / qwen3next: group_count key heads of state_size, time_step_rank value heads
            kernel = key("ssm.conv_kernel") or 4
            info.delta_net = (n_group, d_state, v_heads, d_inner // v_heads, kernel)
            info.attn_output_gate = True


def _gguf_flags(info: ModelInfo, field: Callable[[str], Any]) -> tuple[bool, ...] | None:
    n, arch = info.n_layers, info.arch
    explicit = field("attention.recurrent_layers")
    if isinstance(explicit, list) and explicit:
        return tuple(bool(flag) for flag in explicit[:n])
    if arch in ALL_RECURRENT:
        return (True,) * n
    if arch in INTERVAL_ARCHS:
        interval = field("full_attention_interval")
        return interval_flags(n, interval if isinstance(interval, int) else DEFAULT_FULL_ATTENTION_INTERVAL)
    if field("ssm.conv_kernel") is None and field("shortconv.l_cache") is None:
        return None
    kv = info.kv_heads_per_layer or (info.n_kv_heads,) * n
    if arch.startswith("nemotron_h"):  # a layer with neither attention nor MLP is a Mamba layer
        ff = field("feed_forward_length")
        ffs = list(ff) if isinstance(ff, list) else [ff or 0] * n
        return tuple(kv[i] == 0 and not ffs[i] for i in range(n))
    return tuple(heads == 0 for heads in kv[:n])


# --- config.json ---------------------------------------------------------------------------------------------


def _num(cfg: dict[str, Any], *names: str, default: int = 0) -> int:
    for name in names:
        value = cfg.get(name)
        if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
            return int(value)
    return default


def _mamba_sizes(cfg: dict[str, Any], hidden: int, prefix: str) -> tuple[int, int]:
    """(conv, state) elements of a Mamba(-2) layer from `mamba_*` (prefix "mamba_") or plain keys."""
    p = prefix
    heads, head_dim = _num(cfg, f"{p}n_heads", f"{p}num_heads"), _num(cfg, f"{p}d_head", f"{p}head_dim")
    d_inner = heads * head_dim or _num(cfg, f"{p}expand", "expand", default=2) * hidden
    d_state = _num(cfg, f"{p}d_state", "ssm_state_size", "state_size", default=16)
    d_conv = _num(cfg, f"{p}d_conv", "conv_kernel", default=4)
    n_group = _num(cfg, f"{p}n_groups", "n_groups", default=1 if heads else 0)
    return conv_elements(d_conv, d_inner, n_group, d_state), ssm_elements(d_state, d_inner)


def _config_layout(cfg: dict[str, Any], n: int) -> tuple[list[bool], list[bool]] | None:
    """(recurrent, attention) per layer from layer_types / full_attention_interval / the hybrid pattern."""
    types = cfg.get("layer_types") or cfg.get("layers_block_type")
    pattern = cfg.get("hybrid_override_pattern")
    if isinstance(pattern, str) and len(pattern) >= n:  # Nemotron-H: M mamba, * attention, - or E MLP
        return [c == "M" for c in pattern[:n]], [c == "*" for c in pattern[:n]]
    if isinstance(types, list) and len(types) >= n:
        kinds = [str(t).lower() for t in types[:n]]
        recurrent = [k in ("linear_attention", "mamba", "conv", "mamba2", "linear") for k in kinds]
        if not any(recurrent):
            return None
        return recurrent, [not r for r in recurrent]
    model_type = str(cfg.get("model_type", ""))
    if model_type in INTERVAL_ARCHS or "full_attention_interval" in cfg:
        recurrent = list(interval_flags(n, _num(cfg, "full_attention_interval", default=4)))
        return recurrent, [not r for r in recurrent]
    if model_type in ("mamba", "mamba2"):
        return [True] * n, [False] * n
    return None


def from_config(info: ModelInfo, cfg: dict[str, Any]) -> None:
    """Fill the recurrent layers and their state sizes from a config.json; the layers that are neither
    attention nor recurrent (Nemotron-H's MLP layers) keep no KV either."""
    n = info.n_layers
    layout = _config_layout(cfg, n)
    if layout is None:
        return
    recurrent, attention = layout
    info.recurrent_flags = tuple(recurrent)
    info.rs_ssm_f32 = str(cfg.get("mamba_ssm_dtype", "")).lower() in ("float32", "fp32")
    info.kv_heads_per_layer = tuple(info.kv_heads_at(i) if attention[i] else 0 for i in range(n))
    hidden = info.hidden
    if "linear_key_head_dim" in cfg:  # Gated DeltaNet (Qwen3-Next, Qwen3.5)
        k_dim, v_dim = _num(cfg, "linear_key_head_dim"), _num(cfg, "linear_value_head_dim")
        k_heads, v_heads = _num(cfg, "linear_num_key_heads"), _num(cfg, "linear_num_value_heads")
        d_inner = v_dim * v_heads
        info.rs_conv_elements = conv_elements(
            _num(cfg, "linear_conv_kernel_dim", default=4), d_inner, k_heads, k_dim
        )
        info.rs_state_elements = ssm_elements(k_dim, d_inner)
        kernel = _num(cfg, "linear_conv_kernel_dim", default=4)
        info.delta_net = (k_heads, k_dim, v_heads, v_dim, kernel)
        info.attn_output_gate = bool(cfg.get("attn_output_gate", True))
    elif "conv_L_cache" in cfg:  # LFM2 short convolution
        info.rs_conv_elements = hidden * max(0, _num(cfg, "conv_L_cache", default=3) - 1)
    elif any(key.startswith("mamba_") for key in cfg):
        info.rs_conv_elements, info.rs_state_elements = _mamba_sizes(cfg, hidden, "mamba_")
    else:
        info.rs_conv_elements, info.rs_state_elements = _mamba_sizes(cfg, hidden, "")
