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
