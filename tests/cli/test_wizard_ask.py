"""QA 31 W12: at `wizard`'s question a value typed in place of y/n/s/e was asked again with no word; it is
taken as the edit it means, and an answer that is neither says what the question takes."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from vramtui.cli.wizard import _ask
from vramtui.core.demo.tinygguf import TinyModelSpec, write_tiny_gguf
from vramtui.core.launch.profile import Profile
from vramtui.core.wizard.proposal import Proposal
from vramtui.core.wizard.wizard import Wizard


def _asked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, typed: str) -> tuple[object, str]:
    write_tiny_gguf(tmp_path / "m.gguf", TinyModelSpec())
    profile = Profile(backend="llama.cpp", model=str(tmp_path / "m.gguf"), params={"context": 8192}, port=0)
    wizard = Wizard(profile, record=False)  # no budget: no edited value is held back for the estimate
    monkeypatch.setattr("sys.stdin", io.StringIO(typed))
    out = io.StringIO()
    return _ask(Proposal("context", 8192, 2048, "why"), out, wizard), out.getvalue()


def test_a_value_typed_at_the_question_is_the_edit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    chosen, _ = _asked(tmp_path, monkeypatch, "4096\n")
    assert isinstance(chosen, Proposal) and (chosen.param, chosen.to) == ("context", 4096)


def test_an_answer_that_is_no_value_says_what_the_question_takes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chosen, said = _asked(tmp_path, monkeypatch, "maybe\nn\n")
    assert chosen is None  # the "n" after it stops
    assert "answer y, n, s, or e to type a new value" in said
