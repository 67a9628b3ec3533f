"""Launch profiles: a backend, a model and the shared vocabulary of parameters, in TOML.

```toml
backend = "llama-cpp-python"      # llama.cpp | llama-cpp-python | vllm | transformers | ollama
model = "models/tiny.gguf"        # a path (relative to this file), or the backend's model name
name = "tiny"                     # optional label
program = "/opt/llama.cpp/build/bin/llama-server"  # optional: the binary (else the backend's, on PATH)
host = "127.0.0.1"                # optional; port = 0 or "auto" picks a free one at launch
port = 8000
extra_args = ["--n_threads", "2"] # passed after the generated flags, as a list (never a shell string)
ready_timeout = 120               # seconds to wait for ready
[params]
context = 8192
parallel = 1
kv_dtype = "f16"
gpu_layers = 0
threads = 4                       # a backend's own pass-through names (threads, alias, dtype ...)
[limits]
memory_budget = "1500MiB"
[env]
CUDA_VISIBLE_DEVICES = "0"
```

A key vramtui does not know, in any table but the free-form [env], is an error with a suggestion
("did you mean context?"): a typo must not launch with the engine's default. Other engine flags go
in extra_args. Impossible values (context = -5, parallel = 0, mem_share = 1.5) are refused at load,
and so are a model file or a program that is not there.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from vramtui.core.backends import PARAMS, Backend, get_backend
from vramtui.core.backends.base import gib, is_all, kv_dtype_problem, size_bytes, switch, toml_spelling, whole
from vramtui.core.errors import VramtuiError
from vramtui.core.logs.ruletypes import WHERE_BUDGET
from vramtui.core.units import GIB, MIB, parse_size_with_unit

_TOP_LEVEL = {
    "backend",
    "model",
    "name",
    "host",
    "port",
    "extra_args",
    "env",
    "params",
    "limits",
    "ready_timeout",
    "program",
}
_LIMITS = ("memory_budget",)
# The same words as the log advice's, plain: the wizard's and the launcher's lines carry no markup
BUDGET_WHERE = WHERE_BUDGET.replace("`", "")
_PARAM_TYPES = (int, float, str, bool)


@dataclass(frozen=True)
class Profile:
    # The engine, resolved once from its name; a name given here is looked up (str(backend) is the name).
    backend: Backend
    model: str
    params: dict[str, object] = field(default_factory=dict)
    memory_budget: int | None = None  # bytes
    host: str = "127.0.0.1"
    port: int | None = None  # None: the backend's default; 0: a free port picked at launch
    extra_args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    name: str = ""
    ready_timeout: float | None = None
    source: Path | None = None  # the file it was read from
    warnings: tuple[str, ...] = ()  # things worth saying that do not stop a launch
    program: str | None = None  # the binary to run in place of the backend's own (a path or a name)
    # The model and program as the file spells them when they are relative ("models/x.gguf"): a saved
    # profile writes them so again, not the absolute paths they were resolved to.
    written: dict[str, str] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        # A name ("llama-server") becomes its Backend here, once: callers ask the object, never the name.
        object.__setattr__(self, "backend", get_backend(self.backend))
        if not self.model:
            raise VramtuiError("the profile names no model")
        for name, value in list(self.params.items()):
            check_param_name(self.backend, name)
            spelled = name in _TOKEN_PARAMS and isinstance(value, str) and not value.strip().isdigit()
            if spelled and not self.backend.takes_auto(name, value):  # vLLM's `--max-model-len auto` stays
                value = self.params[name] = _tokens(name, value)  # "32k", as `--ctx 32k` takes it
            check_param_value(self.backend, name, value)

    @property
    def label(self) -> str:
        # as the file spells the model: a hub name found in the local cache is its name, not the snapshot's
        # hash; once the wizard changed the file, that file's name (QA 18 F14: runs of a UD-IQ2_M file were
        # logged under the Q8 file the profile named first)
        model = self._still_written("model") or self.model
        return self.name or Path(model).name or model

    def param(self, name: str, default: object = None) -> object:
        return self.params.get(name, default)

    def with_param(self, name: str, value: object) -> Profile:
        """A copy with one parameter changed (None removes it, giving the engine's default)."""
        params = dict(self.params)
        if value is None:
            params.pop(name, None)
        else:
            params[name] = _checked_value(name, value)
        return dataclasses.replace(self, params=params)

    def with_changes(self, **changes: object) -> Profile:
        """A copy with top-level fields changed (model, port, memory_budget ...)."""
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]

    def to_dict(self, folder: Path | None = None) -> dict[str, object]:
        """The profile as TOML-ready data (no None values). With the `folder` it is saved in, a model or
        program the file spelled relative stays relative (as written, when it is the same folder)."""
        data: dict[str, object] = {"backend": self.backend.name, "model": self._spelled("model", folder)}
        if self.name:
            data["name"] = self.name
        if self.program:
            data["program"] = self._spelled("program", folder)
        data["host"] = self.host
        if self.port is not None:
            data["port"] = self.port
        if self.extra_args:
            data["extra_args"] = list(self.extra_args)
        if self.ready_timeout is not None:
            data["ready_timeout"] = _whole_as_int(self.ready_timeout)
        if self.params:
            data["params"] = {name: _whole_as_int(value) for name, value in self.params.items()}
        if self.memory_budget is not None:
            budget = self.memory_budget
            data["limits"] = {"memory_budget": _size_text(budget)}
        if self.env:
            data["env"] = dict(self.env)
        return data

    def _still_written(self, key: str) -> str | None:
        """The model or program as the profile's file wrote it, while it still names what was resolved from
        it (a wizard's change of file is not the file written); None when nothing was written."""
        written = self.written.get(key)
        if written is None or self.source is None:
            return written
        origin = self.source.parent
        try:
            if key == "model":
                resolved = _resolve_model(written, self.backend, origin)
            else:
                resolved = _resolve_program(written, origin)
        except VramtuiError:  # what it wrote no longer resolves (a hub name gone from the cache)
            return None
        return written if resolved == str(getattr(self, key)) else None

    def _spelled(self, key: str, folder: Path | None) -> str:
        """The model or program as a file in `folder` should spell it: the written relative path while it
        still names what was resolved from it (a wizard's other file is written whole)."""
        value = str(getattr(self, key))
        written = self._still_written(key)
        if folder is None or written is None or self.source is None:
            return value
        origin = self.source.parent
        if folder.resolve() == origin.resolve():
            return written
        return os.path.relpath(os.path.abspath(origin / Path(written).expanduser()), folder.resolve())

    def dumps(self, folder: Path | None = None) -> str:
        import tomli_w

        return tomli_w.dumps(self.to_dict(folder))

    def save(self, path: str | Path) -> Path:
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(self.dumps(target.parent), encoding="utf-8")
        return target


# Token counts a profile may spell as the CLI takes them ("32k", "32,768").
_TOKEN_PARAMS = frozenset({"context", "batch", "ubatch"})


def _tokens(name: str, text: str) -> int:
    from vramtui.core.estimate.inputs import parse_tokens

    try:
        return parse_tokens(text)
    except ValueError:
        raise VramtuiError(
            f"{name} must be a whole number, not {toml_spelling(text)} (8192 or 32k)"
        ) from None


def _whole_as_int(value: object) -> object:
    """60.0 is written 60: a whole number stays one through a save (TOML keeps 60.0 a float)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _at_most(name: str, cap: int) -> str:
    """What to set: a cap of 1 is the only value, which leaving it out gives (QA 21 F13: "1 or less")."""
    return f"set {name} = 1 (or leave it out)" if cap == 1 else f"set {name} = {cap} or less"


def known_params(backend: Backend) -> tuple[str, ...]:
    """The [params] names a backend takes: the shared vocabulary, then its own pass-through ones."""
    launch = backend.launch
    extras = (*launch.extra_params, *launch.switches) if launch is not None else ()
    return PARAMS + tuple(name for name in extras if name not in PARAMS)


def check_param_name(backend: Backend, name: str) -> None:
    """A [params] key vramtui does not know is an error (a typo must not pass silently)."""
    known = known_params(backend)
    if name in known:
        return
    if name == "memory_budget":
        raise VramtuiError("memory_budget belongs under [limits], not under [params]")
    if name in _TOP_LEVEL:
        raise VramtuiError(f"{name} belongs at the top level, not under [params]")
    # the hint lists what this engine takes: a shared name it has no flag for is no help (QA 14)
    takes = [param for param in known if param not in PARAMS or backend.flags.get(param) is not None]
    # an engine's own flag written as a key (max_model_len for vLLM's --max-model-len, ctx_size for
    # llama.cpp's --ctx-size in a vLLM profile, QA 15): its shared name, this engine's first
    flag = "--" + name.replace("_", "-")
    owner, own = _flag_owner(backend, flag)
    if own is None:  # llama-cpp-python spells its flags with underscores (--n_ctx): QA 21 F11
        owner, own = _flag_owner(backend, "--" + name)
        flag = "--" + name if own else flag
    said = backend.param_words.get(name)  # the engine's own API's word (load_in_4bit): its setting here
    close = [said] if said else [own] if own else difflib.get_close_matches(name, takes, n=1, cutoff=0.6)
    # ... else a shared name this engine has no flag for (QA 35 F6: `gpu_layer` under vLLM named nothing)
    close = close or difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    hints = [f"did you mean {close[0]}?"] if close else []
    hints += [f"({owner}'s {flag} is {own} here)"] if own else []
    said_hint = f": {' '.join(hints)}" if hints else ""
    raise VramtuiError(
        f"unknown parameter {name!r} under [params] for {backend.name}{said_hint} "
        f"({backend.name} takes: {', '.join(takes)}; other engine flags go in extra_args = [...])"
    )


def _flag_owner(backend: Backend, flag: str) -> tuple[str, str | None]:
    """The engine whose flag `flag` is and the shared name it has: this backend's own first."""
    from vramtui.core.backends import BACKENDS

    for engine in (backend, *BACKENDS.values()):
        param = next((param for param, said in engine.flags.items() if said == flag), None)
        if param is not None and (engine is backend or backend.flags.get(param) is not None):
            return engine.name, param
    return backend.name, None


def _size_text(nbytes: int) -> str:
    """A budget as a profile spells it, in the largest whole unit ("3GiB", not "3072MiB": QA 23 D11)."""
    if nbytes % GIB == 0:
        return f"{nbytes // GIB}GiB"
    return f"{nbytes // MIB}MiB" if nbytes % MIB == 0 else f"{nbytes}B"


def check_unknown_keys(table: str, keys: object, known: tuple[str, ...]) -> None:
    """A key a table does not have is an error naming the nearest one: the same rule in every table."""
    for key in keys:  # type: ignore[attr-defined]
        if key in known:
            continue
        close = difflib.get_close_matches(str(key), known, n=1, cutoff=0.6)
        hint = f": did you mean {close[0]}?" if close else f" (known: {', '.join(known)})"
        raise VramtuiError(f"unknown profile key {key!r} {table}{hint}")


# Parameters that repeat a flag (llama.cpp's `-ot PATTERN=DEVICE`): a list of texts as well.
_LIST_PARAMS = frozenset({"override_tensor", "lora"})


def _checked_value(name: str, value: object) -> object:
    if name in _LIST_PARAMS and isinstance(value, list) and all(isinstance(item, str) for item in value):
        return value
    if not isinstance(value, _PARAM_TYPES):
        raise VramtuiError(
            f"parameter {name} must be a number, text or true/false, not {type(value).__name__}"
        )
    return value


# llama.cpp reads its numbers with std::stoi (a C int): past this `context = 1000000000000` kills the
# engine with "stoi" before it logs a line. No model is trained anywhere near it, and no engine takes more.
MAX_WHOLE = 2**31 - 1


def check_param_value(backend: Backend, name: str, value: object) -> None:
    """Refuse a value no engine can run with (context = -5, parallel = 0, mem_share = 1.5, kv_dtype =
    "q3_k", context = 10**12), at load."""
    _checked_value(name, value)
    if isinstance(value, int | float) and not isinstance(value, bool) and abs(value) > MAX_WHOLE:
        raise VramtuiError(f"{name} must be at most {MAX_WHOLE} (no engine takes more), not {value!r}")
    if name == "kv_dtype":
        _check_kv_dtype(backend, value)
        return
    launch = backend.launch
    check = launch.value_checks.get(name) if launch is not None else None
    if check is not None:  # an engine's own parameter (transformers' max_memory, dtype, device_map)
        problem = check(value)
        if problem:
            raise VramtuiError(problem)
        return
    if name in ("override_tensor", "quant") and backend.knob(name) is not None:
        # `-ot x=Banana`: llama-server would refuse it; quant = "awq" on transformers, which quantizes at load
        # with bitsandbytes only (QA 11: launched unquantized after a "not passed" line, exit 0)
        problem = backend.translate(name, value).problem
        if problem:
            raise VramtuiError(problem)
        return
    if name == "flash_attn" or (launch is not None and name in launch.switches):
        switch(value, name)  # on, off or auto; anything else is one line here
        return
    if name == "mem_share":
        share = _number(name, value)
        if not 0 < share <= 1:
            raise VramtuiError(f"mem_share must be a share of the card above 0 and at most 1, not {value!r}")
        return
    if name == "cpu_offload":
        if gib(name, value) < 0:
            raise VramtuiError(f"cpu_offload must be 0 or more GiB, not {value!r}")
        return
    if name in ("gpu_layers", "gpu_layers_draft"):
        if not is_all(value) and whole(name, value) < 0:
            raise VramtuiError(f'{name} must be 0 or more (or "all"), not {value!r}')
        return
    if name == "cache_ram" and whole(name, value) < -1:
        raise VramtuiError(f"cache_ram must be MiB, -1 (no limit) or 0 (off), not {value!r}")
    if name == "mtp":
        switch(value, name)
        return
    if name == "kv_cache_memory":
        size_bytes(name, value)
        return
    if name == "context" and backend.context_auto and str(value).strip().lower() in {"auto", "-1"}:
        return  # the engine picks the largest context that fits
    if name == "parallel" and backend.parallel_auto_slots and str(value).strip().lower() in {"auto", "-1"}:
        return
    lowest = {"context": 0 if backend.context_zero_is_trained else 1, "parallel": 1, "batch": 1, "ubatch": 1}
    lowest.update(ctx_size_draft=0, max_loras=1, max_lora_rank=1, n_cpu_moe=0)
    if name in lowest and whole(name, value) < lowest[name]:
        meaning = " (0: the model's own trained length)" if name == "context" and lowest[name] == 0 else ""
        raise VramtuiError(f"{name} must be {lowest[name]} or more{meaning}, not {value!r}")
    if name in lowest and whole(name, value) > MAX_WHOLE:  # typed as text: "1000000000000"
        raise VramtuiError(f"{name} must be at most {MAX_WHOLE} (no engine takes more), not {value!r}")


def _check_kv_dtype(backend: Backend, value: object) -> None:
    """A KV cache type the engine does not take is refused here, not launched with its default after a
    "not passed" line. The engine's translation knows its types (vLLM takes f16 as its `auto`); an engine
    with no KV knob is checked against the types its Backend lists."""
    if not isinstance(value, str) or not value.strip():
        raise VramtuiError(f'kv_dtype must be a type name such as "f16" or "q8_0", not {value!r}')
    problem = kv_dtype_problem(backend, value)
    if problem:
        raise VramtuiError(problem)


def _number(name: str, value: object) -> float:
    if isinstance(value, bool):
        raise VramtuiError(f"{name} must be a number, not {value!r}")
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise VramtuiError(f"{name} must be a number, not {value!r}") from None


def _check_folder(profile: Profile, path: Path) -> None:
    """An engine that loads a local folder: one that is not there, a file, or a folder with no config.json is
    said before a launch that fails on it (QA 11: an empty folder failed on its tokenizer)."""
    name = profile.backend.name
    if not path.exists():
        raise VramtuiError(
            f"model folder not found: {profile.model} ({name} loads a local folder; a hub name must be in the "
            "local Hugging Face cache: download it first, or set HF_HUB_CACHE)"
        )
    if not path.is_dir():
        raise VramtuiError(f"model is a file, not a folder: {profile.model} ({name} loads a model folder)")
    if not (path / "config.json").is_file():
        raise VramtuiError(
            f"{profile.model}: no config.json in the folder, so it is no Hugging Face model folder (an "
            "interrupted download, or the folder above the model's?)"
        )


def check_files(profile: Profile) -> None:
    """Before any launch: the model file and the program the profile names must be there."""
    model = profile.model
    if not profile.backend.model_at_request:
        path = Path(model).expanduser()
        looks_like_path = path.is_absolute() or model.startswith(("./", "../", "~")) or path.suffix == ".gguf"
        if (profile.backend.model_is_file or looks_like_path) and not path.exists():
            raise VramtuiError(f"model file not found: {model}")
        if profile.backend.model_is_file and path.is_dir():
            raise VramtuiError(f"model is a folder, not a file: {model}")
        if profile.backend.model_is_folder:
            _check_folder(profile, path)
        if path.is_dir() and (path / "config.json").is_file():
            from vramtui.core.estimate.modelinfo import check_hf_folder

            check_hf_folder(path)  # a damaged config.json or safetensors header: said before the launch
        if path.suffix.lower() == ".gguf" and path.is_file():
            from vramtui.core.estimate.ggufheader import cut_short

            # A launch of a cut-off download, or of a file that is no GGUF at all (an HTML page saved in its
            # place), only ends in the engine's refusal: say it before.
            with open(path, "rb") as handle:
                magic = handle.read(4)
            if not magic:
                raise VramtuiError(f"{model}: the file is empty (0 bytes): download it again")
            if magic != b"GGUF":
                raise VramtuiError(
                    f"{model}: not a GGUF file (it does not start with the GGUF magic): an error page saved in "
                    "place of the model? download it again"
                )
            problem = cut_short(path)
            if problem:
                raise VramtuiError(problem)
    if profile.host not in {"", "0.0.0.0", "*"}:
        from vramtui.core.launch.procs import free_port

        free_port(profile.host)  # a host it cannot listen on: one line now, not the engine's bind error
    if profile.program:
        resolve_program(profile.program, profile.env.get("PATH"))
        return
    launch = profile.backend.launch
    if launch is not None and launch.binary is not None:
        import shutil

        if shutil.which(launch.binary, path=profile.env.get("PATH") or os.environ.get("PATH")) is None:
            raise VramtuiError(missing_program(profile.backend))


def missing_program(backend: Backend) -> str:
    """One line for an engine whose server is not on PATH: which engine, and how to get it."""
    launch = backend.launch
    binary = launch.binary if launch is not None else None
    get = f" ({launch.install})" if launch is not None and launch.install else ""
    return (
        f"{binary or backend.name} not found on PATH: {backend.name}'s server is not installed{get}; "
        f'or name it in the profile: program = "/path/to/{binary or "server"}"'
    )


def resolve_program(program: str, search_path: str | None = None) -> str:
    """The program as an executable path: a path must exist and be executable, a bare name be on PATH."""
    import os
    import shutil

    if os.sep in program or program.startswith("~"):
        path = Path(program).expanduser()
        if not path.exists():
            raise VramtuiError(f"program not found: {program}")
        if path.is_dir() or not os.access(path, os.X_OK):
            raise VramtuiError(f"program is not an executable file: {program}")
        return str(path)
    found = shutil.which(program, path=search_path or os.environ.get("PATH"))
    if found is None:
        raise VramtuiError(f"program not found on PATH: {program}")
    return found


def _resolve_program(program: str, folder: Path) -> str:
    """A program given as ./x or ../x is relative to the profile's folder."""
    return str((folder / program).resolve())


def _resolve_model(model: str, backend: Backend, folder: Path | None) -> str:
    """Relative model paths are relative to the profile's folder; model names stay names."""
    if backend.model_at_request or folder is None:
        return model
    path = Path(model).expanduser()
    if path.is_absolute():
        return str(path)
    candidate = folder / path
    # llama.cpp always takes a file; vLLM takes a path or a hub name; vramtui's transformers runner a folder.
    if backend.model_is_file or candidate.exists() or model.startswith(("./", "../")):
        return str(candidate.resolve())
    # `models/tiny` where models/ is a folder here is a local path gone wrong, not a hub name to download
    if len(path.parts) > 1 and (folder / path.parts[0]).is_dir():
        return str(candidate.resolve())
    from vramtui.core.estimate.discover import hf_snapshot

    snapshot = hf_snapshot(model)
    if snapshot is not None and backend.model_is_folder:
        return str(snapshot)
    if snapshot is None:
        _refuse_a_near_miss(model, folder)
    return model


def _host_and_timeout(data: dict[str, object]) -> tuple[str, float | None]:
    """The profile's host (text) and ready_timeout (seconds, or None), each refused in one line."""
    host = data.get("host", "127.0.0.1")
    if not isinstance(host, str) or not host:
        raise VramtuiError('host must be text, e.g. "127.0.0.1"')
    timeout = data.get("ready_timeout")
    if timeout is not None and (
        not isinstance(timeout, int | float) or isinstance(timeout, bool) or timeout <= 0
    ):
        raise VramtuiError(f"ready_timeout must be a number of seconds, not {timeout!r}")
    return host, float(timeout) if timeout is not None else None


def _hub_download(model: str, backend: Backend) -> str | None:
    """Said before a launch whose model is a name the engine will fetch from the Hub (QA 15: a mistyped
    `models/tinyqwen` went to the network and read as a DNS failure)."""
    if backend.model_is_file or backend.model_at_request or backend.model_is_folder:
        return None  # a file or folder the checks refuse when missing; a name the server itself resolves
    if Path(model).expanduser().exists() or Path(model).expanduser().is_absolute():
        return None
    from vramtui.core.estimate.discover import hf_snapshot

    if hf_snapshot(model) is not None:
        return None
    return (
        f"model {model!r} is no folder here and not in the Hugging Face cache: the engine will download it "
        "from the Hub (with no network it fails at download)"
    )


def _refuse_a_near_miss(model: str, folder: Path) -> None:
    """A bare name that is neither a folder here nor in the Hugging Face cache, one letter off a folder
    beside the profile: a typo the engine would take for a hub name and try to download (QA 14)."""
    import difflib

    if "/" in model or "\\" in model:
        return
    try:
        names = [
            entry.name for entry in folder.iterdir() if entry.is_dir() and not entry.name.startswith(".")
        ]
    except OSError:
        return
    near = difflib.get_close_matches(model, names, n=1, cutoff=0.85)  # one letter off, not a prefix
    if near:
        raise VramtuiError(
            f"model {model!r} is no folder beside the profile and not in the Hugging Face cache, so the engine "
            f'would try to download it; did you mean the folder {near[0]!r} here? (write model = "./{near[0]}")'
        )


def _memory_budget(raw: object) -> int | None:
    """[limits] memory_budget: a size with its unit. A bare number is refused (600 would be 600 bytes, and
    the engine dies before it prints a line), and so is a zero, which is no budget at all."""
    if raw is None or raw == "":
        return None
    if not isinstance(raw, str | int | float) or isinstance(raw, bool):
        raise VramtuiError(f'memory_budget must be a size such as "1500MiB", not {raw!r}')
    try:
        size = parse_size_with_unit(raw)
    except VramtuiError as error:
        if "is no size" not in str(error):
            raise VramtuiError(f"memory_budget: {error}") from None
        size = 0
    if size == 0:
        raise VramtuiError(
            f'memory_budget = {raw!r} is no budget: leave it out to run without one, or give a size such as "1500MiB"'
        )
    return size


def _port(raw: object) -> int | None:
    if raw is None:
        return None
    if raw == "auto":
        return 0
    if isinstance(raw, int) and not isinstance(raw, bool) and 0 <= raw <= 65535:
        return raw
    raise VramtuiError(f'port must be a number from 1 to 65535 (or 0 / "auto"), not {raw!r}')


def _program(raw: object, folder: Path | None, written: dict[str, str]) -> str | None:
    """The program: ./x or ../x is relative to the profile's folder (and noted as written)."""
    if raw is None:
        return None
    if not isinstance(raw, str) or not raw:
        raise VramtuiError('program must be a path or a name, e.g. "/opt/llama.cpp/build/bin/llama-server"')
    if folder is None or not raw.startswith(("./", "../")):
        return raw
    written["program"] = raw
    return _resolve_program(raw, folder)


def profile_from_dict(
    data: dict[str, object], folder: Path | None = None, source: Path | None = None
) -> Profile:
    """Build a profile from parsed TOML (or any dict of the same shape)."""
    warnings: list[str] = []
    written: dict[str, str] = {}
    check_unknown_keys("at the top level", data, (*sorted(_TOP_LEVEL), *PARAMS, *_LIMITS))
    backend = data.get("backend")
    model = data.get("model")
    if not isinstance(backend, str) or not backend:
        raise VramtuiError('the profile needs backend = "llama.cpp" | "llama-cpp-python" | "vllm" | ...')
    if not isinstance(model, str) or not model:
        raise VramtuiError('the profile needs model = "path/to/model" (or the backend\'s model name)')
    engine = get_backend(backend)  # the one lookup: an unknown name fails here, in one line

    params_raw = data.get("params", {})
    if not isinstance(params_raw, dict):
        raise VramtuiError("[params] must be a table of name = value")
    params: dict[str, object] = {}
    # Shared parameters are also accepted at the top level (quant = "bnb-4bit").
    for key in PARAMS:
        if key in data:
            params[key] = _checked_value(key, data[key])
    for key, value in params_raw.items():
        params[str(key)] = _checked_value(str(key), value)

    limits = data.get("limits", {})
    if not isinstance(limits, dict):
        raise VramtuiError('[limits] must be a table (memory_budget = "1500MiB")')
    check_unknown_keys("under [limits]", limits, _LIMITS)
    memory_budget = _memory_budget(limits.get("memory_budget", data.get("memory_budget")))

    port = _port(data.get("port"))

    extra = data.get("extra_args", [])
    if isinstance(extra, str):
        raise VramtuiError('extra_args must be a list of arguments, e.g. ["--threads", "4"], not one string')
    if not isinstance(extra, list) or not all(isinstance(a, str | int | float) for a in extra):
        raise VramtuiError("extra_args must be a list of arguments")
    if extra and not (isinstance(extra[0], str) and extra[0].startswith("-")):
        # a value with no flag before it: the engine would refuse it after the launch (QA: [1, 2])
        raise VramtuiError(f'extra_args must start with a flag such as "--threads", not {extra[0]!r}')

    env = data.get("env", {})
    if not isinstance(env, dict):
        raise VramtuiError('[env] must be a table of NAME = "value"')
    for key, value in env.items():  # QA 9: A = {b = 1} was passed on as "{'b': 1}"
        if not isinstance(value, str | int | float | bool):
            raise VramtuiError(f'[env] {key} must be text or a number, e.g. {key} = "1", not {value!r}')

    host, timeout = _host_and_timeout(data)
    name = data.get("name", "")
    program = _program(data.get("program"), folder, written)

    resolved_model = _resolve_model(model, engine, folder)
    warnings += [said for said in (_hub_download(resolved_model, engine),) if said]
    if resolved_model != model and not Path(model).expanduser().is_absolute() and not model.startswith("~"):
        written["model"] = model
    return Profile(
        backend=engine,
        model=resolved_model,
        params=params,
        memory_budget=memory_budget,
        host=host,
        port=port,
        extra_args=tuple(str(a) for a in extra),
        env={str(k): str(v) for k, v in env.items()},
        name=str(name),
        ready_timeout=timeout,
        source=source,
        warnings=tuple(warnings),
        program=program,
        written=written,
    )


def load_profile(path: str | Path) -> Profile:
    """Read a launch profile (TOML). Errors are one clear line."""
    file = Path(path).expanduser()
    if not file.is_file():
        hint = ""
        if not file.suffix:
            default = profiles_dir() / f"{file.name}.toml"
            if default.is_file():
                file = default
            else:
                hint = f" (nor {default})"
        if file.is_dir():
            raise VramtuiError(f"{path} is a folder, not a profile (a TOML file)")
        if not file.is_file():
            raise VramtuiError(f"no such profile: {path}{hint}")
    try:
        data = tomllib.loads(file.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise VramtuiError(f"{file}: not a text file") from None
    except tomllib.TOMLDecodeError as error:
        raise VramtuiError(f"{file}: not valid TOML: {error}") from None
    return profile_from_dict(data, folder=file.resolve().parent, source=file.resolve())


@dataclass(frozen=True)
class Refusal:
    """A setting the engine refuses before it loads anything, and the one change that starts it."""

    message: str
    param: str
    value: object


def runnable_refusal(profile: Profile) -> Refusal | None:
    """The first setting of `profile` the engine itself refuses (None: nothing known is refused)."""
    backend, params = profile.backend, profile.params
    parallel, batch = params.get("parallel"), params.get("batch")
    if isinstance(parallel, int) and not isinstance(parallel, bool):
        tokens = batch if isinstance(batch, int) and not isinstance(batch, bool) else None
        unset = tokens is None and backend.batch_limit_words is not None
        if unset:
            tokens = _default_batch(profile)
        refusal = backend.sequence_refusal(parallel, tokens)
        if refusal is not None:
            cap = backend.max_sequences
            if cap is not None and parallel > cap:
                return Refusal(
                    f"parallel = {parallel}: {refusal}; {_at_most('parallel', cap)}", "parallel", cap
                )
            said = f" (batch is unset: {tokens} is {backend.name}'s default on this machine)" if unset else ""
            # a batch below the sequences: fewer sequences start it without more activation memory
            return Refusal(f"parallel = {parallel}: {refusal}{said}", "parallel", tokens)
    refused = (
        _context_refusal(profile)
        or _package_refusal(profile)
        or _gpu_cap_refusal(profile)
        or _machine_refusal(profile)
    )
    if refused is not None:
        return refused
    kv_dtype = params.get("kv_dtype")
    flash = backend.flash_attn_effective(params.get("flash_attn"))
    if kv_dtype is not None and backend.needs_flash_attn_for(kv_dtype) and not flash:
        message = (
            f'kv_dtype = "{kv_dtype}" needs flash attention, which is off here: {backend.name} refuses a '
            'quantized V cache without it; set flash_attn = "on" (or kv_dtype = "f16")'
        )
        return Refusal(message, "flash_attn", "on")
    return None


def _context_refusal(profile: Profile) -> Refusal | None:
    """A context past the model's own length, for an engine that refuses it (QA 9: `estimate` said WILL
    NOT START and `check` launched it anyway, to fail at load)."""
    backend, context = profile.backend, profile.params.get("context")
    if not backend.context_limit_words or not isinstance(context, int) or isinstance(context, bool):
        return None
    if profile.env.get(backend.context_limit_env, "").strip() in ("1", "true", "True"):
        return None  # the engine is told to take it
    try:
        from vramtui.core.estimate.modelinfo import load_model_info

        trained = load_model_info(profile.model).max_context
    except Exception:  # a model the estimator cannot read: the engine will say
        return None
    if not trained or context <= trained:
        return None
    said = backend.context_limit_words.format(context=context, trained=trained)
    return Refusal(f"context = {context}: {said}; set context = {trained} or less", "context", trained)


def _package_refusal(profile: Profile) -> Refusal | None:
    """A setting whose package the engine's Python cannot import (flash_attn = true without flash-attn,
    quant = "bnb-4bit" without bitsandbytes): it could only fail at load, after the tokenizer (QA 11)."""
    backend = profile.backend
    for param, value in profile.params.items():
        package = backend.missing_package(param, value)
        if package is None:
            continue
        module, pip_name = package
        fallback = backend.defaults.get(param)
        fix = f"set {param} = {_toml(fallback)}" if fallback is not None else f"drop {param} from the profile"
        message = (
            f"{param} = {_toml(value)} needs the {pip_name} package, which {backend.name} cannot import "
            f"(no module {module}): {fix}, or install it (pip install {pip_name})"
        )
        return Refusal(message, param, fallback)
    return None


def _machine_refusal(profile: Profile) -> Refusal | None:
    """A value this machine's engine cannot take (a GPU device on a CPU-only torch): said before the launch."""
    launch = profile.backend.launch
    checks = launch.machine_checks if launch is not None and "{python}" in launch.program else {}
    for param, value in profile.params.items():
        problem = checks[param](value) if param in checks else None
        if problem:
            return Refusal(problem, param, profile.backend.defaults.get(param))
    return None


def _gpu_cap_refusal(profile: Profile) -> Refusal | None:
    """max_memory that caps a GPU on a machine with none: accelerate fails on it at load ("Cannot access
    accelerator device when none is available"; QA 11: read as "other", advice "read the first error")."""
    text = profile.params.get("max_memory")
    if not isinstance(text, str) or not text.strip():
        return None
    from vramtui.core.estimate.devices import parse_max_memory
    from vramtui.core.memory.nvml import first_gpu_total_bytes

    try:
        gpus = [key for key in parse_max_memory(text) if isinstance(key, int)]
    except VramtuiError:
        return None  # said by the value's own check
    if not gpus or first_gpu_total_bytes() is not None:
        return None
    host = ",".join(part for part in text.split(",") if not part.strip().split("=")[0].strip().isdigit())
    fix = f'set max_memory = "{host}"' if host else "drop max_memory"
    message = f'max_memory = "{text}" caps GPU {gpus[0]}, and this machine has no GPU: {fix}, or run it where a GPU is'
    return Refusal(message, "max_memory", host or None)


def _toml(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return f'"{value}"' if isinstance(value, str) else str(value)


def _default_batch(profile: Profile) -> int | None:
    """The tokens of one step when the profile leaves batch unset: the engine's default on this machine's
    first GPU (on the CPU without one), never below the context (engines that do not chunk a prefill
    take the whole context in one step)."""
    from vramtui.core.memory.nvml import first_gpu_total_bytes

    device = first_gpu_total_bytes()
    value = profile.backend.default("batch", device, device is None)
    context = profile.params.get("context")
    if not isinstance(value, int) or isinstance(value, bool):
        return None
    return max(value, context) if isinstance(context, int) and not isinstance(context, bool) else value


def check_runnable(profile: Profile) -> None:
    """Settings the engine itself refuses, said before a launch that could only fail (`check`, `run`;
    the wizard makes the named change before its first launch instead)."""
    refusal = runnable_refusal(profile)
    if refusal is not None:
        raise VramtuiError(refusal.message)


def load_launch_profile(path: str | Path, budget: str | None = None) -> Profile:
    """A profile about to be launched: read it, then make sure its model file and program are there.
    `budget` (the command line's --budget SIZE) stands in for its [limits] memory_budget: a budget is
    tried without editing the file (QA 31 W7)."""
    profile = load_profile(path)
    if budget is not None:
        try:
            profile = profile.with_changes(memory_budget=_memory_budget(budget))
        except VramtuiError as error:
            said = str(error).removeprefix("memory_budget: ").removeprefix("memory_budget = ")
            raise VramtuiError(f"--budget: {said}") from None
    check_files(profile)
    return profile


def profiles_dir() -> Path:
    """Where named profiles live: the user's config dir (vramtui/profiles)."""
    import platformdirs

    return Path(platformdirs.user_config_dir("vramtui")) / "profiles"
