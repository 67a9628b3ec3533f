"""`Wizard.skip`: a proposal the user turns down is recorded, launches nothing, and the next proposal
changes another setting. Runs are replayed from logs llama-cpp-python really printed (see test_wizard)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_wizard import ReplayedRuns, _demo_profile

from vramtui.core.demo.tinygguf import TinyModelSpec, write_tiny_gguf
from vramtui.core.wizard.ladders import Rung
from vramtui.core.wizard.steprecord import open_session
from vramtui.core.wizard.wizard import Wizard

# Replayed runs: the engine share is its backend's figure, as test_wizard takes it.
pytestmark = pytest.mark.usefixtures("assumed_engine_share")


@pytest.fixture(scope="module")
def demo_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_gguf(tmp_path_factory.mktemp("skip-models") / "tiny-f16.gguf", TinyModelSpec())


def test_a_skipped_proposal_is_recorded_and_the_next_one_changes_another_setting(
    demo_model: Path, tmp_path: Path
) -> None:
    runs = ReplayedRuns(tmp_path)
    record = tmp_path / "rec.jsonl"
    wizard = Wizard(_demo_profile(demo_model), record_path=record, runner=runs)
    wizard.start()
    first = wizard.propose()
    assert first is not None and first.param == "context"

    wizard.skip(first)
    assert len(runs.profiles) == 1  # skipping launches nothing
    assert wizard.skipped_params == {"context"}
    second = wizard.propose()
    assert second is not None and second.param != "context"
    assert second.then is None or second.then[0] != "context"
    assert wizard.profile.params["context"] == 262144  # the skipped setting is left as it was

    # Skip every proposal: the wizard stops and says which settings were left alone.
    skipped = [first]
    proposal = second
    while proposal is not None and len(skipped) < 10:
        wizard.skip(proposal)
        skipped.append(proposal)
        proposal = wizard.propose()
    assert proposal is None
    assert "skipped: " in wizard.stop_reason and "context" in wizard.stop_reason
    wizard.finish()

    lines = [json.loads(line) for line in record.read_text().splitlines()]
    skips = [line for line in lines if line["type"] == "skip"]
    assert [(s["param"], s["to"]) for s in skips] == [(p.param, p.to) for p in skipped]
    assert skips[0] == skips[0] | {"step": 1, "from": 262144, "to": first.to, "why": first.why}
    session = open_session(record)
    assert session.finished and not session.success
    assert [s["step"] for s in session.steps] == [0]  # a skip is no step: nothing ran


def test_skipping_the_step_that_prepares_a_quantized_cache_skips_that_cache_too(
    demo_model: Path, tmp_path: Path
) -> None:
    ladder = {
        "kv_cache": (
            Rung("kv_dtype", "down", "a smaller KV cache type", "quality"),
            Rung("context", "down", "a shorter context", "shorter prompts"),
        )
    }
    profile = _demo_profile(demo_model).with_param("context", 65536)
    runs = ReplayedRuns(tmp_path, fits_up_to=0)
    wizard = Wizard(profile, runner=runs, ladders=ladder, record=False)
    wizard.start()
    prepare = wizard.propose()
    assert prepare is not None and prepare.param == "flash_attn" and prepare.then is not None
    wizard.skip(prepare)
    assert wizard.skipped_params == {"flash_attn", "kv_dtype"}
    after = wizard.propose()
    assert after is not None and after.param == "context"


def test_a_reopened_session_and_its_exports_show_the_skipped_proposals(
    demo_model: Path, tmp_path: Path
) -> None:
    from vramtui.core.wizard.steprecord import to_csv, to_markdown

    runs = ReplayedRuns(tmp_path)
    record = tmp_path / "rec.jsonl"
    wizard = Wizard(_demo_profile(demo_model), record_path=record, runner=runs)
    wizard.start()
    first = wizard.propose()
    assert first is not None
    wizard.skip(first)
    wizard.finish()

    session = open_session(record)
    assert [(s["param"], s["outcome"]) for s in session.skipped] == [(first.param, "skipped")]
    assert session.to_dict()["skipped"][0]["to"] == first.to
    csv_rows = to_csv(session).splitlines()
    assert csv_rows[1].startswith("0,")  # the first launch, then the skipped proposal
    assert csv_rows[2].startswith(f"1,{first.param},262144,{first.to},") and csv_rows[2].count("skipped") == 1
    assert "skipped" in to_markdown(session)


def test_no_proposal_is_a_change_the_estimate_says_frees_nothing(demo_model: Path, tmp_path: Path) -> None:
    """Issue 22 #7: llama-server's slots share one KV cache of --ctx-size cells: fewer slots free nothing,
    so after the context is skipped the wizard never proposes `parallel` (it once did, predicting 239 →
    239 MiB), and nothing it proposes predicts the same memory as the run it replaces."""
    runs = ReplayedRuns(tmp_path)
    profile = _demo_profile(demo_model).with_changes(backend="llama.cpp").with_param("parallel", 4)
    wizard = Wizard(profile, record_path=tmp_path / "rec.jsonl", runner=runs)
    wizard.start()
    seen = []
    proposal = wizard.propose()
    while proposal is not None and len(seen) < 10:
        seen.append(proposal)
        wizard.skip(proposal)
        proposal = wizard.propose()
    assert seen, "the wizard proposed nothing at all"
    assert "parallel" not in [p.param for p in seen]
    # the case the issue met: the estimate says the run as it is fits (it underestimated), so the first
    # rung that "fits" would win: that is fewer slots, which changes nothing
    from vramtui.core.wizard.budget import MemoryModel
    from vramtui.core.wizard.observe import Observation
    from vramtui.core.wizard.propose import Findings, Proposer

    roomy = MemoryModel(profile.with_changes(memory_budget=64 << 30))
    failed = Observation(
        ready=False, smoke_ok=None, stage="kv_cache", failure_stage="kv_cache", failure="host_oom"
    )
    first = Proposer(roomy, Findings()).propose(profile, failed, set())
    assert first is not None and first.param != "parallel", first
    from vramtui.core.wizard.budget import needed_bytes

    before = wizard.model.predict(profile)
    assert before is not None
    for proposal in seen:
        # (flash attention before a quantized V cache is the engine's precondition for the next step)
        if proposal.predicted_mib is not None and proposal.then is None:
            assert proposal.predicted_mib < 0.99 * needed_bytes(before) / (1 << 20), proposal.describe()
    wizard.finish()


def _at_the_flash_attention_step(demo_model: Path, tmp_path: Path) -> tuple[Wizard, Any]:
    """The demo's wizard, every proposal before the flash-attention one skipped."""
    wizard = Wizard(
        _demo_profile(demo_model), record_path=tmp_path / "rec.jsonl", runner=ReplayedRuns(tmp_path)
    )
    wizard.start()
    proposal = wizard.propose()
    while proposal is not None and proposal.param != "flash_attn":
        wizard.skip(proposal)
        proposal = wizard.propose()
    return wizard, proposal


def test_the_flash_attention_step_says_what_it_does_itself(demo_model: Path, tmp_path: Path) -> None:
    """Issue 22 #36: the step that turns flash attention on before a quantized V cache predicts and
    explains flash attention on, and names the KV change as the next step (it described that one)."""
    wizard, proposal = _at_the_flash_attention_step(demo_model, tmp_path)
    assert proposal is not None and proposal.then is not None and proposal.then[0] == "kv_dtype"
    assert proposal.why.startswith("flash attention first")
    said = proposal.why
    assert "with flash_attn = on it needs" in said  # what this step itself does
    assert said.index("with flash_attn = on") < said.index("then with kv_dtype")  # the next step after
    wizard.finish()


def test_a_context_left_at_the_engines_default_is_shortened_from_what_the_run_had(demo_model: Path) -> None:
    """QA 13 #1: llama-server's default context is the model's trained one (262144 here); the profile
    that leaves it unset must still get `context 262144 -> N`, as one that writes it out does (the
    wizard stopped with "no setting left" after a kv_dtype step that could not fit)."""
    from vramtui.core.launch.profile import Profile
    from vramtui.core.units import MIB
    from vramtui.core.wizard.budget import MemoryModel
    from vramtui.core.wizard.observe import Observation
    from vramtui.core.wizard.propose import Findings, Proposer

    unset = Profile(backend="llama.cpp", model=str(demo_model), memory_budget=400 * MIB, port=0)
    failed = Observation(
        ready=False, smoke_ok=None, stage="kv_cache", failure_stage="kv_cache", failure="host_oom"
    )
    failed.facts["n_ctx"] = "262144"  # what llama-server printed for it
    proposal = Proposer(MemoryModel(unset), Findings()).propose(unset, failed, set())
    assert proposal is not None and proposal.param == "context", proposal
    assert proposal.from_ == 262144 and int(proposal.to) < 262144  # type: ignore[call-overload]
    # without the printed figure, the model's own trained length is what the run had
    failed.facts.pop("n_ctx")
    again = Proposer(MemoryModel(unset), Findings()).propose(unset, failed, set())
    assert again is not None and again.param == "context" and again.from_ == 262144, again


def test_a_budget_below_the_engines_own_footprint_stops_at_once(demo_model: Path) -> None:
    """QA 13 #2: with the engine's idle footprint (here llama-cpp-python's own figure) over the budget, no
    setting of the model's buffers can help: no proposal, and the stop says to raise memory_budget (it
    proposed context 2048 -> 512, then blamed the setting as ignored)."""
    from vramtui.core.launch.profile import Profile
    from vramtui.core.units import MIB
    from vramtui.core.wizard.budget import MemoryModel
    from vramtui.core.wizard.observe import Observation
    from vramtui.core.wizard.propose import Findings, Proposer

    profile = Profile(
        backend="llama-cpp-python", model=str(demo_model), params={"context": 2048}, memory_budget=100 * MIB
    )
    model = MemoryModel(profile)
    assert model.baseline() > 100 * MIB  # the interpreter and llama.cpp's library before any buffer
    failed = Observation(
        ready=False, smoke_ok=None, stage="kv_cache", failure_stage="kv_cache", failure="host_oom"
    )
    findings = Findings()
    assert Proposer(model, findings).propose(profile, failed, set()) is None
    assert "raise the memory budget" in findings.stop_reason and "footprint" in findings.stop_reason
    assert any(f"{model.baseline() / MIB:.0f} MiB" in line for line in findings.advice), findings.advice
    # with room for buffers the same failure gets a change
    roomy = profile.with_changes(memory_budget=model.baseline() + 600 * MIB)
    assert Proposer(MemoryModel(roomy), Findings()).propose(roomy, failed, set()) is not None


def test_the_why_quotes_the_engines_words_without_its_timestamp(demo_model: Path) -> None:
    # QA 13 #16: "it failed at kv_cache: 0.00.031.597 E ggml_aligned_malloc: ..."
    from vramtui.core.launch.profile import Profile
    from vramtui.core.units import MIB
    from vramtui.core.wizard.budget import MemoryModel
    from vramtui.core.wizard.observe import Observation
    from vramtui.core.wizard.propose import Findings, Proposer

    profile = Profile(backend="llama-cpp-python", model=str(demo_model), params={"context": 262144})
    profile = profile.with_changes(memory_budget=MemoryModel(profile).baseline() + 600 * MIB)
    failed = Observation(
        ready=False, smoke_ok=None, stage="kv_cache", failure_stage="kv_cache", failure="host_oom"
    )
    failed.first_error = (
        "0.00.031.597 E ggml_aligned_malloc: insufficient memory (attempted to allocate 2048.00 MB)"
    )
    proposal = Proposer(MemoryModel(profile), Findings()).propose(profile, failed, set())
    assert proposal is not None and "it failed at kv_cache: ggml_aligned_malloc: insufficient" in proposal.why
    assert "0.00.031" not in proposal.why


def test_a_step_that_names_a_next_one_predicts_the_change_it_launches(
    demo_model: Path, tmp_path: Path
) -> None:
    """QA 17 F7: the flash-attention step recorded (and verified against) the figure of flash attention and
    the quantized KV cache together, though it launched flash attention alone."""
    from vramtui.core.units import MIB
    from vramtui.core.wizard.budget import needed_bytes

    wizard, proposal = _at_the_flash_attention_step(demo_model, tmp_path)
    assert proposal is not None and proposal.then is not None
    alone = wizard.model.predict(wizard.profile.with_param("flash_attn", proposal.to))
    assert alone is not None
    wizard.apply(proposal)
    assert proposal.predicted_mib == pytest.approx(needed_bytes(alone) / MIB)
    wizard.finish()


def test_a_batch_below_the_micro_batch_takes_it_down_too(demo_model: Path, tmp_path: Path) -> None:
    """QA 17 F14: a saved profile held ubatch = 2048 beside batch = 512 (llama.cpp clamps the micro-batch
    to the batch, so the profile said what does not run)."""
    from vramtui.core.wizard.proposal import Proposal

    profile = _demo_profile(demo_model).with_param("batch", 2048).with_param("ubatch", 2048)
    wizard = Wizard(profile, auto=True, runner=ReplayedRuns(tmp_path), record=False)
    wizard.start()
    step = wizard.apply(Proposal(param="batch", from_=2048, to=512, why="test"))
    assert (step.profile_params.get("batch"), step.profile_params.get("ubatch")) == (512, 512)
    wizard.finish()
