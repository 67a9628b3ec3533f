"""A vision tower's share of vLLM's profile run, from config.json's `vision_config` (issue 15).

vLLM V1's `profile_run` (vllm/v1/worker/gpu_model_runner.py) runs the encoder before the decoder's dummy
forward: it sizes an encoder budget of max(max_num_batched_tokens, the tokens of the largest image),
makes budget // tokens-per-image dummy images of the maximum feature size (it logs "Encoder cache will be
initialized with a budget of N tokens, and profiled with K image items of the maximum feature size"),
runs the vision tower on them, keeps their embeddings in the encoder cache while the decoder's dummy
batch runs, then frees both. The profile's peak — which the KV cache is sized after — is therefore the
larger of the tower's own forward and the cached embeddings on top of the decoder's activations.

The tokens of the largest image: fixed-size towers (LLaVA, Gemma 3) give (image_size / patch)^2 patches,
divided by the spatial merge (or `mm_tokens_per_image`); dynamic-resolution ones (Qwen2-VL, 2.5-VL, 3-VL)
give max_pixels / (patch x merge)^2, max_pixels from preprocessor_config.json or the processor's default.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# The image processors' default largest image, in pixels, where preprocessor_config.json says nothing:
# Qwen2-VL's processor 12845056 (max_pixels), Qwen3-VL's and Qwen3.5's 16777216 (size.longest_edge).
DEFAULT_MAX_PIXELS = {
    "qwen2_vl": 12845056,
    "qwen2_5_vl": 12845056,
    "qwen3_vl": 16777216,
    "qwen3_vl_moe": 16777216,
    "qwen3_5": 16777216,
    "qwen3_5_moe": 16777216,
}
ACT_BYTES = 2  # the tower runs in the model's 16-bit dtype


@dataclass(frozen=True)
class VisionTower:
    """The shape vLLM's profile needs: how many tokens the largest image becomes, and the tower's width."""

    hidden: int  # the tower's width
    intermediate: int
    layers: int
    patch_size: int
    merge: int  # spatial merge (2x2 patches -> one token: 2); 1 when none
    max_tokens: int  # embeddings of the largest image, after merging or pooling (what the decoder sees)
    max_patches: int  # the patches the tower's layers run on for that image
    out_hidden: int  # the embeddings' width (the text model's hidden size)
    params: int = 0  # the tower's and its merger's parameters (tower_params)


def _int(cfg: dict[str, Any], *keys: str) -> int:
    for key in keys:
        value = cfg.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return 0


def _max_pixels(folder: Path | None, model_type: str) -> int:
    """The processor's largest image: preprocessor_config.json's max_pixels (or size.longest_edge)."""
    if folder is not None:
        for name in ("preprocessor_config.json", "processor_config.json"):
            try:
                data = json.loads((folder / name).read_text())
            except (OSError, ValueError):
                continue
            data = data.get("image_processor", data) if isinstance(data, dict) else {}
            size = data.get("size") if isinstance(data.get("size"), dict) else {}
            found = _int(data, "max_pixels") or _int(size, "longest_edge", "max_pixels")
            if found:
                return found
    return _default_max_pixels(model_type)


def tower_params(config: dict[str, Any], text_hidden: int) -> int:
    """Parameters of a config.json's vision tower, as ViTs lay them out: the patch embedding (in_channels x
    temporal patch x patch^2 per width, and a bias), learned positions, per block two LayerNorms, qkv and its
    output projection, an MLP (gated when its act is SiLU, as Qwen2.5-VL's; two matrices otherwise), all with
    biases; then the merger (Qwen-VL's PatchMerger: a norm, a merge^2 x width square and the projection to the
    text width), once more per deepstack merger (Qwen3-VL). 0 when the config has no vision_config."""
    vc = config.get("vision_config")
    if not isinstance(vc, dict):
        return 0
    h = _int(vc, "hidden_size", "embed_dim", "width")
    layers = _int(vc, "num_hidden_layers", "depth", "layers")
    patch = _int(vc, "patch_size")
    if not (h and layers and patch):
        return 0
    inter = _int(vc, "intermediate_size", "mlp_dim") or 4 * h
    channels = (_int(vc, "in_channels", "in_chans", "num_channels") or 3) * (
        _int(vc, "temporal_patch_size") or 1
    )
    image = _int(vc, "image_size")
    positions = _int(vc, "num_position_embeddings") or ((image // patch) ** 2 if image else 0)
    gated = str(vc.get("hidden_act", "")).lower() == "silu"
    mlp = (3 if gated else 2) * h * inter + (2 * inter if gated else inter) + h
    block = 4 * h + 3 * h * h + 3 * h + h * h + h + mlp
    merge = _int(vc, "spatial_merge_size") or 1
    wide = h * merge * merge
    out = _int(vc, "out_hidden_size") or text_hidden
    merger = wide * wide + wide + wide * out + out  # its norm: over the width before the shuffle (2h)
    deepstack = vc.get("deepstack_visual_indexes")
    extra = len(deepstack) if isinstance(deepstack, list) else 0  # these norm after it (2 x wide)
    mergers = merger + 2 * h + extra * (merger + 2 * wide)
    return channels * patch * patch * h + h + positions * h + layers * block + mergers


def _default_max_pixels(model_type: str) -> int:
    return DEFAULT_MAX_PIXELS.get(model_type) or DEFAULT_MAX_PIXELS.get(model_type.removesuffix("_text"), 0)


def from_config(config: dict[str, Any], source: str, text_hidden: int) -> VisionTower | None:
    """The tower of a multimodal config.json (None when it has no `vision_config`, or too little of it)."""
    vc = config.get("vision_config")
    if not isinstance(vc, dict):
        return None
    hidden = _int(vc, "hidden_size", "embed_dim", "width")
    layers = _int(vc, "num_hidden_layers", "depth", "layers")
    patch = _int(vc, "patch_size")
    if not (hidden and layers and patch):
        return None
    merge = _int(vc, "spatial_merge_size") or 1
    model_type = str(config.get("model_type") or "")
    path = Path(source)
    folder = path if path.is_dir() else path.parent if path.name else None
    pixels = _max_pixels(folder, model_type) if merge > 1 or _default_max_pixels(model_type) else 0
    if pixels:  # dynamic resolution: the pixel budget decides
        tokens = pixels // (patch * merge) ** 2
        patches = tokens * merge * merge
    else:  # a fixed square image; Gemma 3 pools its patches down to mm_tokens_per_image
        side = _int(vc, "image_size") // patch
        patches = side * side
        tokens = _int(config, "mm_tokens_per_image") or patches // (merge * merge)
    if tokens <= 0 or patches <= 0:
        return None
    return VisionTower(
        hidden=hidden,
        intermediate=_int(vc, "intermediate_size", "mlp_dim") or 4 * hidden,
        layers=layers,
        patch_size=patch,
        merge=merge,
        max_tokens=tokens,
        max_patches=patches,
        out_hidden=_int(vc, "out_hidden_size") or text_hidden,
        params=tower_params(config, text_hidden),
    )


@dataclass(frozen=True)
class ProfileShare:
    """What the tower adds to the profile run's peak, and how vLLM profiles it."""

    images: int
    budget_tokens: int
    cache_bytes: int  # the dummy images' embeddings, held while the decoder's dummy batch runs
    forward_bytes: int  # the tower's own forward peak over the dummy images
    added_bytes: int  # what the profile peak grows by, over the decoder's activations alone

    def note(self) -> str:
        from vramtui.core.units import format_bytes

        return (
            f"vision encoder: vLLM profiles {self.images} image(s) of the largest size (encoder budget "
            f"{self.budget_tokens} tokens): embeddings {format_bytes(self.cache_bytes)} held in the encoder "
            f"cache, tower forward {format_bytes(self.forward_bytes)}; the profile peak grows by "
            f"{format_bytes(self.added_bytes)}"
        )


def profile_share(
    tower: VisionTower, batched_tokens: int, decoder_activation: int, max_seqs: int = 256
) -> ProfileShare:
    """The encoder's share of vLLM's profile peak at `batched_tokens` (max_num_batched_tokens): as many
    largest images as the budget holds (vllm#11210: budget // max_tokens_per_mm_item), at most one per
    sequence."""
    budget = max(batched_tokens, tower.max_tokens)
    images = max(1, min(budget // tower.max_tokens, max_seqs))
    cache = images * tower.max_tokens * tower.out_hidden * ACT_BYTES
    patches = images * tower.max_patches
    # the widest moment of a layer: the MLP's (gated) up projection beside the residual and normed input,
    # attention by SDPA/flash kernels (linear in the patches)
    forward = patches * (2 * tower.intermediate + 2 * tower.hidden) * ACT_BYTES
    added = max(forward - decoder_activation, cache)
    return ProfileShare(images, budget, cache, forward, max(0, added))
