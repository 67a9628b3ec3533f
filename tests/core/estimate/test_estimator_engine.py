"""The llama.cpp estimate against llama.cpp itself: load generated GGUFs with llama-cpp-python on this CPU and
compare the buffer sizes it prints (model, KV, compute) with what the estimator says it will allocate."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from vramtui.core.estimate.estimator import Settings, estimate
from vramtui.core.estimate.modelinfo import load_model_info
from vramtui.core.logs.diagnose import diagnose_text
from vramtui.core.memory.parts import HOST, bill_from_figures
from vramtui.core.units import MIB

pytestmark = pytest.mark.engine

GGML_TYPE = {"f16": 1, "q8_0": 8, "q4_0": 2}
LOAD = """
import sys, llama_cpp
path, n_ctx, n_ubatch, flash, kv = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1", int(sys.argv[5])
llama_cpp.Llama(model_path=path, n_ctx=n_ctx, n_batch=max(512, n_ubatch), n_ubatch=n_ubatch, flash_attn=flash,
                type_k=kv, type_v=kv, n_threads=2, n_gpu_layers=0, verbose=True)
"""


def engine_buffers(path: Path, ctx: int, ubatch: int, flash: bool, kv: str) -> dict[str, float]:
    """Load the model in a fresh process (its C code logs to the process's stderr) and read the buffers."""
    pytest.importorskip("llama_cpp")
    args = [str(path), str(ctx), str(ubatch), "1" if flash else "0", str(GGML_TYPE[kv])]
    result = subprocess.run([sys.executable, "-c", LOAD, *args], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    # The log diagnosis's figures are the one parser of llama.cpp's buffer lines.
    bill = bill_from_figures(diagnose_text(result.stderr).engine_figures)
    found = {
        "model": bill.get("weights", HOST),
        "KV": bill.get("kv_cache", HOST),
        "compute": bill.get("compute", HOST),
    }
    assert all(found.values()), result.stderr[-2000:]
    return {name: value / MIB for name, value in found.items()}


CASES = [
    # (model shape, context, ubatch, flash attention, KV type)
    (dict(n_layer=4, n_embd=512, n_head=8, n_head_kv=8), 2048, 512, False, "f16"),
    (dict(n_layer=2, n_embd=256, n_head=4, n_head_kv=2, n_ff=2048), 1000, 512, True, "f16"),
    (dict(n_layer=3, n_embd=512, n_head=8, n_head_kv=2, dtype="q8_0"), 3000, 256, True, "q8_0"),
    (dict(n_layer=6, n_embd=384, n_head=6, n_head_kv=3, n_ff=1536, dtype="q4_0"), 5000, 128, False, "f16"),
    (dict(n_layer=2, n_embd=512, n_head=8, n_head_kv=1, n_ff=4096, dtype="f32"), 700, 512, True, "q4_0"),
]


@pytest.mark.parametrize(("shape", "ctx", "ubatch", "flash", "kv"), CASES)
def test_estimate_matches_llama_cpp_buffers(
    make_gguf, shape: dict, ctx: int, ubatch: int, flash: bool, kv: str
) -> None:
    path = make_gguf(**shape)
    engine = engine_buffers(path, ctx, ubatch, flash, kv)
    est = estimate(
        load_model_info(path),
        Settings(
            context=ctx, ubatch=ubatch, batch=max(512, ubatch), flash_attn=flash, kv_dtype=kv, on_gpu=False
        ),
    )
    # llama.cpp prints MiB with two decimals: model and KV must agree to that precision (a q4_0 file's
    # repacked CPU_REPACK copy, sized from the file's tensors, within 1%)
    assert est.device == "host"  # a CPU-only run: every row of the breakdown is host RAM
    tolerance = 0.01 * engine["model"] if est.counts_repack and shape.get("dtype") == "q4_0" else 0.006
    assert est.weights_bytes / MIB == pytest.approx(engine["model"], abs=tolerance)
    assert est.kv_cache_bytes / MIB == pytest.approx(engine["KV"], abs=0.006)
    # the compute buffer is the graph allocator's peak; the estimate rebuilds it from the graph's phases
    assert est.compute_buffer_bytes / MIB == pytest.approx(engine["compute"], rel=0.10)


def test_llama_cpp_dry_run_agrees_with_the_real_load_and_the_arithmetic(make_gguf) -> None:
    from vramtui.core.estimate.engine_probe import probe_llama_cpp

    pytest.importorskip("llama_cpp")
    path = make_gguf(n_layer=4, n_embd=512, n_head=8, n_head_kv=8)
    figures = probe_llama_cpp(path, context=3000, ubatch=256, batch=512, flash_attn=False, kv_dtype="f16")
    assert figures is not None and figures.context_ok
    real = engine_buffers(path, 3000, 256, False, "f16")
    # the dry run allocates nothing yet sizes the cache and the graph as the real load does
    assert figures.kv_bytes / MIB == pytest.approx(real["KV"], abs=0.006)
    assert figures.compute_bytes["CPU"] / MIB == pytest.approx(real["compute"], abs=0.006)
    est = estimate(
        load_model_info(path), Settings(context=3000, ubatch=256, batch=512, flash_attn=False, on_gpu=False)
    )
    assert figures.kv_cells == est.kv_cells == 3072
    assert est.kv_cache_bytes == figures.kv_bytes


def test_estimate_cli_asks_the_engine(make_gguf, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from vramtui.cli import main

    pytest.importorskip("llama_cpp")
    path = make_gguf(n_layer=4, n_embd=512, n_head=8, n_head_kv=8)
    assert (
        main(
            [
                "estimate",
                str(path),
                "--ctx",
                "2048",
                "--parallel",
                "1",
                "--flash-attn",
                "off",
                "--cpu",
                "--engine",
                "--json",
            ]
        )
        == 0
    )
    data = json.loads(capsys.readouterr().out)
    assert data["engine"]["kv_bytes"] == data["kv_cache_bytes"]
    assert data["engine"]["compute_bytes"]["CPU"] == pytest.approx(data["compute_buffer_bytes"], rel=0.10)
    # QA 38 F9: four slots, a stream each ("2048 cells, ... 4/4 seqs"): the cache is their 8,192 cells, not
    # one stream's 2,048 beside the whole cache's bytes
    argv = ["estimate", str(path), "--ctx", "8192", "--parallel", "4", "--cpu", "--engine", "--json"]
    assert main(argv) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["engine"]["kv_cells"] == data["kv_cells"] == 8192, data["engine"]
    assert data["engine"]["kv_bytes"] == data["kv_cache_bytes"]


@pytest.mark.parametrize("file_type", ["q4_k_m", "q4_k_s", "iq4_nl"])
def test_a_k_quant_files_repacked_copy_is_counted_per_tensor_type(
    make_gguf, tmp_path, file_type: str
) -> None:
    """QA 18 F4: the CPU repack was decided by the header's file type, q4_0 alone, but llama.cpp's x86 build
    repacks every q4_0, q4_K, iq4_nl and mxfp4 tensor (ggml-cpu/repack.cpp): a Q4_K_M file's q4_K tensors
    (less its token embedding, which is only looked up) are a second host copy, and its q6_K ones are not.
    The file is made by llama.cpp's own quantizer, and its buffers are the real load's."""
    import ctypes

    llama_cpp = pytest.importorskip("llama_cpp")
    from vramtui.core.backends.llama_cpp.memory import _cpu_has

    src = make_gguf(n_layer=2, n_embd=256, n_head=4, n_head_kv=2, n_ff=512)
    dst = tmp_path / f"m-{file_type}.gguf"
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = getattr(llama_cpp, f"LLAMA_FTYPE_MOSTLY_{file_type.upper()}")
    assert llama_cpp.llama_model_quantize(str(src).encode(), str(dst).encode(), ctypes.byref(params)) == 0
    args = [str(dst), "512", "512", "1", str(GGML_TYPE["f16"])]
    loaded = subprocess.run([sys.executable, "-c", LOAD, *args], capture_output=True, text=True, timeout=120)
    assert loaded.returncode == 0, loaded.stderr[-2000:]
    printed = diagnose_text(loaded.stderr).engine_figures.get("model_buffer.CPU_REPACK", 0)
    info = load_model_info(dst)
    est = estimate(info, Settings(context=512, ubatch=512, batch=512, flash_attn=True, on_gpu=False))
    assert est.counts_repack == _cpu_has("avx2") == (printed > 0)
    repacked = est.weights_bytes - sum(info.weights_by_dtype.values())  # beside the file's own pages
    # printed in MiB with two decimals
    assert repacked / MIB == pytest.approx(printed / MIB, abs=0.006), (repacked, printed)
