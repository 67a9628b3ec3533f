"""A vramtui run log's header read back as the profile it was launched with, as a running server's command
line is: `diagnose` then names the wizard's first move for that log, the one `check` names for the same run
(QA 36 F2: diagnose said "--ctx-size 4096 fits the budget", check "context 32768 -> 1024", and 4096 failed).

The launcher writes `vramtui: launch ENV=... PROGRAM ARGS` and, under a budget, `vramtui: memory budget N MiB,
enforced ...` before the engine's first line (core/launch/launcher.py)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from vramtui.core.attach.cmdline import as_sizes, read_command
from vramtui.core.attach.restart import env_params, program_of
from vramtui.core.launch.profile import Profile
from vramtui.core.logs import ownlines
from vramtui.core.units import MIB

_LAUNCH = re.compile(rf"{re.escape(ownlines.LAUNCH)}(.+)$", re.M)
_BUDGET = re.compile(rf"{re.escape(ownlines.BUDGET)}(\d+(?:\.\d+)?) MiB", re.M)
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_HEAD_CHARS = 20_000  # the header sits before the engine's first lines


def run_profile(text: str) -> Profile | None:
    """The profile of the run whose log starts `text`; None for a log vramtui did not launch, an engine it
    cannot launch, or a model file that is not on this machine (nothing to size it from)."""
    head = text[:_HEAD_CHARS]
    launch = _LAUNCH.search(head)
    if launch is None:
        return None
    try:
        words = shlex.split(launch.group(1))
    except ValueError:
        return None  # a launch line cut mid-quote
    env: dict[str, str] = {}
    while words and _ASSIGNMENT.match(words[0]):
        name, value = words.pop(0).split("=", 1)
        env[name] = value
    command = read_command(words)
    backend = command.backend
    if backend is None or backend.launch is None or not command.model:
        return None
    if backend.model_is_file and not Path(command.model).is_file():
        return None
    budget = _BUDGET.search(head)
    return Profile(
        backend=backend,
        model=command.model,
        params=as_sizes({**env_params(backend, env), **command.params, **command.extra}),
        memory_budget=int(float(budget.group(1)) * MIB) if budget else None,
        extra_args=tuple(command.unread),
        program=program if "/" in (program := program_of(words, backend)) else None,
    )
