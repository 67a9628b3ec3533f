"""`vramtui diagnose` on logs as users hand them over: compressed (a rotated `server.log.1.gz`, a journal or
CI export) and UTF-16 (Windows PowerShell 5's `>` writes UTF-16LE with a byte-order mark). Each reads as its
text does: the same verdict, the same line numbers. QA: a .gz log was called binary data with no hint, and
a UTF-16 log counted one line too many."""

from __future__ import annotations

import bz2
import codecs
import gzip
import json
import lzma
import subprocess
import sys
from pathlib import Path

import pytest

from vramtui.cli import main

LOGS = Path(__file__).resolve().parents[1] / "data" / "logs"
REAL = LOGS / "llama-cpp-python-rlimit-kv.log"  # a real failure made here: a KV cache past the limit


def _verdict(capsys: pytest.CaptureFixture[str], path: Path) -> tuple[int, dict]:
    code = main(["diagnose", str(path), "--json"])
    return code, json.loads(capsys.readouterr().out)


def _same(data: dict, plain: dict) -> bool:
    keys = ("failure", "failure_stage", "first_error_line", "lines", "backend")
    return all(data.get(key) == plain.get(key) for key in keys)


@pytest.mark.parametrize(
    ("suffix", "pack"),
    [
        (".gz", gzip.compress),
        (".xz", lzma.compress),
        (".bz2", bz2.compress),
        ("-utf16.log", lambda raw: raw.decode("utf-8").encode("utf-16")),  # with its BOM, as PowerShell
        ("-utf16le.log", lambda raw: raw.decode("utf-8").encode("utf-16-le")),  # no BOM
        ("-utf16.log.gz", lambda raw: gzip.compress(raw.decode("utf-8").encode("utf-16"))),
    ],
)
def test_a_compressed_or_utf16_log_reads_as_its_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], suffix: str, pack: object
) -> None:
    code, plain = _verdict(capsys, REAL)
    assert code == 1 and plain["failure"] != "none" and plain["first_error_line"]
    packed = tmp_path / f"server{suffix}"
    packed.write_bytes(pack(REAL.read_bytes()))  # type: ignore[operator]
    assert packed.read_bytes() != REAL.read_bytes()
    code, data = _verdict(capsys, packed)
    assert code == 1 and _same(data, plain), (data, plain)


def test_a_compressed_log_on_stdin_reads_as_its_text(capsys: pytest.CaptureFixture[str]) -> None:
    _, plain = _verdict(capsys, REAL)
    done = subprocess.run(
        [sys.executable, "-m", "vramtui", "diagnose", "-", "--json"],
        input=gzip.compress(REAL.read_bytes()),
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 1 and _same(json.loads(done.stdout), plain), done.stderr


def test_a_compressed_log_cut_short_is_one_line_naming_the_reader(tmp_path: Path) -> None:
    cut = tmp_path / "server.log.gz"
    cut.write_bytes(gzip.compress(REAL.read_bytes())[:200])
    done = subprocess.run(
        [sys.executable, "-m", "vramtui", "diagnose", str(cut)], capture_output=True, timeout=60, text=True
    )
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert "the gzip file is cut short or damaged" in done.stderr and f"zcat {cut} |" in done.stderr


def test_binary_that_only_starts_like_utf16_is_still_binary(tmp_path: Path) -> None:
    """A NUL every other byte is UTF-16 only where the rest is text: an image or a model file stays binary."""
    blob = tmp_path / "weights.bin"
    blob.write_bytes(codecs.BOM_UTF16_LE + bytes(range(256)) * 64)
    done = subprocess.run(
        [sys.executable, "-m", "vramtui", "diagnose", str(blob)], capture_output=True, timeout=60, text=True
    )
    assert (done.returncode, done.stderr) == (2, f"vramtui: {blob} looks like binary data, not a text log\n")


@pytest.mark.parametrize("suffix", [".gz", ".xz", ".bz2"])
@pytest.mark.parametrize("keep", [10, 100, 600])
def test_every_cut_short_compressed_log_is_one_line_exit_2(tmp_path: Path, suffix: str, keep: int) -> None:
    """QA: a .bz2 cut anywhere (its block is 900 kB) and a .gz/.xz cut before the first block decoded were an
    internal error with exit 3, which scripts read as an incomplete log."""
    pack = {".gz": gzip.compress, ".xz": lzma.compress, ".bz2": bz2.compress}[suffix]
    cut = tmp_path / f"server.log{suffix}"
    cut.write_bytes(pack(REAL.read_bytes())[:keep])
    done = subprocess.run(
        [sys.executable, "-m", "vramtui", "diagnose", str(cut)], capture_output=True, timeout=60, text=True
    )
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "cut short or damaged" in done.stderr and "internal error" not in done.stderr


def test_a_cut_short_log_on_stdin_names_a_command_that_runs() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "vramtui", "diagnose", "-"],
        input=gzip.compress(REAL.read_bytes())[:200],
        capture_output=True,
        timeout=60,
        text=False,
    )
    err = done.stderr.decode()
    assert (
        done.returncode == 2
        and "`zcat FILE | vramtui diagnose -`" in err
        and "zcat standard input" not in err
    )


def test_a_log_ending_in_nul_bytes_is_read_not_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """QA: the unwritten tail a crash or a power loss leaves (NULs) made a short crash log 'binary data'."""
    _, plain = _verdict(capsys, REAL)
    for name, raw in (
        ("tail", REAL.read_bytes() + b"\x00" * 5000),
        ("head", b"\x00" * 3000 + REAL.read_bytes()),
    ):
        padded = tmp_path / f"{name}.log"
        padded.write_bytes(raw)
        code, data = _verdict(capsys, padded)
        assert code == 1 and data["failure"] == plain["failure"] and data["first_error_line"], name


def test_a_log_behind_a_long_run_of_nuls_is_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """logrotate's copytruncate leaves the old size as NULs before the new lines: more than a whole head of
    them (QA: refused as binary past about 4 KiB)."""
    _, plain = _verdict(capsys, REAL)
    padded = tmp_path / "rotated.log"
    padded.write_bytes(b"\x00" * 100_000 + REAL.read_bytes())
    code, data = _verdict(capsys, padded)
    assert (
        code == 1
        and data["failure"] == plain["failure"]
        and data["first_error_line"] == plain["first_error_line"]
    )


@pytest.mark.parametrize(
    "head",
    [b"\x7fELF\x02\x01\x01", b"PK\x03\x04", b"GGUF\x03\x00\x00\x00"],
    ids=["program", "zip", "gguf"],
)
def test_a_binary_format_is_refused_however_much_of_it_reads_as_text(tmp_path: Path, head: bytes) -> None:
    """QA: a large program (libc, git) whose head is mostly its symbol table was 'diagnosed' (libc's
    'name resolution' strings read as a download failure); its magic number says what it is."""
    blob = tmp_path / "file.bin"
    blob.write_bytes(head + b"Temporary failure in name resolution\n" * 300)
    done = subprocess.run(
        [sys.executable, "-m", "vramtui", "diagnose", str(blob)], capture_output=True, timeout=60, text=True
    )
    assert (done.returncode, done.stderr) == (2, f"vramtui: {blob} looks like binary data, not a text log\n")


def test_a_tar_of_logs_is_refused_not_read_as_one_log(tmp_path: Path) -> None:
    import io
    import tarfile

    packed = io.BytesIO()
    with tarfile.open(fileobj=packed, mode="w:gz") as tar:
        tar.add(REAL, arcname="a.log")
    archive = tmp_path / "logs.tar.gz"
    archive.write_bytes(packed.getvalue())
    done = subprocess.run(
        [sys.executable, "-m", "vramtui", "diagnose", str(archive)],
        capture_output=True,
        timeout=60,
        text=True,
    )
    assert done.returncode == 2 and "looks like binary data" in done.stderr


@pytest.mark.parametrize("suffix", [".gz", ".xz", ".bz2"])
def test_a_damaged_not_cut_compressed_log_is_one_line_exit_2(tmp_path: Path, suffix: str) -> None:
    """QA: a gzip whose data does not inflate (zlib's "invalid code lengths set", two bytes flipped) was an
    internal error, exit 3 (which diagnose gives a log that stops before ready)."""
    pack = {".gz": gzip.compress, ".xz": lzma.compress, ".bz2": bz2.compress}[suffix]
    data = bytearray(pack(REAL.read_bytes()))
    for offset in (40, 41, 90, 91):  # inside the first block, past every header
        data[offset] ^= 0xFF
    bad = tmp_path / f"server.log{suffix}"
    bad.write_bytes(bytes(data))
    done = subprocess.run(
        [sys.executable, "-m", "vramtui", "diagnose", str(bad)], capture_output=True, timeout=60, text=True
    )
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "cut short or damaged" in done.stderr and "internal error" not in done.stderr


def test_a_log_with_bare_cr_line_endings_reads_line_by_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """QA: a log whose lines end in a bare CR was one line, its "first error" the whole file."""
    lines = REAL.read_text().splitlines()
    cr = tmp_path / "server.log"
    cr.write_bytes("\r".join(lines).encode() + b"\r")
    main(["diagnose", str(REAL), "--json"])
    plain = json.loads(capsys.readouterr().out)
    main(["diagnose", str(cr), "--json"])
    read = json.loads(capsys.readouterr().out)
    assert read["lines"] == plain["lines"] == len(lines)
    assert _same(read, plain)
