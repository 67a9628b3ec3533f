"""QA 31 W6: the stress check's prompt is as long as asked in the engine's own tokens. The tiny model's
tokenizer makes two tokens of each filler character: a prompt meant to fill a 4096 context asked for 8084
and every stress check failed with HTTP 400, for a reason that had nothing to do with memory."""

from __future__ import annotations

from pathlib import Path

import pytest

from vramtui.core.demo.tinygguf import TinyModelSpec, write_tiny_gguf
from vramtui.core.launch.profile import Profile
from vramtui.core.wizard.stress import stress_check

pytest.importorskip("llama_cpp")
pytestmark = pytest.mark.engine


def test_the_stress_prompt_fills_the_context_in_the_engines_own_tokens(tmp_path: Path) -> None:
    write_tiny_gguf(tmp_path / "t.gguf", TinyModelSpec())
    profile = Profile(
        backend="llama-cpp-python", model=str(tmp_path / "t.gguf"), params={"context": 1024}, port=0
    )
    filled = stress_check(profile, requests=2)
    assert filled.answered == 2 and not filled.failures, filled.failures
    # the engine's count (its reply's usage): the whole context but the answer's room and a little slack
    assert 1024 - 8 - 32 <= filled.input_tokens <= 1024 - 8, filled.input_tokens
    asked = stress_check(profile, requests=1, input_tokens=300)
    assert abs(asked.input_tokens - 300) <= 4 and "1 request of" in asked.verdict, asked.verdict


def test_a_stress_request_fills_one_slot_where_the_slots_split_the_context(
    llama_server_bin: Path, tmp_path: Path
) -> None:
    """QA 37 F2: with --parallel 4 llama-server gives each slot a quarter of --ctx-size; the stress check
    asked for the whole context (131048 tokens of 32768) and every request got HTTP 400."""
    write_tiny_gguf(tmp_path / "t.gguf", TinyModelSpec())
    profile = Profile(
        backend="llama.cpp", model=str(tmp_path / "t.gguf"), program=str(llama_server_bin),
        params={"context": 4096, "parallel": 4}, port=0,
    )  # fmt: skip
    filled = stress_check(profile, requests=1)
    assert filled.answered == 1 and not filled.failures, filled.failures
    assert 1024 - 8 - 32 <= filled.input_tokens <= 1024 - 8, filled.input_tokens  # one slot's 1024
