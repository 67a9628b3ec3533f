"""QA 26 D4: under a 200 MiB budget llama-cpp-python loaded 21 MiB of weights and its 16 MiB KV cache, then
failed on the next buffer. The wizard stopped with "the engine alone takes about 352 MiB" (the backend's
assumed figure, said as a fact), and then "-152 MiB left". What the run held is room it had: the wizard
goes on with arithmetic, and where it does stop on the engine's share it says whether that was measured."""

from __future__ import annotations

from pathlib import Path

import pytest

from vramtui.core.demo.tinygguf import TinyModelSpec, write_tiny_gguf
from vramtui.core.launch.profile import Profile
from vramtui.core.units import MIB
from vramtui.core.wizard.budget import MemoryModel
from vramtui.core.wizard.observe import Observation
from vramtui.core.wizard.propose import Findings, Proposer

# What these say of an engine share that was not measured: its backend's figure, pinned.
pytestmark = pytest.mark.usefixtures("assumed_engine_share")


def _profile(tmp_path: Path, budget_mib: int) -> Profile:
    model = write_tiny_gguf(tmp_path / "tiny.gguf", TinyModelSpec(n_layer=4, n_embd=512, n_ff=1024))
    return Profile(backend="llama-cpp-python", model=str(model), memory_budget=budget_mib * MIB, port=0)


def test_buffers_a_failed_run_held_are_room_it_had(tmp_path: Path) -> None:
    profile = _profile(tmp_path, 200)
    model = MemoryModel(profile)
    assert not model.baseline_measured  # llama-cpp-python's 352 MiB is its backend's figure
    assert model.room() is not None and model.room() < 0  # 200 MiB budget, 352 MiB assumed engine
    at_cache = Observation(
        ready=False, smoke_ok=None, stage="kv_cache", failure_stage="kv_cache", failure="host_oom",
        figures={"failed_alloc": 20 * MIB}, engine={"model_buffer": 21 * MIB, "kv_buffer": 16 * MIB},
    )  # fmt: skip
    model.learn(profile, at_cache)
    assert model.room() is not None and 37 * MIB <= model.room() <= 57 * MIB
    findings = Findings()
    proposal = Proposer(model, findings).propose(profile, at_cache, set())
    assert proposal is not None, (findings.stop_reason, findings.advice)  # a step, not "engine alone"
    assert "engine's own footprint" not in findings.stop_reason


def test_a_start_that_failed_before_its_weights_names_the_figure_as_assumed(tmp_path: Path) -> None:
    profile = _profile(tmp_path, 200)
    model = MemoryModel(profile)
    at_start = Observation(
        ready=False, smoke_ok=None, stage="load_weights", failure_stage="load_weights", failure="host_oom"
    )
    findings = Findings()
    assert Proposer(model, findings).propose(profile, at_start, set()) is None
    said = " ".join(findings.advice)
    assert (
        "the engine alone takes about 352 MiB before any model buffer (llama-cpp-python's assumed figure)"
        in said
    )


def test_out_of_reach_says_which_room_and_each_change_once(tmp_path: Path) -> None:
    """QA 27 N4: "more than the 0 MiB the 700 MiB budget leaves beside the engine's own 480 MiB" (a failed
    run had bounded the room; 700 - 480 is 220), and "flash_attn on, context 512, flash_attn on"."""
    from vramtui.core.wizard.proposal import Proposal
    from vramtui.core.wizard.reach import out_of_reach

    profile = _profile(tmp_path, 700)
    model = MemoryModel(profile)
    model.room_upper = MIB // 2  # what a failed run could allocate
    moves = [
        Proposal("flash_attn", False, True, "why"),
        Proposal("context", 2048, 512, "why"),
        Proposal("flash_attn", False, True, "why"),
    ]
    found = out_of_reach(model, profile, "kv_cache", moves, set())
    assert found is not None
    advice = found[0][0]
    assert "(flash_attn on, context 512)" in advice
    assert "more than the 0.5 MiB a failed run left room for (it could allocate no more)" in advice
    assert "budget leaves beside" not in advice


def test_a_server_whose_handlers_had_no_room_stops_the_wizard(tmp_path: Path) -> None:
    """QA 28 M2: a server that listened and answered every readiness probe with an error under its budget
    (budget_no_serve) had the context cut twice at ready, 31 s a run, and no word to raise the budget."""
    profile = _profile(tmp_path, 200)
    up_but_mute = Observation(
        ready=False, smoke_ok=None, stage="ready", failure_stage="ready", failure="host_oom",
        cause="budget_no_serve", engine={"model_buffer": 21 * MIB, "kv_buffer": 2 * MIB},
    )  # fmt: skip
    findings = Findings()
    assert Proposer(MemoryModel(profile), findings).propose(profile, up_but_mute, set()) is None
    assert "raise the memory budget, no engine setting helps" in findings.stop_reason


def test_out_of_reach_under_an_engine_measured_smaller_than_assumed_says_so(tmp_path: Path) -> None:
    """QA 31 W8: "more than the 21 MiB the 200 MiB budget leaves beside the engine's own 352 MiB": 200 - 352
    is negative; the room came from a run whose engine held less than llama-cpp-python's assumed share."""
    from vramtui.core.wizard.proposal import Proposal
    from vramtui.core.wizard.reach import out_of_reach

    profile = _profile(tmp_path, 200)
    model = MemoryModel(profile)
    model.room_lower = 21 * MIB  # what a run had room for beside its engine
    found = out_of_reach(model, profile, "kv_cache", [Proposal("context", 262144, 512, "why")], set())
    assert model.room() == 21 * MIB
    assert found is not None
    advice = found[0][0]
    assert "beside the engine's own 352 MiB" not in advice
    assert "MiB the 200 MiB budget left beside what the engine held in the last run" in advice


def test_out_of_reach_where_the_weights_alone_are_over_the_room_says_that(tmp_path: Path) -> None:
    """QA 35 F4: "even with every change on the load weights ladder at once (gpu_layers 0) it needs about 577
    MiB" quoted the whole bill at the default context, where the weights alone (257 MiB) were over the 169
    MiB left: the sentence says the weights, and no ladder move makes room for them."""
    from vramtui.core.wizard.proposal import Proposal
    from vramtui.core.wizard.reach import out_of_reach

    profile = _profile(tmp_path, 700)
    model = MemoryModel(profile)
    weights = model.predict(profile).get("weights", model.place)
    model.room_upper = weights // 2
    found = out_of_reach(model, profile, "load_weights", [Proposal("gpu_layers", None, 0, "why")], set())
    assert found is not None
    advice = found[0][0]
    assert (
        advice.startswith("the weights alone take ")
        and "no change on the load_weights ladder (gpu_layers 0)" in advice
    )
    assert "even with every change" not in advice
    # where the weights fit and the rest does not, the whole bill is the figure
    model.room_upper = weights + MIB
    found = out_of_reach(model, profile, "kv_cache", [Proposal("context", 262144, 512, "why")], set())
    assert found is not None and found[0][0].startswith("even with every change on the kv_cache ladder")


def test_check_with_no_first_move_says_why_the_wizard_would_stop(tmp_path: Path) -> None:
    """QA 35 F4: `check` of a llama-server whose weights could not be mapped under its budget printed no first
    move and no word that the wizard would stop at once (it does, with no relaunch)."""
    from types import SimpleNamespace

    from vramtui.core.logs.diagnose import diagnose_file
    from vramtui.core.wizard.wizard import first_move_and_advice

    log = Path(__file__).resolve().parents[2] / "data" / "logs" / "llama-server-budget-700-mmap-weights.log"
    model = write_tiny_gguf(tmp_path / "wide.gguf", TinyModelSpec(n_layer=16, n_embd=512, n_ff=4096))
    profile = Profile(backend="llama.cpp", model=str(model), memory_budget=400 * MIB, port=0)
    diagnosis = diagnose_file(log)
    check = SimpleNamespace(
        ready=False, stage="load_weights", failure_stage="load_weights", failure="host_oom",
        diagnosis=diagnosis, smoke=None, peak_mib=14.0, resident_mib=14.0, load_time_s=None, ttft_s=None,
        tokens_per_s=None, log_file=str(log), command=["llama-server"], warnings=[], message="",
    )  # fmt: skip
    move, advice = first_move_and_advice(profile, check, advice=list(diagnosis.advice), with_stop=True)
    assert move is None
    assert advice[0].startswith("the wizard would stop here: "), advice
    assert any(line.startswith("the weights alone take ") for line in advice), advice


def test_a_change_between_the_estimates_line_and_the_wizards_margin_says_both() -> None:
    """QA 35 F1: the wizard's "fits with the 10% margin" for the context `vramtui estimate` called "DOES NOT
    FIT under the 80% line": the wizard's words now say that the estimate draws its line lower."""
    from vramtui.core.backends import get_backend
    from vramtui.core.wizard.propose import above_estimate_line

    llama = get_backend("llama.cpp")
    room = 369 * MIB
    assert "above the 80% line of the room `vramtui estimate` draws" in above_estimate_line(
        llama, 330 * MIB, room, 0.9, budgeted=False
    )  # a card's room: estimate keeps its 80% line
    assert above_estimate_line(llama, 290 * MIB, room, 0.9, budgeted=False) == ""  # under both
    assert above_estimate_line(llama, 330 * MIB, room, 0.8, budgeted=False) == ""  # the same line
    # QA 36 F3: under a memory budget estimate draws the wizard's own 90% line: nothing to tell apart
    assert above_estimate_line(llama, 330 * MIB, room, 0.9, budgeted=True) == ""
