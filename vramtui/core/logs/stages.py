"""The stages of a model server's start, in order, and the failure classes the log diagnosis names.

Defined here once; every part of vramtui (the log diagnosis, the launcher, the wizard, the panes) imports
them from here.
"""

from __future__ import annotations

STAGES: tuple[str, ...] = ("download", "load_weights", "kv_cache", "ready", "inference")
STAGE_INDEX: dict[str, int] = {stage: index for index, stage in enumerate(STAGES)}


def stage_index(stage: str | None) -> int:
    """Its place in STAGES; -1 for none or a word that is no stage."""
    return STAGE_INDEX.get(stage, -1) if stage is not None else -1


def furthest(a: str | None, b: str | None) -> str | None:
    """The later of two stages (the first on a tie): how far a run got, from the launcher and the log."""
    return a if stage_index(a) >= stage_index(b) else b


FAILURES: tuple[str, ...] = (
    "cuda_oom",
    "host_oom_killed",
    "host_oom",  # an allocation failed under a host memory budget (the CPU stand-in for a smaller card)
    "unsupported_quant",
    "unknown_arch",
    "shape_mismatch",
    "dtype_unsupported",
    "file_missing",
    "network",
    "disk_full",
    "kv_cache_too_small",
    "context_too_long",
    "other",
)

# Causes that say the memory budget leaves the engine no room to start (its threads, its libraries, its
# imports): no engine setting helps, only a larger budget (but for the engine's own named fix: fewer
# slots, where the threads it starts are one per slot).
# budget_no_serve: it came up, but its request handlers had no room (QA 28 M2: the wizard cut the context
# twice at ready, 31 s a run, and ended without saying to raise the budget)
BUDGET_TOO_SMALL: frozenset[str] = frozenset(
    {"budget_start", "budget_import", "http_threads_start", "loader_threads", "budget_no_serve"}
)
# ... of which the engine has a way to start in less that is no ladder setting (its advice names it:
# transformers' serial load, HF_DEACTIVATE_ASYNC_LOAD=1)
BUDGET_ADVISED_FIX: frozenset[str] = frozenset({"loader_threads"})
