"""The on-GPU goal's check that every layer is on the device, on real GPU logs from public issues
(tests/data/logs/offloaded.jsonl, unseen.jsonl: each entry keeps its source), and the one change it
applies to a profile."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from vramtui.core.launch.profile import Profile
from vramtui.core.logs.diagnose import diagnose_file, diagnose_text
from vramtui.core.wizard.ongpu import OnGpuChange, OnGpuPlan
from vramtui.core.wizard.ongpu_apply import all_layers_on_device, on_gpu_change

DATA = Path(__file__).resolve().parents[2] / "data"
OFFLOADED = re.compile(r"offloaded (\d+)/(\d+) layers to GPU", re.IGNORECASE)


def _entries() -> list[dict]:
    out = []
    for name in ("offloaded.jsonl", "unseen.jsonl"):
        out += [json.loads(line) for line in (DATA / "logs" / name).read_text().splitlines()]
    return [entry for entry in out if OFFLOADED.search(entry["log"])]


ENTRIES = _entries()


@pytest.mark.parametrize("entry", ENTRIES, ids=[entry["id"] for entry in ENTRIES])
def test_every_layer_on_the_device_is_the_logs_own_offload_line(entry: dict) -> None:
    diagnosis = diagnose_text(entry["log"])
    on_gpu, total = map(int, OFFLOADED.findall(entry["log"])[-1])  # the last load's line
    verdict = all_layers_on_device(diagnosis.engine_figures, diagnosis.warnings)
    if on_gpu < total:
        assert verdict is False
    else:
        slow = [w for w in diagnosis.warnings if w.startswith("runs but slow")]
        assert verdict is (not slow)


def test_both_verdicts_are_among_the_real_logs() -> None:
    verdicts = {
        all_layers_on_device(d.engine_figures, d.warnings)
        for d in map(diagnose_text, (e["log"] for e in ENTRIES))
    }
    assert verdicts == {True, False}


def test_a_build_without_a_gpu_backend_does_not_say() -> None:
    diagnosis = diagnose_file(DATA / "llama-server" / "healthy-defaults.verbose.log")
    assert all_layers_on_device(diagnosis.engine_figures, diagnosis.warnings) is None


def _plan(chosen: OnGpuChange | None, fits_as_is: bool = False) -> OnGpuPlan:
    plan = OnGpuPlan(fits_as_is=fits_as_is, all_layers_mib=1000, usable_mib=800, weights_mib=20)
    plan.options = [chosen] if chosen else []
    return plan


def test_the_change_is_the_plans_one_with_what_must_come_along_and_every_layer() -> None:
    change = OnGpuChange("kv_dtype", "f16", "q8_0", 700, 800, "cost", {"flash_attn": True})
    profile = Profile(backend="llama.cpp", model="m.gguf", params={"context": 65536, "gpu_layers": 30})
    assert on_gpu_change(_plan(change), profile) == {
        "kv_dtype": "q8_0",
        "flash_attn": True,
        "gpu_layers": "all",
    }
    # every layer already (the default): only the plan's change
    default = Profile(backend="llama.cpp", model="m.gguf", params={"context": 65536})
    assert on_gpu_change(_plan(change), default) == {"kv_dtype": "q8_0", "flash_attn": True}
    # it fits as it is: only the layer count, and nothing where the profile already has every layer
    assert on_gpu_change(_plan(None, fits_as_is=True), profile) == {"gpu_layers": "all"}
    assert on_gpu_change(_plan(None, fits_as_is=True), default) == {}
