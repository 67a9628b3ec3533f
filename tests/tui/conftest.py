"""The app's tests never touch the user's own config, data or cache dirs."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def isolated_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Config, data and cache dirs under tmp (the run store is tests/conftest.py's own data dir)."""
    for name in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME"):
        monkeypatch.setenv(name, str(tmp_path / name.lower()))
    monkeypatch.setenv("VRAMTUI_CONFIG_DIR", str(tmp_path / "config"))
    return tmp_path
