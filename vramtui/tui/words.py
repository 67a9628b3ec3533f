"""The words the screen uses for the codes the core keeps: failure classes, causes, wizard outcomes.

Records, JSON and the CLI's `--json` keep the codes (`host_oom`, `first_run`); the panes, the status
line and the CLI's text output read them through this table, so no internal code reaches a person.
It imports no UI library: the CLI uses it too.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any

FAILURE_WORDS: dict[str, str] = {
    # The log diagnosis's classes (core/logs/stages.FAILURES).
    "cuda_oom": "GPU out of memory",
    "host_oom_killed": "killed without a word (SIGKILL: the OOM killer, most often)",
    "host_oom": "host out of memory",
    "unsupported_quant": "quantization not supported",
    "unknown_arch": "model architecture not supported",
    "shape_mismatch": "weights do not match the model",
    "dtype_unsupported": "data type not supported",
    "file_missing": "model file not found",
    "network": "network error",
    "disk_full": "disk full",
    "kv_cache_too_small": "no room for the KV cache",
    "context_too_long": "too long (a request for the context, or the context for the model)",
    "other": "an error",
    # The launcher's own (core/launch/launcher.py).
    "command_not_found": "engine not installed",
    "port_in_use": "port already in use",
    "ready_timeout": "not ready in time",
    "exited": "the server exited",
    "bad_arguments": "command line refused",
    "budget_start": "budget below what the engine needs to start",  # QA 31 W10: read "budget start"
}

# The same in a word or two, for the wizard's steps table on a small terminal.
SHORT_FAILURE_WORDS: dict[str, str] = {
    "cuda_oom": "GPU OOM",
    "host_oom_killed": "OOM-killed",
    "host_oom": "host OOM",
    "unsupported_quant": "bad quant",
    "unknown_arch": "unknown arch",
    "shape_mismatch": "bad shapes",
    "dtype_unsupported": "bad dtype",
    "file_missing": "no file",
    "kv_cache_too_small": "KV too small",
    "context_too_long": "ctx too long",
    "command_not_found": "no engine",
    "port_in_use": "port busy",
    "ready_timeout": "timed out",
    "bad_arguments": "bad flags",
}

# Causes are finer than classes; the frequent ones have words, the rest read with spaces.
CAUSE_WORDS: dict[str, str] = {
    "bad_argument": "command line refused",
    "kv_no_room": "no memory left for the cache blocks",
    "kv_alloc_failed": "KV cache allocation failed",
    "kv_too_small": "KV cache too small",
    "kv_prefill_oom": "out of memory in prefill",
    "kv_pool_exhausted": "the KV token pool ran dry",
    "host_alloc": "a host allocation failed",
    "device_alloc": "a GPU allocation failed",
    "host_oom_killer": "the OOM killer",
    "host_killed": "killed",
    "compute_alloc_failed": "compute buffer allocation failed",
    "traceback": "Python exception",
    "flash_attn_missing": "flash-attn not installed",
}

OUTCOME_WORDS: dict[str, str] = {
    "first_run": "failed (first launch)",
    "refused": "not launched: the engine refuses these settings",
    "works": "WORKS",
    "progress": "got further",
    "asks_less": "asks for less",
    "prepared": "prepared the next step",
    "no_progress": "no progress",
    "not_applied": "did not take effect",
    "worse": "worse",
    "error": "error",
    "advice": "advice only",
}

# The outcome in a word or two, for the steps table on a small terminal.
SHORT_OUTCOME_WORDS: dict[str, str] = {
    "first_run": "failed",
    "refused": "refused",
    "works": "WORKS",
    "progress": "got further",
    "asks_less": "asks less",
    "prepared": "prepared",
    "no_progress": "no gain",
    "not_applied": "no effect",
    "worse": "worse",
    "error": "error",
    "advice": "advice",
}


# The figures an engine printed, as the wizard records them (core/wizard/observe.ENGINE_FIGURE_NAMES).
# And the engines' figures a log diagnosis reads (core/backends/*/log.py FIGURES), for `diagnose`'s text.
FIGURE_WORDS: dict[str, str] = {
    "model_buffer": "weights",
    "weights_loaded": "weights loaded",
    "kv_buffer": "KV cache",
    "compute_buffer": "compute buffers",
    "failed_alloc": "failed allocation",
    "output_buffer": "output buffer",
    "model_buffer_gpu": "weights on the GPUs",
    "file_quant_bits": "quantization bits (the file's type)",
    "file_name_quant_bits": "quantization bits (by the file's name)",
    "layers_offloaded": "layers on the GPU",
    "layers_total": "layers in all",
    "context": "context",
    "runner_parallel": "parallel requests",
    "kv_cache_size": "KV cache in all",
    "kv_cache_cells": "KV cache cells",
    "kv_cache_layers": "layers with a KV cache",
    "kv_cache_streams": "KV cache streams",
    "ubatch_tokens": "micro-batch (tokens)",
    "context_per_sequence": "context per sequence",
    "server_slots": "slots",
    "command_context": "context on the command line",
    "command_ubatch": "micro-batch on the command line",
    "kv_quantized": "a quantized KV cache on the command line",
    "http_threads": "HTTP threads",
    "oom_requested": "the allocation that failed",
    "oom_device": "the device that refused it",
    "model_file": "model file",
    "device_working_set": "Metal's working-set limit",
    "flash_attn": "flash attention",
    "device_total": "GPU memory in all",
    "device_free": "GPU memory free",
    "non_torch_memory": "memory outside PyTorch",
    "activation_peak": "activation peak (profile run)",
    "kv_cache_available": "memory for the KV cache",
    "kv_cache_tokens": "tokens the KV cache holds",
    "node_memory": "node memory",
    "non_kv_memory": "memory besides the KV cache",
    "engine_floor": "the budget the engine itself needs to come up (measured by vramtui)",
    "tree_peak": "most its process tree held (sampled by vramtui)",
    "node_free_memory": "node memory free",
    "kv_cache_requested": "KV cache memory requested",
    "memory_share": "share of GPU memory asked (--gpu-memory-utilization)",
    "kv_cache_memory_bytes": "KV cache memory asked (--kv-cache-memory-bytes)",
    "max_model_len_derived": "the model's own length",
    "kv_cache_blocks": "KV cache blocks",
    "max_concurrency": "requests of that length at once",
    "max_concurrency_tokens": "tokens per request (for the concurrency)",
    "cuda_graphs": "CUDA graphs",
    "max_model_len_fit": "longest context that fits",
    "kv_cache_needed": "KV cache one longest request needs",
    "model_parameters": "parameters",
    "oom_process_used": "memory the process held",
    "free_after_weights": "free after the weights",
    "kv_cache_k": "KV cache, K part",
    "kv_cache_v": "KV cache, V part",
    "pool_context": "context the pool serves",
    "fit_projected_host": "llama.cpp's fit projected on the host",
    "fit_projected_device": "llama.cpp's fit projected on the GPU",
    "fit_context_from": "context before fit lowered it",
    "fit_context_to": "context fit lowered it to",
    "fit_overflow_layers": "layers whose experts fit left in host RAM",
    "fit_reduce_by": "memory fit had to free",
}


def spaced(code: str) -> str:
    return code.replace("_", " ")


def failure_words(code: str | None, *, short: bool = False) -> str:
    """`host_oom` -> "host out of memory"; the smoke and replay failures by what failed."""
    if not code:
        return "no failure"
    if short and code in SHORT_FAILURE_WORDS:
        return SHORT_FAILURE_WORDS[code]
    if code in FAILURE_WORDS:
        return FAILURE_WORDS[code]
    for prefix, what in (("smoke_", "the smallest request"), ("replay_", "the saved request")):
        if code.startswith(prefix):
            return f"{what} failed ({spaced(code[len(prefix) :])})"
    return spaced(code)


def cause_words(code: str) -> str | None:
    """A cause in a few words, else the diagnosis' own sentence for it, or None where it has neither (a
    code read with spaces, "host ram short", is no word)."""
    from vramtui.core.logs.advice import CAUSE_WORDS as SAID

    return CAUSE_WORDS.get(code) or FAILURE_WORDS.get(code) or SAID.get(code)


def stage_words(stage: str | None) -> str:
    """`load_weights` -> "load weights"."""
    return spaced(stage) if stage else "no stage"


def figure_words(code: str) -> str:
    """`kv_buffer` -> "KV cache"; a draft model's figure (`draft_kv_buffer`) says whose it is."""
    if code.startswith("draft_") and code not in FIGURE_WORDS:
        return f"draft model: {figure_words(code.removeprefix('draft_'))}"
    return FIGURE_WORDS.get(code) or spaced(code)


def outcome_words(code: str, *, short: bool = False) -> str:
    table = SHORT_OUTCOME_WORDS if short else OUTCOME_WORDS
    return table.get(code) or spaced(code)


@functools.cache
def _code_pattern() -> re.Pattern[str]:
    from vramtui.core.logs.advice import CAUSE_WORDS as SAID
    from vramtui.core.logs.stages import STAGES

    # every cause the diagnosis names, its own sentence where no shorter words are here (QA 35 F13:
    # "(budget_import)" in check's headline)
    codes = {*STAGES, *FAILURE_WORDS, *CAUSE_WORDS, *SAID}
    # Only the codes no English word spells (with an underscore); the longest first (host_oom_killed). One
    # in backticks is a profile's key the user types (`ready_timeout`), not a code to read as words.
    spelled = sorted((code for code in codes if "_" in code), key=len, reverse=True)
    return re.compile(r"(?<![`\w])(" + "|".join(map(re.escape, spelled)) + r")(?![`\w])")


def in_words(text: str) -> str:
    """A sentence the core wrote for records and the CLI (`it failed at kv_cache`), for the screen:
    each stage, failure or cause code in it read as words."""

    def words(match: re.Match[str]) -> str:
        code = match.group(1)
        if code in FAILURE_WORDS:
            return FAILURE_WORDS[code]
        said = cause_words(code)
        return said if said is not None else stage_words(code)

    return _code_pattern().sub(words, text)


def record_words(backend: str | None) -> Callable[[str, Any], str]:
    """How a wizard record's cells read in its Markdown report (core/wizard/steprecord.to_markdown): the
    outcome, stage and failure in words, a setting by the engine's own knob, a switch on/off."""
    from vramtui.core.wizard.proposal import value_word

    knob = _knob_reader(backend)

    def say(name: str, value: Any) -> str:
        if name == "outcome":
            return outcome_words(str(value))
        if name == "stage":
            return stage_words(str(value))
        if name == "failure":
            return failure_words(str(value))
        if name == "param":
            flag = knob(str(value))
            return f"{spaced(str(value))} ({flag})" if flag else spaced(str(value))
        if name in ("from", "to"):
            return value_word(value)
        return in_words(str(value)) if name == "why" else str(value)

    return say


def _knob_reader(backend: str | None) -> Callable[[str], str | None]:
    from vramtui.core.backends import get_backend
    from vramtui.core.errors import VramtuiError

    try:
        found = get_backend(backend or "")
    except VramtuiError:
        return lambda param: None
    return found.knob_words
