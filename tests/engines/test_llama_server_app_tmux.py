"""`vramtui run PROFILE` in a real terminal (tmux) on a real llama-server that vramtui launches itself
(the profile names the binary by `program =`): the log pane's stage bar reaches `ready`, and quitting
with `q` (then `y`: stop it) leaves no llama-server behind. The diagnosis block also puts fit's printed
projection beside vramtui's estimate."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

pytestmark = pytest.mark.engine

WIDTH, HEIGHT = 160, 45
REPO = Path(__file__).resolve().parents[2]
SOCKET = f"vramtui-run-{os.getpid()}"  # a tmux server of our own: another one's environment is not ours
READY_BAR = "✔ download › ✔ load weights › ✔ kv cache › ✔ ready"  # the log pane's stage strip


def _tmux(*args: str) -> str:
    argv = ["tmux", "-L", SOCKET, *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=20, check=False).stdout


def _wait_for(session: str, *texts: str, timeout: float = 120) -> str:
    deadline = time.monotonic() + timeout
    screen = ""
    while time.monotonic() < deadline:
        screen = _tmux("capture-pane", "-p", "-t", session)
        if all(text in screen for text in texts):
            return screen
        time.sleep(0.5)
    pytest.fail(f"never showed {texts}:\n{screen}")


def _servers_of(model: Path) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            if str(model) in " ".join(proc.info["cmdline"] or []) and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except psutil.Error:
            continue
    return found


def _profile(folder: Path, binary: Path, model: Path) -> Path:
    path = folder / "llama-server.toml"
    path.write_text(
        "\n".join(
            [
                'backend = "llama.cpp"',
                f"program = {str(binary)!r}",
                f"model = {str(model)!r}",
                "port = 0",
                "ready_timeout = 120",
                "[params]",
                "context = 2048",
                "parallel = 1",
                "",
            ]
        )
    )
    return path


def test_run_profile_in_tmux_reaches_ready_and_q_leaves_no_server(
    llama_server_bin: Path, tiny_gguf: Path, tmp_path: Path
) -> None:
    if shutil.which("tmux") is None:
        pytest.skip("no tmux")
    model = Path(shutil.copy(tiny_gguf, tmp_path / "tmux-run.gguf"))  # its own path finds its server
    profile = _profile(tmp_path, llama_server_bin, model)
    session = f"vramtui-run-{os.getpid()}"
    app = shlex.join([sys.executable, "-m", "vramtui", "run", str(profile)])
    done = tmp_path / "app-exited"
    path = shlex.quote(os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    # COLUMNS/LINES from the test's environment would override the terminal's own size.
    command = (
        f"cd {shlex.quote(str(REPO))} && unset COLUMNS LINES && PYTHONPATH={path} {app}; "
        f"echo $? > {shlex.quote(str(done))}"
    )
    _tmux("new-session", "-d", "-s", session, "-x", str(WIDTH), "-y", str(HEIGHT), command)
    try:
        screen = _wait_for(session, READY_BAR, "NO FAILURE", "reached ready")
        assert "(llama.cpp)" in screen  # the log read as llama-server's
        # vramtui asked for the verbosity that prints fit's lines: its projection beside the estimate
        assert re.search(r"fit projected \d+ MiB host; vramtui estimates \d+ MiB", screen), screen
        servers = _servers_of(model)
        assert servers, "no llama-server of this profile's model is running"
        assert any(str(llama_server_bin) in " ".join(p.cmdline()) for p in servers)  # `program =` ran
        _tmux("send-keys", "-t", session, "q")
        _wait_for(session, "Stop it and quit?", timeout=20)
        _tmux("send-keys", "-t", session, "y")
        deadline = time.monotonic() + 30
        while not done.exists() and time.monotonic() < deadline:
            time.sleep(0.3)
        assert done.is_file() and done.read_text().strip() == "0"
        deadline = time.monotonic() + 10
        while _servers_of(model) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _servers_of(model), "a llama-server outlived the app"
    finally:
        _tmux("kill-server")
        for proc in _servers_of(model):  # never leave one behind, even when an assertion failed
            proc.kill()
