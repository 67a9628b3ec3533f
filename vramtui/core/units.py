"""Parsing and printing of memory sizes and counts, in the units users type and nvidia-smi prints."""

from __future__ import annotations

import math
import re

from vramtui.core.errors import VramtuiError

KIB = 1024
MIB = 1024**2
GIB = 1024**3
TIB = 1024**4

# Users write "24G" for a 24 GiB card; nvidia-smi and llama.cpp print binary units. Decimal units are
# accepted when spelled as such ("24GB" is taken as GiB because that is what vLLM and users mean).
_SIZE_UNITS = {
    "": 1,
    "b": 1,
    "k": KIB,
    "kb": KIB,
    "kib": KIB,
    "m": MIB,
    "mb": MIB,
    "mib": MIB,
    "g": GIB,
    "gb": GIB,
    "gib": GIB,
    "t": TIB,
    "tb": TIB,
    "tib": TIB,
}

_SIZE_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:e[+-]?\d+)?)\s*([a-z]*)\s*$", re.IGNORECASE)


def parse_size(text: str | int | float, default_unit: str = "") -> int:
    """Parse '24GiB', '24G', '24576MiB', '1.5 GB', or a bare number of bytes into bytes."""
    if isinstance(text, bool):
        raise VramtuiError(f"not a memory size: {text!r}")
    if isinstance(text, int | float):
        value, unit = float(text), default_unit
    else:
        match = _SIZE_RE.match(str(text))
        if not match:
            raise VramtuiError(f"not a memory size: {text!r} (try 24GiB, 24G or 24576MiB)")
        value, unit = float(match.group(1)), match.group(2) or default_unit
    factor = _SIZE_UNITS.get(unit.lower())
    if factor is None:
        raise VramtuiError(
            f"unknown memory unit {unit!r} in {text!r} (use B, KiB, MiB, GiB or TiB; MB and GB read as MiB and GiB)"
        )
    result = value * factor
    if not math.isfinite(result) or result < 0:
        raise VramtuiError(f"not a memory size: {text!r}")
    return round(result)


def guessed_unit(value: float) -> str:
    """The unit a bare number most likely meant, for a hint: '12' a card in GiB, '600' a budget in MiB;
    between them both are plausible (QA 17 F18: '300' as a host budget was hinted as 300 GiB)."""
    number = f"{value:g}"
    if value < 128:
        return f"{number}GiB"
    return f"{number}MiB or {number}GiB" if value < 512 else f"{number}MiB"


def parse_size_with_unit(text: str | int | float) -> int:
    """A size a user typed, which must carry its unit: '12' is refused ("12GiB?"), never read as 12 bytes.

    Sizes printed by vramtui itself carry theirs ('25769803776B'); a bare number only comes from a person,
    and a person who types 12 for a card or 600 for a budget does not mean bytes."""
    if isinstance(text, bool):
        raise VramtuiError(f"not a memory size: {text!r}")
    if isinstance(text, int | float):
        value: float | None = float(text)
    else:
        match = _SIZE_RE.match(str(text))
        value = float(match.group(1)) if match and not match.group(2) else None
    if value == 0:
        raise VramtuiError(f"{text!r} is no size: give one with its unit, e.g. 12GiB")
    if value is not None:
        raise VramtuiError(f"{text!r} has no unit: {guessed_unit(value)}? (B, KiB, MiB, GiB or TiB)")
    return parse_size(text)


_COUNT_SUFFIX = {"": 1, "k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12}
_COUNT_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:e[+-]?\d+)?)\s*([kmbgt]?)\s*$", re.IGNORECASE)


def parse_count(text: str | int | float) -> int:
    """Parse a parameter count such as '30B', '7.6e9', '350M' or '1500000'."""
    if isinstance(text, int | float) and not isinstance(text, bool):
        if text < 0 or not math.isfinite(float(text)):
            raise VramtuiError(f"not a count: {text!r}")
        return int(text)
    match = _COUNT_RE.match(str(text))
    if not match:
        raise VramtuiError(f"not a count: {text!r} (try 30B, 7.6e9 or 350M)")
    value = float(match.group(1)) * _COUNT_SUFFIX[match.group(2).lower()]
    if not math.isfinite(value):  # '1e400' reads as infinity
        raise VramtuiError(f"not a count: {text!r} (too large)")
    return round(value)


def format_bytes(n: float, precision: int = 2) -> str:
    """Binary units as nvidia-smi and llama.cpp print them: '19.20 GiB', '512.00 MiB'."""
    sign = "-" if n < 0 else ""
    n = abs(float(n))
    for unit, factor in (("TiB", TIB), ("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if n >= factor:
            return f"{sign}{n / factor:.{precision}f} {unit}"
    return f"{sign}{int(n)} B"


def exact_size(n: int) -> str:
    """Bytes as the largest binary unit that states them exactly ("4MiB" for 4194304, "1000B" for 1000):
    a size read back from a flag that takes bytes, said as the profile and the wizard write sizes."""
    for unit, size in (("GiB", GIB), ("MiB", MIB), ("KiB", 1024)):
        if n and n % size == 0:
            return f"{n // size}{unit}"
    return f"{n}B"


def mib(n: float) -> float:
    """Bytes to MiB, the unit nvidia-smi prints."""
    return n / MIB


def mib_figure(value_mib: float) -> str:
    """A MiB figure in words: whole MiB, one decimal under 10 (QA 26 D7: 0.42 MiB of weights read "0 MiB")."""
    return f"{value_mib:.1f}" if 0 < abs(value_mib) < 10 else f"{value_mib:.0f}"
