"""The kinds of rule the log diagnosis reads, so that each engine's log module can declare its own.

Every rule has an `anchor`: a lower-case literal that must occur in the lower-cased line before the
rule's regular expression is tried (the cheap prefilter). Regexes run on the lower-cased line unless a
rule says otherwise.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# Pieces of patterns several tables share.
DEVICE = r"(?:cuda|rocm|hip|vulkan|metal|sycl|cann|musa)\d*"
NUM = r"(?P<value>\d+(?:[.,]\d+)*)"
UNIT = r"\s*(?P<unit>[KMGT]i?B)"


def _rx(pattern: str | None, flags: int = 0) -> re.Pattern[str] | None:
    return re.compile(pattern, flags) if pattern else None


@dataclass(frozen=True)
class StageRule:
    """A line that shows the server is in `stage`."""

    anchor: str
    stage: str
    pattern: str | None = None
    backend: str = ""  # whose wording this is (documentation and tests; all rules apply to all logs)
    regex: re.Pattern[str] | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "regex", _rx(self.pattern))


@dataclass(frozen=True)
class ErrorRule:
    """A line that says why the run failed.

    `cause` is a finer name than the failure class (the advice keys on it). `stage` pins the stage
    when the wording itself says where it happened. `strong=False` marks a generic error ("failed to
    load model") that only counts when no specific cause shows up; its `hint` is the class to assume
    then. `case_sensitive` regexes run on the original line.
    """

    anchor: str
    cause: str
    failure: str
    pattern: str | None = None
    stage: str | None = None
    strong: bool = True
    hint: str | None = None
    backend: str = ""
    case_sensitive: bool = False
    regex: re.Pattern[str] | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "regex", _rx(self.pattern))


@dataclass(frozen=True)
class NoticeRule:
    """A quiet failure (`kind`: kernel_fallback, cpu_fallback, quant_unconfirmed), a recovery, or a mark."""

    anchor: str
    kind: str
    message: str
    pattern: str | None = None
    backend: str = ""
    regex: re.Pattern[str] | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "regex", _rx(self.pattern))


@dataclass(frozen=True)
class FigureRule:
    """A number the engine printed about its own memory. Regex on the original line, case-insensitive.

    Groups: `device` (optional), `value`, `unit` (optional; `unit_default` otherwise). `per_device`
    figures are summed over devices; a device seen again starts a new set (a new load).
    """

    anchor: str
    key: str
    pattern: str
    unit_default: str = "MiB"
    per_device: bool = False
    count: bool = False  # a count (tokens, blocks), not bytes
    backend: str = ""
    regex: re.Pattern[str] | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "regex", re.compile(self.pattern, re.IGNORECASE))
