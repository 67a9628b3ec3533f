"""The wizard pane's driver with the real core wizard and real launches (no engine needed here)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_tui import quiet_app
from test_tui_support import screen_text, wait_for
from test_wizard import ReplayedRuns, _demo_profile
from textual.widgets import DataTable

from vramtui.core.launch.profile import Profile
from vramtui.core.wizard.steprecord import open_session
from vramtui.core.wizard.wizard import Wizard
from vramtui.tui.app import VramtuiApp
from vramtui.tui.panes.wizard import COMPACT_COLUMNS, STEP_COLUMNS, WizardPane, WizardUpdate

# The wizard's arithmetic on runs replayed from test_wizard: its engine share, as there, the backend's figure.
pytestmark = pytest.mark.usefixtures("assumed_engine_share")


async def test_a_wizard_that_ends_writes_its_end_line_and_reopens_as_finished(tmp_path: Path) -> None:
    """A model file that is not there: the real launch fails at once, no memory ladder helps, the
    wizard stops — and its record says so (an end line), so it reopens as a finished session."""
    profile = Profile(
        backend="llama-cpp-python", model=str(tmp_path / "missing.gguf"), params={"context": 2048}
    )
    app = VramtuiApp(live_sampling=False, remember=False)
    async with app.run_test(size=(200, 50)) as pilot:
        pane = app.query_one(WizardPane)
        pane.start_profile(profile)
        pane.driver.launch_first()
        await wait_for(pilot, lambda: pane.driver.finished and not pane.busy, timeout_s=60)
        record = pane.driver.wizard.record_path
        assert "stopped" in pane.state_text and "stopped" in screen_text(app)
        markdown, _table = pane.driver.export()
    session = open_session(record)
    assert session.finished and not session.success
    assert "file_missing" in session.end["reason"]
    assert [step["outcome"] for step in session.steps] == ["first_run"]
    assert session.interrupted == []
    # The export carries the verdict instead of "the session did not finish".
    assert "- result: not working yet" in markdown.read_text()


def _real_steps(model: Path, folder: Path) -> list[Any]:
    """Two steps of the core wizard on runs replayed from llama-cpp-python's real logs."""
    wizard = Wizard(_demo_profile(model), runner=ReplayedRuns(folder), record=False)
    first = wizard.start()
    second = wizard.apply(wizard.propose())  # type: ignore[arg-type]
    return [first, second]


def _table_fits(table: DataTable) -> bool:  # type: ignore[type-arg]
    return table.virtual_size.width <= table.scrollable_content_region.width


async def test_the_steps_table_fits_80_columns_and_is_full_when_wide(tiny_gguf: Path, tmp_path: Path) -> None:
    steps = _real_steps(tiny_gguf, tmp_path)
    app = VramtuiApp(live_sampling=False, remember=False)
    async with app.run_test(size=(80, 24)) as pilot:
        app.action_show_pane("wizard")
        pane = app.query_one(WizardPane)
        for step in steps:
            pane.post_message(WizardUpdate("step done", step=step))
        await wait_for(pilot, lambda: len(pane.steps) == 2)
        await pilot.pause()
        table = pane.query_one(DataTable)
        assert pane.compact and [str(c.label) for c in table.columns.values()] == list(COMPACT_COLUMNS)
        assert _table_fits(table), (table.virtual_size, table.scrollable_content_region)
        text = screen_text(app)
        # Codes in words (issue 13 defect 11), short ones in the compact table.
        assert "context 262144 → 32768" in text and "WORKS" in text and "kv cache ✖ host OOM" in text
        assert "host_oom" not in text and "kv_cache" not in text
        assert "peak" in text and "1.2 GiB" in text  # the last column is on screen, not cut
        assert "^p palette" in text and "t Theme" in text  # every footer key fits too
        assert "1234 Pane" in text and "x Export" in text

        await pilot.resize_terminal(200, 50)
        await wait_for(pilot, lambda: pane.compact is False)
        await pilot.pause()
        assert [str(c.label) for c in table.columns.values()] == list(STEP_COLUMNS)
        assert table.row_count == 2 and _table_fits(table)
        await wait_for(pilot, lambda: "first launch" in screen_text(app))  # the rows are drawn again
        text = screen_text(app)
        assert "resident" in text and "failed (first launch)" in text

        await pilot.resize_terminal(80, 24)
        await wait_for(pilot, lambda: pane.compact is True)
        assert table.row_count == 2 and _table_fits(table)


async def test_with_nothing_to_start_a_wizard_on_confirm_is_not_drawn() -> None:
    """QA 17 F21: plain `vramtui` drew a "Confirm (n)" button on the wizard pane though `n` did nothing."""
    from vramtui.tui.panes.wizard import WizardPane

    app = quiet_app()
    async with app.run_test(size=(200, 60)) as pilot:
        pane = app.query_one(WizardPane)
        pane.show()
        await pilot.pause()
        assert pane.driver is None and pane.profile_hint is None
        assert app.query_one("#wiz-confirm").has_class("-idle")
