"""Issue 13 #14: a wizard session stopped mid-step still has a whole record: the step's log, an end line."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from placeholder_files import EMPTY_GGUF

from vramtui.core.launch.launcher import ModelServer
from vramtui.core.launch.profile import Profile
from vramtui.core.wizard.steprecord import open_session
from vramtui.core.wizard.wizard import Wizard

# A server that prints a line and never becomes ready: the step is still running when we interrupt.

SLOW_SERVER = "#!/bin/sh\necho 'llama_model_loader: loaded meta data'\nexec sleep 60\n"


def slow_profile(tmp_path: Path) -> Path:
    program = tmp_path / "llama-server"
    program.write_text(SLOW_SERVER)
    program.chmod(0o755)
    (tmp_path / "m.gguf").write_bytes(EMPTY_GGUF)
    path = tmp_path / "p.toml"
    path.write_text(
        f'backend = "llama.cpp"\nmodel = "m.gguf"\nport = 0\nprogram = "{program}"\nready_timeout = 60\n'
    )
    return path


def _lines(record: Path) -> list[dict[str, object]]:
    if not record.is_file():
        return []
    return [json.loads(line) for line in record.read_text().splitlines() if line.strip()]


_STARTED: list[subprocess.Popen[str]] = []


@pytest.fixture(autouse=True)
def _no_wizard_left_running() -> Iterator[None]:
    """A wizard a failed test left behind (its communicate() timed out) is killed, never left running."""
    yield
    while _STARTED:
        proc = _STARTED.pop()
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=30)


def _wizard_mid_attempt(tmp_path: Path, record: Path, *flags: str) -> subprocess.Popen[str]:
    """`vramtui wizard --auto` on the slow profile, once its first attempt's process is recorded."""
    command = [sys.executable, "-m", "vramtui", "wizard", str(slow_profile(tmp_path)), "--auto", *flags]
    proc = subprocess.Popen(
        [*command, "--record", str(record)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    _STARTED.append(proc)
    deadline = time.monotonic() + 30
    while not any(e["type"] == "process" for e in _lines(record)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return proc


def test_ctrl_c_mid_step_records_the_steps_log(tmp_path: Path) -> None:
    record, export = tmp_path / "w.jsonl", tmp_path / "steps.md"
    proc = _wizard_mid_attempt(tmp_path, record, "--export", str(export))
    time.sleep(0.3)
    os.kill(proc.pid, signal.SIGINT)  # what ctrl-c in the terminal sends vramtui
    proc.communicate(timeout=30)
    assert proc.returncode == 130
    end = _lines(record)[-1]
    assert end["type"] == "end" and end["reason"] == "interrupted" and end["interrupted_step"] == 0
    log_file = Path(str(end["log_file"]))
    assert log_file.is_file() and "llama_model_loader" in log_file.read_text()
    session = open_session(record)
    assert session.finished and session.interrupted[0]["log_file"] == str(log_file)
    # the --export asked for is written from that record too (QA: ctrl-c left none)
    assert export.is_file() and "- result: not working yet" in export.read_text()


def test_quitting_mid_attempt_writes_the_end_line(tmp_path: Path) -> None:
    # What the TUI does on quit: the attempt's server is stopped, then the wizard abandons the session.
    from vramtui.core.launch.profile import load_launch_profile

    profile: Profile = load_launch_profile(slow_profile(tmp_path))
    record = tmp_path / "tui.jsonl"
    wizard = Wizard(profile, record_path=record)
    server = ModelServer(profile, log_dir=tmp_path / "runs")
    server.start()
    wizard.attempt_started(server)
    server.stop(grace_s=1.0)
    wizard.abandon("quit during an attempt")
    session = open_session(record)
    assert session.finished and session.end is not None
    assert session.end["reason"] == "quit during an attempt" and session.end["log_file"] == str(
        server.log_file
    )
    wizard.abandon("again")  # a second call (the wizard thread's own finally) adds nothing
    assert open_session(record).end == session.end


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGTERM], ids=["SIGHUP", "SIGTERM"])
def test_a_hangup_mid_attempt_still_ends_the_record(tmp_path: Path, sig: signal.Signals) -> None:
    """Issue 22 #28: the terminal closed (SIGHUP) or a stop (SIGTERM) during an attempt: the server is
    stopped, the record gets its end line naming the signal and the step's log, and vramtui still dies of
    that signal, as its caller expects."""
    record = tmp_path / "w.jsonl"
    proc = _wizard_mid_attempt(tmp_path, record)
    server_pid = next(int(str(e["pid"])) for e in _lines(record) if e["type"] == "process")
    os.kill(proc.pid, sig)
    proc.communicate(timeout=30)
    assert proc.returncode == -sig
    end = _lines(record)[-1]
    assert end["type"] == "end" and end["success"] is False and end["interrupted_step"] == 0
    assert end["reason"] == f"interrupted by {sig.name}"
    assert Path(str(end["log_file"])).is_file()
    assert open_session(record).finished
    assert not psutil.pid_exists(server_pid) or psutil.Process(server_pid).status() == psutil.STATUS_ZOMBIE
