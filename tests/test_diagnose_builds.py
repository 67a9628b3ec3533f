"""The compiled builds of the log diagnosis answer exactly as the pure-Python one does.

Two parts are compiled at install where a C compiler is found: the line scanner (C, _linescan.c) and
diagnose.py itself (mypyc). Here the scanner's table is checked on its own, the blocks it walks are
checked against a plain split, and whole diagnoses of awkward files (lines over the length cap inside
and across reads, CRLF, binary bytes, invalid UTF-8, no final newline, a crash loop with timestamps)
are compared across builds.
"""

from __future__ import annotations

import hashlib
import io
import json
import random
import sys
import types
from dataclasses import asdict
from pathlib import Path

import pytest

import vramtui.core
from vramtui.core import diagnose as installed
from vramtui.core import textclean

from engines import ENGINE_NAMES, LINESCAN, NATIVE, PURE, REQUIRE_COMPILED, engine, missing, small_reads

DATA = Path(__file__).parent / "data"
CUT = textclean.CUT_MARK.encode()


# -- the C table on its own ----------------------------------------------------------------------------
@pytest.fixture
def table_type() -> type:
    if LINESCAN is None:
        missing("the C line scanner")
    return LINESCAN.MaskTable


def _scan_all(
    table: object, block: bytes, quiet: set, start: int = 0, end: int | None = None, number: int = 0
) -> list[tuple[int, bytes, object]]:
    """Every event of block[start:end], the line before it numbered `number`."""
    table.start(block, start, len(block) if end is None else end, number)
    return list(iter(lambda: table.scan(quiet), None))


def test_lines_that_differ_only_in_their_digits_share_an_entry(table_type: type) -> None:
    table = table_type(100, 64)
    table.add(b"step 12 took 3.5 ms", "timing")
    assert table.get(b"step 98 took 7.1 ms") == "timing"
    assert table.get(b"step 987 took 7.1 ms") is None  # another width: another mask
    assert table.get(b"step 12 took 3.5 ms!") is None
    assert table.get(b"") is None
    table.add(b"", "empty")
    assert table.get(b"") == "empty" and len(table) == 2
    table.add(b"step 00 took 0.0 ms", "replaced")
    assert table.get(b"step 12 took 3.5 ms") == "replaced" and len(table) == 2
    table.clear()
    assert len(table) == 0 and table.get(b"") is None


def test_the_table_starts_over_at_its_limit_and_never_stores_an_over_long_line(table_type: type) -> None:
    table = table_type(3, 8)
    for word in (b"a", b"b", b"c"):
        table.add(word, word)
    table.add(b"d", b"d")  # the fourth: the table starts over, as the pure-Python memo does
    assert len(table) == 1 and table.get(b"a") is None and table.get(b"d") == b"d"
    with pytest.raises(ValueError):
        table.add(b"x" * 9, "too long")
    assert table.get(b"x" * 9) is None
    many = table_type(100_000, 64)
    words = [f"{a}{b}{c}".encode() for a in "abcdefghij" for b in "klmnopqrst" for c in "uvwxyzABCD"]
    for number, word in enumerate(words * 5):  # grows past its first size, keeps every mask
        many.add(b"line " + word + b" " + str(number).encode(), number)
    # One mask per word and width of its number: 10 + 90 + 900 words numbered below 1000, all at 4 digits.
    assert len(many) == 2000
    assert many.get(b"line aku 7") == 0 and many.get(b"line jtD 1234") == 4999


def test_scan_skips_quiet_entries_and_counts_every_line(table_type: type) -> None:
    table = table_type(100, 16)
    table.add(b"request 1 done", "request")
    table.add(b"loading", "stage")
    block = b"request 7 done\nloading\nrequest 4 done\n" + b"x" * 20 + b"\nnew line\nrequest 3 done\n"
    events = _scan_all(table, block, {"request"})
    assert events == [(2, b"loading", "stage"), (4, b"x" * 20, None), (5, b"new line", None)]
    assert table.number == 6
    # Nothing quiet: every line comes back, numbered from the start given.
    assert [event[0] for event in _scan_all(table, block, set(), number=100)] == [
        101,
        102,
        103,
        104,
        105,
        106,
    ]
    with pytest.raises(TypeError):
        table.scan(["request"])
    with pytest.raises(ValueError):
        table.start(block, 5, len(block) + 1, 0)
    with pytest.raises(TypeError):
        table.start("text, not bytes", 0, 1, 0)


def test_scan_reads_only_the_range_given(table_type: type) -> None:
    table = table_type(100, 64)
    block = b"before\nfirst\nsecond\nafter"
    start = block.index(b"first")
    end = block.index(b"after")
    assert [event[1] for event in _scan_all(table, block, set(), start, end)] == [b"first", b"second"]


class _DictTable:
    """What the C table does, in a few lines of Python: the model it is checked against."""

    def __init__(self, limit: int, max_line: int) -> None:
        self.limit, self.max_line, self.masks = limit, max_line, {}

    def add(self, line: bytes, entry: object) -> None:
        key = line.translate(bytes.maketrans(b"0123456789", b"0000000000"))
        if len(self.masks) >= self.limit:  # full: start over, as diagnose._remember does
            self.masks.clear()
        self.masks[key] = entry

    def get(self, line: bytes) -> object:
        if len(line) > self.max_line:
            return None
        return self.masks.get(line.translate(bytes.maketrans(b"0123456789", b"0000000000")))

    def scan(self, block: bytes, quiet: set) -> list[tuple[int, bytes, object]]:
        return [
            (number, line, self.get(line))
            for number, line in enumerate(block.split(b"\n")[:-1], 1)
            if self.get(line) is None or self.get(line) not in quiet
        ]


@pytest.mark.parametrize("seed", range(25))
def test_the_table_answers_as_a_dict_of_masks_does(table_type: type, seed: int) -> None:
    rng = random.Random(seed)
    limit, max_line = rng.choice((1, 3, 50)), rng.choice((0, 4, 12))
    table, model = table_type(limit, max_line), _DictTable(limit, max_line)
    alphabet = b"ab07 \x00\xff\t"
    for _ in range(40):
        lines = [
            bytes(rng.choice(alphabet) for _ in range(rng.randrange(0, 14)))
            for _ in range(rng.randrange(1, 9))
        ]
        block = b"\n".join(lines) + b"\n"
        quiet = {rng.choice("xyz") for _ in range(rng.randrange(0, 3))}
        assert _scan_all(table, block, quiet) == model.scan(block, quiet)
        for line in lines:
            if len(line) <= max_line and rng.random() < 0.6:
                entry = rng.choice("xyz")
                table.add(line, entry)
                model.add(line, entry)
            assert table.get(line) == model.get(line)
        assert len(table) == len(model.masks)


# -- blocks of whole lines -----------------------------------------------------------------------------
def _reference_lines(data: bytes, max_line: int) -> list[bytes]:
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    return [line[:max_line] + CUT if len(line) > max_line else line for line in lines]


def _lines_of_blocks(data: bytes, max_line: int, chunk: int) -> list[bytes]:
    lines = []
    for block, start, end in textclean.iter_raw_blocks(io.BytesIO(data), max_line, chunk):
        assert block[end - 1 : end] == b"\n" and start <= end
        lines.extend(textclean.cut_line(line, max_line) for line in block[start : end - 1].split(b"\n"))
    return lines


@pytest.mark.parametrize("seed", range(40))
def test_blocks_hold_the_lines_a_plain_split_gives(seed: int) -> None:
    rng = random.Random(seed)
    pieces = [b"", b"\n", b"short", b"\r\n", b"\xff\xfe", b"x" * 37, b"y" * 5, b"\x1b[31mred\x1b[0m"]
    data = b"".join(rng.choice(pieces) for _ in range(rng.randrange(0, 60)))
    max_line = rng.choice((4, 10, 36, 64))
    chunk = rng.choice((1, 2, 7, 16, 33, 1 << 20))
    assert _lines_of_blocks(data, max_line, chunk) == _reference_lines(data, max_line)
    assert list(textclean.iter_raw_lines(io.BytesIO(data), max_line, chunk)) == _reference_lines(
        data, max_line
    )


def test_cutting_a_cut_line_changes_nothing() -> None:
    line = textclean.cut_line(b"z" * 100, 10)
    assert line == b"z" * 10 + CUT and textclean.cut_line(line, 10) == line


# -- whole diagnoses, every build --------------------------------------------------------------------
def _awkward_log() -> bytes:
    rows = [json.loads(row) for row in (DATA / "corpus.jsonl").read_text().splitlines() if row.strip()]
    rng = random.Random(11)
    out = []
    for number in range(6000):
        line = rng.choice(rows)["log"].split("\n")
        text = rng.choice(line)
        kind = number % 97
        if kind == 5:
            text = text + " " + "w" * 20_000  # over the cap, inside a read
        elif kind == 9:
            text = text + "\r"  # CRLF
        elif kind == 13:
            text = "\x00\xff binary \x1b[1m" + text
        out.append(f"2026-11-30T10:{number // 60 % 60:02d}:{number % 60:02d}.{number:06d} {text}")
    return "\n".join(out).encode("utf-8", "surrogateescape")  # no final newline


@pytest.mark.parametrize("build_name", ENGINE_NAMES)
def test_every_build_gives_the_same_diagnosis_of_an_awkward_file(
    build_name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    build = engine(build_name, monkeypatch)
    path = tmp_path / "awkward.log"
    path.write_bytes(_awkward_log() + b" " + b"q" * 70_000)  # the last line: over the cap, across reads
    expected = asdict(PURE.diagnose_file(path, kernel_log=lambda: None))
    assert expected["lines"] == 6000
    assert asdict(build.diagnose_file(path, kernel_log=lambda: None)) == expected
    with monkeypatch.context() as patch:
        small_reads(patch, build, chunk_bytes=4096)
        assert asdict(build.diagnose_file(path, kernel_log=lambda: None)) == expected
    # The live path reads the same lines (as the file reader cuts them).
    lines = [
        line.decode("utf-8", "replace") for line in textclean.iter_raw_lines(io.BytesIO(path.read_bytes()))
    ]
    assert asdict(build.diagnose_lines(lines, kernel_log=lambda: None)) == expected


@pytest.mark.parametrize("build_name", ENGINE_NAMES)
def test_every_build_gives_the_same_diagnosis_of_a_timestamped_crash_loop(
    build_name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    build = engine(build_name, monkeypatch)
    logs = [path.read_text(errors="replace") for path in sorted((DATA / "logs").glob("*.log"))]
    lines = [line for log in logs for line in log.split("\n")]
    path = tmp_path / "loop.log"
    with path.open("w") as out:
        for number in range(30_000):
            out.write(f"{number // 3600:02d}:{number // 60 % 60:02d}:{number % 60:02d}.{number:07d} ")
            out.write(lines[number % len(lines)] + "\n")
    expected = asdict(PURE.diagnose_file(path, kernel_log=lambda: None))
    assert expected["failed"] and expected["lines"] == 30_000
    assert asdict(build.diagnose_file(path, kernel_log=lambda: None)) == expected


# -- which build runs ----------------------------------------------------------------------------------
def test_the_installed_module_names_the_build_it_runs() -> None:
    built = installed.implementation()
    assert built["scanner"] in ("C", "python") and built["diagnosis"] in ("mypyc", "python")
    if REQUIRE_COMPILED:
        assert built == {"diagnosis": "mypyc", "scanner": "C"}, "CI builds both compiled parts"
    if NATIVE is not None:
        assert installed.LogDiagnoser is NATIVE.LogDiagnoser
        assert installed.diagnose_file is NATIVE.diagnose_file
    assert PURE.implementation() == {"diagnosis": "python", "scanner": "python"}


def _install(monkeypatch: pytest.MonkeyPatch, module: types.ModuleType) -> None:
    monkeypatch.setitem(sys.modules, "vramtui.core._diagnose_native", module)
    monkeypatch.setattr(vramtui.core, "_diagnose_native", module, raising=False)


def test_a_compiled_build_of_another_text_is_never_used(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VRAMTUI_PURE_PYTHON", raising=False)
    stale = types.ModuleType("vramtui.core._diagnose_native")
    stale._BUILT_FROM = "0" * 64  # built before the file was edited
    _install(monkeypatch, stale)
    assert installed._compiled_twin() is None
    fresh = types.ModuleType("vramtui.core._diagnose_native")
    fresh._BUILT_FROM = hashlib.sha256(Path(installed.__file__).read_bytes()).hexdigest()
    _install(monkeypatch, fresh)
    assert installed._compiled_twin() is fresh
    monkeypatch.setenv("VRAMTUI_PURE_PYTHON", "1")
    assert installed._compiled_twin() is None


# -- memory ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("build_name", ENGINE_NAMES)
def test_long_lines_are_analysed_each_time_and_never_kept(
    build_name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A server that echoes each prompt in its request line: long lines, all different. Kept in the
    # memos they would grow memory with the file; they are analysed one by one instead.
    build = engine(build_name, monkeypatch)
    rng = random.Random(5)
    words = ["the", "model", "prompt", "tokens", "context", "answer", "x7", "42"]
    long_lines = [
        f"INFO 11-30 10:00:{number % 60:02d} Received request cmpl-{number}: prompt: '"
        + " ".join(rng.choice(words) for _ in range(400))
        + "'"
        for number in range(300)
    ]
    lines = [
        "llama_model_loader: loaded meta data",
        *long_lines,
        "CUDA out of memory. Tried to allocate 2 GiB",
    ]
    assert all(len(line) > build._MEMO_LINE_BYTES for line in long_lines)
    path = tmp_path / "prompts.log"
    path.write_text("\n".join(lines) + "\n")
    build._COLLAPSED.clear()
    expected = asdict(PURE.diagnose_lines(lines, kernel_log=lambda: None))
    assert expected["failed"] and expected["first_error_line"] == len(lines)
    assert asdict(build.diagnose_file(path, kernel_log=lambda: None)) == expected
    diagnoser = build.LogDiagnoser(kernel_log=lambda: None)
    for line in lines:
        diagnoser.feed(line)
    assert asdict(diagnoser.result()) == expected
    kept = [*diagnoser._masks, *diagnoser._text_masks, *diagnoser._memo, *build._COLLAPSED]
    assert kept and max(len(key) for key in kept) <= build._MEMO_LINE_BYTES


def test_version_says_which_build_reads_logs(capsys: pytest.CaptureFixture[str]) -> None:
    from vramtui import __version__
    from vramtui.cli import main

    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    out = capsys.readouterr()
    text = out.out + out.err
    assert text.startswith(f"vramtui {__version__}\n")
    build = installed.implementation()
    expected = "pure Python" if build["diagnosis"] == build["scanner"] == "python" else build["diagnosis"]
    assert f"log diagnosis: {expected}" in text
