"""The wizard pane: the proposed next change and why, confirm / skip / edit, run state, steps so far."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from rich.cells import cell_len
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.events import Resize
from textual.message import Message
from textual.widgets import Button, DataTable, Input, Static

from vramtui.core.errors import VramtuiError
from vramtui.tui.palette import theme_style
from vramtui.tui.panes.base import Pane
from vramtui.tui.words import in_words

if TYPE_CHECKING:
    from vramtui.tui.panes.wizard_driver import WizardDriver

STEP_COLUMNS = ("#", "change", "outcome", "stage", "peak", "resident")
# Under this many columns for the table the full one is cut at the right (its rows need about 94):
# show the outcome in a word, no resident column, and the long texts cut to what is left.
COMPACT_COLUMNS = ("#", "change", "outcome", "stage", "peak")
COMPACT_BELOW = 96
# Fixed widths of the compact table's short columns (#, outcome, peak); change and stage share the rest.
COMPACT_FIXED = {"#": 2, "outcome": 11, "peak": 9}


class WizardUpdate(Message):
    """Posted from the wizard's thread: state text, a new proposal, a finished step, the end."""

    def __init__(
        self,
        state: str,
        *,
        proposal: Any = None,
        step: Any = None,
        done: bool = False,
        error: str | None = None,
    ) -> None:
        super().__init__()
        self.state = state
        self.proposal = proposal
        self.step = step
        self.done = done
        self.error = error


def session_wizard_hint(session: Any) -> str:
    """What the wizard pane says while a profile is launched and no wizard runs: how to start one."""
    where = session.describe()
    if session.state in ("starting", "ready"):
        # n is refused while the model runs (the wizard is for a launch that fails): say so up front.
        return f"{where} — to start the wizard on this profile, stop the model (s), then press n"
    return f"{where} — press n to start the wizard on this profile (one change at a time)"


def column_widths(
    compact: bool, width: int, rows: list[tuple[str, ...]], headings: dict[str, str]
) -> dict[str, int]:
    """The steps table's column widths: the compact layout shares the pane's width out; the full one
    fits each column to its longest cell."""
    if compact:
        # Each column takes its width plus one cell of padding on each side.
        rest = width - sum(COMPACT_FIXED.values()) - 2 * len(COMPACT_COLUMNS) - 1
        change_width = max(8, rest * 11 // 20)
        widths = {**COMPACT_FIXED, "change": change_width, "stage": max(6, rest - change_width)}
        return {name: widths[name] for name in COMPACT_COLUMNS}
    return {
        name: max([cell_len(headings.get(name, name))] + [cell_len(row[index]) for row in rows])
        for index, name in enumerate(STEP_COLUMNS)
    }


def proposal_text(pane: WizardPane) -> Text:
    """The proposed change and why, and the note on a run whose layers ended on the CPU."""
    app, proposed = pane.app, pane.proposal
    proposal = Text()
    if proposed is not None:
        proposal.append("Next change: ", style="bold")
        proposal.append(f"{proposed.param} ", style=theme_style(app, "accent", bold=True))
        proposal.append(proposed.change(), style="bold")
        proposal.append(f"\nwhy: {in_words(proposed.why)}")
        if pane._attached_proposal() is not None:
            from vramtui.tui.panes.wizard_attached import two_ways

            two_ways(proposal, pane.driver, proposed)
        else:
            proposal.append(
                "\nConfirm (n) relaunches with this one change; Skip tries the next rung.", style="dim"
            )
    if pane.slow:
        proposal.append("\n" if proposal else "")
        proposal.append("⚠ ", style=theme_style(app, "log-warning", bold=True))
        proposal.append(f"{pane.slow[0]} — press f for the fastest setup that stays on the GPU")
        for line in pane.on_gpu_text:
            proposal.append(f"\n{line}")
    return proposal


class WizardPane(Pane):
    PANE_TITLE = "Wizard"
    PANE_KEY = "4"

    # Skip and Edit without tabbing through the buttons: active while the wizard pane has focus.
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("k", "skip", "Skip"),
        Binding("v", "edit", "Edit"),
        # answered whatever the log shows (the pane says "press f" when it offers the goal; QA: a silent f)
        Binding("f", "on_gpu", "On GPU", show=False),
        # On a server vramtui did not start (wizard_attached.py): the second way, and the command.
        Binding("o", "take_over", "Take over"),
        Binding("c", "copy_command", "Copy command"),
    ]

    DEFAULT_CSS = """
    WizardPane #wiz-state { height: auto; }
    WizardPane #wiz-proposal { height: auto; margin-top: 1; }
    WizardPane #wiz-buttons { height: 1; margin: 1 0 0 0; }
    WizardPane #wiz-buttons Button { margin-right: 1; min-width: 10; }
    WizardPane #wiz-buttons Button.-idle { display: none !important; }  /* nothing to act on: not drawn */
    WizardPane #wiz-buttons .-attached { display: none; }
    WizardPane.-attached #wiz-buttons .-attached { display: block; }
    WizardPane.-attached #wiz-export { display: none; }  /* x still exports: room for the two ways */
    WizardPane #wiz-edit { display: none; height: 1; border: none; padding: 0 1; background: $boost; }
    WizardPane #wiz-edit.-visible { display: block; }
    WizardPane #wiz-edit-label { display: none; height: 1; padding: 0 1; }
    WizardPane #wiz-edit-label.-visible { display: block; }
    WizardPane #wiz-ongpu { display: none; }
    WizardPane #wiz-ongpu.-visible { display: block; }
    WizardPane DataTable { height: 1fr; margin-top: 1; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.driver: WizardDriver | None = None
        self.proposal: Any = None
        self.steps: list[Any] = []
        self.state_text = "no wizard running: `vramtui demo` walks through one; `vramtui run PROFILE` too"
        self.busy = False
        self.profile_hint: Any = None  # the profile of the app's model session, for a wizard started with n
        self.compact: bool | None = None  # which steps table is shown (None: not laid out yet)
        self.slow: list[str] = []  # the log's "runs but slow" warnings: the on-GPU goal is offered
        self.slow_diagnosis: Any = None
        self.on_gpu_text: list[str] = []  # the on-GPU plan, once asked for (f)
        self.attached_view: Any = None  # a tui.attached.AttachedView: a server vramtui did not start
        self._table_width = 0

    def compose(self) -> ComposeResult:
        yield Static(id="wiz-state")
        yield Static(id="wiz-proposal")
        with Horizontal(id="wiz-buttons"):
            yield Button("Confirm (n)", id="wiz-confirm", compact=True, variant="primary")
            yield Button("Skip (k)", id="wiz-skip", compact=True)
            yield Button("Edit (v)", id="wiz-edit-button", compact=True)
            yield Button("Take it over (o)", id="wiz-take-over", compact=True, classes="-attached")
            yield Button("Copy (c)", id="wiz-copy", compact=True, classes="-attached")
            yield Button("Export (x)", id="wiz-export", compact=True)
            yield Button("On GPU (f)", id="wiz-ongpu", compact=True)
        yield Static(id="wiz-edit-label")  # which setting the box edits, as the CLI asks it
        yield Input(
            placeholder="value to try instead (Enter to apply, Esc to cancel)", id="wiz-edit", compact=True
        )
        table: DataTable[str] = DataTable(id="wiz-steps", zebra_stripes=True, cursor_type="row")
        yield table

    def on_mount(self) -> None:
        super().on_mount()
        self._fit_table()
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self.show())
        self.show()

    # -- driving ----------------------------------------------------------------------------------

    def attach(self, driver: Any) -> None:
        self.driver = driver
        self.app.refresh_bindings()
        self.show()

    def start_demo(self) -> None:
        from vramtui.tui.panes.wizard_driver import WizardDriver

        try:
            driver = WizardDriver.for_demo(self)
        except VramtuiError as error:
            self.state_text = f"demo unavailable: {error}"
            self.show()
            return
        self.attach(driver)
        driver.launch_first()

    def start_profile(self, profile: Any, first_check: Any = None) -> None:
        """A wizard on this profile; `first_check`: its launch that already failed (step 0 as is)."""
        from vramtui.tui.panes.wizard_driver import WizardDriver

        self.attach(WizardDriver(self, profile, first_check=first_check))

    def attach_server(self, view: Any) -> None:
        """The app watches a server vramtui did not start: n starts the wizard on it (two ways)."""
        from vramtui.tui.panes.wizard_attached import attached_hint

        self.attached_view = view
        self.add_class("-attached")
        if self.driver is None:
            self.state_text = attached_hint(view)
            self.show()

    def start_attached(self, **options: Any) -> bool:
        from vramtui.tui.panes.wizard_attached import AttachedDriver

        view = self.attached_view
        if view is None or view.profile is None:
            self.notify("vramtui cannot rebuild this server's command line: no change to propose.", timeout=5)
            return False
        self.attach(AttachedDriver(self, view, **options))
        assert self.driver is not None
        self.driver.launch_first()
        return True

    def session_changed(self, session: Any) -> None:
        """The app's model session changed: remember its profile for a wizard the user may start."""
        if session is not None:
            self.profile_hint = session.profile
            if self.driver is None:
                self.state_text = session_wizard_hint(session)
                self.show()

    def next_step(self) -> None:
        """`n`: confirm the proposal if there is one, else ask the wizard for one; after a wizard that
        stopped with no change left (skips included), start it again (QA: there was no way back)."""
        driver = self.driver
        if driver is not None and driver.finished and not driver.succeeded and self.attached_view is None:
            self.proposal, self.steps = None, []
            self.notify("Starting the wizard again: every setting can be proposed again.", timeout=4)
            self._launch(driver.profile)  # the profile it began from, skips forgotten
        elif driver is None and self.attached_view is not None:
            self.start_attached()
        elif driver is None:
            self._start_from_hint()
        elif self.busy:
            self.notify("The wizard is busy with the current step.", timeout=3)
        elif self.proposal is not None:
            driver.apply(self.proposal)
        elif not driver.finished:
            driver.propose()
        else:
            self.notify("The wizard has finished: export (x) keeps its steps.", timeout=3)

    def _launch(self, profile: Any, first_check: Any = None) -> None:
        self.start_profile(profile, first_check=first_check)
        assert self.driver is not None
        self.driver.launch_first()

    def _start_from_hint(self) -> None:
        """A wizard on the app's profile; its launch that failed, when it did, is step 0 as it is."""
        session = getattr(self.app, "session", None)
        if session is not None and session.running:
            self.notify(
                "The model is running: the wizard is for a launch that fails. Stop it (s) to start the "
                "wizard on this profile anyway.",
                timeout=6,
            )
        elif self.profile_hint is None:
            self.notify("No profile to work on: `vramtui run PROFILE` or `vramtui demo`.", timeout=4)
        else:
            failed = (
                session.failed_check if session is not None and session.profile is self.profile_hint else None
            )
            self._launch(self.profile_hint, first_check=failed)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("skip", "edit"):
            waiting = action == "skip" and getattr(self.driver, "busy_waiting", False)
            return waiting or (self.proposal is not None and not self.busy)
        if action in ("take_over", "copy_command"):
            return self._attached_proposal() is not None and (action == "copy_command" or not self.busy)
        return True

    def action_skip(self) -> None:
        if getattr(self.driver, "busy_waiting", False):
            self.driver.stop_waiting()  # type: ignore[union-attr]
            return
        self.skip()

    def _attached_proposal(self) -> Any:
        """The proposal on a server vramtui did not start (and has not taken over), else None."""
        driver = self.driver
        if self.proposal is None or not getattr(driver, "view", None) or driver.taken_over:  # type: ignore[union-attr]
            return None
        return self.proposal

    def action_take_over(self) -> None:
        """Ask first: a process vramtui did not start is stopped only after the user's yes."""
        from vramtui.tui.panes.wizard_attached import ask_take_over

        proposal = self._attached_proposal()
        if proposal is not None and not self.busy and self.driver is not None:
            ask_take_over(self, proposal)

    def action_copy_command(self) -> None:
        proposal = self._attached_proposal()
        if proposal is not None:
            shell = self.driver.change_for(proposal).shell  # type: ignore[union-attr]
            self.app.copy_to_clipboard(shell)
            self.notify("Copied the changed command (your terminal's clipboard).", timeout=3)

    def skip(self) -> None:
        if self.driver is not None and self.proposal is not None and not self.busy:
            self.driver.skip(self.proposal)

    @on(Button.Pressed, "#wiz-export")
    def export(self) -> None:
        if self.driver is None:
            self.notify("No wizard steps to export yet.", timeout=3)
            return
        try:
            paths = self.driver.export()
        except VramtuiError as error:
            self.notify(str(error), severity="error", timeout=6)
            return
        self.notify("Exported: " + ", ".join(str(path) for path in paths), timeout=8)

    def diagnosis_changed(self, diagnosis: Any) -> None:
        """The log pane's diagnosis changed: offer the on-GPU goal while it says "runs but slow"."""
        from vramtui.core.wizard.ongpu import host_placement

        slow = host_placement(diagnosis)
        self.slow_diagnosis = diagnosis if slow else None
        if slow != self.slow:
            self.slow, self.on_gpu_text = slow, []
            self.app.refresh_bindings()
            self.show()

    @on(Button.Pressed, "#wiz-ongpu")
    def action_on_gpu(self) -> None:
        if not self.slow:
            # QA 24 F8: on a CPU-only machine "no layer on the host CPU" read as false (every one is there)
            self.notify(
                "The log shows no GPU run with layers or experts left on the host CPU: nothing to move onto a GPU.",
                timeout=4,
            )
            return
        from vramtui.tui.panes.wizard_ongpu import on_gpu_lines

        profile_path = getattr(self.app, "profile_path", None)
        self.on_gpu_text = on_gpu_lines(self.slow_diagnosis, self.profile_hint, profile_path)
        self.show()

    @on(Button.Pressed, "#wiz-confirm")
    def _confirm(self) -> None:
        self.next_step()

    @on(Button.Pressed, "#wiz-skip")
    def _skip(self) -> None:
        self.action_skip()  # while waiting for a restart: stop waiting

    @on(Button.Pressed, "#wiz-take-over")
    def _take_over(self) -> None:
        self.action_take_over()

    @on(Button.Pressed, "#wiz-copy")
    def _copy(self) -> None:
        self.action_copy_command()

    @on(Button.Pressed, "#wiz-edit-button")
    def action_edit(self) -> None:
        if self.proposal is None:
            self.notify("Nothing proposed to edit yet (press n).", timeout=3)
            return
        edit = self.query_one("#wiz-edit", Input)
        from vramtui.core.wizard.proposal import value_word

        edit.value = value_word(self.proposal.to)  # "on", as the proposal reads, not True
        label = self.query_one("#wiz-edit-label", Static)
        label.update(
            f"new value for {self.proposal.param} (now {value_word(self.proposal.from_)}; "
            "Enter applies, Esc cancels):"
        )
        label.add_class("-visible")
        edit.add_class("-visible")
        edit.focus()
        edit.call_after_refresh(edit.action_select_all)  # typing replaces the proposed value

    @on(Input.Submitted, "#wiz-edit")
    def _edit_submitted(self, event: Input.Submitted) -> None:
        event.input.remove_class("-visible")
        self.query_one("#wiz-edit-label").remove_class("-visible")
        if self.driver is not None and self.proposal is not None:
            try:
                self.proposal = self.driver.edited(self.proposal, event.value)
            except VramtuiError as error:
                self.notify(str(error), severity="error", timeout=5)
                return
            warning = self.driver.fit_warning(self.proposal)
            if warning is not None:  # QA 5: said before the relaunch, which stays the user's call
                self.notify(f"{warning}; Confirm relaunches it anyway", severity="warning", timeout=8)
                self.proposal.why += f"; {warning}"  # and kept in the proposal until Confirm (QA 17 F22)
            self.show()

    def on_key(self, event: Any) -> None:
        if event.key == "escape":
            edit = self.query_one("#wiz-edit", Input)
            if edit.has_class("-visible"):
                edit.remove_class("-visible")
                self.query_one("#wiz-edit-label").remove_class("-visible")
                event.stop()

    @on(WizardUpdate)
    def _update(self, message: WizardUpdate) -> None:
        self.state_text = message.state
        self.busy = not message.done and message.proposal is None and message.step is None
        if message.proposal is not None or message.step is not None or message.done:
            self.proposal = message.proposal
        if message.step is not None:
            self.steps.append(message.step)
            self._fit_table(rows_changed=True)
            session = self.app.session  # type: ignore[attr-defined]
            # the status line tells a relaunch's fate, not "no model launched" nor the launch before it
            if session is None or (getattr(message.step, "index", 0) > 0 and not session.running):
                note = f"wizard {message.state}"
                if self.attached_view is not None:  # which process serves comes first
                    note = f"{self.attached_view.describe()} · {note}"
                self.app.launch_note = note  # type: ignore[attr-defined]
                self.app.update_status()  # type: ignore[attr-defined]
        if message.error:
            self.notify(message.error, severity="error", timeout=8)
        self.app.refresh_bindings()  # Skip, Edit and Export come and go with the proposal and the steps
        self.show()

    def on_attached_process(self, message: Any) -> None:
        """Another process serves the attached server now: the app's panes follow it."""
        from vramtui.tui.panes.wizard_attached import follow_process

        follow_process(self.app, message)

    # -- painting ---------------------------------------------------------------------------------

    def on_resize(self, event: Resize) -> None:
        self._fit_table()

    def _fit_table(self, *, rows_changed: bool = False) -> None:
        """The full steps table when it fits, else a compact one that never runs past the pane."""
        width = self.content_size.width or self.app.size.width
        compact = width < COMPACT_BELOW
        same_layout = compact == self.compact and (not compact or width == self._table_width)
        if same_layout and not rows_changed:
            return
        self.compact, self._table_width = compact, width
        from vramtui.tui.panes.wizard_driver import memory_headings, step_row

        attached = bool(getattr(self.driver, "attached", False))
        rows = [step_row(n, step, compact=compact, attached=attached) for n, step in enumerate(self.steps, 1)]
        table = self.query_one(DataTable)
        table.clear(columns=True)
        headings = memory_headings(self.steps)
        # Every column gets an explicit width: an auto-width column is measured on the table's next
        # idle, after a resize may already have drawn (and cached) the rows cut at the label's width.
        for name, column_width in column_widths(compact, width, rows, headings).items():
            table.add_column(headings.get(name, name), width=column_width)
        for row in rows:
            table.add_row(*row)

    def show(self) -> None:
        app = self.app
        state = Text(self.state_text)
        if self.busy:
            state.stylize(theme_style(app, "accent", bold=True))
        self.query_one("#wiz-state", Static).update(state)
        self.query_one("#wiz-ongpu", Button).set_class(bool(self.slow), "-visible")
        self.query_one("#wiz-proposal", Static).update(proposal_text(self))
        restart = self._attached_proposal() is not None
        driver = self.driver
        finished = driver is not None and driver.finished and self.attached_view is None
        confirm = self.query_one("#wiz-confirm", Button)
        label = "Restart it yourself (n)" if restart else "Confirm (n)"
        if finished and not driver.succeeded:  # type: ignore[union-attr]
            label = "Start again (n)"  # what `n` does then (next_step)
        if str(confirm.label) != label:
            confirm.label = label
            confirm.refresh(layout=True)  # its width follows the label
        has_proposal = self.proposal is not None and not self.busy
        # QA: still enabled after "IT RUNS", where it only said the wizard had finished
        done = finished and bool(driver.succeeded)  # type: ignore[union-attr]
        confirm.disabled = driver is None or self.busy or done
        skip = self.query_one("#wiz-skip", Button)
        waiting = bool(getattr(self.driver, "busy_waiting", False))  # k stops waiting for a restart
        if str(skip.label) != ("Stop waiting (k)" if waiting else "Skip (k)"):
            skip.label = "Stop waiting (k)" if waiting else "Skip (k)"
            skip.refresh(layout=True)
        skip.disabled = not (has_proposal or waiting)
        self.query_one("#wiz-edit-button", Button).disabled = not has_proposal
        self.query_one("#wiz-export", Button).disabled = not self.steps
        self.query_one("#wiz-take-over", Button).disabled = not (restart and not self.busy)
        self.query_one("#wiz-copy", Button).disabled = not restart
        gone = done or (driver is None and _nothing_to_confirm(self))
        for button in self.query("#wiz-buttons Button").results(Button):
            # QA 7, 8, 9: Confirm, Skip, Edit and Export drawn beside "stop the model (s), then press n"
            # Confirm stays drawn while it may come back, but not once the wizard is done (QA 12)
            button.set_class(button.disabled and (button.id != "wiz-confirm" or gone), "-idle")


def _nothing_to_confirm(pane: WizardPane) -> bool:
    """No wizard yet, and the model runs or there is nothing to start one on: `n` confirms nothing
    (QA 14, QA 17 F21)."""
    running = bool(getattr(getattr(pane.app, "session", None), "running", False))
    return running or (pane.profile_hint is None and pane.attached_view is None)
