"""Issue 22 defect 26: no internal code on screen. A real launch that fails at once (its port is held
by another socket), then `n`: the status line, the log header and the wizard pane say it in words."""

from __future__ import annotations

import socket
from pathlib import Path

from test_tui_support import screen_text, wait_for
from textual.widgets import Static

from vramtui.core.logs.stages import STAGES
from vramtui.tui.app import VramtuiApp
from vramtui.tui.panes.wizard import WizardPane
from vramtui.tui.words import CAUSE_WORDS, FAILURE_WORDS, FIGURE_WORDS, OUTCOME_WORDS

CODES = sorted(
    code for code in {*FAILURE_WORDS, *CAUSE_WORDS, *OUTCOME_WORDS, *FIGURE_WORDS, *STAGES} if "_" in code
)


def drawn(app: VramtuiApp, *widgets: object) -> str:
    """The screen's cells these widgets cover (the log's own lines may quote codes: not those)."""
    rows = screen_text(app).splitlines()
    parts = []
    for widget in widgets:
        region = widget.region  # type: ignore[attr-defined]
        parts += [row[region.x : region.right] for row in rows[region.y : region.bottom]]
    return "\n".join(parts)


async def test_a_launch_that_fails_and_its_wizard_speak_in_words(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        (tmp_path / "m.gguf").write_bytes(b"GGUF")
        profile = tmp_path / "busy.toml"
        profile.write_text(
            f'backend = "llama-cpp-python"\nmodel = "m.gguf"\nport = {busy.getsockname()[1]}\n'
        )
        app = VramtuiApp(profile_path=str(profile), live_sampling=False, remember=False)
        async with app.run_test(size=(200, 50)) as pilot:
            await wait_for(pilot, lambda: app.session is not None and app.session.state == "failed")
            await pilot.press("n")
            wizard = app.query_one(WizardPane)
            await wait_for(pilot, lambda: wizard.driver is not None and wizard.driver.finished)
            await pilot.pause(0.2)
            said = drawn(app, app.query_one("#diagnosis", Static), wizard, app.query_one("#status", Static))
    assert "port already in use" in said, said
    assert [code for code in CODES if code in said] == [], said
    assert " at ?" not in said
