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


BACKEND_NAMES = {
    "llama.cpp",
    "llama-cpp-python",
    "vllm",
    "transformers",
    "ollama",
    "sglang",
    "tgi",
    "llama_cpp",
    "ik_llama.cpp",
}


def _names_compared(tree: ast.AST) -> list[tuple[int, str]]:
    """Backend names written as string literals in a comparison (==, !=, in, not in)."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare):
            continue
        for side in (node.left, *node.comparators):
            items = side.elts if isinstance(side, ast.Tuple | ast.List | ast.Set) else [side]
            found += [
                (node.lineno, item.value)
                for item in items
                if isinstance(item, ast.Constant) and item.value in BACKEND_NAMES
            ]
    return found


def test_the_check_sees_a_name_comparison() -> None:
    tree = ast.parse('b == "vllm" or b in ("ollama", "tgi") or b.name != "llama.cpp"')
    assert [name for _, name in _names_compared(tree)] == ["vllm", "ollama", "tgi", "llama.cpp"]


def test_no_backend_name_is_compared_outside_core_backends() -> None:
    """One place per engine family: everywhere else asks the Backend (or its log/memory profile)."""
    backends = PACKAGE / "core" / "backends"
    offenders = [
        f"{path.relative_to(ROOT)}:{line} compares with {name!r}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if backends not in path.parents
        for line, name in _names_compared(ast.parse(path.read_text(), str(path)))
    ]
    assert offenders == []


def _engine_imports(path: Path) -> list[str]:
    """The engine packages (vramtui.core.backends.<family>) a module imports, at any depth of the file."""
    families = {child.name for child in (PACKAGE / "core" / "backends").iterdir() if child.is_dir()}
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names = []
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        for name in names:
            parts = name.split(".")
            if parts[:3] == ["vramtui", "core", "backends"] and len(parts) > 3 and parts[3] in families:
                found.append(".".join(parts[:4]))
    return sorted(set(found))


def test_the_mechanisms_never_import_an_engine() -> None:
    """core/logs and core/estimate take each engine's wording and accounting from the registry
    (vramtui.core.backends), which is the one place that names every engine."""
    offenders = [
        f"{path.relative_to(ROOT)} imports {name}"
        for folder in ("logs", "estimate")
        for path in sorted((PACKAGE / "core" / folder).rglob("*.py"))
        for name in _engine_imports(path)
    ]
    assert offenders == []


def test_the_engine_import_check_sees_one(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        "from vramtui.core.backends.vllm import memory\nfrom vramtui.core.backends import get_backend\n"
    )
    assert _engine_imports(module) == ["vramtui.core.backends.vllm"]


def test_units_of_one_concern() -> None:
    """No function over 100 lines and no class over 450 (the aim is 80 and 400)."""
    too_long = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            size = (node.end_lineno or node.lineno) - node.lineno + 1 if hasattr(node, "lineno") else 0
            is_function = isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            if (is_function and size > 100) or (isinstance(node, ast.ClassDef) and size > 450):
                too_long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({size} lines)")
    assert too_long == []


def test_each_shared_name_is_defined_once() -> None:
    """STAGES, MIB, GIB and LogLine mean one thing: one definition each, imported everywhere else."""
    wanted = {"STAGES", "MIB", "GIB", "LogLine"}
    where: dict[str, list[str]] = {name: [] for name in wanted}
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.parse(path.read_text(), str(path)).body:
            targets = [t.id for t in getattr(node, "targets", []) if isinstance(t, ast.Name)]
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                targets.append(node.target.id)
            if isinstance(node, ast.ClassDef):
                targets.append(node.name)
            for name in wanted.intersection(targets):
                where[name].append(str(path.relative_to(ROOT)))
    assert {name: len(files) for name, files in where.items()} == dict.fromkeys(wanted, 1), where
