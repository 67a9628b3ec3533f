"""What every launched engine inherits: no core file in the user's folder; under an address-space budget,
no debugger started by ggml's crash handler (QA 13 #3: a 54 MB gdb core was left in the working folder)."""

from __future__ import annotations

import sys

from vramtui.core.launch import procs

SHOW = (
    "import os, resource; print(os.environ.get('GGML_NO_BACKTRACE'), os.environ.get('MALLOC_ARENA_MAX'), "
    "os.environ.get('OPENBLAS_NUM_THREADS'), resource.getrlimit(resource.RLIMIT_CORE))"
)


def _child_says(**kwargs: object) -> str:
    proc = procs.spawn([sys.executable, "-c", SHOW], **kwargs)  # type: ignore[arg-type]
    try:
        out, _ = proc.communicate(timeout=60)
    finally:
        procs.forget_group(proc.pid)  # it exited: no group of ours is left for the next test to find
    assert proc.returncode == 0, out
    return out.decode().strip()


def test_a_budgeted_engine_gets_no_core_no_gdb_backtrace_and_one_malloc_arena() -> None:
    # one arena: glibc's per-thread arenas reserve 64 MiB of address space each, which a limit counts
    assert _child_says(address_space_limit=8 << 30) == "1 1 1 (0, 0)"


def test_an_engine_without_a_budget_keeps_its_environment_and_gets_no_core() -> None:
    assert _child_says(env={"PATH": "/usr/bin:/bin"}) == "None None None (0, 0)"
    # a user's own settings are kept as they are
    kept = {"GGML_NO_BACKTRACE": "0", "MALLOC_ARENA_MAX": "4", "OPENBLAS_NUM_THREADS": "8"}
    assert _child_says(env=kept, address_space_limit=8 << 30) == "0 4 8 (0, 0)"
