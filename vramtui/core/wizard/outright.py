"""A KV cache set outright in bytes (vLLM's --kv-cache-memory-bytes) that cannot hold one request.

The engine refuses to start until one request of the whole context fits in the bytes given; the share of
the card, the weights' type and the offload do not move that check. So after the change the engine names
(raise the bytes) is skipped, only a change that makes one request fit those bytes is a step: a shorter
context, or a narrower cache type. Every other rung would spend a relaunch on the same refusal (QA 14).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vramtui.core.backends.base import kv_set_outright, size_bytes, sizing_params
from vramtui.core.units import MIB
from vramtui.core.wizard.budget import changed, current_value
from vramtui.core.wizard.proposal import Proposal, same_value

if TYPE_CHECKING:
    from vramtui.core.launch.profile import Profile
    from vramtui.core.wizard.ladders import Rung
    from vramtui.core.wizard.observe import Observation
    from vramtui.core.wizard.propose import Proposer

# The steps that can make one request fit the bytes given: fewer tokens, or fewer bytes per token.
HELPS = ("context", "kv_dtype")
# Fractions of a KV cache set outright that a step down tries, least drastic first, and the least it asks
# for (vLLM's CPU build refuses a cache that holds less than one request; the wizard's floor elsewhere).
_KV_STEPS = (0.75, 0.5, 0.25, 0.125)
_KV_FLOOR = 16 * MIB


def smaller_kv_bytes(profile: Profile) -> list[object]:
    """Smaller sizes of a KV cache set outright (kv_cache_memory, or the engine's environment variable),
    least drastic first; none where the memory share sizes it. QA 29 Q6: a vLLM server attached at 1920
    MiB under an 1850 MiB budget, with 256 MiB of KV set outright, read "no setting left"."""
    sized = sizing_params(profile.backend, profile.params, profile.env).get("kv_cache_memory")
    if not sized:
        return []
    now = size_bytes("kv_cache_memory", sized)
    return [f"{int(now * step) // MIB}MiB" for step in _KV_STEPS if now * step >= _KV_FLOOR]


def outright_too_small(profile: Profile, obs: Observation) -> bool:
    """The run failed because the KV cache the profile sets in bytes holds less than one request."""
    backend = profile.backend
    return obs.failure == "kv_cache_too_small" and kv_set_outright(backend, profile.params, profile.env)


def outright_proposal(proposer: Proposer, profile: Profile, rungs: list[Rung]) -> Proposal | None:
    """The least drastic change that makes one request fit the bytes set, or None with the stop reason
    in the proposer's findings. Rungs are taken in ladder order; a value the estimate cannot judge is
    not proposed (there is no cautious step here: the check is exact)."""
    model = proposer.model
    for rung in rungs:
        if rung.move == "advice" or rung.param not in HELPS:
            continue
        current = current_value(profile, rung.param)
        for value in proposer.candidates(rung, current, profile):
            if same_value(value, current):
                continue
            if model.holds_one_request(changed(profile, [(rung.param, value)])):
                size = profile.params.get("kv_cache_memory")
                said = f" ({size})" if size else ""  # else set in the engine's environment
                why = (
                    f"the KV cache is set outright{said} and holds less than one request; with "
                    f"{rung.param} = {value} one request fits it (the engine's own start-up check)"
                    + (f"; cost: {rung.cost}" if rung.cost else "")
                )
                return Proposal(
                    rung.param, current, value, why, rung.label, rung.knob_words(proposer.backend)
                )
    knob = proposer.backend.knob_words("kv_cache_memory") or "kv_cache_memory"
    proposer.findings.advice = [f"raise kv_cache_memory ({knob}): the bytes set hold less than one request"]
    proposer.findings.stop_reason = (
        "the KV cache set outright holds less than one request, and no other single change makes one fit: "
        "only kv_cache_memory helps"
    )
    return None
