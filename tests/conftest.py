"""Shared fixtures: real tiny GGUF models, made once per test session."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from vramtui.core.demo.tinygguf import TinyModelSpec, write_tiny_gguf

SHARED = Path(__file__).resolve().parents[1].parent / "shared"

# Test modules whose fakes other folders' tests reuse (FakeDriver, ReplayedRuns, the TUI helpers):
# importable whichever folder pytest is pointed at.
for _folder in ("core/memory", "core/wizard", "core/backends", "tui"):
    sys.path.insert(0, str(Path(__file__).resolve().parent / _folder))


@pytest.fixture(scope="session")
def tiny_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo-sized model: 4 layers, 512 wide, f16 (about 21 MB)."""
    return write_tiny_gguf(tmp_path_factory.mktemp("models") / "tiny-f16.gguf", TinyModelSpec())


@pytest.fixture(scope="session")
def make_gguf(tmp_path_factory: pytest.TempPathFactory):
    """Build a GGUF of any TinyModelSpec shape, cached per shape for the session."""
    cache: dict[TinyModelSpec, Path] = {}
    folder = tmp_path_factory.mktemp("gguf-shapes")

    def make(**kwargs: object) -> Path:
        spec = TinyModelSpec(**kwargs)  # type: ignore[arg-type]
        if spec not in cache:
            name = f"l{spec.n_layer}-e{spec.n_embd}-h{spec.n_head}-kv{spec.n_head_kv}-{spec.dtype}.gguf"
            cache[spec] = write_tiny_gguf(folder / name, spec)
        return cache[spec]

    return make


@pytest.fixture(scope="session")
def shared_logs() -> Path:
    """The corpus of real logs from public bug reports (../shared/logs)."""
    # Prefer the live ../shared/logs (it grows); the copy in tests/data keeps a lone checkout testable.
    path = SHARED / "logs"
    if (path / "corpus.jsonl").is_file():
        return path
    return Path(__file__).resolve().parent / "data"
