"""llama-server starts its HTTP pool (a thread per slot and a few, each reserving a stack) before it reads
the model: under an address-space budget, 128 slots die there (a real llama-server, a real tiny GGUF).
QA: this read "the budget is too small to start, no setting helps"; fewer slots start it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.engine


def test_a_pool_of_http_threads_over_the_budget_takes_fewer_slots(
    llama_server_bin: Path, tiny_gguf: Path, tmp_path: Path
) -> None:
    profile = tmp_path / "p.toml"
    profile.write_text(
        f'backend = "llama.cpp"\nmodel = "{tiny_gguf}"\nprogram = "{llama_server_bin}"\n'
        '[params]\ncontext = 4096\nparallel = 128\n[limits]\nmemory_budget = "900 MiB"\n',
        encoding="utf-8",
    )
    env = dict(os.environ, XDG_DATA_HOME=str(tmp_path / "data"))
    done = subprocess.run(
        [sys.executable, "-m", "vramtui", "wizard", str(profile), "--auto", "--json", "--record", str(tmp_path / "r.jsonl")],
        capture_output=True, text=True, timeout=300, check=False, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    said = subprocess.run(
        [sys.executable, "-m", "vramtui", "diagnose", result["first_run"]["log_file"], "--json"],
        capture_output=True, text=True, timeout=60, check=False, env=env,
    )  # fmt: skip
    diagnosis = json.loads(said.stdout)
    assert diagnosis["cause"] == "http_threads_start"
    assert diagnosis["engine_figures"]["http_threads"] == 132  # 128 slots and 4
    assert "--parallel 16" in " ".join(diagnosis["advice"])
    # 900 MiB / 4 in 8 MiB stacks: 28 threads, 24 beside the 4 that are not slots; a power of two below
    assert [(s["param"], s["from"], s["to"], s["outcome"]) for s in result["steps"]] == [
        ("parallel", 128, 16, "works")
    ]
