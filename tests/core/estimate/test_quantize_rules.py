"""`gguf_tensor_type` against llama.cpp's own quantizer: tiny random-weight GGUFs are quantized by the
llama.cpp that llama-cpp-python vendors (`llama_model_quantize`, the code behind llama-quantize), and every
quantized tensor's type in the written file must be the one the rules give.

The 1-2 bit types and IQ3_XXS refuse to run without an importance matrix, and published files of every IQ
type are made with one, so the quantizer is handed a flat one (all ones): the rules model a file made
with an imatrix. The dense models have 16 layers (llama.cpp's first eighth and sixteenth are whole layers), rows
of 256 (the k-quants' block), and either grouped-query attention (4 heads per KV head), plain multi-head
attention, or eight experts (Mixtral's count, which has rules of its own), and a Phi-3 shape whose
attention is one fused attn_qkv."""

from __future__ import annotations

import ctypes
import re
from pathlib import Path

import gguf
import llama_cpp
import numpy as np
import pytest

from vramtui.core.demo.tinygguf import TinyModelSpec, TinyMoESpec, write_tiny_gguf, write_tiny_moe_gguf
from vramtui.core.demo.tinygguf import _add_vocab as add_vocab
from vramtui.core.estimate import quant as q

_LAYER_TENSOR = re.compile(r"blk\.(\d+)\.(\w+)\.weight$")

# (model, file types): every k-quant on the grouped-query model; the IQ types' rules turn on the heads per
# KV head and the experts, so each model gets the types whose rules differ there.
_CASES = {
    "gqa": (
        "q2_k", "q2_k_s", "q3_k_s", "q3_k_m", "q3_k_l", "q4_0", "q4_k_s", "q4_k_m", "q5_k_s", "q5_k_m", "q6_k",
        "q8_0", "iq4_xs", "iq4_nl", "iq3_m", "iq3_xs", "iq3_xxs", "iq2_m", "iq2_xxs",
    ),
    "mha": ("q2_k", "q3_k_m", "iq4_xs", "iq3_xxs", "iq2_m", "iq2_xxs"),
    "moe8": ("q2_k", "q3_k_m", "iq2_m"),
    # a fused attn_qkv (Phi-3; Qwen3.5's linear attention) follows attn_v's rules in today's llama.cpp
    "qkv": ("q2_k", "q3_k_m", "q3_k_l", "q4_k_s", "q4_k_m", "q5_k_m"),
}  # fmt: skip


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, int, int, int]]:
    """name -> (f16 GGUF, layers, heads per KV head, experts)."""
    root = tmp_path_factory.mktemp("quantize-rules")
    dense = {"n_layer": 16, "n_embd": 256, "n_head": 4, "n_ff": 256}
    return {
        "qkv": (_write_tiny_phi3(root / "qkv.gguf"), 16, 4, 0),
        "gqa": (write_tiny_gguf(root / "gqa.gguf", TinyModelSpec(**dense, n_head_kv=1)), 16, 4, 0),
        "mha": (write_tiny_gguf(root / "mha.gguf", TinyModelSpec(**dense, n_head_kv=4)), 16, 1, 0),
        "moe8": (
            write_tiny_moe_gguf(
                root / "moe8.gguf",
                TinyMoESpec(
                    n_layer=16, n_embd=256, n_head=4, n_head_kv=1, head_dim=64, n_expert=8, n_ff_exp=256
                ),
            ),
            16,
            4,
            8,
        ),
    }


def _write_tiny_phi3(
    path: Path, n_layer: int = 16, n_embd: int = 256, n_head: int = 4, n_ff: int = 256
) -> Path:
    """A Phi-3 shaped GGUF (one fused attn_qkv, one fused ffn_up), f16, one KV head for four."""
    writer = gguf.GGUFWriter(str(path), "phi3")
    writer.add_context_length(4096)
    writer.add_embedding_length(n_embd)
    writer.add_block_count(n_layer)
    writer.add_feed_forward_length(n_ff)
    writer.add_head_count(n_head)
    writer.add_head_count_kv(1)
    writer.add_rope_dimension_count(n_embd // n_head)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    add_vocab(writer)
    rng = np.random.default_rng(0)

    def tensor(name: str, shape: tuple[int, ...]) -> None:
        data = (rng.standard_normal(shape) * 0.02).astype(np.float32)
        writer.add_tensor(name, data.astype(np.float16) if len(shape) > 1 else data)

    tensor("token_embd.weight", (259, n_embd))
    for i in range(n_layer):
        tensor(f"blk.{i}.attn_norm.weight", (n_embd,))
        tensor(f"blk.{i}.attn_qkv.weight", (n_embd + 2 * (n_embd // n_head), n_embd))
        tensor(f"blk.{i}.attn_output.weight", (n_embd, n_embd))
        tensor(f"blk.{i}.ffn_norm.weight", (n_embd,))
        tensor(f"blk.{i}.ffn_up.weight", (2 * n_ff, n_embd))
        tensor(f"blk.{i}.ffn_down.weight", (n_embd, n_ff))
    tensor("output_norm.weight", (n_embd,))
    tensor("output.weight", (259, n_embd))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def _flat_imatrix(path: Path) -> tuple[ctypes.Array, list]:
    """One entry of ones per matrix (per expert for a 3-D tensor), closed by a null name."""
    rows = []
    for tensor in gguf.GGUFReader(str(path)).tensors:
        shape = [int(n) for n in tensor.shape]
        if len(shape) >= 2:
            n = shape[0] * (shape[2] if len(shape) > 2 else 1)
            rows.append((tensor.name.encode(), (ctypes.c_float * n)(*([1.0] * n)), n))
    entries = (llama_cpp.llama_model_imatrix_data * (len(rows) + 1))()
    for entry, (name, data, n) in zip(entries, rows, strict=False):
        entry.name, entry.size = name, n
        entry.data = ctypes.cast(data, ctypes.POINTER(ctypes.c_float))
    return entries, rows  # the rows keep the buffers alive while the quantizer reads them


def _quantize(src: Path, dst: Path, file_type: str) -> None:
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = getattr(llama_cpp, f"LLAMA_FTYPE_MOSTLY_{file_type.upper()}")
    params.nthread = 2
    entries, _alive = _flat_imatrix(src)
    params.imatrix = ctypes.cast(entries, ctypes.POINTER(llama_cpp.llama_model_imatrix_data))
    rc = llama_cpp.llama_model_quantize(str(src).encode(), str(dst).encode(), ctypes.byref(params))
    assert rc == 0, f"llama_model_quantize refused {file_type}"


@pytest.mark.parametrize(("model", "file_type"), [(m, f) for m, types in _CASES.items() for f in types])
def test_the_rules_give_llama_quantize_s_type_for_every_tensor(
    models: dict[str, tuple[Path, int, int, int]], tmp_path: Path, model: str, file_type: str
) -> None:
    src, n_layers, n_gqa, n_expert = models[model]
    dst = tmp_path / f"{model}-{file_type}.gguf"
    _quantize(src, dst, file_type)
    wrong, compared = [], 0
    for tensor in gguf.GGUFReader(str(dst)).tensors:
        found = _LAYER_TENSOR.match(tensor.name)
        kind, layer = (found.group(2), int(found.group(1))) if found else (tensor.name.split(".")[0], -1)
        if len(tensor.shape) < 2 or kind == "ffn_gate_inp":
            continue  # norms and the router are never quantized
        compared += 1
        ruled = q.gguf_tensor_type(file_type, q.TensorRole(kind, layer), n_layers, False, n_gqa, n_expert)
        if ruled != tensor.tensor_type.name.lower():
            wrong.append(f"{tensor.name}: llama.cpp {tensor.tensor_type.name}, rules {ruled}")
    assert compared >= n_layers * 4 + 2  # every layer's matrices and the two embeddings
    assert not wrong, "\n".join(wrong[:8])
