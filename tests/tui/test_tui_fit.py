"""The log pane's diagnosis block puts llama.cpp's fit projection beside vramtui's estimate (a real
llama-server log at --verbosity 4, tests/data/llama-server)."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_tui_support import screen_text, wait_for

from vramtui.core.logs.diagnose import diagnose_file
from vramtui.core.wizard.fitcompare import compare_fit
from vramtui.tui.app import VramtuiApp
from vramtui.tui.panes.log import LogPane

DATA = Path(__file__).resolve().parents[1] / "data" / "llama-server"


@pytest.mark.parametrize("name", ["healthy-defaults.verbose.log", "compute-too-big.verbose.log"])
async def test_the_log_panes_header_shows_fits_projection_and_the_estimate(name: str) -> None:
    log = DATA / name
    diagnosis = diagnose_file(log)
    comparison = compare_fit(diagnosis.engine_figures, diagnosis.backend)
    assert comparison is not None
    app = VramtuiApp(log_file=str(log), live_sampling=False, remember=False)
    async with app.run_test(size=(200, 50)) as pilot:
        pane = app.query_one(LogPane)
        await wait_for(pilot, lambda: pane.finished)
        app.action_show_pane("log")
        await pilot.pause()
        text = screen_text(app)
    assert f"fit projected {comparison.projected['host'] / 2**20:.0f} MiB host" in text
    assert f"vramtui estimates {comparison.estimated['host'] / 2**20:.0f} MiB" in text


async def test_no_projection_no_fit_line() -> None:
    app = VramtuiApp(log_file=str(DATA / "healthy-defaults.log"), live_sampling=False, remember=False)
    async with app.run_test(size=(200, 50)) as pilot:
        pane = app.query_one(LogPane)
        await wait_for(pilot, lambda: pane.finished)
        text = screen_text(app)
    assert "NO FAILURE" in text and "fit projected" not in text
