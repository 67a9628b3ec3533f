"""One proposed change of the wizard, and how its values read: shared by the proposer, the outright-KV
rule, the verifier and the views (kept apart from propose.py, which imports the rules that make them)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any


def value_word(value: object) -> str:
    """A setting's value as people read it: a switch is on/off, an unset one the engine's default."""
    if isinstance(value, bool):
        return "on" if value else "off"
    return "default" if value is None else str(value)


@dataclass
class Proposal:
    param: str
    from_: object
    to: object
    why: str
    rung: str = ""
    knob: str | None = None
    predicted_mib: float | None = None
    # the same prediction per buffer (weights, KV cache, compute), to set beside the ones the engine prints
    predicted_parts: dict[str, float] = dataclasses.field(default_factory=dict)
    advice_only: bool = False
    # Set when this step only prepares the next (flash attention before a quantized V cache).
    then: tuple[str, object] | None = None

    # Set when the user typed the value: the proposal's own figures were for another (QA 6).
    edited_from: object | None = None

    def edited(self, value: object) -> Proposal:
        return dataclasses.replace(
            self,
            to=value,
            why=f"edited by the user to {value_word(value)} (proposed: {value_word(self.to)})",
            predicted_mib=None,
            predicted_parts={},
            edited_from=self.to,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "param": self.param,
            "from": self.from_,
            "to": self.to,
            "why": self.why,
            "rung": self.rung,
            "knob": self.knob,
            "predicted_mib": None if self.predicted_mib is None else round(self.predicted_mib, 1),
            "advice_only": self.advice_only,
        }

    def describe(self) -> str:
        knob = f" ({self.knob})" if self.knob else ""
        return f"{self.param}{knob}: {self.change()} — {self.why}"

    def change(self) -> str:
        return f"{value_word(self.from_)} → {value_word(self.to)}"


def same_value(a: object, b: object) -> bool:
    """The same setting, however written: a size with its unit is its bytes ("256MiB" is 268435456, the bare
    bytes an engine's command line holds: QA 37 F1, F3, a restart "not made" and a change to the value the
    run had)."""
    if str(a).strip().lower() == str(b).strip().lower():
        return True
    sizes = _bytes_of(a), _bytes_of(b)
    return None not in sizes and sizes[0] == sizes[1] and not all(str(v).strip().isdigit() for v in (a, b))


def _bytes_of(value: object) -> int | None:
    """A size's bytes (a bare number is bytes), or None for what is no size (a type, a switch)."""
    from vramtui.core.errors import VramtuiError
    from vramtui.core.units import parse_size

    if isinstance(value, bool) or value is None:
        return None
    try:
        return parse_size(str(value).strip())
    except (VramtuiError, ValueError):
        return None
