"""The budget model: what a configuration needs, as a MemoryBill, and how much room the budget leaves.

The estimator gives each part (weights, KV cache, compute buffers, and llama-cpp-python's logits
arrays as the output part); each is scaled by measured/estimated from the last run that printed it.
The room the engine process leaves for buffers is learned from failures (what it had plus what it
could not get is more than the room) and successes (what it held fitted).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from vramtui.core.backends import Backend, kv_dtype_name, switch
from vramtui.core.backends.base import gib, size_bytes
from vramtui.core.errors import VramtuiError
from vramtui.core.estimate.accounting import BUDGET_LINE
from vramtui.core.launch.footprint import engine_build
from vramtui.core.launch.profile import Profile
from vramtui.core.memory.parts import HOST, MemoryBill, Part, Place
from vramtui.core.memory.room import THREAD_STACK_BYTES
from vramtui.core.units import MIB
from vramtui.core.wizard.ladders import MEMORY_FAILURES
from vramtui.core.wizard.observe import BUFFER_PARTS, Observation, part_bytes


def _mmap_of(params: dict[str, object]) -> bool:
    """llama.cpp's load mode from the profile (the estimator reads it the same way)."""
    from vramtui.core.estimate.estimator import mmap_from_params

    return mmap_from_params(params)


DEFAULT_MARGIN = BUDGET_LINE  # a proposal must fit in 90% of what is left for buffers (estimate's line too)
_ESTIMATED_PARTS: tuple[Part, ...] = ("weights", "kv_cache", "compute", "output", "runtime", "margin")


def whole_or_none(value: object) -> int | None:
    """A profile's value as a whole number, or None (unset, "auto", "all")."""
    try:
        return int(value)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return None


def needed_bytes(bill: MemoryBill) -> int:
    """Everything a predicted bill holds: the budget counts every part wherever the bill put it."""
    return sum(bill.total(place) for place in bill.places)


def predicted_parts(bill: MemoryBill | None) -> dict[str, float]:
    """A predicted bill's buffers (weights, KV cache, compute) in MiB, wherever they sit."""
    if bill is None:
        return {}
    return {part: part_bytes(bill, part) / MIB for part in BUFFER_PARTS}


def changed(profile: Profile, changes: Iterable[tuple[str, object]]) -> Profile:
    """The profile with these changes made (the model is a file, every other change a parameter)."""
    for param, value in changes:
        profile = (
            profile.with_changes(model=str(value)) if param == "model" else profile.with_param(param, value)
        )
    return profile


def current_value(profile: Profile, param: str) -> object:
    """The value a parameter has in a run of this profile: the profile's, else the engine's default."""
    if param == "model":
        return profile.model
    if param in profile.params:
        return profile.params[param]
    return profile.backend.default(param)


def _int_param(profile: Profile, name: str, fallback: int) -> int:
    value = profile.params.get(name, profile.backend.defaults.get(name, fallback))
    try:
        return int(value)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return fallback


def _flash_on(profile: Profile) -> bool:
    # "auto" counts as the engine resolves it (llama-server: on, the CPU included).
    return profile.backend.flash_attn_effective(current_value(profile, "flash_attn"))


class MemoryModel:
    """The estimator, corrected by what earlier runs measured."""

    def __init__(
        self, profile: Profile, margin: float = DEFAULT_MARGIN, device_bytes: int | None = None
    ) -> None:
        self.backend: Backend = profile.backend
        self.margin = margin
        self.host = self.host_budget(profile)
        # The budget: the profile's, else (a GPU run) the card's own memory.
        self.budget = profile.memory_budget or (None if self.host else device_bytes or _first_gpu_bytes())
        self.overhead = 512 * MIB  # the engine's own share of a GPU (CUDA context...): the estimator's figure
        self.factors: dict[str, float] = {}
        self.room_upper: int | None = None  # room for buffers is below this (a failure proved it)
        self.room_lower: int | None = None  # room is at least this (a success proved it)
        self._info_cache: dict[str, Any] = {}
        # The engine's own idle host footprint: measured once per binary where one can be run, else
        # the backend's figure (see core.launch.footprint).
        self.host_baseline = _host_baseline(profile) if self.host else profile.backend.host_baseline_bytes
        # measured on its binary, or the backend's own figure (QA 26 D4: a constant read as a measurement)
        self.baseline_measured = self.host and self.host_baseline != profile.backend.host_baseline_bytes
        # a host budget is the launcher's address-space cap, where thread stacks count; an attached
        # server's is judged on its RSS, where a stack it reserved and never touched does not
        self.address_space = True
        self.available = True
        self.why_unavailable = ""

    @property
    def place(self) -> Place:
        """Where the budget applies: the host (a CPU run) or the first GPU."""
        return HOST if self.host else 0

    # The estimator is imported lazily: the wizard still proposes (by halving) when it is missing.
    def info(self, model: str) -> Any | None:
        if model not in self._info_cache:
            try:
                from vramtui.core.estimate.modelinfo import load_model_info

                self._info_cache[model] = load_model_info(model)
            except Exception as error:
                self._info_cache[model] = None
                self.why_unavailable = f"no estimate for {Path(model).name}: {error}"
        return self._info_cache[model]

    def _settings(self, profile: Profile, info: Any) -> dict[str, object]:
        """The estimator's settings for this profile (the engine's defaults where it says nothing)."""
        gpu_layers = current_value(profile, "gpu_layers")
        wanted: dict[str, object] = {
            "backend": self.backend.name,  # the estimator resolves its accounting (llama-cpp-python: its own)
            "context": _int_param(profile, "context", int(getattr(info, "max_context", None) or 4096)),
            # unset: the engine's own (llama-server's -np auto is 4 slots in one unified cache, not 4 given)
            "parallel": _int_param(profile, "parallel", 1) if "parallel" in profile.params else None,
            "batch": _int_param(profile, "batch", 512),
            "ubatch": _int_param(profile, "ubatch", 512),
            "kv_dtype": kv_dtype_name(current_value(profile, "kv_dtype") or "f16"),
            "flash_attn": _flash_on(profile),
            "gpu_layers": None if str(gpu_layers) in ("all", "-1", "None") else int(gpu_layers),  # type: ignore[call-overload]
            "quant": profile.params.get("quant"),
            "dtype": profile.params.get("dtype"),
            **_offload_settings(profile),
            **_engine_knobs(profile),
            "mmap": _mmap_of(profile.params),
            "engine_build": engine_build(profile),  # vLLM 0.20 bills its CUDA graphs outside the budget
        }
        if self.budget:
            wanted["device_bytes"] = self.budget
        if self.host_budget(profile):
            wanted["on_gpu"] = False  # a CPU run: no CUDA context, weights in host RAM
            # an address-space limit: the load's mapped peak counts (QA 38 F1)
            wanted["room_is_budget"] = True
            if self.backend.cpu_share_words:  # its share is of the whole machine, not of the budget
                from vramtui.core.estimate.inputs import cpu_run_card

                wanted["share_of_bytes"] = cpu_run_card()
        return wanted

    def estimate_of(self, profile: Profile) -> Any | None:
        """The estimator's Estimate for this profile, or None (the reason in why_unavailable)."""
        info = self.info(profile.model)
        if info is None:
            return None
        try:
            from vramtui.core.estimate.estimator import Settings, estimate
        except ImportError as error:
            self.why_unavailable = f"estimator not available: {error}"
            return None
        wanted = self._settings(profile, info)
        accepted = inspect.signature(Settings).parameters
        try:
            return estimate(info, Settings(**{k: v for k, v in wanted.items() if k in accepted}))
        except Exception as error:
            self.why_unavailable = f"estimator failed: {error}"
            return None

    def holds_one_request(self, profile: Profile) -> bool | None:
        """Does the KV cache as this profile sizes it hold one request of the whole context (vLLM's own
        start-up check)? None where the estimate does not count the cache's tokens."""
        result = self.estimate_of(profile)
        tokens = getattr(result, "kv_cache_tokens", None)
        if result is None or tokens is None:
            return None
        return int(tokens) >= int(result.context)

    def raw(self, profile: Profile) -> MemoryBill | None:
        """The estimator's bill for this profile, every part where the budget applies."""
        result = self.estimate_of(profile)
        return self._bill_of(profile, result) if result is not None else None

    def _bill_of(self, profile: Profile, result: Any) -> MemoryBill:
        """The bill of one estimate of `profile`."""
        weights = int(getattr(result, "weights_bytes", 0) or 0)
        overhead = getattr(result, "overhead_bytes", None)
        if isinstance(overhead, int) and overhead > 0:
            self.overhead = overhead
        if self.host_budget(profile):
            # The estimate's host weights hold llama.cpp's repacked copy (CPU_REPACK of q4_0) already.
            weights += int(getattr(result, "weights_host_bytes", 0) or 0)
        bill = MemoryBill()
        place = self.place
        bill.add(place, "weights", weights)
        kv = int(getattr(result, "kv_cache_bytes", 0) or 0)
        if _kv_by_share(profile, result):
            # vLLM: the KV cache takes whatever its share of the card leaves, so what a run needs is one
            # request of the full length, and the share it leaves to others is out of reach as well (a
            # cache set outright in bytes is needed whole)
            kv = int(result.kv_bytes_per_token) * int(result.context)
            bill.add(place, "margin", max(0, int(result.device_bytes) - int(result.usable_bytes)))
        bill.add(place, "kv_cache", kv)
        parts = getattr(result, "bill", None)
        if isinstance(parts, MemoryBill) and getattr(result, "place", None) == place:
            # compute and output apart: the engine prints them apart (and llama-cpp-python's own logits
            # are no compute buffer)
            bill.add(place, "compute", parts.get("compute", place))
            bill.add(place, "output", parts.get("output", place))
        else:
            bill.add(place, "compute", int(getattr(result, "activations_bytes", 0) or 0))
        if self.host_budget(profile) and self.address_space:
            bill.add(place, "runtime", slot_thread_stacks(profile))
        return bill

    def fitting_split(self, profile: Profile, cards: list[int]) -> tuple[int, ...] | None:
        """Several cards (each one's room): the --tensor-split the estimator says fits every card, with
        every layer still on a GPU; None when none does or there is no estimate."""
        info = self.info(profile.model)
        if info is None or len(cards) < 2:
            return None
        try:
            from vramtui.core.estimate.devices import parse_split
            from vramtui.core.estimate.estimator import Settings, fit_tensor_split

            wanted = self._settings(profile, info)
            wanted.pop("device_bytes", None)
            current = current_value(profile, "tensor_split")
            if isinstance(current, list | tuple):
                current = ",".join(map(str, current))
            split = parse_split(str(current)) if current not in (None, "") else ()
            accepted = inspect.signature(Settings).parameters
            settings = Settings(
                **{k: v for k, v in wanted.items() if k in accepted}, gpus=tuple(cards), tensor_split=split
            )
            return fit_tensor_split(info, settings)
        except (VramtuiError, ValueError) as error:
            self.why_unavailable = f"no split estimate: {error}"
            return None

    def host_budget(self, profile: Profile) -> bool:
        """A budget on the host process (everything counts) rather than a GPU's (only what sits there)."""
        # As the launcher decides: no GPU to watch, or no layer on it, and the cap is the address space.
        gpu_layers = str(current_value(profile, "gpu_layers"))
        return gpu_layers == "0" or _first_gpu_bytes() is None

    def _factor_keys(self, profile: Profile) -> dict[Part, str]:
        """Which learned correction applies to each part (weights per model file, compute per flash). A KV
        cache set outright in bytes is that many bytes: no correction (QA 19 F1: one learnt from a cache
        the share sized, beside the one request the bill holds for it, doubled a 733 MiB prediction)."""
        keys: dict[Part, str] = {
            "weights": f"weights:{profile.model}",
            "compute": f"compute:{_flash_on(profile)}",
        }
        if not profile.params.get("kv_cache_memory"):
            keys["kv_cache"] = "kv"
        return keys

    def predict(self, profile: Profile) -> MemoryBill | None:
        raw = self.raw(profile)
        if raw is None:
            return None
        keys = self._factor_keys(profile)
        bill = MemoryBill()
        for part in _ESTIMATED_PARTS:
            factor = self.factors.get(keys[part], 1.0) if part in keys else 1.0
            bill.add(self.place, part, int(raw.get(part, self.place) * factor))
        return bill

    def baseline(self) -> int:
        return self.host_baseline if self.host else self.overhead

    def room(self) -> int | None:
        """Bytes left for the model's buffers under the budget, as far as we know."""
        if not self.budget:
            return None
        room = self.budget - self.baseline()
        if self.room_upper is not None:
            room = min(room, self.room_upper)
        if self.room_lower is not None:
            room = max(room, self.room_lower)
        return room

    def fits(self, bill: MemoryBill) -> bool | None:
        room = self.room()
        if room is None:
            return None
        return needed_bytes(bill) <= room * self.margin

    def learn(self, profile: Profile, obs: Observation) -> None:
        """Fold one run's measurements into the corrections."""
        result = self.estimate_of(profile)
        raw = self._bill_of(profile, result) if result is not None else None
        measured = obs.measured
        if raw is not None:
            keys = self._factor_keys(profile)
            if _kv_by_share(profile, result):  # the bill holds one request, not the cache the engine printed
                keys.pop("kv_cache", None)
            for part, key in keys.items():
                # On a GPU budget only what the engine printed on the card compares with the card's
                # estimate: experts (or layers) in host RAM print beside it (CPU_Mapped, CUDA_Host).
                printed = part_bytes(measured, part) if self.host else measured.get(part, self.place)
                estimated = raw.get(part, self.place)
                if printed and estimated > MIB:
                    self.factors[key] = min(2.0, max(0.5, printed / estimated))
        output = raw.get("output", self.place) if raw is not None else 0
        if obs.works:
            self.room_lower = max(self.room_lower or 0, obs.held_bytes() + output)
        elif obs.failure in MEMORY_FAILURES or "oom" in str(obs.failure):
            attempted = obs.allocated_bytes()
            weights = raw.get("weights", self.place) if raw is not None else 0
            failed = obs.figures.get("failed_alloc", 0)
            # An mmap that failed prints no size; a loader that allocates tensor by tensor (PyTorch:
            # "Tried to allocate 80 MiB") prints only the last piece: the weights as a whole were asked for.
            if obs.failure_stage == "load_weights" and (not failed or failed < weights // 2):
                attempted = max(attempted, weights)
            held = obs.held_bytes()
            # (a buffer printed as it was asked for and never held, past the whole budget, proves nothing)
            # (nor does one held by a server that runs over the budget: it is over it)
            if held and self.host and self.budget and held < self.budget and not obs.runs_over_budget:
                # what it held when the next buffer failed was there at once: the room is at least that,
                # whatever the engine's own figure says (QA 26 D4: 21 + 16 MiB held under 200 MiB beside
                # an assumed 352 MiB engine, "-152 MiB left")
                self.room_lower = max(self.room_lower or 0, held)
            if attempted:
                # a bound this run's own buffers disprove (they were allocated, so they fit) was inferred
                # wrongly: an earlier failure at the weights read as "the weights as a whole did not fit"
                # (QA 20 D7: 21 MiB of weights held, the room still said to be 21 MiB, the wizard stopped)
                held = obs.held_bytes()
                kept = self.room_upper is not None and held < self.room_upper
                self.room_upper = min(self.room_upper, attempted) if kept else attempted  # type: ignore[type-var]
        if obs.runs_over_budget and self.budget and obs.peak_mib and raw is not None:
            # a server that runs over the budget holds its buffers and the engine itself: the buffers get
            # the budget less what the engine holds at that peak (QA 29 Q6: "~256 MiB left" beside a vLLM
            # at 1920 MiB with 259 MiB of buffers under 1850, and a step that still did not fit)
            engine = int(obs.peak_mib * MIB) - needed_bytes(raw)
            room = max(self.budget - engine, 0)
            self.room_upper = room if self.room_upper is None else min(self.room_upper, room)


def _kv_by_share(profile: Profile, result: Any | None) -> bool:
    """vLLM's KV cache takes what its share leaves (no bytes set outright): the bill holds one request of
    the full length for it, which the cache the engine prints is not comparable with."""
    return (
        result is not None
        and getattr(result, "kv_cache_tokens", None) is not None
        and not profile.params.get("kv_cache_memory")
    )


def slot_count(profile: Profile) -> int:
    """The slots a run of `profile` has: its parallel, else (unset, "auto", llama.cpp's -1) the engine's own."""
    value = whole_or_none(current_value(profile, "parallel"))
    return value if value and value > 0 else profile.backend.parallel_auto_slots or 1


def slot_thread_stacks(profile: Profile) -> int:
    """The address space the slots' threads reserve beyond the one slot the engine's footprint was measured
    with (core.launch.footprint runs it with --parallel 1): each thread's stack, under a host budget."""
    per_slot = profile.backend.threads_per_slot
    return (slot_count(profile) - 1) * per_slot * THREAD_STACK_BYTES if per_slot else 0


def _engine_knobs(profile: Profile) -> dict[str, object]:
    """An engine's own knobs the estimator sizes (ik_llama.cpp's -mla and -amb, vLLM's KV bytes), as the
    profile sets them."""
    found: dict[str, object] = {}
    for name in ("mla", "attn_max_batch"):
        try:
            found[name] = int(profile.params[name])  # type: ignore[call-overload]
        except (KeyError, TypeError, ValueError):
            pass  # not set, or not a number: the launcher says what it cannot pass on
    kv_set = profile.params.get("kv_cache_memory")  # vLLM's KV cache in bytes, the share aside
    if kv_set not in (None, "", 0):
        try:
            found["kv_cache_memory"] = size_bytes("kv_cache_memory", kv_set)
        except (VramtuiError, ValueError):
            pass
    return found


def _offload_settings(profile: Profile) -> dict[str, object]:
    """The profile's expert offload (--cpu-moe, --n-cpu-moe, -ot) in the estimator's terms."""
    wanted: dict[str, object] = {}
    n_cpu_moe = _int_param(profile, "n_cpu_moe", 0)
    if n_cpu_moe > 0:
        wanted["n_cpu_moe"] = n_cpu_moe
    try:
        if switch(profile.params.get("cpu_moe", False)) is True:
            wanted["cpu_moe"] = True
    except VramtuiError:
        pass  # the launcher says what it cannot pass on; the estimate sizes the experts resident
    offload = profile.params.get("cpu_offload")
    if offload not in (None, "", 0):
        try:
            wanted["cpu_offload_gb"] = gib("cpu_offload", offload)
        except (VramtuiError, ValueError):
            pass
    rules = profile.params.get("override_tensor")
    if rules:
        wanted["override_tensor"] = (rules,) if isinstance(rules, str) else tuple(rules)  # type: ignore[arg-type]
    return wanted


def _host_baseline(profile: Profile) -> int:
    try:
        from vramtui.core.launch.footprint import host_footprint
    except ImportError:
        return profile.backend.host_baseline_bytes
    return host_footprint(profile)


@functools.cache
def _first_gpu_bytes() -> int | None:
    """Total memory of the first GPU NVML sees (None without NVML)."""
    from vramtui.core.memory.nvml import first_gpu_total_bytes

    return first_gpu_total_bytes()
