"""The wizard pane's steps table says what `wizard --attach` says of a server vramtui did not start."""

from __future__ import annotations

from types import SimpleNamespace

from vramtui.core.wizard.observe import Observation
from vramtui.tui.panes.wizard_driver import step_row


def _step(obs: Observation) -> SimpleNamespace:
    return SimpleNamespace(index=0, proposal=None, observation=obs, outcome="first_run", notes=[])


def test_an_attached_server_over_its_budget_runs_it_did_not_fail() -> None:
    """QA 7: step 0 read 'first launch · failed (first launch) · inference ✖ host out of memory' for a
    healthy server over a 50 MiB budget, where the CLI said 'it runs at 63 MiB, over the 50 MiB budget'."""
    over = Observation(
        ready=False, smoke_ok=True, stage="inference", failure_stage="inference", failure="host_oom",
        peak_mib=63.0, resident_mib=60.0, budget_mib=50.0,
    )  # fmt: skip
    row = step_row(1, _step(over), attached=True)
    assert row[1] == "as it runs now" and row[2] == "runs, over budget"
    assert row[3] == "63.0 MiB of a 50.0 MiB budget" and "out of memory" not in " ".join(row)
    assert step_row(1, _step(over), compact=True, attached=True)[2] == "over budget"


def test_a_launched_first_run_is_still_the_first_launch() -> None:
    failed = Observation(
        ready=False, smoke_ok=False, stage="kv_cache", failure_stage="kv_cache", failure="cuda_oom"
    )
    row = step_row(1, _step(failed))
    assert row[1] == "first launch" and "out of memory" in row[3]


def test_the_status_line_of_an_attached_server_over_its_budget_says_it_runs() -> None:
    """QA 8: the table said 'runs, over budget', the status line 'failed (first launch)'."""
    from vramtui.tui.panes.wizard_driver import WizardDriver

    over = Observation(
        ready=False, smoke_ok=True, stage="inference", failure_stage=None, failure="host_oom",
        peak_mib=64.0, budget_mib=50.0,
    )  # fmt: skip
    step = SimpleNamespace(index=0, proposal=None, observation=over, outcome="first_run", notes=[])
    said = WizardDriver._state_after(SimpleNamespace(), step)  # type: ignore[arg-type]
    assert said == "step 0: runs, over budget — it runs at 64 MiB, over the 50 MiB budget"
