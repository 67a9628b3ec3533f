"""What the wizard's moves can reach at best, before it spends a relaunch on one.

`engine_alone_over`: a server that runs over its budget where the engine itself (and, on the host, the
weights) already exceed it: no setting helps, a bigger budget or a smaller model does.
`useful_context`: the most context a run can use (the engine caps each sequence at the model's trained
length), so a context past it goes there first, at no cost. `out_of_reach`: when not even every move on
the ladder at once makes room by the estimate, no relaunch is spent on any of them (QA: two relaunches on
a context and a cache type that could not make room beside a model's weights, then a stop with no advice).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vramtui.core.backends.base import switch
from vramtui.core.estimate.accounting import accounting_for
from vramtui.core.launch.profile import BUDGET_WHERE, Profile
from vramtui.core.logs.advice import SHORT_SLOT_TOKENS
from vramtui.core.units import MIB, format_bytes, mib_figure
from vramtui.core.wizard.budget import (
    MemoryModel,
    changed,
    current_value,
    needed_bytes,
    slot_count,
    whole_or_none,
)
from vramtui.core.wizard.observe import Observation, part_bytes

if TYPE_CHECKING:
    from vramtui.core.memory.parts import MemoryBill
    from vramtui.core.wizard.proposal import Proposal


def useful_context(model: MemoryModel, profile: Profile) -> int | None:
    """The most context the run can use: the model's trained length per sequence (the engine caps each
    there), times the sequences where the context is the whole cache (llama.cpp's slots)."""
    trained = whole_or_none(getattr(model.info(profile.model), "max_context", None))
    if not trained:
        return None
    if accounting_for(model.backend.name).context_is_per_sequence:
        return trained
    return trained * slot_count(profile)


def long_request_note(model: MemoryModel, profile: Profile) -> str | None:
    """An engine whose KV cache grows with each request (transformers) starts and answers a short request
    under any context: a request of the whole context is what must fit (QA 31 W5: "runs" at 1 GiB with a
    131072 context, then a 4096-token request died of out-of-memory). None when it fits, or no arithmetic."""
    context = whole_or_none(current_value(profile, "context"))
    if not model.backend.kv_grows_per_request or not context:
        return None
    # one request, as the sentence says (QA 37 F7: 64 sequences' bill, 17.3 GiB, was said as one request's)
    one = changed(profile, [("parallel", 1)])
    bill, room = model.predict(one), model.room()
    if bill is None or room is None or needed_bytes(bill) <= room:
        return None
    largest = _largest_context(model, one, room, context)
    which = f"about {largest:,} tokens (context = {largest})" if largest else "none: even 256 tokens do not"
    return (
        f"it answers a short request, but its KV cache grows with each request: one of the whole context "
        f"({context:,} tokens) needs about {format_bytes(needed_bytes(bill), 1)}, more than the "
        f"{format_bytes(room, 1)} the budget leaves; the largest context that fits is {which}"
    )


def _largest_context(model: MemoryModel, profile: Profile, room: float, below: int, step: int = 256) -> int:
    """The largest context under `below`, in steps of `step` tokens, whose predicted bill fits `room`
    (bisected: the bill grows with the context); 0 when not even one step does."""

    from vramtui.core.estimate.estimator import largest_where

    def fits(steps: int) -> bool:
        bill = model.predict(changed(profile, [("context", steps * step)]))
        return bill is not None and needed_bytes(bill) <= room

    return max(0, largest_where(1, max(1, (below - 1) // step), fits)) * step


def slot_share_words(model: MemoryModel, profile: Profile, context: object) -> str | None:
    """Where the slots share the context (llama.cpp), what each gets after a context change: a user reads
    "4096" as a request's length, and it may be 256 tokens a slot."""
    value = whole_or_none(context)
    accounting = accounting_for(model.backend.name)
    if not value or accounting.context_is_per_sequence:
        return None
    slots = slot_count(profile)
    if slots < 2:
        return None
    if _unified(
        accounting, profile
    ):  # QA 16: "each of the 4 slots gets 128 tokens" of llama-server's one cache
        return f"the {slots} slots share one cache of {value:,} tokens: one request may use all of it"
    share = value // slots
    said = f"each of the {slots} slots gets {share:,} tokens of it"
    if share < SHORT_SLOT_TOKENS:
        said += ": hardly a short chat turn; fewer slots keep more for each"
    return said


def request_context(profile: Profile, context: int) -> int:
    """The most context one request gets: the whole context, unless the slots split it (llama-server with
    --parallel, a stream per slot): then a slot's share (QA 37 F2: the stress check sent 131048 tokens to
    slots of 32768, and every request was refused)."""
    accounting = accounting_for(profile.backend.name)
    if accounting.context_is_per_sequence or _unified(accounting, profile):
        return context
    return max(1, context // slot_count(profile))


def _unified(accounting: object, profile: Profile) -> bool:
    """One KV cache for every slot (as the estimator's accounting decides it): -kvu given, or llama-server's
    own choice when the profile leaves its slots to it."""
    said = profile.params.get("kv_unified")
    if said not in (None, ""):
        return switch(said) is True
    return bool(getattr(accounting, "unified_kv", False)) and "parallel" not in profile.params


def left_alone_words(skipped: set[str], rolled_back: set[str]) -> str:
    """ " (skipped: a; tried and rolled back: b)": what the user kept apart from what a step undid (QA 31 W3:
    a parallel tried and rolled back was called skipped)."""
    kept, undone = sorted(skipped - rolled_back), sorted(skipped & rolled_back)
    parts = [f"skipped: {', '.join(kept)}"] if kept else []
    parts += [f"tried and rolled back: {', '.join(undone)}"] if undone else []
    return f" ({'; '.join(parts)})" if parts else ""


def out_of_reach(
    model: MemoryModel,
    profile: Profile,
    stage: str,
    moves: list[Proposal],
    skipped: set[str],
    rolled_back: frozenset[str] | set[str] = frozenset(),
) -> tuple[list[str], str] | None:
    """(advice, stop reason) when every move at once still needs more than the room, by the estimate
    itself and not its safety margin (a step within the margin may still run); None when they may fit."""
    from vramtui.core.wizard.proposal import value_word

    if not moves:
        return None
    combined = changed(
        profile, [pair for p in moves for pair in ((p.param, p.to), *([p.then] if p.then else []))]
    )
    bill, room = model.predict(combined), model.room()
    if bill is None or room is None or needed_bytes(bill) <= room:
        return None
    # each setting once, at its last value (QA 26: "flash_attn on, context 512, flash_attn on")
    last = {p.param: value_word(p.to) for p in moves}
    changes = ", ".join(f"{param} {value}" for param, value in last.items())
    names = ", ".join(sorted(set(skipped) - set(rolled_back)))  # a change rolled back did not help
    kept = f", or let the wizard change what you skipped ({names})" if names else ""
    budget, baseline = model.budget or 0, model.baseline()
    if (
        room < budget - baseline
    ):  # a failed run's own allocation bounded it (QA 27 N4: "the 0 MiB ... 700 - 480")
        where = f"the {mib_figure(room / MIB)} MiB a failed run left room for (it could allocate no more)"
    elif room > budget - baseline + MIB:  # a run measured the engine under its assumed share (QA 31 W8)
        where = (
            f"the {mib_figure(room / MIB)} MiB the {budget / MIB:.0f} MiB budget left beside what the engine "
            "held in the last run"
        )
    else:
        where = (
            f"the {room / MIB:.0f} MiB the {budget / MIB:.0f} MiB budget leaves beside the engine's own "
            f"{baseline / MIB:.0f} MiB"
        )
    weights = bill.get("weights", model.place)
    if weights > room:  # QA 35 F4: the sentence quoted the whole bill where the weights alone said it
        said = f"the weights alone take {mib_figure(weights / MIB)} MiB, more than {where}: no change on the {stage} ladder ({changes}) makes room for them"
    else:
        said = (
            f"even with every change on the {stage} ladder at once ({changes}) it needs about "
            f"{mib_figure(needed_bytes(bill) / MIB)} MiB, more than {where} (the weights take "
            f"{mib_figure(weights / MIB)} MiB)"
        )
    advice = [
        said,
        f"raise the memory budget {BUDGET_WHERE}, or use a smaller quantization or a smaller model{kept}",
    ]
    reason = "no change on the ladder makes it fit, not even all of them at once" + left_alone_words(
        set(skipped), set(rolled_back)
    )
    return advice, reason


def engine_alone_over(model: MemoryModel, obs: Observation, profile: Profile) -> tuple[list[str], str] | None:
    """(advice, stop reason) for a server that runs over its budget (an attached one) when what no engine
    setting shrinks is already over it: the measured peak less the model's buffers by the estimate (the
    engine itself), plus, under a host budget, the weights (a GPU budget can move layers to the host).
    QA: a 55 MiB server under a 20 MiB budget was told "a smaller model: a less capable model"."""
    if not obs.runs_over_budget or not model.budget or obs.peak_mib is None:
        return None
    bill = model.predict(profile)
    if bill is None:
        return None
    buffers = needed_bytes(bill)
    engine = max(int(obs.peak_mib * MIB) - buffers, 0)
    weights = part_bytes(bill, "weights") if model.host else 0
    floor = engine + weights
    if floor <= model.budget:
        return None
    held = f"{engine / MIB:.0f} MiB is the engine itself" + (
        f" and {weights / MIB:.0f} MiB the weights" if weights else ""
    )
    advice = [
        f"of the {obs.peak_mib:.0f} MiB it runs at, the model's buffers take about {buffers / MIB:.0f} MiB by the "
        f"estimate: {held}, which no engine setting shrinks",
        f"give it a budget of at least {floor / MIB * 1.1:.0f} MiB, or use a smaller model or quantization",
    ]
    held = "the engine itself and its weights hold" if weights else "the engine itself holds"
    return (
        advice,
        f"the {model.budget / MIB:.0f} MiB budget is below what {held}, which no engine setting shrinks",
    )


def _slots_cost(fewer: MemoryBill | None, now: MemoryBill | None) -> str:
    """What fewer slots cost: the KV cache is the same cells, but each slot's stream attends over more of them
    (QA 38 F5: "in no more memory" where the prediction rose 281 -> 310 MiB and the engine's compute 164 ->
    200)."""
    if fewer is None or now is None:
        return ""
    more = (needed_bytes(fewer) - needed_bytes(now)) / MIB
    if more < 1:
        return " in no more memory"
    return f" for about {more:.0f} MiB more (the same KV cache; each slot's attention spans more of it)"


def fewer_slots_move(model: MemoryModel, profile: Profile, skipped: set[str]) -> Proposal | None:
    """After a run that works, where the slots split one context (llama-server with --parallel) and each got
    under a short chat turn: fewer slots, at the same context, so that each gets more in the same memory.
    QA 36 F4: "context 32768 -> 1024" ran, with 256 tokens for each of 4 slots, and was called done."""
    from vramtui.core.wizard.proposal import Proposal

    context = whole_or_none(current_value(profile, "context"))
    if not context or "parallel" in skipped or model.backend.knob("parallel") is None:
        return None
    share, slots = request_context(profile, context), slot_count(profile)
    if share == context or share >= SHORT_SLOT_TOKENS:  # one request may use it all, or a chat turn fits
        return None
    fewer = max(1, min(slots - 1, context // SHORT_SLOT_TOKENS))
    bill, now = model.predict(profile.with_param("parallel", fewer)), model.predict(profile)
    why = (
        f"each of the {slots} slots got {share:,} tokens of the {context:,}-token context, hardly a "
        f"short chat turn: the slots split one context, so {fewer} slot{'s' if fewer > 1 else ''} "
        f"get{'' if fewer > 1 else 's'} {context // fewer:,} tokens each{_slots_cost(bill, now)}"
    )
    return Proposal(
        "parallel",
        current_value(profile, "parallel"),
        fewer,
        why,
        "fewer slots (more context for each)",
        model.backend.knob_words("parallel"),
        needed_bytes(bill) / MIB if bill is not None else None,
    )
