"""QA 31 W3: when nothing fits in one step, the first of two steps must shrink the buffer whose allocation
failed; a relaunch that asks for the same bytes fails the same way. --parallel 4 -> 3 beside llama-server's
one shared KV cache of --ctx-size cells left the 2 GiB cache as it was."""

from __future__ import annotations

from pathlib import Path

from vramtui.core.demo.tinygguf import TinyModelSpec, write_tiny_gguf
from vramtui.core.launch.profile import Profile
from vramtui.core.units import GIB, MIB
from vramtui.core.wizard.budget import MemoryModel, changed
from vramtui.core.wizard.observe import Observation, part_bytes
from vramtui.core.wizard.propose import Findings, Proposer, failed_part


def _at_the_cache(asked_mib: int) -> Observation:
    return Observation(
        ready=False, smoke_ok=None, stage="kv_cache", failure_stage="kv_cache", failure="host_oom",
        figures={"failed_alloc": asked_mib * MIB},
    )  # fmt: skip


def test_the_first_of_two_steps_shrinks_the_buffer_that_failed(
    tmp_path: Path, llama_server_bin: Path
) -> None:
    write_tiny_gguf(tmp_path / "t.gguf", TinyModelSpec())
    profile = Profile(
        backend="llama.cpp", model=str(tmp_path / "t.gguf"), program=str(llama_server_bin),
        params={"context": 262144}, memory_budget=1 * GIB,
    )  # fmt: skip
    model = MemoryModel(profile)
    failed = _at_the_cache(2048)  # llama-server could not allocate its 2 GiB KV cache
    assert failed_part(failed, model.predict(profile)) == "kv_cache"
    proposal = Proposer(model, Findings()).propose(profile, failed, {"context"})  # the user kept the context
    assert proposal is not None
    after = model.predict(changed(profile, [(proposal.param, proposal.to)]))
    now = model.predict(profile)
    assert after is not None and now is not None
    assert part_bytes(after, "kv_cache") < part_bytes(now, "kv_cache"), (proposal.param, proposal.to)
    # an allocation no predicted buffer of that stage matches names none: every option stays
    assert failed_part(_at_the_cache(300), model.predict(profile)) is None


def test_a_setting_tried_and_rolled_back_is_not_called_skipped() -> None:
    from vramtui.core.wizard.reach import left_alone_words

    assert left_alone_words({"context", "parallel"}, {"parallel"}) == (
        " (skipped: context; tried and rolled back: parallel)"
    )
    assert left_alone_words({"context"}, set()) == " (skipped: context)"
    assert left_alone_words(set(), set()) == ""
