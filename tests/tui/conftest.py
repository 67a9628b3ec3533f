"""The app's tests never touch the user's own config, data or cache dirs."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def isolated_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Config, data and cache dirs under tmp (the run store is tests/conftest.py's own data dir). The
    engines' measured footprints (core/launch/footprint.py) are the one cache carried in and back: a
    measurement starts the engine up to 16 times, once per binary, not once per test."""
    from vramtui.core.launch.footprint import cache_file

    shared = cache_file()
    for name in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME"):
        monkeypatch.setenv(name, str(tmp_path / name.lower()))
    monkeypatch.setenv("VRAMTUI_CONFIG_DIR", str(tmp_path / "config"))
    own = cache_file()
    _carry(shared, own)
    yield tmp_path
    _carry(own, shared)


def _carry(source: Path, target: Path) -> None:
    """Merge the footprint measurements of `source` into `target` (what neither holds is left alone)."""
    try:
        found = json.loads(source.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    try:
        held = json.loads(target.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        held = {}
    if isinstance(found, dict) and isinstance(held, dict) and found.keys() - held.keys():
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(held | found, indent=1), encoding="utf-8")
