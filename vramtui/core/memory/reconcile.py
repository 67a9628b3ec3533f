"""The bill reconciled after a run: the estimate, what the engine printed and what was measured, term by
term and device by device, and the term that was off.

The engine's printout is the truth for each term it names (llama.cpp's model, KV, compute and output
buffers per device; vLLM's weights, activation peak, non-torch memory and KV cache). The measurement is
the truth for each place's total (NVML's per-process bytes per card, the tree's resident memory on the
host): what it holds above the printed terms is what the engine never prints (its CUDA context, the
allocator, a Python interpreter), set against the estimate's runtime and margin.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from vramtui.core.memory.parts import HOST, JSON_KEYS, LABELS, PARTS, MemoryBill, Part, Place, part_label
from vramtui.core.units import MIB, format_bytes

# A term is off when the estimate misses what was printed by more than both of these.
OFF_BYTES = 16 * MIB
OFF_SHARE = 0.10
UNPRINTED = "unprinted"  # the pseudo-term: what a place holds above every printed term
_SHORT = {"kv_cache": "KV cache", "recurrent_state": "recurrent state", "cuda_graphs": "CUDA graphs"}


@dataclass(frozen=True)
class Term:
    """One term at one place: the estimate's bytes and the engine's (None: not printed)."""

    place: Place
    part: Part | str  # a memory part, or UNPRINTED
    estimate: int | None
    actual: int | None  # printed, or for UNPRINTED: measured minus the printed terms
    covers: tuple[Part, ...] = ()  # for UNPRINTED: the estimate's terms the engine did not print

    @property
    def label(self) -> str:
        if self.part in LABELS:
            name = part_label(self.part, self.place)  # type: ignore[arg-type]
        else:  # QA 5: "runtime" named a rest that was mostly an unfilled dynamic KV cache
            parts = ", ".join(_SHORT.get(part, part) for part in self.covers) or "runtime"
            name = f"not printed: {parts}"
        return f"{name} on {_place_word(self.place)}"

    @property
    def miss(self) -> int:
        """Estimate minus actual (negative: the estimate was short)."""
        return (self.estimate or 0) - (self.actual or 0)

    def is_off(self) -> bool:
        if self.actual is None or self.estimate is None:
            return False
        if self.part == UNPRINTED and "kv_cache" in self.covers and self.miss > 0:
            # an unprinted KV cache is one that grows with the tokens served: the estimate sizes it at the
            # full context, a ceiling the smallest request does not reach (QA 11: "off ... over by 530 MiB"
            # on every healthy transformers run); a rest above it is still off
            return False
        return abs(self.miss) > max(OFF_BYTES, OFF_SHARE * max(self.actual, self.estimate))

    def to_dict(self) -> dict[str, Any]:
        key = JSON_KEYS.get(self.part, f"{UNPRINTED}_bytes")  # type: ignore[call-overload]
        return {
            "place": str(self.place),
            "term": key,
            "estimate_bytes": self.estimate,
            "actual_bytes": self.actual,
        }


def _place_word(place: Place) -> str:
    return "the host" if place == HOST else f"GPU {place}"


@dataclass
class Reconciliation:
    """Per place: the terms, the three totals; and the term that was furthest off."""

    terms: list[Term]
    estimate_total: dict[Place, int]
    printed_total: dict[Place, int]
    measured: dict[Place, int]  # the peak each place held
    estimate_note: str = ""  # "calibrated from 3 runs on ..." or "uncalibrated"
    notes: list[str] = field(default_factory=list)

    @property
    def off(self) -> Term | None:
        """The term the estimate missed most by (bytes), when one missed past the tolerance."""
        missed = [term for term in self.terms if term.is_off()]
        return max(missed, key=lambda term: abs(term.miss)) if missed else None

    def places(self) -> list[Place]:
        seen = {*self.estimate_total, *self.printed_total, *self.measured}
        return [*sorted(p for p in seen if isinstance(p, int)), *([HOST] if HOST in seen else [])]

    def verdict(self) -> str:
        off = self.off
        if off is None:
            compared = [term for term in self.terms if term.actual is not None and term.estimate is not None]
            if not compared:
                return "nothing to compare: the engine printed no term the estimate names"
            return f"the estimate held within {OFF_SHARE:.0%} on every term the engine printed"
        how = "short" if off.miss < 0 else "over"
        return (
            f"off: {off.label}: estimated {format_bytes(off.estimate or 0, 1)}, "
            f"actual {format_bytes(off.actual or 0, 1)} ({how} by {format_bytes(abs(off.miss), 1)})"
        )

    def lines(self, label_width: int = 40) -> list[str]:
        """A table for people: per place the estimate, the printout and the measurement, then the verdict.
        `label_width`: the terms' column (a narrow pane's rows stay one line each, the label cut)."""
        out = [f"{'':{label_width + 2}}{'estimate':>12}{'printed':>12}{'measured':>12}"]
        for place in self.places():
            out.append(_place_word(place))
            for term in (t for t in self.terms if t.place == place):
                printed = term.actual if term.part != UNPRINTED else None
                measured = term.actual if term.part == UNPRINTED else None
                label = _cut(term.label.rsplit(" on ", 1)[0], label_width)
                out.append(f"  {label:{label_width}}{_size(term.estimate)}{_size(printed)}{_size(measured)}")
            out.append(
                f"  {'total':{label_width}}{_size(self.estimate_total.get(place))}"
                f"{_size(self.printed_total.get(place))}{_size(self.measured.get(place))}"
            )
        out.append(self.verdict())
        if self.estimate_note:
            out.append(f"estimate {self.estimate_note}")
        out.extend(self.notes)
        return out

    def to_dict(self) -> dict[str, Any]:
        off = self.off
        return {
            "places": {
                str(place): {
                    "estimate_bytes": self.estimate_total.get(place),
                    "printed_bytes": self.printed_total.get(place),
                    "measured_bytes": self.measured.get(place),
                    "terms": [term.to_dict() for term in self.terms if term.place == place],
                }
                for place in self.places()
            },
            "off": off.to_dict() if off is not None else None,
            "verdict": self.verdict(),
            "estimate_note": self.estimate_note,
            "notes": self.notes,
        }


def _cut(label: str, width: int) -> str:
    return label if len(label) <= width else label[: max(1, width - 1)] + "…"


def _size(value: int | None) -> str:
    return f"{'—' if value is None else format_bytes(value, 1):>12}"


# The buffers an engine allocates as it starts, in order: a run that failed first never held the later ones.
_BUFFERS: frozenset[str] = frozenset({"weights", "kv_cache", "recurrent_state", "compute", "output"})


def reconcile(
    estimate: MemoryBill | None,
    printed: MemoryBill | None,
    measured: dict[Place, int],
    estimate_note: str = "",
    failed: bool = False,
) -> Reconciliation:
    """Set the three side by side. A term the engine printed is compared as printed; a place's bytes
    above its printed terms are compared with the estimate's terms the engine never prints. A run that
    `failed` while starting never allocated the buffers it did not print: they are shown, not compared,
    and not counted in the rest."""
    estimate = estimate or MemoryBill()
    printed = printed or MemoryBill()
    places = {*estimate.places, *printed.places, *measured}
    terms: list[Term] = []
    notes: list[str] = []
    for place in places:
        said = printed.places.get(place, {})
        known = place in estimate.places
        for part in PARTS:
            guess, actual = estimate.get(part, place), said.get(part)
            never = failed and said and part in _BUFFERS and not actual
            if actual or (guess and (not said or never)):  # a term the engine did not print joins the rest
                terms.append(Term(place, part, guess if known else None, actual))
        if said:
            skipped = _BUFFERS if failed else frozenset()
            covers = tuple(
                part
                for part in PARTS
                if part not in said and part not in skipped and estimate.get(part, place) and part != "margin"
            )
            if place in measured and "runtime" not in said and "runtime" not in covers:
                # what a place holds above the printed terms is the process itself too (the interpreter, the
                # libraries), billed or not (QA 26 D8: "not printed: output ... short by 33 MiB" blamed the
                # 2 MiB logits buffer for llama-cpp-python's Python)
                covers = (*covers, "runtime")
            rest = sum(
                estimate.get(part, place) for part in PARTS if part not in said and part not in skipped
            )
            held = max(0, measured[place] - sum(said.values())) if place in measured else None
            if failed and place in measured and measured[place] < sum(said.values()):
                # it printed what it was about to allocate (vLLM's KV cache) and never held it: what the
                # place held above its printed terms says nothing (QA: "the rest: actual 0 B, over by 560 MiB")
                held = None
            if rest or held:
                terms.append(Term(place, UNPRINTED, rest if known else None, held, covers))
                if not failed and "kv_cache" in covers:
                    notes.append(
                        "the engine printed no KV cache: where it grows with the tokens served (a dynamic "
                        "cache), the smallest request fills little of the estimate's full-context cache"
                    )
    if failed and any(term.actual is None and term.part in _BUFFERS for term in terms):
        notes.append("it failed before allocating every buffer: the ones it did not print are not compared")
    return Reconciliation(
        terms=terms,
        estimate_total={place: estimate.total(place) for place in estimate.places},
        printed_total={place: sum(parts.values()) for place, parts in printed.places.items()},
        measured=dict(measured),
        estimate_note=estimate_note,
        notes=notes,
    )


def measured_peaks(samples: Iterable[Any], pids: Iterable[int] | None = None) -> dict[Place, int]:
    """The most each place held over a run's samples: every card's bytes NVML charged to the tree (by its
    CUDA number, as engines print devices), and the tree's resident memory on the host."""
    wanted = set(pids) if pids is not None else None
    peaks: dict[Place, int] = {}
    for sample in samples:
        host = getattr(sample, "host", None)
        if host is not None and host.tree_rss:
            peaks[HOST] = max(peaks.get(HOST, 0), host.tree_rss)
        tree = wanted if wanted is not None else set(host.tree_pids if host is not None else ())
        for gpu in getattr(sample, "gpus", ()) or ():
            held = sum(used for pid, used in gpu.process_bytes.items() if pid in tree)
            if held:
                place = gpu.cuda_index if gpu.cuda_index is not None else gpu.index
                peaks[place] = max(peaks.get(place, 0), held)
    return peaks
