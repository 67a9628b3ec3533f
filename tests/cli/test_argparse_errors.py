"""A flag argparse itself refuses is bad input like any other: one line on stderr, exit 2."""

from __future__ import annotations

import subprocess
import sys

import pytest

from vramtui.cli import main


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["record", "--interval-ms", "abc"], "vramtui record: argument --interval-ms: invalid int value"),
        (["estimate", "--gpu-mem"], "vramtui estimate: argument --gpu-mem: expected one argument"),
        (["wizard", "--goal", "fastest"], "vramtui wizard: argument --goal: invalid choice: 'fastest'"),
        (["no-such-command"], "vramtui: argument COMMAND: invalid choice: 'no-such-command'"),
    ],
)
def test_a_flag_argparse_refuses_is_one_line_and_exit_2(argv: list[str], says: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "vramtui", *argv], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith(says), proc.stderr
    assert "--help" in proc.stderr  # where the usage is, instead of printing it


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (
            ["estimate", "--params", "8B", "--gpu-mem", "-5GiB"],
            "vramtui: --gpu-mem: not a memory size: '-5GiB'",
        ),
        (["estimate", "--params", "8B", "--ctx", "-32k"], "vramtui: --ctx: a context is positive, not -32k"),
        (
            ["estimate", "--params", "8B", "--gpu-mem", "24GiB,24GiB", "-ts", "-1,2"],
            "vramtui: --tensor-split: '-1,2': proportions must be non-negative",
        ),
    ],
)
def test_a_negative_value_with_a_unit_is_the_flags_own_error(argv: list[str], says: str) -> None:
    # argparse takes "-5GiB" for an option ("expected one argument"); the flag's own check names the value
    proc = subprocess.run(
        [sys.executable, "-m", "vramtui", *argv], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2 and proc.stderr.startswith(says), proc.stderr


def test_joining_leaves_flags_and_plain_values_alone() -> None:
    from vramtui.cli import join_negative_values

    assert join_negative_values(["estimate", "--gpu-mem", "-5GiB", "-5", "-6"]) == [
        "estimate",
        "--gpu-mem=-5GiB",
        "-5",
        "-6",
    ]
    # a short flag's negative list (QA 21 F10: `-ts -1,2` read "expected one argument")
    assert join_negative_values(["estimate", "m.gguf", "-ts", "-1,2"]) == ["estimate", "m.gguf", "-ts=-1,2"]
    assert join_negative_values(["diagnose", "--json", "--since=-5"]) == ["diagnose", "--json", "--since=-5"]


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (
            ["estimate", "--params", "1B", "--ctxx", "4096"],
            "unrecognized arguments: --ctxx; did you mean --ctx?",
        ),
        (["record", "--interval", "100"], "did you mean --interval-ms?"),
        (["--thme", "dark"], "vramtui: unknown option --thme; did you mean --theme?"),
        (["--bogus"], "vramtui: unknown option --bogus (see vramtui --help)"),
    ],
)
def test_a_mistyped_flag_is_one_line_that_names_the_flag_meant(
    capsys: pytest.CaptureFixture[str], argv: list[str], said: str
) -> None:
    """QA 17 F15/F16: profile keys got "did you mean", flags did not, and `vramtui --thme dark` was
    reported as a bad subcommand 'dark'."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert said in err and len(err.strip().splitlines()) == 1, err
