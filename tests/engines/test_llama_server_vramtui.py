"""vramtui against a real llama-server at its default verbosity, as users run it: the check, the stage
the diagnosis reads from the live run and from the saved log, and the cleanup after each exit."""

from __future__ import annotations

import os
from pathlib import Path

import psutil
import pytest

from vramtui.core.launch.launcher import run_check
from vramtui.core.launch.profile import Profile
from vramtui.core.logs.diagnose import diagnose_file
from vramtui.core.units import MIB

pytestmark = pytest.mark.engine

BUDGET = 1500 * MIB  # NOTES: context 262144 fails at the KV buffer under it; 2048 comes up


@pytest.fixture
def on_path(llama_server_bin: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The built binary first on PATH, as `llama-server` (the name the backend launches)."""
    monkeypatch.setenv("PATH", f"{llama_server_bin.parent}{os.pathsep}{os.environ['PATH']}")
    return llama_server_bin


def _servers_of(model: Path) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        if str(model) in " ".join(proc.info["cmdline"] or []):
            found.append(proc)
    return found


def _check(model: Path, budget: int | None = None, **params: object):
    profile = Profile(backend="llama.cpp", model=str(model), params=params, memory_budget=budget, port=0)
    result = run_check(profile, ready_timeout_s=120)
    assert not _servers_of(model), "a llama-server was left running"
    return result


def test_healthy_check_reaches_ready_and_answers(on_path: Path, tiny_gguf: Path) -> None:
    result = _check(tiny_gguf, context=2048)
    assert result.ready and result.smoke is not None and result.smoke.ok, result.smoke
    assert result.stage in ("ready", "inference")  # the log's own stage, not only /health
    assert not result.diagnosis.failed
    saved = diagnose_file(result.log_file)
    assert saved.stage in ("ready", "inference") and not saved.failed
    # the bill reconciled: each term llama-server printed beside the estimate, the tree measured
    bill = result.to_dict()["bill"]
    host = bill["places"]["host"]
    terms = {term["term"]: term for term in host["terms"]}
    assert terms["kv_cache_bytes"]["estimate_bytes"] == terms["kv_cache_bytes"]["actual_bytes"] == 16 * MIB
    assert host["measured_bytes"] >= host["printed_bytes"] > 0
    assert bill["off"] is None, bill["verdict"]
    assert bill["estimate_note"].startswith("uncalibrated")  # this test's own, empty, run store


def test_the_bill_names_the_term_the_estimate_got_wrong(on_path: Path, tiny_gguf: Path) -> None:
    # a quantized KV cache through extra_args, which the estimate does not read: it sizes f16
    profile = Profile(
        backend="llama.cpp",
        model=str(tiny_gguf),
        params={"context": 8192},
        port=0,
        extra_args=("-ctk", "q8_0", "-ctv", "q8_0"),
    )
    result = run_check(profile, ready_timeout_s=120)
    assert result.ready and result.bill is not None
    off = result.bill.to_dict()["off"]
    assert off == {
        "place": "host",
        "term": "kv_cache_bytes",
        "estimate_bytes": 64 * MIB,
        "actual_bytes": 34 * MIB,
    }
    assert "off: KV cache on the host" in "\n".join(result.bill.lines())


def test_kv_cache_too_big_for_the_budget_is_kv_cache(on_path: Path, tiny_gguf: Path) -> None:
    result = _check(tiny_gguf, BUDGET, context=262144)
    assert not result.ready
    assert result.failure_stage == "kv_cache", (result.failure, result.diagnosis.first_error_text)
    assert result.failure == "host_oom"  # under vramtui's own budget header
    # The saved log gives the live verdict.
    saved = diagnose_file(result.log_file)
    assert (saved.failure_stage, saved.failure) == (result.diagnosis.failure_stage, result.diagnosis.failure)


def test_compute_buffer_too_big_is_kv_cache_with_its_own_advice(on_path: Path, tiny_gguf: Path) -> None:
    result = _check(tiny_gguf, BUDGET, context=65536, flash_attn=False)
    assert not result.ready and result.failure_stage == "kv_cache"
    assert result.diagnosis.cause == "compute_alloc_failed"
    assert "flash" in result.diagnosis.advice[0].lower() or "ubatch" in result.diagnosis.advice[0].lower()


@pytest.mark.parametrize(
    "params",
    [{}, {"context": 262144}, {"context": 65536, "flash_attn": False}],
    ids=["defaults (context 0 = trained 262144)", "kv cache too big", "compute buffer too big"],
)
def test_the_wizard_brings_each_failure_up_in_two_relaunches(
    on_path: Path, tiny_gguf: Path, tmp_path: Path, params: dict[str, object]
) -> None:
    from vramtui.core.wizard.budget import current_value
    from vramtui.core.wizard.wizard import Wizard

    profile = Profile(backend="llama.cpp", model=str(tiny_gguf), params=params, memory_budget=BUDGET, port=0)
    result = Wizard(profile, record_path=tmp_path / "steps.jsonl", auto=True).run(max_steps=4)
    first = result.steps[0].observation
    assert first is not None and first.failure_stage == "kv_cache"
    assert result.success, result.reason
    assert result.relaunches <= 2
    tried = profile
    for step in result.steps[1:]:
        proposal = step.proposal
        assert proposal is not None
        # Never a value the run already had (flash attention `auto` is already on here).
        assert str(current_value(tried, proposal.param)).lower() != str(proposal.to).lower()
        tried = tried.with_param(proposal.param, proposal.to)
    assert not _servers_of(tiny_gguf)
