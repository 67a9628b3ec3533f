"""QA 31 W10: the wizard's step line said a code ("failed at launch: budget start")."""

from __future__ import annotations

from vramtui.cli.wizard import step_status


def test_a_launch_refused_for_its_budget_is_said_in_words() -> None:
    said = step_status({"outcome": "first_run", "failure_stage": "launch", "failure": "budget_start"})
    assert "budget below what the engine needs to start" in said and "budget start" not in said
    assert "nothing was launched" in said and "failed at launch" not in said  # QA 36 F10c


def test_a_step_that_asks_for_less_has_one_name_in_the_cli_and_the_export(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """QA 31 W9: the CLI said "asks for less", the Markdown export (and the TUI) "got further"."""
    from vramtui.core.wizard.steprecord import StepRecorder, open_session, to_markdown
    from vramtui.core.wizard.verify import ASKS_LESS
    from vramtui.tui.words import record_words

    step = {
        "step": 1, "param": "kv_cache_memory", "from": None, "to": "1016MiB", "outcome": "progress",
        "failure_stage": "kv_cache", "failure": "kv_cache_too_small", "verification": [f"{ASKS_LESS}: 1016 MiB"],
    }  # fmt: skip
    with StepRecorder(tmp_path / "w.jsonl") as recorder:
        recorder.append("session", profile={"backend": "vllm", "model": "m", "params": {}})
        recorder.append("step", **step)
    said = step_status(step)
    assert said.startswith("asks for less")
    report = to_markdown(open_session(tmp_path / "w.jsonl"), record_words("vllm"))
    assert "asks for less" in report and "got further" not in report
