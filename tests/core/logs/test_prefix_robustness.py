"""The same log behind the prefix its collector adds reads the same: docker compose's "name  | ", a
Kubernetes node's container log (time stamp, stream, tag), journald's. Every training log read right keeps
its stage, class, first-error line and quiet warnings under each (a rule anchored at the line's start is
tried behind the prefix too)."""

from __future__ import annotations

from collections.abc import Callable

import corpus
import pytest

from vramtui.core.logs.diagnose import diagnose_text

PREFIXES: dict[str, Callable[[int], str]] = {
    "compose": lambda _i: "api-1  | ",  # neutral names: a service named after an engine names the engine
    "kubernetes": lambda _i: "2025-06-01T10:00:00.123456789Z stderr F ",
    "journald": lambda i: f"Dec 03 10:00:{i % 60:02d} gpu-box server[1234]: ",
}
# Where a prefix still changes the reading (each checked by hand):
KNOWN = {
    # a Colab (IPython) traceback's numbered source lines: no collector prefixes a notebook's output
    ("r2-30-transformers-colab-bnb-missing", "compose"),
    ("r2-30-transformers-colab-bnb-missing", "kubernetes"),
    ("r2-30-transformers-colab-bnb-missing", "journald"),
    # three lines, no stage line: journald's time stamps outrank vLLM's own for the stage guess
    ("r10-vllm-v1-8gb-gpu-oom-fatal-signal", "journald"),
}


def _reading(text: str) -> tuple[object, ...]:
    diagnosis = diagnose_text(text, kernel_log=lambda: None)
    return (*corpus.predicted(diagnosis), diagnosis.first_error_line, bool(diagnosis.warnings))


@pytest.fixture(scope="module")
def read_right() -> list[tuple[dict, tuple[object, ...]]]:
    found = []
    for case in corpus.cases():
        if case["split"] != "train":
            continue
        reading = _reading(case["log"])
        if reading[:2] == (case["stage"], case["failure"]):
            found.append((case, reading))
    return found


@pytest.mark.parametrize("name", list(PREFIXES))
def test_a_collectors_prefix_changes_no_reading(name: str, read_right: list) -> None:
    prefix = PREFIXES[name]
    changed = []
    for case, reading in read_right:
        lines = case["log"].split("\n")
        prefixed = _reading("\n".join(prefix(i) + line for i, line in enumerate(lines)))
        if prefixed != reading and (case["id"], name) not in KNOWN:
            changed.append((case["id"], reading, prefixed))
    assert len(read_right) > 500 and not changed, changed
