"""After a failed `vramtui run`, with a real llama-cpp-python server under a memory budget (issue 13,
defects 10 and 11): the log view lands on the first error, the status line says what failed in words,
`n` proposes from the failed run instead of launching it again, and the server the wizard verified is
the one the app keeps."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from test_tui_support import screen_text, wait_for
from textual.widget import Widget
from textual.widgets import Static

from vramtui.core.launch.launcher import default_log_dir
from vramtui.core.logs.stages import STAGES
from vramtui.tui.app import VramtuiApp
from vramtui.tui.panes.log import LogPane
from vramtui.tui.panes.wizard import WizardPane
from vramtui.tui.words import CAUSE_WORDS, FAILURE_WORDS, OUTCOME_WORDS

pytestmark = pytest.mark.engine

PROFILES = Path(__file__).resolve().parents[1] / "data" / "profiles"

# Every code of the core's vocabulary that is not also an English word: none may reach the screen.
INTERNAL_CODES = sorted(
    code for code in {*FAILURE_WORDS, *CAUSE_WORDS, *OUTCOME_WORDS, *STAGES} if "_" in code
)


def run_logs() -> list[Path]:
    """The launcher keeps one log per launch (in the test's own data dir, tests/conftest.py): their count
    is the number of model loads."""
    return sorted(default_log_dir().rglob("*.log"))


def codes_on(text: str) -> list[str]:
    return [code for code in INTERNAL_CODES if code in text]


def drawn(app: VramtuiApp, widget: Widget) -> str:
    """The screen's rows and columns `widget` covers (the log's own lines may quote codes: not this)."""
    region = widget.region
    rows = screen_text(app).splitlines()[region.y : region.bottom]
    return "\n".join(row[region.x : region.right] for row in rows)


def words_on_screen(app: VramtuiApp) -> str:
    """What vramtui itself says: the log pane's header, the wizard pane, the status line."""
    parts = [app.query_one("#diagnosis", Static), app.query_one(WizardPane), app.query_one("#status", Static)]
    return "\n".join(drawn(app, widget) for widget in parts)


async def test_a_failed_run_lands_on_its_error_and_n_proposes_without_relaunching(
    tiny_gguf: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "profile"
    folder.mkdir()
    shutil.copy(tiny_gguf, folder / "tiny.gguf")
    profile = shutil.copy(PROFILES / "tiny-kv-too-big.toml", folder / "tiny-kv-too-big.toml")
    app = VramtuiApp(profile_path=str(profile), live_sampling=False, remember=False)
    async with app.run_test(size=(200, 50)) as pilot:
        log = app.query_one(LogPane)
        wizard = app.query_one(WizardPane)
        await wait_for(
            pilot, lambda: app.session is not None and app.session.state in ("failed", "exited"), timeout_s=90
        )
        await wait_for(pilot, lambda: log.finished, timeout_s=30)
        assert len(run_logs()) == 1

        # The log view sits on the first error by itself (no `e`), not on the traceback's tail.
        view = log.view
        assert view.first_error is not None and view.marked == view.first_error
        assert view.first_error < len(view.lines) - 1  # the tail is elsewhere: landing there is a choice

        # The status line says the launch failed, and at which stage, in words.
        status = str(app.query_one("#status", Static).render())
        assert "no model launched" not in status
        assert "failed at " in status, status
        assert "host out of memory" in status or "out of memory" in drawn(app, log), status
        assert codes_on(words_on_screen(app)) == [], words_on_screen(app)

        # The advice in the header is sized by the wizard's arithmetic, as `vramtui check` prints it.
        await wait_for(pilot, lambda: bool(log.sized_advice), timeout_s=30)
        header = str(app.query_one("#diagnosis", Static).render())
        # QA 6: the log's own context size beside the wizard's read as two answers: the move leads, and
        # no other line gives --n_ctx another value
        assert "First move (the wizard's, n): context (--n_ctx) 262144 → 32768" in header, header
        assert header.count("--n_ctx") == 1, header

        # n: the wizard takes the failed run as its step 0 and proposes, with no second load.
        app.action_show_pane("wizard")
        await pilot.press("n")
        await wait_for(
            pilot,
            lambda: wizard.proposal is not None or (wizard.driver is not None and wizard.driver.finished),
            timeout_s=60,
        )
        assert len(run_logs()) == 1, "n launched the failing profile again"
        assert [step.outcome for step in wizard.steps] == ["first_run"]
        assert wizard.proposal is not None and "Next change:" in screen_text(app)
        assert codes_on(words_on_screen(app)) == [], words_on_screen(app)

        # Confirm until it works: each confirmed change is one load, and the verified one stays.
        for _ in range(4):
            if wizard.driver.finished:
                break
            await pilot.press("n")
            await wait_for(
                pilot,
                lambda: not wizard.busy and (wizard.proposal is not None or wizard.driver.finished),
                timeout_s=150,
            )
            if not wizard.driver.finished:  # a relaunch that failed again: the status says its fate (QA 14)
                status = str(app.query_one("#status", Static).render())
                assert status.startswith("wizard ") and "failed at " not in status, status
        assert wizard.steps[-1].outcome == "works" and wizard.driver.verified
        await wait_for(pilot, lambda: app.session is not None and app.session.state == "ready", timeout_s=30)
        await pilot.pause(1.0)  # time for a second launch to show, if the app made one
        logs = run_logs()
        assert len(logs) == len(wizard.steps), "the verified server was stopped and launched again"
        assert app.session.server.log_file == logs[-1] or str(app.session.server.log_file) == str(logs[-1])
        assert app.session.server.running
        text = words_on_screen(app)
        assert "IT RUNS" in text and codes_on(text) == [], text
        status = str(app.query_one("#status", Static).render())
        assert "no model launched" not in status and f"(pid {app.session.pid})" in status
        app.session.stop()


async def test_a_wizard_relaunch_after_the_failed_launch_is_what_the_status_line_says() -> None:
    """QA 14: after the wizard's relaunch failed (a port taken), the status line still said the first
    launch's "failed at kv cache". A newer note (the wizard's step) wins over a session that is not up."""
    from types import SimpleNamespace

    from test_tui import quiet_app

    app = quiet_app()
    async with app.run_test(size=(160, 40)) as pilot:
        failed = SimpleNamespace(running=False, describe=lambda short=False: "vllm tiny: failed at kv cache")
        app.session = failed  # type: ignore[assignment]
        app.update_status()
        await pilot.pause()
        assert "failed at kv cache" in str(app.query_one("#status", Static).render())
        app.launch_note = "wizard step 2: failed at start-up"
        app.update_status()
        await pilot.pause()
        status = str(app.query_one("#status", Static).render())
        assert "wizard step 2" in status and "failed at kv cache" not in status
        app.session = SimpleNamespace(running=True, describe=lambda short=False: "vllm tiny: ready (pid 7)")  # type: ignore[assignment]
        app.update_status()
        await pilot.pause()
        assert "ready (pid 7)" in str(app.query_one("#status", Static).render())  # a model up is the news
        app.session = None
