"""A small GGUF written the way llama.cpp's converter names its keys and tensors, for the estimator's tests
(random f16 values: the estimator reads the header and the tensor table, never the numbers)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np


def write_gguf(
    path: Path, arch: str, keys: Callable[[Any], None], tensors: Mapping[str, tuple[int, ...]]
) -> Path:
    """`keys(writer)` adds the metadata; `tensors` maps each name to its shape (rows first)."""
    import gguf

    writer = gguf.GGUFWriter(str(path), arch)
    keys(writer)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    rng = np.random.default_rng(0)
    for name, shape in tensors.items():
        writer.add_tensor(name, rng.standard_normal(shape).astype(np.float16))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def dense_tensors(
    layers: int, hidden: int, heads: int, kv_heads: int, head: int, ff: int = 512, vocab: int = 1000
) -> dict[str, tuple[int, ...]]:
    """The tensor table of a small dense decoder (attention and an up/down feed-forward per layer)."""
    tensors: dict[str, tuple[int, ...]] = {
        "token_embd.weight": (vocab, hidden),
        "output.weight": (vocab, hidden),
    }
    for il in range(layers):
        tensors[f"blk.{il}.attn_q.weight"] = (heads * head, hidden)
        tensors[f"blk.{il}.attn_k.weight"] = (kv_heads * head, hidden)
        tensors[f"blk.{il}.attn_v.weight"] = (kv_heads * head, hidden)
        tensors[f"blk.{il}.attn_output.weight"] = (hidden, heads * head)
        tensors[f"blk.{il}.ffn_up.weight"] = (ff, hidden)
        tensors[f"blk.{il}.ffn_down.weight"] = (hidden, ff)
    return tensors
