"""KV-cache arithmetic every engine shares: which layers slide, what one token stores per layer."""

from __future__ import annotations

from vramtui.core.estimate import quant as q
from vramtui.core.estimate.accounting import (
    MLA_DECOMPRESSED,
    MLA_LATENT,
    MLA_LATENT_AND_V,
    accounting_for,
)
from vramtui.core.estimate.modelinfo import ModelInfo


def round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def is_swa(info: ModelInfo, layer: int) -> bool:
    # the pattern puts the global layer last in each group (Gemma: layers 5, 11, ... are global)
    if not info.swa_layers:
        return False
    if info.swa_layers >= info.n_layers:
        return True
    pattern = max(2, round(info.n_layers / max(1, info.n_layers - info.swa_layers)))
    return (layer + 1) % pattern != 0


def kv_row_elements(info: ModelInfo, layer: int, mla_layout: str = MLA_LATENT_AND_V) -> tuple[int, int]:
    """(K elements, V elements) one token stores in one layer; an MLA cache is laid out as the engine does.
    A recurrent layer (Mamba, linear attention, short convolution) stores none: it keeps a per-sequence state."""
    if info.is_recurrent(layer):
        return 0, 0
    if info.kv_layers is not None and layer >= info.kv_layers:
        return 0, 0  # an earlier layer's K and V (Gemma 3n/4), or an MTP layer the engine's cache leaves out
    k, v = _attention_row(info, layer, mla_layout)
    if info.indexer_key_length and (info.indexer_layers is None or layer in info.indexer_layers):
        k += info.indexer_key_length  # the sparse-attention indexer's own key cache (K only, one head)
    return k, v


def _attention_row(info: ModelInfo, layer: int, mla_layout: str) -> tuple[int, int]:
    if info.kv_lora_rank:
        latent = info.kv_lora_rank + info.qk_rope_head_dim
        if mla_layout == MLA_LATENT:
            return latent, 0  # one joint latent per token
        if mla_layout == MLA_LATENT_AND_V:
            return latent, info.kv_lora_rank
        assert mla_layout == MLA_DECOMPRESSED, mla_layout
        return info.n_heads * info.head_dim_k, info.n_heads * info.head_dim_v
    kv_heads = info.kv_heads_at(layer)
    if info.head_dim_swa and is_swa(info, layer):
        return kv_heads * info.head_dim_swa, kv_heads * info.head_dim_swa
    return kv_heads * info.head_dim_k, kv_heads * info.head_dim_v


def kv_layer_bytes(info: ModelInfo, layer: int, kv_dtype: str, mla_layout: str) -> int:
    """Bytes of K and V one token takes in one layer. `kv_dtype` "K/V" names the two caches' types apart
    (llama.cpp's `-ctk q4_0` alone keeps V f16)."""
    k, v = kv_row_elements(info, layer, mla_layout)
    k_type, v_type = q.kv_pair(kv_dtype)
    return q.kv_row_bytes(k_type, k) + (q.kv_row_bytes(v_type, v) if v else 0)


def kv_bytes_per_token(info: ModelInfo, kv_dtype: str = "f16", accounting: str = "llama.cpp") -> int:
    """Bytes of K and V one token takes over all layers (no padding, every layer full), as the backend
    named by `accounting` lays its cache out."""
    layout = accounting_for(accounting).mla_layout
    return sum(kv_layer_bytes(info, layer, kv_dtype, layout) for layer in range(info.n_layers))
