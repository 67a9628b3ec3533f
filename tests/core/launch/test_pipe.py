"""The server log's reader: vramtui's own line lands after every line already printed, by construction."""

from __future__ import annotations

import os
import threading
import time

from vramtui.core.launch.pipe import LineReader


def _reader() -> tuple[LineReader, int, list[str], threading.Event]:
    read_end, write_end = os.pipe()
    lines: list[str] = []
    ended = threading.Event()
    reader = LineReader(os.fdopen(read_end, "rb", buffering=0), lines.append, ended.set)
    reader.start()
    return reader, write_end, lines, ended


def test_our_line_follows_every_line_already_in_the_pipe() -> None:
    for _ in range(20):  # the race CI met was between a read and its lines' handing on: try it often
        reader, write_end, lines, ended = _reader()
        os.write(write_end, b"".join(b"line %d\n" % n for n in range(2000)))
        assert reader.say_after_pipe("ours", limit_s=10)
        os.close(write_end)
        assert ended.wait(10)
        assert lines[:2000] == [f"line {n}" for n in range(2000)]
        assert lines[2000] == "ours" and len(lines) == 2001


def test_a_closed_pipe_takes_no_line_and_ends_once() -> None:
    reader, write_end, lines, ended = _reader()
    os.write(write_end, b"last words without a line end")
    os.close(write_end)
    assert ended.wait(10)
    reader.join(5)
    assert lines == ["last words without a line end"]
    assert reader.say_after_pipe("ours", limit_s=1) is False  # the caller records it itself
    assert lines == ["last words without a line end"]


def test_a_pipe_that_never_empties_gives_the_line_back_to_the_caller() -> None:
    reader, write_end, lines, ended = _reader()
    stop = threading.Event()
    gate = threading.Event()

    def flood() -> None:
        while not stop.is_set():
            os.write(write_end, b"x" * 4095 + b"\n")
            gate.set()

    original = reader._on_line

    def slow_line(text: str) -> None:  # a reader slower than the writer: the pipe is never empty
        time.sleep(0.0005)
        original(text)

    reader._on_line = slow_line
    writer = threading.Thread(target=flood, daemon=True)
    writer.start()
    gate.wait(5)
    assert reader.say_after_pipe("ours", limit_s=0.3) is False
    stop.set()
    writer.join(5)
    os.close(write_end)
    assert ended.wait(30)
    assert "ours" not in lines  # withdrawn: never handed on late, out of order
