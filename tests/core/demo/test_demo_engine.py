"""`vramtui demo --auto --json` for real: generate the model, fail at the KV cache, bring it up."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from vramtui.core.demo import DEMO_CONTEXT

pytest.importorskip("llama_cpp")
pytestmark = pytest.mark.engine

REPO = Path(__file__).resolve().parents[3]

# Runs the CLI in-process in a child, then says whether Textual was ever imported.
CHILD = """
import sys
from vramtui.cli import main
code = main(["demo", "--auto", "--json", "--stress", "2", "--stress-tokens", "300"])
sys.stderr.write("TEXTUAL_IMPORTED=%s\\n" % ("textual" in sys.modules))
sys.exit(code)
"""


def test_demo_headless_json(tmp_path: Path) -> None:
    env = dict(os.environ)
    env["XDG_DATA_HOME"] = str(tmp_path / "data")
    env.pop("VRAMTUI_DATA_DIR", None)  # the record lands where a user's would: the XDG data dir
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    done = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "TEXTUAL_IMPORTED=False" in done.stderr
    data = json.loads(done.stdout)
    assert data["success"] is True
    assert data["steps"] and all({"param", "from", "to", "outcome"} <= set(step) for step in data["steps"])
    assert data["steps"][-1]["outcome"] == "works" and data["relaunches"] <= 2
    assert data["final_params"]["context"] < DEMO_CONTEXT
    assert data["first_run"]["failure_stage"] == "kv_cache"
    assert data["stress"]["answered"] == 2 and len(data["stress"]["floors_mib"]) == 2
    from vramtui.core.wizard.steprecord import open_session, to_markdown

    session = open_session(data["record"])  # the record keeps the stress check too (QA 31 W5)
    assert session.stress is not None and session.stress["answered"] == 2
    assert f"- stress check: {session.stress['verdict']}" in to_markdown(session)
    assert Path(data["record"]).is_relative_to(tmp_path / "data" / "vramtui" / "wizard")
    assert any((tmp_path / "cache" / "vramtui" / "demo").glob("*.gguf"))  # generated and cached there
    # the profile that runs is kept where a user's data is, and loads (QA 21 F14: never shown)
    from vramtui.core.launch.profile import load_profile

    saved = load_profile(tmp_path / "data" / "vramtui" / "demo" / "vramtui-demo.toml")
    assert saved.params["context"] == data["final_params"]["context"] and saved.memory_budget is not None
