"""One first move for one KV overrun, whichever way it is met (issue 22 #38).

The case: the tiny model with a 262144-token context under a 500 MiB budget, on llama-cpp-python's real
server. `vramtui check` launches it (its KV cache cannot be allocated under the budget), `vramtui wizard`
launches it and proposes, and `vramtui wizard --attach` meets the same server started by hand, over the
same budget. `check` used to lead with its diagnosis' own context figure ("lower --n_ctx 16384") while
both wizards proposed another; all three now take the first move from one place (wizard.first_move).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from test_attach_cli import _free_port, _start

pytestmark = pytest.mark.engine

BUDGET_MIB = 500
CONTEXT = 262144


def _vramtui(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vramtui", *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _move(data: dict[str, object] | None) -> tuple[object, object, object]:
    assert data is not None
    return data["param"], data["from"], data["to"]


def test_check_the_wizard_and_the_attached_wizard_take_the_same_first_move(
    tiny_gguf: Path, tmp_path: Path
) -> None:
    pytest.importorskip("llama_cpp.server.app")
    profile = tmp_path / "kv.toml"
    profile.write_text(
        f'backend = "llama-cpp-python"\nmodel = "{tiny_gguf}"\nport = 0\n'
        f'[params]\ncontext = {CONTEXT}\n[limits]\nmemory_budget = "{BUDGET_MIB}MiB"\n'
    )
    checked = _vramtui("check", str(profile), "--json")
    assert checked.returncode == 1, checked.stderr
    check = json.loads(checked.stdout)
    assert (check["failure"], check["failure_stage"]) == ("host_oom", "kv_cache")  # the KV overrun

    proposed = _vramtui("wizard", str(profile), "--json", "--record", str(tmp_path / "w.jsonl"))
    wizard = json.loads(proposed.stdout)
    assert wizard["steps"] == [] and wizard["pending"] is not None, proposed.stderr

    port = _free_port()
    argv = [sys.executable, "-m", "llama_cpp.server", "--model", str(tiny_gguf), "--host", "127.0.0.1"]
    argv += ["--port", str(port), "--n_ctx", str(CONTEXT)]
    for server in _start(argv, tmp_path / "server.log", "/v1/models", port):
        attached = _vramtui(
            "wizard", "--attach", f"http://127.0.0.1:{port}", "--budget", f"{BUDGET_MIB}MiB",
            "--restart-timeout", "1", "--max-steps", "1", "--json", "--record", str(tmp_path / "a.jsonl"),
        )  # fmt: skip
        assert server.poll() is None
    on_attach = json.loads(attached.stdout)
    assert on_attach["first_run"]["peak_mib"] > BUDGET_MIB, attached.stderr  # over the same budget
    (step,) = on_attach["steps"]

    first = _move(wizard["pending"])
    assert first[0] == "context" and first[1] == CONTEXT
    assert _move(check["first_move"]) == first
    # the attached server's budget is judged on its RSS, whose idle share (the engine's measured idle RSS)
    # is below the address space a launch under the cap needs: the same move, with as much room or more
    assert _move(step)[:2] == first[:2] and step["to"] >= first[2], (step, first)

    # and the text `check` prints leads with that move, with no other value for the same setting
    text = _vramtui("check", str(profile)).stdout.splitlines()
    told = [line.strip() for line in text if line.strip().startswith(("first move", "other ways", "advice:"))]
    assert told[0].startswith(f"first move (the wizard's): context (--n_ctx): {CONTEXT} → {first[2]} — ")
    assert not any("--n_ctx" in line for line in told[1:]), told
    # the advice left after the first move's own line stands alone: no "Or ..." after a line not shown
    assert not any(line.split(": ", 1)[-1].startswith(("Or ", "Then ")) for line in told[1:]), told
    # beside the move, the log's own advice is said as the other ways, not as a second answer (QA 5)
    assert all(line.startswith("other ways, from the log: ") for line in told[1:]) and len(told) > 1, told
    # the line the advice refers to ("the first error line above") is printed, as diagnose prints it (QA)
    assert any(line.strip().startswith("first error (line ") for line in text), text
