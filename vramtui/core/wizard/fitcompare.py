"""llama.cpp's fit projection beside vramtui's own estimate, for the run a log shows.

Before it loads, llama.cpp's `--fit` (on by default) prints what it projects the run will use:
"projected to use 15708 MiB of device memory vs. 32192 MiB of free device memory" (or "... of host
memory" on a CPU run). That projection is for the settings fit started from, before any change of its
own. `compare_fit` rebuilds that run from the log's figures (its shape, per-device buffers, n_ctx; see
ongpu.info_from_figures) and asks the estimator for the same placement, so the two figures sit side
by side: a user sees whether the two sizings agree before trusting either.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from vramtui.core.backends import get_backend
from vramtui.core.errors import VramtuiError
from vramtui.core.estimate.estimator import DEFAULT_DEVICE_BYTES, Settings, estimate
from vramtui.core.estimate.quant import kv_bytes_per_element
from vramtui.core.logs.ruletypes import DRAFT_MARK
from vramtui.core.memory.parts import HOST, MemoryBill, Part, Place
from vramtui.core.units import MIB
from vramtui.core.wizard.ongpu import flash_attn_of, info_from_figures

_PLACES = ("device", "host")
_SHAPE_WORDS = (
    ("model_layers", "layer count"),
    ("model_hidden", "hidden size"),
    ("model_heads", "attention heads"),
    ("model_kv_heads", "KV heads"),
)


@dataclass
class FitComparison:
    """fit's projected bytes and vramtui's estimate, each on the device(s) and on the host."""

    projected: dict[str, int]  # "device" / "host": what fit printed (only the places it printed)
    estimated: dict[str, int]  # the same places, vramtui's estimate; empty when the log lacks the shape
    context: int | None = None  # the context both are for (fit's starting one when fit lowered it)
    gpu_layers: int | None = None  # the layers on the device in the estimate (None: every layer)
    reason: str = ""  # why there is no estimate
    parts: dict[str, str] = field(default_factory=dict)  # each estimated place's parts, in words
    bill: MemoryBill | None = None  # the estimate's bill, every place
    # fit's own breakdown table, by row (CUDA0, Host, AMX ...): model / context / compute bytes
    breakdown: dict[str, dict[str, int]] = field(default_factory=dict)
    with_draft: bool = False  # the run loaded a speculative draft: fit projected both models
    runtime: int = 0  # the estimate's device bytes fit does not project (CUDA context, workspaces)

    def delta(self, place: str) -> float | None:
        """vramtui's estimate against fit's projection, as a share of the projection (+0.05: 5% above)."""
        projected, estimated = self.projected.get(place), self.estimated.get(place)
        if not projected or estimated is None:
            return None
        return (estimated - projected) / projected

    def lines(self) -> list[str]:
        out = []
        for place in _PLACES:
            if place not in self.projected:
                continue
            line = f"fit projected {self.projected[place] / MIB:.0f} MiB of {place} memory"
            if place in self.estimated:
                delta = self.delta(place)
                share = f" ({delta:+.0%})" if delta is not None else ""
                line += f"; vramtui estimates {self.estimated[place] / MIB:.0f} MiB{share}"
                if self.parts.get(place):
                    line += f": {self.parts[place]}"
            out.append(line)
        if self.breakdown:
            rows = "; ".join(
                f"{row} " + " + ".join(f"{part} {value / MIB:.0f}" for part, value in parts.items())
                for row, parts in self.breakdown.items()
            )
            out.append(f"  fit's breakdown (the last it printed, MiB): {rows}")
        if self.estimated:
            layers = "every layer" if self.gpu_layers is None else f"{self.gpu_layers} layers"
            where = "on the CPU" if "device" not in self.projected else f"{layers} on the GPU"
            out.append(f"  (both for context {self.context or 'default'}, {where})")
        elif self.reason:
            out.append(f"  (no vramtui estimate: {self.reason})")
        if self.runtime:
            out.append(
                f"  (the model's buffers only, as fit counts them: the {self.runtime / MIB:.0f} MiB vramtui adds for "
                "the runtime on the card (its context and workspaces) come on top)"
            )
        if self.with_draft:
            out.append(
                "  (fit's projection holds the draft model too; vramtui's estimate is the model's alone)"
            )
        return out

    def summary(self) -> str:
        """One line for a pane: `fit projected 2313 MiB host; vramtui estimates 2361 MiB (+2%)`."""
        said = []
        for place in _PLACES:
            if place not in self.projected:
                continue
            words = f"fit projected {self.projected[place] / MIB:.0f} MiB {place}"
            delta = self.delta(place)
            if place in self.estimated:
                share = f" ({delta:+.0%})" if delta is not None else ""
                words += f"; vramtui estimates {self.estimated[place] / MIB:.0f} MiB{share}"
            said.append(words)
        if not self.estimated and self.reason:
            said.append("no vramtui estimate: the log lacks the model's shape")
        return " · ".join(said)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {}
        for place in _PLACES:
            if place in self.projected:
                data[f"projected_{place}_mib"] = round(self.projected[place] / MIB, 1)
            if place in self.estimated:
                data[f"estimated_{place}_mib"] = round(self.estimated[place] / MIB, 1)
                delta = self.delta(place)
                data[f"{place}_delta"] = round(delta, 4) if delta is not None else None
        if self.breakdown:
            data["breakdown_mib"] = {
                row: {part: round(value / MIB, 1) for part, value in parts.items()}
                for row, parts in self.breakdown.items()
            }
        data["context"] = self.context
        data["gpu_layers"] = self.gpu_layers
        if self.reason:
            data["reason"] = self.reason
        return data


def _int(figures: Mapping[str, float], key: str) -> int | None:
    value = figures.get(key)
    return int(value) if value else None


def _fit_changed(figures: Mapping[str, float]) -> bool:
    """fit had to change the run (it said by how much, or lowered the context): it projected its start."""
    return bool(figures.get("fit_context_from") or figures.get("fit_reduce_by"))


def _run_context(figures: Mapping[str, float]) -> int | None:
    """The context fit projected: its start when it lowered it, else the log's n_ctx, else (a run that
    failed before printing it) the command line's."""
    return _int(figures, "fit_context_from") or _int(figures, "context") or _int(figures, "command_context")


def _settings(figures: Mapping[str, float], backend: str, on_gpu: bool) -> Settings:
    """The settings fit projected: its context (_run_context); every layer on the device when fit changed
    the run (its start), else the log's split (or none, on a CPU)."""
    context = _run_context(figures)
    # the printed n_ubatch is already within n_batch; a run that failed before printing it, the command's
    ubatch = _int(figures, "ubatch_tokens") or _int(figures, "command_ubatch")
    offloaded, total = _int(figures, "layers_offloaded"), _int(figures, "layers_total")
    gpu_layers: int | None = None
    if not on_gpu:
        gpu_layers = 0
    elif offloaded is not None and total and offloaded < total and not _fit_changed(figures):
        gpu_layers = offloaded
    free = figures.get("device_free.CUDA0") or figures.get("device_free")
    return Settings(
        backend=backend,
        context=context,
        parallel=_streams(figures, context) if context else None,
        ubatch=ubatch,
        batch=ubatch,
        flash_attn=flash_attn_of(figures),
        gpu_layers=gpu_layers,
        device_bytes=int(free) if free else DEFAULT_DEVICE_BYTES,
        on_gpu=on_gpu,
    )


def _streams(figures: Mapping[str, float], context: int) -> int:
    """The run's KV streams: n_ctx is the whole cache over every slot; a cache that is not unified prints
    each stream's share (n_ctx_seq below n_ctx, or its seqs count), and its masks and graph are per stream
    (QA: `check`'s fit line sized a 2-slot run as one stream, 24 MiB of compute against the bill's 14)."""
    streams = _int(figures, "kv_cache_streams")
    per_sequence = _int(figures, "context_per_sequence")
    if not streams and per_sequence and per_sequence < context:
        streams = context // per_sequence
    return max(1, streams or 1)


def _kv_dtype_run(figures: Mapping[str, float], info: Any, backend: str) -> str | None:
    """The run's KV cache type, of those the engine takes, from its printed cache bytes over its cells and
    the model's K+V width (None: not printed, or no type fits): fit projected that run, so the estimate
    must size it too."""
    kv, cells = figures.get("kv_cache_size") or figures.get("kv_buffer"), _int(figures, "kv_cache_cells")
    if cells:  # the printed cells are each stream's: a cache that is not unified has one per slot
        cells *= _int(figures, "kv_cache_streams") or 1
    if not kv:  # a run that failed before its cache: fit's own breakdown of it (the context rows)
        kv = sum(value for key, value in figures.items() if key.startswith("fit_breakdown_context."))
        cells = _run_context(figures)
    width = sum(info.kv_heads_at(il) * (info.head_dim_k + info.head_dim_v) for il in range(info.n_layers))
    if not kv or not cells or not width:
        return None
    per_element = kv / (cells * width)
    sizes = [(name, kv_bytes_per_element(name)) for name in get_backend(backend).kv_dtypes]
    name, size = min(sizes, key=lambda item: abs(item[1] - per_element))  # the first of equal sizes: f16
    return name if abs(size - per_element) <= 0.02 * size else None


def _breakdown(figures: Mapping[str, float]) -> dict[str, dict[str, int]]:
    rows: dict[str, dict[str, int]] = {}
    for part in _BREAKDOWN_PARTS:
        prefix = f"fit_breakdown_{part}."
        for key, value in figures.items():
            if key.startswith(prefix):
                rows.setdefault(key[len(prefix) :], {})[part] = int(value)
    return rows


_BREAKDOWN_PARTS = ("model", "context", "compute")
# What fit's projection sums (llama_memory_breakdown: model, context, compute buffers): not the CUDA
# context or the engine's own workspaces, which the free memory it compares against already leaves out.
_FIT_PARTS: tuple[Part, ...] = ("weights", "kv_cache", "recurrent_state", "compute", "output")


def _buffers(bill: MemoryBill, place: Place | None = None) -> int:
    return sum(bill.get(part, place) for part in _FIT_PARTS)


def _buffers_described(bill: MemoryBill) -> str:
    kept = MemoryBill()
    for place in bill.devices():
        for part in _FIT_PARTS:
            kept.add(place, part, bill.get(part, place))
    return kept.describe()


def compare_fit(figures: Mapping[str, float], backend: str | None = None) -> FitComparison | None:
    """fit's printed projection beside vramtui's estimate; None when the log prints no projection."""
    projected = {
        place: int(figures[f"fit_projected_{place}"])
        for place in _PLACES
        if figures.get(f"fit_projected_{place}")
    }
    if not projected:
        return None
    name = backend or "llama.cpp"
    try:
        offloads = get_backend(name).offloads_layers
    except VramtuiError:  # a log-only engine (TGI, SGLang): fit's lines are llama.cpp's
        offloads = False
    if not offloads:  # a log read as another engine's: llama.cpp's sizing
        name = "llama.cpp"
    on_gpu = "device" in projected
    comparison = FitComparison(
        projected=projected, estimated={}, breakdown=_breakdown(figures), with_draft=DRAFT_MARK in figures
    )
    missing = [words for key, words in _SHAPE_WORDS if not figures.get(key)]
    if missing:  # said here in the log's terms: info_from_figures would name the wizard's flags
        comparison.reason = f"the log does not print the model's {', '.join(missing)}"
        return comparison
    try:
        info = info_from_figures(figures)
        settings = _settings(figures, name, on_gpu)
        settings = replace(settings, kv_dtype=_kv_dtype_run(figures, info, name))
        bill = comparison.bill = estimate(info, settings).bill
    except VramtuiError as error:
        comparison.reason = str(error)
        return comparison
    except (ArithmeticError, ValueError) as error:  # a log's figures no real model has: say so, no traceback
        comparison.reason = f"the log's model figures do not make a model ({error})"
        return comparison
    comparison.context, comparison.gpu_layers = settings.context, settings.gpu_layers
    if on_gpu:
        comparison.estimated["device"] = _buffers(bill)
        comparison.parts["device"] = _buffers_described(bill)
        comparison.runtime = bill.total() - _buffers(bill)
    if "host" in projected:
        # a CPU run's every part is the host's (an estimate with no layer on a device keeps none there)
        comparison.estimated["host"] = _buffers(bill, HOST) + (0 if on_gpu else _buffers(bill))
        comparison.parts["host"] = bill.describe(HOST) if on_gpu or not bill.total() else bill.describe()
    return comparison


__all__ = ["FitComparison", "compare_fit"]
