"""Issue 13 #5: the app's --replay and --log refuse bad files the way the subcommands do, before the screen opens."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


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


def test_with_no_terminal_the_app_and_run_say_so_in_one_line(tmp_path: Path, tiny_gguf: Path) -> None:
    """QA: `vramtui run PROFILE </dev/null >out` (and the bare app, --log, --replay) stopped with an
    internal error (ScreenStackError) instead of one line, exit 2, naming what to use instead."""
    profile = tmp_path / "p.toml"
    profile.write_text(f'backend = "llama-cpp-python"\nmodel = "{tiny_gguf}"\n[params]\ncontext = 512\n')
    log = tmp_path / "run.log"
    log.write_text("llama_model_loader: loaded meta data\n")
    cases = {
        ("run", str(profile)): f"`vramtui check {profile}`",
        (): "use a subcommand",
        ("--log", str(log)): f"`vramtui diagnose {log}`",
    }
    for args, instead in cases.items():
        done = subprocess.run(
            [sys.executable, "-m", "vramtui", *args],
            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2 and len(lines) == 1, (args, done.stderr)
        assert "needs a terminal" in lines[0] and instead in lines[0], lines


def test_the_apps_check_of_a_replay_stops_at_its_first_readable_row(tmp_path: Path) -> None:
    """The app checks a --replay file before its screen opens, then reads it itself: the check stops at
    the first readable row (a 1 GB recording was read twice), and still refuses a file with none."""
    from vramtui.cli.common import read_replay_csv
    from vramtui.core.errors import VramtuiError

    path = tmp_path / "rec.csv"
    rows = "".join(f"2024/05/01 12:00:{i:02d}.000, {1000 + i} MiB, 24564 MiB\n" for i in range(50))
    path.write_text("timestamp, memory.used [MiB], memory.total [MiB]\nnot, a row\n" + rows)
    checked = read_replay_csv(str(path), check_only=True)
    assert (checked.rows, checked.skipped) == (1, 1)
    assert read_replay_csv(str(path)).rows == 50
    path.write_text("timestamp, memory.used [MiB], memory.total [MiB]\nnot, a row\n")
    with pytest.raises(VramtuiError, match=r"^no readable rows in .*; 1 malformed row"):
        read_replay_csv(str(path), check_only=True)
