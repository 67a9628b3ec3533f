"""The builds of the log diagnosis a test can run, so that each is held to the same answers.

* "python": diagnose.py read as plain Python, with the pure-Python line scanner: the reference.
* "python+C": the same, with the compiled line scanner (vramtui.core._linescan).
* "mypyc+C": diagnose.py compiled by mypyc at install (vramtui.core._diagnose_native), as users get it.

The compiled ones are skipped where the install could not build them (no C compiler), unless
VRAMTUI_REQUIRE_COMPILED=1 (set by CI) makes that a failure.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import sys
from types import ModuleType

import pytest

from vramtui.core import diagnose as installed
from vramtui.core import textclean

try:
    from vramtui.core import _linescan as LINESCAN
except ImportError:
    LINESCAN = None

REQUIRE_COMPILED = bool(os.environ.get("VRAMTUI_REQUIRE_COMPILED"))


def _load_pure() -> ModuleType:
    """diagnose.py as plain Python, under a name of its own (so it never swaps in the compiled build)."""
    name = "vramtui_diagnose_pure"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, installed.__file__)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the file runs
    spec.loader.exec_module(module)
    module._LINESCAN = None
    return module


PURE = _load_pure()
NATIVE: ModuleType | None = installed._TWIN
ENGINE_NAMES = ("python", "python+C", "mypyc+C")


def missing(what: str) -> None:
    if os.environ.get("VRAMTUI_PURE_PYTHON"):
        message = f"{what} is switched off by VRAMTUI_PURE_PYTHON"
    else:
        message = (
            f"{what} was not built by this install, or diagnose.py changed since (`pip install -v -e .`)"
        )
    if REQUIRE_COMPILED:
        pytest.fail(f"{message}, and VRAMTUI_REQUIRE_COMPILED is set")
    pytest.skip(message)


def engine(name: str, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The diagnosis module of one build, its scanner set for the test's duration."""
    if name == "python":
        return PURE
    if LINESCAN is None:
        missing("the C line scanner")
    if name == "python+C":
        monkeypatch.setattr(PURE, "_LINESCAN", LINESCAN)
        return PURE
    if NATIVE is None:
        missing("the mypyc build of diagnose.py")
    monkeypatch.setattr(NATIVE, "_LINESCAN", LINESCAN)
    return NATIVE


def small_reads(patch: pytest.MonkeyPatch, build: ModuleType, chunk_bytes: int = 512) -> None:
    """Reads of `chunk_bytes`: many blocks, so that lines cross them and the memo switches are crossed."""
    for name in ("iter_raw_line_batches", "iter_raw_blocks"):
        patch.setattr(build, name, functools.partial(getattr(textclean, name), chunk_bytes=chunk_bytes))
