"""Write a small random-weight vision projector (mmproj) GGUF that llama.cpp's mtmd really loads.

A Gemma 3 style projector (`clip.projector_type = gemma3`: a SigLIP ViT, an average pool of n_merge x
n_merge patches, an RMS norm and one projection to the text model's width), with the keys and tensors
llama.cpp's tools/mtmd/clip.cpp requires for it (load_hparams, load_tensors). The pictures it describes
are noise; the buffers llama-server prints for it are llama.cpp's own.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class TinyProjectorSpec:
    """The shape of a generated projector; `n_embd_text` must be the text model's width."""

    n_embd_text: int = 512
    n_layer: int = 2
    n_embd: int = 128
    n_head: int = 4
    n_ff: int = 256
    image_size: int = 224
    patch_size: int = 14
    n_merge: int = 4  # pooled patches per side (clip.vision.projector.scale_factor)
    dtype: str = "f16"  # f16 | f32: the matrices' type (norms and biases are f32, as converters write them)
    seed: int = 1

    @property
    def n_patches(self) -> int:
        return (self.image_size // self.patch_size) ** 2


def write_tiny_mmproj(path: str | os.PathLike[str], spec: TinyProjectorSpec | None = None) -> Path:
    """Write the projector GGUF to `path` (atomically) and return the path."""
    import gguf

    spec = spec or TinyProjectorSpec()
    side = spec.image_size // spec.patch_size
    if spec.image_size % spec.patch_size or side % spec.n_merge or spec.n_embd % spec.n_head:
        raise ValueError(
            "image_size must divide by patch_size, the patches per side by n_merge, n_embd by n_head"
        )
    rng = np.random.default_rng(spec.seed)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    writer = gguf.GGUFWriter(str(tmp), "clip")
    writer.add_name("vramtui-tiny-mmproj")
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16 if spec.dtype == "f16" else gguf.LlamaFileType.ALL_F32)
    writer.add_string("clip.projector_type", "gemma3")
    writer.add_bool("clip.has_vision_encoder", True)
    writer.add_bool("clip.use_gelu", True)
    for key, value in (
        ("embedding_length", spec.n_embd),
        ("feed_forward_length", spec.n_ff),
        ("block_count", spec.n_layer),
        ("projection_dim", spec.n_embd_text),
        ("attention.head_count", spec.n_head),
        ("image_size", spec.image_size),
        ("patch_size", spec.patch_size),
        ("projector.scale_factor", spec.n_merge),
    ):
        writer.add_uint32(f"clip.vision.{key}", value)
    writer.add_float32("clip.vision.attention.layer_norm_epsilon", 1e-6)
    writer.add_array("clip.vision.image_mean", [0.5, 0.5, 0.5])
    writer.add_array("clip.vision.image_std", [0.5, 0.5, 0.5])

    def matrix(name: str, shape: tuple[int, ...]) -> None:
        # numpy shape is GGUF's ne reversed
        data = (rng.standard_normal(shape) * 0.02).astype(np.float32)
        writer.add_tensor(name, data.astype(np.float16) if spec.dtype == "f16" else data)

    def vector(name: str, n: int, value: float = 0.0) -> None:
        writer.add_tensor(name, np.full(n, value, dtype=np.float32))

    e = spec.n_embd
    matrix("v.patch_embd.weight", (e, 3, spec.patch_size, spec.patch_size))
    vector("v.patch_embd.bias", e)
    matrix("v.position_embd.weight", (spec.n_patches, e))
    for i in range(spec.n_layer):
        for norm in ("ln1", "ln2"):
            vector(f"v.blk.{i}.{norm}.weight", e, 1.0)
            vector(f"v.blk.{i}.{norm}.bias", e)
        for proj in ("attn_q", "attn_k", "attn_v", "attn_out"):
            matrix(f"v.blk.{i}.{proj}.weight", (e, e))
            vector(f"v.blk.{i}.{proj}.bias", e)
        matrix(f"v.blk.{i}.ffn_up.weight", (spec.n_ff, e))
        vector(f"v.blk.{i}.ffn_up.bias", spec.n_ff)
        matrix(f"v.blk.{i}.ffn_down.weight", (e, spec.n_ff))
        vector(f"v.blk.{i}.ffn_down.bias", e)
    vector("v.post_ln.weight", e, 1.0)
    vector("v.post_ln.bias", e)
    vector("mm.soft_emb_norm.weight", e, 1.0)
    matrix("mm.input_projection.weight", (e, spec.n_embd_text))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    os.replace(tmp, path)
    return path
