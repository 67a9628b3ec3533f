"""A vramtui run log's header read back as the profile it launched (diagnose's first move, QA 36 F2)."""

from __future__ import annotations

from pathlib import Path

from vramtui.core.attach.logprofile import run_profile
from vramtui.core.units import MIB


def _head(launch: str, budget: str = "") -> str:
    lines = [f"2026-12-07T17:31:06.165 vramtui: launch {launch}"]
    if budget:
        lines.append(f"2026-12-07T17:31:06.170 vramtui: memory budget {budget} MiB, enforced on the host")
    return "\n".join([*lines, "0.00.000.000 I build: 7000 (abcdef0) with cc for x86_64", ""])


def test_the_launch_line_and_budget_are_the_profile(tiny_gguf: Path) -> None:
    text = _head(
        f"LLAMA_ARG_LOG_VERBOSITY=4 /opt/llama/bin/llama-server --model {tiny_gguf} --host 127.0.0.1 "
        "--port 41327 --ctx-size 32768 --parallel 4 -ctk q8_0",
        budget="600",
    )
    profile = run_profile(text)
    assert profile is not None and profile.backend.name == "llama.cpp"
    assert profile.model == str(tiny_gguf) and profile.memory_budget == 600 * MIB
    assert profile.params["context"] == 32768 and profile.params["parallel"] == 4
    assert profile.program == "/opt/llama/bin/llama-server"


def test_what_cannot_be_sized_here_is_no_profile(tiny_gguf: Path, tmp_path: Path) -> None:
    assert run_profile("0.00.000.000 I build: 7000 (abcdef0)\n") is None  # not vramtui's log
    missing = tmp_path / "elsewhere.gguf"
    assert run_profile(_head(f"/opt/llama/bin/llama-server --model {missing} --ctx-size 4096")) is None
    assert run_profile(_head(f"/opt/llama/bin/llama-server --model '{tiny_gguf}")) is None  # cut mid-quote
    assert run_profile(_head(f"/usr/bin/some-tool --model {tiny_gguf}")) is None  # no engine vramtui knows
