"""The interface of an engine's memory accounting, and the table that finds one by backend name.

The estimator, its solvers and the CLI ask this object what differs per engine (is the context per
sequence, how far apart the context solver steps, what share of the card is usable by default ...);
each engine family's `vramtui/core/backends/<family>/memory.py` says it and sizes a run.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vramtui.core.estimate.estimator import Estimate, Settings
    from vramtui.core.estimate.modelinfo import ModelInfo

DEFAULT_SAFETY = 0.8
# Under a memory budget the room is the budget less the engine's own share, measured: less is unknown than
# on a card, and a plan may fill this much of it. The wizard's margin and estimate's line alike (QA 36 F3:
# estimate said DOES NOT FIT at 80% for a micro-batch the wizard took at 90%, and that ran).
BUDGET_LINE = 0.9

# How an MLA model's cache (DeepSeek's kv_lora_rank) is laid out per token.
MLA_LATENT = "latent"  # one joint latent (vLLM)
MLA_LATENT_AND_V = "latent+v"  # the latent as K, the compressed KV as V (llama.cpp)
MLA_DECOMPRESSED = "decompressed"  # per-head keys and values (transformers)


class MemoryAccounting:
    """What one engine family does with memory. Subclasses size a run; the attributes tell the solvers."""

    # Usable share of the card when the user gives none (vLLM: its gpu_memory_utilization default).
    default_safety: float = DEFAULT_SAFETY
    # The context solver's step (llama.cpp pads its cache to this many cells).
    solver_step: int = 256
    # False: the context is the whole cache, split across the parallel slots (llama.cpp).
    context_is_per_sequence: bool = True
    # The engine takes a number of layers on the GPU; the rest run from host RAM.
    places_layers: bool = False
    # With no layer count given, the engine places as many layers as fit (Ollama).
    auto_places_layers: bool = False
    # The KV cache takes whatever the budget leaves (vLLM): context and concurrency are read off its
    # token capacity instead of searched for.
    kv_from_budget: bool = False
    # The engine can place single tensors on the host (llama.cpp's --cpu-moe, --n-cpu-moe, -ot).
    offloads_tensors: bool = False
    # vLLM's --cpu-offload-gb: a number of GiB of the layers' weights kept in host RAM, per GPU
    offloads_by_size: bool = False
    # llama.cpp's no_alloc dry run (`--engine`) can check the figures of this engine.
    engine_probe: bool = False
    mla_layout: str = MLA_DECOMPRESSED
    # A context past the model's trained length is a refusal to start, not a quality warning (vLLM).
    refuses_past_trained: bool = False
    # The in-flight bitsandbytes loader always quantizes as NF4 with double quantization (vLLM).
    bnb_as_nf4_dq: bool = False
    # Settings fields another engine's flags set that this engine has no knob for (vLLM's -tp under
    # llama.cpp, llama.cpp's --cpu-moe under vLLM): left out of the sizing, and a note says so.
    ignores: tuple[str, ...] = ()

    # The quantizations `estimate --table` offers when no other file of the model is on disk (GGUF file
    # types for the llama.cpp family; the HF engines add the checkpoint's own 16-bit type first).
    typical_quants: tuple[str, ...] = ("q2_k", "q3_k_m", "q4_k_m", "q5_k_m", "q6_k", "q8_0", "f16")

    # Where the engine reads a config's vision tower from when not from the model's own weights (llama.cpp:
    # its --mmproj file): said in place of "kept 16-bit", which reads as billed (QA 21 F9). None: billed.
    tower_elsewhere: str | None = None

    def size(self, info: ModelInfo, settings: Settings) -> Estimate:
        raise NotImplementedError

    def flash_on(self, info: ModelInfo, settings: Settings) -> bool:
        """Is flash attention on in this run (what the projector's attention is sized with)?"""
        return settings.flash_attn is not False

    def default_kv_dtype(self, info: ModelInfo) -> str:
        return info.dtype if info.dtype in ("f16", "bf16", "f32") else "bf16"

    def kv_dtype(self, info: ModelInfo, settings: Settings) -> str:
        return settings.kv_dtype.lower() if settings.kv_dtype else self.default_kv_dtype(info)

    def auto_streams(self, settings: Settings) -> int:
        """How many times a context of 0 (the model's trained length) is given: once, unless the engine
        gives each KV stream its own (llama-server's fit)."""
        return 1

    def run_context(self, info: ModelInfo, settings: Settings) -> int:
        """The context the engine sizes when `settings.context` may be None (its own default)."""
        return settings.context or info.max_context or 4096

    def default_is_trained(self, settings: Settings) -> bool:
        """A context left unset is the model's trained length (vLLM's --max-model-len), not a number."""
        return True

    def per_sequence(self, est: Estimate) -> int:
        """One sequence's share of the estimate's context (the solvers size concurrency at it)."""
        return est.context // max(1, est.parallel)

    def slots_note(self, info: ModelInfo, settings: Settings, est: Estimate) -> str | None:
        """How the sequences share the cache, where the context is not simply each one's (None: it is)."""
        return None

    def past_trained_note(self, per_sequence: int, trained: int) -> str:
        return (
            f"context {per_sequence} is past the model's trained length {trained}: "
            "output degrades beyond it unless RoPE scaling is configured"
        )


@cache
def _table() -> dict[str, MemoryAccounting]:
    # asked of the registry here, not at import: each memory module builds on core/estimate
    from vramtui.core.backends import engine_memory

    return engine_memory()


def accounting_for(backend: str) -> MemoryAccounting:
    """The memory accounting of a backend (its name or an alias)."""
    from vramtui.core.backends import get_backend

    return _table()[get_backend(backend).name]
