"""Which accelerators this Python's torch was built for, read from its `torch/version.py` without importing
torch (an import takes seconds and maps ~630 MiB): `cuda`, `hip` (ROCm, whose device is still "cuda") and
`xpu` are None in a build without them."""

from __future__ import annotations

import functools
import importlib.util
import re
from pathlib import Path

_BUILD_RE = re.compile(r"^(cuda|hip|xpu)\s*(?::[^=\n]*)?=\s*(None|['\"][^'\"]*['\"])", re.MULTILINE)
_VERSION_RE = re.compile(r"^__version__\s*=\s*['\"]([^'\"]+)['\"]", re.MULTILINE)

# A device name -> the torch builds that have it ("cuda" is ROCm's device name too)
_NEEDS = {"cuda": {"cuda", "hip"}, "xpu": {"xpu"}}


@functools.cache
def torch_build() -> tuple[str, frozenset[str]] | None:
    """(torch's version, the accelerators it was built for), or None when it is not installed or unreadable."""
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return None
    places = list(spec.submodule_search_locations or []) if spec is not None else []
    try:
        text = (Path(places[0]) / "version.py").read_text(encoding="utf-8") if places else ""
    except OSError:
        return None
    version = _VERSION_RE.search(text)
    if version is None:
        return None
    built = frozenset(name for name, value in _BUILD_RE.findall(text) if value != "None")
    return version.group(1), built


def device_map_here(value: object) -> str | None:
    """device_map naming one accelerator this torch was not built for: its problem in one line, else None."""
    device = str(value).strip().lower()
    kind = device.split(":", 1)[0]
    build = torch_build()
    if kind not in _NEEDS or build is None:
        return None  # "auto", "cpu", a map accelerate places; or no torch (its import says so at load)
    version, built = build
    if built & _NEEDS[kind]:
        return None
    return (
        f'device_map = "{value}": this Python\'s torch {version} is built without {kind} support, so the '
        f'model could only fail to load; set device_map = "cpu" (or "auto"), or install a torch built for '
        "your GPU"
    )
