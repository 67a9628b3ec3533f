"""Issue 13 #5: the app's --replay and --log refuse bad files the way the subcommands do, before the screen opens."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def vramtui(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vramtui", *args], capture_output=True, text=True, timeout=60, check=False
    )


def test_app_replay_of_a_text_file_is_refused_like_the_replay_command(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("remember to buy milk\nand eggs\n")
    app = vramtui("--replay", str(notes))
    command = vramtui("replay", str(notes))
    assert app.returncode == command.returncode == 2, (app, command)
    assert app.stderr == command.stderr and app.stderr.startswith(f"vramtui: no readable rows in {notes}")
    assert len(app.stderr.strip().splitlines()) == 1


def test_app_log_that_is_a_folder_says_so(tmp_path: Path) -> None:
    done = vramtui("--log", str(tmp_path))
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [f"vramtui: log file is a folder, not a file: {tmp_path}"]


def test_app_log_that_is_missing_says_not_found(tmp_path: Path) -> None:
    done = vramtui("--log", str(tmp_path / "none.log"))
    assert done.returncode == 2 and "not found" in done.stderr
