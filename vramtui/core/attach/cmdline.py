"""A running server's command line read back into the shared vocabulary.

Which engine it is comes from matching the program against each Backend's `launch.program` and
aliases; its parameters from inverting that Backend's own `flags` and `launch.extra_params`. No
engine is named here: a new Backend with its flags is read back without a line changed.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from vramtui.core.backends import BACKENDS, GGML_TYPES, Backend, kv_dtype_name, switch
from vramtui.core.units import exact_size

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
    """The first Backend whose program this is; of two that share a program, the one whose own flags
    (`Backend.own_flags`) the command line has."""
    words = {word.partition("=")[0] for word in argv}
    found: tuple[Backend | None, int] = (None, 0)
    for backend in BACKENDS.values():
        if backend.launch is None:
            continue
        covered = _program_matches(backend.launch.program, argv)
        if covered and words & set(backend.own_flags):
            return backend, covered
        if covered and found[0] is None:
            found = (backend, covered)
    if found[0] is not None:
        return found
    program = os.path.basename(argv[0])
    for backend in BACKENDS.values():
        if program in backend.aliases:
            return backend, 1
    return None, 0


def _split(args: Sequence[str]) -> list[tuple[str, str | None]]:
    """(flag, value) pairs and (positional, None)... flags are `--x v`, `--x=v` or a bare `--x`."""
    return [(flag, value) for flag, value, _words in _groups(args)]


def _groups(args: Sequence[str]) -> list[tuple[str, str | None, list[str]]]:
    """Each flag with its value and the words it took (`--x v`, `--x=v`, a bare `--x`), or ("", word)."""
    groups: list[tuple[str, str | None, list[str]]] = []
    i = 0
    while i < len(args):
        word = args[i]
        if word.startswith("-") and len(word) > 1 and not _is_number(word):
            flag, eq, value = word.partition("=")
            if eq:
                groups.append((flag, value, [word]))
            elif i + 1 < len(args) and (not args[i + 1].startswith("-") or _is_number(args[i + 1])):
                groups.append((flag, args[i + 1], [word, args[i + 1]]))
                i += 1
            else:
                groups.append((flag, None, [word]))  # a switch: --enforce-eager, --flash-attn on old builds
        else:
            groups.append(("", word, [word]))
        i += 1
    return groups


def flags_set(backend: Backend, argv: Sequence[str]) -> set[str]:
    """The flags an argv sets, each in the Backend's own spelling."""
    launch = backend.launch
    assert launch is not None
    return {launch.canonical(flag) for flag, _value, _words in _groups(argv) if flag}


def without_flags(backend: Backend, args: Sequence[str], flags: set[str]) -> tuple[list[str], list[str]]:
    """`args` less every flag in `flags` (in any spelling the engine takes) with its value; and what
    was taken out."""
    launch = backend.launch
    assert launch is not None
    kept: list[str] = []
    dropped: list[str] = []
    for flag, _value, words in _groups(args):
        (dropped if flag and launch.canonical(flag) in flags else kept).extend(words)
    return kept, dropped


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


def as_sizes(params: dict[str, object]) -> dict[str, object]:
    """The params with a size read back as the engine's flag gives it, a bare number of bytes
    (--kv-cache-memory-bytes 268435456), written as a size the profile and the estimator take."""
    found = dict(params)
    if isinstance(found.get("kv_cache_memory"), int):
        # QA 5 and 9: "needs a unit ... not 2369781760"; QA 39 F10: said as check says it ("4194304B" -> "4MiB")
        found["kv_cache_memory"] = exact_size(found["kv_cache_memory"])
    return found


def read_command(argv: Sequence[str], cwd: str | None = None) -> ServerCommand:
    """The engine, model, shared parameters, host and port a server's argv names.

    Every spelling the engine takes for a flag is read (`-ctv` and `--cache-type-v`), and the last
    value of a flag wins, as the engine itself takes it. A relative model path is the server's: read
    against its working directory `cwd` (`-m tiny.gguf` started in /models), not vramtui's."""
    command = ServerCommand(list(argv))
    backend, covered = find_backend(argv)
    command.backend = backend
    if backend is None or backend.launch is None:
        command.problems.append("the program is no engine vramtui knows: parameters not read")
        return command
    launch = backend.launch
    params_by_flag = _params_by_flag(backend)
    extra_by_flag = {flag: name for name, flag in launch.extra_params.items()}
    # on/off pass-through switches: `--enforce-eager` is enforce_eager = true, its --no- form false
    switch_by_flag = {
        args[0]: (name, state)
        for name, (on, off) in launch.switches.items()
        for args, state in ((on, True), (off, False))
        if len(args) == 1
    }
    positionals: list[str] = []
    by_flag: dict[str, dict[str, object]] = {}  # param -> {flag: its last value}
    for typed, raw in _split(argv[covered:]):
        if not typed:
            positionals.append(raw or "")
            continue
        flag = launch.canonical(typed)
        if flag == launch.model_flag:
            command.model = raw
        elif flag == launch.port_flag and raw is not None and raw.isdigit():
            command.port = int(raw)
        elif flag == launch.host_flag:
            command.host = raw
        elif flag in params_by_flag:
            param = params_by_flag[flag]
            by_flag.setdefault(param, {})[flag] = _value(param, raw, launch.value_names.get(param))
        elif flag in switch_by_flag and raw is None:
            name, state = switch_by_flag[flag]
            command.extra[name] = state
        elif flag in extra_by_flag:
            command.extra[extra_by_flag[flag]] = _value(extra_by_flag[flag], raw)
        else:
            command.unread += [typed] if raw is None else [typed, raw]
    for param, values in by_flag.items():
        command.params[param] = _one_value(backend, param, values, command.problems)
    if command.model is None and launch.model_flag is None and positionals:
        command.model = positionals.pop(0)  # `vllm serve MODEL`
    command.unread += positionals
    command.model = in_cwd(command.model, cwd)
    return command


def in_cwd(model: str | None, cwd: str | None) -> str | None:
    """The model as a path from the server's directory, where that is a file or folder there (a hub id
    such as Qwen/Qwen3-8B stays as it is)."""
    if not model or not cwd or Path(model).expanduser().is_absolute():
        return model
    there = Path(cwd) / model
    return str(there) if there.exists() else model


def process_command(pid: int) -> ServerCommand | None:
    """What a running process's command line says (None: it is not readable here); psutil errors
    other than a denied read go to the caller."""
    process = psutil.Process(pid)
    try:
        argv = process.cmdline()
    except psutil.AccessDenied:
        return None
    try:
        cwd: str | None = process.cwd()
    except (psutil.AccessDenied, psutil.NoSuchProcess, psutil.ZombieProcess):
        cwd = None
    return read_command(argv, cwd) if argv else None


def _params_by_flag(backend: Backend) -> dict[str, str]:
    """Every flag that sets a shared parameter: its own, and those its translation sets beside it."""
    launch = backend.launch
    assert launch is not None
    found = {flag: param for param, flag in backend.flags.items() if flag}
    for param, flags in launch.also_flags.items():
        found.update({flag: param for flag in flags})
    return found


def _one_value(backend: Backend, param: str, values: dict[str, object], problems: list[str]) -> object:
    """A parameter set through several flags (K and V cache types): one value when they agree; else
    the largest KV type of them (what memory and a verification must assume), said in a problem."""
    distinct = list(dict.fromkeys(values.values()))
    if len(distinct) == 1:
        return distinct[0]
    order = [str(v) for v in backend.kv_dtype_order]
    ranked = sorted(distinct, key=lambda v: order.index(str(v)) if str(v) in order else len(order))
    said = ", ".join(f"{flag} {value}" for flag, value in values.items())
    problems.append(f"{said} differ: read as {param} = {ranked[0]}; a rebuilt command sets one value")
    return ranked[0]
