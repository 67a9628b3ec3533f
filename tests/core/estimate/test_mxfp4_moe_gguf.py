"""The GGUF file type MXFP4 MoE (gpt-oss's: MXFP4 routed experts, Q8_0 matrices, f32 norms): a tiny
qwen3moe GGUF written in that type through the `gguf` package reads as `mxfp4_moe`, the estimate's planned
per-tensor types from an f16 copy give the file's bytes, and llama-cpp-python loads it and prints the same
model buffer."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from vramtui.core.demo.tinygguf import _vocab
from vramtui.core.estimate.estimator import Settings, estimate
from vramtui.core.estimate.modelinfo import load_model_info
from vramtui.core.estimate.weights import llama_cpp_weights
from vramtui.core.units import MIB

LAYERS, EMBD, HEADS, KV_HEADS, HEAD_DIM, EXPERTS, USED, FF_EXP = 4, 256, 4, 2, 64, 8, 2, 128
VOCAB = len(_vocab()[0])
# every host model buffer: the mapped file, and the repacked copy of its mxfp4 experts (CPU_REPACK, x86)
MODEL_BUFFER = re.compile(r"CPU(?:_Mapped|_REPACK)? model buffer size =\s*([\d.]+) MiB")


def write_moe(path: Path, mxfp4: bool) -> Path:
    """A qwen3moe GGUF, f16 or MXFP4 MoE (experts MXFP4, the other matrices Q8_0, norms and router f32)."""
    import gguf
    from gguf import quants

    rng = np.random.default_rng(0)
    writer = gguf.GGUFWriter(str(path), "qwen3moe")
    writer.add_name("tiny-qwen3moe")
    writer.add_context_length(4096)
    writer.add_embedding_length(EMBD)
    writer.add_block_count(LAYERS)
    writer.add_feed_forward_length(FF_EXP * 6)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(KV_HEADS)
    writer.add_key_length(HEAD_DIM)
    writer.add_value_length(HEAD_DIM)
    writer.add_expert_count(EXPERTS)
    writer.add_expert_used_count(USED)
    writer.add_expert_feed_forward_length(FF_EXP)
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_vocab_size(VOCAB)
    file_type = gguf.LlamaFileType.MOSTLY_MXFP4_MOE if mxfp4 else gguf.LlamaFileType.MOSTLY_F16
    writer.add_file_type(file_type)
    tokens, scores, types = _vocab()
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)

    def weight(name: str, shape: tuple[int, ...], experts: bool = False) -> None:
        data = (rng.standard_normal(shape) * 0.02).astype(np.float32)
        if not mxfp4:
            writer.add_tensor(name, data.astype(np.float16))
            return
        qtype = gguf.GGMLQuantizationType.MXFP4 if experts else gguf.GGMLQuantizationType.Q8_0
        writer.add_tensor(name, quants.quantize(data, qtype), raw_dtype=qtype)

    def norm(name: str, width: int) -> None:
        writer.add_tensor(name, np.ones(width, dtype=np.float32))

    weight("token_embd.weight", (VOCAB, EMBD))
    for i in range(LAYERS):
        norm(f"blk.{i}.attn_norm.weight", EMBD)
        weight(f"blk.{i}.attn_q.weight", (HEADS * HEAD_DIM, EMBD))
        weight(f"blk.{i}.attn_k.weight", (KV_HEADS * HEAD_DIM, EMBD))
        weight(f"blk.{i}.attn_v.weight", (KV_HEADS * HEAD_DIM, EMBD))
        norm(f"blk.{i}.attn_q_norm.weight", HEAD_DIM)
        norm(f"blk.{i}.attn_k_norm.weight", HEAD_DIM)
        weight(f"blk.{i}.attn_output.weight", (EMBD, HEADS * HEAD_DIM))
        norm(f"blk.{i}.ffn_norm.weight", EMBD)
        writer.add_tensor(f"blk.{i}.ffn_gate_inp.weight", np.zeros((EXPERTS, EMBD), dtype=np.float32))
        weight(f"blk.{i}.ffn_gate_exps.weight", (EXPERTS, FF_EXP, EMBD), experts=True)
        weight(f"blk.{i}.ffn_up_exps.weight", (EXPERTS, FF_EXP, EMBD), experts=True)
        weight(f"blk.{i}.ffn_down_exps.weight", (EXPERTS, EMBD, FF_EXP), experts=True)
    norm("output_norm.weight", EMBD)
    weight("output.weight", (VOCAB, EMBD))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


@pytest.fixture(scope="module")
def moe_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("mxfp4")
    return write_moe(folder / "moe-f16.gguf", False), write_moe(folder / "moe-mxfp4.gguf", True)


def test_an_mxfp4_moe_gguf_reads_as_its_file_type(moe_files: tuple[Path, Path]) -> None:
    info = load_model_info(moe_files[1])
    assert info.file_type == "mxfp4_moe" and info.is_moe
    assert set(info.weights_by_dtype) == {"mxfp4", "q8_0", "f32"}
    experts = 3 * LAYERS * EXPERTS * FF_EXP * EMBD
    assert info.weights_by_dtype["mxfp4"] == experts * 17 // 32  # 17 bytes per 32 weights


def test_planning_mxfp4_moe_from_the_f16_file_gives_the_mxfp4_files_bytes(
    moe_files: tuple[Path, Path],
) -> None:
    f16, mxfp4 = (load_model_info(path) for path in moe_files)
    planned = llama_cpp_weights(f16, "mxfp4_moe")
    actual = llama_cpp_weights(mxfp4)
    # the planned shapes leave out qwen3's per-head q/k norms (2 x 64 f32 a layer): all else is exact
    assert sum(actual.layers) - sum(planned.layers) == LAYERS * 2 * HEAD_DIM * 4
    assert planned.token_embd == actual.token_embd and planned.output == actual.output


LOAD = """
import sys, llama_cpp
llama_cpp.Llama(model_path=sys.argv[1], n_ctx=512, n_threads=2, n_gpu_layers=0, verbose=True)
"""


@pytest.mark.engine
def test_llama_cpp_python_loads_the_mxfp4_moe_file_with_the_estimated_weights(
    moe_files: tuple[Path, Path],
) -> None:
    pytest.importorskip("llama_cpp")
    run = subprocess.run(
        [sys.executable, "-c", LOAD, str(moe_files[1])], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr[-2000:]
    printed = sum(float(m) for m in MODEL_BUFFER.findall(run.stderr))
    est = estimate(
        load_model_info(moe_files[1]), Settings(backend="llama-cpp-python", context=512, on_gpu=False)
    )
    assert est.weights_bytes / MIB == pytest.approx(printed, rel=0.03)
