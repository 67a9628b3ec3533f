"""Which build of an engine a profile runs, as the memory accounting keys on it: vLLM's minor version,
read from the package metadata of the interpreter its `vllm` script names (no import of vLLM). The wizard
and the run record size with it; before, every vLLM was sized as today's (CUDA graphs inside the budget,
which vLLM does from 0.21 on)."""

from __future__ import annotations

from pathlib import Path

import pytest

from vramtui.core.backends.vllm.version import minor_of
from vramtui.core.launch.footprint import engine_build
from vramtui.core.launch.profile import Profile
from vramtui.core.wizard.budget import MemoryModel

CONFIG = Path(__file__).resolve().parents[2] / "data" / "configs" / "Qwen--Qwen2.5-0.5B-Instruct.config.json"


def _fake_vllm(folder: Path, version: str) -> Path:
    """A `vllm` script whose interpreter answers the metadata question with `version`, as a venv's would."""
    interpreter = folder / "python3"
    interpreter.write_text(f"#!/bin/sh\necho '{version}'\n")
    interpreter.chmod(0o755)
    script = folder / "vllm"
    script.write_text(f"#!{interpreter}\n# vllm's console script\n")
    script.chmod(0o755)
    return script


@pytest.mark.parametrize(
    ("version", "minor"), [("0.20.2", 20), ("0.11.0rc1", 11), ("0.10.1.1", 10), ("1.2.0", None)]
)
def test_the_minor_version_comes_from_the_scripts_interpreter(
    tmp_path: Path, version: str, minor: int | None
) -> None:
    assert minor_of(_fake_vllm(tmp_path, version)) == minor


def test_a_program_that_is_not_a_python_script_has_no_version(tmp_path: Path) -> None:
    binary = tmp_path / "vllm"
    binary.write_bytes(b"\x7fELF\x02\x01\x01")
    assert minor_of(binary) is None
    assert minor_of(tmp_path / "missing") is None


def test_the_wizard_sizes_for_the_vllm_the_profile_runs(tmp_path: Path) -> None:
    program = _fake_vllm(tmp_path, "0.20.2")
    profile = Profile(backend="vllm", model=str(CONFIG), program=str(program), params={"context": 2048})
    assert engine_build(profile) == 20
    model = MemoryModel(profile, device_bytes=8 << 30)
    assert model._settings(profile, model.info(str(CONFIG)))["engine_build"] == 20
    # a llama.cpp profile does not tell builds apart here: sized as today's
    assert engine_build(Profile(backend="llama.cpp", model=str(CONFIG), program=str(program))) is None


def test_the_real_vllm_build_is_read_from_its_venv(vllm_program: Path) -> None:
    # the CPU build .ci/run installs (0.32) in a venv of its own, apart from vramtui's Python
    minor = minor_of(vllm_program)
    assert minor is not None and minor >= 21, minor


def test_a_launchs_bill_sizes_the_kv_cache_for_the_build_it_runs() -> None:
    """vLLM 0.20 billed its CUDA graphs outside the budget, so its KV cache takes their room too; from 0.21
    the graphs come off the budget first (the check's bill of a launch follows the build)."""
    from vramtui.core.launch.billcheck import LaunchEstimate

    bills = {}
    for build in (20, 32):
        bill, note = LaunchEstimate(str(CONFIG), {"context": 2048}, "vllm", True, 24 << 30, build).result()
        assert bill is not None, note
        bills[build] = bill
    graphs = bills[32].get("cuda_graphs", 0)
    assert graphs > 0
    gained = bills[20].get("kv_cache", 0) - bills[32].get("kv_cache", 0)
    assert 0 <= graphs - gained < 1 << 20  # the graphs' room, in whole KV blocks


def test_a_run_record_names_the_vllm_version_it_ran(tmp_path: Path) -> None:
    """QA 29 Q14: run records labelled the engine "vllm build ab051b58", a hash of its 287-byte launcher
    script, with no word of the version. The label and the identity carry the minor version."""
    from vramtui.core.launch.runrecord import engine_build as build_identity

    program = _fake_vllm(tmp_path, "0.20.2")
    profile = Profile(backend="vllm", model=str(CONFIG), program=str(program))
    identity, label = build_identity(profile, [str(program), "serve"])
    assert identity is not None and identity.endswith(":0.20")
    assert label is not None and label.startswith("vllm 0.20 build ")
    (tmp_path / "other").mkdir()
    other = _fake_vllm(tmp_path / "other", "0.21.0")
    assert build_identity(profile.with_changes(program=str(other)), [str(other), "serve"])[0] != identity
