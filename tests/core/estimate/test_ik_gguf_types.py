"""ik_llama.cpp's own tensor types in a GGUF (issue 23): a file with IQ4_K, IQ4_KS ... was refused as
damaged; it is read and sized from ik_llama.cpp's type table (vramtui/core/backends/llama_cpp/iktypes.py)."""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np
import pytest

from vramtui.core.demo.tinygguf import TinyModelSpec, write_tiny_gguf
from vramtui.core.estimate import quant as q
from vramtui.core.estimate.estimator import Settings, estimate
from vramtui.core.estimate.ggufheader import read_header
from vramtui.core.estimate.modelinfo import load_model_info

IQ4_KS = 144  # ik_llama.cpp ggml.h: 256 elements in 136 bytes, and a 4-byte scale per row (ggml.c)
IQ4_K = 139  # 256 elements in 144 bytes, no row scale: as many bytes as Q4_0's 32 in 18
Q4_0_R8 = 202  # Q4_0 interleaved by 8 rows: Q4_0's block


def _raw_gguf(path: Path, type_id: int, rows: int, cols: int, nbytes: int) -> Path:
    """A GGUF of one tensor written by the gguf package with an explicit type id and raw bytes."""
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_tensor_info(
        "blk.0.ffn_up.weight", (rows, cols), np.dtype(np.float32), nbytes, raw_dtype=type_id
    )
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    writer.write_tensor_data(np.zeros(nbytes, dtype=np.uint8))
    writer.close()
    return path


def test_a_tensor_of_an_ik_type_with_a_row_scale_is_read_at_its_size(tmp_path: Path) -> None:
    rows, cols = 6, 1024
    nbytes = rows * (4 + cols // 256 * 136)
    path = _raw_gguf(tmp_path / "iq4_ks.gguf", IQ4_KS, rows, cols, nbytes)
    (tensor,) = read_header(path).tensors
    assert (tensor.type_name, tensor.n_elements, tensor.n_bytes) == ("iq4_ks", rows * cols, nbytes)
    assert q.ggml_row_bytes("iq4_ks", cols) * rows == nbytes


def _retype(path: Path, tensor: str, type_id: int) -> None:
    """Rewrite one tensor's type id in the file's tensor table (a type of the same bytes per row)."""
    data = bytearray(path.read_bytes())
    name = tensor.encode()
    at = data.index(len(name).to_bytes(8, "little") + name) + 8 + len(name)
    n_dims = int.from_bytes(data[at : at + 4], "little")
    at += 4 + 8 * n_dims
    data[at : at + 4] = type_id.to_bytes(4, "little")
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(("type_id", "name"), [(IQ4_K, "iq4_k"), (Q4_0_R8, "q4_0_r8")])
def test_a_model_with_an_ik_tensor_type_loads_and_is_sized_as_the_file(
    tmp_path: Path, type_id: int, name: str
) -> None:
    spec = TinyModelSpec(n_layer=2, n_embd=512, n_head=8, n_head_kv=8, n_ff=1024, dtype="q4_0")
    mainline = load_model_info(write_tiny_gguf(tmp_path / "q4_0.gguf", spec))
    path = write_tiny_gguf(tmp_path / "ik.gguf", spec)
    _retype(path, "blk.0.ffn_up.weight", type_id)
    ik = load_model_info(path)  # refused before: "truncated or damaged GGUF file (... ggml type 139 ...)"
    assert name in {t.type_name for t in read_header(path).tensors}
    assert ik.layer_bytes == mainline.layer_bytes
    settings = Settings(context=4096, device_bytes=8 << 30)
    assert estimate(ik, settings).weights_bytes == estimate(mainline, settings).weights_bytes


def test_a_type_id_no_engine_uses_is_still_refused(tmp_path: Path) -> None:
    from vramtui.core.errors import VramtuiError

    path = _raw_gguf(tmp_path / "odd.gguf", 4000, 2, 256, 512)
    with pytest.raises(VramtuiError, match="ggml type 4000"):
        read_header(path)
