"""The shape of the code, checked: a pure core, and each engine's knowledge in its own place."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "vramtui"
UI_LIBRARIES = ("textual", "rich")


def _modules(folder: Path) -> list[str]:
    names = []
    for path in sorted(folder.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def _imported_roots(path: Path) -> set[str]:
    roots = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


def test_core_never_imports_textual_or_rich_in_its_source() -> None:
    offenders = [
        f"{path.relative_to(ROOT)} imports {root}"
        for path in sorted((PACKAGE / "core").rglob("*.py"))
        for root in _imported_roots(path)
        if root in UI_LIBRARIES
    ]
    assert offenders == []


def test_importing_every_core_module_loads_no_ui_library() -> None:
    """The same at run time: a core module may not pull Textual or Rich in through another module."""
    modules = _modules(PACKAGE / "core")
    assert len(modules) > 20  # the walk found the core
    script = (
        "import importlib, sys\n"
        f"for name in {modules!r}: importlib.import_module(name)\n"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {UI_LIBRARIES!r}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
