"""Proposing the next rung: which one change, to which value, and why.

The ladder comes from the backend (`backend.rungs(stage)`); the value is the least drastic one the
budget model says fits with the margin (else the one that frees most), or, without arithmetic, a
cautious halving. When nothing on the ladder helps, the findings say why and what to do instead.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vramtui.core.backends import Backend, kv_dtype_name, switch
from vramtui.core.backends.base import FailedRun, gib, kv_set_outright
from vramtui.core.errors import VramtuiError
from vramtui.core.estimate import quant as q
from vramtui.core.launch.profile import BUDGET_WHERE, Profile
from vramtui.core.logs.advice import CAUSE_WORDS, READ_THE_LINE
from vramtui.core.logs.analysis import clip_words, strip_log_prefix
from vramtui.core.logs.stages import BUDGET_ADVISED_FIX, BUDGET_TOO_SMALL, STAGE_INDEX
from vramtui.core.memory.parts import MemoryBill
from vramtui.core.units import GIB, MIB
from vramtui.core.wizard.budget import MemoryModel, changed, current_value, needed_bytes, whole_or_none
from vramtui.core.wizard.ladders import MEMORY_FAILURES, NOT_MEMORY, Rung
from vramtui.core.wizard.observe import Observation, part_bytes
from vramtui.core.wizard.outright import outright_proposal, outright_too_small, smaller_kv_bytes
from vramtui.core.wizard.proposal import Proposal, same_value, value_word
from vramtui.core.wizard.reach import (
    engine_alone_over,
    left_alone_words,
    out_of_reach,
    slot_share_words,
    useful_context,
)


def _free_context_move(
    proposer: Proposer, profile: Profile, rungs: list[Rung], obs: Observation
) -> Proposal | None:
    """A context past what the model can use (reach.useful_context) goes down to exactly that before any
    other move, fitting alone or not: it costs nothing, and the next step continues from there."""
    rung = next((r for r in rungs if r.param == "context" and r.move != "advice"), None)
    useful = useful_context(proposer.model, profile)
    now = whole_or_none(current_value(profile, "context"))
    if rung is None or not useful or not now or now <= useful:
        return None
    proposal, bill = proposer._best_value(profile, rung, obs)
    if proposal is not None and bill is not None and not proposer.model.fits(bill):
        proposal.why += " — not enough alone; the next step continues"
    return proposal


def how_it_failed(obs: Observation, where: str) -> str:
    """The run's failure, as a step's why opens: over the budget, the allocation refused, or its first error."""
    attempt = obs.figures.get("failed_alloc")
    if obs.runs_over_budget:
        return obs.over_budget_text()
    if attempt:
        return f"it failed at {where}: the engine could not allocate {attempt / MIB:.0f} MiB"
    if obs.first_error:
        return f"it failed at {where}: {clip_words(strip_log_prefix(obs.first_error), 160)}"
    return f"it failed at {where} ({obs.failure})"


def above_estimate_line(backend: Backend, need: int, room: int, margin: float, budgeted: bool) -> str:
    """Words for a change that fits the wizard's margin but not the line `vramtui estimate` draws (80% of a
    card for llama.cpp; under a memory budget its line is the wizard's margin, QA 36 F3): the two say it
    differently for the same setting (QA 35 F1: "DOES NOT FIT under the 80% line" for the context the wizard
    chose, and that then ran)."""
    from vramtui.core.estimate.accounting import BUDGET_LINE, accounting_for

    line = accounting_for(backend.name).default_safety
    line = max(line, BUDGET_LINE) if budgeted else line
    if line >= margin or need <= room * line:
        return ""
    return (
        f" (above the {line:.0%} line of the room `vramtui estimate` draws, where it says DOES NOT FIT: it "
        "should start, with less room for what the estimate misses)"
    )


def switched_on(current: object) -> object:
    """On, spelled as the setting is now (a profile's "off" becomes "on", a bool True)."""
    return "on" if isinstance(current, str) else True


@dataclass
class Findings:
    """What the wizard concluded when it proposes nothing (or stops): shared by proposer and loop."""

    advice: list[str] = field(default_factory=list)
    stop_reason: str = ""
    failing_stage: str | None = None
    rolled_back: set[str] = field(default_factory=set)  # settings tried and undone (not the user's skips)


# --- candidate values ------------------------------------------------------------------------------


def _nice_below(current: int, floor: int = 512) -> list[int]:
    """Round context sizes below `current`, largest first: powers of two and 1.5× powers of two."""
    values = set()
    power = 256
    while power < current:
        values.update((power, power * 3 // 2))
        power *= 2
    return sorted((v for v in values if floor <= v < current), reverse=True)


def file_bits(quant: str | None) -> float | None:
    """Average bits per weight of the file type (or publisher's mix) a file name gives; None if unknown."""
    try:
        return q.bits_per_weight(quant) if quant else None
    except (VramtuiError, KeyError):
        return None


def sibling_files(model: str) -> list[tuple[str, str]]:
    """Other quantizations of the same GGUF next to it (Q8_0, IQ2_M, UD-Q3_K_XL, Q6_K_L, ...):
    [(quant, path)], most bits per weight first."""
    path = Path(model)
    match = q.QUANT_TAG.search(path.stem)
    if not match or not path.parent.is_dir():
        return []
    prefix, suffix = path.stem[: match.start()], path.stem[match.end() :]
    found: list[tuple[float, str, str]] = []
    for other in path.parent.glob("*.gguf"):
        if other.resolve() == path.resolve():
            continue
        m = q.QUANT_TAG.search(other.stem)
        if not m or other.stem[: m.start()] != prefix or other.stem[m.end() :] != suffix:
            continue
        quant = m.group(1).lower().replace("fp16", "f16")
        bits = file_bits(quant)
        if bits is not None:
            found.append((bits, quant, str(other)))
    return [(quant, where) for _bits, quant, where in sorted(found, key=lambda item: -item[0])]


def quant_of(model: str) -> str | None:
    return q.quant_in_name(model)


def _cautious(param: str, current: object, candidates: list[object]) -> object:
    """Without arithmetic: half the context, batch or concurrency (the nearest value), else the next down."""
    if param in ("context", "batch", "ubatch", "parallel"):
        try:
            half = int(current) // 2  # type: ignore[call-overload]
        except (TypeError, ValueError):
            return candidates[0]
        return next((c for c in candidates if int(c) <= half), candidates[-1])  # type: ignore[call-overload]
    if param in _ASCENDING:  # half of what is left to move: one layer (or GiB) at a time takes too many runs
        return candidates[(len(candidates) - 1) // 2]
    return candidates[0]


def context_run(model: MemoryModel, profile: Profile, obs: Observation) -> int | None:
    """The context a run left at the engine's default (0: the model's trained length) had: what the
    engine printed (n_ctx), else the model's trained length; None when neither is known."""
    printed = whole_or_none(obs.facts.get("n_ctx"))
    if printed:
        return printed
    info = model.info(profile.model)
    return whole_or_none(getattr(info, "max_context", None)) or None


def _smaller_counts(param: str, current: object) -> list[object]:
    now = whole_or_none(current)
    if now is None:
        return []
    if param == "context":
        return list(_nice_below(now))
    if param == "ubatch":  # powers of two: what llama.cpp's kernels are tuned for, every one below it
        # (QA 34 L5: from 4096 the first offered was 256, where 1024 and the default 512 fit too)
        return [1 << k for k in range(now.bit_length(), 4, -1) if 32 <= (1 << k) < now]
    return sorted({max(1, now * k // 8) for k in range(7, 0, -1)} - {now}, reverse=True)


def _smaller_files(model: str) -> list[object]:
    mine = file_bits(quant_of(model))
    if mine is None:
        return []
    return [path for quant, path in sibling_files(model) if (file_bits(quant) or mine) < mine]


def candidates(rung: Rung, current: object, profile: Profile, n_layers: int) -> list[object]:
    """The values this rung can take from `current`, least drastic first."""
    param, backend = rung.param, profile.backend
    if param in ("context", "parallel", "batch", "ubatch"):
        return _smaller_counts(param, current)
    if param == "kv_dtype":
        order = backend.kv_dtype_order
        name = kv_dtype_name(current or "f16")
        if name not in order:
            return []
        return [t for t in order[order.index(name) + 1 :] if t in backend.kv_dtypes]
    if param == "flash_attn":  # never "on" when the run already has it (auto turned it on)
        return [] if backend.flash_attn_effective(current) else [switched_on(current)]
    if param == "mem_share":
        if kv_set_outright(backend, profile.params, profile.env):
            return []  # the share does not size the cache (QA 9, 10)
        share = float(current or 0.9)  # type: ignore[arg-type]
        return [v for v in (0.92, 0.95) if v > share]
    if param == "gpu_layers":
        if str(current) in ("0", "None"):
            return []
        now = n_layers if str(current) in ("all", "-1", "999") else int(current)  # type: ignore[call-overload]
        return list(range(now - 1, -1, -1))
    if param == "quant":
        order = backend.quant_order
        if not order or backend.knob("quant") is None:
            return []
        now = current if current in order else None
        return [value for value in order[order.index(now) + 1 :] if backend.quant_usable(value)]
    if param == "model":
        return _smaller_files(profile.model)
    return []


def _printed_flash(obs: Observation) -> bool | None:
    """Flash attention as the engine printed it (llama_context: flash_attn = enabled/auto/1), or None."""
    said = obs.facts.get("flash_attn")
    if said is None:
        return None
    if said in {"1", "true", "on", "enabled", "yes"}:
        return True
    if said in {"0", "false", "off", "disabled", "no"}:
        return False
    return None


def _inference_why(obs: Observation, rung: Rung) -> str:
    """Why the inference ladder's step: a request failed on a server that answered, or the server failed
    as it came up (QA 16: a server that died as it began listening had no request to fail)."""
    what = (
        "the server runs but a request failed at inference"
        if obs.ready
        else "the server failed as it came up, before it served a request"
    )
    replay = f": {obs.replay_meaning}" if obs.replay_meaning else ""
    return (
        f"{what} ({obs.failure}{replay}); a smaller {rung.param} lowers the memory each step of a request "
        f"takes; cost: {rung.cost}"
    )


def stage_from_facts(obs: Observation) -> str:
    """The failing stage from llama.cpp's own words when the diagnosis named none."""
    if obs.facts.get("mmap_failed") or ("kv_buffer" not in obs.figures and "model_buffer" not in obs.figures):
        return "load_weights"
    return "kv_cache"


def _no_room_to_start(findings: Findings, obs: Observation) -> bool:
    """No room to start or import the engine, where no setting helps: under the budget (the diagnosis'
    cause, or the launcher's refusal of a budget under the engine's own floor, before it launched), or the
    machine's own limit while it imported itself (QA 29 Q9). The stop and its advice go in `findings`."""
    too_small = next((c for c in (obs.cause, obs.failure) if c in BUDGET_TOO_SMALL), None)
    if too_small is not None:
        said = [obs.message] if obs.message and too_small != obs.cause else []  # the launcher's words
        findings.advice = [*said, *obs.advice] or [f"raise the memory budget {BUDGET_WHERE}"]
        helps = "or do as the advice says" if too_small in BUDGET_ADVISED_FIX else "no engine setting helps"
        findings.stop_reason = f"{CAUSE_WORDS[too_small]}: raise the memory budget, {helps}"
        return True
    if obs.cause == "host_import":
        findings.advice = list(obs.advice)
        findings.stop_reason = (
            f"{CAUSE_WORDS[obs.cause]}: free host RAM or raise its limit, no engine setting helps"
        )
        return True
    return False


def _is_memory(failure: str | None) -> bool:
    return failure in MEMORY_FAILURES or "oom" in str(failure)


Option = tuple[Rung, Proposal, MemoryBill | None]
# Settings whose every step up frees more memory: the smallest value that fits is bisected for.
_ASCENDING = frozenset({"n_cpu_moe", "cpu_offload"})


# --- several GPUs: moving layers between cards ---------------------------------------------------------
# Only the model's estimate and the run's log decide these: no Proposer state, so they live outside it.


def split_proposal(model: MemoryModel, profile: Profile, rung: Rung, obs: Observation) -> Proposal | None:
    """Layers off the card that ran out (the log names it) onto the least loaded other one, when the
    run printed its buffers per device: the least drastic move that frees the failed allocation."""
    from vramtui.core.estimate.devices import parse_split, split_moves

    current = current_value(profile, "tensor_split")
    try:
        split = parse_split(
            ",".join(map(str, current)) if isinstance(current, list | tuple) else str(current)
        )
    except ValueError:
        split = ()
    n_layers = int(getattr(model.info(profile.model), "n_layers", 0) or 0)
    moves = split_moves(dict(obs.engine), n_layers, split)
    if not moves:
        return _fitting_split(model, profile, rung, obs, current)
    move = moves[0]
    why = (
        f"CUDA{move.source} ran out of memory while CUDA{move.target} holds the least; "
        f"{move.describe()} frees about the allocation that failed there"
    )
    value = ",".join(str(part) for part in move.split)
    return Proposal("tensor_split", current, value, why, move.describe(), rung.knob(model.backend))


def _fitting_split(
    model: MemoryModel, profile: Profile, rung: Rung, obs: Observation, current: object
) -> Proposal | None:
    """No per-device buffers to move layers by: the split the estimate says fits every card, each
    card's room as the log printed it (its free memory when the model loaded)."""
    from vramtui.core.estimate.devices import printed_by_device

    free = printed_by_device(dict(obs.engine), "device_free")
    if len(free) < 2 or sorted(free) != list(range(len(free))):
        return None
    split = model.fitting_split(profile, [free[i] for i in sorted(free)])
    if split is None:
        return None
    value = ",".join(str(part) for part in split)
    if str(current).replace(" ", "") == value:
        return None
    cards = ", ".join(f"device {i} {free[i] / GIB:.1f} GiB" for i in sorted(free))
    why = (
        f"the estimate fits every card with --tensor-split {value} (free when the model loaded: {cards}); "
        "every layer stays on a GPU, so no speed is given up"
    )
    return Proposal(
        "tensor_split",
        current,
        value,
        why,
        f"split the layers {value} over the cards",
        rung.knob(model.backend),
    )


# A change whose predicted bill is not below this share of now frees nothing worth a relaunch.
FREES_SOMETHING = 0.98


def _needs_less(bill: MemoryBill | None, now: MemoryBill) -> bool:
    """Does a change's predicted bill need less than now (unknown: assume it might)?"""
    return bill is None or needed_bytes(bill) < needed_bytes(now)


def smallest_fitting(
    bill_for: Callable[[object], MemoryBill | None],
    fits: Callable[[MemoryBill], bool | None],
    param: str,
    current: object,
    values: list[object],
) -> tuple[object, MemoryBill | None, dict[str, object]]:
    """The estimator's solver under the wizard's budget, for a setting whose every step up frees more
    (--n-cpu-moe): bisect for the smallest value that fits; the largest when none does."""
    bills: dict[int, MemoryBill | None] = {}

    def bill_at(index: int) -> MemoryBill | None:
        if index not in bills:
            bills[index] = bill_for(values[index])
        return bills[index]

    top = len(values) - 1
    last = bill_at(top)
    if last is None or fits(last) is None:
        cautious = _cautious(param, current, values)
        return cautious, None, {param: cautious}
    if not fits(last):
        return values[top], last, {param: values[top]}
    lo, hi = 0, top  # values[hi] fits
    while lo < hi:
        mid = (lo + hi) // 2
        bill = bill_at(mid)
        if bill is not None and fits(bill):
            hi = mid
        else:
            lo = mid + 1
    return values[lo], bill_at(lo), {param: values[lo]}


# The buffers a start-up stage allocates.
_STAGE_PARTS: dict[str, tuple[str, ...]] = {"load_weights": ("weights",), "kv_cache": ("kv_cache", "compute")}


def failed_part(obs: Observation, now: MemoryBill | None) -> str | None:
    """The buffer whose allocation failed, where the run printed the bytes it asked for and a buffer of
    the stage it failed at is predicted (`now`, the run's bill) at that size (within 3%): the KV cache of
    a context too long."""
    asked = obs.figures.get("failed_alloc")
    parts = _STAGE_PARTS.get(obs.failure_stage or "", ())
    if not asked or now is None:
        return None
    return next((part for part in parts if abs(part_bytes(now, part) - asked) <= 0.03 * asked), None)


def shrinking_the_failed(
    model: MemoryModel, profile: Profile, obs: Observation, options: list[Option]
) -> list[Option]:
    """Nothing fits in one step: a first step leaves the buffer that failed smaller, or the relaunch fails
    asking for the same bytes (QA 31 W3: --parallel 4 -> 3 beside one shared KV cache of 2 GiB)."""
    now = model.predict(profile)
    part = failed_part(obs, now)
    if part is None or now is None:
        return options
    before = part_bytes(now, part)
    return [
        option
        for option in options
        if option[2] is None or part_bytes(option[2], part) < FREES_SOMETHING * before
    ]


def first_of_a_pair(model: MemoryModel, profile: Profile, options: list[Option]) -> Proposal | None:
    """Nothing fits in one step: the first change, in the ladder's order, that another change after it
    makes fit. "The change that frees most" cut a 16-slot server's context to 4096 (256 tokens a slot)
    where fewer slots and a shorter context left every slot more (QA 12). The first change frees something
    itself: one that frees nothing is a relaunch spent for no gain (QA 22: parallel 2 -> 1 in one unified
    cache of the same context, whose bill grew)."""
    now = model.predict(profile)
    seconds = [proposal for _, proposal, bill in options if bill is not None and proposal.then is None]
    firsts = [
        proposal
        for _, proposal, bill in options
        if proposal in seconds and (now is None or needed_bytes(bill) < FREES_SOMETHING * needed_bytes(now))
    ]
    for first in firsts:
        for second in seconds:
            if second.param == first.param:
                continue
            both = model.predict(changed(profile, [(first.param, first.to), (second.param, second.to)]))
            if both is not None and model.fits(both):
                first.why += f" — not enough alone; a change of {second.param} after it makes it fit"
                return first
    return None


def missing_packages(backend: Backend, stage: str) -> list[str]:
    """The stage's changes this engine has but cannot make here, for want of a package (QA 11: "no setting
    left" where quantizing at load needed bitsandbytes, which is not installed)."""
    found = [
        f"{rung.label} (needs {rung.needs})"
        for rung in backend.ladder.get(stage, ())
        if rung.needs and not backend.importable(rung.needs)
    ]
    needs = [backend.missing_package("quant", value) for value in backend.quant_order if value is not None]
    quantizes = any(rung.param == "quant" for rung in backend.ladder.get(stage, ()))
    if quantizes and needs and all(needs):  # every quantization at load lacks its package
        packages = sorted({package[1] for package in needs if package})
        found.insert(0, f"a quantization at load (needs {', '.join(packages)})")
    return found


def no_setting_left(
    backend: Backend, stage: str, skipped: set[str], runs: bool, rolled_back: set[str]
) -> str:
    """Why the ladder ends: nothing left that frees memory, what the user kept, what a package would allow."""
    ladder = "" if runs else f" on the {stage} ladder"  # no stage failed: it runs (over its budget)
    missing = missing_packages(backend, stage)
    return (
        f"no setting left{ladder} that this backend can change and that frees memory"
        + left_alone_words(skipped, rolled_back)
        + (f"; not installed here: {'; '.join(missing)}" if missing else "")
    )


class Proposer:
    """Picks the next single change for a failed run; what it concludes otherwise goes to `findings`."""

    def __init__(
        self,
        model: MemoryModel,
        findings: Findings,
        ladders: dict[str, tuple[Rung, ...]] | None = None,
    ) -> None:
        self.model = model
        self.backend: Backend = model.backend
        self.findings = findings
        self.ladders = ladders  # a hand-made ladder (tests, experiments) instead of the backend's
        self._printed_flash: bool | None = None  # flash attention as the last run's log printed it

    def rungs(self, stage: str, cause: str | None = None) -> list[Rung]:
        return list(self.ladders.get(stage, ())) if self.ladders else self.backend.rungs(stage, cause)

    def candidates(self, rung: Rung, current: object, profile: Profile) -> list[object]:
        if rung.param == "context":
            values = candidates(rung, current, profile, 0)
            useful, now = useful_context(self.model, profile), whole_or_none(current)
            # past what it can use: down to that, alone, at no cost (_free_context_move)
            return [useful] if useful and now and now > useful else values
        if rung.param == "n_cpu_moe":
            return self._expert_layers(profile, current)
        if rung.param == "cpu_offload":
            return _runnable_here(self.model, rung.param, self._offload_gib(profile, current))
        if rung.param == "kv_cache_memory":  # never below one request: the engine would refuse to start
            sizes = smaller_kv_bytes(profile)
            return [
                v
                for v in sizes
                if self.model.holds_one_request(changed(profile, [(rung.param, v)])) is not False
            ]
        n_layers = 0
        if rung.param == "gpu_layers" and str(current) not in ("0", "None"):
            n_layers = int(getattr(self.model.info(profile.model), "n_layers", 0) or 0)
        return _runnable_here(self.model, rung.param, candidates(rung, current, profile, n_layers))

    def _expert_layers(self, profile: Profile, current: object) -> list[object]:
        """--n-cpu-moe values above the current one, for a MoE model whose experts are not all on the
        host already (--cpu-moe); nothing for a dense model."""
        info = self.model.info(profile.model)
        if info is None or not getattr(info, "is_moe", False):
            return []
        try:
            if switch(current_value(profile, "cpu_moe") or False) is True:
                return []
        except VramtuiError:
            pass
        now = whole_or_none(current) or 0
        return list(range(now + 1, int(getattr(info, "n_layers", 0) or 0) + 1))

    def _offload_gib(self, profile: Profile, current: object) -> list[object]:
        """Whole GiB of weights to keep in host RAM (vLLM's --cpu-offload-gb), above the current value
        and up to what the card holds of the weights now."""
        bill = self.model.predict(profile)
        if bill is None:
            return []
        try:
            now = gib("cpu_offload", current or 0)
        except (VramtuiError, ValueError):
            return []
        on_card = bill.get("weights", self.model.place) / GIB
        return [float(v) for v in range(int(now) + 1, int(now + on_card) + 2)]

    def propose(self, profile: Profile, obs: Observation, skipped: set[str]) -> Proposal | None:
        """The next single change, or None (no memory setting can help: see the findings)."""
        named = self._named_fix(profile, obs, skipped)
        if named is not None:
            return named
        stage = self.failing_stage(obs)
        if stage is None or self._no_room(obs):
            return None
        floor = engine_alone_over(self.model, obs, profile)
        if floor is not None:
            self.findings.advice, self.findings.stop_reason = floor
            return None
        rungs = self.rungs(stage, obs.cause)
        if skipped:
            rungs = [r for r in rungs if r.move == "advice" or r.param not in skipped]
        if outright_too_small(profile, obs) and self.model.holds_one_request(profile) is False:
            return outright_proposal(self, profile, rungs)
        if stage == "inference":
            return self._inference_proposal(profile, rungs, obs)
        free = _free_context_move(self, profile, rungs, obs)
        if free is not None:  # QA 5: 262144 -> 65536 where 131072 (trained) with a q8_0 cache fitted
            return free
        # When the cache does not fit because the weights take the room, a smaller file helps too:
        # after its own rungs, the kv_cache ladder looks at the weights' rungs (one change still).
        fallback = self.backend.rungs("load_weights") if stage == "kv_cache" and not self.ladders else []
        seen = {(r.param, r.move) for r in rungs}
        fallback = [r for r in fallback if (r.param, r.move) not in seen and r.param not in skipped]
        options: list[Option] = []
        idle: list[Proposal] = []  # changes that free nothing alone, but may beside others (fewer slots)
        for rung in [*rungs, *fallback]:
            if rung.move == "advice":
                continue
            if rung.param == "tensor_split":  # several GPUs: from the per-device bill the run printed
                moved = split_proposal(self.model, profile, rung, obs)
                if moved is not None:
                    return moved
                continue
            proposal, bill = self._best_value(profile, rung, obs)
            if proposal is None:
                idle.extend(_idle_move(self, profile, rung))
                continue
            if bill is not None and self.model.fits(bill):
                return proposal
            options.append((rung, proposal, bill))
        if _out_of_reach(self, profile, stage, options, skipped, obs, idle):
            return None
        chosen = self._best_of(profile, shrinking_the_failed(self.model, profile, obs, options))
        if chosen is not None:
            return chosen
        self.findings.advice = [
            *_load_peak_words(self.model, profile),
            *[f"{r.label}: {r.cost}" for r in rungs if r.move == "advice"],
        ] or self.findings.advice
        self.findings.stop_reason = no_setting_left(
            self.backend, stage, skipped, obs.runs_over_budget, self.findings.rolled_back
        )
        return None

    def _no_room(self, obs: Observation) -> bool:
        """The engine's own footprint (its baseline, measured) already takes the whole budget: no setting
        of the model's buffers can make room, so the wizard stops and says so."""
        model, room = self.model, self.model.room()
        # a server that came up (an attached one over its budget) shows its footprint is not the whole
        # story: only a start that failed is stopped here
        if room is None or room > 0 or obs.works or obs.ready or obs.runs_over_budget:
            return False
        if STAGE_INDEX.get(obs.stage or "", 0) > STAGE_INDEX["load_weights"] and obs.held_bytes():
            return False  # it held its weights and more under this budget: it came up in it (QA 26 D4)
        how = "measured on its binary" if model.baseline_measured else f"{self.backend.name}'s assumed figure"
        self.findings.advice = [
            f"the engine alone takes about {model.baseline() / MIB:.0f} MiB before any model buffer ({how}), "
            f"more than the {(model.budget or 0) / MIB:.0f} MiB budget: raise the memory budget "
            f"{BUDGET_WHERE}"
        ]
        self.findings.stop_reason = (
            "the budget is below the engine's own footprint: raise the memory budget, no engine setting helps"
        )
        return True

    def _named_fix(self, profile: Profile, obs: Observation, skipped: set[str]) -> Proposal | None:
        """The change the engine's own failure message names, with the figure it gives (its Backend's
        named_fix): the first move, before any ladder, unless the user keeps that setting."""
        fix = self.backend.named_fix
        if fix is None or self.ladders or obs.works:
            return None
        run = FailedRun(
            failure=obs.failure,
            cause=obs.cause,
            stage=obs.failure_stage or obs.stage,
            figures=dict(obs.engine),
            params=dict(profile.params),
            peak_bytes=int(obs.peak_mib * MIB) if obs.peak_mib else None,
            weights_rss_bytes=int(obs.weights_rss_mib * MIB) if obs.weights_rss_mib else None,
        )
        named = fix(run)
        if named is None or named[0] in skipped:
            return None
        param, value, why = named
        current = current_value(profile, param)
        if same_value(value, current):
            return None
        label = f"the change {self.backend.name}'s own message names"
        return Proposal(param, current, value, why, label, self.backend.knob_words(param))

    def _best_of(self, profile: Profile, options: list[Option]) -> Proposal | None:
        """Nothing fits in one step: the change that frees most (then look again), else an unpredicted one."""
        if not options:
            return None
        paired = first_of_a_pair(self.model, profile, options)
        if paired is not None:
            return paired
        now = self.model.predict(profile)
        # Changes the arithmetic says free nothing are no step at all.
        predicted = [
            (needed_bytes(bill), proposal)
            for _, proposal, bill in options
            if bill is not None and (now is None or needed_bytes(bill) < FREES_SOMETHING * needed_bytes(now))
        ]
        if predicted:
            _, proposal = min(predicted, key=lambda option: option[0])
            proposal.why += " — not enough alone; the next step continues"
            return proposal
        return next((proposal for _, proposal, bill in options if bill is None), None)

    def _inference_proposal(self, profile: Profile, rungs: list[Rung], obs: Observation) -> Proposal | None:
        """A request failed on a running server: the start-up arithmetic does not see a request's peak,
        so each rung halves its value, and the saved request (when given) tells whether it now passes.
        A value the arithmetic says frees nothing (a batch above the micro-batch) is no step."""
        now = self.model.predict(profile)
        for rung in rungs:
            if rung.move == "advice":
                continue
            if rung.param == "parallel" and self.backend.kv_grows_per_request:
                continue  # the request failed alone: fewer slots free nothing it used
            current = current_value(profile, rung.param)
            values = self.candidates(rung, current, profile)
            if now is not None:  # a value the arithmetic says frees nothing is no step
                values = [v for v in values if _needs_less(self._with(profile, {rung.param: v}), now)]
            if not values:
                continue
            value = _cautious(rung.param, current, values)
            why = _inference_why(obs, rung)
            return Proposal(rung.param, current, value, why, rung.label, rung.knob_words(self.backend))
        self.findings.advice = [f"{r.label}: {r.cost}" for r in rungs if r.move == "advice"]
        self.findings.stop_reason = "no setting left on the inference ladder that this backend can change"
        return None

    def failing_stage(self, obs: Observation) -> str | None:
        """The ladder to walk, or None with the reason in the findings (not a memory problem ...)."""
        findings = self.findings
        if obs.ready and obs.smoke_ok and obs.replay_ok is False:
            if "context_too_long" in str(obs.failure or ""):
                findings.advice = [
                    "the saved request is longer than the context: raise context and free the memory "
                    "elsewhere (KV cache type, concurrency), or shorten the input",
                    *obs.advice,
                ]
                findings.stop_reason = (
                    "the saved request does not fit the context: lowering memory will not help"
                )
                return None
            # It starts and answers a short request, but the long one fails: the inference ladder.
            return "inference"
        if obs.ready and obs.smoke_ok is False:
            if _is_memory(obs.failure):
                return "inference"
            findings.advice = [obs.message or "the server is up but the smallest request failed", *obs.advice]
            findings.stop_reason = "the server came up but did not answer; not a memory problem"
            return None
        failure = obs.failure or ""
        if _no_room_to_start(findings, obs):
            return None
        if not _is_memory(failure):
            # the diagnosis' bare "read the first error line" is the wizard's own word for "other" already
            # (QA 29 Q11: said twice in the wizard pane)
            said = NOT_MEMORY.get(failure, NOT_MEMORY["other"])
            findings.advice = [said, *(line for line in obs.advice if line != READ_THE_LINE)]
            findings.stop_reason = (
                f"{failure or 'an unknown failure'}: not a memory problem, no memory ladder helps"
            )
            return None
        stage = obs.failure_stage or obs.stage
        if stage not in ("load_weights", "kv_cache", "inference"):
            stage = stage_from_facts(obs)
        findings.failing_stage = stage
        return stage

    def _with(self, profile: Profile, changes: dict[str, object]) -> MemoryBill | None:
        return self.model.predict(changed(profile, changes.items()))

    def _flash_in_effect(self, profile: Profile) -> bool:
        """Flash attention as the last run had it: what the engine printed, else what its setting means."""
        if self._printed_flash is not None:
            return self._printed_flash
        return self.backend.flash_attn_effective(current_value(profile, "flash_attn"))

    def _pick_value(
        self, profile: Profile, rung: Rung, current: object, values: list[object]
    ) -> tuple[object, MemoryBill | None, dict[str, object]]:
        """The least drastic value that should fit (else the most drastic); cautious without arithmetic."""
        param = rung.param
        if param in _ASCENDING:
            return smallest_fitting(
                lambda value: self._with(profile, {param: value}), self.model.fits, param, current, values
            )
        best: tuple[object, MemoryBill | None, dict[str, object]] | None = None
        flash_off = not self._flash_in_effect(profile)
        for value in values:
            changes: dict[str, object] = {param: value}
            if param == "kv_dtype" and self.backend.needs_flash_attn_for(value) and flash_off:
                changes["flash_attn"] = switched_on(current_value(profile, "flash_attn"))
            bill = self._with(profile, changes)
            fits = self.model.fits(bill) if bill is not None else None
            if fits is None:
                # No arithmetic (no estimate, or no budget known): a cautious step, and the why says so.
                cautious = _cautious(param, current, values)
                return cautious, None, {**changes, param: cautious}
            if fits:
                return value, bill, changes
            # none fits yet: the one that needs least (a lower quantization's file is not always smaller)
            if best is None or needed_bytes(bill) < needed_bytes(best[1]):  # type: ignore[arg-type]
                best = (value, bill, changes)
        assert best is not None
        return best

    def _best_value(
        self, profile: Profile, rung: Rung, obs: Observation
    ) -> tuple[Proposal | None, MemoryBill | None]:
        """This rung's proposal at the value `_pick_value` chose (flash attention first when needed)."""
        param = rung.param
        current = current_value(profile, param)
        if param == "context" and not whole_or_none(current):
            current = context_run(self.model, profile, obs)
        self._printed_flash = _printed_flash(obs)
        values = self.candidates(rung, current, profile)
        if param == "flash_attn" and self._flash_in_effect(profile):
            values = []  # the engine said it is on already: proposing it would change nothing
        values = [v for v in values if not same_value(v, current)]  # never the value the run has
        if not values:
            return None, None
        before = self.model.predict(profile)
        value, bill, changes = self._pick_value(profile, rung, current, values)
        if before is not None and bill is not None and needed_bytes(bill) >= 0.99 * needed_bytes(before):
            # the estimate says it frees nothing (llama-server's slots share one KV cache of --ctx-size
            # cells): no relaunch is spent on it
            return None, None
        predicted = needed_bytes(bill) / MIB if bill is not None else None
        why = self._why(rung, obs, value, before, bill, profile)
        if "flash_attn" in changes and param == "kv_dtype":
            return self._flash_first(profile, rung, obs, current, value, before, bill), bill
        return Proposal(
            param, current, value, why, rung.label, rung.knob_words(self.backend), predicted
        ), bill

    def _flash_first(
        self,
        profile: Profile,
        rung: Rung,
        obs: Observation,
        current: object,
        value: object,
        before: Any,
        planned: MemoryBill | None,
    ) -> Proposal:
        """llama.cpp refuses a quantized V cache without flash attention: that step comes first, alone.
        Its why says what it does itself (what flash attention on frees), then the step it prepares; its
        prediction is the plan's (both steps), which is what decides that the plan fits."""
        flash_rung = next((r for r in self.rungs("kv_cache") if r.param == "flash_attn"), rung)
        alone = self._with(profile, {"flash_attn": True})
        why = (
            f"flash attention first: llama.cpp needs it for a quantized V cache, which comes next "
            f"(the KV cache type {current} → {value}). "
            + self._why(flash_rung, obs, True, before, alone, profile)
        )
        if planned is not None:
            why += f"; then with kv_dtype = {value} too it needs about {needed_bytes(planned) / MIB:.0f} MiB"
        predicted = needed_bytes(planned) / MIB if planned is not None else None
        label = "flash attention on (needed for a quantized KV cache)"
        now = current_value(profile, "flash_attn")
        return Proposal(
            "flash_attn", now, switched_on(now), why, label,
            self.backend.knob("flash_attn"), predicted, then=(rung.param, value),
        )  # fmt: skip

    def _why(
        self,
        rung: Rung,
        obs: Observation,
        value: object,
        before: MemoryBill | None,
        after: MemoryBill | None,
        profile: Profile | None = None,
    ) -> str:
        model = self.model
        room = model.room()
        parts = [
            how_it_failed(obs, self.findings.failing_stage or obs.failure_stage or obs.stage or "start-up")
        ]
        if after is not None and room is not None:
            need = needed_bytes(after)
            verdict = "fits" if need <= room * model.margin else "still does not fit"
            shown = Path(str(value)).name if rung.param == "model" else value_word(value)
            if before is not None:
                parts.append(f"as it is it needs about {needed_bytes(before) / MIB:.0f} MiB")
            parts.append(
                f"~{room / MIB:.0f} MiB of the {(model.budget or 0) / MIB:.0f} MiB budget are left for buffers; "
                f"with {rung.param} = {shown} it needs about {need / MIB:.0f} MiB "
                f"({after.describe(model.place)}) — {verdict} with the {round((1 - model.margin) * 100)}% margin"
                + (
                    above_estimate_line(
                        self.backend, need, room, model.margin, bool(profile and profile.memory_budget)
                    )
                    if need <= room * model.margin
                    else ""
                )
            )
        elif after is None:
            parts.append(f"no estimate ({model.why_unavailable or 'no budget known'}): a cautious step")
        if rung.param == "n_cpu_moe" and before is not None and after is not None and profile is not None:
            parts.append(experts_moved(self.model, profile, value, before, after))
        useful = (
            useful_context(self.model, profile) if profile is not None and rung.param == "context" else None
        )
        if useful and value == useful:
            trained = getattr(self.model.info(profile.model), "max_context", 0) if profile else 0
            parts.append(
                f"cost: nothing: the model was trained for {trained:,} tokens per sequence, and the engine caps "
                "each sequence there (a longer context only holds memory)"
            )
        elif rung.cost:
            parts.append(f"cost: {rung.cost}")
        shares = slot_share_words(model, profile, value) if profile and rung.param == "context" else None
        return "; ".join([*parts, shares] if shares else parts)


def _load_peak_words(model: MemoryModel, profile: Profile) -> list[str]:
    """The estimate's own words where its load does not fit the budget whatever the settings (the checkpoint
    mapped beside the weights it fills): by how much to raise it (QA 38 F7: only "a smaller model")."""
    est = model.estimate_of(profile)  # None where the estimator cannot size it (its reason kept there)
    peak = getattr(est, "load_peak_bytes", None)
    if not peak or not model.budget:
        return []
    room = model.budget - model.baseline()  # beside the engine's own share, as the estimate takes it
    if peak <= room:
        return []
    short = -(-(peak - room) // MIB)
    return [
        f"while it loads it holds about {peak / MIB:.0f} MiB ({est.load_peak_words}: the file beside the weights "
        f"it fills), more than the {room / MIB:.0f} MiB the budget leaves beside the engine: no setting "
        f"changes that; raise the memory budget {BUDGET_WHERE} to at least {model.budget // MIB + short} MiB"
    ]


def _runnable_here(model: MemoryModel, param: str, values: list[object]) -> list[object]:
    """The values the engine can run here: with no GPU, not what its CPU build cannot (QA 37 F4: vLLM's
    on-the-fly fp8 crashed the relaunch at load), nor an offload to the host the run is on already."""
    if not model.host:
        return values
    if param == "cpu_offload":  # QA 38 F7: on a CPU-only run the weights are in host RAM already
        return []
    refused = {value for name, value in model.backend.cpu_refused if name == param}
    return [value for value in values if value not in refused]


def _out_of_reach(
    proposer: Proposer,
    profile: Profile,
    stage: str,
    options: list[Option],
    skipped: set[str],
    obs: Observation,
    idle: list[Proposal],
) -> bool:
    """Not even every change on the ladder at once makes room (reach.out_of_reach): stop, and say why.
    Every change counts at once, those that free nothing alone too (QA 22: fewer slots free their
    threads' stacks only beside a shorter context; "not even all at once" left them out). Only for a
    start that failed: a server that came up (an attached one over its budget) shows the estimate's
    footprint is not the whole story."""
    if obs.works or obs.ready or obs.runs_over_budget:
        return False
    moves = [proposal for _, proposal, bill in options if bill is not None]
    if len(moves) < len(options):  # a move with no arithmetic may still help
        return False
    found = out_of_reach(
        proposer.model, profile, stage, [*moves, *idle], skipped, proposer.findings.rolled_back
    )
    if found is None:
        return False
    proposer.findings.advice, proposer.findings.stop_reason = found
    return True


def _idle_move(proposer: Proposer, profile: Profile, rung: Rung) -> list[Proposal]:
    """The rung's furthest value, for the all-at-once check only (no step is made of it alone)."""
    current = current_value(profile, rung.param)
    values = [v for v in proposer.candidates(rung, current, profile) if not same_value(v, current)]
    if not values or rung.param in ("model", "quant", "flash_attn"):  # files and switches: not a size
        return []
    return [Proposal(rung.param, current, values[-1], "", rung.label)]


def experts_moved(
    model: MemoryModel, profile: Profile, value: object, before: MemoryBill, after: MemoryBill
) -> str:
    """What --n-cpu-moe moves, and what each generated token then reads from host RAM."""
    place = model.place
    moved = max(0, before.get("weights", place) - after.get("weights", place))
    info = model.info(profile.model)
    used, experts = getattr(info, "n_experts_used", 0) or 0, getattr(info, "n_experts", 0) or 0
    said = f"the experts of the first {value} layers ({moved / MIB:.0f} MiB) go to host RAM"
    if used and experts and moved:
        said += (
            f"; with {used} of {experts} experts active per token, each token reads about "
            f"{moved * used / experts / MIB:.1f} MiB of them on the CPU"
        )
    return said
