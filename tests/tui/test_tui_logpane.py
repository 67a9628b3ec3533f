"""The log pane on a failing log (issue 22): it opens on the first error at every size (defect 16), and
its header shows whole lines, the advice with a flag and a value first (defect 17).

The logs are real: printed by today's llama-server and by llama-cpp-python under a memory budget
(tests/data), opened the way `vramtui --log FILE` opens them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from test_tui_support import bring_up_curve_mib, screen_text, wait_for, write_nvsmi_csv

from vramtui.core.logs.diagnose import diagnose_file
from vramtui.tui.app import VramtuiApp
from vramtui.tui.panes.log import LogPane

DATA = Path(__file__).resolve().parents[1] / "data"
# Failing logs longer than the view, the first error far from line 1; the last one also grows the
# header as its verdict comes (the header's height changes after the jump).
LONG_FAILING = (
    DATA / "llama-server" / "kv-too-big.verbose.log",
    DATA / "logs" / "transformers-budget-600-import.log",
    DATA / "llama-server" / "port-in-use.verbose.log",
)


def quiet_app(**kwargs: object) -> VramtuiApp:
    return VramtuiApp(live_sampling=False, remember=False, **kwargs)  # type: ignore[arg-type]


def first_error_row(app: VramtuiApp, number: int) -> str | None:
    """The screen row of the log view that shows line `number` marked as the first error (▶)."""
    marked = re.compile(rf"[│ ]\s*{number} \S\S▶[│┃]")  # the gutter: number, stage tag, marker, bar
    return next((row for row in screen_text(app).splitlines() if marked.search(row)), None)


@pytest.mark.parametrize("size", [(80, 24), (200, 50)], ids=["80x24", "200x50"])
@pytest.mark.parametrize("log", LONG_FAILING, ids=[path.name for path in LONG_FAILING])
async def test_the_log_opens_on_its_first_error(log: Path, size: tuple[int, int]) -> None:
    expected = diagnose_file(log)
    assert expected.failed and expected.first_error_line and expected.first_error_line > 15
    app = quiet_app(log_file=str(log))
    async with app.run_test(size=size) as pilot:
        pane = app.query_one(LogPane)
        await wait_for(pilot, lambda: pane.finished)
        await pilot.pause(0.2)
        # no key pressed: the view is on the first error, not on line 1
        assert pane.view.marked == expected.first_error_line - 1
        assert first_error_row(app, expected.first_error_line), screen_text(app)


async def test_a_log_read_while_its_pane_is_hidden_shows_its_first_error_when_shown(tmp_path: Path) -> None:
    """80x24 shows one pane: with a replayed curve the memory pane is in front while the log is read
    (as the wizard pane is in front during the demo's failing first launch). `2` then shows the log on
    its first error."""
    log = DATA / "logs" / "llama-cpp-python-rlimit-kv.log"
    expected = diagnose_file(log)
    csv = write_nvsmi_csv(tmp_path / "curve.csv", bring_up_curve_mib(100))
    app = quiet_app(log_file=str(log), replay_csv=str(csv))
    async with app.run_test(size=(80, 24)) as pilot:
        pane = app.query_one(LogPane)
        await wait_for(pilot, lambda: pane.finished)
        await pilot.pause(0.2)
        assert app.active_pane == "memory" and not pane.region.area  # the log was read out of sight
        await pilot.press("2")
        await pilot.pause(0.2)
        assert first_error_row(app, expected.first_error_line), screen_text(app)
        await pilot.press("up", "up", "up", "up", "up", "up", "up", "up", "up", "up", "up", "up", "up")
        await pilot.press("1", "2")  # scrolled away by the user: shown again where the user left it
        await pilot.pause(0.2)
        assert first_error_row(app, expected.first_error_line) is None


def _logged(tmp_path: Path, corpus: str, case_id: str) -> Path:
    """A log of the real-log corpus (tests/data), as a file `--log` opens."""
    rows = (json.loads(line) for line in (DATA / corpus).read_text().splitlines() if line.strip())
    found = next((row for row in rows if row["id"] == case_id), None)
    assert found is not None, f"{case_id} is not in {corpus}"  # the corpus is in the repository
    path = tmp_path / f"{case_id}.log"
    path.write_text(found["log"] + "\n", encoding="utf-8")
    return path


def _flat(text: str) -> str:
    return " ".join(text.split())


HEADER_CASES = [
    ("logs/made-here.jsonl", "made-vllm-kv-too-small"),  # a real vLLM's KV refusal: a long first error
    ("logs/unseen.jsonl", "32-ollama-tmpfs-extract-no-space"),  # a first error over five rows
    ("corpus.jsonl", "sglang-4"),  # its first advice names no flag; a later one a flag and a value
    ("", "llama-cpp-python-demo-first-launch"),  # the demo's first launch: a four-row advice
]


@pytest.mark.parametrize(("corpus", "case_id"), HEADER_CASES, ids=[case for _, case in HEADER_CASES])
async def test_the_header_shows_whole_lines_the_advice_with_a_flag_and_value_first(
    tmp_path: Path, corpus: str, case_id: str
) -> None:
    """Issue 22 defect 17: at 80x24 the header was cut at its ninth row, mid-sentence in the advice.
    Now everything it holds is on screen, each piece of advice whole, and the first one that names a
    flag and its value is there."""
    from textual.widgets import Static

    from vramtui.tui.panes.log_header import with_values_first

    log = _logged(tmp_path, corpus, case_id) if corpus else DATA / "logs" / f"{case_id}.log"
    app = quiet_app(log_file=str(log))
    async with app.run_test(size=(80, 24)) as pilot:
        pane = app.query_one(LogPane)
        await wait_for(pilot, lambda: pane.finished)
        await pilot.pause(0.2)
        header = pane.query_one("#diagnosis", Static)
        region = header.content_region
        rows = screen_text(app).splitlines()[region.y : region.bottom]
        shown = _flat(" ".join(row[region.x : region.right] for row in rows))
        held = str(header.render()).splitlines()
        for line in held:  # nothing the header holds is cut off below its last row
            assert _flat(line) in shown, (line, shown)
        advice = [str(line) for line in pane.diagnosis.advice]
        first = with_values_first(advice)[0]
        assert _flat(first) in shown, (first, shown)
        whole = [line for line in advice if _flat(line) in shown]
        assert shown.count("→ ") == len(whole)  # every piece of advice shown is shown whole


async def test_the_headers_first_error_keeps_its_first_words_at_every_width() -> None:
    """QA 17 F19: at 160 columns with the keys panel open, the first piece of advice took the rows and the
    verdict ended "first error, line 132 (key e):" with nothing after it. At every width the header has
    room for it, the error's first words follow that colon."""
    from vramtui.core.logs.analysis import strip_log_prefix
    from vramtui.tui.panes.log_header import HEADER_ROWS, header_text

    log = DATA / "logs" / "llama-server-budget-250-np16-q4-kv.log"
    app = quiet_app(log_file=str(log))
    async with app.run_test(size=(100, 30)) as pilot:
        pane = app.query_one(LogPane)
        await wait_for(pilot, lambda: pane.finished)
        diagnosis = pane.diagnosis
        assert diagnosis.failed and diagnosis.first_error_text
        first_word = strip_log_prefix(diagnosis.first_error_text).split()[0]
        blank = []
        for width in range(60, 161, 2):
            text = header_text(pane, diagnosis, "", 200, width=width, rows=HEADER_ROWS, settled=True).plain
            said = text.split("(key e): ", 1)
            assert len(said) == 2, (width, text)
            if not said[1].startswith(first_word):
                blank.append(width)
        assert not blank, f"no error text at widths {blank}"


async def test_the_headers_first_advice_is_never_skipped_for_a_shorter_one() -> None:
    """QA 24 F3: at 80x24 the header left out the first advice (lower the context), too long for its rows,
    and showed the second, "Or store the KV cache in 8 bits ...". The first is cut to the rows instead."""
    from vramtui.tui.panes.log_header import header_text, with_values_first

    log = DATA / "logs" / "llama-server-budget-400-np4-kv.log"
    app = quiet_app(log_file=str(log))
    async with app.run_test(size=(100, 30)) as pilot:
        pane = app.query_one(LogPane)
        await wait_for(pilot, lambda: pane.finished)
        first = with_values_first([str(line) for line in pane.diagnosis.advice])[0]
        opening = " ".join(first.split()[:6])
        for width in range(60, 161, 4):
            for rows in (6, 8, 10):
                text = header_text(pane, pane.diagnosis, "", 200, width=width, rows=rows, settled=True).plain
                advice = [line for line in text.split("\n") if line.startswith("→ ")]
                # too few rows for even its opening: none is shown, and the last line says how many
                assert not advice or advice[0][2:].startswith(opening), (width, rows, text)
                assert advice or width < 80 or rows < 8, (width, rows, text)
