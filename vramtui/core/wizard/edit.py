"""A value the user typed in place of a proposed one (the TUI's Edit, `wizard`'s [e]dit).

It is read as a profile reads its own values ("32k" tokens, on/off switches, whole numbers with commas)
and checked by the profile the relaunch would run, so what is launched, predicted and verified is one
real value: QA typed `32k` in the TUI, the server launched with --n_ctx 32768, then the wizard's
verification failed on int('32k') and left that server untracked.
"""

from __future__ import annotations

from pathlib import Path

from vramtui.core.backends import switch
from vramtui.core.errors import VramtuiError
from vramtui.core.launch.profile import Profile
from vramtui.core.wizard.proposal import Proposal, value_word


def _typed(text: str) -> object:
    try:
        return int(text.replace(",", "").replace("_", ""))
    except ValueError:
        pass
    try:
        return switch(text)  # on/off as every switch reads them ("auto" stays the word)
    except VramtuiError:
        return text  # "32k", "q8_0": the profile reads it


def edited_proposal(profile: Profile, proposal: Proposal, text: str) -> Proposal:
    """The proposal with the typed value, as the relaunched profile holds it; one line when the engine
    cannot run it or it changes nothing."""
    text = text.strip()
    if not text:
        raise VramtuiError("type a value to try")
    if proposal.param == "model":
        if not Path(text).expanduser().exists():
            raise VramtuiError(f"no such model file: {text}")
        return proposal.edited(text)
    value = profile.with_param(proposal.param, _typed(text)).params.get(proposal.param)
    if value_word(value) == value_word(profile.params.get(proposal.param, proposal.from_)):
        raise VramtuiError(f"{proposal.param} is {value_word(value)} already: type another value")
    return proposal.edited(value)
