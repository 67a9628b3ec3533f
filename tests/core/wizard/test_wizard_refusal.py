"""A setting the engine refuses before it loads anything is step 0's finding, not a launch: the wizard's
first launch already carries the change the refusal names (a real llama-server, a real tiny GGUF)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.engine


def test_refused_settings_cost_no_launch(llama_server_bin: Path, tiny_gguf: Path, tmp_path: Path) -> None:
    profile = tmp_path / "p.toml"
    profile.write_text(
        f'backend = "llama.cpp"\nmodel = "{tiny_gguf}"\nprogram = "{llama_server_bin}"\n'
        "[params]\ncontext = 4096\nparallel = 300\n",
        encoding="utf-8",
    )
    record = tmp_path / "rec.jsonl"
    env = dict(os.environ, XDG_DATA_HOME=str(tmp_path / "data"))
    done = subprocess.run(
        [sys.executable, "-m", "vramtui", "wizard", str(profile), "--auto", "--json", "--record", str(record)],
        capture_output=True, text=True, timeout=300, check=False, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    first, steps = result["first_run"], result["steps"]
    assert first["outcome"] == "refused" and first["log_file"] is None
    assert "at most 256 sequences at once, not 300" in first["verification"][0]
    assert [(s["param"], s["from"], s["to"], s["outcome"]) for s in steps] == [
        ("parallel", 300, 256, "works")
    ]
    lines = [json.loads(row) for row in record.read_text(encoding="utf-8").splitlines()]
    launched = [row for row in lines if row["type"] == "process"]
    assert [row["step"] for row in launched] == [1]  # one model load: the one with the change
    assert result["final_params"]["parallel"] == 256
