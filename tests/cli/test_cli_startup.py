"""`vramtui --help` and every subcommand's help stay light: no torch, transformers or Textual import."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from vramtui.cli import COMMANDS

HEAVY = ("torch", "transformers", "textual", "llama_cpp")

PROBE = """
import json, sys
from vramtui.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
heavy = sorted(m for m in sys.modules if m.split('.')[0] in {heavy!r})
print(json.dumps(heavy), file=sys.stderr)
"""


def _heavy_modules_after(*argv: str) -> list[str]:
    probe = PROBE.replace("{heavy!r}", repr(set(HEAVY)))
    proc = subprocess.run(
        [sys.executable, "-c", probe, *argv], capture_output=True, text=True, timeout=60, check=False
    )
    last_line = proc.stderr.strip().splitlines()[-1]
    return json.loads(last_line)


@pytest.mark.parametrize("argv", [["--help"], *[[name, "--help"] for name in COMMANDS]])
def test_help_imports_nothing_heavy(argv: list[str]) -> None:
    assert _heavy_modules_after(*argv) == []


def test_every_subcommand_is_registered() -> None:
    from vramtui.cli import build_parser

    parser = build_parser()
    subparsers = next(a for a in parser._actions if a.dest == "command")
    assert set(subparsers.choices) == set(COMMANDS)


def test_unknown_flag_value_is_one_line_not_a_traceback() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "vramtui", "estimate", "--params", "lots", "--gpu-mem", "24GiB"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
