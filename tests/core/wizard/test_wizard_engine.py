"""The wizard against the real engine: llama-cpp-python's server on this CPU, failing for real under an
address-space budget, brought up one change at a time. Every run here is a real process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from vramtui.core.demo import DEMO_CONTEXT, demo_model_path, demo_profile
from vramtui.core.demo.tinygguf import TinyModelSpec, write_tiny_gguf
from vramtui.core.launch.profile import Profile
from vramtui.core.units import MIB
from vramtui.core.wizard.steprecord import open_session
from vramtui.core.wizard.wizard import Wizard, stress_check

pytest.importorskip("llama_cpp")
pytestmark = pytest.mark.engine

REPO = Path(__file__).resolve().parents[3]
# 24 layers, 1024 wide: f16 589 MiB, q8_0 313 MiB, q4_0 166 MiB. Under a 700 MiB cap with the weights
# read into memory (use_mmap = false, as a GPU copy would) the f16 file fails while loading weights.
WEIGHTS_SPEC = {
    "n_layer": 24,
    "n_embd": 1024,
    "n_head": 8,
    "n_head_kv": 8,
    "n_ff": 2816,
    "context_length": 4096,
}
WEIGHTS_BUDGET = 700 * MIB


@pytest.fixture(scope="module")
def demo_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("demo-cache")
    demo_model_path(folder)
    return folder


@pytest.fixture(scope="module")
def quant_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("quants")
    for dtype in ("f16", "q8_0", "q4_0"):
        write_tiny_gguf(folder / f"mid-{dtype}.gguf", TinyModelSpec(dtype=dtype, **WEIGHTS_SPEC))  # type: ignore[arg-type]
    return folder


def _env(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["XDG_DATA_HOME"] = str(tmp_path / "data")
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _servers_of(model: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = proc.info.get("cmdline") or []
        if "llama_cpp.server" in cmdline and model in cmdline:
            found.append(proc)
    return found


def test_kv_cache_failure_is_brought_up(demo_cache: Path, tmp_path: Path) -> None:
    record = tmp_path / "kv.jsonl"
    result = Wizard(demo_profile(demo_cache), record_path=record, auto=True).run(max_steps=6)
    first = result.steps[0].observation
    assert first is not None and not first.ready
    assert first.failure_stage == "kv_cache" and "oom" in str(first.failure)
    assert first.figures["failed_alloc"] == DEMO_CONTEXT * 8192  # llama.cpp's own 2048 MiB KV buffer
    assert result.success, result.reason
    assert 1 <= result.relaunches <= 2  # the goal: at most two relaunches after the first failure
    final = result.steps[-1]
    assert final.outcome == "works" and final.observation is not None and final.observation.smoke_ok
    assert final.observation.facts["n_ctx"] == str(result.final_profile.params["context"])
    assert int(result.final_profile.params["context"]) < DEMO_CONTEXT  # type: ignore[call-overload]
    # The record holds every step, each with its figures and log file.
    session = open_session(record)
    assert session.success and len(session.steps) == len(result.steps) and not session.interrupted
    for entry, step in zip(session.steps, result.steps, strict=True):
        assert entry["step"] == step.index and entry["outcome"] == step.outcome
        assert Path(entry["log_file"]).is_file() and entry["peak_mib"] is not None
    assert session.steps[-1]["tokens_per_s"] and session.steps[-1]["load_time_s"]
    assert not _servers_of(result.final_profile.model)


def test_weights_failure_switches_to_a_prequantized_file(quant_folder: Path, tmp_path: Path) -> None:
    profile = Profile(
        backend="llama-cpp-python",
        model=str(quant_folder / "mid-f16.gguf"),
        params={"context": 512, "use_mmap": False},
        memory_budget=WEIGHTS_BUDGET,
        port=0,
    )
    record = tmp_path / "weights.jsonl"
    result = Wizard(profile, record_path=record, auto=True).run(max_steps=6)
    first = result.steps[0].observation
    assert first is not None and first.failure_stage == "load_weights" and "oom" in str(first.failure)
    assert result.success, result.reason
    assert result.relaunches <= 2
    changes = [s.proposal for s in result.steps if s.proposal is not None]
    assert changes[0] is not None and changes[0].param == "model"
    final_model = Path(result.final_profile.model).name
    assert final_model in ("mid-q8_0.gguf", "mid-q4_0.gguf")
    quant = final_model.removeprefix("mid-").removesuffix(".gguf")
    assert any(f"quantization confirmed in the log: file type {quant}" in n for n in result.steps[-1].notes)
    session = open_session(record)
    assert [s["outcome"] for s in session.steps][-1] == "works" and session.end is not None
    assert session.end["final_model"] == result.final_profile.model


def test_a_change_the_engine_never_sees_is_reported(demo_cache: Path, tmp_path: Path) -> None:
    # The user's extra_args pass --n_ctx again after vramtui's: the server takes the last one.
    profile = demo_profile(demo_cache).with_changes(extra_args=("--n_ctx", str(DEMO_CONTEXT)))
    result = Wizard(profile, record_path=tmp_path / "ignored.jsonl", auto=True).run(max_steps=6)
    assert not result.success
    assert [s.outcome for s in result.steps] == ["first_run", "not_applied"]
    assert "did not take effect" in result.reason and f"n_ctx = {DEMO_CONTEXT}" in result.reason
    assert "extra_args" in result.reason
    assert result.final_profile.params["context"] == DEMO_CONTEXT  # not kept as progress


def test_killing_vramtui_mid_step_loses_nothing(demo_cache: Path, tmp_path: Path) -> None:
    profile_file = demo_profile(demo_cache).save(tmp_path / "demo.toml")
    record = tmp_path / "killed.jsonl"
    wizard = subprocess.Popen(
        [sys.executable, "-m", "vramtui", "wizard", str(profile_file), "--auto", "--record", str(record)],
        env=_env(tmp_path),
        stdout=subprocess.DEVNULL,
        stderr=(tmp_path / "wizard.err").open("wb"),
    )
    server_pid = None
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline and server_pid is None:
            if record.is_file():
                for line in record.read_text().splitlines():
                    entry = json.loads(line)
                    if entry["type"] == "process" and entry["step"] == 1:
                        server_pid = entry["pid"]
            time.sleep(0.01)
        assert server_pid is not None, (
            f"the wizard never reached its second launch (exit {wizard.poll()}); record: "
            + (record.read_text()[-1500:] if record.is_file() else "none")
            + "; stderr: "
            + (tmp_path / "wizard.err").read_text(errors="replace")[-1500:]
        )
        assert psutil.pid_exists(server_pid)
        wizard.send_signal(signal.SIGKILL)  # mid-step: the relaunch is loading
        wizard.wait(10)
    finally:
        if wizard.poll() is None:
            wizard.kill()
    gone_by = time.monotonic() + 15
    while time.monotonic() < gone_by and psutil.pid_exists(server_pid):
        try:
            if psutil.Process(server_pid).status() == psutil.STATUS_ZOMBIE:
                break
        except psutil.NoSuchProcess:
            break
        time.sleep(0.1)
    alive = psutil.pid_exists(server_pid) and psutil.Process(server_pid).status() != psutil.STATUS_ZOMBIE
    assert not alive, "the model server outlived vramtui"
    assert not _servers_of(str(demo_model_path(demo_cache)))
    session = open_session(record)
    assert [s["step"] for s in session.steps] == [0] and session.steps[0]["outcome"] == "first_run"
    assert [s["step"] for s in session.interrupted] == [1] and session.interrupted[0]["param"] == "context"
    assert not session.finished


def test_cli_without_a_terminal_prints_the_proposal_and_stops(demo_cache: Path, tmp_path: Path) -> None:
    profile_file = demo_profile(demo_cache).save(tmp_path / "demo.toml")
    done = subprocess.run(
        [sys.executable, "-m", "vramtui", "wizard", str(profile_file), "--json"],
        env=_env(tmp_path),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr[-2000:]
    data = json.loads(done.stdout)
    assert data["success"] is False and data["steps"] == []
    assert data["pending"]["param"] == "context" and data["pending"]["from"] == DEMO_CONTEXT
    assert "run with --auto to apply" in done.stderr
    # The record reopens through the same command, and exports.
    shown = subprocess.run(
        [sys.executable, "-m", "vramtui", "wizard", data["record"], "--export", str(tmp_path / "r.csv")],
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert shown.returncode == 1 and "| step |" in shown.stdout
    assert (tmp_path / "r.csv").read_text().startswith("step,param,from,to,why,outcome")


def test_stress_check_on_the_working_profile(demo_cache: Path) -> None:
    profile = demo_profile(demo_cache).with_param("context", 2048)
    result = stress_check(profile, requests=3, input_tokens=600)
    assert result.answered == 3 and not result.failures
    assert len(result.floors_mib) == 3 and all(v > 50 for v in result.floors_mib)
    assert result.peak_mib >= max(result.floors_mib) * 0.5
    assert result.ok == (not result.rising)
    assert not _servers_of(profile.model)


def test_a_saved_request_longer_than_the_context_is_replayed_for_real(
    demo_cache: Path, tmp_path: Path
) -> None:
    profile = demo_profile(demo_cache).with_param("context", 1024)
    saved = {"messages": [{"role": "user", "content": "x" * 3000}], "max_tokens": 4}  # byte tokens: > 1024
    result = Wizard(profile, record_path=tmp_path / "replay.jsonl", auto=True, replay=saved).run(max_steps=3)
    first = result.steps[0].observation
    assert first is not None and first.ready and first.smoke_ok and first.replay_ok is False
    assert not result.success and len(result.steps) == 1  # no memory ladder for a too-long request
    assert "context" in result.reason and "raise context" in result.advice[0]
