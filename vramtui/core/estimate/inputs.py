"""The estimator's inputs as a user types them, one parser for the CLI and the TUI's form.

Strings in ("32k", "32,768", "12GiB", "8B", "all", "q8_0", "on" ...), Settings and ModelInfo overrides
out. A bad value is an `InputError`: a one-line VramtuiError that names the field the way the CLI spells
it (`--ctx: 'lots' is not a whole number of tokens ...`); the form shows the problem beside its field.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from vramtui.core.backends.base import size_bytes
from vramtui.core.errors import VramtuiError
from vramtui.core.estimate.estimator import DEFAULT_DEVICE_BYTES, Settings, host_ram_bytes
from vramtui.core.units import parse_count, parse_size, parse_size_with_unit

# The largest published models have a few trillion parameters; far past that, the shape the flags imply
# is nonsense (hundreds of millions of layers) and sizing it would take forever.
MAX_PLAUSIBLE_PARAMS = 10**14

# The context sized when none is given: llama-server's own default (what `vramtui estimate` sizes
# without --ctx, and what the estimator pane starts with).
DEFAULT_CONTEXT = 4096

# Each input by name, as the CLI spells it (error messages name the flag).
FLAGS: dict[str, str] = {
    "backend": "--backend",
    "context": "--ctx",
    "parallel": "--parallel",
    "batch": "--batch",
    "ubatch": "--ubatch",
    "kv_dtype": "--kv-dtype",
    "flash_attn": "--flash-attn",
    "gpu_layers": "--gpu-layers",
    "cpu_moe": "--cpu-moe",
    "n_cpu_moe": "--n-cpu-moe",
    "override_tensor": "--override-tensor",
    "cpu_offload_gb": "--cpu-offload-gb",
    "kv_cache_memory": "--kv-cache-memory",
    "enforce_eager": "--enforce-eager",
    "dtype": "--dtype",
    "mmap": "--no-mmap",
    "kv_offload": "--no-kv-offload",
    "kv_unified": "--kv-unified",
    "swa_full": "--swa-full",
    "mmproj": "--mmproj",
    "model_draft": "--model-draft",
    "gpu_layers_draft": "--gpu-layers-draft",
    "device_draft": "--device-draft",
    "ctx_size_draft": "--ctx-size-draft",
    "cache_ram": "--cache-ram",
    "lora": "--lora",
    "max_loras": "--max-loras",
    "max_lora_rank": "--max-lora-rank",
    "mtp": "--mtp",
    "quant": "--quant",
    "card": "--gpu-mem",
    "tensor_split": "--tensor-split",
    "split_mode": "--split-mode",
    "main_gpu": "--main-gpu",
    "tensor_parallel_size": "--tensor-parallel-size",
    "pipeline_parallel_size": "--pipeline-parallel-size",
    "device_map": "--device-map",
    "max_memory": "--max-memory",
    "safety": "--safety",
    "mla": "-mla",
    "attn_max_batch": "-amb",
    "params": "--params",
    "layers": "--layers",
    "kv_heads": "--kv-heads",
    "head_dim": "--head-dim",
    "hidden": "--hidden",
    "heads": "--heads",
    "vocab": "--vocab",
}
SHAPE_FIELDS = ("layers", "kv_heads", "head_dim", "hidden", "heads", "vocab")
MODEL_FIELDS = ("params", *SHAPE_FIELDS)

# "1e9" too: a profile's TOML float reads so, and the CLI takes what the profile takes (QA 21 F12).
_TOKENS_RE = re.compile(r"^(\d+(?:\.\d+)?(?:e\d+)?)([km]?)$")
_ON = {"on": True, "1": True, "true": True, "yes": True, "off": False, "0": False, "false": False}
_SWITCH: dict[str, bool | None] = {**_ON, "no": False, "auto": None}


class InputError(VramtuiError):
    """A value the user typed that is not one: which field, and what is wrong with it."""

    def __init__(self, name: str, problem: str) -> None:
        flag = FLAGS.get(name, name)
        # a problem that names its flag already says which (QA 18: "--override-tensor: --override-tensor ...")
        super().__init__(problem if problem.startswith(f"{flag} ") else f"{flag}: {problem}")
        self.name = name
        self.problem = problem


def _digits(text: str) -> str:
    """'32,768' and '32_768' are 32768 (thousands separators as people write them)."""
    return text.strip().replace(",", "").replace("_", "")


def parse_tokens(text: str) -> int:
    """'8192' -> 8192, '32k' -> 32768, '32,768' -> 32768 (context sizes are powers of two in users' mouths)."""
    cleaned = _digits(text).replace(" ", "").lower()
    if cleaned.startswith("-"):
        raise ValueError(f"a context is positive, not {text.strip()}")
    match = _TOKENS_RE.match(cleaned)
    if not match:
        raise ValueError(f"{text!r} is not a whole number of tokens (try 8192 or 32k)")
    factor = {"": 1, "k": 1024, "m": 1024 * 1024}[match.group(2)]
    exact = float(match.group(1)) * factor
    if not exact.is_integer():  # "1.3": no engine rounds a context for you
        raise ValueError(f"{text!r} is not a whole number of tokens (try 8192 or 32k)")
    tokens = int(exact)
    if tokens > _MAX_TOKENS:  # the engines' context is a 32-bit int (llama.cpp and the profile refuse more)
        raise ValueError(f"{text.strip()} tokens is past any engine's limit (at most {_MAX_TOKENS:,})")
    return tokens


_MAX_TOKENS = 2**31 - 1


def _whole(text: str, minimum: int, maximum: int = _MAX_TOKENS) -> int:
    try:
        value = int(_digits(text))
    except ValueError:
        raise ValueError(f"{text!r} is not a whole number") from None
    if value < minimum:
        raise ValueError(f"must be at least {minimum}, not {value}")
    if value > maximum:  # the engines keep their counts in 32-bit ints
        raise ValueError(f"{value:,} is past any engine's limit (at most {maximum:,})")
    return value


def _at_least_one(text: str) -> int:
    return _whole(text, 1)


# Sequences served at once: vLLM's and SGLang's schedulers take thousands, llama.cpp 256; past this a
# count is a typo (QA: --parallel 1000000000000 printed a bill of 580 million TiB).
MAX_SEQUENCES = 1 << 16


def _sequences(text: str) -> int:
    return _whole(text, 1, MAX_SEQUENCES)


def parse_layers(text: str) -> int | None:
    """A number of layers on the GPU, or 'all' (also -1, llama.cpp's spelling): None."""
    if text.strip().lower() in ("all", "-1"):
        return None
    try:
        return _whole(text, 0)
    except ValueError:
        raise ValueError(f"{text!r}: a number of layers, or 'all'") from None


def parse_mla(text: str) -> int:
    """ik_llama.cpp's -mla: 0, 1, 2 or 3."""
    value = _whole(text, 0)
    if value > 3:
        raise VramtuiError(f"{text!r} is not an MLA mode (0, 1, 2 or 3)")
    return value


def parse_share(text: str) -> float:
    """'0.8' or '80%'."""
    stripped = text.strip()
    try:
        value = float(stripped.rstrip("%")) / (100 if stripped.endswith("%") else 1)
    except ValueError:
        raise ValueError(f"not a share: {text!r} (try 0.8 or 80%)") from None
    if not 0 < value <= 1:
        raise ValueError(f"must be between 0 and 1, not {text}")
    return value


def parse_flash(text: str) -> bool | None:
    """on / off (also true, 1, yes ...); auto: the backend's own choice (None)."""
    key = text.strip().lower()
    if key not in _SWITCH:
        raise ValueError(f"use on or off, not {text!r}")
    return _SWITCH[key]


def parse_card(text: str) -> int:
    """Device memory: '24GiB', '24G', '24576MiB'; a bare number is refused ('12': 12GiB?), not read as bytes."""
    value = parse_size_with_unit(text)
    if value <= 0:
        raise ValueError("must be more than 0")
    if value > MAX_CARD:  # "1e30GiB" printed "FITS, 7.8e26 TiB to spare"
        raise ValueError(f"{text.strip()} is more than any card holds (at most 64 TiB)")
    return value


# A card larger than this is a typo (today's largest hold 0.3 TiB; a pod of 64 of them is far below it).
MAX_CARD = 64 << 40


def parse_cards(text: str) -> int | tuple[int, ...]:
    """One card's bytes ('24GiB'), or several cards' in device order ('24GiB,12GiB'); an empty place
    ('24GiB,' or '24GiB,,12GiB') is refused, not skipped: a card count that silently changes is a wrong split."""
    parts = text.split(",")
    if len(parts) > 1 and any(not part.strip() for part in parts):
        raise ValueError(f"{text!r} has an empty place: one size per card, e.g. 24GiB,12GiB")
    cards = tuple(parse_card(part) for part in parts)
    return cards[0] if len(cards) == 1 else cards


def parse_split_mode(text: str) -> str:
    """llama.cpp's --split-mode: layer, row or none."""
    from vramtui.core.estimate.devices import SPLIT_MODES

    mode = text.strip().lower()
    if mode not in SPLIT_MODES:
        raise ValueError(f"use layer, row or none, not {text!r}")
    return mode


def parse_device_map(text: str) -> str:
    """transformers' device_map: auto, balanced, balanced_low_0, sequential, or one card (cuda:N)."""
    from vramtui.core.estimate.devices import DEVICE_MAPS

    value = text.strip().lower()
    if value not in DEVICE_MAPS and not value.removeprefix("cuda:").isdigit() and value != "cuda":
        raise ValueError(f"use {', '.join(DEVICE_MAPS)} or cuda:N, not {text!r}")
    return value


def parse_max_memory(text: str) -> str:
    """transformers' max_memory as the runner takes it (0=20GiB,1=46GiB,cpu=64GiB), checked, kept as typed."""
    from vramtui.core.estimate.devices import parse_max_memory as caps

    caps(text)
    return text.strip()


def _tensor_split(text: str) -> tuple[float, ...]:
    from vramtui.core.estimate.devices import parse_split

    return parse_split(text)


# A bare number under this is a model's size in billions typed without its unit ("--params 671" for
# DeepSeek's 671B): sized as that many parameters it "fits" anything. A tiny model says its unit (500k).
_BARE_COUNT_FLOOR = 100_000


def parse_params(text: str) -> int:
    """A parameter count: '8B', '7.6e9', '350M'."""
    value = parse_count(text)
    if value <= 0:
        raise ValueError("must be positive")
    bare = str(text).strip()
    if value < _BARE_COUNT_FLOOR and bare.replace(".", "", 1).isdigit():
        raise ValueError(f"{bare} parameters is no model: write its unit ({bare}B for {bare} billion)")
    if value > MAX_PLAUSIBLE_PARAMS:
        raise ValueError(f"{text} is not a plausible parameter count (at most 100T)")
    return value


def _text(text: str) -> str:
    return text.strip()


def _quant(text: str) -> str:
    """A quantization vramtui knows, said where it is typed (QA 24 F12: the pane's field got no mark, the
    estimate area only the core's error)."""
    from vramtui.core.estimate.quant import normalize_quant

    try:
        normalize_quant(text)
    except VramtuiError as error:
        raise ValueError(str(error)) from None
    return text.strip()


_DTYPES = ("auto", "float32", "float", "float16", "half", "bfloat16", "f32", "f16", "bf16", "fp16", "fp32")


def parse_dtype(text: str) -> str:
    """The engine's --dtype for the weights (vLLM, transformers): auto or a 16/32-bit float type."""
    key = text.strip().lower().removeprefix("torch.")
    if key not in _DTYPES:
        raise ValueError(f"use auto, float32, float16 or bfloat16, not {text!r}")
    return key


def parse_switch(text: str) -> bool:
    """on / off (a bare CLI flag arrives as True)."""
    key = text.strip().lower()
    if key not in _ON and key != "no":
        raise ValueError(f"use on or off, not {text!r}")
    return _SWITCH[key] is True


def parse_overrides(text: str) -> tuple[str, ...]:
    """`PATTERN=DEVICE[,PATTERN=DEVICE...]`, split on commas as llama.cpp splits -ot."""
    from vramtui.core.estimate.offload import parse_override

    found = tuple(rule.strip() for rule in text.split(",") if rule.strip())
    for rule in found:
        parse_override(rule)  # validates: one line naming the rule
    return found


def parse_cache_ram(text: str) -> int:
    """llama-server's prompt cache limit in MiB: -1 no limit, 0 off."""
    try:
        value = int(_digits(text))
    except ValueError:
        raise ValueError(f"{text!r} is not a number of MiB (-1: no limit, 0: off)") from None
    if value < -1:
        raise ValueError(f"must be -1 (no limit), 0 (off) or MiB, not {value}")
    return value


def parse_gib(text: str) -> float:
    """vLLM's --cpu-offload-gb: a number of GiB (4, 2.5) or a size (4GiB, 512MiB)."""
    from vramtui.core.units import GIB

    plain = text.strip()
    try:
        value = float(plain)
    except ValueError:
        value = parse_size(plain) / GIB
    if not value >= 0:
        raise ValueError(f"must be 0 or more GiB, not {text!r}")
    return value


def parse_files(text: str) -> tuple[str, ...]:
    """One or more files, comma-separated as llama-server's --lora takes them."""
    return tuple(path.strip() for path in text.split(",") if path.strip())


PARSERS: dict[str, Callable[[str], Any]] = {
    "backend": _text,
    "context": parse_tokens,
    "parallel": _sequences,
    "batch": _at_least_one,
    "ubatch": _at_least_one,
    "kv_dtype": _text,
    "flash_attn": parse_flash,
    "gpu_layers": parse_layers,
    "cpu_moe": parse_switch,
    "n_cpu_moe": lambda text: _whole(text, 0),
    "override_tensor": parse_overrides,
    "cpu_offload_gb": lambda text: parse_gib(text),
    "kv_cache_memory": lambda text: size_bytes("kv_cache_memory", text),
    "enforce_eager": parse_switch,
    "dtype": parse_dtype,
    "mmap": parse_switch,
    "kv_offload": parse_switch,
    "kv_unified": parse_switch,
    "swa_full": parse_switch,
    "mmproj": _text,
    "model_draft": _text,
    "gpu_layers_draft": parse_layers,
    "device_draft": _text,
    "ctx_size_draft": parse_tokens,
    "cache_ram": parse_cache_ram,
    "lora": parse_files,
    "max_loras": _at_least_one,
    "max_lora_rank": _at_least_one,
    "mtp": parse_switch,
    "quant": _quant,
    "card": parse_cards,
    "tensor_split": _tensor_split,
    "split_mode": parse_split_mode,
    "main_gpu": lambda text: _whole(text, 0),
    "tensor_parallel_size": _at_least_one,
    "pipeline_parallel_size": _at_least_one,
    "device_map": parse_device_map,
    "max_memory": parse_max_memory,
    "safety": parse_share,
    "mla": parse_mla,
    "attn_max_batch": lambda text: _whole(text, 0),
    "params": parse_params,
    **{name: _at_least_one for name in SHAPE_FIELDS},
}


def parse_value(name: str, text: str | None) -> Any:
    """One input: None when it is blank, else its value; an InputError naming the field when it is bad."""
    if text is None or not str(text).strip():
        return None
    try:
        return PARSERS[name](str(text))
    except (VramtuiError, ValueError, OverflowError) as error:
        raise InputError(name, str(error)) from None


def parse_inputs(texts: Mapping[str, str | None]) -> tuple[dict[str, Any], dict[str, str]]:
    """Every input at once: (values by name, problems by name), so a form can mark each bad field."""
    values: dict[str, Any] = {}
    problems: dict[str, str] = {}
    for name, text in texts.items():
        if name not in PARSERS:
            continue
        try:
            values[name] = parse_value(name, text)
        except InputError as error:
            problems[name] = error.problem
    return values, problems


# What rides along and where tensors go, typed as the engine's own flags in one field (the estimator
# pane's "extras"): `--mmproj FILE --n-cpu-moe 4 -ot exps=CPU --cpu-offload-gb 4 ...`.
FLAG_FIELDS = (
    "mmproj", "model_draft", "gpu_layers_draft", "device_draft", "ctx_size_draft", "cache_ram", "lora",
    "max_loras", "max_lora_rank", "mtp", "cpu_moe", "n_cpu_moe", "override_tensor", "cpu_offload_gb",
    "kv_cache_memory", "enforce_eager", "dtype",
    "tensor_split", "split_mode", "main_gpu", "tensor_parallel_size", "pipeline_parallel_size",
    "device_map", "max_memory", "mla", "attn_max_batch", "kv_offload", "kv_unified", "swa_full",
)  # fmt: skip
_SHORT_FLAGS = {"-ot": "override_tensor", "-cram": "cache_ram", "-md": "model_draft", "-ts": "tensor_split"}
_SHORT_FLAGS["--kv-cache-memory-bytes"] = "kv_cache_memory"  # vLLM's own spelling (QA 10)
_SHORT_FLAGS |= {"--mla-use": "mla", "--attention-max-batch": "attn_max_batch"}
_SHORT_FLAGS |= {"-nkvo": "kv_offload", "-kvu": "kv_unified"}
BARE_FLAGS = frozenset({"cpu_moe", "mtp", "kv_unified", "swa_full", "enforce_eager"})  # present means on
_NEGATING_FLAGS = frozenset({"kv_offload"})  # --no-...: present means off
_REPEATED_FLAGS = frozenset({"lora", "override_tensor"})  # each use adds one, joined by commas


def split_flags(text: str, field: str = "extras") -> dict[str, str]:
    """`--mmproj F --n-cpu-moe 4 -ot a=CPU -ot b=CPU` -> {name: text} for `parse_inputs`; an unknown flag
    or a missing value is an InputError naming `field`."""
    import shlex

    names = {FLAGS[name]: name for name in FLAG_FIELDS} | _SHORT_FLAGS
    try:
        words = shlex.split(text)
    except ValueError as error:
        raise InputError(field, str(error)) from None
    found: dict[str, list[str]] = {}
    position = 0
    while position < len(words):
        flag, _, inline = words[position].partition("=")
        name = names.get(flag)
        if name is None:
            raise InputError(field, f"{words[position]!r} is not one of {', '.join(sorted(names))}")
        position += 1
        if name in BARE_FLAGS:
            value = inline or "on"
        elif name in _NEGATING_FLAGS:
            value = "off"
        elif inline:
            value = inline
        elif position < len(words):
            value, position = words[position], position + 1
        else:
            raise InputError(field, f"{flag} needs a value")
        found.setdefault(name, []).append(value)
    return {
        name: ",".join(values) if name in _REPEATED_FLAGS else values[-1] for name, values in found.items()
    }


def cpu_run_card() -> int:
    """The "card" of a CPU-only run: this machine's RAM (not the 24 GiB GPU a card-less estimate sizes)."""
    return host_ram_bytes()


def settings_from(values: Mapping[str, Any], on_gpu: bool = True) -> Settings:
    """Settings from parsed inputs (`parse_inputs`); what is missing is the backend's own default."""
    cards = values.get("card")
    if isinstance(cards, int):
        cards = (cards,)
    return Settings(
        gpus=tuple(cards) if cards and len(cards) > 1 else (),
        tensor_split=values.get("tensor_split") or (),
        split_mode=values.get("split_mode"),
        main_gpu=values.get("main_gpu") or 0,
        tensor_parallel_size=values.get("tensor_parallel_size") or 1,
        pipeline_parallel_size=values.get("pipeline_parallel_size") or 1,
        device_map=values.get("device_map"),
        max_memory=values.get("max_memory"),
        backend=values.get("backend") or "llama.cpp",
        context=values.get("context"),
        parallel=values.get("parallel"),
        batch=values.get("batch"),
        ubatch=values.get("ubatch"),
        kv_dtype=values.get("kv_dtype"),
        flash_attn=values.get("flash_attn"),
        gpu_layers=values.get("gpu_layers"),
        cpu_moe=bool(values.get("cpu_moe")),
        n_cpu_moe=values.get("n_cpu_moe"),
        override_tensor=values.get("override_tensor") or (),
        cpu_offload_gb=values.get("cpu_offload_gb") or 0.0,
        kv_cache_memory=values.get("kv_cache_memory"),
        enforce_eager=bool(values.get("enforce_eager")),
        mmap=values.get("mmap") is not False,
        kv_offload=values.get("kv_offload") is not False,
        kv_unified=True if values.get("kv_unified") else None,
        swa_full=True if values.get("swa_full") else None,
        mmproj=values.get("mmproj"),
        model_draft=values.get("model_draft"),
        gpu_layers_draft=values.get("gpu_layers_draft"),
        device_draft=values.get("device_draft"),
        ctx_size_draft=values.get("ctx_size_draft"),
        cache_ram=values.get("cache_ram"),
        lora=values.get("lora") or (),
        max_loras=values.get("max_loras"),
        max_lora_rank=values.get("max_lora_rank"),
        mtp=bool(values.get("mtp")),
        quant=values.get("quant"),
        dtype=values.get("dtype"),
        device_bytes=cards[0] if cards else DEFAULT_DEVICE_BYTES,
        safety=values.get("safety"),
        on_gpu=on_gpu,
        mla=values.get("mla"),
        attn_max_batch=values.get("attn_max_batch"),
    )


def model_overrides(values: Mapping[str, Any]) -> dict[str, Any]:
    """The ModelInfo overrides (`modelinfo.apply_overrides` / `info_from_flags`): params and the shape."""
    return {name: values.get(name) for name in MODEL_FIELDS}


def parse_settings(texts: Mapping[str, str | None], on_gpu: bool = True) -> Settings:
    """Settings from the strings typed; the first bad one is an InputError."""
    values = {name: parse_value(name, text) for name, text in texts.items() if name in PARSERS}
    return settings_from(values, on_gpu=on_gpu)
