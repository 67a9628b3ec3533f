"""The fastest setup that stays on the GPU: one change that frees enough device memory for every layer.

A run whose layers (or experts) ended on the host CPU works but is slow (the diagnosis warns "runs but
slow"). Instead of offloaded layers, the usual cheaper price is a quantized KV cache, a shorter context
or fewer slots. `plan_on_gpu` asks the estimator, with every layer on the device, which single change
makes it fit, least costly first; when none does (the weights alone are too big) it says so and, for a
MoE model, gives the estimator's smallest `--n-cpu-moe` instead.

A saved log is enough: `run_from_figures` rebuilds the model and the run from what llama.cpp printed
(its shape, the per-device model buffers, n_ctx and the card's free memory), so the proposal for a log
from a user's GPU is checked against the device size that log shows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from vramtui.core.backends import get_backend
from vramtui.core.errors import VramtuiError
from vramtui.core.estimate.estimator import Estimate, Settings, _estimate_core, fit_n_cpu_moe
from vramtui.core.estimate.modelinfo import ModelInfo
from vramtui.core.logs.ruletypes import CACHE_PART_MARK
from vramtui.core.logs.verdict import NOTHING_ON_GPU
from vramtui.core.units import MIB
from vramtui.core.wizard.propose import _nice_below

GOAL = "on-gpu"
# The diagnosis' words for a model that runs partly on the host CPU (core/logs/verdict's placement warnings)
SLOW = "runs but slow"


def host_placement(diagnosis: Any) -> list[str]:
    """What the log says runs on the host CPU that the on-GPU goal could move: the diagnosis' "runs but
    slow" warnings, or no layer offloaded at all (offloaded 0/N: the CPU fallback's own warning; QA: the
    goal answered "no layer or expert on the host" for a log of 0/29)."""
    said = [str(w) for w in (getattr(diagnosis, "warnings", None) or [])]
    # QA 38 F6: a CPU-only run (its log shows no GPU at all) read "no layer or expert on the host CPU"
    found = [w for w in said if w.startswith((SLOW, NOTHING_ON_GPU))]
    figures = getattr(diagnosis, "engine_figures", None) or {}
    on_gpu, total = figures.get("layers_offloaded"), figures.get("layers_total")
    if not found and total and on_gpu == 0:
        found.append(f"{SLOW}: none of the {total:.0f} layers is on the GPU (offloaded 0/{total:.0f})")
    return found


# The single changes that free device memory without moving layers, cheapest in speed first.
_STEPS: tuple[tuple[str, str], ...] = (
    ("kv_dtype", ""),  # its cost is the cache type's own (_KV_COSTS)
    ("context", "a shorter context: longer prompts no longer fit"),
    ("parallel", "fewer slots: fewer requests served at once"),
)
# QA 16: a q4_0 proposal was costed as q8_0's "about the same quality"
_KV_COSTS: dict[str, str] = {
    "f16": "an f16 KV cache: half of f32's, the same quality",
    "q8_0": "a q8_0 KV cache: half the cache, about the same speed and quality",
    "q4_0": "a q4_0 KV cache: a quarter of f16's, some quality lost (most on long contexts)",
}
_KV_DOWN: dict[str, tuple[str, ...]] = {
    "f32": ("f16", "q8_0", "q4_0"),
    "f16": ("q8_0", "q4_0"),
    "q8_0": ("q4_0",),
}


@dataclass
class OnGpuChange:
    param: str
    from_: object
    to: object
    total_bytes: int
    usable_bytes: int
    cost: str
    also: dict[str, object] = field(default_factory=dict)  # flash attention for a quantized V cache

    def describe(self) -> str:
        also = "".join(f", with {k} = {v}" for k, v in self.also.items())
        return (
            f"{self.param}: {self.from_} → {self.to}{also}: every layer on the GPU, "
            f"{self.total_bytes / MIB:.0f} of {self.usable_bytes / MIB:.0f} MiB usable; cost: {self.cost}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "param": self.param,
            "from": self.from_,
            "to": self.to,
            "also": dict(self.also),
            "total_mib": round(self.total_bytes / MIB, 1),
            "usable_mib": round(self.usable_bytes / MIB, 1),
            "cost": self.cost,
        }


@dataclass
class OnGpuPlan:
    """What the estimator says about keeping every layer on the device."""

    fits_as_is: bool  # every layer fits with the settings as they are: only the layer count must change
    all_layers_mib: float  # the device bill with every layer on it, settings unchanged
    usable_mib: float
    weights_mib: float  # the device weights alone, every layer on it
    options: list[OnGpuChange] = field(default_factory=list)  # each rung's least drastic value that fits
    n_cpu_moe: int | None = None  # when no change fits: the smallest expert offload that does
    reason: str = ""
    layers_on_gpu: int | None = None  # as the run had it (from its log), when known
    layers_total: int | None = None

    @property
    def chosen(self) -> OnGpuChange | None:
        return self.options[0] if self.options else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "goal": GOAL,
            "fits_as_is": self.fits_as_is,
            "all_layers_mib": round(self.all_layers_mib, 1),
            "usable_mib": round(self.usable_mib, 1),
            "weights_mib": round(self.weights_mib, 1),
            "layers_on_gpu": self.layers_on_gpu,
            "layers_total": self.layers_total,
            "chosen": self.chosen.to_dict() if self.chosen else None,
            "options": [option.to_dict() for option in self.options],
            "n_cpu_moe": self.n_cpu_moe,
            "reason": self.reason,
        }

    def lines(self) -> list[str]:
        out = []
        if self.layers_on_gpu is not None and self.layers_total:
            out.append(f"the run had {self.layers_on_gpu} of {self.layers_total} layers on the GPU")
        out.append(
            f"every layer on the GPU as it is: about {self.all_layers_mib:.0f} MiB of {self.usable_mib:.0f} "
            f"MiB usable (weights {self.weights_mib:.0f} MiB)"
        )
        out.append(self.reason)
        out.extend(f"  option: {option.describe()}" for option in self.options)
        return out


def _current(est: Estimate, settings: Settings) -> dict[str, object]:
    return {"kv_dtype": est.kv_dtype or "f16", "context": est.context, "parallel": est.parallel}


def _values(param: str, now: object) -> list[object]:
    if param == "kv_dtype":
        return list(_KV_DOWN.get(str(now), ()))
    if param == "context":
        return list(_nice_below(int(now)))  # type: ignore[call-overload]
    if param == "parallel":
        return list(range(int(now) - 1, 0, -1))  # type: ignore[call-overload]
    return []


def _first_fitting(
    info: ModelInfo, base: Settings, param: str, values: list[object]
) -> tuple[object, Estimate, dict[str, object]] | None:
    backend = get_backend(base.backend)
    for value in values:
        also: dict[str, object] = {}
        changed = replace(base, **{param: value})
        if param == "kv_dtype" and backend.needs_flash_attn_for(value) and not changed.flash_attn:
            changed = replace(changed, flash_attn=True)
            also["flash_attn"] = True
        if param == "context":  # a per-slot context stays whole: the cache is split across the slots
            changed = replace(changed, context=int(value))  # type: ignore[call-overload]
        est = _estimate_core(info, changed)
        if est.fits:
            return value, est, also
    return None


def with_engine_margin(settings: Settings) -> Settings:
    """Usable memory as the engine's own fit leaves it (llama-server keeps 1024 MiB free per device),
    where the user named no share: 80% of a 24 GiB card would hold back 4.8 GiB the engine uses, and on a
    2 GiB card 80% would count 614 MiB that the engine's fit keeps free (QA 16)."""
    launch = get_backend(settings.backend).launch
    margin = launch.fit_margin_mib if launch is not None else None
    if settings.safety is not None or not margin:
        return settings
    smallest = min(settings.cards)
    if smallest <= margin * MIB:  # the engine's fit would leave no room at all: the 80% line says more
        return settings
    return replace(settings, safety=1 - margin * MIB / smallest)


def plan_on_gpu(info: ModelInfo, settings: Settings) -> OnGpuPlan:
    """Which one change puts every layer on the device of `settings.device_bytes` (the estimator's word)."""
    if not settings.memory.places_layers:
        raise VramtuiError(f"{settings.backend} does not place layers: there is no on-GPU goal to reach")
    base = replace(settings, gpu_layers=None, on_gpu=True, cpu_moe=False, n_cpu_moe=None, override_tensor=())
    base = with_engine_margin(base)
    est = _estimate_core(info, base)
    plan = OnGpuPlan(
        fits_as_is=est.fits,
        all_layers_mib=est.total_bytes / MIB,
        usable_mib=est.usable_bytes / MIB,
        weights_mib=est.weights_bytes / MIB,
    )
    if est.fits:
        plan.reason = (
            "every layer fits as it is, all of them on the GPU (gpu_layers all, llama.cpp's default); "
            "where a run still put some on the host, the margin llama.cpp's fit keeps free may be what "
            "moved them"
        )
        return plan
    now = _current(est, base)
    for param, cost in _STEPS:
        found = _first_fitting(info, base, param, _values(param, now[param]))
        if found is not None:
            value, after, also = found
            cost = cost or _KV_COSTS.get(str(value), f"a {value} KV cache")
            plan.options.append(
                OnGpuChange(param, now[param], value, after.total_bytes, after.usable_bytes, cost, also)
            )
    if plan.options:
        plan.reason = (
            f"the fastest setup that stays on the GPU: {plan.options[0].param} → {plan.options[0].to}"
        )
        return plan
    weights_only = est.bill.get("weights", 0) + est.bill.get("runtime", 0)
    plan.reason = (
        f"no single change keeps every layer on the GPU: the weights and the runtime alone take about "
        f"{weights_only / MIB:.0f} MiB of the {est.usable_bytes / MIB:.0f} MiB usable"
        if weights_only > est.usable_bytes
        else "no single change keeps every layer on the GPU: two at once, or a smaller file"
    )
    if info.is_moe:
        plan.n_cpu_moe = fit_n_cpu_moe(info, base)
        if plan.n_cpu_moe is not None:
            plan.reason += (
                f"; experts of {plan.n_cpu_moe} layers to the CPU (--n-cpu-moe {plan.n_cpu_moe}) keep the "
                "attention of every layer on the GPU, faster than whole layers on the CPU"
            )
    return plan


# --- a run rebuilt from its log ------------------------------------------------------------------


def _figure(figures: Mapping[str, float], key: str) -> int | None:
    value = figures.get(key)
    return int(value) if value else None


def _expert_share(info: ModelInfo, moe_ff: int) -> float:
    """The routed experts' share of one layer's parameters (attention + router + experts)."""
    head_k, head_v = info.head_dim_k, info.head_dim_v
    attention = info.hidden * (info.n_heads * head_k + info.n_kv_heads * (head_k + head_v))
    attention += info.n_heads * head_v * info.hidden
    experts = info.n_experts * 3 * info.hidden * moe_ff
    return experts / (attention + experts + info.hidden * info.n_experts)


def info_from_figures(figures: Mapping[str, float], given: Mapping[str, int] | None = None) -> ModelInfo:
    """The model as the log printed it: its shape, and its weights from the per-device model buffers.

    `given` fills what the log left out (heads, layers ...: the keys of `_SHAPE`), e.g. from a
    printout of the same model elsewhere; a number still missing is one clear error.
    """
    given = dict(given or {})
    shape = {key: given.get(key) or _figure(figures, f"model_{key}") for key in _SHAPE}
    missing = [key for key in ("layers", "hidden", "heads", "kv_heads") if not shape[key]]
    if missing:
        raise VramtuiError(
            f"the log does not print the model's {', '.join(missing)}: give "
            + ", ".join("--" + key.replace("_", "-") for key in missing)
            + " or --model"
        )
    layers, hidden, heads = int(shape["layers"]), int(shape["hidden"]), int(shape["heads"])  # type: ignore[arg-type]
    head_k = int(shape["head_dim_k"] or hidden // heads)
    info = ModelInfo(
        source="log",
        arch="log",
        n_layers=layers,
        hidden=hidden,
        n_heads=heads,
        n_kv_heads=int(shape["kv_heads"]),  # type: ignore[arg-type]
        head_dim_k=head_k,
        head_dim_v=int(shape["head_dim_v"] or head_k),
        vocab=int(shape["vocab"] or 32000),
        max_context=shape["trained_context"],
        is_moe=bool(shape["experts"]),
        n_experts=int(shape["experts"] or 0),
        n_experts_used=int(shape["experts_used"] or 0),
        moe_intermediate=shape["moe_ff"],
        intermediate=shape["ff"],  # None where the log prints no n_ff: the estimator's 4 x hidden
        weights_source="log",
    )
    _sliding_window(info, figures)
    _weights_from_buffers(info, figures)
    return info


def _sliding_window(info: ModelInfo, figures: Mapping[str, float]) -> None:
    """A sliding-window model's layers, from its two caches: the full-context one holds the global layers
    (its "N layers"), the window-sized one the rest (llama.cpp's iswa cache: CACHE_PART_MARK)."""
    window, full = _figure(figures, "model_swa_window"), _figure(figures, "kv_cache_layers")
    if window and full and figures.get(CACHE_PART_MARK) and full < info.n_layers:
        info.sliding_window, info.swa_layers = int(window), info.n_layers - int(full)


_SHAPE = (
    "layers", "hidden", "heads", "kv_heads", "head_dim_k", "head_dim_v", "vocab", "trained_context",
    "experts", "experts_used", "moe_ff", "ff",
)  # fmt: skip


def shape_of(info: ModelInfo) -> dict[str, int]:
    """A model file's shape in `info_from_figures`'s keys: the shape from the file, the weights from the
    log (a config.json says nothing of the quantization the run loaded)."""
    shape = {
        "layers": info.n_layers,
        "hidden": info.hidden,
        "heads": info.n_heads,
        "kv_heads": info.n_kv_heads,
        "head_dim_k": info.head_dim_k,
        "head_dim_v": info.head_dim_v,
        "vocab": info.vocab,
        "trained_context": info.max_context or 0,
        "experts": info.n_experts if info.is_moe else 0,
        "experts_used": info.n_experts_used if info.is_moe else 0,
        "moe_ff": info.moe_intermediate or 0,
        "ff": info.intermediate or 0,
    }
    return {key: int(value) for key, value in shape.items() if value}


def _weights_from_buffers(info: ModelInfo, figures: Mapping[str, float]) -> None:
    """Per-layer bytes from the split the log shows: N repeating layers in the device buffers, the rest
    (the other layers, the token embedding and the output) in the host buffers."""
    total = figures.get("model_buffer")
    on_gpu, all_layers = _figure(figures, "layers_offloaded"), _figure(figures, "layers_total")
    device = figures.get("model_buffer_gpu") or 0
    if not total:
        file_bytes = figures.get("model_file")
        if not file_bytes:
            raise VramtuiError("the log prints no model buffer or file size: the weights are unknown")
        total = file_bytes
    if on_gpu and all_layers and 0 < on_gpu <= info.n_layers and device:
        per_layer = device / on_gpu
    else:  # no split to read: the embeddings as one layer's worth each, a rough share
        per_layer = total / (info.n_layers + 2)
    rest = max(0.0, total - per_layer * info.n_layers)
    info.layer_bytes = (int(per_layer),) * info.n_layers
    info.token_embd_bytes = info.output_bytes = int(rest / 2)
    info.weights_bytes = int(total)
    if info.is_moe and info.moe_intermediate:
        share = _expert_share(info, info.moe_intermediate)
        tensors = []
        for layer in range(info.n_layers):
            experts = int(per_layer * share)
            tensors += [
                (f"blk.{layer}.ffn_{kind}_exps.weight", experts // 3) for kind in ("gate", "up", "down")
            ]
            tensors.append((f"blk.{layer}.attn_and_router", int(per_layer) - experts // 3 * 3))
        info.layer_tensors = tuple(tensors)
    info.notes.append("weights per layer read from the log's model buffers")


def flash_attn_of(figures: Mapping[str, float]) -> bool | None:
    """Flash attention as the log printed it (on / off); None where it said `auto` or nothing."""
    value = figures.get("flash_attn")
    return None if value is None else bool(value)


def settings_from_figures(
    figures: Mapping[str, float], backend: str = "llama.cpp", device_bytes: int | None = None
) -> Settings:
    """The run as the log shows it: its context and ubatch, and the card's size (its free memory when
    the model loaded, the first device) unless given."""
    free = figures.get("device_free.CUDA0") or figures.get("device_free")
    if device_bytes is None:
        if not free:
            raise VramtuiError("the log does not show the card's memory: give --gpu-mem")
        device_bytes = int(free)
    context = _figure(figures, "context")
    return Settings(
        backend=backend,
        context=context,
        parallel=1 if context else None,
        ubatch=_figure(figures, "ubatch_tokens"),
        flash_attn=flash_attn_of(figures),
        device_bytes=device_bytes,
    )


def plan_from_figures(
    figures: Mapping[str, float],
    backend: str = "llama.cpp",
    device_bytes: int | None = None,
    given: Mapping[str, int] | None = None,
) -> OnGpuPlan:
    info = info_from_figures(figures, given)
    plan = plan_on_gpu(info, settings_from_figures(figures, backend, device_bytes))
    on_gpu = figures.get("layers_offloaded")
    plan.layers_on_gpu = None if on_gpu is None else int(on_gpu)  # 0 of N is a count, not "not printed"
    plan.layers_total = _figure(figures, "layers_total")
    return plan


__all__ = ["GOAL", "OnGpuChange", "OnGpuPlan", "info_from_figures", "plan_from_figures", "plan_on_gpu"]
