"""The estimate a launch's bill is set beside (`LaunchEstimate`): the same figures `vramtui estimate` gives
for the run's settings, on the device the run is on."""

from __future__ import annotations

from pathlib import Path

import pytest

from vramtui.cli import main
from vramtui.core.demo.tinyhf import write_tiny_hf
from vramtui.core.launch.billcheck import LaunchEstimate
from vramtui.core.memory.parts import HOST


def test_a_cpu_runs_bill_sizes_this_machines_ram_as_estimate_cpu_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """QA 15: `check` on vLLM's CPU build billed 21.5 GiB of KV (a share of a 24 GiB card) where
    `estimate --cpu` said 21.11 and the engine printed 21.06."""
    import json

    model = write_tiny_hf(tmp_path / "m")
    bill, note = LaunchEstimate(str(model), {"context": 1024}, "vllm", False, None).result()
    assert bill is not None, note
    # 0 or 1: whether the share fits in what this machine has free now (QA 29 Q8) is not this test's matter
    assert main(["estimate", str(model), "--backend", "vllm", "--cpu", "--ctx", "1024", "--json"]) in (0, 1)
    cli = json.loads(capsys.readouterr().out)
    assert bill.get("kv_cache", HOST) == cli["kv_cache_bytes"]


def test_a_run_under_a_host_budget_is_billed_as_estimate_memory_budget_bills_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """QA 33 V8: under `--budget 2200MiB`, check's estimate column read runtime 1.6 GiB (what vLLM's CPU
    processes keep resident) where `estimate --memory-budget 2200MiB` read 1.90 GiB (what its worker maps:
    the address space the budget caps), for the same model and settings."""
    import json

    model = write_tiny_hf(tmp_path / "m")
    params = {"context": 1024, "kv_cache_memory": "64MiB"}
    budget = 3 << 30
    bill, note = LaunchEstimate(str(model), params, "vllm", False, None, host_budget=budget).result()
    assert bill is not None, note
    argv = ["estimate", str(model), "--backend", "vllm", "--ctx", "1024", "--kv-cache-memory", "64MiB"]
    assert main([*argv, "--memory-budget", "3GiB", "--json"]) in (0, 1)
    cli = json.loads(capsys.readouterr().out)
    assert bill.get("runtime", HOST) == cli["overhead_bytes"] > 1800 << 20
    unbudgeted, _note = LaunchEstimate(str(model), params, "vllm", False, None).result()
    assert unbudgeted is not None and unbudgeted.get("runtime", HOST) < bill.get("runtime", HOST)
