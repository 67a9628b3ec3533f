"""Which vLLM a `vllm` program runs: its minor version (0.32.1 -> 32), the build its memory accounting keys
on (vLLM takes its CUDA graphs off the budget before the KV cache from 0.21 on).

Read from the package metadata of the interpreter the program's shebang names (its venv), without
importing vLLM: that import takes seconds, the metadata a tenth of one. Unknown (None) sizes as today's.
"""

from __future__ import annotations

import functools
import re
import subprocess
from pathlib import Path

_ASK = "import importlib.metadata as m; print(m.version('vllm'))"
_VERSION = re.compile(r"^0\.(\d+)(?:[.+a-z]|$)")
_TIMEOUT_S = 15


def minor_of(program: Path) -> int | None:
    """The minor version of the vLLM that `program` (a `vllm` script, or the Python that runs
    `-m vllm...`) runs; None when it cannot be told."""
    try:
        stat = program.stat()
    except OSError:
        return None
    return _minor(str(program), stat.st_mtime_ns)


@functools.cache
def _minor(program: str, _mtime_ns: int) -> int | None:
    interpreter = _interpreter(Path(program))
    if interpreter is None:
        return None
    try:
        done = subprocess.run(
            [interpreter, "-c", _ASK], capture_output=True, text=True, timeout=_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    found = _VERSION.match(done.stdout.strip()) if done.returncode == 0 else None
    return int(found.group(1)) if found else None


def _interpreter(program: Path) -> str | None:
    """The Python a script's shebang names, or the program itself when it is a Python."""
    if program.name.startswith("python"):
        return str(program)
    try:
        with program.open("rb") as handle:
            first = handle.readline(512)
    except OSError:
        return None
    if not first.startswith(b"#!"):
        return None
    words = first[2:].decode("utf-8", "replace").split()
    if not words:
        return None
    if Path(words[0]).name == "env" and len(words) > 1:  # "#!/usr/bin/env python3"
        return words[1]
    return words[0]
