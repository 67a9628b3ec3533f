"""A qwen3moe-shaped GGUF loaded by the real engines on this CPU, against the estimate (issue 15).

llama-server (with and without --n-cpu-moe / --cpu-moe, mmapped or read with --load-mode none) and
llama-cpp-python print their buffers; the estimate of the same run matches within 3% on the weights and
1% on the KV cache, and llama.cpp's own no_alloc dry run (`vramtui estimate --engine`) agrees.

What a CPU-only run prints, as seen here: one model buffer whatever the override rules say
(`CPU_Mapped` when mmapped, `CPU` with --load-mode none), since every tensor is host memory either way,
plus `CPU_REPACK` for q4_0's repacked copy. The device/host split those rules make is checked against
GPU printouts elsewhere (tests/core/estimate/test_expert_offload.py).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from llama_server_capture import log_until_listening

from vramtui.core.demo.tinygguf import TinyMoESpec, write_tiny_moe_gguf
from vramtui.core.estimate.estimator import Settings, estimate
from vramtui.core.estimate.modelinfo import load_model_info
from vramtui.core.logs.diagnose import diagnose_text
from vramtui.core.memory.parts import HOST, bill_from_figures
from vramtui.core.units import MIB

pytestmark = pytest.mark.engine

CONTEXT = 1024
OFFLOADS = {
    "resident": ([], {}),
    "n-cpu-moe 3": (["--n-cpu-moe", "3"], {"n_cpu_moe": 3}),
    "cpu-moe": (["--cpu-moe"], {"cpu_moe": True}),
}


@pytest.fixture(scope="module")
def moe_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("moe-buffers")
    return {
        dtype: write_tiny_moe_gguf(folder / f"tiny-moe-{dtype}.gguf", TinyMoESpec(dtype=dtype))
        for dtype in ("f16", "q8_0", "q4_0")
    }


def printed(log: str) -> dict[str, float]:
    """The buffers the log diagnosis reads (the one parser of llama.cpp's lines), in MiB."""
    bill = bill_from_figures(diagnose_text(log).engine_figures)
    return {part: bill.get(part, HOST) / MIB for part in ("weights", "kv_cache", "compute")}


def close(estimated: int, shown: float, share: float) -> bool:
    # llama.cpp prints MiB with two decimals: 0.005 MiB of rounding beside the share
    return abs(estimated / MIB - shown) <= share * shown + 0.005


def _llama_server_log(binary: Path, model: Path, args: list[str]) -> str:
    return log_until_listening(binary, ["-m", str(model), "-c", str(CONTEXT), *args])


@pytest.mark.parametrize("offload", sorted(OFFLOADS))
@pytest.mark.parametrize("dtype", ["f16", "q8_0", "q4_0"])
def test_llama_server_prints_what_the_estimate_says(
    llama_server_bin: Path, moe_files: dict[str, Path], dtype: str, offload: str
) -> None:
    flags, params = OFFLOADS[offload]
    log = _llama_server_log(llama_server_bin, moe_files[dtype], flags)
    assert "listening on http://" in log, log[-2000:]
    if flags:
        assert "tensor overrides to CPU" in log  # the rules reached the engine
    lines = re.findall(r"(\S+) model buffer size", log)
    assert lines == (["CPU_Mapped", "CPU_REPACK"] if dtype == "q4_0" else ["CPU_Mapped"])
    shown = printed(log)
    info = load_model_info(moe_files[dtype])
    est = estimate(info, Settings(context=CONTEXT, on_gpu=False, **params))  # type: ignore[arg-type]
    assert est.expert_host_bytes == 0  # on the CPU nothing moves: it is all host RAM already
    assert close(est.weights_bytes, shown["weights"], 0.03), (est.weights_bytes / MIB, shown)
    assert close(est.kv_cache_bytes, shown["kv_cache"], 0.01), (est.kv_cache_bytes / MIB, shown)


@pytest.mark.parametrize("dtype", ["f16", "q8_0", "q4_0"])
def test_read_without_mmap_the_buffer_is_cpu_and_the_same_size(
    llama_server_bin: Path, moe_files: dict[str, Path], dtype: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from vramtui.cli import main

    log = _llama_server_log(llama_server_bin, moe_files[dtype], ["--cpu-moe", "--load-mode", "none"])
    # q4_0: the repacked tensors replace their file copies, beside a small CPU buffer of the rest
    assert re.findall(r"(\S+) model buffer size", log) == (
        ["CPU", "CPU_REPACK"] if dtype == "q4_0" else ["CPU"]
    )
    info = load_model_info(moe_files[dtype])
    est = estimate(info, Settings(context=CONTEXT, on_gpu=False, cpu_moe=True, mmap=False))
    assert close(est.weights_bytes, printed(log)["weights"], 0.03), (est.weights_bytes / MIB, printed(log))
    assert not est.counts_repack
    mapped = estimate(info, Settings(context=CONTEXT, on_gpu=False, cpu_moe=True))
    assert (mapped.weights_bytes > est.weights_bytes) == (dtype == "q4_0")  # mmapped: both copies
    argv = [
        "estimate",
        str(moe_files[dtype]),
        "--cpu",
        "--ctx",
        str(CONTEXT),
        "--cpu-moe",
        "--no-mmap",
        "--json",
    ]
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out)["weights_bytes"] == est.weights_bytes


LOAD = """
import sys, llama_cpp
llama_cpp.Llama(model_path=sys.argv[1], n_ctx=int(sys.argv[2]), n_batch=512, n_ubatch=512, n_threads=2,
                n_gpu_layers=0, verbose=True)
"""


@pytest.mark.parametrize("dtype", ["f16", "q8_0", "q4_0"])
def test_llama_cpp_python_prints_what_the_estimate_says(moe_files: dict[str, Path], dtype: str) -> None:
    pytest.importorskip("llama_cpp")
    path = moe_files[dtype]
    run = subprocess.run(
        [sys.executable, "-c", LOAD, str(path), str(CONTEXT)], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr[-2000:]
    shown = printed(run.stderr)
    est = estimate(load_model_info(path), Settings(backend="llama-cpp-python", context=CONTEXT, on_gpu=False))
    assert close(est.weights_bytes, shown["weights"], 0.03), (est.weights_bytes / MIB, shown)
    assert close(est.kv_cache_bytes, shown["kv_cache"], 0.01)


@pytest.mark.parametrize("dtype", ["f16", "q8_0", "q4_0"])
def test_the_engines_dry_run_agrees(
    moe_files: dict[str, Path], dtype: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from vramtui.cli import main
    from vramtui.core.estimate.engine_probe import llama_cpp_available

    if not llama_cpp_available():
        pytest.skip("llama-cpp-python is not installed")
    path = moe_files[dtype]
    argv = ["estimate", str(path), "--ctx", str(CONTEXT), "--parallel", "1", "--cpu", "--engine", "--json"]
    assert main([*argv, "--n-cpu-moe", "3"]) == 0
    data = json.loads(capsys.readouterr().out)
    engine = data["engine"]
    assert engine["kv_bytes"] == data["kv_cache_bytes"]  # exact: the same cells, layers and type
    # the dry run's model size is the file's tensors; on the CPU the estimate adds q4_0's repacked copy
    if dtype == "q4_0":
        assert data["counts_repack"] and data["weights_bytes"] > engine["model_bytes"]
    else:
        assert abs(data["weights_bytes"] - engine["model_bytes"]) <= 0.03 * engine["model_bytes"]
