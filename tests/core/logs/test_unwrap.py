"""QA 27 N1: a log copied from an 80-column terminal (tmux, screen, a Windows console) has every longer
line cut at column 80. `n_ctx_train = 13107` / `2` read as a context of 13107, and an assert split in two
was no error at all: the verdict went from host out of memory to "incomplete". Real logs made here, cut as
a terminal cuts them, read as the clean ones do, with the file's own line numbers."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from vramtui.core.logs.diagnose import diagnose_file, diagnose_text
from vramtui.core.logs.unwrap import unwrap, wrap_width

LOGS = Path(__file__).resolve().parents[2] / "data" / "logs"
REAL = (
    "llama-server-budget-200-ggml-init-assert.log",
    "llama-server-budget-400-np4-kv.log",
    "llama-cpp-python-budget-250-numpy-array-memory.log",
    "transformers-budget-850-loader-threads.log",
    "llama-server-healthy-stopped-by-vramtui.log",
)


def _wrapped(text: str, width: int = 80, stamps: bool = True) -> str:
    """The text as a terminal of `width` columns shows it (each line cut into pieces of `width`)."""
    out = []
    for line in text.split("\n"):
        line = line if stamps else line[24:]  # vramtui's own time stamps: 24 characters
        out.extend(line[i : i + width] for i in range(0, max(len(line), 1), width))
    return "\n".join(out)


@pytest.mark.parametrize("name", REAL)
@pytest.mark.parametrize("stamps", [True, False])
def test_a_wrapped_log_reads_as_the_clean_one(name: str, stamps: bool, tmp_path: Path) -> None:
    text = (LOGS / name).read_text()
    clean = diagnose_text(text if stamps else "\n".join(line[24:] for line in text.split("\n")))
    wrapped_text = _wrapped(text, stamps=stamps)
    path = tmp_path / "wrapped.log"
    path.write_text(wrapped_text)
    for wrapped in (diagnose_text(wrapped_text), diagnose_file(path)):
        assert wrapped.wrapped_at == 80
        # the file's lines (a final newline ends the last one), not the joined ones
        assert wrapped.lines == len(wrapped_text.rstrip("\n").split("\n"))
        assert (wrapped.failure, wrapped.failure_stage, wrapped.cause, wrapped.stage) == (
            clean.failure, clean.failure_stage, clean.cause, clean.stage,
        )  # fmt: skip
        assert wrapped.engine_figures == clean.engine_figures  # no number cut by the wrap
        if clean.first_error_line:  # the file's own line, where the clean first line starts
            cut = wrapped_text.split("\n")[wrapped.first_error_line - 1]
            assert clean.first_error_text and clean.first_error_text.startswith(cut.rstrip())


def test_a_log_of_fixed_width_records_is_not_taken_for_a_wrap() -> None:
    rows = [
        f'[GIN] 2025/01/0{i % 9 + 1} - 10:00:0{i % 10} | 200 |      1.2{i % 10}ms |       127.0.0.1 | POST     "/api/chat"'
        for i in range(40)
    ]
    assert wrap_width(rows) is None  # each row is a record of its own, however alike in width
    assert wrap_width(["short", "lines"] * 30) is None


def test_unwrap_joins_a_line_cut_twice_and_keeps_where_each_starts() -> None:
    width = 60
    long = "llama_model_load: error loading model: " + "x" * 100  # cut twice
    lines = ["load: start", long[:60], long[60:120], long[120:], "main: exiting"]
    joined, starts = unwrap(lines, width, by_stamp=False)
    assert joined == ["load: start", long, "main: exiting"] and starts == [0, 1, 4]


def test_the_cli_says_the_log_was_read_joined(tmp_path: Path) -> None:
    import subprocess

    path = tmp_path / "wrapped.log"
    path.write_text(_wrapped((LOGS / "llama-server-budget-400-np4-kv.log").read_text()))
    done = subprocess.run(
        [sys.executable, "-m", "vramtui", "diagnose", str(path)], capture_output=True, text=True, timeout=60
    )
    assert "(hard-wrapped at 80 columns: read with its lines joined)" in done.stdout.splitlines()[0]
