"""QA 29: a host budget under what the engine's largest process maps before any model buffer (vLLM's CPU
worker: its Backend's address_space_floor) is refused before launch, by check, run and the wizard alike.
It used to launch, fail 15 s later, and read as two different errors from run to run."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from vramtui.core.backends import get_backend
from vramtui.core.demo.tinyhf import write_tiny_hf
from vramtui.core.launch.launcher import budget_below_engine
from vramtui.core.launch.profile import Profile

MIB = 1 << 20
CONFIGS = Path(__file__).resolve().parents[2] / "data" / "configs"


def test_a_budget_under_the_engines_floor_is_said_with_the_floor(tmp_path: Path) -> None:
    floor = get_backend("vllm").address_space_floor
    assert floor > 1024 * MIB
    model = str(write_tiny_hf(tmp_path / "tiny-hf"))
    said = budget_below_engine(Profile(backend="vllm", model=model, memory_budget=1024 * MIB), None)
    assert said is not None and "1024 MiB" in said and f"{floor // MIB} MiB" in said
    # with the one least budget the estimate gives, in MiB as the refusal says the budget (QA 35 F5)
    assert "raise the memory budget to at least" in said and "GiB" not in said and "well above" not in said
    # just over the floor, its load (the worker, the checkpoint mapped beside the weights) does not fit
    loading = budget_below_engine(Profile(backend="vllm", model=model, memory_budget=floor + MIB), None)
    assert loading is not None and "while it loads" in loading
    assert (
        budget_below_engine(Profile(backend="vllm", model=model, memory_budget=floor + 256 * MIB), None)
        is None
    )
    assert budget_below_engine(Profile(backend="vllm", model=model), None) is None  # no budget
    # an engine with no such floor is not refused here (its measured footprint speaks at launch)
    gguf = Profile(backend="llama.cpp", model=model, memory_budget=64 * MIB)
    assert budget_below_engine(gguf, None) is None


def test_the_least_budget_holds_a_first_kv_cache_beside_the_worker(tmp_path: Path) -> None:
    """QA 37 F5 (real runs of vLLM 0.32's CPU build here): a tiny Llama with a 16 MiB cache set outright was
    told "at least 1988 MiB", failed there at its KV cache (std::bad_alloc), and ran at 2033 MiB."""
    model = str(write_tiny_hf(tmp_path / "tiny-hf"))
    params = {"context": 2048, "parallel": 4, "kv_cache_memory": "16MiB"}
    said = budget_below_engine(
        Profile(backend="vllm", model=model, params=params, memory_budget=1024 * MIB), None
    )
    assert said is not None, said
    least = int(said.split("to at least ")[1].split(" MiB")[0])
    assert 1988 < least <= 2060, said


def test_a_budget_the_load_cannot_fit_in_is_said_with_the_least_that_does(tmp_path: Path) -> None:
    """QA 33 V6: over the engine's floor, but under what its CPU worker maps while it loads this model (the
    checkpoint beside the weights it fills): check launched, failed 35 s later, and named no figure."""
    model = tmp_path / "qwen-0.5b"
    model.mkdir()
    shutil.copy(CONFIGS / "Qwen--Qwen2.5-0.5B-Instruct.config.json", model / "config.json")
    params = {"context": 2048, "kv_cache_memory": "256MiB"}
    said = budget_below_engine(
        Profile(backend="vllm", model=str(model), params=params, memory_budget=3 << 30), None
    )
    assert said is not None and "while it loads" in said and "cannot start under it" in said, said
    least = int(said.split("to at least ")[1].split(" MiB")[0])
    assert 3 * 1024 < least < 5 * 1024, said
    roomy = Profile(backend="vllm", model=str(model), params=params, memory_budget=(least + 64) * MIB)
    assert budget_below_engine(roomy, None) is None


def _vramtui(*args: str, data: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "VRAMTUI_DATA_DIR": str(data)}  # its run logs and records stay in the test's folder
    return subprocess.run(
        [sys.executable, "-m", "vramtui", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )


def test_check_and_the_wizard_refuse_it_before_launch(tmp_path: Path) -> None:
    write_tiny_hf(tmp_path / "tiny-hf")
    profile = tmp_path / "p.toml"
    # the program is never run: the refusal comes before the launch (this Python stands in for vllm)
    profile.write_text(
        f'backend = "vllm"\nmodel = "tiny-hf"\nprogram = "{sys.executable}"\n'
        '[params]\ncontext = 1024\nkv_cache_memory = "64MiB"\n[limits]\nmemory_budget = "1GiB"\n',
        encoding="utf-8",
    )
    checked = _vramtui("check", str(profile), data=tmp_path / "data")
    wizard = _vramtui("wizard", str(profile), "--auto", data=tmp_path / "data")
    # one line and exit 2, as the other settings an engine refuses before launch, with no `$ vllm serve`
    # printed as if launched (QA 35 F5: exit 1 after the command line)
    assert checked.returncode == 2, checked.stdout + checked.stderr
    assert "cannot start under it" in checked.stderr and checked.stderr.count("\n") == 1
    assert "$ " not in checked.stdout and "Traceback" not in checked.stderr
    assert "no engine setting helps" in wizard.stdout and "cannot start under it" in wizard.stdout
    assert "not a memory problem" not in wizard.stdout
