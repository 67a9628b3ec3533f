"""Launching the real llama-server (issue 13 #5/#6, issue 14): what vramtui says about its own stops,
a busy port and a saved profile. Skipped where no llama-server binary was built."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest
from test_llama_server_flags import BINARY  # tests/conftest.py puts core/backends on the path

from vramtui.core.launch import procs
from vramtui.core.launch.launcher import PORT_IN_USE, STOPPED_BY_VRAMTUI, ModelServer, run_check
from vramtui.core.launch.profile import Profile

needs_binary = pytest.mark.skipif(BINARY is None, reason="no llama-server binary built here")


def _profile(model: Path, **changes: object) -> Profile:
    return Profile(backend="llama.cpp", model=str(model), port=0, program=str(BINARY), **changes)  # type: ignore[arg-type]


@needs_binary
@pytest.mark.engine
def test_our_own_stop_is_stopped_by_vramtui_not_an_oom_kill(tiny_gguf: Path, tmp_path: Path) -> None:
    # A stop before ready with a grace too short for a polite exit: the group kill is ours (SIGKILL).
    server = ModelServer(_profile(tiny_gguf, params={"context": 512}), log_dir=tmp_path)
    server.start()
    pid = server.pid
    time.sleep(0.3)
    server.stop(grace_s=0.0)
    assert pid is not None and server.exit_code is not None and not server.ready
    assert server.failure == STOPPED_BY_VRAMTUI
    diagnosis = server.diagnosis()
    assert diagnosis.failure == STOPPED_BY_VRAMTUI and diagnosis.failure != "host_oom_killed"
    assert "stopped by vramtui" in diagnosis.first_error_text
    assert not procs.group_members(pid)


@needs_binary
@pytest.mark.engine
def test_a_kill_by_the_exit_handlers_is_ours_too(tiny_gguf: Path, tmp_path: Path) -> None:
    server = ModelServer(_profile(tiny_gguf, params={"context": 512}), log_dir=tmp_path)
    server.start()
    time.sleep(0.3)
    procs.kill_all_groups()  # what SIGHUP / SIGTERM to vramtui does: the server is not told stop()
    assert not server.wait_ready(10)
    assert server.failure == STOPPED_BY_VRAMTUI and server.diagnosis().failure == STOPPED_BY_VRAMTUI
    server.stop()


@needs_binary
@pytest.mark.engine
def test_a_busy_port_is_the_verdict_the_log_pane_gets(tiny_gguf: Path, tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        profile = _profile(tiny_gguf).with_changes(port=port)
        server = ModelServer(profile, log_dir=tmp_path)
        with pytest.raises(Exception, match="already in use"):
            server.start()
        diagnosis = server.diagnosis()  # what the TUI's tail hands the log pane
        result = run_check(profile, log_dir=tmp_path)
    assert diagnosis.failed and diagnosis.failure == PORT_IN_USE and str(port) in diagnosis.first_error_text
    assert result.failure == result.diagnosis.failure == PORT_IN_USE


@needs_binary
@pytest.mark.engine
def test_check_on_the_real_binary_answers(tiny_gguf: Path, tmp_path: Path) -> None:
    result = run_check(_profile(tiny_gguf, params={"context": 512}), log_dir=tmp_path, ready_timeout_s=60)
    assert result.ok, result.to_dict()
    assert result.command[0] == str(BINARY) and result.failure is None
    assert result.released


@needs_binary
@pytest.mark.engine
def test_wizard_save_writes_the_profiles_own_port(tiny_gguf: Path, tmp_path: Path) -> None:
    (tmp_path / "m.gguf").symlink_to(tiny_gguf)
    path = tmp_path / "p.toml"
    path.write_text(
        f'backend = "llama.cpp"\nmodel = "m.gguf"\nport = 0\nprogram = "{BINARY}"\n[params]\ncontext = 512\n'
    )
    saved = tmp_path / "saved.toml"
    done = subprocess.run(
        [sys.executable, "-m", "vramtui", "wizard", str(path), "--auto", "--save", str(saved)],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    data = tomllib.loads(saved.read_text())
    assert data["port"] == 0 and data["program"] == str(BINARY)


def test_a_process_that_exits_on_its_own_was_not_signalled_by_us() -> None:
    # signalled_by_us only names groups vramtui signalled: a process that exits on its own is not one.
    proc = subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=True)
    proc.wait()
    assert not procs.signalled_by_us(proc.pid)
