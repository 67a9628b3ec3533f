"""The wizard pane offers the on-GPU goal when the log's diagnosis says "runs but slow": a real GPU log
from a public issue (llama.cpp#13729: 30 of 49 layers on an RTX 4080 SUPER, tests/data/logs/offloaded.jsonl)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_tui_support import screen_text, wait_for
from textual.widgets import Button

from vramtui.core.errors import VramtuiError
from vramtui.core.logs.diagnose import diagnose_file
from vramtui.core.wizard.ongpu import plan_from_figures
from vramtui.tui.app import VramtuiApp
from vramtui.tui.panes.log import LogPane
from vramtui.tui.panes.wizard import WizardPane

DATA = Path(__file__).resolve().parents[1] / "data"


def _gpu_log(tmp_path: Path) -> Path:
    entry = json.loads((DATA / "logs" / "offloaded.jsonl").read_text().splitlines()[0])
    path = tmp_path / "qwen3-30b-a3b.log"
    path.write_text(entry["log"] + "\n")
    return path


async def test_runs_but_slow_offers_the_on_gpu_goal_and_o_plans_it(tmp_path: Path) -> None:
    log = _gpu_log(tmp_path)
    app = VramtuiApp(log_file=str(log), live_sampling=False, remember=False)
    async with app.run_test(size=(200, 50)) as pilot:
        pane = app.query_one(LogPane)
        await wait_for(pilot, lambda: pane.finished)
        wizard = app.query_one(WizardPane)
        await wait_for(pilot, lambda: bool(wizard.slow))
        assert "19 of 49 layers" in wizard.slow[0]
        assert wizard.query_one("#wiz-ongpu", Button).display  # the button shows with the offer
        await pilot.press("4")  # the wizard pane
        await pilot.pause()
        assert "press f for the fastest setup" in screen_text(app)
        wizard.focus()
        await pilot.press("f")
        await wait_for(pilot, lambda: bool(wizard.on_gpu_text))
        # This excerpt lacks the heads: the pane says what the CLI would, in one line.
        with pytest.raises(VramtuiError) as error:
            plan_from_figures(diagnose_file(log).engine_figures)
        assert str(error.value) in wizard.on_gpu_text[0]
        assert "cannot plan from this log" in screen_text(app)


async def test_a_healthy_log_offers_nothing(tmp_path: Path) -> None:
    app = VramtuiApp(
        log_file=str(DATA / "llama-server" / "healthy-defaults.log"), live_sampling=False, remember=False
    )
    async with app.run_test(size=(200, 50)) as pilot:
        pane = app.query_one(LogPane)
        await wait_for(pilot, lambda: pane.finished)
        wizard = app.query_one(WizardPane)
        assert not wizard.slow and not wizard.query_one("#wiz-ongpu", Button).display
        await pilot.press("4")  # the wizard pane, its keys live
        await pilot.pause()
        await pilot.press("f")  # answered: nothing on the host to move (QA: f was silent)
        await pilot.pause()
        assert not wizard.on_gpu_text
        assert any("nothing to move" in str(n.message) for n in app._notifications)
