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
    from vramtui.cli.wizard import _print_step
    from vramtui.core.wizard.observe import Observation
    from vramtui.core.wizard.proposal import Proposal
    from vramtui.core.wizard.wizard import Step

    # step 1 of a real session (wizard --attach, tiny model, a 40 MiB RSS budget)
    def step(smoke_ok: bool | None) -> Step:
        obs = Observation(
            ready=False, smoke_ok=smoke_ok, stage="inference", failure_stage="kv_cache", failure="host_oom",
            peak_mib=44.0, budget_mib=40.0,
        )  # fmt: skip
        return Step(1, Proposal("context", 2048, 512, "why"), "progress", obs, ["peak memory 55 → 44 MiB"])

    out = io.StringIO()
    _print_step(step(True), out)
    first = out.getvalue().splitlines()[0]
    assert first == "step 1: context 2048 → 512: got further (it runs at 44 MiB, over the 40 MiB budget)"
    named = step(True)
    named.proposal = Proposal("context", 2048, 512, "why", knob="--ctx-size")
    out = io.StringIO()
    _print_step(named, out)  # the engine's own flag, as check and diagnose name it (QA 37 F13)
    assert out.getvalue().startswith("step 1: context (--ctx-size) 2048 → 512: got further")
    out = io.StringIO()
    _print_step(step(None), out)  # it did not come up
    # in words, not the record's codes (issue 22 defect 26)
    assert out.getvalue().splitlines()[0].endswith("got further (stopped at kv cache: host out of memory)")


def test_a_step_that_stopped_where_it_stopped_but_asked_for_less_says_so() -> None:
    """QA 27 N5: "got further (stopped at kv cache ...)" where the step stopped at the stage it stopped at
    before, and "asks for less: 25 MiB instead of 25 MiB"."""
    from vramtui.cli.wizard import _print_step
    from vramtui.core.units import MIB
    from vramtui.core.wizard.observe import Observation
    from vramtui.core.wizard.proposal import Proposal
    from vramtui.core.wizard.verify import _progress
    from vramtui.core.wizard.wizard import Step

    def failed(kv_mib: float) -> Observation:
        return Observation(
            ready=False, smoke_ok=None, stage="kv_cache", failure_stage="kv_cache", failure="host_oom",
            engine={"model_buffer": 21 * MIB, "kv_buffer": int(kv_mib * MIB)},
        )  # fmt: skip

    proposal = Proposal("context", 1024, 768, "why")
    outcome, notes = _progress(proposal, failed(4.3), failed(4.0), [])
    assert outcome == "progress"
    assert any(note == "same stage, but it asks for less: 25.0 MiB instead of 25.3 MiB" for note in notes), (
        notes
    )
    out = io.StringIO()
    _print_step(Step(1, proposal, outcome, failed(4.0), notes), out)
    assert out.getvalue().splitlines()[0].endswith("asks for less (stopped at kv cache: host out of memory)")


def test_a_step_that_prepares_the_next_says_so() -> None:
    """QA 28: flash attention before a quantized V cache frees nothing by itself: "got further" read wrong."""
    from vramtui.cli.wizard import step_status

    data = {
        "outcome": "progress", "failure_stage": "kv_cache", "failure": "host_oom",
        "verification": ["prepares the next step: kv_dtype → q4_0"],
    }  # fmt: skip
    assert step_status(data) == "prepared the next step (stopped at kv cache: host out of memory)"
