"""vramtui against a real vLLM (its CPU build): a healthy check, the process tree it measures and stops,
and an API server killed from outside (its engine and worker must not outlive it)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from vllm_support import vllm_processes, vllm_profile

from vramtui.core.demo.tinyhf import write_tiny_hf
from vramtui.core.launch.launcher import ModelServer, run_check
from vramtui.core.logs.diagnose import diagnose_file
from vramtui.core.units import MIB

pytestmark = [pytest.mark.engine, pytest.mark.slow]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_hf(tmp_path_factory.mktemp("hf") / "tiny-qwen2")


def test_a_healthy_check_measures_the_whole_tree_and_leaves_nothing(
    vllm_program: Path, tiny_model: Path, tmp_path: Path
) -> None:
    result = run_check(vllm_profile(vllm_program, tiny_model, tmp_path), log_dir=tmp_path)
    assert result.ok, result.to_dict()
    assert result.stage == "inference" and result.failure is None
    # The API server, its EngineCore and its Worker: about 2 GiB together (the API server alone is 0.5).
    assert result.resident_mib is not None and result.resident_mib > 1200, result.resident_mib
    assert result.peak_mib is not None and result.peak_mib >= result.resident_mib
    assert result.released is True
    assert not vllm_processes(tiny_model), "a vLLM process was left running"
    saved = diagnose_file(result.log_file)
    assert not saved.failed, saved.summary


def test_an_api_server_killed_from_outside_takes_its_engine_and_worker_with_it(
    vllm_program: Path, tiny_model: Path, tmp_path: Path
) -> None:
    samples: list[int] = []
    server = ModelServer(
        vllm_profile(vllm_program, tiny_model, tmp_path),
        log_dir=tmp_path,
        on_sample=lambda sample: samples.append(sample.host.tree_rss or 0 if sample.host else 0),
    )
    with server:
        assert server.wait_ready(300), server.lines[-5:]
        assert server.pid is not None
        os.kill(server.pid, signal.SIGKILL)  # what the kernel's OOM killer does to the largest process
        deadline = time.monotonic() + 30
        while server.proc is not None and server.proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1.5)  # the watch re-lists the tree once a second
        orphans = [p for p in vllm_processes(tiny_model) if p.pid != server.pid]
        assert orphans, "the engine and worker should still be there before vramtui stops them"
        # The memory the orphans hold is still the run's: the curve does not drop to the dead leader's 0.
        assert samples and samples[-1] > 500 * MIB, samples[-3:]
    assert not vllm_processes(tiny_model), "vLLM's engine or worker outlived its killed API server"
    assert server.exit_code == -signal.SIGKILL
