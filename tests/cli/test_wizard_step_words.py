"""QA 31 W10: the wizard's step line said a code ("failed at launch: budget start")."""

from __future__ import annotations

from vramtui.cli.wizard import step_status


def test_a_launch_refused_for_its_budget_is_said_in_words() -> None:
    said = step_status({"outcome": "first_run", "failure_stage": "launch", "failure": "budget_start"})
    assert "budget below what the engine needs to start" in said and "budget start" not in said
