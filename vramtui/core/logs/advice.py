"""Advice: what to change, as a table keyed by failure and cause, in the detected engine's own flags.

Each row names a failure class and a cause (None: any), optionally the stages it holds at, and its
lines. A line is a template (vramtui.core.logs.ruletypes.Say): `{knob}` is the engine's own flag for a
shared parameter, `{value}` a figure the diagnosis computed, "@topic" the engine's own lines for that
topic (its LogProfile.advice) or else the default ones here. The first row that matches decides.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from vramtui.core.errors import VramtuiError
from vramtui.core.logs import rules as ls
from vramtui.core.logs.analysis import _engine_hint
from vramtui.core.logs.rules import LogProfile, Say
from vramtui.core.logs.ruletypes import SLOTS_SPLIT, WHERE_BUDGET
from vramtui.core.logs.verdict import SAYS_KILLED, Diagnosis, folder_named
from vramtui.core.memory.room import (
    kv_bytes_for_budget,
    kv_bytes_for_request,
    kv_set_aside,
    one_request_kv_bytes,
    slots_whose_threads_fit,
    threads_take_the_budget,
)
from vramtui.core.units import GIB, format_bytes

FAILURE_WORDS: dict[str, str] = {
    "cuda_oom": "the GPU ran out of memory",
    "host_oom": "a host-RAM allocation failed",
    "host_oom_killed": "the process was killed (SIGKILL) and nothing here says by whom: the host's out-of-memory killer is one possible cause",
    "unsupported_quant": "this build cannot read the file's format or quantization",
    "unknown_arch": "the engine does not know this model architecture",
    "shape_mismatch": "the weights do not have the shapes the loader expects",
    "dtype_unsupported": "the data type is not supported on this GPU or build",
    "file_missing": "the model file or repository was not found",
    "network": "the download could not reach the server",
    "disk_full": "the disk is full",
    "kv_cache_too_small": "no room is left for the KV cache",
    "context_too_long": "a request is longer than the context",
    "other": "the run failed",
}
CAUSE_WORDS: dict[str, str] = {
    "host_oom_killer": "host RAM ran out: the out-of-memory killer killed the process (the log says so)",
    "memory_monitor": "host RAM passed Ray's memory-monitor threshold (RAY_memory_usage_threshold, 0.95 of "
    "the node by default): Ray killed the worker (the log says so)",
    "host_alloc": "a host-RAM allocation failed",
    "blas_alloc": "OpenBLAS could not allocate its buffers in host RAM",
    "engine_step_timeout": "one engine step did not return within vLLM's iteration timeout "
    "(VLLM_ENGINE_ITERATION_TIMEOUT_S, 60 s): a kernel hung or ran far too slowly on this GPU",
    "kv_transfer_failed": "the prefill server could not send a request's KV cache to the decode server "
    "(prefill/decode disaggregation: check the transfer backend, its RDMA device and the memory it registers)",
    "crash": "the process crashed (a segmentation fault, an abort or a failed assert)",
    "died_at_start": "the process ended before it printed a line of an engine's start-up (the program, or a "
    "script around it, failed at once)",
    "worker_killed": "a worker process was killed with SIGKILL while loading: most often the host's out-of-memory killer",
    "metal_source_missing": "Metal could not compile its shaders: a file their source includes "
    "(ggml-common.h) is not beside ggml-metal.metal (GGML_METAL_PATH_RESOURCES): the build's install is incomplete",
    "unknown_projector": "this build does not know the vision projector's type (--mmproj)",
    "v_cache_needs_flash_attn": "a quantized V cache needs flash attention",
    "too_many_sequences": "more parallel sequences than llama.cpp runs (256)",
    "gpu_full_at_start": "the GPU was already full before loading (a device memory query failed)",
    "port_in_use": "the server could not listen: another process already holds its port",
    "flash_attn_missing": "flash attention 2 was asked for, but the flash-attn package is not installed",
    "bad_argument": "the engine refused its command line (a flag it does not take, or a bad value)",
    "gpus_short": "the run asks for more GPUs than there are (tensor x pipeline parallel ranks)",
    "nccl_timeout": "a multi-GPU (NCCL) collective operation timed out: one GPU's process stalled or died",
    "null_return": "a C function failed without saying why (SystemError: it returned NULL with no exception set)",
    "gpu_share_short": "less GPU memory is free than the share the engine was asked to take",
    "prefill_warmup": "the warmup's largest prefill did not fit in GPU memory",
    "removed_ggml_type": "the file uses a tensor type this llama.cpp build removed",
    "torch_checkpoint": "the file is a PyTorch checkpoint, and llama.cpp reads only GGUF",
    "disk_offload": "the model does not fit GPU and host memory, so accelerate would put weights on disk",
    "host_ram_short": "the model needs more host RAM than is free",
    "model_not_found": "a request named a model the server does not have",
    "bad_magic": "the file is not a GGUF (bad magic number)",
    "truncated_file": "the model file is cut short or corrupt",
    "model_folder": "the model path is a folder, not a model file",
    "config_invalid": "the model's config.json is not valid JSON",
    "bad_file": "the model file could not be read",
    "gated_repo": "the repository is gated or needs a token",
    "download_failed": "the download step failed",
    "bnb_cpu_dispatch": "the quantized model does not fit the GPU, so modules were sent to the CPU/disk",
    "cut_traceback": "a traceback stops before its exception line",
    "cuda_graph_capture": "the GPU ran out of memory while capturing CUDA graphs",
    "wrong_format": "this backend does not read the model file's format",
    "tokenizer_files": "the tokenizer could not be loaded (its files are missing or cannot be converted)",
    "exception": "a Python exception stopped the run",
    "unknown_model_type": "this transformers does not know the model's type (its config's model_type)",
    "swap_space_pinned": "the host could not pin the memory of vLLM's CPU swap space",
    "loader_shape_assert": "a weight in the checkpoint is not the shape the model's layer expects",
    "kernel_failed": "a GPU kernel failed while the model computed a batch",
    "cpu_attn_head_dim": "the engine's CPU attention kernels do not take this model's head size",
    "fallback_no_tp": (
        "the engine runs this architecture through its Transformers fallback (no native implementation), "
        "which cannot split it over GPUs"
    ),
    "request_error": "the server failed a request with an internal error (HTTP 500)",
    "kernel_type_unsupported": "a GPU kernel has no path for this tensor type on this backend",
    "kernel_assert": "a GPU kernel's own check failed (a device-side assert)",
    "kernel_fault": "the GPU faulted (an illegal memory access, or the device was lost: a driver reset or a hang)",
    "library_missing": "a shared library the engine needs was not found (its build or install does not match)",
    "nan_in_compute": "a kernel produced NaN or inf, and the engine stopped (a numeric fault, not memory)",
    "quant_kernel_missing": "the kernel for the checkpoint's quantization (FP4, FP8, Marlin ...) is not built "
    "for this card",
    "no_kernel_image": "the engine's GPU code was not built for this card (no kernel for its compute capability)",
    "no_gpu_torch": "torch found no GPU to put the model on (a CPU-only torch, or no NVIDIA driver)",
    "triton_image": "a Triton kernel compiled for this card could not be loaded by its driver",
    "heap_corruption": "native code broke the process's heap (a double free, an invalid pointer) and the C "
    "library stopped it: a bug or a library mismatch, not memory running out",
    "triton_shared_memory": "a Triton kernel asked for more shared memory per block than this card has (a "
    "kernel tuned for another GPU): not its VRAM",
    "shift_unsupported": "a slot's context filled up, and this model's cache cannot drop its oldest tokens "
    "(no context shift)",
    "device_assert": "a GPU kernel's own check failed (an index past its table: a position past the trained "
    "length, or a token id past the vocabulary)",
    "backend_init_failed": "the GPU backend for the context (Metal, Vulkan...) failed to initialize",
    "metal_command_oom": "the GPU (Metal) ran out of memory while computing a batch",
    "compute_alloc_failed": "the compute buffer (the graph's scratch memory, sized by the context and the micro-batch) could not be allocated",
    "budget_import": "the memory budget is too small to even import the engine",
    "host_import": "host memory ran out while the engine was still importing its own modules",
    "library_map": "the loader could not map a shared library of the engine (no address space or RAM left)",
    "loader_threads": "the engine could not start a thread: under a memory budget, no room for its stack",
    "budget_start": "the memory budget is too small for the engine to start",
    "budget_no_serve": "it came up but answered every request with an error under the memory budget",
    "thread_start": "the engine could not start a thread (a limit on threads or processes, or on memory)",
    "thread_no_room": "a thread could not start: the model's buffers had left the budget no room for its stack",
    "http_threads_start": "the memory budget had no room for the stacks of the server's HTTP threads (one per slot)",
    "cpu_share_short": "less host memory is free than the share the engine was asked to take",
    "kv_bytes_over_free": "the KV cache asked for is more than the host memory that is free",
    "max_len_over_model": "the context asked for is longer than the model's own length",
    "quant_not_in_checkpoint": "the quantization asked for is not the checkpoint's",
    "worker_died": "a worker process died without an error of its own",
    "oom_killer": "the kernel's out-of-memory killer ended the process",
    "killed_signal": "the server was killed (SIGKILL) without a stop of vramtui's: the host's out-of-memory killer is the usual cause",
    "killed_outside": "the server was killed (SIGKILL) from outside, and this machine's kernel log shows no out-of-memory kill then: a kill by hand, a supervisor or a timeout, which no memory setting prevents",
    "kv_type_block_mismatch": "the KV cache type asked for does not fit this model's head size (its block does not divide it)",
    "server_dropped": "the server dropped the request with no answer: it was killed (the out-of-memory killer is the usual cause while a model loads) or crashed",
}


# With no backend named in the log, the advice names the setting instead of a flag.
_GENERIC_KNOBS: dict[str, str] = {
    "context": "the context length",
    "parallel": "the number of parallel requests",
    "batch": "the batch size",
    "mem_share": "the engine's GPU memory share",
    "kv_dtype": "the KV-cache type",
    "cpu_offload": "CPU offload",
    "gpu_layers": "the layers on the GPU",
    "quant": "the quantization",
}


def _knob(backend: str | None, param: str) -> str | None:
    """The engine's own flag for a shared parameter (None: it has none)."""
    if backend is None:
        return _GENERIC_KNOBS.get(param)
    profile = ls.LOG_PROFILES.get(backend)
    if profile is not None and profile.knobs is not None:
        return profile.knobs.get(param)
    from vramtui.core.backends import get_backend

    try:
        return get_backend(backend).knob(param)
    except VramtuiError:
        return None


_PLACEHOLDER_RE = re.compile(r"\{(\w+)\}")


def _fill(template: str, backend: str | None, values: Mapping[str, str]) -> str | None:
    """Fill `{name}` with a computed value, else the engine's flag; None when the engine has no such flag."""
    names = _PLACEHOLDER_RE.findall(template)
    if not names:
        return template  # plain text: braces in it are the text's own
    filled: dict[str, str] = {}
    for name in names:
        flag = values[name] if name in values else _knob(backend, name)
        if flag is None:
            return None
        filled[name] = flag
    return template.format(**filled)


@dataclass(frozen=True)
class AdviceRow:
    """Advice for a failure class and a cause (None: any), at some stages (None: any)."""

    failure: str | None
    cause: str | None
    lines: tuple[str | Say, ...]
    stages: frozenset[str] | None = None

    def matches(self, failure: str, cause: str | None, stage: str | None) -> bool:
        return (
            (self.failure is None or self.failure == failure)
            and (self.cause is None or self.cause == cause)
            and (self.stages is None or stage in self.stages)
        )


# Causes that stop a run before the model is read: the command line or the port, refused at start-up.
# max_len_over_model: vLLM's config check refuses --max-model-len past the model's own length before any
# weight is read (QA 19 F8: it read "Failed at load_weights")
# budget_import: a budget too small for the engine to import its own modules (QA 26 D6: "failed at load
# weights" beside "before any weights were read")
BEFORE_THE_MODEL = frozenset(
    {
        "bad_argument",
        "port_in_use",
        "model_folder",
        "budget_start",
        "budget_import",
        "host_import",
        "max_len_over_model",
        "died_at_start",
    }
)
START_UP_WORDS = "start-up, before the model was read"


def before_the_model(diagnosis: Diagnosis) -> bool:
    """A failure before the model was read (a port held, a flag refused, a local file missing): said as
    the start-up's, not "at download" or "at load weights" (QA); the JSON keeps the stage's code."""
    if diagnosis.cause in BEFORE_THE_MODEL:
        return True
    # a local file that is not there: nothing was to be downloaded (QA 6: "Failed at download")
    return diagnosis.failure_stage == "download" and _missing_path(diagnosis) is not None


READ_THE_LINE = "Read the first error line above; the lines before it say which step was running."
_TORCH_FRAGMENTATION = "PyTorch fragmentation: set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True."
_LOADING = frozenset({"download", "load_weights"})
# The limit that was hit is the profile's own memory_budget (vramtui's header says so), or the machine's.
_RAISE_THE_LIMIT = (
    Say("Close other programs or raise the container's memory limit.", when="!own_budget"),
    Say(
        "The limit is vramtui's own memory budget ({budget_mib} MiB): raise the memory budget "
        + WHERE_BUDGET
        + ", or shrink the model.",
        when="own_budget",
    ),
)
_HOST_ALLOCATION = (
    # vLLM sizes its KV cache in bytes (set outright, or its share of the machine), not by the context
    Say(
        "Host RAM could not hold the KV cache the engine set aside ({kv_set}): set its size "
        "outright, {kv_cache_memory} {kv_fit_bytes} (the context does not size it here).",
        when="kv_set_aside !kv_asked",
    ),
    # ... where it was set outright already (QA 29 Q11: "set its size outright" to a run that had)
    Say(
        "Host RAM could not hold the {kv_set} KV cache asked for: ask for less, {kv_cache_memory} "
        "{kv_fit_bytes} (the context does not size it here).",
        when="kv_set_aside kv_asked",
    ),
    # while the weights load, the context has sized nothing yet
    Say("@host_weights", when="at_weights"),
    # eager attention's frames in the traceback: its score matrices took the room (QA 32 D15)
    Say("@eager_attention", when="eager_attention !at_weights"),
    Say(
        "Host RAM could not hold the buffer: lower {context}{budget_fit} or use a smaller quantization.",
        otherwise="Host RAM could not hold the buffer: lower the context or use a smaller quantization.",
        when="!kv_failed !kv_set_aside !at_weights",
    ),
    Say(
        "Host RAM could not hold the KV cache: lower {context}{budget_fit} (the cache grows with it).",
        otherwise="Host RAM could not hold the KV cache: lower the context (the cache grows with it).",
        when="kv_failed !kv_set_aside",
    ),
    Say("@kv_8bit", when="kv_failed !kv_quantized"),
    # llama-server's HTTP pool: a thread per slot, each an 8 MiB stack in the budget's address space (QA 12:
    # 16 slots' 20 threads under 250 MiB; the advice named the cache and never the slots)
    Say(
        "Its {http_threads} HTTP threads (one per slot, and four) each reserve an 8 MiB stack in the "
        "budget's address space: fewer slots, {parallel} {fewer_slots}, give that room back.",
        when="threads_take own_budget",
    ),
    *_RAISE_THE_LIMIT,
)
_BROKEN_FILE = (
    "The model file is incomplete or corrupt: download it again and compare its size or checksum.",
)

# The KV cache has no room for one request: the engine takes a share of the card, and the rest is what it
# leaves for the cache.
_KV_TOO_SMALL_GPU: tuple[str | Say, ...] = (
    # The weights alone are more than the share: the KV cache is not the problem, its type and the
    # context change nothing; the room has to come from the share, the weights' bytes or more cards.
    Say(
        "The weights alone ({weights_gib} GiB) are more than the engine's share of the card ({mem_share} "
        "{share_taken} of {share_total_gib} GiB = {share_gib} GiB): no KV-cache type or context makes room for them.",
        when="weights_over_share",
    ),
    Say(
        "Raise {mem_share} above {share_min} (the weights' own share) if nothing else uses the GPU.",
        when="weights_over_share weights_fit_card",
    ),
    Say(
        "Or fewer bytes per weight: a pre-quantized checkpoint (AWQ/GPTQ/FP8), with {quant} if it is not detected.",
        when="weights_over_share",
    ),
    Say("Or split the weights over more GPUs: {tensor_parallel_size} N.", when="weights_over_share"),
    Say("Or move part of the weights to host RAM: {cpu_offload} N (GiB).", when="weights_over_share"),
    # The engine already takes (nearly) the whole card: the room has to come from the weights.
    Say(
        "The engine already takes {share_taken} of the card ({mem_share}): the weights leave too "
        "little for the KV cache.",
        when="high_share !weights_over_share",
    ),
    Say(
        "Move part of the weights to host RAM: {cpu_offload} N, or use a smaller quantization.",
        when="high_share !weights_over_share",
    ),
    Say(
        "Store the KV cache in 8 bits: {kv_dtype} {kv_8bit} (half the bytes per token).",
        when="high_share !weights_over_share",
    ),
    Say("Lower the context{to_fit}: {context}{fit}.", when="high_share !weights_over_share"),
    Say(
        "Give the KV cache more room: raise {mem_share} (e.g. 0.95) if nothing else uses the GPU.",
        when="!high_share !weights_over_share",
    ),
    Say("Or lower the context{to_fit}: {context}{fit}.", when="!high_share !weights_over_share"),
    Say(
        "Store the KV cache in 8 bits: {kv_dtype} {kv_8bit} (half the bytes per token).",
        when="!high_share !weights_over_share",
    ),
    Say(
        "Move part of the weights to host RAM: {cpu_offload} N, or use a smaller quantization.",
        when="!high_share !weights_over_share",
    ),
)

# The lines of a topic where the engine has none of its own (see LogProfile.advice).
DEFAULT_TOPICS: dict[str, tuple[str | Say, ...]] = {
    "host_weights": ("Host RAM could not hold the weights: use a smaller quantization (a smaller file).",),
    "slots": (SLOTS_SPLIT,),
    "bnb_missing": (
        "Install bitsandbytes with GPU support where the engine runs (pip install -U bitsandbytes; the line "
        "names the version it needs), or run without bitsandbytes quantization.",
    ),
    "kv_too_small": ("@kv_too_small_gpu",),
    "kv_too_small_gpu": _KV_TOO_SMALL_GPU,
    # CUDA graphs are captured after the KV cache is sized: a smaller context or KV dtype frees nothing.
    "graph_capture": (
        "CUDA-graph capture ran out of memory: the graphs are allocated after the KV cache, outside the "
        '--gpu-memory-utilization share (vLLM: "CUDA graphs can take additional 1~3 GiB memory per GPU"); '
        "lower --gpu-memory-utilization (e.g. 0.85) to leave them room.",
        "Or skip the graphs: --enforce-eager (slower decoding, no graph memory).",
        "Or capture fewer batch sizes: a smaller --max-num-seqs.",
    ),
    "quant_not_in_checkpoint": (
        "The checkpoint is not quantized the way {quant} asks: drop {quant} for a 16-bit checkpoint, or serve "
        "a checkpoint quantized with that method (AWQ/GPTQ/FP8 repositories say so in their name).",
    ),
    # the KV pool of a serving engine ran dry under load: fewer sequences at once, or a bigger pool
    "kv_pool_exhausted": (
        "The KV cache ran out while serving: fewer sequences at once ({parallel}), smaller prefill chunks ({batch}).",
        "Or give the KV cache more room: raise {mem_share}, or store it smaller ({kv_dtype}).",
    ),
    "weights_oom": (
        "The weights do not fit: serve a pre-quantized checkpoint (AWQ/GPTQ/FP8) and pass {quant} if it is not detected.",
        "Keep part of the weights in host RAM: {cpu_offload} N (GiB).",
        Say(
            "Or split the model over several GPUs ({tensor_parallel_size} N), and make sure no other process "
            "holds GPU memory.",
            otherwise="Or split the model over several GPUs (tensor parallelism), and make sure no other "
            "process holds GPU memory.",
        ),
    ),
    "request_oom": (
        "A request needed more memory than was left: shorter inputs, fewer new tokens.",
        "Fewer sequences at once: {parallel}.",
        "Smaller prefill chunks: {batch}.",
        "Leave headroom for activations: lower {mem_share} a little (e.g. 0.85).",
        Say(_TORCH_FRAGMENTATION, when="is_torch"),
    ),
    # kv_cache, ready or unknown: the context-sized buffers did not fit.
    "compute_oom": (
        Say("Turn on flash attention: {flash_attn} (a much smaller compute buffer).", when="!flash_on"),
        "A smaller micro-batch: {ubatch} (the compute buffer grows with it).",
        Say("Then a shorter context: {context}{smaller}.", when="can_shorten"),
    ),
    "context_oom": (
        Say(
            "The weights alone take {weights_gib} of the card's {card_gib} GiB: no context, batch or KV-cache "
            "type leaves room beside them. Fewer bytes per weight (a pre-quantized AWQ/GPTQ/FP8 checkpoint), "
            "part of them in host RAM ({cpu_offload} N, in GiB), or more GPUs ({tensor_parallel_size} N).",
            when="weights_fill_card",
        ),
        Say(
            "Lower {context} {fit_tokens} (the engine says that is what fits).",
            when="fit_known !weights_fill_card",
        ),
        Say("Lower the context: {context}.", when="!fit_known !weights_fill_card"),
        Say(
            "Fewer concurrent sequences: {parallel}, and a smaller {batch}: the profile run sizes activations by them.",
            when="!weights_fill_card",
        ),
        Say("Store the KV cache in fp8: {kv_dtype} fp8.", when="!weights_fill_card"),
        "If other processes share the GPU, lower {mem_share}; the engine claims that share of the whole card.",
        "@context_oom_extra",
    ),
    "host_killed": ("Keep less in host RAM: lower {cpu_offload} or use a smaller checkpoint.",),
    "wrong_format": (
        "GGUF is llama.cpp's format: serve this file with llama.cpp (llama-server -m FILE) or Ollama; "
        "for {this_engine} use the original safetensors checkpoint or its AWQ/GPTQ version.",
    ),
    "unknown_arch": (
        "Use a newer llama.cpp build (or llama-cpp-python release) that knows this architecture.",
    ),
    "dtype": ("Load in float16 on the GPU (torch_dtype=torch.float16), float32 on the CPU.",),
    "file_missing": (
        # QA 6: a local file that is not there was advised about repository ids and tokens
        Say(
            "Check the path: no file at {missing_path} on this machine (a typo, another folder, or a volume "
            "not mounted into the container); nothing was to be downloaded.",
            when="local_path",
        ),
        Say(
            "Check the path or the repository id and revision (and a token for private repositories).",
            when="!local_path",
        ),
    ),
}

ADVICE: tuple[AdviceRow, ...] = (
    AdviceRow("cuda_oom", "cuda_graph_capture", ("@graph_capture",)),
    AdviceRow(
        None,
        "bad_argument",
        (
            # QA 32 D12: llama.cpp's "error while handling argument" is a known flag whose value it refused
            Say(
                "{refused_flag} takes no such value: give it one the usage lines under the error list (or the "
                "engine's --help); the flag itself is right, nothing was loaded, memory is not the problem.",
                when="value_refused",
            ),
            Say(
                "Remove or respell the flag the line names (the engine's --help lists what this build takes; a "
                "flag of a newer build needs that build): nothing was loaded, memory is not the problem.",
                when="!value_refused",
            ),
        ),
    ),
    AdviceRow(
        None,
        "died_at_start",
        (
            "Run the launch line (the log's first line) by hand to see why it ends at once: the program, "
            "its libraries or a script around it; nothing was loaded, memory is not the problem.",
        ),
    ),
    AdviceRow(
        None,
        "port_in_use",
        (
            "Another process listens on that port (another server, or an earlier run still up): stop it, "
            'or start this one on another port (in a vramtui profile, port = "auto" takes a free one).',
        ),
    ),
    AdviceRow(
        "cuda_oom",
        "gpu_full_at_start",
        (
            "The GPU was already full before the model loaded (asking the device for its free memory "
            "failed): free it, `nvidia-smi` shows the processes that hold it (another server, a notebook, "
            "a stale run).",
            "Or run on another card: CUDA_VISIBLE_DEVICES=N (the one nvidia-smi shows as free).",
        ),
    ),
    AdviceRow(
        "host_oom",
        "budget_import",
        (
            Say(
                "The memory budget of {budget_mib} MiB is too small to even import {the_engine}: it failed "
                "while importing its modules (a MemoryError, or a library it could not map), before any "
                "weights were read.",
                otherwise="The memory budget is too small to even import {the_engine}: it failed while "
                "importing its modules (a MemoryError, or a library it could not map), before any weights "
                "were read.",
            ),
            "Raise the memory budget " + WHERE_BUDGET + " well above what the engine takes before "
            "loading anything (importing PyTorch alone maps about {torch_import_mib} MiB of address "
            "space, and the engine's own libraries more), or run without a budget.",
        ),
    ),
    AdviceRow(
        "host_oom",
        "host_import",
        (
            "Host memory ran out while {the_engine} was still importing its own modules, before it read the "
            "model: a smaller model or quantization does not help.",
            "Free host RAM (close other programs), or raise the process's limit (`ulimit -v`, the "
            "container's memory limit): importing PyTorch alone maps about {torch_import_mib} MiB of "
            "address space, and the engine's own libraries more.",
        ),
    ),
    AdviceRow(
        "host_oom",
        "budget_start",
        (
            Say(
                "The memory budget of {budget_mib} MiB is too small for {the_engine} to start: it died "
                "before reading any weights (no room for its threads or libraries); no engine setting helps.",
                otherwise="The memory budget is too small for {the_engine} to start: it died before reading "
                "any weights (no room for its threads or libraries); no engine setting helps.",
            ),
            Say(
                "Raise the memory budget " + WHERE_BUDGET + " well above the {engine_floor_mib} MiB the "
                "engine itself needs to come up (measured by vramtui on this binary), with room for the "
                "model's buffers on top, or run without a budget.",
                otherwise="Raise the memory budget " + WHERE_BUDGET + " well above what the engine "
                "holds before it loads anything (a few hundred MiB of address space), or run without a budget.",
            ),
        ),
    ),
    AdviceRow(
        "host_oom",
        "budget_no_serve",
        (
            Say(
                "{the_engine} loaded the model and listened, then answered every readiness probe with an error "
                "under the memory budget of {budget_mib} MiB (its request handlers had no room): no setting of "
                "the model's buffers gives its HTTP side that room.",
                otherwise="{the_engine} loaded the model and listened, then answered every readiness probe with "
                "an error under the memory budget: no setting of the model's buffers gives its HTTP side room.",
            ),
            "Raise the memory budget " + WHERE_BUDGET + " by a few tens of MiB, or run without a budget; "
            "without one, the same server should answer at once.",
        ),
    ),
    AdviceRow(
        "host_oom",
        "thread_no_room",
        (
            "The weights and the KV cache were in and the engine could not start its compute threads: "
            "free some of the budget, a smaller batch ({batch}: it caps the micro-batch, which sizes the "
            "compute buffer), a shorter context ({context}{smaller}) or a smaller quantization, or raise the "
            "memory budget " + WHERE_BUDGET + ".",
        ),
    ),
    AdviceRow(
        "host_oom",
        "http_threads_start",
        (
            "The server starts {http_threads} HTTP threads before it loads anything, one per slot and a few, "
            "each reserving its stack in the budget's address space: fewer slots, {parallel} {fewer_slots}, "
            "let it start (or raise the memory budget " + WHERE_BUDGET + ").",
        ),
    ),
    AdviceRow("host_oom", "loader_threads", ("@loader_threads_budget",)),
    AdviceRow("host_oom", "swap_space_pinned", ("@swap_space_pinned",)),
    AdviceRow("other", "loader_threads", ("@loader_threads",)),
    AdviceRow(
        "other",
        "thread_start",
        (
            "The engine could not start a thread: raise the limit on processes (`ulimit -u`) or the "
            "container's pids limit, or free memory; then launch it again.",
        ),
    ),
    # A GPU's compute buffer: host limits and other programs' RAM have nothing to do with it.
    AdviceRow("cuda_oom", "compute_alloc_failed", ("@compute_oom",)),
    AdviceRow(None, "compute_alloc_failed", ("@compute_oom", *_RAISE_THE_LIMIT)),
    AdviceRow(
        "cuda_oom",
        "gpu_share_short",
        (
            "Something else holds GPU memory, or the share asked for is more than is free: stop what "
            "holds the GPU (`vramtui check` names the holders), or ask for less.",
            "Ask for no more than the free share: {mem_share} {free_share} (the error says what is free).",
        ),
    ),
    AdviceRow(
        "cuda_oom",
        "prefill_warmup",
        (
            "The warmup's prefill does not fit: lower {batch} (the tokens of one prefill), and {context} with it.",
        ),
    ),
    AdviceRow(
        "cuda_oom",
        "bnb_cpu_dispatch",
        (
            "The quantized model does not fit the GPU: use a smaller model, or allow CPU offload with "
            "llm_int8_enable_fp32_cpu_offload=True and a custom device_map.",
        ),
    ),
    AdviceRow("cuda_oom", None, ("@weights_oom",), stages=_LOADING),
    AdviceRow("cuda_oom", None, ("@request_oom",), stages=frozenset({"inference"})),
    AdviceRow("cuda_oom", None, ("@context_oom",)),
    AdviceRow("kv_cache_too_small", "kv_pool_exhausted", ("@kv_pool_exhausted",)),
    AdviceRow("kv_cache_too_small", None, ("@kv_too_small",)),
    # An engine's own causes, each its topic (LogProfile.advice): the knob its message points at.
    AdviceRow(None, "cpu_share_short", ("@cpu_share_short",)),
    AdviceRow(None, "kv_bytes_over_free", ("@kv_bytes_over_free",)),
    AdviceRow(None, "max_len_over_model", ("@max_len_over_model",)),
    AdviceRow(None, "quant_not_in_checkpoint", ("@quant_not_in_checkpoint",)),
    AdviceRow(None, "v_cache_needs_flash_attn", ("@v_cache_needs_flash_attn",)),
    AdviceRow(None, "too_many_sequences", ("@too_many_sequences",)),
    AdviceRow("other", "worker_died", ("@worker_died",)),
    AdviceRow(None, "gpus_short", ("@gpus_short",)),
    AdviceRow(
        None,
        "library_missing",
        (
            "Not a memory failure: the loader did not find the library the line names. Install the runtime the "
            "build was made for (a libcudart / libcublas of its CUDA major version), or point LD_LIBRARY_PATH at it; "
            "for an engine's own kernel library, reinstall the engine built for this torch and driver.",
        ),
    ),
    AdviceRow(
        None,
        "nan_in_compute",
        (
            "Not a memory failure: an operation produced NaN or inf. Change one numeric path to find which: the "
            "KV cache type back to f16, flash attention off, or another build; report it with the build and flags.",
        ),
    ),
    AdviceRow(
        None,
        "no_kernel_image",
        (
            "Not a memory failure: this build of the engine (or of torch / Triton under it) has no GPU code "
            "for this card. Check the card's compute capability (nvidia-smi --query-gpu=compute_cap "
            "--format=csv) against the build's (python -c 'import torch; print(torch.cuda.get_arch_list())').",
            "Install a build made for it: a newer card (RTX 50-series, sm_120) needs CUDA 12.8+ wheels; an older "
            "one (below sm_70) needs a release that still ships its code, or a source build "
            "(TORCH_CUDA_ARCH_LIST, CMAKE_CUDA_ARCHITECTURES).",
        ),
    ),
    AdviceRow(
        None,
        "heap_corruption",
        (
            "Not a memory failure: native code freed memory twice or wrote past a buffer, and glibc stopped the "
            "process. No memory setting changes it: note the call the stack shows it in (NCCL set-up, a kernel "
            "library), try another build of the engine or of that library, and report it with both versions.",
        ),
    ),
    AdviceRow(
        None,
        "triton_shared_memory",
        (
            "Not a memory failure: a compiled Triton kernel needs more on-chip shared memory than this card's "
            "limit (the line gives both), and no memory setting changes that. Run without the compile step that "
            "made it (SGLang: drop --enable-torch-compile; vLLM: --enforce-eager or a lower compilation "
            "level), or pick another attention or MoE backend; report the kernel, the card and the build.",
        ),
    ),
    AdviceRow(
        None,
        "no_gpu_torch",
        (
            "Not a memory failure: the model was sent to a GPU that torch cannot use. Check python -c 'import "
            "torch; print(torch.cuda.is_available(), torch.version.cuda)' and nvidia-smi: a CPU-only torch "
            "needs a CUDA build (pip install torch --index-url https://download.pytorch.org/whl/cu128), and "
            "a machine with no GPU loads on the CPU (a device map of cpu, or auto).",
        ),
    ),
    AdviceRow(
        None,
        "triton_image",
        (
            "Not a memory failure: Triton compiled a kernel the NVIDIA driver cannot load, usually a driver "
            'older than the CUDA that torch and Triton were built for. Compare nvidia-smi\'s "CUDA Version" '
            "with python -c 'import torch; print(torch.version.cuda)'.",
            "Update the driver, or install a torch (and engine) build for the driver's CUDA; TRITON_PTXAS_PATH "
            "can point Triton at the system's own ptxas.",
        ),
    ),
    AdviceRow(
        None,
        "shift_unsupported",
        (
            Say(
                "Give each slot more context: raise {context}, or lower {parallel} (the slots share the "
                "context), so prompt and reply fit without a shift.",
                otherwise="Give each slot more context (a larger context, or fewer parallel slots), so prompt "
                "and reply fit without a shift.",
            ),
            "Or cap each reply's length (n_predict / max_tokens) below what the slot has left after the prompt.",
        ),
    ),
    AdviceRow(
        "context_too_long",
        "prompt_over_slot",
        (
            "The request is longer than its slot's context: send a shorter input or raise {context} (it costs "
            "KV-cache memory).",
            "@slots",
            "Raise the input limit too: {input}.",
        ),
    ),
    AdviceRow(
        "context_too_long",
        "request_refused",
        (
            "The server refused requests (HTTP 400) and its log does not say why: {the_engine} sends the "
            "reason to the client. The usual one is a prompt longer than {context}: read the client's error, then send "
            "a shorter input or raise {context} (it costs KV-cache memory).",
        ),
    ),
    AdviceRow(
        "context_too_long",
        None,
        (
            "The request is longer than the context: send a shorter input or raise {context} (it costs KV-cache memory).",
            SLOTS_SPLIT,
            "@context_too_long",
            "Raise the input limit too: {input}.",
        ),
    ),
    # a client whose request the server dropped with no answer: the server's own log says why
    AdviceRow("host_oom_killed", "server_dropped", ("@server_dropped", "{kernel_word}")),
    AdviceRow("unsupported_quant", "kv_type_block_mismatch", ("@kv_type_block_mismatch",)),
    AdviceRow(
        "host_oom_killed",
        None,
        (
            "{kernel_word}",
            Say(
                "{host_ran_out}{while_doing}: close other programs, add swap, or raise the container's memory limit.",
                when="!own_budget",
            ),
            Say(
                "{host_ran_out}{while_doing} under vramtui's own memory budget ({budget_mib} MiB): raise "
                "the memory budget " + WHERE_BUDGET + ", or shrink the model.",
                when="own_budget",
            ),
            "@host_killed",
        ),
    ),
    AdviceRow("unsupported_quant", "wrong_format", ("@wrong_format",)),
    AdviceRow("unsupported_quant", "bnb_missing", ("@bnb_missing",)),
    AdviceRow(
        "other",
        "killed_outside",
        (
            "Nothing in the engine to change: find what sent the kill (a `kill` by hand, a supervisor's "
            "restart or health check, a job's time limit), then start it again.",
            "{kernel_word}",
        ),
    ),
    AdviceRow(
        "other",
        "config_invalid",
        (
            "Fix the model folder's config.json: it does not parse as JSON (the JSONDecodeError above gives "
            "the line and column; `vramtui estimate FOLDER` reads it and says where too), or download it again.",
        ),
    ),
    AdviceRow("other", "flash_attn_missing", ("@flash_attn_missing",)),
    AdviceRow("other", "runner_start_timeout", ("@runner_start_timeout",)),
    AdviceRow(
        "unsupported_quant",
        "torch_checkpoint",
        (
            "Convert the checkpoint to GGUF (llama.cpp's convert_hf_to_gguf.py on the Hugging Face "
            "folder), or download a GGUF of the model.",
        ),
    ),
    AdviceRow(
        "unsupported_quant",
        "quant_kernel_missing",
        (
            "Not a memory failure: the GEMM kernel for this checkpoint's quantization has no code for this "
            "card (a new one, such as a GB10 or an RTX 50-series, before its build caught up; or one below the "
            "method's minimum capability). Use a checkpoint in another format (FP8 or 16-bit instead of NVFP4, "
            "or AWQ / GPTQ), or an engine build made for this card's compute capability.",
        ),
    ),
    AdviceRow(
        "unsupported_quant",
        "removed_ggml_type",
        (
            "This build no longer reads the file's tensor type (the line names its replacement): get or "
            "make the model in a current type; upgrading will not help, an older build would.",
        ),
    ),
    AdviceRow(
        "unsupported_quant",
        "old_format",
        (
            "This build predates the file's format (GGUF): upgrade it (pip install -U llama-cpp-python / a newer llama.cpp), or use a file made for this version.",
        ),
    ),
    AdviceRow(
        "unsupported_quant",
        None,
        (
            # The engine said what it reads: naming the method it refused would not help.
            Say(
                "This build of {the_engine} reads only {supported}: use a checkpoint quantized that way, or upgrade it.",
                when="supported_list",
            ),
            Say("Upgrade {the_engine} or pick a quantization it supports.", when="!supported_list"),
            Say("Choose the method explicitly: {quant} (awq, gptq, fp8 ...).", when="!supported_list"),
        ),
    ),
    AdviceRow(
        "unknown_arch",
        "cpu_attn_head_dim",
        (
            "vLLM's CPU attention kernels do not take this model's head size (the error's head_dim): no "
            "setting changes it. Run the model on a GPU build of vLLM, or on llama.cpp (a GGUF of it), "
            "which runs any head size on the CPU.",
        ),
    ),
    AdviceRow(
        "unknown_arch",
        "fallback_no_tp",
        (
            "This vLLM has no implementation of the model's architecture (its log says it falls back to "
            "Transformers), and that fallback cannot split this model over GPUs: upgrade vLLM to a release "
            "that implements it, or run it on one GPU (--tensor-parallel-size 1) if it fits.",
        ),
    ),
    AdviceRow("unknown_arch", None, ("@unknown_arch",)),
    AdviceRow(
        "shape_mismatch",
        None,
        (
            "The file does not match the architecture the loader builds: re-convert it with the converter of this engine version, or re-download it.",
            "Check that config.json matches the weights (e.g. num_key_value_heads for grouped-query attention).",
        ),
    ),
    AdviceRow(
        "dtype_unsupported",
        "kv_dtype_no_backend",
        (
            "No attention backend of this build runs the KV cache type asked for: leave {kv_dtype} at its "
            "default (the model's own type), or store it in 8 bits ({kv_dtype} fp8).",
        ),
    ),
    AdviceRow(
        "dtype_unsupported",
        "dtype_op_missing",
        (
            "An operation of this torch build has no kernel for the data type the error names: choose "
            "another type for the part that holds it (the KV cache's type, or the model's dtype).",
        ),
    ),
    AdviceRow("dtype_unsupported", None, ("@dtype",)),
    AdviceRow(
        None,
        "tokenizer_files",
        (
            "The tokenizer could not be built from the model folder: it needs tokenizer.json (or "
            "tokenizer.model with tokenizer_config.json); copy the tokenizer files from the original "
            "repository, or pass the tokenizer's repository/path separately.",
            "Converting a slow (SentencePiece/tiktoken) tokenizer needs its library: pip install sentencepiece "
            "(or tiktoken).",
        ),
    ),
    AdviceRow(
        None,
        "model_not_found",
        (
            "The server has no model by the name the client sent: load or pull it (Ollama: `ollama pull NAME`), "
            "or make the client use a name the server lists (GET /v1/models).",
        ),
    ),
    AdviceRow(
        None,
        "model_folder",
        (
            "{model_folder} is a folder on this machine: give the model file in it ({model_flag} "
            "{model_folder}/MODEL.gguf; a split GGUF by its first part, ...-00001-of-0000N.gguf).",
        ),
    ),
    AdviceRow(None, "truncated_file", _BROKEN_FILE),  # a file cut short: before the missing file's advice
    AdviceRow("file_missing", None, ("@file_missing",)),
    AdviceRow(
        "network",
        None,
        (
            "Check the connection, proxy and DNS (containers often need --network host or a DNS server).",
            "Download once where it works (`huggingface-cli download` / `ollama pull`) and run offline (HF_HUB_OFFLINE=1), or set HF_ENDPOINT to a mirror.",
        ),
    ),
    AdviceRow(
        "disk_full",
        None,
        ("Free disk space, or point the model cache at a bigger disk (HF_HOME, OLLAMA_MODELS).",),
    ),
    # The engine compared the whole model with free RAM: the weights are what does not fit (before the
    # host_oom row, which would advise a shorter context first).
    AdviceRow(
        None,
        "host_ram_short",
        (
            Say(
                "The model needs more host RAM than is free: use a smaller quantization or a smaller model "
                "(a shorter {context} saves only the KV cache).",
                otherwise="The model needs more host RAM than is free: use a smaller quantization or a smaller "
                "model (a shorter context saves only the KV cache).",
            ),
            *_RAISE_THE_LIMIT,
        ),
    ),
    AdviceRow("host_oom", None, _HOST_ALLOCATION),
    AdviceRow(None, "host_alloc", _HOST_ALLOCATION),
    AdviceRow(
        None,
        "bad_magic",
        (
            "The file is not a model (often an HTML page saved instead of the weights): download it again and check its size.",
        ),
    ),
    AdviceRow(
        None,
        "device_assert",
        (
            "Keep {context} within the model's trained length (max_position_embeddings): a kernel indexed "
            "past its table. Past it only with the model's own RoPE scaling, not an override.",
        ),
    ),
    AdviceRow(
        None,
        "kernel_assert",
        (
            "Not a memory failure: a GPU kernel's own check failed on the data it was given. Rerun with "
            "CUDA_LAUNCH_BLOCKING=1 to see where; with a multimodal model, check that each request's images "
            "match its placeholders (a prompt cut at the context can drop some), and try a newer engine release.",
        ),
    ),
    AdviceRow(
        None,
        "kernel_fault",
        (
            "Not a memory failure: the GPU faulted. Read the kernel log for the reset and its reason (dmesg: "
            "NVIDIA's Xid, amdgpu's job timeout or ring hang); a fault under load that comes back is often the "
            "card's power, clocks or heat (a lower power limit settles it), else the driver or the engine build: "
            "try a newer (or the last good) release.",
        ),
    ),
    AdviceRow(None, "bad_file", _BROKEN_FILE),
    AdviceRow(
        None,
        "gated_repo",
        ("Accept the model's licence on its hub page and log in (`huggingface-cli login` or HF_TOKEN).",),
    ),
    AdviceRow(
        None,
        "download_failed",
        ("The download failed: check the token for gated models (HF_TOKEN) and the network.",),
    ),
    AdviceRow(
        None,
        "disk_offload",
        (
            "The model does not fit GPU and host memory: quantize it (load_in_4bit / a pre-quantized "
            "checkpoint), raise max_memory if it was set low, or accept slow disk offload with "
            'offload_folder="...".',
        ),
    ),
    AdviceRow(None, None, (READ_THE_LINE,)),
)


def _address_floor(backend: str | None) -> int:
    """What the engine's largest process maps before the model's buffers, under a host budget (its
    backend's figure; 0 for an engine vramtui does not launch)."""
    from vramtui.core.backends import get_backend

    try:
        return int(get_backend(backend).address_space_floor) if backend else 0
    except VramtuiError:
        return 0


def _assumed_floor(backend: str | None) -> int:
    """What the engine itself takes of a host budget where no measure of it is in the log: its backend's
    figure (llama-server's 240 MiB), a safe side of the measured 131-160 MiB."""
    from vramtui.core.backends import get_backend

    try:
        return int(get_backend(backend).host_baseline_bytes) if backend else 0
    except VramtuiError:
        return 0


def _fitted_context(
    figures: dict[str, int | float], flash_attn: bool, backend: str | None = None
) -> int | None:
    """The context whose growing buffers fit the host budget the log names, from the engine's own figures.

    The failed allocation is the KV cache when no KV buffer was printed (else the compute buffer); both
    grow linearly with the context. Where llama.cpp's fit projected its compute buffer for this context, it
    is taken to shrink with the context (its KQ mask does); else without flash attention the compute buffer holds
    the attention scores, n_ctx x n_ubatch x n_head floats; unknown, it is taken as large as the KV cache.
    What the engine itself needs of the budget is in vramtui's header when it was measured (QA 23 D4: without
    it the advice was 8192 where the wizard's 16384 runs); rounding down to a power of two leaves room.
    """
    budget = figures.get("host_budget")
    context = int(figures.get("context") or 0)
    failed = figures.get("oom_requested")
    if not budget or not context or not failed:
        return None
    kv_printed = figures.get("kv_buffer")
    kv_per_token = (kv_printed or failed) / context
    fixed = (figures.get("model_buffer") or 0) + (figures.get("output_buffer") or 0)
    fixed += figures.get("engine_floor") or _assumed_floor(backend)
    if kv_printed:
        compute_per_token = failed / context
    elif flash_attn:
        compute_per_token = 0.0
    elif figures.get("fit_breakdown_compute"):
        # its largest part is the KQ mask, n_ctx x n_ubatch: it shrinks with the context (QA 24 F1: taken
        # whole, 265 MiB at 262144 left no room, and the advice fell back to halving, 131072)
        compute_per_token = figures["fit_breakdown_compute"] / context
    elif figures.get("ubatch_tokens") and figures.get("attention_heads"):
        compute_per_token = figures["ubatch_tokens"] * figures["attention_heads"] * 4
    else:
        compute_per_token = kv_per_token
    room = budget - fixed
    if room <= 0:
        return None
    fits = room / (kv_per_token + compute_per_token)
    power = 512
    while power * 2 <= fits:
        power *= 2
    return power if power < context else None


# Below this a shorter context is no advice: a prompt and its answer need room.
_SHORTEST_CONTEXT = 256


def _context_now(figures: dict[str, int | float]) -> int:
    return int(figures.get("context") or figures.get("kv_cache_cells") or 0)


def _smaller_context(
    figures: dict[str, int | float], flash_attn: bool, slots_flag: str = "", backend: str | None = None
) -> str:
    """The " N (now M)" of the context advice: fitted to a host budget the log names, else half.
    `slots_flag`: the engine's flag for the slots, named when each would get too few tokens."""
    context = _context_now(figures)
    if not context or context <= _SHORTEST_CONTEXT:
        return ""
    fitted = _fitted_context(figures, flash_attn, backend)
    per_slot = int(figures.get("context_per_sequence") or context)
    slots = max(1, context // per_slot)  # the slots share the context: each gets its part
    if fitted is not None:
        budget = int(figures["host_budget"]) >> 20
        return (
            f" {fitted} (now {context}{_per_slot(fitted, slots, slots_flag)}; an estimate: the buffers that grow with the "
            f"context fit the {budget} MiB budget at about that size; `vramtui wizard` measures it)"
        )
    smaller = max(context // 2, _SHORTEST_CONTEXT)
    return f" {smaller} (now {context}{_per_slot(smaller, slots, slots_flag)})"


# A slot's share of the context below this holds no more than a short chat turn (QA 12: steps went on to
# 256 tokens a slot with no word; the wizard says it too)
SHORT_SLOT_TOKENS = 1024


def _per_slot(context: int, slots: int, slots_flag: str = "") -> str:
    if slots <= 1:
        return ""
    share = context // slots
    short = ""
    if share < SHORT_SLOT_TOKENS:  # QA 12: "--ctx-size 2048 (128 tokens for each of the 16 slots)"
        flag = f" ({slots_flag})" if slots_flag else ""
        short = f", too few for a prompt and its answer: fewer slots{flag} first"
    return f"; {share} tokens for each of the {slots} slots{short}"


def _while(diagnosis: Diagnosis) -> str:
    """Where the host ran out, when a line says so."""
    if diagnosis.stage_inferred or diagnosis.failure_stage is None:
        return ""
    return {
        "download": " while loading",
        "load_weights": " while loading",
        "inference": " serving a request",
    }.get(diagnosis.failure_stage, " while setting up the context")


_HIGH_SHARE = 0.9
# The address space (VmPeak) of `python -c "import torch"` with the CPU build of PyTorch 2 here; CUDA
# builds map more. Said as an order of magnitude, not a limit.
_TORCH_IMPORT_MIB = 630  # a memory share at or above this leaves nothing to raise
_FREE_OF_TOTAL_RE = re.compile(r"\((\d+(?:\.\d+)?)/(\d+(?:\.\d+)?) GiB\)")
_SUPPORTED_LIST_RE = re.compile(r"must be one of \[([^\]]+)\]", re.IGNORECASE)


def _kernel_word(kernel_note: str | None, kills_elsewhere: str | None) -> str:
    """What the kernel log says of an OOM kill, or where to look."""
    if kills_elsewhere:
        return kills_elsewhere
    if kernel_note:
        return "The kernel log confirms the OOM killer."
    if kernel_note == "":
        return (
            "This machine's kernel log has no OOM-killer line: if the server ran elsewhere (another host, a "
            "container, a pod) look there; otherwise a supervisor or a timeout may have sent the kill."
        )
    return (
        "To confirm, look in the kernel log: `sudo dmesg -T | grep -i -E 'killed process|out of memory'` "
        "or `journalctl -k | grep -i oom`; in Docker `docker inspect -f '{{.State.OOMKilled}}' NAME`; "
        "in Kubernetes `kubectl describe pod` (Reason: OOMKilled)."
    )


def _kv_8bit(backend: str | None) -> dict[str, str]:
    """{"kv_8bit": the engine's 8-bit KV cache type} (fp8 where the engine is not known), else {}."""
    if backend is None:
        return {"kv_8bit": "fp8"}
    from vramtui.core.backends import get_backend

    try:
        backend_object = get_backend(backend)
    except VramtuiError:  # a log-only engine (SGLang, TGI): their 8-bit type is fp8
        return {"kv_8bit": "fp8"}
    found = backend_object.kv_8bit()
    return {"kv_8bit": found} if found else {}


def _free_share(error_text: str) -> str:
    """The share of the card that is free, from vLLM's "(free/total GiB)", less a little; else 0.80."""
    free = _FREE_OF_TOTAL_RE.search(error_text)
    if free and float(free.group(2)) > 0:
        return f"{max(int((float(free.group(1)) / float(free.group(2)) - 0.02) * 100), 1) / 100:.2f}"
    return "0.80"


# A file path the first error names: quoted, or after "does not exist:" (absolute, home or relative)
_PATH_RE = re.compile(
    # a path from the root, the home or the working folder, or a model file named relative to it
    # (QA 34 L4: 'models/nope.gguf' read as a repository to download)
    r"""['"`]((?:/|~|\.{1,2}/|[A-Za-z]:\\)[^'"`]+|[^'"`\s]+\.(?:gguf|bin|safetensors))['"`]"""
    r"""|does not exist:\s*((?:/|~|\.{1,2}/)\S+)"""
)


def _missing_path(diagnosis: Diagnosis) -> str | None:
    """The local path a missing file's first error names, or None (a repository id, no path)."""
    if diagnosis.cause != "not_found_local":
        return None
    found = _PATH_RE.search(diagnosis.first_error_text or "")
    return (found.group(1) or found.group(2)) if found else None


# A known flag whose value the engine refused: llama.cpp's common/arg.cpp ('error while handling argument
# "--ctx-size": stoi'), argparse's ("argument --kv-cache-dtype: invalid choice: 'q9'")
_VALUE_REFUSED_RE = re.compile(
    r'error while handling argument "(-[\w-]+)"|argument (-[\w-]+)(?:/-[\w-]+)*: invalid'
)


def _refused_flag(diagnosis: Diagnosis) -> str | None:
    if diagnosis.cause != "bad_argument":
        return None
    found = _VALUE_REFUSED_RE.search(diagnosis.first_error_text or "")
    return (found.group(1) or found.group(2)) if found else None


def _folder_values(diagnosis: Diagnosis) -> dict[str, str]:
    """The folder given as the model, and the engine's flag for the model."""
    folder = folder_named(diagnosis.evidence) if diagnosis.cause == "model_folder" else None
    if folder is None:
        return {}
    return {"model_folder": folder, "model_flag": _knob(diagnosis.backend, "model") or "-m"}


def _slot_split(figures: dict[str, float]) -> dict[str, str]:
    """A context split over slots (llama.cpp's n_ctx_seq below its n_ctx): how many, and each one's share."""
    context, per_slot = figures.get("context"), figures.get("context_per_sequence")
    if not context and per_slot and figures.get("server_slots"):  # llama-server's slot line alone
        context = per_slot * figures["server_slots"]
    if not context or not per_slot or per_slot >= context:
        return {}
    return {
        "slot_count": str(round(context / per_slot)),
        "per_slot": f"{int(per_slot):,}",
        "context_cells": f"{int(context):,}",
    }


def _values(
    diagnosis: Diagnosis, formats: set[str], kernel_note: str | None, kills_elsewhere: str | None
) -> dict[str, str]:
    """The computed values the templates name (the rest of their names are the engine's flags)."""
    figures = diagnosis.engine_figures
    flash_attn = "flash_attn" in formats
    fit = figures.get("max_model_len_fit")
    memory_share = figures.get("memory_share")
    supported = _SUPPORTED_LIST_RE.search(diagnosis.first_error_text or "")
    missing = _missing_path(diagnosis)
    slots_flag = _knob(diagnosis.backend, "parallel") or ""
    values = {
        **_slot_split(figures),
        **({"missing_path": missing} if missing else {}),
        **_folder_values(diagnosis),
        **({"refused_flag": flag} if (flag := _refused_flag(diagnosis)) else {}),
        "free_share": _free_share(diagnosis.first_error_text or ""),
        "fit": f" {int(fit)}" if fit else "",
        "to_fit": " to what fits" if fit else "",
        "smaller": _smaller_context(figures, flash_attn, slots_flag, diagnosis.backend),
        "budget_fit": (
            _smaller_context(figures, flash_attn, slots_flag, diagnosis.backend)
            if figures.get("context")
            else ""
        ),
        "the_engine": diagnosis.backend or "the engine",
        "this_engine": diagnosis.backend or "this engine",
        "while_doing": _while(diagnosis),
        # the log's own line named the OOM killer: nothing to confirm in a kernel log
        "kernel_word": "" if diagnosis.cause in SAYS_KILLED else _kernel_word(kernel_note, kills_elsewhere),
        # the engine's own 8-bit KV type (vLLM's fp8, llama.cpp's q8_0); none: the line is not said
        **_kv_8bit(diagnosis.backend),
        # a bare kill is the OOM killer's only where a line or the kernel log says so
        "host_ran_out": "Host RAM ran out"
        if diagnosis.cause in SAYS_KILLED or kernel_note
        else "If it was host RAM that ran out",
    }
    if figures.get("host_budget"):
        values["budget_mib"] = f"{int(figures['host_budget']) >> 20}"
    if figures.get("engine_floor"):  # vramtui measured it on the binary (the run log's header says so)
        values["engine_floor_mib"] = f"{int(figures['engine_floor']) >> 20}"
    values["torch_import_mib"] = str(_TORCH_IMPORT_MIB)
    if fit:
        values["fit_tokens"] = str(int(fit))
    if memory_share:
        values["share_taken"] = f"{memory_share:g}"
    if _weights_fill_card(figures) or _weights_over_share(figures):
        values["weights_gib"] = f"{figures['weights_loaded'] / (1 << 30):.2f}"
        values["card_gib"] = f"{_card_total(figures) / (1 << 30):.2f}"
    if _weights_over_share(figures):
        total = _card_total(figures)
        values["share_total_gib"] = f"{total / (1 << 30):.2f}"
        values["share_gib"] = f"{total * figures['memory_share'] / (1 << 30):.2f}"
        values["share_min"] = f"{_share_min(figures):.2f}"
    if _file_bits(diagnosis):
        values["file_bits"] = str(_file_bits(diagnosis))
    if supported:
        values["supported"] = supported.group(1).replace("'", "")
    values.update(_memory_values(diagnosis))
    values.update(_slot_values(figures))
    values.update(_thread_values(figures))
    values.update(_kv_values(figures, _address_floor(diagnosis.backend)))
    return values


def _kv_values(figures: dict[str, int | float], floor: int = 0) -> dict[str, str]:
    kv, budget = kv_set_aside(figures), figures.get("host_budget")
    # beside what the engine held besides the cache: vLLM's non-KV memory (weights, activations), and what
    # its process tree held when it failed, where vramtui sampled it (its CPU worker and its libraries),
    # as the wizard sizes it (QA: diagnose said 3 GiB where check and the wizard said 2275 MiB; QA 19 F2);
    # under a budget at least what its largest process maps (`floor`: QA 29, 197M advised, 194 MiB failed)
    used = max(figures.get("non_kv_memory") or 0, figures.get("tree_peak") or 0, floor if budget else 0)
    if not kv and budget and figures.get("node_free_memory"):
        # no cache sized yet (the CPU build's share refused at start): one sized outright for the budget,
        # as the wizard's first move sizes it
        fit = kv_bytes_for_budget(min(budget, figures["node_free_memory"]), budget, used)
        return {"kv_fit_bytes": engine_size(fit, down=True)}
    if not kv:
        return {}
    fit = kv_bytes_for_budget(kv, budget, used) if budget else int(kv / 2)
    said = {"kv_set": format_bytes(kv, 1)}  # 16 MiB said as such, not "0.0 GiB" (QA 37 F13)
    if fit >= kv:  # no smaller cache makes room (QA 37 F3: "ask for less, 16M" to a run that had 16M)
        return said
    # in the flag's own units (QA 14: "--kv-cache-memory-bytes 1325400064"), rounded down: it must fit
    return {**said, "kv_fit_bytes": engine_size(fit, down=True)}


def _thread_values(figures: dict[str, int | float]) -> dict[str, str]:
    """The HTTP threads a server started and the slots whose threads fit a quarter of the budget."""
    threads, budget = figures.get("http_threads"), figures.get("host_budget")
    if not threads or not budget:
        return {}
    return {
        "http_threads": str(int(threads)),
        "fewer_slots": str(slots_whose_threads_fit(threads, None, budget)),
    }


def _slot_values(figures: dict[str, int | float]) -> dict[str, str]:
    """The context per request where an engine gives its runner the context times the parallel requests
    (Ollama's `--parallel` on its runner line): the setting a user lowers is that share, not the cells."""
    context, slots = int(figures.get("context") or 0), int(figures.get("runner_parallel") or 1)
    if not context or slots < 1:
        return {}
    share = context // slots
    return {
        "runner_parallel": str(slots),
        "slot_context": str(share),
        "slot_context_smaller": str(max(share // 2, 256)),
    }


_QUANT_ASKED_RE = re.compile(r"config file for (\w+)", re.IGNORECASE)


def engine_size(size: float, *, down: bool = False) -> str:
    """A size as engines parse it in their flags ("16M", "4G", "3277M": binary units, whole numbers, which
    vLLM's parser demands: "3.2G" is refused, "Decimals are not allowed with binary suffixes", QA 29),
    rounded up a little; `down`: rounded down instead (a size that must stay within a budget)."""
    mib = size / (1 << 20)
    if mib < 1:
        kib = size // 1024 if down else -(-size // 1024)
        return f"{max(1, int(kib))}K"  # a cache under 1 MiB (a tiny model's), not "1M"
    tenths = mib * 10 // 1024 if down else -(-mib * 10 // 1024)
    if mib >= 1024 and tenths % 10 == 0:
        return f"{int(tenths // 10)}G"
    if mib >= 1024:  # a tenth of a GiB, in whole MiB
        return f"{int(tenths * 1024 // 10 if down else -(-tenths * 1024 // 10))}M"
    return f"{max(1, int(mib // 1 if down else -(-mib // 1)))}M"


def _memory_values(diagnosis: Diagnosis) -> dict[str, str]:
    """Sizes the memory advice names: the KV cache asked for and needed, the host memory free and in all."""
    figures, values = diagnosis.engine_figures, {}
    kv_bytes, context = figures.get("kv_cache_memory_bytes"), figures.get("context")
    request = one_request_kv_bytes(figures)
    if kv_bytes:
        values["kv_bytes"] = engine_size(kv_bytes)
        if request:
            # the cache grows with the longest request: what holds one, as the wizard sizes it
            values["kv_needed"] = engine_size(kv_bytes_for_request(request))
    if context:
        values["context_now"] = str(int(context))
    free, total = figures.get("node_free_memory"), figures.get("node_memory")
    if free:
        values["node_free"] = f"{free / (1 << 30):.2f}"
        # leave the worker half of what is free: its weights, runtime and activations live there too
        values["kv_fit"] = engine_size(free / 2)
    if total:
        values["node_total"] = f"{total / (1 << 30):.2f}"
    if figures.get("kv_cache_requested"):
        values["kv_requested"] = f"{figures['kv_cache_requested'] / (1 << 30):.1f}"
    if figures.get("max_model_len_derived"):
        values["derived_len"] = str(int(figures["max_model_len_derived"]))
    asked = _QUANT_ASKED_RE.search(diagnosis.first_error_text or "")
    if asked:
        values["quant_asked"] = asked.group(1)
    return values


# The conditions a line may be said under (Say.when), on the diagnosis, its formats and the engine.
_CONDITIONS: dict[str, Callable[[Diagnosis, set[str], LogProfile | None], bool]] = {
    "quantized": lambda diagnosis, formats, profile: "quantized" in formats,
    "flash_on": lambda diagnosis, formats, profile: "flash_attn" in formats,
    # the log says flash attention is off; "flash_unknown": it says nothing either way (llama-server's
    # default verbosity), where a build's `auto` default has it on already (QA 32 D6)
    "flash_off": lambda diagnosis, formats, profile: diagnosis.engine_figures.get("flash_attn") == 0,
    "flash_unknown": lambda diagnosis, formats, profile: (
        "flash_attn" not in formats and diagnosis.engine_figures.get("flash_attn") is None
    ),
    "ubatch_over_256": lambda diagnosis, formats, profile: (
        int(diagnosis.engine_figures.get("ubatch_tokens") or 512) > 256
    ),
    "at_weights": lambda diagnosis, formats, profile: diagnosis.failure_stage in _LOADING,
    "kv_set_aside": lambda diagnosis, formats, profile: (
        diagnosis.failure_stage == "kv_cache" and kv_set_aside(diagnosis.engine_figures) is not None
    ),
    "kv_asked": lambda diagnosis, formats, profile: bool(
        diagnosis.engine_figures.get("kv_cache_memory_bytes")
    ),
    "can_shorten": lambda diagnosis, formats, profile: (
        not _context_now(diagnosis.engine_figures)
        or _context_now(diagnosis.engine_figures) > _SHORTEST_CONTEXT
    ),
    "own_budget": lambda diagnosis, formats, profile: bool(diagnosis.engine_figures.get("host_budget")),
    "kv_quantized": lambda diagnosis, formats, profile: bool(diagnosis.engine_figures.get("kv_quantized")),
    "threads_take": lambda diagnosis, formats, profile: threads_take_the_budget(
        diagnosis.engine_figures.get("http_threads"), diagnosis.engine_figures.get("host_budget")
    ),
    "fit_known": lambda diagnosis, formats, profile: bool(diagnosis.engine_figures.get("max_model_len_fit")),
    "high_share": lambda diagnosis, formats, profile: (
        bool(diagnosis.engine_figures.get("memory_share"))
        and diagnosis.engine_figures["memory_share"] >= _HIGH_SHARE
    ),
    "supported_list": lambda diagnosis, formats, profile: (
        _SUPPORTED_LIST_RE.search(diagnosis.first_error_text or "") is not None
    ),
    "is_torch": lambda diagnosis, formats, profile: profile is not None and profile.is_torch,
    "kv_bytes_set": lambda diagnosis, formats, profile: bool(
        diagnosis.engine_figures.get("kv_cache_memory_bytes")
    ),
    "cpu_platform": lambda diagnosis, formats, profile: "cpu_platform" in formats,
    "weights_16bit": lambda diagnosis, formats, profile: "weights_16bit" in formats,
    "reads_gguf": lambda diagnosis, formats, profile: profile is not None and profile.reads_gguf,
    "local_path": lambda diagnosis, formats, profile: _missing_path(diagnosis) is not None,
    "value_refused": lambda diagnosis, formats, profile: _refused_flag(diagnosis) is not None,
    "eager_attention": lambda diagnosis, formats, profile: "eager_attention" in formats,
    # the log's own slot count is one: no fewer slots to give a request more of the context (QA 32 D9)
    "one_slot": lambda diagnosis, formats, profile: diagnosis.engine_figures.get("server_slots") == 1,
    "shared_context": lambda diagnosis, formats, profile: (
        diagnosis.engine_figures.get("runner_parallel", 1) > 1
    ),
    "gpu_oom": lambda diagnosis, formats, profile: diagnosis.failure == "cuda_oom",
    # a mixture of experts, on an engine that can keep its experts in host RAM (llama-server's --n-cpu-moe)
    "moe_offload": lambda diagnosis, formats, profile: (
        diagnosis.engine_figures.get("model_experts", 0) > 1
        and profile is not None
        and _knob(profile.name, "n_cpu_moe") is not None
    ),
    # the buffer that failed was the KV cache (a smaller micro-batch or weights file does not shrink it)
    "kv_failed": lambda diagnosis, formats, profile: diagnosis.cause == "kv_alloc_failed",
    "weights_over_share": lambda diagnosis, formats, profile: _weights_over_share(diagnosis.engine_figures),
    "weights_fit_card": lambda diagnosis, formats, profile: _share_min(diagnosis.engine_figures) < 1,
    "weights_fill_card": lambda diagnosis, formats, profile: _weights_fill_card(diagnosis.engine_figures),
    # The model file's quantization, in bits per weight (a GGUF's file type): the next one down differs.
    "file_bits_known": lambda diagnosis, formats, profile: _file_bits(diagnosis) > 0,
    "file_over_4bit": lambda diagnosis, formats, profile: _file_bits(diagnosis) > 4,
    "file_4bit": lambda diagnosis, formats, profile: _file_bits(diagnosis) == 4,
    "file_3bit": lambda diagnosis, formats, profile: _file_bits(diagnosis) == 3,
    "file_2bit": lambda diagnosis, formats, profile: 0 < _file_bits(diagnosis) <= 2,
}


def _card_total(figures: dict[str, int | float]) -> float:
    """The memory the engine's share is of: the card's total as printed, else (SGLang) what was free
    before the weights loaded, the weights plus what was free after them; 0 unknown."""
    if figures.get("device_total"):
        return float(figures["device_total"])
    if figures.get("weights_loaded") and figures.get("free_after_weights"):
        return float(figures["weights_loaded"] + figures["free_after_weights"])
    return 0.0


def _weights_over_share(figures: dict[str, int | float]) -> bool:
    """The weights the engine loaded are more than its share of the card (total x share)."""
    share, total, weights = figures.get("memory_share"), _card_total(figures), figures.get("weights_loaded")
    return bool(share and total and weights) and weights > share * total  # type: ignore[operator]


# The weights alone take this much of the card: what is left cannot hold the profile run, the graphs and
# a KV cache whatever the context (QA 36 F5: 15.27 of 15.57 GiB, advised a shorter --max-model-len)
_WEIGHTS_FILL = 0.9


def _weights_fill_card(figures: dict[str, int | float]) -> bool:
    total, weights = _card_total(figures), figures.get("weights_loaded")
    return bool(total and weights) and weights >= _WEIGHTS_FILL * total  # type: ignore[operator]


def _share_min(figures: dict[str, int | float]) -> float:
    """The share the weights alone take, rounded up to the hundredth (1.0 or more: not on this card)."""
    total = _card_total(figures)
    if not total or not figures.get("weights_loaded"):
        return 1.0
    return -(-figures["weights_loaded"] * 100 // total) / 100


def _file_bits(diagnosis: Diagnosis) -> int:
    """The model file's bits per weight class as the log names it (Q4_K_M: 4, F16: 16); 0 unknown."""
    figures = diagnosis.engine_figures
    return int(figures.get("file_quant_bits") or figures.get("file_name_quant_bits") or 0)


@dataclass
class _Reading:
    """One diagnosis as the table reads it."""

    diagnosis: Diagnosis
    formats: set[str]
    profile: LogProfile | None
    values: dict[str, str]

    def holds(self, when: str) -> bool:
        """Every condition named holds ("a !b": a and not b; "": always)."""
        for condition in when.split():
            negated = condition.startswith("!")
            held = _CONDITIONS[condition.lstrip("!")](self.diagnosis, self.formats, self.profile)
            if held == negated:
                return False
        return True

    def topic(self, name: str) -> tuple[str | Say, ...]:
        own = self.profile.advice.get(name) if self.profile is not None else None
        return own if own is not None else DEFAULT_TOPICS.get(name, ())

    def say(self, lines: Iterable[str | Say]) -> list[str]:
        """The lines that are said, filled, in order; "@topic" stands for that topic's lines."""
        said: list[str] = []
        backend = self.diagnosis.backend
        for line in lines:
            item = line if isinstance(line, Say) else Say(line)
            if not self.holds(item.when):
                continue
            if item.template.startswith("@"):
                said.extend(self.say(self.topic(item.template[1:])))
                continue
            text = _fill(item.template, backend, self.values)
            if text is None and item.otherwise is not None:
                text = _fill(item.otherwise, backend, self.values)
            if text:
                said.append(text)
        return said


def advise(
    diagnosis: Diagnosis,
    formats: Iterable[str] = (),
    kernel_note: str | None = None,
    kills_elsewhere: str | None = None,
    hint: str | None = None,
) -> list[str]:
    """Ordered advice for a diagnosis, naming the detected backend's own flags.

    `hint`: a line near the first error in which the engine says what to change; it leads the advice
    when the rules have nothing specific for the failure.
    """
    if not diagnosis.failed:
        return []
    formats = set(formats)
    profile = ls.LOG_PROFILES.get(diagnosis.backend or "")
    reading = _Reading(diagnosis, formats, profile, _values(diagnosis, formats, kernel_note, kills_elsewhere))
    advice: list[str] = []
    if diagnosis.inferred and diagnosis.cause == "cut_traceback":
        advice.append(
            "The log stops before the exception line: the class is inferred from where it stopped; the full log would confirm it."
        )
    generic_mismatch = diagnosis.cause != "wrong_format"  # wrong_format's own advice names the backend
    if (
        generic_mismatch
        and "gguf" in formats
        and reading.holds("is_torch")
        and diagnosis.failure in ("unsupported_quant", "unknown_arch", "file_missing", "other")
    ):
        advice.append("GGUF files need llama.cpp or Ollama (vLLM and transformers read them only partly).")
    if (
        generic_mismatch
        and formats & {"awq", "gptq"}
        and reading.holds("reads_gguf")
        and diagnosis.failure in ("unsupported_quant", "other")
    ):
        advice.append("AWQ/GPTQ checkpoints need vLLM or TGI; llama.cpp and Ollama read GGUF.")
    row = next(
        row for row in ADVICE if row.matches(diagnosis.failure, diagnosis.cause, diagnosis.failure_stage)
    )
    own = reading.say(row.lines)
    hint = _engine_hint(diagnosis.first_error_text or "") or hint
    if hint and own == [READ_THE_LINE]:
        own.insert(0, f"The engine says what to change: {hint}")  # better than our generic line
    advice.extend(own)
    advice.extend(_the_other_stage(diagnosis, reading, own))
    advice.insert(min(1, len(advice)), _metal_working_set(diagnosis))  # after the first move: it says why
    return standing_alone([line for line in dict.fromkeys(advice) if line])


# A guessed stage's other side: a request's failure, or the start-up's (its cache and profile run).
_OTHER_SIDE = {"inference": "kv_cache", "kv_cache": "inference"}
_MEMORY = frozenset({"cuda_oom", "host_oom"})


def _the_other_stage(diagnosis: Diagnosis, reading: _Reading, said: list[str]) -> list[str]:
    """No line said which step was running, and the stage is a guess: the other side's first line too
    (QA 22: a vLLM excerpt of an engine core that died loading its weights got only request advice)."""
    other = _OTHER_SIDE.get(diagnosis.failure_stage or "")
    if not (diagnosis.stage_inferred and other and diagnosis.failure in _MEMORY):
        return []
    row = next(row for row in ADVICE if row.matches(diagnosis.failure, diagnosis.cause, other))
    lines = [line for line in reading.say(row.lines) if line not in said]
    if not lines:
        return []
    when = "while it was starting" if other == "kv_cache" else "while it served a request"
    return [f"If it failed {when} (the log does not say): {lines[0][0].lower()}{lines[0][1:]}"]


def standing_alone(lines: list[str]) -> list[str]:
    """The advice with its first line rid of "Or"/"Then": the line it follows or is the alternative to
    was not said (the engine has no such knob, the run already has that value, or `check` left it out
    because the wizard's first move changes that setting)."""
    said = list(lines)
    for word in ("Or ", "Then "):
        if said and said[0].startswith(word):
            said[0] = said[0][len(word)].upper() + said[0][len(word) + 1 :]
    return said


# Apple GPUs share the Mac's memory but Metal keeps to a working set below it (recommendedMaxWorkingSetSize):
# a model that fits the RAM can still be refused. macOS 14+ raises the limit with iogpu.wired_limit_mb.
_METAL_WORDS = ("metal", "kiogpu", "mtl")


def _metal_working_set(diagnosis: Diagnosis) -> str:
    text = (diagnosis.first_error_text or "").lower()
    if diagnosis.failure != "cuda_oom" or not any(word in text for word in _METAL_WORDS):
        return ""
    figures = diagnosis.engine_figures
    limit = figures.get("device_working_set")
    asked = sum(figures.get(key) or 0 for key in _METAL_BUFFERS)
    here = f": {limit / GIB:.2f} GiB here" if limit else ""
    over, wanted = "", "N"
    if limit and asked > limit:
        over = (
            f"; this run's GPU buffers ask for {asked / GIB:.2f} GiB, {(asked - limit) / GIB:.2f} GiB past it"
        )
        wanted = str((math.ceil(asked / GIB) + 1) * 1024)  # the buffers and a GiB to spare, in MiB
    return (
        f"On a Mac, Metal keeps to a working set of about two thirds to three quarters of the memory "
        f"(recommendedMaxWorkingSetSize{here}){over}. On macOS 14 and later you can raise it until the next "
        f"reboot with `sudo sysctl iogpu.wired_limit_mb={wanted}`, leaving less memory for everything else."
    )


_METAL_BUFFERS = ("model_buffer_gpu", "kv_buffer_gpu", "compute_buffer_gpu")


def summarize(diagnosis: Diagnosis, kernel_note: str | None = None) -> str:
    if not diagnosis.failed:
        if diagnosis.unrecognised:  # QA 32 D14: "No failure in the log" beside exit 3 and "not a server's"
            return "Not a model server's log."
        reached = diagnosis.stage or "no stage"
        if diagnosis.stopped_by_vramtui and diagnosis.incomplete:  # its ready_timeout ran out
            return (
                f"Incomplete: no error, and not ready when vramtui's ready_timeout ran out (reached: "
                f"{reached}): still loading, or stuck there; vramtui stopped it."
            )
        if diagnosis.stopped_by_vramtui:
            return f"No failure in the log (reached: {reached}); vramtui stopped the server itself."
        if diagnosis.incomplete and diagnosis.stopped:
            return (
                f"Incomplete: no error, but it was stopped on purpose (a signal, ctrl-c) before the server "
                f"was ready (reached: {reached})."
            )
        if diagnosis.incomplete:
            return (
                f"Incomplete: no error, but the log stops before the server was ready (reached: {reached}): "
                "still loading, or killed without a message."
            )
        if diagnosis.stopped:
            return (
                f"No failure in the log (reached: {reached}); it was stopped on purpose (a signal, ctrl-c)."
            )
        return f"No failure in the log (reached: {reached})."
    words = CAUSE_WORDS.get(diagnosis.cause or "", "") or FAILURE_WORDS.get(diagnosis.failure, "it failed")
    if diagnosis.cause == "cut_traceback" and diagnosis.failure != "other":
        words = (
            f"most likely {FAILURE_WORDS[diagnosis.failure]} (the traceback stops before its exception line)"
        )
    if diagnosis.failure == "host_oom_killed" and kernel_note:
        words = "the kernel's out-of-memory killer ended the process"
    where = f" at {diagnosis.failure_stage}" if diagnosis.failure_stage else ""
    if before_the_model(diagnosis):
        where = f" at {START_UP_WORDS}"  # the cause says where, whatever line did (or did not)
    elif diagnosis.stage_inferred:
        guess_stage = f"; best guess {diagnosis.failure_stage}" if diagnosis.failure_stage else ""
        where = f" (stage unknown: no line says which step was running{guess_stage})"
    line = f" (line {diagnosis.first_error_line})" if diagnosis.first_error_line else ""
    guess = " [inferred]" if diagnosis.inferred else ""
    return f"Failed{where}: {words}{line}{guess}."
