"""The full rule tables of the diagnosis, as data: the rules of no engine, and each engine's spliced in.

Each engine's own wording lives in its package (vramtui.core.backends.<family>.log); the rules that
belong to no engine (Python, PyTorch and CUDA, the Hugging Face hub, the kernel, the shell) are here,
and so is the order of each table: the first error rule that matches a line decides its cause, so the
engine pieces sit where their precedence puts them.

Every rule has an `anchor`: a lower-case literal that must occur in the lower-cased line before the
rule's regular expression is tried. The anchors are the cheap prefilter: a line that holds none of
them cannot change a diagnosis, so long logs are scanned for the anchors alone and the regular
expressions run only on the few candidate lines. Regexes run on the lower-cased line unless a rule
says otherwise.

The wording comes from the engines' own sources: llama.cpp (llama-model-loader, llama-context,
llama-kv-cache, ggml-backend/ggml-cuda allocators, tools/server), llama-cpp-python (llama.py, server),
vLLM (worker / gpu_model_runner / gpu_worker / kv_cache_utils / scheduler / engine core), transformers,
accelerate, bitsandbytes and huggingface_hub (exceptions), PyTorch (caching allocator OOM), Ollama
(server.go, sched.go, its llama runner), text-generation-inference (launcher, router) and SGLang
(model runner, scheduler).
"""

from __future__ import annotations

import re

from vramtui.core.backends import engine_logs
from vramtui.core.logs import ownlines
from vramtui.core.logs.ruletypes import (  # noqa: F401  (re-exported: callers and tests name them here)
    DEVICE,
    NUM,
    UNIT,
    ErrorRule,
    FigureRule,
    FrameRule,
    LogProfile,
    NoticeRule,
    ProgressRule,
    Say,
    StageRule,
)
from vramtui.core.logs.stages import FAILURES, STAGE_INDEX, STAGES  # noqa: F401  (re-exported)

# The accelerators' own names in their out-of-memory lines.
_ACCELERATORS = r"cuda|hip|rocm|gpu|device|npu|xpu|mps|metal|vulkan|ggml_vulkan|sycl|musa|hpu|cann"

# Every engine's wording, from the registry (the one place that names them all).
ENGINES = engine_logs()


def _engines(table: str, slot: str) -> tuple:
    """Every engine's rules for one slot of one table, in registry order."""
    return tuple(rule for engine in ENGINES for rule in engine.slot(table, slot))


# What the diagnosis asks of each engine beyond its rules (see LogProfile), by the name it reports.
LOG_PROFILES: dict[str, LogProfile] = {
    profile.name: profile for engine in ENGINES for profile in engine.profiles
}
# Backend names the diagnosis reports.
BACKEND_NAMES: tuple[str, ...] = tuple(LOG_PROFILES)
# Which corpus family a backend belongs to (llama-cpp-python prints llama.cpp's own log).
FAMILY: dict[str, str] = {name: p.prints_log_of for name, p in LOG_PROFILES.items() if p.prints_log_of}


# Exceptions told by the frame they were raised in (FrameRule), every engine's.
FRAME_RULES: tuple[FrameRule, ...] = tuple(rule for engine in ENGINES for rule in engine.frames)


# ---------------------------------------------------------------------------------------------
# Stages. A line takes the furthest stage among the rules it matches ("GPU KV cache usage" inside
# vLLM's serving stats line is still serving).
# ---------------------------------------------------------------------------------------------
STAGE_RULES: tuple[StageRule, ...] = (*_engines("stages", "first"), *_engines("stages", "second"))

# ---------------------------------------------------------------------------------------------
# Errors: most specific first; the first rule that matches a line decides its cause.
# ---------------------------------------------------------------------------------------------
ERROR_RULES: tuple[ErrorRule, ...] = (
    # --- host RAM: the kernel's OOM killer or a failed host allocation ---
    ErrorRule("out of memory: kill", "host_oom_killer", "host_oom_killed", stage=None),
    ErrorRule("oom-kill", "host_oom_killer", "host_oom_killed"),
    ErrorRule("oomkilled", "host_oom_killer", "host_oom_killed"),
    # systemd's words for its unit's process: "A process of this unit has been killed by the OOM killer."
    ErrorRule("killed by the oom killer", "host_oom_killer", "host_oom_killed"),
    ErrorRule(
        "killed",
        "host_killed",
        "host_oom_killed",
        r"(?:^|[|\]\s])killed\s*$|\[\d+\]\s+\d+\s+killed\s+\S|^\s*\d+\s+killed\s+\S|\bsignal: killed\b"
        # a script's shell reporting its child ("./serve.sh: line 193: 124064 Killed  vllm serve ..."), and
        # an interactive shell's job ("[1]+  Killed   vllm serve ...")
        r"|: line \d+:\s+\d+\s+killed\s+\S|^\[\d+\][+-]?\s+killed\s+\S",
    ),
    # torchrun's agent: a rank died of SIGKILL ("failed (exitcode: -9) local_rank: 2"), the OOM killer's
    # usual work while the ranks load their shards; the SIGTERMs it then sends the others are consequences.
    ErrorRule("exitcode", "worker_killed", "host_oom_killed", r"failed \(exitcode: -9\)"),
    # Ray's memory monitor kills a worker before the kernel's OOM killer would (host RAM past its threshold,
    # 0.95 by default): "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on
    # memory", and the raylet's "Workers (tasks / actors) killed due to memory pressure (OOM)".
    ErrorRule("running low on memory", "memory_monitor", "host_oom_killed"),
    ErrorRule("killed due to memory pressure", "memory_monitor", "host_oom_killed"),
    # vLLM's engine core process ended by SIGKILL while starting (`Failed core proc(s): {'EngineCore_DP0':
    # -9}`, its exit code): the OOM killer's signal, as torchrun's -9 above
    ErrorRule(
        "failed core proc", "worker_killed", "host_oom_killed", r"failed core proc\(s\): \{[^}]*: -9\b"
    ),
    # Filed under "code" and "status", not "137": a digit word would make every 3-digit number special.
    ErrorRule("code 137", "host_killed", "host_oom_killed", r"exit(?:ed)? (?:with )?code 137\b"),
    ErrorRule("status 137", "host_killed", "host_oom_killed", r"exit(?:ed)? (?:with )?status 137\b"),
    # vramtui's launcher says how a server it started died when no stop of its own did it
    ErrorRule("vramtui: the server was killed by sigkill", "killed_signal", "host_oom_killed"),
    # PyTorch's host allocator (any engine on torch): "DefaultCPUAllocator: can't allocate memory: you
    # tried to allocate N bytes" / "not enough memory"
    ErrorRule(
        "defaultcpuallocator",
        "host_alloc",
        "host_oom",
        r"defaultcpuallocator: (?:can't allocate memory|not enough memory)",
    ),
    *_engines("errors", "host_oom"),
    # OpenBLAS (numpy's, torch's) could not map its buffers: "OpenBLAS error: Memory allocation still failed
    # after 10 retries, giving up." (QA 37 F6: under a 500 MiB budget, as transformers' runner imported torch)
    ErrorRule("openblas error: memory allocation", "blas_alloc", "host_oom"),
    # --- device memory ---
    *_engines("errors", "device_oom.share"),
    # Every accelerator's words: CUDA, ROCm/HIP, Ascend's NPU, Intel's XPU, Apple's MPS/Metal, Vulkan, SYCL,
    # Moore Threads' MUSA, Habana's HPU ("device" and "gpu" for the rest).
    ErrorRule(
        "out of memory",
        "cuda_oom",
        "cuda_oom",
        # not ggml-cuda's pinned host buffer, refused and replaced by pageable memory (a notice)
        rf"^(?!.*of pinned memory).*?(?:(?:{_ACCELERATORS}|cudamalloc|hipmalloc|cublas)\b.*out of memory"
        rf"|out of memory.*\b(?:{_ACCELERATORS})\b)",
    ),
    ErrorRule(
        "outofmemory",
        "cuda_oom",
        "cuda_oom",
        r"kiogpucommandbuffercallbackerroroutofmemory|erroroutofmemory\b",
    ),
    # a device buffer the driver would not give (Vulkan's per-allocation limit, Metal's working set)
    ErrorRule(
        "memory allocation of size",
        "cuda_oom",
        "cuda_oom",
        rf"(?:{_ACCELERATORS}):? (?:device )?memory allocation of size \d+ failed",
        default_stage="load_weights",  # most often a weights buffer, when no line around says otherwise
    ),
    ErrorRule(
        "out_of",
        "cuda_oom",
        "cuda_oom",
        r"pi_error_out_of_(?:host_)?memory|ur_result_error_out_of_(?:device|host)_memory",  # SYCL
    ),
    ErrorRule("maxmemoryallocationsize", "cuda_oom", "cuda_oom"),
    # XLA (TPU) out of a memory space: its HBM, or the kernel's on-chip vmem (round 76)
    ErrorRule("ran out of memory in memory space", "cuda_oom", "cuda_oom"),
    # AWS Neuron's runtime: "TDRV:dmem_alloc_internal Failed to alloc DEVICE memory: 536870912", then its
    # `nrt_tensor_allocate status=4 message="Allocation Failure"` (round 81: an Inferentia2 core full)
    ErrorRule("failed to alloc device memory", "cuda_oom", "cuda_oom"),
    ErrorRule("nrt_tensor_allocate", "cuda_oom", "cuda_oom", r"nrt_tensor_allocate status=4\b"),
    # PyTorch on Apple's MPS: one buffer past the device's largest ("Invalid buffer size: 15.44 GB")
    ErrorRule("invalid buffer size", "cuda_oom", "cuda_oom", r"invalid buffer size: [\d.]+ ?[kmgt]i?b"),
    ErrorRule("outofmemoryerror", "cuda_oom", "cuda_oom"),
    # PyTorch's caching allocator asks NVML for the per-process usage to word its out-of-memory error, and
    # asserts when NVML fails: the assertion stands for the OOM (pytorch#112377, #185240; round 82)
    ErrorRule(
        "nvml_success == r internal assert failed",
        "cuda_oom",
        "cuda_oom",
        r"nvml_success == r internal assert failed at .*cudacachingallocator",
    ),
    ErrorRule("cuda error: out of memory", "cuda_oom", "cuda_oom"),
    ErrorRule("cudaerrormemoryallocation", "cuda_oom", "cuda_oom"),
    ErrorRule("hiperroroutofmemory", "cuda_oom", "cuda_oom", r"^(?!.*of pinned memory).*hiperroroutofmemory"),
    ErrorRule("cublas_status_alloc_failed", "cuda_oom", "cuda_oom"),
    # not ggml-vulkan's pinned host buffer, refused and replaced by pageable memory (a notice: round 68)
    ErrorRule(
        "erroroutofdevicememory", "cuda_oom", "cuda_oom", r"^(?!.*pinned memory).*erroroutofdevicememory"
    ),
    # the drivers' own words, before the engine's: NVIDIA's kernel module (NVRM, in a merged kernel log) and
    # Mesa's AMD Vulkan driver, each refusing a device allocation
    ErrorRule("nv_err_no_memory", "cuda_oom", "cuda_oom"),
    ErrorRule(
        "radv/amdgpu",
        "cuda_oom",
        "cuda_oom",
        r"radv/amdgpu: (?:failed to allocate a buffer|not enough memory for command submission)",
        default_stage="load_weights",
    ),
    *_engines("errors", "device_oom"),
    # ggml-sycl's allocator, after its own buffer-type rule (which places a weights buffer): "alloc: can't
    # allocate 568118476 Bytes of memory on device/GPU" (round 76)
    ErrorRule("can't allocate", "cuda_oom", "cuda_oom", r"can't allocate \d+ bytes of memory on device"),
    # --- vLLM / SGLang: the KV cache has no room left ---
    *_engines("errors", "kv_cache"),
    ErrorRule("insufficient memory for kv cache", "kv_too_small", "kv_cache_too_small", stage="kv_cache"),
    # --- requests longer than the context ---
    *_engines("errors", "context"),
    ErrorRule(
        "context length",
        "context_too_long",
        "context_too_long",
        r"input (?:length|tokens?) .*exceeds? (?:the )?(?:maximum )?context length",
        stage="inference",
    ),
    # an embedding server's batch (llama-server's physical batch is its longest input)
    ErrorRule("input is too large to process", "context_too_long", "context_too_long", stage="inference"),
    # --- file formats and quantizations the build cannot read ---
    *_engines("errors", "format"),
    ErrorRule("unknown quantization", "quant_unsupported", "unsupported_quant", stage="load_weights"),
    ErrorRule(
        "quantization",
        "quant_unsupported",
        "unsupported_quant",
        r"(?:unsupported|does not support) (?:this )?quantization|quantization .*(?:is not supported|not supported yet)",
        stage="load_weights",
    ),
    *_engines("errors", "format.after"),
    # --- architectures the engine does not know ---
    *_engines("errors", "arch"),
    ErrorRule("unsupported architecture", "unknown_arch", "unknown_arch", stage="load_weights"),
    # --- weights that do not fit the model's shape ---
    *_engines("errors", "shape"),
    ErrorRule("shape mismatch", "shape_mismatch", "shape_mismatch", stage="load_weights"),
    # --- data types the GPU or the build cannot run ---
    *_engines("errors", "dtype"),
    ErrorRule("does not support bf16", "bf16_unsupported", "dtype_unsupported"),
    ErrorRule("bf16 is not supported", "bf16_unsupported", "dtype_unsupported"),
    ErrorRule(
        "dtype",
        "dtype_unsupported",
        "dtype_unsupported",
        r"(?:unsupported|not supported) (?:d)?type|dtype .* is not supported",
        stage="load_weights",
    ),
    # --- the port: the OS's own words, as every Python server (vLLM, SGLang, TGI's shards) raises them
    # ("OSError: [Errno 98] Address already in use"); nothing was read yet ---
    ErrorRule("address already in use", "port_in_use", "other", stage="load_weights"),
    # --- disk ---
    ErrorRule("no space left on device", "disk_full", "disk_full"),
    ErrorRule("disk quota exceeded", "disk_full", "disk_full"),
    ErrorRule("enospc", "disk_full", "disk_full"),
    ErrorRule("not enough free disk space", "disk_full", "disk_full", stage="download"),
    # --- the hub: a gated repository, then "not found" (which the hub also answers, with 401, for a
    # private repository and no token: the advice says so), then other refusals ---
    *_engines("errors", "hub"),
    # --- files that are not there ---
    *_engines("errors", "missing"),
    ErrorRule("404 client error", "not_found_remote", "file_missing", stage="download"),
    # huggingface_hub takes a folder that does not exist for a repo id: "Repo id must be in the form
    # 'repo_name' or 'namespace/repo_name': '/models/typo'" (HFValidationError)
    ErrorRule(
        "repo id must be",
        "not_found_local",
        "file_missing",
        r"repo id must be .*: '(?:/|\.{1,2}/|~|[a-z]:\\)",
        stage="download",
    ),
    ErrorRule("is not a local folder", "not_found_local", "file_missing", stage="download"),
    # vLLM's and transformers' words for a path that is neither a folder here nor a repo id
    ErrorRule(
        "invalid repository id or local directory", "not_found_local", "file_missing", stage="download"
    ),
    *_engines("errors", "missing.after"),
    # the dynamic loader did not find a shared library (a CUDA runtime, an engine's own kernels): a build or
    # install that does not match, not the model; logged as a warning, the engine goes on without it
    # ... but a program the loader could not start at all says "error while loading shared libraries" (a
    # runner that exits 127 at once): that line is the failure, not the wrapper's exit status after it
    # (not a library the loader could not map: "failed to map segment" is mmap's ENOMEM, below; QA 39 F1)
    ErrorRule(
        "error while loading shared libraries",
        "library_missing",
        "other",
        r"error while loading shared libraries(?!.*failed to map segment)",
    ),
    # ... and one it could not map before the program ran a line: the start's memory (verdict._refine)
    ErrorRule(
        "error while loading shared libraries",
        "library_map",
        "other",
        r"error while loading shared libraries.*failed to map segment",
    ),
    ErrorRule("cannot open shared object file", "library_missing", "other", strong=False),
    ErrorRule(
        "no such file or directory",
        "not_found_local",
        "file_missing",
        # not gdb's "30<tab>../sysdeps/unix/sysv/linux/wait4.c: No such file or directory." in a crash's
        # backtrace (newer gdb prefixes "warning: "): the debugger's source file, not the engine's (round 62:
        # a Vulkan device lost read as a missing file)
        r"^(?!.*cannot open shared object file)(?!(?:warning: )?\d+\s+\S+: no such file or directory\.?\s*$)"
        r".*no such file or directory",
    ),
    ErrorRule("filenotfounderror", "not_found_local", "file_missing"),
    # --- tokenizer files (transformers' PreTrainedTokenizerFast and AutoTokenizer wording) ---
    *_engines("errors", "tokenizer"),
    # --- network ---
    *_engines("errors", "network"),
    ErrorRule("max retries exceeded", "network", "network", stage="download"),
    ErrorRule("connection timed out", "network", "network"),
    ErrorRule("i/o timeout", "network", "network", stage="download"),
    ErrorRule("tls handshake timeout", "network", "network", stage="download"),
    ErrorRule("temporary failure in name resolution", "network", "network", stage="download"),
    ErrorRule("name or service not known", "network", "network", stage="download"),
    ErrorRule("could not resolve host", "network", "network", stage="download"),
    ErrorRule("network is unreachable", "network", "network", stage="download"),
    ErrorRule("connection reset by peer", "network", "network", stage="download"),
    ErrorRule("connecttimeout", "network", "network", stage="download"),
    ErrorRule("readtimeout", "network", "network", stage="download"),
    ErrorRule("sslerror", "network", "network", stage="download"),
    ErrorRule("httpsconnectionpool", "network", "network", stage="download"),
    # --- broken or wrong files (reported as "other" with their own advice) ---
    *_engines("errors", "broken_file"),
    # --- host allocations (malloc, ggml CPU buffers, torch's CPU allocator) ---
    *_engines("errors", "host_alloc"),
    # ENOMEM, unless it is mlock's (a warning: the load goes on with the weights unlocked)
    ErrorRule(
        "cannot allocate memory", "host_alloc", "other", r"^(?!.*failed to mlock).*cannot allocate memory"
    ),
    ErrorRule("std::bad_alloc", "host_alloc", "other"),
    # The dynamic loader could not map a shared library (mmap's ENOMEM: an address-space limit or no RAM).
    ErrorRule("failed to map segment from shared object", "host_alloc", "other"),
    # An exception line, after a saved log's time stamp at most (vramtui's run logs have one).
    ErrorRule(
        "memoryerror", "host_alloc", "other", r"^(?:\d{4}-\d\d-\d\d[t ][\d:.,]+z?\s+)?\s*memoryerror\b"
    ),
    # numpy's own MemoryError subclass: "numpy._core._exceptions._ArrayMemoryError: Unable to allocate 3.04
    # KiB for an array" (QA 26 D2: llama-cpp-python's sampler under a budget, read as "exited with status 1")
    ErrorRule("_arraymemoryerror", "host_alloc", "other", r"_arraymemoryerror: unable to allocate"),
    *_engines("errors", "host_alloc.after"),
    # --- llama.cpp's context buffers: the device allocator's own line (CUDA0 / CPU above) comes first
    # and decides; alone, a KV-cache or compute-buffer failure is the accelerator's out-of-memory
    # (llama_kv_cache_init / llama_kv_cache_unified / graph_reserve / llama_new_context_with_model).
    *_engines("errors", "context_buffer"),
    # a GPU kernel fault: with no line around it, most often while serving (start-up faults have stage lines);
    # before the generic rules, so that llama-server's "E srv update_slots: decode() failed: ..." over one is
    # the fault, not a bare error
    ErrorRule("illegal memory access", "kernel_fault", "other", default_stage="inference"),
    ErrorRule("invalid device function", "kernel_fault", "other", default_stage="inference"),
    ErrorRule("device lost", "kernel_fault", "other", r"\bdevice lost\b", default_stage="inference"),
    # Vulkan's own spellings: "vk::Device::waitForFences: ErrorDeviceLost", "vk::DeviceLostError" (round 62)
    ErrorRule("errordevicelost", "kernel_fault", "other", default_stage="inference"),
    ErrorRule("devicelosterror", "kernel_fault", "other", default_stage="inference"),
    # --- generic errors: count only when nothing more specific shows up ---
    *_engines("errors", "generic"),
    ErrorRule("panicked at", "panic", "other", strong=False),
    ErrorRule("panic:", "panic", "other", r"^\s*panic:", strong=False),
    *_engines("errors", "generic.after"),
    ErrorRule("watchdog caught collective operation timeout", "nccl_timeout", "other"),
    # CPython's word for a C function that failed without setting an exception: under an address-space
    # budget, an allocation in the engine's import that failed (a MemoryError other times; CI flaked on it)
    ErrorRule(
        "systemerror",
        "null_return",
        "other",
        r"systemerror: .*(?:error return without exception set|returned null without setting an exception)",
    ),
    # an HTTP client (httpx, requests) told 404 by the server's generation or embedding route: the server
    # is up but has no model by the name asked (Ollama's unpulled model, vLLM's other --served-model-name)
    ErrorRule(
        "client error",
        "model_not_found",
        "file_missing",
        r"client error '404 not found' for url '\S*/(?:v1/(?:chat/completions|completions|embeddings)|api/(?:generate|chat|embed|embeddings))'",
        stage="inference",
    ),
    # a kernel's own device-side assert (an index past a table: a position past the trained length, a
    # token id past the vocabulary): `Assertion `index out of bounds: ...` failed`, `srcIndex < ...`
    ErrorRule(
        "assertion",
        "device_assert",
        "other",
        r"assertion [`'](?:index out of bounds|srcindex <|idx_dim >= 0 && idx_dim < index_size|-sizes\[i\] <= index)",
        default_stage="inference",
    ),
    # any kernel's device-side assert as CUDA prints it: `File.cu:402: kernel: block: [0,0,0], thread:
    # [0,0,0] Assertion `...` failed.` (the line that says what failed; the exception after it only says
    # "device-side assert triggered")
    ErrorRule(
        "assertion",
        "kernel_assert",
        "other",
        r"\.cuh?:\d+: .*block: \[\d+,\d+,\d+\], thread: \[\d+,\d+,\d+\] assertion [`']",
        default_stage="inference",
    ),
    # the binary (torch, a Triton kernel, a CUDA build) carries no code for this card's compute capability:
    # CUDA's own words, and Triton's for a cubin built for another architecture
    ErrorRule(
        "kernel image", "triton_image", "other", r"triton error \[cuda\]: device kernel image is invalid"
    ),  # Triton compiled it here, for this card: the driver would not load what its ptxas made
    ErrorRule(
        "kernel image",
        "no_kernel_image",
        "other",
        r"no kernel image is available for execution|device kernel image is invalid",
    ),
    # Triton's tile config needs more shared memory per block than the card has ("out of resource: shared
    # memory, Required: 196608, Hardware limit: 65536"): a kernel tuned for another GPU, not its VRAM; the
    # engine's capture failure wrapped around it adds the OOM's own hints (round 83)
    ErrorRule("out of resource: shared memory", "triton_shared_memory", "other"),
    # torch finds no GPU to put the model on: a CPU-only build, or no driver (QA 21 F2: device_map =
    # "cuda:3" on a CPU box read "an error at load weights")
    ErrorRule(
        "cuda",
        "no_gpu_torch",
        "other",
        r"torch not compiled with cuda enabled|found no nvidia driver on your system|no cuda gpus are available",
    ),
    ErrorRule("vramtui: the server was killed by sig", "crash", "other"),  # SIGSEGV, SIGABRT ...
    # the launcher's line for an exit status: weak, so that the engine's own error line before it is the
    # first error; alone, it is the failure a saved log shows (QA 19 F3)
    ErrorRule(
        "vramtui: the server exited with status",
        "exit_code",
        "other",
        r"vramtui: the server exited with status (?:[1-9]|0 before it was ready)",
        strong=False,
    ),
    ErrorRule("segmentation fault", "crash", "other", strong=False),
    # Abseil's failure-signal handler (Ray's and glog's workers): "*** SIGSEGV received at time=N on cpu M
    # ***", the crash itself, before the engine's report of a worker that died (round 82)
    ErrorRule(
        "received at time=", "crash", "other", r"\*\*\* sig(?:segv|abrt|bus|fpe|ill) received at time="
    ),
    # glibc's heap checks aborting the process ("free(): double free detected in tcache 2", "munmap_chunk():
    # invalid pointer"): native code broke its heap, before the signal handler's own line (round 83)
    ErrorRule("double free", "heap_corruption", "other", r"\(\): double free|double free or corruption"),
    ErrorRule(
        "(): invalid",
        "heap_corruption",
        "other",
        r"\b(?:free|realloc|munmap_chunk)\(\): invalid (?:pointer|size)",
    ),
    ErrorRule("corrupted", "heap_corruption", "other", r"\(\): corrupted|corrupted size vs\. prev_size"),
    # Windows' words for the same crash: an access violation (0xC0000005) or another fatal exception code
    ErrorRule("exception code: 0xc", "crash", "other", r"exception code: 0xc0000\w{3}\b", strong=False),
    ErrorRule("core-dump", "crash", "other", r"result: core-dump", strong=False),  # systemd's unit status
    ErrorRule("core dumped", "crash", "other", strong=False),
    ErrorRule("terminate called", "crash", "other", strong=False),
    ErrorRule("error: ", "error", "other", r"^\s*error: |\berror: (?!0\b)", strong=False),
    ErrorRule(
        "error",
        "error",
        "other",
        # a level word before a number or bracket, key=value and JSON levels, `[ERROR]`, and an ISO
        # time stamp's level before the logger's name (TGI's `...Z ERROR text_generation_launcher:`)
        r"(?:^|\s)(?:error|err|critical|fatal)\s+(?:\d|\[)|\blevel=error\b|\"level\":\"err|\[error\]"
        r"|\d[.\d]*z\s+error\s+[\w:]+:",
        strong=False,
    ),
    ErrorRule("traceback (most recent call last)", "traceback", "other", strong=False),
)

# A traceback frame's code (`File ...` lines and the code line below them) that touches GPU memory:
# a traceback cut off before its exception line in such code is presumed an out-of-memory.
MEMORY_HEAVY_FRAME_WORDS: tuple[str, ...] = (
    "torch.empty(",
    "torch.zeros(",
    "torch.ones(",
    "torch.full(",
    "torch.cat(",
    "torch.stack(",
    "torch.randn(",
    "torch.rand(",
    "torch.empty_like(",
    "torch.zeros_like(",
    ".cuda(",
    ".to(",
    "create_weights",
    "parameter(",
    "layer(",
    "_initialize_kv_caches",
    "profile_run",
    "_dummy_run",
    "determine_num_available_blocks",
    "determine_available_memory",
    "capture_model",
    "warmup",
    "forward_batch_generation",
    "execute_model",
    "in forward",
    "load_weights",
    "get_model",
    "allocate",
)

# Lines that show the engine dealt with an earlier error itself and went on.
RECOVERY_RULES: tuple[NoticeRule, ...] = tuple(rule for engine in ENGINES for rule in engine.recoveries)

# Quiet failures: the run goes on, slower or bigger than the user thinks.
NOTICE_RULES: tuple[NoticeRule, ...] = (
    *_engines("notices", "notices"),
    # kernels and attention that fell back to a slower or hungrier path
    NoticeRule(
        "falling back to",
        "kernel_fallback",
        "a kernel fell back to a slower path",
        r"(?:kernel|attention|flash|sdpa|triton|marlin|punica|sgmv|cuda graph|all-?reduce).*falling back to"
        r"|falling back to (?:the )?(?:eager|manual|math|naive|loop|slow|default|torch|xformers|sdpa|v0\b)",
    ),
    NoticeRule(
        "fell back to",
        "kernel_fallback",
        "a kernel fell back to a slower path",
        r"(?:all-?reduce|kernel|attention|flash).*fell back to|fell back to (?:a |the )?slower",
    ),
    # an engine saying so itself: "Performance might be sub-optimal!", "This may slow down the performance"
    NoticeRule(
        "optimal",
        "kernel_fallback",
        "the engine says it runs a slower, untuned path (performance might be sub-optimal)",
        r"performance (?:might|may|will) be sub-?optimal|\bsub-?optimal performance",
    ),
    NoticeRule(
        "slow down",
        "kernel_fallback",
        "the engine says this setup slows it down",
        r"may slow down the performance",
    ),
    NoticeRule(
        "not compiled with flash attention",
        "kernel_fallback",
        "PyTorch was built without flash attention: attention takes a slower kernel",
    ),
    NoticeRule(
        "could not import flash attention",
        "kernel_fallback",
        "the flash-attention models could not be imported: the engine runs its slower path",
    ),
    NoticeRule(
        "offloaded to the",
        "cpu_fallback",
        "part of the model was offloaded to the CPU or the disk (device_map auto): those layers run slowly",
        r"offloaded to the (?:cpu|disk)",
    ),
    NoticeRule(
        "fall back to",
        "kernel_fallback",
        "a kernel fell back to a slower path",
        r"(?:kernel|attention|flash|sdpa).*fall back to",
    ),
    # vramtui's launcher writes this line when it stops the server itself: a kill after it is ours.
    NoticeRule("vramtui: stop", "mark", "own_stop", r"vramtui: stop(?:ped|ping) the server"),
    # its launch line: the log holds the run from its start (an excerpt pasted from an issue may not)
    NoticeRule(ownlines.LAUNCH.rstrip(), "mark", "own_launch", re.escape(ownlines.LAUNCH)),
    # ... after its ready_timeout ran out: the log still stops before ready (QA: "No failure", exit 0)
    # "not ready after 120 s", "not ready for 10 s" (no HTTP), "not ready for 30 s of server errors"
    NoticeRule("vramtui: not ready ", "mark", "ready_timeout"),
    # ... and when the server died before its health check ever passed (QA 35 F9: an abort right after
    # "listening on" read "Failed at inference" though no request was sent)
    NoticeRule(
        "before it was ready",
        "mark",
        "died_before_ready",
        r"vramtui: the server (?:was killed by \S+|exited with status \d+) .*before it was ready",
    ),
    # ... before launch, when the context asked for is past the model's trained length (QA 11)
    NoticeRule(
        "is past the model's trained length",
        "context_past_trained",
        "the context is past the model's trained length: the answers degrade past it",
        # not where the engine caps each slot at that length (llama-server): its own "capping" line says that
        r"vramtui: context \d+ is past the model's trained length (?!.*caps each slot)",
    ),
    NoticeRule("cuda_graph_runner", "mark", "graph_capture"),  # the graph runner's frames (SGLang, vLLM V0)
    # a traceback through torch's CUDA-graph capture (its frames, when the engine's own line is cut off)
    NoticeRule("cuda/graphs.py", "mark", "graph_capture", r"torch[/\\]cuda[/\\]graphs\.py"),
    *_engines("notices", "notices.after"),
    NoticeRule(
        "compiled without gpu support",
        "cpu_fallback",
        "this build has no GPU support: everything runs on the CPU",
    ),
    NoticeRule("cuda is not available", "cpu_fallback", "CUDA is not available: the model runs on the CPU"),
)

# Lines that confirm a quantization really took effect (kept to compare with a requested one).
QUANT_CONFIRM_ANCHORS: tuple[str, ...] = (
    "quant",
    "file type",
    "ftype",
    "bitsandbytes",
    "linear4bit",
    "linear8bit",
    "load_in_4bit",
    "load_in_8bit",
    "load-in-4bit",
    "load-in-8bit",
    "awq",
    "gptq",
    "fp8",
    "nf4",
)
# A requested quantization and the words that confirm it in a log.
QUANT_SYNONYMS: dict[str, tuple[str, ...]] = {
    "bnb-4bit": ("bitsandbytes", "linear4bit", "load_in_4bit", "nf4", "fp4", "bnb"),
    "bnb-8bit": ("bitsandbytes", "linear8bit", "load_in_8bit", "int8", "bnb"),
    "bitsandbytes": ("bitsandbytes", "linear4bit", "linear8bit", "bnb"),
    "awq": ("awq",),
    "gptq": ("gptq",),
    "fp8": ("fp8",),
}

# Where a log *asks* for a quantization (an echoed command line, a from_pretrained call in a traceback,
# transformers' deprecation notice of the load_in_Nbit arguments): the request, never its confirmation.
# (regex on the lower-cased line, the quantization it asks for; "" takes the regex's `name` group).
QUANT_REQUESTS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"--load[-_]in[-_]4bit\b"), "bnb-4bit"),
    (re.compile(r"--load[-_]in[-_]8bit\b"), "bnb-8bit"),
    (re.compile(r"--quantiz(?:ation|e)(?:=|\s+)(?P<name>[\w.-]+)"), ""),
    (re.compile(r"\bload_in_4bit\s*=\s*true"), "bnb-4bit"),
    (re.compile(r"\bload_in_8bit\s*=\s*true"), "bnb-8bit"),
    (re.compile(r"`load_in_4bit` and `load_in_8bit` arguments are deprecated"), "bitsandbytes"),
    # vramtui's transformers runner echoes its from_pretrained arguments before loading
    (re.compile(r"loading weights from .*\bquantization_config=(?P<name>bnb-[48]bit)"), ""),
)
# Words that make a quantization line a notice about the request rather than proof it was applied.
QUANT_NOT_CONFIRMING: tuple[str, ...] = ("deprecated", "will be removed", "deprecation")

# ---------------------------------------------------------------------------------------------
# Figures the engine printed about its own memory.
# ---------------------------------------------------------------------------------------------
FIGURE_RULES: tuple[FigureRule, ...] = (
    # vramtui's launcher heads each run log with the budget it enforced, so a saved log reads back
    # the same as the live run: under a host budget, a failed allocation is that budget's OOM.
    # The share of the card the engine was told to take, as its flags or its config dump print it.
    FigureRule(
        "memory",
        "memory_share",
        r"(?<!e\.g\. `)(?:--gpu-memory-utilization[= ]|gpu_memory_utilization'?[=:]\s*"
        r"|gpu_memory_utilization \(|--cuda-memory-fraction[= ])(?P<value>0?\.\d+|1(?:\.0+)?)\b",
        count=True,
    ),
    *_engines("figures", "figures.first"),
    FigureRule(
        ownlines.BUDGET.rstrip(),
        "host_budget",
        rf"{re.escape(ownlines.BUDGET)}{NUM}{UNIT}, enforced on the host",
    ),
    # ... and what the engine itself needs of it to come up, where vramtui measured that on its binary
    FigureRule(
        "vramtui: the engine itself needs",
        "engine_floor",
        rf"vramtui: the engine itself needs {NUM}{UNIT} of it to come up",
    ),
    # and, when the run failed, the most its process tree held (sampled): what the engine took beside
    # the buffers it prints
    FigureRule(
        "vramtui: the server's process tree held",
        "tree_peak",
        rf"vramtui: the server's process tree held at most {NUM}{UNIT}",
    ),
    *_engines("figures", "figures"),
)

# GiB-valued units: vLLM's and SGLang's "GB" are GiB (they divide by 2**30).
# Figures that are counts (tokens, layers, heads), not bytes: what a reader prints without a unit.
COUNT_FIGURES: frozenset[str] = frozenset(rule.key for rule in FIGURE_RULES if rule.count)

UNIT_BYTES: dict[str, int] = {
    "B": 1,
    "KB": 1 << 10,
    "KIB": 1 << 10,
    "MB": 1 << 20,
    "MIB": 1 << 20,
    "GB": 1 << 30,
    "GIB": 1 << 30,
    "TB": 1 << 40,
    "TIB": 1 << 40,
    "MB_DECIMAL": 10**6,  # a figure printed in millions of bytes (Metal's working set: bytes / 1e6, "MB")
}

# ---------------------------------------------------------------------------------------------
# Which backend wrote the log: (anchor, backend). Scored; see diagnose.detect_backend.
# ---------------------------------------------------------------------------------------------
BACKEND_MARKS: tuple[tuple[str, str], ...] = tuple(mark for engine in ENGINES for mark in engine.marks)
MARK_GUARDS: dict[str, re.Pattern[str]] = {
    anchor: re.compile(pattern) for engine in ENGINES for anchor, pattern in engine.mark_guards
}
# When marks of several backends show up, the one that embeds the others wins.
BACKEND_PRECEDENCE: tuple[str, ...] = tuple(
    sorted(LOG_PROFILES, key=lambda name: -LOG_PROFILES[name].precedence)
)

# Lines that echo what a user sent, or what the model answered, when the server logs requests. The
# echoed text is theirs, not the server's: no rule reads it, so a prompt that asks about "CUDA out of
# memory" is not a failure. (The line's anchor, the marker where the echo starts after it: "" for right
# after the anchor), lower case.
ECHO_CUTS: tuple[tuple[str, str], ...] = tuple(cut for engine in ENGINES for cut in engine.echo_cuts)
# Lines that prove how far the run got (milestones), a new load, or a deliberate stop.
# vramtui's launcher heads every run log with "vramtui: launch <command>": a new run, whatever the engine.
PROGRESS_RULES: tuple[ProgressRule, ...] = (
    ProgressRule(ownlines.LAUNCH.rstrip(), "start"),
    *(rule for engine in ENGINES for rule in engine.progress),
)

# Anchors that also occur inside longer words ("ValueError", "SomeException"): checked as substrings
# of every line. Every other anchor is looked up through one of its words (see diagnose.py).
SUBSTRING_ANCHORS: tuple[str, ...] = ("error", "exception", "connecttimeout", "readtimeout")


def all_anchors() -> tuple[str, ...]:
    """Every literal the prefilter looks for, longest first (no duplicates)."""
    anchors: set[str] = set()
    for rules in (STAGE_RULES, ERROR_RULES, RECOVERY_RULES, NOTICE_RULES, FIGURE_RULES):
        anchors.update(rule.anchor for rule in rules)
    anchors.update(anchor for anchor, _ in BACKEND_MARKS)
    anchors.update(QUANT_CONFIRM_ANCHORS)
    # Traceback frames, exception lines and cut-off-traceback evidence.
    anchors.update(('file "', "traceback", "during handling", "the above exception", "warn", "warning"))
    anchors.update(SUBSTRING_ANCHORS)
    return tuple(sorted(anchors, key=lambda anchor: (-len(anchor), anchor)))
