"""The registry of engines vramtui launches: one package per engine family, looked up by name here.

- `base`: Backend, Launch, Translation, Rung, the shared PARAMS and the value helpers.
- `llama_cpp`: llama-server, llama-cpp-python's server, Ollama (which runs llama-server).
- `vllm`, `transformers`.

Each family package says how its engines name each shared parameter, their defaults, how they
launch and become ready, and (its ladder.py) which downgrade rungs they have. Nothing outside this
package compares a backend's name: callers hold a `Backend` and ask it.
"""

from __future__ import annotations

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
from vramtui.core.backends.llama_cpp import GGML_TYPES, LLAMA_CPP, LLAMA_CPP_PYTHON, OLLAMA
from vramtui.core.backends.transformers import TRANSFORMERS
from vramtui.core.backends.vllm import VLLM
from vramtui.core.errors import VramtuiError

__all__ = [
    "BACKENDS",
    "GGML_TYPES",
    "LLAMA_CPP",
    "LLAMA_CPP_PYTHON",
    "OLLAMA",
    "PARAMS",
    "TRANSFORMERS",
    "VLLM",
    "Backend",
    "Launch",
    "Rung",
    "Translation",
    "Translator",
    "get_backend",
    "kv_dtype_name",
    "switch",
    "whole",
]

# Registry order: the order `--help` and error messages list them in.
BACKENDS: dict[str, Backend] = {b.name: b for b in (LLAMA_CPP, LLAMA_CPP_PYTHON, VLLM, TRANSFORMERS, OLLAMA)}


def get_backend(name: str | Backend) -> Backend:
    """Look a backend up by its name or an alias, case-insensitively (a Backend is itself)."""
    if isinstance(name, Backend):
        return name
    key = name.strip().lower()
    for backend in BACKENDS.values():
        if key == backend.name or key in backend.aliases:
            return backend
    known = ", ".join(BACKENDS)
    raise VramtuiError(f"unknown backend {name!r} (known: {known})")
