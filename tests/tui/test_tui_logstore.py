"""The log view keeps offsets and tag bytes, not one Python object per line, and says it is reading
until a big file is read; then its verdict is `vramtui diagnose FILE`'s."""

from __future__ import annotations

import gc
import warnings
from array import array
from pathlib import Path

from test_tui_support import screen_text, wait_for

from vramtui.core.launch.launcher import LogLine
from vramtui.core.logs.diagnose import diagnose_file
from vramtui.tui.app import VramtuiApp
from vramtui.tui.panes.log import LogPane
from vramtui.tui.widgets.linestore import CACHED_ROWS, LineStore, RowChunk
from vramtui.tui.widgets.tail import LogFeed
from vramtui.tui.words import failure_words, stage_words

BLOCK = (
    "load_tensors: offloading 32 repeating layers to GPU",
    "llama_kv_cache_unified:      CUDA0 KV buffer size =  1024.00 MiB",
    "slot update_slots: id  0 | task {i} | prompt processing progress, n_past = 2048",
    "srv  log_server_r: request: POST /v1/chat/completions 127.0.0.1 200",
)
FAILURE = (
    "CUDA error: out of memory\n"
    "  current device: 0, in function ggml_cuda_op_mul_mat at ggml-cuda.cu:1234\n"
    'GGML_ASSERT: ggml-cuda.cu:1234: !"CUDA error"\n'
)


def write_big_log(path: Path, blocks: int) -> int:
    """A server that ran a long time, then failed: `blocks` * 4 lines and the failure's 3."""
    with path.open("w", encoding="utf-8") as handle:
        for i in range(blocks):
            handle.write("\n".join(BLOCK).format(i=i) + "\n")
        handle.write(FAILURE)
    return blocks * len(BLOCK) + FAILURE.count("\n")


def quiet_app(**kwargs: object) -> VramtuiApp:
    return VramtuiApp(live_sampling=False, remember=False, **kwargs)  # type: ignore[arg-type]


async def test_a_big_log_says_reading_until_it_is_read_then_gives_the_cli_verdict(tmp_path: Path) -> None:
    log = tmp_path / "big.log"
    total = write_big_log(log, 50_000)  # 200k lines
    expected = diagnose_file(log)
    assert expected.failed  # the log's last lines are a failure: an early verdict would say otherwise
    app = quiet_app(log_file=str(log))
    headers: list[str] = []
    async with app.run_test(size=(200, 50)) as pilot:
        pane = app.query_one(LogPane)

        def read() -> bool:
            if not pane.finished:
                headers.append(str(pane.query_one("#diagnosis").render()))
            return pane.finished

        await wait_for(pilot, read, timeout_s=180)
        assert headers, "the file was read before the first frame"
        assert all(header.startswith("READING ") for header in headers), headers[:3]
        assert not any("NO FAILURE" in header or "FAILED" in header for header in headers)
        assert len(pane.view.lines) == total
        got = pane.diagnosis
        assert (got.failed, got.failure, got.failure_stage, got.first_error_line, got.stage) == (
            expected.failed,
            expected.failure,
            expected.failure_stage,
            expected.first_error_line,
            expected.stage,
        )
        shown = screen_text(app)
        # The CLI's verdict in the screen's words (issue 13 defect 11).
        assert f"FAILED at {stage_words(expected.failure_stage)}: {failure_words(expected.failure)}" in shown
        assert "READING" not in shown
        await pilot.press("e")
        await pilot.pause()
        assert pane.view.marked == expected.first_error_line - 1


async def test_the_view_keeps_offsets_and_tag_bytes_not_an_object_per_line(tmp_path: Path) -> None:
    log = tmp_path / "big.log"
    total = write_big_log(log, 25_000)
    app = quiet_app(log_file=str(log))
    async with app.run_test(size=(200, 50)) as pilot:
        pane = app.query_one(LogPane)
        await wait_for(pilot, lambda: pane.finished, timeout_s=180)
        await pilot.press("home")  # draw rows from both ends
        await pilot.pause()
        store = pane.view.lines
        assert isinstance(store, LineStore)
        assert isinstance(store.ends, array) and store.ends.typecode == "Q" and len(store.ends) == total
        assert isinstance(store.stages, bytearray) and len(store.stages) == total
        assert isinstance(store.severities, bytearray) and len(store.severities) == total
        assert store.ends[-1] == log.stat().st_size  # offsets into the file: its text stays there
        assert store.nbytes() <= 16 * total
        gc.collect()
        with warnings.catch_warnings():  # isinstance on every live object touches torch's deprecated aliases
            warnings.simplefilter("ignore", FutureWarning)
            rows = sum(isinstance(thing, LogLine) for thing in gc.get_objects())
        assert rows <= CACHED_ROWS  # only decoded rows, a bounded cache of them
        # the rows it draws are the file's lines, tagged as the log engine tagged them
        first = store[0]
        assert (first.text, first.number) == (BLOCK[0], 1)
        last = store[total - 1]
        assert last.text == FAILURE.splitlines()[-1] and last.severity == "error"


def stream_store(lines: list[str]) -> LineStore:
    """An in-memory store filled as a stream's feed fills it (its thread builds the chunk)."""
    chunks: list[RowChunk] = []
    feed = LogFeed(lambda chunk, *_: chunks.append(chunk), tagged=True, label="stream")
    for line in lines:
        feed.push(line)
    feed.end(None)
    feed.run_queue()
    store = LineStore()
    for chunk in chunks:
        store.extend(chunk)
    return store


def test_a_stream_keeps_its_text_as_bytes_and_search_wraps_both_ways() -> None:
    lines = ["first Alpha line", "beta", "\x1b[31mred ALPHA\x1b[0m", "gamma", "último alpha"]
    store = stream_store(lines)
    assert len(store) == len(lines)
    assert store[2].text == "red ALPHA" and store[4].text == "último alpha"
    assert store.find("alpha", -1) == 0
    assert store.find("alpha", 0) == 2
    assert store.find("alpha", 4) == 0  # wraps to the top
    assert store.find("alpha", 0, forward=False) == 4  # wraps to the bottom
    assert store.find("alpha", 4, forward=False) == 2
    assert store.find("delta", -1) is None
    assert store.number(0) is None  # our own notes: no log engine read them


def test_search_finds_lines_across_blocks_of_a_file(tmp_path: Path) -> None:
    import vramtui.tui.widgets.linestore as linestore

    log = tmp_path / "x.log"
    log.write_text("".join(f"line {i}\n" for i in range(5000)) + "needle here\n", encoding="utf-8")
    store = LineStore(log)
    offset = 0
    chunk = RowChunk()
    for text in log.read_text().splitlines():
        offset += len(text) + 1
        chunk.add(offset, None, "info", len(chunk) + 1, len(text))
    store.extend(chunk)
    saved = linestore.SEARCH_BLOCK
    linestore.SEARCH_BLOCK = 64  # many small blocks: hits at their edges must still be found
    try:
        assert store.find("NEEDLE", -1) == 5000
        assert store.find("line 4999", 5000, forward=False) == 4999
        assert store.find("line 12", 12) == 120
    finally:
        linestore.SEARCH_BLOCK = saved
        store.close()


async def test_a_log_that_cannot_be_read_is_one_note_not_a_crash(tmp_path: Path) -> None:
    folder = tmp_path / "not-a-file.log"
    folder.mkdir()
    app = quiet_app()
    async with app.run_test(size=(200, 50)) as pilot:
        pane = app.query_one(LogPane)
        pane.open_file(folder)
        await wait_for(pilot, lambda: pane.finished)
        assert len(pane.view.lines) == 1
        assert pane.view.lines[0].text.startswith(f"vramtui: cannot read {folder}")


async def header_once_read(path: Path) -> str:
    """The log pane's header once the file is read to its end (`vramtui --log FILE`)."""
    app = quiet_app(log_file=str(path))
    async with app.run_test(size=(200, 50)) as pilot:
        pane = app.query_one(LogPane)
        await wait_for(pilot, lambda: pane.progress is None and pane.batches_received > 0, timeout_s=30)
        await pilot.pause(0.2)
        return str(pane.query_one("#diagnosis").render())


async def test_a_file_that_is_no_server_log_is_not_called_healthy(tmp_path: Path) -> None:
    """QA: an empty file and a page of prose read "NO FAILURE" in the pane where `vramtui diagnose`
    refuses them (exit 2, exit 3): nothing in them says a server came up."""
    prose = tmp_path / "notes.txt"
    prose.write_text("Shopping list\nmilk\neggs\nthe model was great yesterday\n")
    empty = tmp_path / "empty.log"
    empty.write_text("")
    for path, words in ((prose, "Nothing in it is an engine's start-up"), (empty, "the log is empty")):
        header = await header_once_read(path)
        assert "NOT A SERVER LOG" in header and words in header and "NO FAILURE" not in header, header


async def test_the_pane_says_what_the_cli_says_of_a_cause_and_of_a_guessed_stage(tmp_path: Path) -> None:
    """QA: a cut-short GGUF read "an error" in the pane where `diagnose` said the file is cut short, and a
    bare "Killed" was drawn as failed at load weights where `diagnose` calls that stage a best guess."""
    cut = tmp_path / "cut.log"
    cut.write_text(
        "llama_model_loader: loaded meta data with 30 key-value pairs and 291 tensors from m.gguf\n"
        "llama_model_load: error loading model: tensor 'blk.20.ffn_down.weight' data is not within the "
        "file bounds, model is corrupted or incomplete\n"
    )
    killed = tmp_path / "killed.log"
    killed.write_text("Killed\n")
    for path, words in ((cut, "cut short or corrupt"), (killed, "a guess: no line says where")):
        header = await header_once_read(path)
        assert words in header, header
