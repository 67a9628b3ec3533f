"""Issue 22 defect 26: the CLI's text output says how a launch ended in words (`failed at load weights:
port already in use`), not in the record's codes (`first_run`, `port_in_use`, `stopped at ?`); the JSON
keeps the codes. A port held by another socket fails a real launch at once: no engine needed."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from placeholder_files import EMPTY_GGUF

from vramtui.core.logs.stages import STAGES
from vramtui.tui.words import CAUSE_WORDS, FAILURE_WORDS, FIGURE_WORDS, OUTCOME_WORDS

CODES = sorted(
    code for code in {*FAILURE_WORDS, *CAUSE_WORDS, *OUTCOME_WORDS, *FIGURE_WORDS, *STAGES} if "_" in code
)


def vramtui(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vramtui", *args], capture_output=True, text=True, timeout=120, check=False
    )


@pytest.fixture
def busy_profile(tmp_path: Path) -> Iterator[Path]:
    """A profile whose port another socket holds: the launch fails with port_in_use."""
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        (tmp_path / "m.gguf").write_bytes(EMPTY_GGUF)
        profile = tmp_path / "busy.toml"
        port = busy.getsockname()[1]
        profile.write_text(f'backend = "llama-cpp-python"\nmodel = "m.gguf"\nport = {port}\n')
        yield profile


def test_wizard_text_says_how_the_first_launch_ended_in_words(busy_profile: Path, tmp_path: Path) -> None:
    record = tmp_path / "session.jsonl"
    proc = vramtui("wizard", str(busy_profile), "--auto", "--record", str(record))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    text = proc.stdout
    # vramtui found the port held before starting anything (QA 36 F10c: not "failed at launch")
    assert "before launch: port already in use (nothing was launched)" in text, text
    assert [code for code in CODES if code in text] == [] and " at ?" not in text, text
    # the record and --json keep the codes scripts read
    rows = [json.loads(line) for line in record.read_text().splitlines() if line.strip()]
    step = next(row for row in rows if row.get("type") == "step")
    assert step["outcome"] == "first_run" and step["failure"] == "port_in_use"


def test_check_text_says_the_failure_in_words(busy_profile: Path, tmp_path: Path) -> None:
    proc = vramtui("check", str(busy_profile), "--log-dir", str(tmp_path / "runs"))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "failure: port already in use" in proc.stdout, proc.stdout
    assert [code for code in CODES if code in proc.stdout] == [], proc.stdout


def test_a_first_launch_that_died_before_the_model_says_start_up_as_diagnose_does() -> None:
    """QA 24 F10: under a budget too small to start, the wizard's first line read "failed at load weights"
    beside advice that says it died before reading any weights. A step's record has the diagnosis' cause
    (here the real llama-server run's), and its words say start-up, as `diagnose` and `check` do."""
    from vramtui.cli.wizard import step_status
    from vramtui.core.logs.diagnose import diagnose_file

    log = Path(__file__).resolve().parents[1] / "data" / "logs" / "llama-server-budget-60-start.log"
    diagnosis = diagnose_file(log, kernel_log=lambda: None)
    first = {
        "outcome": "first_run",
        "failure_stage": "load_weights",
        "failure": diagnosis.failure,
        "cause": diagnosis.cause,
    }
    assert step_status(first) == "failed at start-up, before the model was read: host out of memory"
    assert step_status({**first, "cause": None}).startswith("failed at load weights")
