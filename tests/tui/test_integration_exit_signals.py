"""`vramtui run PROFILE` in a real terminal: a closed terminal (SIGHUP) or a kill (SIGTERM) stops the
model server it started, gracefully first, and leaves no process of the server's group behind."""

from __future__ import annotations

import fcntl
import os
import pty
import shutil
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

import psutil
import pytest

pytestmark = pytest.mark.engine

PROFILES = Path(__file__).resolve().parents[1] / "data" / "profiles"


def _drain(fd: int, sink: bytearray) -> None:
    """Read the terminal's output so the app never blocks on a full pty buffer."""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            return
        if not chunk:
            return
        sink.extend(chunk)


def _server_of(app_pid: int) -> psutil.Process | None:
    """The model server the app started: its child that listens on a TCP port."""
    try:
        children = psutil.Process(app_pid).children(recursive=True)
    except psutil.Error:
        return None
    for child in children:
        try:
            if any(c.status == psutil.CONN_LISTEN for c in child.net_connections(kind="tcp")):
                return child
        except psutil.Error:
            continue
    return None


def _group_members(pgid: int) -> list[int]:
    members = []
    for proc in psutil.process_iter(["pid", "status"]):
        try:
            if proc.info["status"] != psutil.STATUS_ZOMBIE and os.getpgid(proc.pid) == pgid:
                members.append(proc.pid)
        except (ProcessLookupError, psutil.Error):
            continue
    return members


# Started as a shell under `nohup` starts it: SIGHUP inherited as ignored (exec keeps SIG_IGN, and the pid).
IGNORING_SIGHUP = (
    "import os, signal, sys; signal.signal(signal.SIGHUP, signal.SIG_IGN); "
    "os.execv(sys.executable, [sys.executable, '-m', 'vramtui', 'run', sys.argv[1]])"
)


@pytest.mark.parametrize(
    ("signum", "ignored_before"),
    [(signal.SIGHUP, False), (signal.SIGHUP, True), (signal.SIGTERM, False), (signal.SIGINT, False)],
    ids=["SIGHUP", "SIGHUP-inherited-ignored", "SIGTERM", "SIGINT"],
)
def test_signal_to_the_app_stops_the_server_it_started(
    signum: int, ignored_before: bool, tiny_gguf: Path, tmp_path: Path
) -> None:
    """A closed terminal ends the app even when it inherited SIGHUP ignored (a test suite or a shell
    under nohup): the exit handlers alone stopped the servers and left the app running (issue 13, 16)."""
    folder = tmp_path / "profile"
    folder.mkdir()
    shutil.copy(tiny_gguf, folder / "tiny.gguf")
    profile = shutil.copy(PROFILES / "tiny-ok.toml", folder / "tiny-ok.toml")
    env = dict(os.environ, TERM="xterm-256color", COLUMNS="100", LINES="30")
    for name in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME"):
        env[name] = str(tmp_path / name.lower())
    env["VRAMTUI_CONFIG_DIR"] = str(tmp_path / "config")
    env.pop("VRAMTUI_DATA_DIR", None)  # the run's log lands where a user's would: the XDG data dir

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
    argv = [sys.executable, "-m", "vramtui", "run", str(profile)]
    if ignored_before:
        argv = [sys.executable, "-c", IGNORING_SIGHUP, str(profile)]
    app = subprocess.Popen(
        argv,
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=env,
        start_new_session=True,  # its own controlling terminal: the pty, as in a real session
        close_fds=True,
    )
    os.close(slave)
    screen = bytearray()
    reader = threading.Thread(target=_drain, args=(master, screen), daemon=True)
    reader.start()
    server: psutil.Process | None = None
    try:
        deadline = time.monotonic() + 90
        while server is None and time.monotonic() < deadline and app.poll() is None:
            time.sleep(0.2)
            server = _server_of(app.pid)
        assert server is not None, "the server never came up: " + screen[-2000:].decode("utf-8", "replace")
        server_pgid = os.getpgid(server.pid)
        assert server_pgid != os.getpgid(app.pid)  # its own group: only vramtui's handler reaches it

        seen = len(screen)
        app.send_signal(signum)
        returncode = app.wait(timeout=30)
        if signum in (signal.SIGTERM, signal.SIGINT):
            # A kill from another shell (`kill -INT` too, QA: it did nothing): the servers go, then the
            # app leaves the screen as the shell had it (out of the alternate screen) and exits 128 + N.
            assert returncode == 128 + signum
            reader.join(timeout=5)
            assert b"\x1b[?1049l" in bytes(screen[seen:]), "the terminal was left in the app's screen"
        else:
            # The terminal is gone: the handler stops the servers, then vramtui dies of the signal.
            assert returncode == -signum

        deadline = time.monotonic() + 10
        while _group_members(server_pgid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _group_members(server_pgid) == [], "a process of the model server outlived vramtui"
        # Stopped gracefully by vramtui (SIGTERM to its group), not only by the kernel's parent-death
        # SIGKILL: uvicorn logged its shutdown into the run's log before vramtui went.
        run_logs = list((tmp_path / "xdg_data_home").rglob("*.log"))
        assert run_logs, "the launcher kept no log of the run"
        text = "\n".join(path.read_text(errors="replace") for path in run_logs)
        assert "Shutting down" in text or "Finished server process" in text, text[-1500:]
    finally:
        if app.poll() is None:
            app.kill()
            app.wait(timeout=10)
        if server is not None and server.is_running():
            server.kill()
        os.close(master)
