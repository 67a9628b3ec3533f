"""Issue 13 defect 13, the keys: what the footer shows, Skip and Edit keys, `ctrl+q` asking first,
the quant hint whole at 80 columns; issue 22 defects 5 and 32: `3` then `4` keeps the estimator's
fields (Enter or Tab goes into them), ctrl+c quits as q does.

Each test fails on the code before the fix (`git show 520d9c7:vramtui/tui/app.py` and the panes):
there `s`, `x`, `z`, `g` and `1`-`4` were bound with `show=False`, the wizard pane had no bindings
(its buttons read "Skip" and "Edit"), `Pane.focus_target` gave the estimator its focusable scroll
container rather than a field, `ctrl+q` was Textual's own quit (no confirmation), and the quant
placeholder read "q4_k_m, q8_0, f16, nf4, awq…", wider than its field at 80 columns.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from test_tui_support import screen_text, wait_for
from test_wizard import ReplayedRuns, _demo_profile
from textual.pilot import Pilot
from textual.widgets import Footer, Input
from textual.widgets._footer import FooterKey

from vramtui.core.wizard.proposal import value_word
from vramtui.tui.app import ConfirmQuit, VramtuiApp
from vramtui.tui.panes.estimator import FIELDS, EstimatorPane
from vramtui.tui.panes.wizard import WizardPane

PROFILES = Path(__file__).resolve().parents[1] / "data" / "profiles"
PANE_KEYS = {"1", "2", "3", "4"}

# The wizard's arithmetic on runs replayed from test_wizard: its engine share, as there, the backend's figure.
pytestmark = pytest.mark.usefixtures("assumed_engine_share")


def quiet_app(**kwargs: object) -> VramtuiApp:
    kwargs.setdefault("live_sampling", False)
    kwargs.setdefault("remember", False)
    return VramtuiApp(**kwargs)  # type: ignore[arg-type]


def footer_keys(app: VramtuiApp) -> set[str]:
    """The keys the footer draws: its key widgets that are shown inside the screen."""
    screen = app.screen.region
    return {
        key.key
        for key in app.screen.query(FooterKey)
        if key.display and key.region.width > 0 and screen.contains_region(key.region)
    }


def footer_row(app: VramtuiApp) -> str:
    return screen_text(app).splitlines()[-1]


def footer_fits(app: VramtuiApp) -> bool:
    """One row, and nothing scrolled off to the right."""
    footer = app.screen.query_one(Footer)
    return footer.size.height == 1 and footer.virtual_size.width <= footer.size.width


def running_app(tiny_gguf: Path, tmp_path: Path) -> VramtuiApp:
    """The app on the smallest real profile: llama-cpp-python serving the tiny GGUF on the CPU."""
    folder = tmp_path / "profile"
    folder.mkdir()
    shutil.copy(tiny_gguf, folder / "tiny.gguf")
    profile = shutil.copy(PROFILES / "tiny-ok.toml", folder / "tiny-ok.toml")
    return quiet_app(profile_path=str(profile))


async def wizard_with_a_proposal(app: VramtuiApp, pilot: Pilot, tiny_gguf: Path, folder: Path) -> WizardPane:
    """The wizard pane, opened with its key, after a failed first run (a real llama-cpp-python log,
    replayed) and its first proposal from the real core wizard."""
    await pilot.press("4")
    pane = app.query_one(WizardPane)
    folder.mkdir(exist_ok=True)
    profile = _demo_profile(tiny_gguf)
    pane.start_profile(profile, first_check=ReplayedRuns(folder)(profile))
    pane.driver.launch_first()  # type: ignore[union-attr]
    await wait_for(pilot, lambda: pane.proposal is not None and not pane.busy, timeout_s=30)
    return pane


async def test_the_footer_shows_the_pane_and_graph_keys_and_fits_one_line_at_80x24() -> None:
    app = quiet_app()
    async with app.run_test(size=(200, 50)) as pilot:
        await wait_for(pilot, lambda: PANE_KEYS | {"z", "g"} <= footer_keys(app), timeout_s=10)
        assert "Pane" in footer_row(app) and "Graph" in footer_row(app)
        assert footer_fits(app)
    app = quiet_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert app.narrow
        # One pane at a time: its own keys (the graph's with the memory pane) and the pane keys. The
        # footer is recomposed after the narrow layout is applied: on a loaded machine, a frame later.
        await wait_for(pilot, lambda: PANE_KEYS | {"z", "g"} <= footer_keys(app), timeout_s=10)
        assert footer_fits(app), (app.screen.query_one(Footer).virtual_size, footer_row(app))


async def test_the_footer_shows_export_once_the_wizard_has_a_step(tiny_gguf: Path, tmp_path: Path) -> None:
    for size in ((200, 50), (80, 24)):
        app = quiet_app()
        async with app.run_test(size=size) as pilot:
            await wizard_with_a_proposal(app, pilot, tiny_gguf, tmp_path / f"runs-{size[0]}")
            keys = footer_keys(app)
            assert {"x", "k", "v"} <= keys, (size, keys)
            assert "Export" in footer_row(app)
            assert footer_fits(app), (size, footer_row(app))


async def test_k_skips_and_v_edits_the_proposal_in_the_wizard_pane(tiny_gguf: Path, tmp_path: Path) -> None:
    app = quiet_app()
    async with app.run_test(size=(200, 50)) as pilot:
        pane = await wizard_with_a_proposal(app, pilot, tiny_gguf, tmp_path)
        proposal = pane.proposal
        assert app.focused is not None and pane in app.focused.ancestors_with_self

        await pilot.press("v")  # Edit: the value field opens, focused, holding the proposed value
        edit = pane.query_one("#wiz-edit", Input)
        await wait_for(pilot, lambda: edit.has_class("-visible") and app.focused is edit)
        assert edit.value == value_word(proposal.to)
        # QA 6: the prefilled box said nothing of the setting it edits; its label asks as the CLI does
        label = pane.query_one("#wiz-edit-label")
        assert label.has_class("-visible")
        assert f"new value for {proposal.param} (now {value_word(proposal.from_)}" in str(label.render())
        await pilot.press("escape")
        await wait_for(pilot, lambda: not edit.has_class("-visible") and not label.has_class("-visible"))
        # QA 5: an edited value its own estimate says will not fit is said before Confirm relaunches it
        await pilot.press("v")
        await wait_for(pilot, lambda: app.focused is edit)
        await pilot.press(*"131072", "enter")
        await wait_for(pilot, lambda: pane.proposal is not None and pane.proposal.to == 131072)
        said = [n.message for n in app._notifications]
        assert any("will not fit; Confirm relaunches it anyway" in m for m in said), said
        assert "will not fit" in pane.proposal.why  # QA 17 F22: not only in a toast that goes

        pane.query_one("#wiz-confirm").focus()  # back on the pane's buttons, as after tabbing there
        await pilot.press("k")  # Skip: the core wizard records the setting as turned down
        await wait_for(pilot, lambda: proposal.param in pane.driver.skipped and not pane.busy)  # type: ignore[union-attr]
        assert pane.proposal is not proposal


async def test_3_then_4_switches_panes_and_keeps_the_model_path() -> None:
    """Issue 22 defect 5: `3` put the focus in the model field with its text selected, so the `4` that
    followed (the README's pane keys) replaced the path. Digits switch panes until the user tabs
    (or clicks) into a field; then typing lands in it."""
    app = quiet_app()
    async with app.run_test(size=(200, 50)) as pilot:
        pane = app.query_one(EstimatorPane)
        model = pane.query_one(f"#est-{FIELDS[0].name}", Input)
        model.value = "/models/qwen.gguf"
        await pilot.press("1", "3")
        assert app.active_pane == "estimator"
        assert app.focused is not None and pane in app.focused.ancestors_with_self
        await pilot.press("4")
        assert app.active_pane == "wizard"
        assert model.value == "/models/qwen.gguf"
        await pilot.press("3", "2", "3")
        assert app.active_pane == "estimator" and model.value == "/models/qwen.gguf"

        await pilot.press("tab")  # into the first field: from now on keys are typed
        assert app.focused is model
        await pilot.press("end", *"x")
        assert model.value == "/models/qwen.ggufx"
        await pilot.press("escape", "2")  # out of the form: digits are pane keys again
        assert app.active_pane == "log" and model.value == "/models/qwen.ggufx"


async def test_enter_in_the_estimator_pane_goes_into_the_first_field() -> None:
    app = quiet_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("3")
        first = app.query_one(EstimatorPane).query_one(f"#est-{FIELDS[0].name}", Input)
        assert app.focused is not first
        await pilot.press("enter")
        assert app.focused is first
        await pilot.press(*"abc")
        assert first.value == "abc"


async def test_ctrl_c_quits_when_no_model_runs() -> None:
    """Issue 22 defect 32: ctrl+c did nothing and said nothing (Textual's own hint looks for an action
    named `quit`, and the app's is `quit_app`)."""
    app = quiet_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("ctrl+c")
        await wait_for(pilot, lambda: not app.is_running or app.return_value == 0, timeout_s=5)
    assert app.return_value == 0


async def test_the_quant_hint_is_whole_at_80_columns() -> None:
    quant = next(spec for spec in FIELDS if spec.name == "quant")
    assert quant.placeholder
    app = quiet_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("3")
        await pilot.pause()
        field = app.query_one("#est-quant", Input)
        assert field.value == "" and field.region.width > 0
        assert quant.placeholder in screen_text(app)


@pytest.mark.engine
async def test_ctrl_q_asks_like_q_while_a_model_runs(tiny_gguf: Path, tmp_path: Path) -> None:
    app = running_app(tiny_gguf, tmp_path)
    async with app.run_test(size=(200, 50)) as pilot:
        # ready, not only starting: the question names the state, which must not change between the two
        await wait_for(pilot, lambda: app.session is not None and app.session.state == "ready", timeout_s=60)
        pid = app.session.pid  # type: ignore[union-attr]

        await pilot.press("q")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmQuit))
        question = app.screen.question  # type: ignore[attr-defined]
        await pilot.press("n")
        await wait_for(pilot, lambda: not isinstance(app.screen, ConfirmQuit))

        await pilot.press("ctrl+q")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmQuit))
        assert app.screen.question == question and f"pid {pid}" in question  # type: ignore[attr-defined]
        await pilot.press("n")  # keep it running: the app is still there, the model too
        await wait_for(pilot, lambda: not isinstance(app.screen, ConfirmQuit))
        assert app.is_running and app.session.running  # type: ignore[union-attr]
        await pilot.press("ctrl+c")  # issue 22 defect 32: the same question
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmQuit))
        assert app.screen.question == question  # type: ignore[attr-defined]
        await pilot.press("n")
        await wait_for(pilot, lambda: not isinstance(app.screen, ConfirmQuit))
        await wait_for(pilot, lambda: "s" in footer_keys(app))  # Stop shows while it runs
        assert "Stop" in footer_row(app)

        await pilot.press("ctrl+q")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmQuit))
        await pilot.press("y")
        await wait_for(pilot, lambda: not app.is_running or app.return_value == 0, timeout_s=30)
    assert app.return_value == 0


async def test_question_mark_and_f1_open_the_keys_panel_and_close_it() -> None:
    """QA: ? and F1 did nothing; the keys were only under ctrl+p."""
    from textual.widgets import HelpPanel

    app = quiet_app()
    async with app.run_test(size=(200, 50)) as pilot:
        for key in ("question_mark", "f1"):
            await pilot.press(key)
            await pilot.pause()
            assert app.screen.query(HelpPanel), key
            await pilot.press(key)
            await pilot.pause()
            assert not app.screen.query(HelpPanel), key
        await pilot.press("question_mark")
        await pilot.pause()
        assert app.screen.query(HelpPanel)
        await pilot.press("escape")  # QA 5: only ? closed it
        await pilot.pause()
        assert not app.screen.query(HelpPanel)


async def test_escape_closes_the_keys_panel_after_a_search_in_the_log_pane(tmp_path: Path) -> None:
    """QA 6: at 80x24, after a search in the log pane, Esc went to the pane's (closed) search and the keys
    panel stayed open; Esc closes the search while it is open, and the panel after."""
    from textual.widgets import HelpPanel

    log = tmp_path / "server.log"
    log.write_text("llama_context: n_ctx = 4096\nmain: server is listening on http://127.0.0.1:8080\n")
    app = quiet_app(log_file=str(log))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("2", "slash", "n", "_", "c", "t", "x", "enter")
        await pilot.press("escape")  # the open search closes first
        await pilot.pause()
        assert not app.query_one("#log-search", Input).has_class("-visible")
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: bool(app.screen.query(HelpPanel)))
        await pilot.press("escape")
        await wait_for(pilot, lambda: not app.screen.query(HelpPanel))


async def test_a_wizard_that_stopped_after_skips_starts_again_on_n(tiny_gguf: Path, tmp_path: Path) -> None:
    """QA: skipping every proposal stopped the wizard and took `n` away: the only way back was to quit."""
    app = quiet_app()
    async with app.run_test(size=(200, 50)) as pilot:
        pane = await wizard_with_a_proposal(app, pilot, tiny_gguf, tmp_path)
        first = pane.driver
        for _ in range(8):  # skip until the wizard has no setting left
            if first.finished:  # type: ignore[union-attr]
                break
            pane.query_one("#wiz-confirm").focus()
            await pilot.press("k")
            await wait_for(pilot, lambda: not pane.busy and (pane.proposal is not None or first.finished))  # type: ignore[union-attr]
        assert first.finished and not first.succeeded  # type: ignore[union-attr]
        assert "n: start again" in pane.state_text
        confirm = pane.query_one("#wiz-confirm")
        assert str(confirm.label) == "Start again (n)" and not confirm.disabled  # the button says what n does
        assert app.check_action("wizard_next", ()) is True
        await pilot.press("n")
        await wait_for(pilot, lambda: pane.driver is not first and pane.proposal is not None, timeout_s=60)
        assert not pane.driver.skipped  # type: ignore[union-attr]


async def test_at_80x24_the_bill_leaves_the_log_view_its_rows(tmp_path: Path) -> None:
    """QA 7: at 80x24 the header and the bill at ready (each term wrapped onto two rows) took every row of
    the log pane: no log line showed and a search jumped to a line nobody could see. The bill keeps a
    third of the pane, a row per term, and says what it left out."""
    from vramtui.core.memory.parts import MemoryBill
    from vramtui.core.memory.reconcile import reconcile
    from vramtui.tui.messages import BillReconciled
    from vramtui.tui.panes.log import LogPane

    estimate, printed = MemoryBill(), MemoryBill()
    for place in (0, None):
        for part, mib in (("weights", 4000), ("kv_cache", 512), ("compute", 300), ("output", 1)):
            estimate.add(place, part, mib << 20)
            printed.add(place, part, (mib + 7) << 20)
    bill = reconcile(estimate, printed, {0: 5000 << 20})
    log = tmp_path / "server.log"
    log.write_text("".join(f"line {n} of the server's log\n" for n in range(200)))
    app = quiet_app(log_file=str(log))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("2")
        pane = app.query_one(LogPane)
        pane.post_message(BillReconciled(bill.lines(), "the bill at ready:", bill.lines))
        await wait_for(pilot, lambda: pane.bill is not None)
        await pilot.pause()
        shown = str(pane.query_one("#bill").render())
        assert pane.view.size.height >= 5, pane.view.size
        assert "more lines of the bill" in shown, shown
        rows = shown.split("\n")
        assert all(len(row) <= pane.content_size.width for row in rows), rows
        await pilot.resize_terminal(200, 80)  # a third of a tall pane holds it whole
        await pilot.pause()
        assert "more lines of the bill" not in str(pane.query_one("#bill").render()), pane.size
