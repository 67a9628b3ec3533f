"""The wizard pane's driver with the real core wizard and real launches (no engine needed here)."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_tui_support import screen_text, wait_for

from vramtui.core.profile import Profile
from vramtui.core.steprecord import open_session
from vramtui.tui.app import VramtuiApp
from vramtui.tui.wizard_pane import WizardPane


@pytest.fixture(autouse=True)
def isolated_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME"):
        monkeypatch.setenv(name, str(tmp_path / name.lower()))
    monkeypatch.setenv("VRAMTUI_CONFIG_DIR", str(tmp_path / "config"))
    return tmp_path


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
