"""`vramtui attach URL` in a real terminal (tmux) on a llama-server the test started itself: the app
shows the server's memory (its process tree), its log file followed in the log pane, and the
parameters from its command line (status line and estimator); quitting leaves the server running."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_attach_cli import _free_port, _start

pytestmark = pytest.mark.engine

WIDTH, HEIGHT = 160, 45
REPO = Path(__file__).resolve().parents[2]
SOCKET = f"vramtui-test-{os.getpid()}"  # a tmux server of our own: another one's environment is not ours


def _tmux(*args: str) -> str:
    argv = ["tmux", "-L", SOCKET, *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=20, check=False).stdout


def _screen(session: str) -> str:
    return _tmux("capture-pane", "-p", "-t", session)


def _wait_for(session: str, *texts: str, timeout: float = 60) -> str:
    deadline = time.monotonic() + timeout
    screen = ""
    while time.monotonic() < deadline:
        screen = _screen(session)
        if all(text in screen for text in texts):
            return screen
        time.sleep(0.5)
    pytest.fail(f"never showed {texts}:\n{screen}")


def test_attached_app_shows_memory_log_and_parameters(
    llama_server_bin: Path, tiny_gguf: Path, tmp_path: Path
) -> None:
    if shutil.which("tmux") is None:
        pytest.skip("no tmux")
    port = _free_port()
    log = tmp_path / "llama-server.log"
    argv = [str(llama_server_bin), "-m", str(tiny_gguf), "--host", "127.0.0.1", "--port", str(port)]
    argv += ["--ctx-size", "1024", "--parallel", "2"]
    session = f"vramtui-attach-{port}"
    for server in _start(argv, log, "/health", port):
        app = shlex.join([sys.executable, "-m", "vramtui", "attach", f"http://127.0.0.1:{port}"])
        done = tmp_path / "app-exited"
        path = shlex.quote(os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
        command = (
            # COLUMNS/LINES from the test's environment would override the terminal's own size.
            f"cd {shlex.quote(str(REPO))} && unset COLUMNS LINES && PYTHONPATH={path} {app}; "
            f"echo $? > {shlex.quote(str(done))}"
        )
        _tmux("new-session", "-d", "-s", session, "-x", str(WIDTH), "-y", str(HEIGHT), command)
        try:
            screen = _wait_for(
                session,
                f"attached: llama.cpp {tiny_gguf.name}, PID {server.pid} (context=1024, parallel=2)",
                "listening on",  # the log file, followed in the log pane
                log.name,
                "model process",  # the memory pane follows the attached process tree
            )
            assert "1 Memory" in screen and "2 Log" in screen
            assert "reached ready" in screen  # its log diagnosed healthy
            estimator = [line for line in screen.splitlines() if "context" in line and "parallel" in line]
            assert any("1024" in line and "2" in line.split("parallel", 1)[1] for line in estimator)
            # A line the server writes now shows up: the log pane follows the file.
            with log.open("a") as out:
                out.write("vramtui-test: a line written after the app opened\n")
            _wait_for(session, "a line written after the app opened")
            _tmux("send-keys", "-t", session, "q")
            deadline = time.monotonic() + 20
            while not done.exists() and time.monotonic() < deadline:
                time.sleep(0.3)
            assert done.read_text().strip() == "0"  # no "a model is running" question: it is not ours
            assert server.poll() is None  # quitting the app leaves the attached server running
        finally:
            _tmux("kill-server")


def test_attached_app_wizard_proposes_and_a_no_leaves_it_running(
    llama_server_bin: Path, tiny_gguf: Path, tmp_path: Path
) -> None:
    """`vramtui attach URL --budget SIZE --keep kv_dtype` in tmux: n proposes one change with the exact
    command; o asks before stopping the server, and n (no) leaves it serving."""
    if shutil.which("tmux") is None:
        pytest.skip("no tmux")
    import psutil

    port = _free_port()
    log = tmp_path / "llama-server.log"
    argv = [str(llama_server_bin), "-m", str(tiny_gguf), "--host", "127.0.0.1", "--port", str(port)]
    argv += ["--ctx-size", "8192", "--parallel", "1"]
    session = f"vramtui-attach-wizard-{port}"
    for server in _start(argv, log, "/health", port):
        budget = int(psutil.Process(server.pid).memory_info().rss / 2**20 - 15)
        app = shlex.join(
            [sys.executable, "-m", "vramtui", "attach", f"http://127.0.0.1:{port}",
             "--budget", f"{budget}MiB", "--keep", "kv_dtype"]
        )  # fmt: skip
        done = tmp_path / "app-exited"
        path = shlex.quote(os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
        command = (
            f"cd {shlex.quote(str(REPO))} && unset COLUMNS LINES && PYTHONPATH={path} {app}; "
            f"echo $? > {shlex.quote(str(done))}"
        )
        _tmux("new-session", "-d", "-s", session, "-x", str(WIDTH), "-y", str(HEIGHT), command)
        try:
            _wait_for(session, "press n to check it runs")
            _tmux("send-keys", "-t", session, "n")
            screen = _wait_for(session, "Next change: context 8192 →", "Restart it yourself (n)", timeout=90)
            assert "--ctx-size" in screen and f"--port {port}" in screen  # the changed command, shown
            _tmux("send-keys", "-t", session, "o")
            _wait_for(session, f"Stop PID {server.pid}, which vramtui did not start")
            _tmux("send-keys", "-t", session, "n")
            _wait_for(session, f"Not taken over: PID {server.pid} runs as it did")
            assert server.poll() is None
            _tmux("send-keys", "-t", session, "q")
            deadline = time.monotonic() + 20
            while not done.exists() and time.monotonic() < deadline:
                time.sleep(0.3)
            assert done.read_text().strip() == "0"
            assert server.poll() is None  # never stopped without a yes
        finally:
            _tmux("kill-server")
