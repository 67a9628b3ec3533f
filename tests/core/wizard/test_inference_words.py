"""The inference ladder's words say what happened: a request failed on a server that answered, or the
server failed as it came up, before any request (QA 16: "the server runs but a request failed" for a
llama-server that died starting its threads right after "listening", with no request sent)."""

from __future__ import annotations

from pathlib import Path

from vramtui.core.demo.tinygguf import TinyModelSpec, write_tiny_gguf
from vramtui.core.launch.profile import Profile
from vramtui.core.units import MIB
from vramtui.core.wizard.budget import MemoryModel
from vramtui.core.wizard.observe import Observation
from vramtui.core.wizard.propose import Findings, Proposer


def _first_move(profile: Profile, ready: bool) -> str:
    failed = Observation(
        ready=ready,
        smoke_ok=False if ready else None,
        stage="inference",
        failure_stage="inference",
        failure="host_oom",
    )
    findings = Findings()
    proposal = Proposer(MemoryModel(profile), findings).propose(profile, failed, set())
    assert proposal is not None, (findings.stop_reason, findings.advice)
    return proposal.why


def test_the_words_follow_whether_the_server_came_up(tmp_path: Path) -> None:
    model = tmp_path / "m.gguf"
    write_tiny_gguf(model, TinyModelSpec(n_layer=2, n_embd=64, n_ff=128))
    profile = Profile(
        backend="llama.cpp", model=str(model), params={"context": 1024}, memory_budget=400 * MIB
    )
    assert _first_move(profile, ready=True).startswith("the server runs but a request failed at inference")
    died = _first_move(profile, ready=False)
    assert died.startswith("the server failed as it came up, before it served a request")
    assert "request failed" not in died
