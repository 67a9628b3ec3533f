"""A running server's command line read back into the shared vocabulary.

Which engine it is comes from matching the program against each Backend's `launch.program` and
aliases; its parameters from inverting that Backend's own `flags` and `launch.extra_params`. No
engine is named here: a new Backend with its flags is read back without a line changed.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field

from vramtui.core.backends import BACKENDS, GGML_TYPES, Backend, kv_dtype_name, switch

# Short spellings of long flags (llama.cpp's common arg parser): read when a Backend has the long one.
SHORT_FLAGS: dict[str, str] = {
    "-c": "--ctx-size",
    "-np": "--parallel",
    "-b": "--batch-size",
    "-ub": "--ubatch-size",
    "-ngl": "--n-gpu-layers",
    "--gpu-layers": "--n-gpu-layers",
    "-fa": "--flash-attn",
    "-ctk": "--cache-type-k",
    "-ctv": "--cache-type-v",
    "-m": "--model",
    "-t": "--threads",
    "-a": "--alias",
}
_GGML_NAMES = {str(number): name for name, number in GGML_TYPES.items()}


@dataclass
class ServerCommand:
    """What a command line says: the engine, its model and its shared parameters."""

    argv: list[str]
    backend: Backend | None = None
    model: str | None = None
    params: dict[str, object] = field(default_factory=dict)
    extra: dict[str, object] = field(default_factory=dict)  # the backend's pass-through flags
    port: int | None = None
    host: str | None = None
    problems: list[str] = field(default_factory=list)
    # The words no Backend flag reads (--metrics, --slots, a switch), kept verbatim: a command rebuilt
    # from the parameters passes them on unchanged.
    unread: list[str] = field(default_factory=list)


def _program_matches(program: Sequence[str], argv: Sequence[str]) -> int:
    """How many leading argv words `program` covers (0: no match). "{python}" is any Python."""
    if len(argv) < len(program):
        return 0
    for want, got in zip(program, argv, strict=False):
        name = os.path.basename(got)
        if want == "{python}":
            if not name.startswith("python"):
                return 0
        elif name != os.path.basename(want) and got != want:
            return 0
    return len(program)


def find_backend(argv: Sequence[str]) -> tuple[Backend | None, int]:
    """The Backend whose program this is, and how many argv words its program takes.

    A console script shows up as its interpreter and its path (`python .../bin/vllm serve ...`, the
    kernel's view of a script started by its shebang): the interpreter is skipped."""
    if not argv:
        return None, 0
    if len(argv) > 1 and os.path.basename(argv[0]).startswith("python") and not argv[1].startswith("-"):
        found, covered = _find_program(argv[1:])
        if found is not None and found.launch is not None and found.launch.program[0] != "{python}":
            return found, covered + 1
    return _find_program(argv)


def _find_program(argv: Sequence[str]) -> tuple[Backend | None, int]:
    for backend in BACKENDS.values():
        if backend.launch is None:
            continue
        covered = _program_matches(backend.launch.program, argv)
        if covered:
            return backend, covered
    program = os.path.basename(argv[0])
    for backend in BACKENDS.values():
        if program in backend.aliases:
            return backend, 1
    return None, 0


def _split(args: Sequence[str]) -> list[tuple[str, str | None]]:
    """(flag, value) pairs and (positional, None)... flags are `--x v`, `--x=v` or a bare `--x`."""
    pairs: list[tuple[str, str | None]] = []
    i = 0
    while i < len(args):
        word = args[i]
        if word.startswith("-") and len(word) > 1 and not _is_number(word):
            flag, eq, value = word.partition("=")
            if eq:
                pairs.append((flag, value))
            elif i + 1 < len(args) and (not args[i + 1].startswith("-") or _is_number(args[i + 1])):
                pairs.append((flag, args[i + 1]))
                i += 1
            else:
                pairs.append((flag, None))  # a switch: --enforce-eager, --flash-attn on old builds
        else:
            pairs.append(("", word))
        i += 1
    return pairs


def _is_number(word: str) -> bool:
    try:
        float(word)
    except ValueError:
        return False
    return True


def _value(param: str, raw: str | None, names: dict[str, object] | None = None) -> object:
    """A flag's text as the shared vocabulary holds it: numbers as numbers, switches as booleans, the
    engine's own names for a value as the value (`names`)."""
    if raw is None:
        return True
    if names and raw in names:
        return names[raw]
    if param == "kv_dtype":
        return _GGML_NAMES.get(raw, kv_dtype_name(raw))  # llama-cpp-python takes ggml type numbers
    if param == "flash_attn":
        try:
            return switch(raw)
        except Exception:
            return raw
    if param == "gpu_layers" and raw.strip().lower() in {"all", "-1", "999"}:
        return "all"
    try:
        number = float(raw)
    except ValueError:
        return raw
    return int(number) if number.is_integer() and "." not in raw else number


def read_command(argv: Sequence[str]) -> ServerCommand:
    """The engine, model, shared parameters, host and port a server's argv names."""
    command = ServerCommand(list(argv))
    backend, covered = find_backend(argv)
    command.backend = backend
    if backend is None or backend.launch is None:
        command.problems.append("the program is no engine vramtui knows: parameters not read")
        return command
    launch = backend.launch
    params_by_flag = {flag: param for param, flag in backend.flags.items() if flag}
    extra_by_flag = {flag: name for name, flag in launch.extra_params.items()}
    # on/off pass-through switches: `--enforce-eager` is enforce_eager = true, its --no- form false
    switch_by_flag = {
        args[0]: (name, state)
        for name, (on, off) in launch.switches.items()
        for args, state in ((on, True), (off, False))
        if len(args) == 1
    }
    positionals: list[str] = []
    for flag, raw in _split(argv[covered:]):
        if not flag:
            positionals.append(raw or "")
            continue
        typed = flag
        flag = SHORT_FLAGS.get(flag, flag) if SHORT_FLAGS.get(flag) in _known(backend) else flag
        if flag == launch.model_flag:
            command.model = raw
        elif flag == launch.port_flag and raw is not None and raw.isdigit():
            command.port = int(raw)
        elif flag == launch.host_flag:
            command.host = raw
        elif flag in params_by_flag:
            param = params_by_flag[flag]
            command.params[param] = _value(param, raw, launch.value_names.get(param))
        elif flag in switch_by_flag and raw is None:
            name, state = switch_by_flag[flag]
            command.extra[name] = state
        elif flag in extra_by_flag:
            command.extra[extra_by_flag[flag]] = _value(extra_by_flag[flag], raw)
        else:
            command.unread += [typed] if raw is None else [typed, raw]
    if command.model is None and launch.model_flag is None and positionals:
        command.model = positionals.pop(0)  # `vllm serve MODEL`
    command.unread += positionals
    return command


def _known(backend: Backend) -> set[str]:
    launch = backend.launch
    assert launch is not None
    flags = {flag for flag in backend.flags.values() if flag} | set(launch.extra_params.values())
    flags |= {args[0] for on_off in launch.switches.values() for args in on_off if len(args) == 1}
    return flags | {f for f in (launch.model_flag, launch.port_flag, launch.host_flag) if f}
