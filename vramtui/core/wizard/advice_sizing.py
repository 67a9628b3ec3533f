"""The diagnosis' advice beside the wizard's arithmetic.

The advice reads the log alone; the wizard sizes each change with the estimate corrected by the run. An
advice line that names one of the engine's own count flags with a value ("--ubatch-size 256") is sized
the same way, so an alternative the arithmetic says is not enough alone says so (QA: `check` advised
`--ubatch-size 256` where the wizard had chosen the context, and the advised run failed for real).
"""

from __future__ import annotations

import re

from vramtui.core.errors import VramtuiError
from vramtui.core.launch.profile import Profile
from vramtui.core.wizard.budget import MemoryModel

# The settings whose advice names a whole number the arithmetic can size, and those it names by a type.
_COUNTS = ("context", "parallel", "batch", "ubatch", "gpu_layers", "n_cpu_moe")
_TYPES = ("kv_dtype",)  # QA 12: "--cache-type-k q8_0" had no tag beside a context line that had one
_FLAG_VALUE = re.compile(r"(--[\w-]+)[ =](\d+)\b")
_FLAG_TYPE = re.compile(r"(--[\w-]+)[ =]([a-z][a-z0-9_]*)\b")


def named_change(line: str, profile: Profile) -> tuple[str, int | str] | None:
    """The (setting, value) an advice line names with this engine's own flag, or None."""
    flags = {profile.backend.flags.get(param): param for param in _COUNTS}
    for flag, value in _FLAG_VALUE.findall(line):
        if flags.get(flag):
            return flags[flag], int(value)
    types = {profile.backend.flags.get(param): param for param in _TYPES}
    for flag, value in _FLAG_TYPE.findall(line):
        if types.get(flag):
            return types[flag], value
    return None


def sized_advice(model: MemoryModel, profile: Profile, lines: list[str]) -> list[str]:
    """Each advice line, with what the arithmetic says of the change it names (fits, or not alone)."""
    sized: list[str] = []
    for line in lines:
        change = named_change(line, profile)
        fits = None
        if change is not None:
            try:
                bill = model.predict(profile.with_param(*change))
            except VramtuiError:
                bill = None
            fits = model.fits(bill) if bill is not None else None
        if fits is None:
            sized.append(line)
        else:
            sized.append(f"{line} [by the estimate: {'fits' if fits else 'not enough alone'}]")
    return sized
