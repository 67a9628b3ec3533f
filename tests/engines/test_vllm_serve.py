"""vramtui against a real vLLM (its CPU build, its three processes: APIServer, EngineCore, Worker):

- a check: up, the smallest request answered, a saved request longer than --max-model-len reported with
  the client's own error (vLLM's log says only "400 Bad Request"), the whole tree's memory, nothing left;
- `vramtui run` in a real terminal (tmux): the stage strip reaches ready, the memory pane follows every
  process of the tree; `attach` by URL and by PID reads the server's settings back (the context from its
  /v1/models); then the kernel's way of ending the API server (SIGKILL): the app says so and its engine
  and worker do not outlive it.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from vllm_support import vllm_processes, vllm_profile

from vramtui.core.attach.watch import attach
from vramtui.core.demo.tinyhf import write_tiny_hf
from vramtui.core.launch.launcher import run_check
from vramtui.core.logs.diagnose import diagnose_file

pytestmark = [pytest.mark.engine, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
WIDTH, HEIGHT = 160, 45
SOCKET = f"vramtui-vllm-{os.getpid()}"
READY_BAR = "✔ download › ✔ load weights › ✔ kv cache › ✔ ready"
LONG_REQUEST = {
    "messages": [{"role": "user", "content": "tell me a long story about memory " * 80}],
    "max_tokens": 4,
}


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_hf(tmp_path_factory.mktemp("hf") / "tiny-qwen2")


def test_a_check_answers_measures_the_tree_and_reports_a_too_long_request(
    vllm_program: Path, tiny_model: Path, tmp_path: Path
) -> None:
    profile = vllm_profile(vllm_program, tiny_model, tmp_path, context=256)
    result = run_check(profile, log_dir=tmp_path, replay=LONG_REQUEST)
    assert result.ready and result.smoke is not None and result.smoke.ok, result.to_dict()
    assert result.stage == "inference"
    # the long request: vLLM's own log holds only its "400 Bad Request", read as a request refused for its
    # length (the log engine's weak rule); the client's error says how long
    assert result.replay is not None and result.replay.kind == "context_too_long"
    assert result.failure == "context_too_long" and result.failure_stage == "inference"
    assert "maximum context length is 256 tokens" in result.message
    # the API server, its EngineCore and its Worker: about 2 GiB together (the API server alone is 0.5)
    assert result.resident_mib is not None and result.resident_mib > 1200, result.resident_mib
    assert result.peak_mib is not None and result.peak_mib >= result.resident_mib
    # the estimate bills the whole tree, not the worker alone (QA 9: 561 MiB of runtime against 1.6 GiB)
    from vramtui.core.estimate.estimator import Settings, estimate
    from vramtui.core.estimate.modelinfo import load_model_info

    settings = Settings.from_params(
        profile.params, backend="vllm", device_bytes=psutil.virtual_memory().total
    )
    settings.on_gpu = False
    billed = estimate(load_model_info(str(tiny_model)), settings).total_bytes / 2**20
    assert 0.7 * result.peak_mib <= billed <= 1.3 * result.peak_mib, (billed, result.peak_mib)
    assert result.released is True
    assert not vllm_processes(tiny_model), "a vLLM process was left running"
    saved = diagnose_file(result.log_file)
    # the server came up and served; the request it refused is the failure, at inference
    assert (saved.failure_stage, saved.failure) == ("inference", "context_too_long"), saved.summary


def _tmux(*args: str) -> str:
    argv = ["tmux", "-L", SOCKET, *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=20, check=False).stdout


def _wait_for(session: str, *texts: str, timeout: float = 300) -> str:
    deadline = time.monotonic() + timeout
    screen = ""
    while time.monotonic() < deadline:
        screen = _tmux("capture-pane", "-p", "-t", session)
        if all(text in screen for text in texts):
            return screen
        time.sleep(0.5)
    pytest.fail(f"never showed {texts}:\n{screen}")


def _tree_size(screen: str) -> int:
    """The number of processes the memory pane's "model process" row counts (the left column, whose
    rows may wrap)."""
    left = " ".join(line.split("││")[0].strip("│ ") for line in screen.splitlines())
    found = re.search(r"model process.*?(\d+)\s+process", left)
    return int(found.group(1)) if found else 0


def _api_server(model: Path) -> psutil.Process:
    for proc in vllm_processes(model):
        if str(model) in " ".join(proc.cmdline()) and "serve" in proc.cmdline():
            return proc
    pytest.fail("no vLLM API server for the model")


def _ps_lists_it_as_one_server(server: psutil.Process, tmp_path: Path) -> None:
    """`vramtui ps`: the API server, its engine core and worker are one server, billed from the run log
    the app writes (found by the server's PID), in host RAM (the CPU build)."""
    done = subprocess.run(
        [sys.executable, "-m", "vramtui", "ps", "--json"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    listed = [row for row in json.loads(done.stdout)["servers"] if row["engine"] == "vllm"]
    row = next(row for row in listed if row["pid"] == server.pid)
    assert {child.pid for child in server.children(recursive=True)} <= set(row["pids"])
    assert not any(other["pid"] in row["pids"] for other in listed if other is not row)
    assert row["params"]["kv_cache_memory"] == 256 << 20
    assert row["bill_source"] == "log" and row["log"] is not None and row["log"].startswith(str(tmp_path))
    assert row["bill"]["host"]["kv_cache_bytes"] == 256 << 20  # "Available KV cache memory: 0.25 GiB"
    assert row["host_mib"] > 1200  # three Python processes with torch


def test_run_in_tmux_follows_the_tree_attach_reads_it_and_a_killed_api_server_leaves_nothing(
    vllm_program: Path, tiny_model: Path, tmp_path: Path
) -> None:
    if shutil.which("tmux") is None:
        pytest.skip("no tmux")
    profile = vllm_profile(vllm_program, tiny_model, tmp_path)
    path = profile.save(tmp_path / "vllm.toml")
    app = shlex.join([sys.executable, "-m", "vramtui", "run", str(path)])
    done = tmp_path / "app-exited"
    python_path = shlex.quote(os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    command = (
        f"cd {shlex.quote(str(REPO))} && unset COLUMNS LINES && PYTHONPATH={python_path} "
        f"VRAMTUI_DATA_DIR={shlex.quote(str(tmp_path / 'data'))} {app}; echo $? > {shlex.quote(str(done))}"
    )
    session = f"vramtui-vllm-{os.getpid()}"
    _tmux("new-session", "-d", "-s", session, "-x", str(WIDTH), "-y", str(HEIGHT), command)
    try:
        # the stage strip reads the log; the status line's "ready (pid N)" is the health check's answer
        screen = _wait_for(session, READY_BAR, "(vllm)", ": ready (pid")
        assert "NO FAILURE" in screen or "reached ready" in screen, screen
        # API server, its resource tracker, its engine and worker: the memory pane's row for the model
        assert _tree_size(screen) >= 3, screen
        server = _api_server(tiny_model)
        argv = server.cmdline()
        port = int(argv[argv.index("--port") + 1])
        by_url = attach(f"http://127.0.0.1:{port}/v1", duration_s=1.0).to_dict()
        assert by_url["backend"] == "vllm" and by_url["pid"] == server.pid
        assert by_url["params"]["kv_cache_memory"] == 256 << 20  # read back from its command line
        assert by_url["params_assumed"]["context"] == 4096  # vLLM's /v1/models: what it derived
        by_pid = attach(str(server.pid), duration_s=1.0).to_dict()
        assert by_pid["backend"] == "vllm" and by_pid["url"] == f"http://127.0.0.1:{port}"
        assert by_pid["readings"] is not None
        _ps_lists_it_as_one_server(server, tmp_path)
        os.kill(server.pid, signal.SIGKILL)  # as the kernel's OOM killer ends the largest process
        deadline = time.monotonic() + 60
        while vllm_processes(tiny_model) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not vllm_processes(tiny_model), "vLLM's engine or worker outlived its killed API server"
        screen = _wait_for(session, "SIGKILL", timeout=30)
        _tmux("send-keys", "-t", session, "q")
        deadline = time.monotonic() + 30
        while not done.exists() and time.monotonic() < deadline:
            if "quit?" in _tmux("capture-pane", "-p", "-t", session):
                _tmux("send-keys", "-t", session, "y")  # asked while it still saw the server as running
            time.sleep(0.5)
        assert done.is_file(), _tmux("capture-pane", "-p", "-t", session)
    finally:
        _tmux("kill-server")
        for proc in vllm_processes(tiny_model):  # never leave one behind, even when an assertion failed
            proc.kill()
