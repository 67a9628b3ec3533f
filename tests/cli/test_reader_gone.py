"""A reader that leaves early (`vramtui check p.toml | head -3`): the command runs on to its own verdict
and exits with it. QA 9: `check` stopped at the broken pipe, mid-run, and exited 0 where its verdict
was 1; `diagnose` and `estimate` kept theirs only because they had settled before printing."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from vramtui.cli.common import ReaderGone


def test_writes_after_the_reader_left_go_nowhere_and_raise_nothing() -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)
    out = ReaderGone(os.fdopen(write_end, "w", buffering=1))
    out.write("first line\n")  # the pipe is broken: no BrokenPipeError reaches the command
    out.flush()
    assert out.broken
    assert out.write("and more\n" * 100) == len("and more\n" * 100)


def test_a_verdict_settled_after_the_reader_left_is_still_the_exit_status(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a command that prints as it goes and settles its verdict last, as `check` does while its server runs
    import vramtui.cli.diagnose as command
    from vramtui.cli import main

    finished = []

    def run(_args: object) -> int:
        for i in range(2000):
            print(f"progress line {i}")
        finished.append(True)
        return 1

    monkeypatch.setattr(command, "run", run)
    read_end, write_end = os.pipe()
    os.close(read_end)
    monkeypatch.setattr(sys, "stdout", os.fdopen(write_end, "w", buffering=1))
    assert main(["diagnose", str(tmp_path / "any.log")]) == 1
    assert finished  # it ran to its end
