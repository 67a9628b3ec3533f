"""Decoders whose layers differ in heads or MLP width, read from config.json or a GGUF.

- DeciLM / Nemotron-NAS (`block_configs`, Llama-3.1-Nemotron-Ultra-253B, Llama-3.3-Nemotron-Super-49B): each
  block's attention is a no-op, one hidden x hidden linear (`replace_with_linear`), or grouped-query attention
  with num_attention_heads / `n_heads_in_group` KV heads; its MLP is a no-op, one linear, or SwiGLU of
  `ffn_mult`: 2 x ffn_mult x hidden / 3 rounded up to a multiple of 256 (modeling_decilm's
  `_ffn_mult_to_intermediate_size`). A no-op block has no norm either.
- per-layer lists: `num_attention_heads`, `num_key_value_heads` (or `num_kv_heads`) and `intermediate_size`
  given as one value per layer.
- Nemotron-H (`hybrid_override_pattern`): each layer is one block, `M` a Mamba-2 mixer, `*` attention, `-` an
  MLP, `E` a mixture of experts; Nemotron-3's experts work in a `moe_latent_size` latent with a projection in
  and out, and `relu2` MLPs have no gate.
- a GGUF's per-layer arrays (`<arch>.attention.head_count`, `head_count_kv`, `feed_forward_length`): llama.cpp's
  DeciLM loader keeps a layer with query heads and no KV head as its output projection alone.

The scalar fields keep the largest value (what sizes the widest activation); the plan gives each layer's own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from vramtui.core.errors import VramtuiError

DECI_FFN_MULTIPLE = 256


@dataclass(frozen=True)
class LayerPlan:
    """Query heads and MLP width of each layer, 0 where the block is absent (a no-op block keeps no weights, no
    norm and, for attention, no KV), and the blocks one hidden x hidden linear replaces. The KV heads of each
    layer are ModelInfo.kv_heads_per_layer."""

    heads: tuple[int, ...]
    ffn: tuple[int, ...]
    attn_linear: tuple[bool, ...] = ()
    ffn_linear: tuple[bool, ...] = ()
    # which layers hold the experts of a MoE (empty: every layer past the dense ones) and a Mamba mixer
    moe: tuple[bool, ...] = ()
    mamba: tuple[bool, ...] = ()
    mixer: MambaMixer | None = None

    def describe(self) -> str:
        n = len(self.heads)
        attention = sum(1 for h in self.heads if h)
        mlps = sum(1 for f in self.ffn if f)
        widths = sorted({f for f in self.ffn if f})
        text = f"per-layer shapes: attention in {attention} of {n} layers"
        if mlps or not self.moe:
            text += f", an MLP in {mlps}"
        if widths:
            text += f" ({widths[0]} to {widths[-1]} wide)" if len(widths) > 1 else f" ({widths[0]} wide)"
        if self.moe:
            text += f", experts in {sum(self.moe)}"
        if self.mamba:
            text += f", a Mamba mixer in {sum(self.mamba)}"
        linear = sum(self.attn_linear) + sum(self.ffn_linear)
        return text + (f"; {linear} block(s) replaced by one linear" if linear else "")


@dataclass(frozen=True)
class MambaMixer:
    """A Mamba-2 mixer's weights (transformers' Mamba2Mixer / NemotronHMamba2Mixer): in_proj to z, x, B, C and
    dt; a depthwise conv over x, B and C; out_proj back; A_log, D, dt_bias per head and a gated norm."""

    d_inner: int
    conv_dim: int  # d_inner + 2 n_groups d_state
    heads: int
    d_conv: int

    @property
    def in_rows(self) -> int:
        return self.d_inner + self.conv_dim + self.heads


@dataclass(frozen=True)
class PerLayer:
    """What a config says per layer, before it is set on a ModelInfo."""

    plan: LayerPlan | None
    kv_heads: tuple[int, ...] | None


# config.json keys that may hold one value per layer; the scalar reading takes their largest
LIST_KEYS = ("num_attention_heads", "num_key_value_heads", "num_kv_heads", "intermediate_size")


def scalar_view(cfg: dict[str, Any]) -> dict[str, Any]:
    """The config with each per-layer list of LIST_KEYS replaced by its largest value."""
    out = dict(cfg)
    for key in LIST_KEYS:
        value = cfg.get(key)
        if isinstance(value, list):
            numbers = [v for v in value if _is_count(v)]
            out[key] = max(numbers) if numbers else None
    return out


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _find_multiple(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def deci_ffn_width(ffn_mult: float, hidden: int) -> int:
    """modeling_decilm's `_ffn_mult_to_intermediate_size`."""
    return _find_multiple(int(2 * ffn_mult * hidden / 3), DECI_FFN_MULTIPLE)


def _deci_block(block: Any, hidden: int, n_heads: int, where: str) -> tuple[int, int, int, bool, bool]:
    """(heads, KV heads, MLP width, attention linear, MLP linear) of one DeciLM block."""
    if not isinstance(block, dict):
        raise VramtuiError(f"{where} is not an object")
    attn = block.get("attention") if isinstance(block.get("attention"), dict) else {}
    ffn = block.get("ffn") if isinstance(block.get("ffn"), dict) else {}
    heads = kv = width = 0
    attn_linear = bool(attn.get("replace_with_linear")) and not attn.get("no_op")
    if not attn.get("no_op") and not attn_linear:
        kv_given = attn.get("num_key_value_heads")
        group = attn.get("n_heads_in_group")
        if _is_count(kv_given) and kv_given:
            kv = kv_given
        elif _is_count(group) and group:
            kv = n_heads // group
        else:
            raise VramtuiError(f"{where}: attention has neither n_heads_in_group nor num_key_value_heads")
        heads = n_heads
    ffn_linear = bool(ffn.get("replace_with_linear")) and not ffn.get("no_op")
    if not ffn.get("no_op") and not ffn_linear:
        size, mult = ffn.get("intermediate_size"), ffn.get("ffn_mult")
        if _is_count(size) and size:
            width = size
        elif isinstance(mult, int | float) and not isinstance(mult, bool) and mult > 0:
            width = deci_ffn_width(mult, hidden)
        else:
            raise VramtuiError(f"{where}: ffn has neither ffn_mult nor intermediate_size")
    return heads, kv, width, attn_linear, ffn_linear


def _from_blocks(blocks: list[Any], n_layers: int, hidden: int, n_heads: int, source: str) -> PerLayer:
    if len(blocks) != n_layers:
        raise VramtuiError(
            f"{source}: config.json has {len(blocks)} block_configs for num_hidden_layers {n_layers}"
        )
    rows = [_deci_block(b, hidden, n_heads, f"{source}: block_configs[{i}]") for i, b in enumerate(blocks)]
    heads, kv, ffn, attn_linear, ffn_linear = (tuple(column) for column in zip(*rows, strict=True))
    return PerLayer(LayerPlan(heads, ffn, attn_linear, ffn_linear), kv)


def _per_layer_list(
    cfg: dict[str, Any], keys: tuple[str, ...], n_layers: int, source: str
) -> tuple[int, ...] | None:
    for key in keys:
        value = cfg.get(key)
        if not isinstance(value, list):
            continue
        if len(value) != n_layers or not all(_is_count(v) for v in value):
            raise VramtuiError(
                f"{source}: config.json's {key} should be {n_layers} whole numbers, one per layer"
            )
        return tuple(value)
    return None


def from_config(
    cfg: dict[str, Any], source: str, n_layers: int, hidden: int, n_heads: int
) -> PerLayer | None:
    """The per-layer shapes a (text) config.json gives; None when every layer is alike. `n_heads` is the
    scalar reading (the largest, for a list)."""
    blocks = cfg.get("block_configs")
    if isinstance(blocks, list) and blocks:
        return _from_blocks(blocks, n_layers, hidden, n_heads, source)
    pattern = cfg.get("hybrid_override_pattern")
    if isinstance(pattern, str) and pattern:
        return _from_hybrid_pattern(cfg, pattern, n_layers, hidden, n_heads, source)
    heads = _per_layer_list(cfg, ("num_attention_heads",), n_layers, source)
    kv = _per_layer_list(cfg, ("num_key_value_heads", "num_kv_heads"), n_layers, source)
    ffn = _per_layer_list(cfg, ("intermediate_size",), n_layers, source)
    if heads is None and kv is None and ffn is None:
        return None
    if heads is None and ffn is None:
        return PerLayer(None, kv)
    plan = LayerPlan(
        heads or (n_heads,) * n_layers, ffn or (_scalar(cfg, "intermediate_size", 4 * hidden),) * n_layers
    )
    return PerLayer(plan, kv)


def _from_hybrid_pattern(
    cfg: dict[str, Any], pattern: str, n_layers: int, hidden: int, n_heads: int, source: str
) -> PerLayer:
    """Nemotron-H: one block per layer, named by one character of the pattern."""
    if len(pattern) < n_layers or set(pattern[:n_layers]) - set("M*-E"):
        raise VramtuiError(
            f"{source}: config.json's hybrid_override_pattern should be {n_layers} of M, *, - and E"
        )
    kinds = pattern[:n_layers]
    n_kv = _scalar(cfg, "num_key_value_heads", n_heads)
    width = _scalar(cfg, "intermediate_size", 4 * hidden)
    plan = LayerPlan(
        heads=tuple(n_heads if k == "*" else 0 for k in kinds),
        ffn=tuple(width if k == "-" else 0 for k in kinds),
        moe=tuple(k == "E" for k in kinds),
        mamba=tuple(k == "M" for k in kinds),
        mixer=_mamba_mixer(cfg, hidden),
    )
    return PerLayer(plan, tuple(n_kv if k == "*" else 0 for k in kinds))


def _mamba_mixer(cfg: dict[str, Any], hidden: int) -> MambaMixer:
    heads = _scalar(cfg, "mamba_num_heads", 0)
    d_inner = heads * _scalar(cfg, "mamba_head_dim", 64) or _scalar(cfg, "expand", 2) * hidden
    groups_states = 2 * _scalar(cfg, "n_groups", 1) * _scalar(cfg, "ssm_state_size", 128)
    return MambaMixer(d_inner, d_inner + groups_states, heads, _scalar(cfg, "conv_kernel", 4))


def _scalar(cfg: dict[str, Any], key: str, default: int) -> int:
    value = cfg.get(key)
    return value if _is_count(value) and value else default


def from_gguf(arch: str, n_layers: int, heads: Any, kv: Any, ffn: Any) -> LayerPlan | None:
    """The plan of a GGUF whose head_count or feed_forward_length is an array (one value per layer)."""
    if not isinstance(heads, list) and not isinstance(ffn, list):
        return None

    def column(value: Any) -> tuple[int, ...]:
        if isinstance(value, list) and len(value) >= n_layers:
            return tuple(int(v) for v in value[:n_layers])
        return (int(value) if isinstance(value, int | float) else 0,) * n_layers

    head_counts, kv_counts, widths = column(heads), column(kv), column(ffn)
    # llama.cpp's DeciLM: query heads with no KV head is the linear replacement (wo alone)
    linear = tuple(arch == "deci" and h > 0 and k == 0 for h, k in zip(head_counts, kv_counts, strict=True))
    head_counts = tuple(0 if lin else h for h, lin in zip(head_counts, linear, strict=True))
    return LayerPlan(head_counts, widths, linear, (False,) * n_layers)
