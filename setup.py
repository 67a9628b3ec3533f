"""The two compiled speed-ups of the log diagnosis; everything else is in pyproject.toml.

* `vramtui.core._linescan` (C): walks a block of log lines and skips the ones whose analysis changes
  nothing, without making a Python object for them.
* `vramtui.core._diagnose_native`: `vramtui/core/diagnose.py` itself, compiled by mypyc from a copy.
  diagnose.py stays the one source: at import it uses this build only if it was made from its present
  text (see diagnose._compiled_twin), so an edited checkout never runs stale code.

Both are optional. Without a C compiler (or with VRAMTUI_PURE_PYTHON=1 set at build time) the build
goes on without them and vramtui reads logs in pure Python: the same verdicts, slower on long logs.
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

from setuptools import Extension, setup

ROOT = Path(__file__).resolve().parent
DIAGNOSE = Path("vramtui/core/diagnose.py")
NATIVE = Path("vramtui/core/_diagnose_native.py")  # the copy mypyc compiles; removed once it has


def say(message: str) -> None:
    print(f"vramtui build: {message}", file=sys.stderr)


def line_scanner() -> list[Extension]:
    flags = [] if sys.platform == "win32" else ["-O3", "-std=c11"]
    return [
        Extension(
            "vramtui.core._linescan", ["vramtui/core/_linescan.c"], extra_compile_args=flags, optional=True
        )
    ]


def compiled_diagnosis() -> list[Extension]:
    try:
        from mypyc.build import mypycify
    except ImportError:
        say("mypyc not found: the log diagnosis stays pure Python")
        return []
    source = (ROOT / DIAGNOSE).read_bytes()
    digest = hashlib.sha256(source).hexdigest()
    native = ROOT / NATIVE
    try:
        native.write_bytes(source + f'\n_BUILT_FROM = "{digest}"\n'.encode())
    except OSError as error:  # a read-only checkout
        say(f"cannot write {NATIVE} ({error.strerror}): the log diagnosis stays pure Python")
        return []
    try:
        extensions = mypycify([str(NATIVE)], opt_level="3")
    except (Exception, SystemExit) as error:  # mypyc exits through SystemExit on a type error
        say(f"mypyc could not compile {DIAGNOSE} ({error!r}): the log diagnosis stays pure Python")
        return []
    finally:
        native.unlink(missing_ok=True)  # mypyc has written its C by now; the copy must not linger
    for extension in extensions:
        extension.optional = True  # no C compiler: pure Python, not a failed install
    return extensions


os.chdir(ROOT)  # mypyc names modules by their path
extensions = line_scanner()
if not os.environ.get("VRAMTUI_PURE_PYTHON"):
    extensions += compiled_diagnosis()
setup(ext_modules=extensions)
