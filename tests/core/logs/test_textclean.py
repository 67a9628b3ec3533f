"""Raw server output to safe text: ANSI codes, control bytes, invalid UTF-8, huge lines, markup."""

from __future__ import annotations

import io

import pytest

from vramtui.core.logs.textclean import (
    CUT_MARK,
    clean_bytes_line,
    clean_line,
    decode_bytes,
    escape_markup,
    iter_raw_lines,
    looks_binary,
    strip_ansi,
)


def test_strip_ansi_colours_cursor_and_titles() -> None:
    assert strip_ansi("\x1b[1;31mERROR\x1b[0m done") == "ERROR done"
    assert strip_ansi("\x1b[2K\x1b[1Gprogress") == "progress"
    assert strip_ansi("\x1b]0;window title\x07text") == "text"
    assert strip_ansi("plain [not ansi]") == "plain [not ansi]"


def test_clean_line_drops_controls_and_keeps_progress_bar_words() -> None:
    raw = "Loading checkpoint shards:   0%|   | 0/2\rKilled\n"
    assert clean_line(raw) == "Loading checkpoint shards:   0%|   | 0/2 Killed"
    assert clean_line(raw, last_segment=True) == "Killed"
    assert clean_line("a\x00b\x07c\x7fd\tz") == "abcd    z"


def test_decode_never_raises() -> None:
    assert decode_bytes(b"ok \xff\xfe \xc3\x28") == "ok \ufffd\ufffd \ufffd("
    assert clean_bytes_line(b"\x1b[33mwarn\x1b[0m \x00\x01") == "warn "


def test_escape_markup_matches_rich() -> None:
    from rich.markup import escape, render

    for text in ("[bold red]boom[/]", "[/]", "a [link=x]b[/link] \\", "list[int] [0]", "[@click]x"):
        assert escape_markup(text) == escape(text)
        if not text.endswith("\\"):
            assert render(escape_markup(text)).plain == text


def test_looks_binary() -> None:
    assert looks_binary(b"GGUF\x03\x00\x00\x00" + bytes(range(256)))
    assert not looks_binary(b"llama_model_loader: loaded meta data\n" * 10)
    assert not looks_binary(b"")


def _lines(data: bytes, **kwargs: int) -> list[bytes]:
    return list(iter_raw_lines(io.BytesIO(data), **kwargs))


@pytest.mark.parametrize("chunk", [1, 3, 7, 64, 1 << 20])
def test_iter_raw_lines_any_chunking(chunk: int) -> None:
    data = b"one\ntwo\r\n\nthree-is-long\nlast-no-newline"
    assert _lines(data, chunk_bytes=chunk) == [b"one", b"two\r", b"", b"three-is-long", b"last-no-newline"]


@pytest.mark.parametrize("chunk", [2, 5, 16, 1 << 20])
def test_iter_raw_lines_caps_long_lines(chunk: int) -> None:
    data = b"short\n" + b"x" * 50 + b"\nafter\n" + b"y" * 40
    got = _lines(data, max_line_bytes=10, chunk_bytes=chunk)
    cut = CUT_MARK.encode()
    assert got == [b"short", b"x" * 10 + cut, b"after", b"y" * 10 + cut]


def test_iter_raw_lines_empty() -> None:
    assert _lines(b"") == []
    assert _lines(b"\n") == [b""]


@pytest.mark.parametrize(
    ("line", "words"),
    [
        (
            "0.00.033.807 E ggml_aligned_malloc: insufficient memory",
            "ggml_aligned_malloc: insufficient memory",
        ),
        ("2026-12-06T10:52:41.425 fake server: cannot open config", "fake server: cannot open config"),
        (
            "(EngineCore_DP0 pid=556790) ERROR 12-24 08:50:35 [core.py:866] torch.OutOfMemoryError: CUDA out",
            "torch.OutOfMemoryError: CUDA out",
        ),
        (
            "2026-12-06T10:52:41.425 0.00.033.807 E llama_init_from_model: failed",
            "llama_init_from_model: failed",
        ),
        ("RuntimeError: boom", "RuntimeError: boom"),
        ("2026-12-06T10:52:41.425 ", "2026-12-06T10:52:41.425"),  # nothing after the stamp: the line as it is
    ],
)
def test_a_headline_quotes_a_lines_words_without_its_stamps(line: str, words: str) -> None:
    """QA 22: check's headline read "0.00.033.807 E ggml_aligned_malloc: ..." (llama-server's own time and
    level); vramtui's run-log stamp and vLLM's process tag, level and source are bookkeeping too."""
    from vramtui.core.logs.textclean import said_words

    assert said_words(line) == words
