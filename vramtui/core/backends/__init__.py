"""The registry of engines vramtui launches: one package per engine family, looked up by name here.

- `base`: Backend, Launch, Translation, Rung, the shared PARAMS and the value helpers.
- `llama_cpp`: llama-server, llama-cpp-python's server, Ollama (which runs llama-server), ik_llama.cpp.
- `vllm`, `transformers`.

Each family package says how its engines name each shared parameter, their defaults, how they
launch and become ready, and (its ladder.py) which downgrade rungs they have. Nothing outside this
package compares a backend's name: callers hold a `Backend` and ask it.
"""

from __future__ import annotations

import difflib
from typing import Any

from vramtui.core.backends.base import (
    PARAMS,
    Backend,
    Launch,
    Rung,
    Translation,
    Translator,
    kv_dtype_name,
    switch,
    whole,
)
from vramtui.core.backends.llama_cpp import GGML_TYPES, IK_LLAMA_CPP, LLAMA_CPP, LLAMA_CPP_PYTHON, OLLAMA
from vramtui.core.backends.transformers import TRANSFORMERS
from vramtui.core.backends.vllm import VLLM
from vramtui.core.errors import VramtuiError
from vramtui.core.logs.ruletypes import EngineLog

__all__ = [
    "BACKENDS",
    "GGML_TYPES",
    "IK_LLAMA_CPP",
    "LLAMA_CPP",
    "LLAMA_CPP_PYTHON",
    "OLLAMA",
    "PARAMS",
    "TRANSFORMERS",
    "VLLM",
    "Backend",
    "EngineLog",
    "Launch",
    "Rung",
    "Translation",
    "Translator",
    "engine_ggml_types",
    "engine_logs",
    "engine_memory",
    "get_backend",
    "kv_dtype_name",
    "switch",
    "whole",
]

# Registry order: the order `--help` and error messages list them in.
BACKENDS: dict[str, Backend] = {
    b.name: b for b in (LLAMA_CPP, LLAMA_CPP_PYTHON, VLLM, TRANSFORMERS, OLLAMA, IK_LLAMA_CPP)
}


def engine_logs() -> tuple[EngineLog, ...]:
    """Every engine family's log wording, the log-only engines (SGLang, TGI) included: the one place that
    names them all. vramtui.core.logs splices them into its tables and never imports an engine itself."""
    from vramtui.core.backends.llama_cpp import log as llama_cpp
    from vramtui.core.backends.sglang import log as sglang
    from vramtui.core.backends.tgi import log as tgi
    from vramtui.core.backends.transformers import log as transformers
    from vramtui.core.backends.vllm import log as vllm

    return (llama_cpp.LOG, vllm.LOG, transformers.LOG, sglang.LOG, tgi.LOG)


def engine_memory() -> dict[str, Any]:
    """Every launchable engine's memory accounting (its family's memory.py), by backend name: what
    vramtui.core.estimate sizes with. Imported when first asked (each builds on core/estimate)."""
    from vramtui.core.backends.llama_cpp import memory as llama_cpp
    from vramtui.core.backends.transformers import memory as transformers
    from vramtui.core.backends.vllm import memory as vllm

    return {**llama_cpp.MEMORY, **vllm.MEMORY, **transformers.MEMORY}


def engine_ggml_types() -> tuple[tuple[str, int, int, int, int], ...]:
    """The ggml tensor types an engine's own GGUFs use beyond mainline's (the gguf package's): (name, type
    id, elements per block, bytes per block, bytes of metadata per row). What core/estimate reads a GGUF's
    tensor table and sizes a type with; today ik_llama.cpp's (llama_cpp/iktypes.py)."""
    from vramtui.core.backends.llama_cpp.iktypes import IK_GGML_TYPES

    return IK_GGML_TYPES


def get_backend(name: str | Backend) -> Backend:
    """Look a backend up by its name or an alias, case-insensitively (a Backend is itself)."""
    if isinstance(name, Backend):
        return name
    key = name.strip().lower()
    for backend in BACKENDS.values():
        if key == backend.name or key in backend.aliases:
            return backend
    known = ", ".join(BACKENDS)
    spellings = [spelling for backend in BACKENDS.values() for spelling in (backend.name, *backend.aliases)]
    near = difflib.get_close_matches(key, spellings, n=1, cutoff=0.7)
    hint = f"; did you mean {_name_of(near[0])!r}?" if near else ""
    raise VramtuiError(f"unknown backend {name!r}{hint} (known: {known})")


def _name_of(spelling: str) -> str:
    return next(b.name for b in BACKENDS.values() if spelling == b.name or spelling in b.aliases)
