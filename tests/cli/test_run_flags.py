"""Numbers that make no sense, for the wizard's run and the diagnosis, are one line and exit status 2
before anything is launched (QA: `demo --auto --max-steps -3` ran the demo and printed "stopped after -3
changes"; `--export` to a missing folder failed only after the whole run; `diagnose --exit-code
99999999999` blamed a line past the end of the file)."""

from __future__ import annotations

from pathlib import Path

import pytest

from vramtui.cli import main


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--max-steps", "-3"], "--max-steps"),
        (["--stress", "-1"], "--stress"),
        (["--stress", "1", "--stress-tokens", "0"], "--stress-tokens"),
        (["--export", "/nonexistent/dir/x.md"], "no folder"),
        (["--export", "steps.txt"], ".md (Markdown) or .csv"),
    ],
)
def test_the_demos_nonsense_numbers_stop_before_it_launches(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    assert main(["demo", "--auto", *argv]) == 2
    captured = capsys.readouterr()
    assert message in captured.err and "recording to" not in captured.out + captured.err


@pytest.mark.parametrize(
    ("argv", "message"),
    [(["--save", "/"], "is a folder"), (["--save", "/nonexistent/dir/p.toml"], "no folder")],
)
def test_a_save_target_that_cannot_be_written_stops_before_the_wizard_launches(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    """QA: `wizard PROFILE --auto --save FOLDER` ran the whole wizard, then an internal error."""
    assert main(["wizard", "never-read.toml", "--auto", *argv]) == 2
    captured = capsys.readouterr()
    assert message in captured.err and "recording to" not in captured.out + captured.err


def test_an_exit_status_out_of_range_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "server.log"
    log.write_text("main: loading model\n")
    assert main(["diagnose", str(log), "--exit-code", "99999999999"]) == 2
    assert "--exit-code" in capsys.readouterr().err
    assert main(["diagnose", str(log), "--exit-code", "-9"]) in (1, 3)  # a signal's -N is taken


def test_a_recorded_session_shown_again_checks_its_export_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # `wizard RECORD.jsonl --export steps.txt` wrote Markdown into a .txt
    record = tmp_path / "session.jsonl"
    assert main(["wizard", str(record), "--export", str(tmp_path / "steps.txt")]) == 2
    assert ".md (Markdown) or .csv" in capsys.readouterr().err
    assert not (tmp_path / "steps.txt").exists()


def test_a_budget_is_checked_where_it_would_be_ignored(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # QA: `wizard PROFILE --budget 12` and `attach PID --text --budget 12` ran, the budget unread; a
    # profile's wizard and check now take it in place of memory_budget (QA 31 W7), checked before a launch
    profile = tmp_path / "p.toml"
    profile.write_text('backend = "llama.cpp"\nmodel = "/m.gguf"\n')
    assert main(["wizard", str(profile), "--budget", "12", "--auto"]) == 2
    assert "--budget: '12' has no unit" in capsys.readouterr().err
    assert main(["check", str(profile), "--budget", "0MiB"]) == 2
    assert "--budget: '0MiB' is no budget" in capsys.readouterr().err
    assert main(["wizard", str(tmp_path / "session.jsonl"), "--budget", "12GiB"]) == 2
    assert "--budget is for a PROFILE or --attach" in capsys.readouterr().err
    assert main(["attach", "1", "--text", "--budget", "12"]) == 2
    assert "'12' has no unit" in capsys.readouterr().err


def test_the_profile_wizards_flags_say_one_thing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # QA: --max-steps 0 said "at least 1" and -1 "must be 0 or more"; --keep bogus was accepted and unread
    profile = tmp_path / "p.toml"
    profile.write_text('backend = "llama.cpp"\nmodel = "/m.gguf"\n')
    for steps in ("0", "-1"):
        assert main(["wizard", str(profile), "--max-steps", steps]) == 2
        assert f"--max-steps: at least 1, not {steps}" in capsys.readouterr().err
    assert main(["wizard", str(profile), "--keep", "bogus"]) == 2
    assert "--keep is for --attach" in capsys.readouterr().err


def test_a_log_given_to_the_wizard_gets_the_goal_that_reads_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "server.log"
    log.write_text("load_tensors: offloaded 20/33 layers to GPU\n")
    assert main(["wizard", str(log)]) == 2  # was a TOML parse error
    assert "--goal on-gpu" in capsys.readouterr().err
