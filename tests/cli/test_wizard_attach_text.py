"""What `vramtui wizard --attach` prints for the restart-it-yourself way, line by line."""

from __future__ import annotations

import io

from vramtui.cli.wizard_attach import _print_change
from vramtui.core.attach.restart import ChangedCommand


def test_a_setting_left_to_the_engine_reads_as_its_default_and_the_wait_is_said() -> None:
    change = ChangedCommand(
        ["llama-server", "-m", "m.gguf", "--cache-type-k", "q4_0", "--cache-type-v", "q4_0"],
        {},
        {"kv_dtype": (None, "q4_0"), "context": (2048, 512)},
        ["stop PID 7 and start it again with the command below"],
    )
    out = io.StringIO()
    _print_change(change, out, "restart", 7, 90.0)
    text = out.getvalue()
    assert "kv_dtype (default) → q4_0, context 2048 → 512" in text
    assert "None" not in text
    assert text.splitlines()[-1] == "waiting up to 90 s for the restarted server (ctrl-c to stop)"


def test_a_step_that_answers_over_the_budget_is_not_called_stopped_at_a_stage() -> None:
    from types import SimpleNamespace

    from vramtui.cli.wizard import _print_step

    # the record of step 1 of a real session (wizard --attach, tiny model, a 40 MiB RSS budget)
    data = {
        "step": 1, "param": "context", "from": 2048, "to": 512, "outcome": "progress", "stage": "inference",
        "failure_stage": "kv_cache", "failure": "host_oom", "ready": False, "smoke_ok": True,
        "engine_figures_mib": {}, "verification": ["peak memory 55 → 44 MiB"], "log_file": None,
    }  # fmt: skip
    out = io.StringIO()
    _print_step(SimpleNamespace(to_dict=lambda: data, fit=lambda: None), out)  # fit printed no projection
    first = out.getvalue().splitlines()[0]
    assert first == "step 1: context 2048 → 512: got further (it answers, but over the budget)"
    out = io.StringIO()
    _print_step(
        SimpleNamespace(to_dict=lambda: {**data, "smoke_ok": None}, fit=lambda: None), out
    )  # it did not come up
    # in words, not the record's codes (issue 22 defect 26)
    assert out.getvalue().splitlines()[0].endswith("got further (stopped at kv cache: host out of memory)")
