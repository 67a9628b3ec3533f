"""The app with a real model server: llama-cpp-python on this CPU, launched, watched, quit, wizarded."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import psutil
import pytest
from test_tui_support import screen_text, wait_for

from vramtui.core.launch.profile import Profile
from vramtui.core.wizard.steprecord import open_session
from vramtui.tui.app import ConfirmQuit, VramtuiApp
from vramtui.tui.panes.log import LogPane
from vramtui.tui.panes.memory import MemoryPane
from vramtui.tui.panes.wizard import WizardPane

pytestmark = pytest.mark.engine

PROFILES = Path(__file__).resolve().parents[1] / "data" / "profiles"


def tree_of(pid: int) -> list[int]:
    try:
        process = psutil.Process(pid)
        return [pid, *(child.pid for child in process.children(recursive=True))]
    except psutil.Error:
        return [pid]


def alive(pids: list[int]) -> list[int]:
    left = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                left.append(pid)
        except psutil.Error:
            pass
    return left


async def test_run_profile_then_quit_asks_stops_the_server_and_leaves_nothing(
    tiny_gguf: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "profile"
    folder.mkdir()
    shutil.copy(tiny_gguf, folder / "tiny.gguf")
    profile = shutil.copy(PROFILES / "tiny-ok.toml", folder / "tiny-ok.toml")

    app = VramtuiApp(profile_path=str(profile), live_sampling=True, remember=False)
    async with app.run_test(size=(200, 50)) as pilot:
        await wait_for(pilot, lambda: app.session is not None and app.session.state == "ready", timeout_s=90)
        pid = app.session.pid
        assert pid is not None
        pids = tree_of(pid)
        memory = app.query_one(MemoryPane)
        log = app.query_one(LogPane)
        # the memory pane follows the model's process tree; the log pane its live output
        await wait_for(
            pilot, lambda: "process" in memory.state.series and memory.state.series["process"].history.peak
        )
        await wait_for(
            pilot, lambda: log.diagnosis is not None and log.diagnosis.stage in ("kv_cache", "ready")
        )
        # the bill reconciled at ready, under the log's diagnosis: llama.cpp's printed KV cache (2048
        # cells of f16, 4 layers of 512) beside the estimate's, and what the process tree held
        bill = log.query_one("#bill")
        await wait_for(pilot, lambda: bill.has_class("-shown"), timeout_s=20)
        shown = str(bill.content)
        assert "the bill at ready" in shown and "measured" in shown
        kv_row = next(line for line in shown.splitlines() if line.strip().startswith("KV cache"))
        assert kv_row.split()[2:6] == ["16.0", "MiB", "16.0", "MiB"], kv_row
        # the whole bill (the quadrant of the wide layout shows its first rows and says what it left out)
        assert log.bill is not None and "uncalibrated" in "\n".join(log.bill.lines)  # an empty run store
        memory.repaint(force=True)
        await pilot.pause()
        text = screen_text(app)
        assert "model process" in text
        assert "ready (pid" in text  # the status line
        # The wizard pane: n is for a launch that fails, so it says how to get there from a running model.
        hint = app.query_one(WizardPane).state_text
        assert "ready (pid" in hint and hint.endswith("stop the model (s), then press n")
        # and no Confirm is drawn beside a running model with no wizard (QA 14)
        await wait_for(pilot, lambda: app.query_one("#wiz-confirm").has_class("-idle"), timeout_s=10)

        # r relaunches: the old server goes, a new one comes up
        await pilot.press("r")
        await wait_for(
            pilot, lambda: app.session.pid not in (None, pid) and app.session.state == "ready", timeout_s=90
        )
        await wait_for(pilot, lambda: not alive(pids), timeout_s=15)
        pid = app.session.pid
        pids = tree_of(pid)

        await pilot.press("q")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmQuit))
        assert app.screen.question.endswith("Stop it and quit?")  # type: ignore[attr-defined]
        assert f"pid {pid}" in app.screen.question  # type: ignore[attr-defined]
        await pilot.press("n")  # keep it running
        await wait_for(pilot, lambda: not isinstance(app.screen, ConfirmQuit))
        assert alive([pid]) == [pid]
        await pilot.press("q")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmQuit))
        await pilot.press("y")
        await wait_for(pilot, lambda: not app.is_running or app.return_value == 0, timeout_s=30)
    deadline = time.monotonic() + 10
    while alive(pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert alive(pids) == [], "the model server or one of its children outlived the app"
    assert app.return_value == 0


async def test_demo_wizard_brings_the_failing_demo_up_with_confirmed_steps() -> None:
    """`vramtui demo` in the app: the first launch fails for real (budget too small for the KV
    cache), the wizard proposes one change at a time, the user confirms with n, it runs."""
    app = VramtuiApp(demo=True, live_sampling=False, remember=False)
    async with app.run_test(size=(200, 50)) as pilot:
        wizard = app.query_one(WizardPane)
        log = app.query_one(LogPane)
        await wait_for(
            pilot,
            lambda: wizard.proposal is not None or (wizard.driver and wizard.driver.finished),
            timeout_s=150,
        )
        first = wizard.steps[0]
        assert first.outcome == "first_run" and first.observation.failure  # it failed for real
        assert log.diagnosis is not None and log.diagnosis.failed  # the log pane read that attempt
        assert "Next change:" in screen_text(app)
        # edit the proposed value in place before confirming it
        proposed = wizard.proposal
        await pilot.click("#wiz-edit-button")
        await pilot.pause()
        await pilot.press(*"16384", "enter")  # the proposed value is selected: typing replaces it
        await wait_for(pilot, lambda: wizard.proposal is not proposed)
        assert wizard.proposal.param == proposed.param and wizard.proposal.to == 16384
        for _ in range(4):
            if wizard.driver.finished:
                break
            await pilot.press("n")
            await wait_for(
                pilot,
                lambda: not wizard.busy and (wizard.proposal is not None or wizard.driver.finished),
                timeout_s=150,
            )
        assert wizard.driver.finished
        assert wizard.steps[-1].outcome == "works"
        assert wizard.steps[1].proposal.to == 16384  # the edited value is what ran
        assert "IT RUNS" in screen_text(app)
        assert wizard.query_one("#wiz-confirm").disabled  # nothing left to confirm (QA)
        assert len(wizard.steps) <= 4  # at most two relaunches after the first failure, plus margin
        # the working profile is launched for the user and quitting stops it
        await wait_for(pilot, lambda: app.session is not None and app.session.state == "ready", timeout_s=90)
        pids = tree_of(app.session.pid)
        # At 80 columns the status line (tabs and the running model) fits whole, in shorter words.
        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        status = [row for row in screen_text(app).splitlines() if " 1 Mem" in row]
        assert len(status) == 1 and "…" not in status[0], status
        assert f"{app.session.describe(short=True)}" in status[0] and f"(pid {app.session.pid})" in status[0]
        await pilot.resize_terminal(200, 50)
        await pilot.pause()
        paths = wizard.driver.export()
        assert paths[0].read_text().count("|") > 10 and paths[1].read_text().count("\n") >= len(wizard.steps)
        # the record ends with its verdict: it reopens as a finished, successful session
        record = open_session(wizard.driver.wizard.record_path)
        assert record.finished and record.success
        assert "- result: works" in paths[0].read_text()
        await pilot.press("q")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmQuit))
        await pilot.press("y")
        await wait_for(pilot, lambda: not app.is_running or app.return_value == 0, timeout_s=30)
    deadline = time.monotonic() + 10
    while alive(pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert alive(pids) == []


async def test_skipping_a_proposal_asks_for_another_rung_without_a_relaunch() -> None:
    app = VramtuiApp(demo=True, live_sampling=False, remember=False)
    async with app.run_test(size=(200, 50)) as pilot:
        wizard = app.query_one(WizardPane)
        await wait_for(pilot, lambda: wizard.proposal is not None, timeout_s=150)
        skipped = wizard.proposal
        steps = len(wizard.steps)
        await pilot.click("#wiz-skip")
        await wait_for(pilot, lambda: not wizard.busy and wizard.proposal is not skipped, timeout_s=60)
        assert len(wizard.steps) == steps  # skipping launches nothing
        if wizard.proposal is not None:
            assert wizard.proposal.param != skipped.param
        else:
            assert wizard.driver.finished and "stopped" in wizard.state_text
        assert skipped.param in wizard.driver.skipped
        # the core wizard skipped it: the record says so, and no step was taken for it
        assert wizard.driver.wizard.skipped == [skipped]
        lines = wizard.driver.wizard.record_path.read_text().splitlines()
        assert any('"type": "skip"' in line and f'"param": "{skipped.param}"' in line for line in lines)


async def test_a_launched_models_log_pane_shows_the_servers_own_tags_and_diagnosis(
    tiny_gguf: Path, tmp_path: Path
) -> None:
    """One log engine per run: the pane shows the lines as the server's engine tagged them and that
    engine's diagnosis (a real failure: the KV cache does not fit the budget), the first error where
    the server's engine found it, under the same number."""
    from vramtui.tui.widgets.logview import display_text

    folder = tmp_path / "profile"
    folder.mkdir()
    shutil.copy(tiny_gguf, folder / "tiny.gguf")
    profile = shutil.copy(PROFILES / "tiny-kv-too-big.toml", folder / "tiny-kv-too-big.toml")
    app = VramtuiApp(profile_path=str(profile), live_sampling=False, remember=False)
    async with app.run_test(size=(200, 50)) as pilot:
        log = app.query_one(LogPane)
        await wait_for(pilot, lambda: app.session is not None and app.session.state == "exited", timeout_s=90)
        await wait_for(pilot, lambda: log.finished, timeout_s=30)
        server = app.session.server
        assert log.feed is not None and log.feed.diagnoser is None  # no second log engine in the pane
        theirs = server.diagnosis()
        assert theirs.failed and theirs.failure_stage == "kv_cache"
        assert log.diagnosis.to_dict() == theirs.to_dict()

        view = log.view
        # The view: every line the server recorded, with the server's tags and numbers (its log engine
        # read them all here: no budget watch or timeout notes), the launcher's own launch line first.
        assert view.lines[0].text.startswith("vramtui: launch ")
        assert [(line.text, line.stage, line.severity, line.number) for line in view.lines] == [
            (display_text(line.text), line.stage, line.severity, line.number) for line in server.lines
        ]
        assert [line.number for line in view.lines] == list(range(1, len(view.lines) + 1))
        # The first error: the server's engine's line N is the view's line N, and the header says N.
        number = theirs.first_error_line
        assert view.first_error == number - 1
        assert view.lines[view.first_error].text == display_text(server.lines[number - 1].text)
        assert view.lines[view.first_error].severity == "error"
        text = screen_text(app)
        assert "FAILED" in text and f"first error, line {number} (key" in text  # "e)" may wrap


async def test_e_lands_on_and_marks_the_first_error_of_a_real_failed_launch(tmp_path: Path) -> None:
    """A profile whose model file is missing: llama-cpp-python's server dies with a traceback whose
    last line is the cause. The header's line number, the gutter's and the log engine's are one
    number, and `e` marks that very line with ▶ (not the `raise` line above it)."""
    from vramtui.tui.widgets.logview import display_text

    missing = tmp_path / "nope.gguf"
    profile = tmp_path / "missing.toml"
    profile.write_text(f'backend = "llama-cpp-python"\nmodel = "{missing}"\n', encoding="utf-8")
    app = VramtuiApp(profile_path=str(profile), live_sampling=False, remember=False)
    async with app.run_test(size=(200, 50)) as pilot:
        log = app.query_one(LogPane)
        await wait_for(pilot, lambda: app.session is not None and app.session.state == "exited", timeout_s=60)
        await wait_for(pilot, lambda: log.finished, timeout_s=30)
        diagnosis = app.session.server.diagnosis()
        number = diagnosis.first_error_line
        assert diagnosis.failed and number and "does not exist" in diagnosis.first_error_text
        view = log.view
        assert view.lines[number - 1].text == display_text(diagnosis.first_error_text)
        assert view.lines[number - 2].text.lstrip().startswith("raise ")  # the line the old mapping chose

        await pilot.press("e")
        await pilot.pause()
        assert view.marked == number - 1 == view.first_error
        text = screen_text(app)
        assert f"first error, line {number} (key" in text  # "e)" may wrap
        marked_rows = [row for row in text.splitlines() if "▶" in row]
        assert len(marked_rows) == 1
        assert f"{number} " in marked_rows[0] and "Model path does not exist" in marked_rows[0]

        # Inside `vramtui run`, the wizard pane says how to start the wizard on this very profile.
        wizard = app.query_one(WizardPane)
        assert wizard.driver is None
        assert wizard.state_text.endswith(
            "press n to start the wizard on this profile (one change at a time)"
        )
        assert "vramtui run PROFILE" not in screen_text(app)


async def test_the_first_footprint_measurement_runs_off_the_ui_thread(
    llama_server_bin: Path, tiny_gguf: Path, tmp_path: Path
) -> None:
    """Issue 22 defect 15: the first time the wizard meets an engine binary under a host budget, it starts
    the engine once to measure its idle footprint (core/launch/footprint.py, seconds). That ran on the UI
    thread, in the pane's `start_profile`: the app froze. Now it runs on the wizard's thread, the pane says
    so, and the screen keeps drawing. (The tests' cache dir is their own, emptied: this binary is not measured
    yet.)"""
    import asyncio
    import itertools

    from vramtui.core.launch.footprint import cache_file, measured_already

    cache_file().unlink(missing_ok=True)  # the measurements the tests' conftest carried in
    profile = Profile(
        backend="llama.cpp",
        model=str(tiny_gguf),
        program=str(llama_server_bin),
        params={"context": 512},
        memory_budget=1024 * 2**20,
        port=0,
    )
    assert not measured_already(profile)
    app = VramtuiApp(live_sampling=False, remember=False)
    async with app.run_test(size=(200, 50)) as pilot:
        pane = app.query_one(WizardPane)
        ticks: list[float] = []
        timer = app.set_interval(0.05, lambda: ticks.append(time.monotonic()))
        states: list[str] = []
        started = time.monotonic()
        pane.start_profile(profile)
        pane.driver.launch_first()  # type: ignore[union-attr]
        handed_back = time.monotonic() - started
        while not measured_already(profile) and time.monotonic() - started < 60:
            states.append(pane.state_text)
            await asyncio.sleep(0.05)
        assert measured_already(profile)
        measured_in = time.monotonic() - started
        await wait_for(pilot, lambda: len(pane.steps) >= 1 and not pane.busy, timeout_s=120)
        timer.stop()
        assert handed_back < 0.5, handed_back  # the pane's call returns at once
        # The screen kept its pace while the engine was measured (a loaded 2-core machine stalls a
        # frame now and then: the freeze this guards against lasted the whole measurement).
        measuring = [tick for tick in ticks if tick <= started + measured_in]
        gaps = [b - a for a, b in itertools.pairwise(measuring)]
        assert gaps and max(gaps) < 2.0, (max(gaps), measured_in)
        assert any("idle memory" in state for state in states), states[:5]
