"""The compute buffer is what did not fit (a real llama-server, a real tiny GGUF, an address-space budget):
llama.cpp reserves it after the weights and the KV cache, and it grows with the micro-batch, so the first
move is a smaller micro-batch, not a shorter context (QA: the wizard cut the context first, and the
advice asked for flash attention that `auto` had already turned on)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.engine

# 4 layers, 512 wide: weights 21 MiB, KV 512 MiB at 65536 cells; the compute buffer at a micro-batch of
# 2048 is 292 MiB (flash attention on), 37 MiB at 256. 1000 MiB of address space holds all but it.
BUDGET_MIB = 1000


def _vramtui(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vramtui", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env=env,
    )


def test_a_compute_buffer_that_does_not_fit_takes_a_smaller_micro_batch_first(
    llama_server_bin: Path, tiny_gguf: Path, tmp_path: Path
) -> None:
    profile = tmp_path / "p.toml"
    profile.write_text(
        f'backend = "llama.cpp"\nmodel = "{tiny_gguf}"\nprogram = "{llama_server_bin}"\n'
        "[params]\ncontext = 65536\nubatch = 2048\nbatch = 2048\n"  # flash attention: the engine's auto
        f'[limits]\nmemory_budget = "{BUDGET_MIB} MiB"\n',
        encoding="utf-8",
    )
    env = dict(os.environ, XDG_DATA_HOME=str(tmp_path / "data"))
    done = _vramtui(
        "wizard", str(profile), "--auto", "--json", "--record", str(tmp_path / "r.jsonl"), env=env
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    first = result["first_run"]
    assert (first["failure_stage"], first["failure"]) == ("kv_cache", "host_oom"), first
    steps = [(s["param"], s["from"], s["to"], s["outcome"]) for s in result["steps"]]
    assert steps[0][:2] == ("ubatch", 2048) and steps[-1][3] == "works", steps
    assert int(steps[0][2]) < 2048 and result["final_params"]["context"] == 65536

    # The diagnosis of that first run: auto resolved flash attention to on, so no line asks for it.
    log = first["log_file"]
    said = json.loads(_vramtui("diagnose", log, "--json", env=env).stdout)
    assert said["cause"] == "compute_alloc_failed"
    advice = " ".join(said["advice"])
    assert said["engine_figures"]["flash_attn"] == 1
    assert "Turn on flash attention" not in advice and "--ubatch-size 256" in advice
