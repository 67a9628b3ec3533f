"""QA 31 W5: transformers' KV cache grows with each request, so a server with a 131072-token context starts
and answers a short request under a 1 GiB budget; a long request then dies of out-of-memory. `check` and
the wizard said "runs" with no word of it. Now both say what a request of the whole context needs and the
largest context that fits (the real runner, a tiny random-weight model)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from vramtui.core.demo.tinyhf import write_tiny_hf
from vramtui.core.launch.profile import Profile
from vramtui.core.units import GIB

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("transformers") is None or importlib.util.find_spec("torch") is None,
    reason="transformers and torch are not installed",
)


def test_a_run_whose_whole_context_would_not_fit_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from vramtui.cli import main
    from vramtui.core.wizard.wizard import Wizard

    model = write_tiny_hf(tmp_path / "m")
    profile = Profile(
        backend="transformers", model=str(model), port=0, params={"context": 131072, "threads": 1},
        memory_budget=1 * GIB,
    )  # fmt: skip
    result = Wizard(profile, auto=True, record_path=tmp_path / "w.jsonl").run(max_steps=1)
    assert result.success  # it does start and answer the smallest request
    (note,) = [line for line in result.advice if "grows with each request" in line]
    assert "131,072 tokens" in note and "the largest context that fits is about" in note

    (tmp_path / "p.toml").write_text(
        f'backend = "transformers"\nmodel = "{model}"\nport = 0\n[limits]\nmemory_budget = "1GiB"\n'
        "[params]\ncontext = 131072\nthreads = 1\n"
    )
    assert main(["check", str(tmp_path / "p.toml"), "--json"]) == 0
    warnings = json.loads(capsys.readouterr().out)["warnings"]
    assert any("grows with each request" in line for line in warnings), warnings
    # a context that fits: no such word
    (tmp_path / "p.toml").write_text((tmp_path / "p.toml").read_text().replace("131072", "1024"))
    assert main(["check", str(tmp_path / "p.toml"), "--json"]) == 0
    assert not any(
        "grows with each request" in line for line in json.loads(capsys.readouterr().out)["warnings"]
    )


def test_one_request_of_the_whole_context_is_one_sequences_not_every_slots(tmp_path: Path) -> None:
    """QA 37 F7: with 64 sequences of 4096 tokens the note said one full-context request needs 17.3 GiB (the
    bill of all 64) and to cut the context to 512, where the same run's stress check answered 4072-token
    requests. vramtui sends one request at a time: one sequence's bill is what must fit."""
    from vramtui.core.wizard.budget import MemoryModel
    from vramtui.core.wizard.reach import long_request_note

    model = write_tiny_hf(tmp_path / "m")
    many = Profile(
        backend="transformers", model=str(model), params={"context": 4096, "parallel": 64},
        memory_budget=1 * GIB,
    )  # fmt: skip
    one = many.with_param("parallel", 1)
    whole = many.with_param("context", 131072)  # one request of 131072 tokens does not fit
    note = long_request_note(MemoryModel(whole), whole)
    assert note is not None and "131,072 tokens" in note
    # what one request needs does not grow with the slots beside it
    assert long_request_note(MemoryModel(many), many) == long_request_note(MemoryModel(one), one)
    assert note == long_request_note(
        MemoryModel(whole.with_param("parallel", 1)), whole.with_param("parallel", 1)
    )
