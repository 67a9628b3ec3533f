"""The embedded demo's pieces that need no engine: the cached model, the profile, the CLI's routing."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pytest

from vramtui.core.demo import DEMO_BUDGET, DEMO_CONTEXT, demo_model_path, demo_profile
from vramtui.core.estimate.modelinfo import load_model_info


def test_the_model_is_generated_once_and_reused(tmp_path: Path) -> None:
    first = demo_model_path(tmp_path)
    stamp = first.stat().st_mtime_ns
    os.utime(first, ns=(stamp - 10**9, stamp - 10**9))
    again = demo_model_path(tmp_path)
    assert again == first and again.stat().st_mtime_ns == stamp - 10**9  # not rewritten
    info = load_model_info(first)
    assert (info.n_layers, info.hidden, info.max_context) == (4, 512, DEMO_CONTEXT)


def test_a_broken_cached_model_is_made_again(tmp_path: Path) -> None:
    path = demo_model_path(tmp_path)
    path.write_bytes(b"not a gguf")
    assert demo_model_path(tmp_path).read_bytes()[:4] == b"GGUF"


def test_the_demo_profile_asks_for_more_than_the_budget_holds(tmp_path: Path) -> None:
    profile = demo_profile(tmp_path)
    assert profile.backend.name == "llama-cpp-python" and profile.port == 0
    assert profile.params == {"context": DEMO_CONTEXT} and profile.memory_budget == DEMO_BUDGET
    # The KV cache alone (4 layers x 2 x 512 x f16 per token) is more than the whole budget.
    assert DEMO_CONTEXT * 4 * 2 * 512 * 2 > DEMO_BUDGET


def test_demo_without_flags_opens_the_app(monkeypatch: pytest.MonkeyPatch) -> None:
    import vramtui.tui.app
    from vramtui.cli import demo

    calls: list[dict[str, object]] = []
    monkeypatch.setattr(vramtui.tui.app, "run_app", lambda **kwargs: calls.append(kwargs) or 0)
    monkeypatch.setattr("vramtui.cli.common.has_terminal", lambda: True)
    parser = argparse.ArgumentParser()
    demo.add_arguments(parser)
    assert demo.run(parser.parse_args([])) == 0
    assert calls == [{"demo": True}]


def test_demo_cache_write_failure_is_one_clear_line(tmp_path: Path) -> None:
    from vramtui.core.errors import VramtuiError

    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(VramtuiError, match="cannot write the demo model"):
        demo_model_path(blocker / "sub")
