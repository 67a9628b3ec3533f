"""Verifying one applied step: did the change take effect, did it get further, did memory move?

A change the engine never saw (a flag overridden by extra_args, a knob the launcher could not pass,
a log that shows the old value) is `not_applied`: the loop stops there instead of walking further
down the ladder on a setting that is not reaching the engine.
"""

from __future__ import annotations

from vramtui.core.backends import Backend, kv_dtype_name, switch
from vramtui.core.launch.profile import Profile
from vramtui.core.memory.parts import LABELS
from vramtui.core.units import MIB, mib_figure
from vramtui.core.wizard.budget import MemoryModel, current_value, needed_bytes, whole_or_none
from vramtui.core.wizard.observe import BUFFER_PARTS, Observation, part_bytes
from vramtui.core.wizard.proposal import Proposal
from vramtui.core.wizard.propose import quant_of


def verify(
    model: MemoryModel,
    proposal: Proposal,
    before: Observation | None,
    after: Observation,
    before_profile: Profile,
    after_profile: Profile,
) -> tuple[str, list[str]]:
    """Did the change take effect, did it get further, did the memory move as predicted, does it answer?"""
    notes: list[str] = []
    applied, reason = took_effect(model, proposal, before, after, before_profile, after_profile)
    if not applied:
        notes.append(f"the change did not take effect: {reason}")
        return "not_applied", notes
    if reason:
        notes.append(reason)
    if proposal.param == "model":
        expected = _file_type_word(after_profile, proposal.to)
        seen = after.facts.get("file_type")
        if seen and expected:
            notes.append(f"quantization confirmed in the log: file type {seen}")
    if before is not None and before.peak_mib and after.peak_mib:
        notes.append(_peaks(before, after))
    said = predicted_against_printed(proposal, after)
    if said:
        notes.append(said)
    if after.works:
        notes.append("it runs: the smallest chat request answered")
        speed = speed_note(proposal, before, after)
        if speed:
            notes.append(speed)
        if after.replay_ok:
            notes.append("the saved failing request now passes")
        if after.warnings:
            notes.append("warnings: " + "; ".join(after.warnings[:3]))
        return "works", notes
    if after.ready and after.smoke_ok is False:
        notes.append("the server came up but the smallest chat request failed")
    if after.ready and after.smoke_ok and after.replay_ok is False:
        notes.append(f"the saved request still fails: {after.replay_meaning or after.failure}")
    return _progress(proposal, before, after, notes)


# Rungs that buy memory with speed: their verification says what generation measured.
SPEED_COST_PARAMS = frozenset({"n_cpu_moe", "gpu_layers", "cpu_offload"})


def speed_note(proposal: Proposal, before: Observation | None, after: Observation) -> str:
    """The measured generation speed after a change that costs speed, against the run before it."""
    if proposal.param not in SPEED_COST_PARAMS or not after.tokens_per_s:
        return ""
    now = after.tokens_per_s
    said = f"generation measured at {now:.1f} tokens/s with {proposal.param} = {proposal.to}"
    was = before.tokens_per_s if before is not None else None
    if not was:
        return said + " (the run before did not answer, so no speed to compare with)"
    change = (now - was) / was * 100
    return said + f", against {was:.1f} tokens/s before ({change:+.0f}%)"


ASKS_LESS = "same stage, but it asks for less"
PREPARES = "prepares the next step"


def outcome_shade(outcome: str, notes: object) -> str:
    """ "progress" told apart by what its verification found: `asks_less` (the same stage, asking for less)
    or `prepared` (a step that frees nothing itself): one name wherever a step is shown (QA 31 W9: the CLI
    said "asks for less", the export and the TUI "got further"). The record keeps "progress"."""
    if outcome != "progress":
        return outcome
    said = [str(note) for note in notes or ()] if isinstance(notes, list | tuple) else []
    if any(note.startswith(ASKS_LESS) for note in said):
        return "asks_less"  # not "got further": it stopped where it stopped before (QA 27 N5)
    if any(note.startswith(PREPARES) for note in said):
        return "prepared"  # flash attention before a quantized V cache frees nothing (QA 28)
    return outcome


def _progress(
    proposal: Proposal, before: Observation | None, after: Observation, notes: list[str]
) -> tuple[str, list[str]]:
    """A run that still fails: further, less far, or asking for less than before?"""
    if before is None:
        return "progress", notes
    if proposal.then is not None:
        # A prerequisite (flash attention before a quantized V cache): it frees nothing by itself.
        notes.append(f"{PREPARES}: {proposal.then[0]} → {proposal.then[1]}")
        return "progress", notes
    if after.reached > before.reached:
        notes.append(f"got further: now fails at {after.failure_stage or after.stage}")
        return "progress", notes
    if after.reached < before.reached:
        notes.append(f"got less far than before: fails at {after.failure_stage or after.stage}")
        return "worse", notes
    if after.allocated_bytes() < before.allocated_bytes():
        now, then = after.allocated_bytes() / MIB, before.allocated_bytes() / MIB
        # decimals where whole MiB would read alike (QA 27 N5: "25 MiB instead of 25 MiB")
        digits = 1 if round(now) == round(then) else 0
        notes.append(f"{ASKS_LESS}: {now:.{digits}f} MiB instead of {then:.{digits}f} MiB")
        return "progress", notes
    # Up and answering both times, judged by its sampled peak (an attached server over the budget) with
    # no sizes printed: the peak is the memory it asks for. A run stopped at the budget is not this.
    served = before.smoke_ok and after.smoke_ok and not after.has_sizes
    if served and before.peak_mib and after.peak_mib and after.peak_mib < before.peak_mib:
        notes.append("it still answers, and its peak fell (the figures above): over the budget by less")
        return "progress", notes
    notes.append("fails at the same place asking for no less memory")
    return "no_progress", notes


def _echoed(
    proposal: Proposal, before: Observation | None, after: Observation, profile: Profile
) -> tuple[bool, str] | None:
    """What the engine said about the setting itself (n_ctx, KV type, flash attention, file type)."""
    facts = after.facts
    param, value = proposal.param, proposal.to
    if param == "context" and "n_ctx" in facts:
        # Ollama's runner gets the context times its parallel requests (its `--parallel`, when printed).
        slots = int(after.engine.get("runner_parallel", 1) or 1)
        backend = profile.backend
        parallel = whole_or_none(current_value(profile, "parallel")) or 0  # -1, unset: the engine's auto
        streams = parallel if parallel > 0 else backend.parallel_auto_slots or 1
        printed = backend.context_as_printed(int(value) * slots, streams)  # type: ignore[call-overload]
        # the engine's own word for it where it has one (QA 29: "n_ctx" in a vLLM step: max-model-len)
        word = dict(backend.setting_words).get("context", "ctx")
        word = "n_ctx" if word == "ctx" else word
        if int(facts["n_ctx"]) not in printed:
            overridden = overridden_by_extra(profile, profile.backend, param)
            return False, (
                f"asked for context {value}, the log shows {word} = {facts['n_ctx']}"
                + (f" ({overridden})" if overridden else " (a setting elsewhere overrides it)")
            )
        return True, f"the log confirms {word} = {facts['n_ctx']}"
    if param == "kv_dtype" and "kv_type" in facts:
        # Both halves: the engine takes each of its K and V flags' last value, so one can lag behind.
        k_type, v_type = facts.get("kv_type_k", facts["kv_type"]), facts["kv_type"]
        if not k_type == v_type == kv_dtype_name(value):
            return False, f"asked for a {value} KV cache, the engine printed K ({k_type}), V ({v_type})"
        return True, f"the log confirms a {v_type} KV cache (K ({k_type}), V ({v_type}))"
    flash = after.engine.get("flash_attn")  # the diagnosis' figure: 1 or 0 as resolved (none for "auto")
    if param == "flash_attn" and flash is not None:
        wanted, seen = (
            ("enabled" if switch(value) is True else "disabled"),
            ("enabled" if flash else "disabled"),
        )
        if seen != wanted:
            return False, f"asked for flash attention {wanted}, the log shows it {seen}"
        return True, f"the log confirms flash attention {seen}"
    if param == "model" and "file_type" in facts:
        expected = _file_type_word(profile, value)
        if expected and facts["file_type"] != expected:
            return False, f"switched to a {expected} file but the log shows file type {facts['file_type']}"
        if before is not None and before.facts.get("file_type") == facts["file_type"]:
            return False, f"the log shows the same file type ({facts['file_type']}) as before"
    if param == "quant":
        unconfirmed = [w for w in after.warnings if "quantiz" in w.lower() and "confirm" in w.lower()]
        if unconfirmed:
            return False, f"asked for {value} quantization; the log never confirmed it ({unconfirmed[0]})"
    return None


def _file_type_word(profile: Profile, model: object) -> str | None:
    """The file type the engine prints for the model file `model` (its quantization, from its name)."""
    echo = profile.backend.echo
    return echo.file_type_word(quant_of(str(model))) if echo is not None else None


def took_effect(
    model: MemoryModel,
    proposal: Proposal,
    before: Observation | None,
    after: Observation,
    before_profile: Profile,
    after_profile: Profile,
) -> tuple[bool, str]:
    param = proposal.param
    backend = after_profile.backend
    if param in after.unsupported:
        said = next((w for w in after.warnings if param in w), f"{backend.name} has no {param} setting")
        return False, f"the launcher could not pass {param} on: {said}"
    echoed = _echoed(proposal, before, after, after_profile)
    if echoed is not None:
        return echoed
    # Then the curve: an identical failure with identical figures means nothing changed.
    if before is None or after.works:
        return True, ""
    predicted_before = model.predict(before_profile)
    predicted_after = model.predict(after_profile)
    expected_move = (
        predicted_before is not None
        and predicted_after is not None
        and abs(needed_bytes(predicted_before) - needed_bytes(predicted_after))
        > 0.05 * max(needed_bytes(predicted_before), 1)
    )
    same_failure = after.signature == before.signature and after.reached == before.reached
    if same_failure and not after.has_sizes:
        # No sizes printed (a run stopped at the budget from outside): the sampled curve decides.
        peaks = (before.peak_mib, after.peak_mib)
        if not all(peaks):
            return True, "could not verify the change: no sizes in the log and no memory curve"
        same_failure = abs(peaks[0] - peaks[1]) <= 0.02 * max(peaks)  # type: ignore[operator,type-var]
    if same_failure and (expected_move or predicted_after is None):
        peak_note = ""
        if before.peak_mib and after.peak_mib:
            peak_note = f"; peak {before.peak_mib:.0f} → {after.peak_mib:.0f} MiB"
        cause = overridden_by_extra(after_profile, backend, param) or (
            "the setting is ignored, unsupported or overridden"
        )
        return (
            False,
            f"the same failure with the same allocation sizes after changing {param}{peak_note}: {cause}",
        )
    return True, ""


def overridden_by_extra(profile: Profile, backend: Backend, param: str) -> str:
    """Say so when the profile's extra_args or env set the same knob again (they come last and win)."""
    flag = backend.flag(param)
    if flag and flag in profile.extra_args:
        position = profile.extra_args.index(flag)
        value = profile.extra_args[position + 1] if position + 1 < len(profile.extra_args) else ""
        return f"extra_args in the profile pass {flag} {value} after it and win"
    env_name = backend.env.get(param)
    if env_name and env_name in profile.env:
        return f"the profile's env sets {env_name}={profile.env[env_name]}"
    return ""


def _peaks(before: Observation, after: Observation) -> str:
    """The two runs' peaks; a run that ended before a second sample has no peak to set beside (QA 22 #10,
    QA 23: "peak memory 14 → 9 MiB" for two failures under a second, as check says "sampled once")."""
    once = [which for which, run in (("the run before", before), ("this run", after)) if run.samples == 1]
    if once:
        return f"peak memory not compared: {' and '.join(once)} ended before a second sample"
    before_at, after_at = before.failure_stage or before.stage, after.failure_stage or after.stage
    # a server that answers over its budget (an attached one) came up: its peak is the same buffers' (QA 30
    # S3: "the run before failed at kv cache with 84 MiB: not compared" beside 84 -> 43 MiB)
    before_up, after_up = before.ready or before.runs_over_budget, after.ready or after.runs_over_budget
    if before_up != after_up or (not after_up and before_at != after_at):
        # QA 24 F7: "9 → 55 MiB" set a launch that died before its KV cache beside a server that runs
        where = f"failed at {before_at.replace('_', ' ')}" if before_at and not before_up else "came up"
        return (
            f"peak memory {after.peak_mib:.0f} MiB (the run before {where} with {before.peak_mib:.0f} MiB: "
            "not the same buffers, not compared)"
        )
    return f"peak memory {before.peak_mib:.0f} → {after.peak_mib:.0f} MiB"


_HUNDREDTH_GIB = 0.005 * 2**30  # the rounding of a figure printed as "0.72 GiB"


def predicted_against_printed(proposal: Proposal, after: Observation) -> str:
    """The prediction beside what the engine printed, over the same buffers: an engine that prints only its
    KV cache (vLLM's CPU build) is set against the predicted KV cache, not against every buffer."""
    printed = {part: part_bytes(after.measured, part) for part in BUFFER_PARTS}
    asked = after.engine.get("kv_cache_memory_bytes")
    if asked and abs(printed.get("kv_cache", 0) - asked) <= _HUNDREDTH_GIB:
        # a cache set outright is the bytes asked; the engine printed them to a hundredth of a GiB (QA 23
        # D11: "printed 737 MiB" for vLLM's 0.72 GiB of the 733 MiB asked, 375,296 tokens of 2 KiB)
        printed["kv_cache"] = asked
    shown = [part for part, nbytes in printed.items() if nbytes]
    if not shown or proposal.predicted_mib is None:
        return ""
    failed = after.figures.get("failed_alloc", 0)
    if failed or not proposal.predicted_parts:
        # a failed allocation belongs to no known buffer: the whole prediction against all it asked for
        return (
            f"predicted ~{proposal.predicted_mib:.0f} MiB for the buffers; "
            f"the engine printed {(sum(printed.values()) + failed) / MIB:.0f} MiB"
        )
    predicted = sum(proposal.predicted_parts.get(part, 0.0) for part in shown)
    names = ", ".join(LABELS[part] for part in shown)
    # the proposal's figure (its "needs about N MiB") is the whole bill: say it where the engine left some
    # of it unprinted, so the two numbers the user reads are not taken for a miss
    # "buffers": the engine's own process is not in it (QA 26 D7: "~132 MiB in all" beside check's 401.5)
    whole = (
        f" (of ~{mib_figure(proposal.predicted_mib)} MiB of buffers in all)"
        if proposal.predicted_mib - predicted >= 1
        else ""
    )
    said = (
        f"predicted ~{mib_figure(predicted)} MiB for the {names}{whole}; "
        f"the engine printed {mib_figure(sum(printed.values()) / MIB)} MiB"
    )
    kv_predicted = proposal.predicted_parts.get("kv_cache", 0.0) * MIB
    by_share = after.engine.get("kv_cache_available") and not after.engine.get("kv_cache_memory_bytes")
    if by_share and printed.get("kv_cache", 0) > 4 * max(kv_predicted, 1):
        # QA 10: "~1 MiB ... printed 20910 MiB" read as a miss: the prediction is what one request needs
        said += (
            " (the engine sized its KV cache from the memory its share left, not from the requests: "
            "kv_cache_memory sets it outright)"
        )
    return said
