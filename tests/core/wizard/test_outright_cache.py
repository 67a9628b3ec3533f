"""QA 14: vLLM with a KV cache set outright (--kv-cache-memory-bytes) too small for one request. After the
change vLLM names (more bytes) is skipped, only a change that makes one request fit those bytes is a step;
the share, the weights' type and the offload would each spend a relaunch on the same refusal."""

from __future__ import annotations

from pathlib import Path

from vramtui.core.demo.tinyhf import write_tiny_hf
from vramtui.core.launch.profile import Profile
from vramtui.core.wizard.budget import MemoryModel, changed
from vramtui.core.wizard.observe import Observation
from vramtui.core.wizard.propose import Findings, Proposer

TOO_SMALL = Observation(
    ready=False,
    smoke_ok=None,
    stage="kv_cache",
    failure_stage="kv_cache",
    failure="kv_cache_too_small",
)


def _proposer(profile: Profile) -> tuple[Proposer, Findings]:
    findings = Findings()
    return Proposer(MemoryModel(profile), findings), findings


def test_after_the_named_change_is_skipped_only_a_change_that_holds_one_request_is_proposed(
    tmp_path: Path,
) -> None:
    model = write_tiny_hf(tmp_path / "m")
    # 1024 B a token (2 layers, 2 KV heads of 64, 16-bit): 1 MiB holds 1024 tokens, not one 2048-token request
    profile = Profile(
        backend="vllm", model=str(model), params={"context": 2048, "parallel": 4, "kv_cache_memory": "1MiB"}
    )
    proposer, findings = _proposer(profile)
    assert proposer.model.holds_one_request(profile) is False
    skipped = {"kv_cache_memory"}
    seen = []
    proposal = proposer.propose(profile, TOO_SMALL, skipped)
    while proposal is not None:
        seen.append((proposal.param, proposal.to))
        # each proposal holds one request, as the engine checks it at start-up
        assert proposer.model.holds_one_request(changed(profile, [(proposal.param, proposal.to)])), proposal
        skipped.add(proposal.param)
        proposal = proposer.propose(profile, TOO_SMALL, skipped)
    assert {param for param, _ in seen} == {"context", "kv_dtype"}, seen
    assert ("context", 1024) in seen  # the least drastic context that holds, not a blind halving
    assert findings.stop_reason and "only kv_cache_memory helps" in findings.stop_reason


def test_a_cache_no_single_change_can_fill_stops_at_once(tmp_path: Path) -> None:
    model = write_tiny_hf(tmp_path / "m")
    # 100 KiB: under one 128-token block of the CPU build even in fp8; only a context under a block holds
    profile = Profile(backend="vllm", model=str(model), params={"context": 2048, "kv_cache_memory": "100KiB"})
    proposer, findings = _proposer(profile)
    assert proposer.propose(profile, TOO_SMALL, {"kv_cache_memory"}) is None
    assert "only kv_cache_memory helps" in (findings.stop_reason or "")
    assert any("--kv-cache-memory-bytes" in line for line in findings.advice), findings.advice


def test_a_cache_set_outright_is_predicted_at_its_bytes_after_a_share_sized_run(tmp_path: Path) -> None:
    """QA 19 F1: the first run's cache came from vLLM's share (21 GiB on the CPU build) where the bill held
    one request of the full length for it; the correction learnt from the two (clamped at x2) then doubled
    the next step's cache set outright (733 MiB predicted as 1466 MiB). Neither is learnt nor applied now."""
    from vramtui.core.units import MIB

    model = write_tiny_hf(tmp_path / "m")
    by_share = Profile(backend="vllm", model=str(model), params={"context": 2048}, memory_budget=3072 * MIB)
    budget = MemoryModel(by_share)
    share_run = Observation(
        ready=False,
        smoke_ok=None,
        stage="kv_cache",
        failure_stage="kv_cache",
        failure="host_oom",
        engine={"kv_cache_available": 21 << 30},  # vLLM's "Available KV cache memory": 21 GiB
    )
    budget.learn(by_share, share_run)
    outright = changed(by_share, [("kv_cache_memory", "733MiB")])
    bill = budget.predict(outright)
    assert bill is not None
    assert bill.get("kv_cache", budget.place) == 733 * MIB
