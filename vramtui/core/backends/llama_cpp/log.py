"""How llama.cpp words its log: llama-server, llama-cpp-python (which prints llama.cpp's own log) and
Ollama (whose runner is llama.cpp) — stages, errors, notices, figures and the marks that name them.

The diagnosis (vramtui.core.logs) reads every table of every engine on every log; vramtui.core.logs.rules
splices these pieces into its tables in their order of precedence (the first error rule that matches a line
decides its cause).
"""

from __future__ import annotations

import re

from vramtui.core.backends.llama_cpp.ollama_log import OLLAMA_NOTICES
from vramtui.core.backends.llama_cpp.quiet_log import LLAMA_QUIET_NOTICES
from vramtui.core.logs import ownlines
from vramtui.core.logs.ruletypes import (
    CACHE_PART_MARK,
    DEVICE,
    DRAFT_MARK,
    NUM,
    OPTIONAL_WARMUP,
    SLOTS_SPLIT,
    UNIT,
    EngineLog,
    ErrorRule,
    FigureRule,
    LogProfile,
    NoticeRule,
    ProgressRule,
    Say,
    StageRule,
)


def _context_oom(kv_flags: str, flash_on: str) -> tuple[str | Say, ...]:
    """The context-sized buffers did not fit: what shrinks them, in this engine's flags (`kv_flags`: a
    q8_0 cache; `flash_on`: the flash-attention flag's value for on). Where the log shows flash attention
    on already, no line asks for it."""
    quant = f"Quantize the KV cache: {kv_flags}"
    return (
        Say(
            "Lower the context: {context}{smaller} (the KV cache and the compute buffer grow with it).",
            when="can_shorten",
        ),
        Say(
            quant + " together with {flash_attn}" + flash_on + " (llama.cpp refuses a quantized V cache "
            "without flash attention).",
            when="!flash_on",
        ),
        Say(quant + " (flash attention is on, as a quantized V cache needs).", when="flash_on"),
        Say(
            "Turn on flash attention: {flash_attn}"
            + flash_on
            + " (a much smaller compute buffer at long context).",
            when="!flash_on",
        ),
        Say(
            "A smaller micro-batch shrinks the compute buffer: {ubatch} 256.",
            when="!kv_failed ubatch_over_256",
        ),
        # (no fewer slots: llama.cpp's slots share the --ctx-size cells, -np does not change the cache)
        "Or keep fewer layers on the GPU: {gpu_layers} N.",
    )


def _compute_oom(flash_on: str, default_on: bool) -> tuple[str | Say, ...]:
    """The compute buffer (the graph's scratch memory) did not fit: what shrinks it, in this engine's flags.

    Without flash attention it holds the n_ctx x n_ubatch attention scores, so flash attention and a
    smaller micro-batch shrink it without giving up context; the context comes last. `default_on`: the
    engine turns flash attention on by default (llama-server's `auto`), so a log that does not say is
    told of it as a condition, after the change that surely shrinks the buffer (QA 32 D6).
    """
    turn_on = "Turn on flash attention: {flash_attn}" + flash_on
    if_off = "If flash attention is off (the log does not say which), turn it on: {flash_attn}" + flash_on
    return (
        Say(
            turn_on + " (without it the compute buffer holds the context x micro-batch attention scores).",
            when="flash_off" if default_on else "!flash_on",
        ),
        Say(
            "A smaller micro-batch shrinks the compute buffer: {ubatch} 256 (or 128).", when="ubatch_over_256"
        ),
        *([Say(if_off + ".", when="flash_unknown")] if default_on else []),
        Say("Then a shorter context: {context}{smaller}.", when="can_shorten"),
    )


def _smaller_quant(unknown: str, quant: str, q4: str, q3: str, q2: str) -> tuple[Say, ...]:
    """The next quantization down from the file's own (the log's file type): none past 2-bit.

    `unknown` is said when the log does not name the file's quantization; `quant` is how a smaller one
    is had ("a ... GGUF", "the tag ..."), filled with a name.
    """
    return (
        Say(unknown, when="!file_bits_known"),
        Say(
            f"Or use a smaller quantization of the same model: {quant.format(q4)} (this file is "
            "{file_bits}-bit; the file is the quantization).",
            when="file_over_4bit",
        ),
        Say(
            f"The file is already 4-bit: the next step down is 3-bit, {quant.format(q3)}, at some loss "
            "of quality; or a smaller model.",
            when="file_4bit",
        ),
        Say(
            f"The file is already 3-bit: 2-bit ({quant.format(q2)}) is the last step down, at a clear loss "
            "of quality; a smaller model is usually the better move.",
            when="file_3bit",
        ),
        Say(
            "The file is already {file_bits}-bit: no smaller quantization is left; use a smaller model.",
            when="file_2bit",
        ),
    )


# What the three engines that run llama.cpp have in common in the advice.
_LLAMA_ADVICE: dict[str, tuple[str | Say, ...]] = {
    "weights_oom": (
        # a mixture of experts: its experts are most of the weights and the least of the work per token, so
        # they go to host RAM first (the wizard's first move too), the attention staying on the GPU
        Say(
            "The weights do not fit: keep the experts of the first N layers in host RAM with {n_cpu_moe} N "
            "({cpu_moe}: all of them); attention stays on the GPU, faster than moving whole layers "
            "(`vramtui wizard` finds N).",
            when="moe_offload",
        ),
        Say(
            "The weights do not fit: put fewer layers on the GPU with {gpu_layers} N (the rest run from host "
            "RAM).",
            when="!moe_offload",
        ),
        Say("Or put fewer whole layers on the GPU: {gpu_layers} N.", when="moe_offload"),
        *_smaller_quant(
            "Or use a smaller quantization of the same model (e.g. a Q4_K_M GGUF instead of Q8_0: the file is "
            "the quantization).",
            "a {} GGUF",
            "Q4_K_M",
            "Q3_K_M or IQ3_M",
            "IQ2_M or Q2_K",
        ),
    ),
    "request_oom": (
        "A request needed more memory than was left: send shorter prompts or lower {context}.",
        "Smaller batches: {batch} and {ubatch} (e.g. 256).",
        "Fewer concurrent sequences: {parallel} 1.",
    ),
    # builds of 2026 spell mmap off `--load-mode none` and refuse --no-mmap (QA 32 D13): both named
    "host_killed": (
        "Keep memory-mapping on (no --no-mmap, nor --load-mode none on newer builds) and pick a smaller "
        "quantization.",
    ),
    "kv_type_block_mismatch": (
        "The KV cache type's block does not divide this model's head size: keep f16 (or q8_0 where its "
        "32-wide block divides it) with {kv_dtype}.",
    ),
    "server_dropped": (
        "Read the server's own log, which names the failure: `journalctl -u ollama` (Linux), "
        "~/.ollama/logs/server.log (macOS), %LOCALAPPDATA%\\Ollama\\server.log (Windows).",
        "If host RAM ran out while loading: a smaller quantization, or a smaller num_ctx.",
    ),
    "wrong_format": (
        "The file is not a GGUF: llama.cpp and Ollama read only GGUF. Serve a safetensors/AWQ/GPTQ "
        "checkpoint with vLLM or TGI (or transformers), or download a GGUF build of the model "
        "(or convert the original 16-bit checkpoint with llama.cpp's convert_hf_to_gguf.py).",
    ),
}
# A quantized V cache needs flash attention: llama.cpp refuses it otherwise ("V cache quantization
# requires flash_attn").
LLAMA_CPP = LogProfile(
    "llama.cpp",
    precedence=20,
    process_names=("llama-server", "llama-cli", "llama"),
    # ik_llama.cpp prints mainline's lines (its fork's era): its log is read and advised as llama.cpp's
    aliases=("ik_llama.cpp", "ik_llama", "ik-llama.cpp", "ik_llama_cpp", "ik-llama"),
    reads_gguf=True,
    advice={
        **_LLAMA_ADVICE,
        "context_oom": _context_oom("--cache-type-k q8_0 --cache-type-v q8_0", " on"),
        "compute_oom": _compute_oom(" on", default_on=True),
        "context_too_long": ("llama-server can drop old tokens instead of failing: --context-shift.",),
        # a prompt longer than its slot: the log's n_ctx_seq and n_ctx where printed (QA 6)
        "slots": (
            Say(
                SLOTS_SPLIT,
                otherwise="A slot gets the context divided among the slots (--parallel; llama-server's auto "
                "is 4): fewer slots give one request more of it.",
                when="!one_slot",
            ),
        ),
        "v_cache_needs_flash_attn": (
            "Turn on flash attention: --flash-attn on (llama.cpp quantizes the V cache only with it).",
            "Or keep the V cache 16-bit: --cache-type-v f16 (a quantized K cache alone needs no flash attention).",
        ),
        "too_many_sequences": (
            "Fewer slots: --parallel 256 at most (llama.cpp runs no more sequences at once).",
        ),
        "kv_8bit": (
            "Or store the KV cache in 8 bits (half its bytes): --cache-type-k q8_0 --cache-type-v q8_0 with "
            "--flash-attn on.",
        ),
    },
)
LLAMA_CPP_PYTHON = LogProfile(
    "llama-cpp-python",
    precedence=30,
    process_names=("python",),
    prints_log_of="llama.cpp",
    reads_gguf=True,
    advice={
        **_LLAMA_ADVICE,
        "context_oom": _context_oom("--type_k 8 --type_v 8 (8 is q8_0)", " true"),
        "compute_oom": _compute_oom(" true", default_on=False),
        "kv_8bit": (
            "Or store the KV cache in 8 bits (half its bytes): --type_k 8 --type_v 8 (8 is q8_0) with "
            "--flash_attn true.",
        ),
        "v_cache_needs_flash_attn": (
            "Turn on flash attention: --flash_attn true (llama.cpp quantizes the V cache only with it).",
            "Or keep the V cache 16-bit: --type_v 1 (1 is f16; a quantized K cache alone needs no flash "
            "attention).",
        ),
    },
)
# Ollama gives its runner num_ctx x OLLAMA_NUM_PARALLEL cells (its `--ctx-size` and the n_ctx it prints):
# the setting a user changes is that count over the parallel requests, and one request at a time divides
# the cache by them. Its knobs are environment variables, spelled NAME=value.
_OLLAMA_ONE_AT_A_TIME = Say(
    "One request at a time: OLLAMA_NUM_PARALLEL=1 (now {runner_parallel}): Ollama gives its runner the context "
    "times the parallel requests ({context_now} cells for a context of {slot_context}), so this divides the "
    "KV cache by {runner_parallel}.",
    when="shared_context",
)
_OLLAMA_SHORTER = Say(
    "A shorter context: OLLAMA_CONTEXT_LENGTH={slot_context_smaller} (now {slot_context}; num_ctx in a request "
    "or a Modelfile sets it per model): the KV cache and the compute buffer grow with it.",
    otherwise="A shorter context: a lower OLLAMA_CONTEXT_LENGTH (or num_ctx in a request or a Modelfile): the "
    "KV cache and the compute buffer grow with it.",
)
_OLLAMA_FEWER_LAYERS = (
    "Or keep fewer layers on the GPU: the model option num_gpu (API options or a Modelfile)."
)
OLLAMA = LogProfile(
    "ollama",
    precedence=70,
    process_names=("ollama", "llama-server", "llama"),
    reads_gguf=True,
    advice={
        **_LLAMA_ADVICE,
        "weights_oom": (
            "The weights do not fit: lower the GPU layers with the model option num_gpu (API options or a Modelfile).",
            *_smaller_quant(
                "Or pull a smaller quantization tag of the model (e.g. :q4_K_M).",
                "pull the tag {}",
                ":q4_K_M",
                ":q3_K_M",
                ":q2_K",
            ),
        ),
        "context_oom": (
            _OLLAMA_ONE_AT_A_TIME,
            _OLLAMA_SHORTER,
            "Quantize the KV cache: OLLAMA_KV_CACHE_TYPE=q8_0 together with OLLAMA_FLASH_ATTENTION=1 "
            "(Ollama applies the KV cache type only with flash attention on).",
            "Turn on flash attention: OLLAMA_FLASH_ATTENTION=1 (a much smaller compute buffer at long context).",
            _OLLAMA_FEWER_LAYERS,
        ),
        "compute_oom": (
            Say(
                "Turn on flash attention: OLLAMA_FLASH_ATTENTION=1 (without it the compute buffer holds the "
                "context x micro-batch attention scores).",
                when="!flash_on",
            ),
            _OLLAMA_ONE_AT_A_TIME,
            _OLLAMA_SHORTER,
            # on the GPU, the buffer's room comes from the layers there: fewer of them leave it more
            Say("A smaller micro-batch: the model option num_batch (e.g. 256).", when="gpu_oom"),
            Say(_OLLAMA_FEWER_LAYERS, when="gpu_oom"),
        ),
        "request_oom": (
            "A request needed more memory than was left: send shorter prompts.",
            _OLLAMA_ONE_AT_A_TIME,
            _OLLAMA_SHORTER,
            "Smaller batches: the model option num_batch (e.g. 256, in API options or a Modelfile).",
        ),
        "unknown_arch": ("Update Ollama: this model needs a newer runner.",),
        "file_missing": ("Check the model name and tag, then `ollama pull NAME:TAG`.",),
        "runner_start_timeout": (
            "Ollama stopped waiting for its runner to load the model (OLLAMA_LOAD_TIMEOUT, 5m by default): "
            "raise it (e.g. OLLAMA_LOAD_TIMEOUT=15m) when the load is slow but moving.",
            "A load this slow is most often the model paging through host RAM: a smaller model or "
            "quantization, or free RAM (close other programs).",
        ),
    },
)
PROFILES: tuple[LogProfile, ...] = (LLAMA_CPP, LLAMA_CPP_PYTHON, OLLAMA)


STAGE_RULES_1: tuple[StageRule, ...] = (
    # llama.cpp / llama-server / llama-cpp-python / Ollama's runner
    StageRule("common_download_file", "download", backend="llama.cpp"),
    StageRule("get_repo_commit", "download", backend="llama.cpp"),
    StageRule("get_repo_files", "download", backend="llama.cpp"),
    StageRule("curl_perform_with_retry", "download", backend="llama.cpp"),
    StageRule("llama_load_model_from_url", "download", backend="llama.cpp"),
    StageRule("llama_model_loader", "load_weights", backend="llama.cpp"),
    # the model's own print_info, not 2026's common_params_print_info (the settings, before any model: QA 32 D8)
    StageRule("print_info:", "load_weights", r"(?<![\w])print_info:", backend="llama.cpp"),
    StageRule("llm_load_print_meta", "load_weights", backend="llama.cpp"),
    StageRule("load_tensors", "load_weights", backend="llama.cpp"),
    StageRule("llm_load_tensors", "load_weights", backend="llama.cpp"),
    StageRule("llama_model_load", "load_weights", backend="llama.cpp"),
    StageRule("llama_load_model_from_file", "load_weights", backend="llama.cpp"),
    StageRule("gguf_init_from_file", "load_weights", backend="llama.cpp"),
    StageRule(
        "loading model", "load_weights", r"(?:load_model|main|llama\.cpp): loading model", backend="llama.cpp"
    ),
    # not inside a word: Ollama's settings dump at every start names OLLAMA_CONTEXT_LENGTH and
    # OLLAMA_KV_CACHE_TYPE (an idle server read "stops while allocating its KV cache")
    StageRule("llama_context", "kv_cache", r"(?<!\w)llama_context", backend="llama.cpp"),
    # old Metal builds name each buffer they add: the KV cache's and the compute ("alloc") buffer's
    StageRule("ggml_metal_add_buffer", "kv_cache", r"allocated '(?:kv|alloc)\s", backend="llama.cpp"),
    StageRule("llama_new_context_with_model", "kv_cache", backend="llama.cpp"),
    StageRule("llama_init_from_model", "kv_cache", backend="llama.cpp"),
    # (not its K-shift, llama_kv_cache_update: that runs in a request's decode)
    StageRule("llama_kv_cache", "kv_cache", r"(?<!\w)llama_kv_cache(?!_update)", backend="llama.cpp"),
    StageRule("kv buffer size", "kv_cache", backend="llama.cpp"),
    StageRule("compute buffer size", "kv_cache", backend="llama.cpp"),
    StageRule("graph_reserve", "kv_cache", backend="llama.cpp"),
    StageRule("sched_reserve", "kv_cache", backend="llama.cpp"),
    # ggml's graph allocator reserving the compute buffer (the context's last buffer)
    StageRule("ggml_gallocr_reserve", "kv_cache", backend="llama.cpp"),
    # llama-server's speculative MTP head gets its own context after the model's ("creating MTP draft
    # context against the target model"): start-up, after the weights
    StageRule("mtp draft context", "kv_cache", backend="llama.cpp"),
    StageRule("failed to create context", "kv_cache", backend="llama.cpp"),
    # the empty warm-up run after the context (common_init_from_params), before the server listens
    StageRule("warming up the model", "kv_cache", backend="llama.cpp"),
    # After its context, llama-server's `srv/slot load_model:` lines (slots, prompt cache): still that stage.
    StageRule(
        "load_model:",
        "kv_cache",
        r"\b(?:srv|slot)\s+load_model: (?!loading model|failed to load model|local path)",
        backend="llama.cpp",
    ),
    StageRule("server is listening on", "ready", backend="llama.cpp"),
    # Today's llama-server names its own function: "I srv  llama_server: model loaded", "... listening on http://".
    StageRule("model loaded", "ready", r"\b(?:main|llama_server): model loaded", backend="llama.cpp"),
    StageRule(
        "listening on http", "ready", r"\b(?:main|llama_server): listening on https?://", backend="llama.cpp"
    ),
    StageRule("all slots are idle", "ready", backend="llama.cpp"),
    StageRule("launch_slot_", "inference", backend="llama.cpp"),
    # today's "update_slots: id 0 | task 5 |", and the older server's "[  update_slots] slot context shift |"
    StageRule(
        "update_slots",
        "inference",
        r"update_slots: id|update_slots\] (?:slot context shift|kv cache rm|slot released|input truncated)",
        backend="llama.cpp",
    ),
    StageRule("log_server_r", "inference", r"log_server_r: request: post", backend="llama.cpp"),
    StageRule("prompt eval time", "inference", backend="llama.cpp"),
    # llama-cli's last line before it evaluates the prompt: what fails after it fails on a request
    StageRule("generate: n_ctx", "inference", r"^generate: n_ctx = \d+", backend="llama.cpp"),
    StageRule("llama_perf_context_print", "inference", backend="llama.cpp"),
    StageRule("create_completion", "inference", backend="llama-cpp-python"),
    StageRule("create_chat_completion", "inference", backend="llama-cpp-python"),
    StageRule("llama runner started", "ready", backend="ollama"),
)

STAGE_RULES_2: tuple[StageRule, ...] = (
    # Ollama plans the load (layers offloaded to each device) just before it starts the runner.
    StageRule("offload to", "load_weights", r'msg="offload to \w+"', backend="ollama"),
    StageRule("while running the model", "inference", backend="ollama"),
    StageRule("pulling manifest", "download", backend="ollama"),
    StageRule("pulling ", "download", r"^(?:\S+\s+\|\s+)?pulling [0-9a-f]{6,}", backend="ollama"),
    StageRule("starting llama server", "load_weights", backend="ollama"),
    # its own engine reading the GGUF's keys (debug level): the load has begun
    StageRule("key with type not found", "load_weights", backend="ollama"),
    # its runner reserving the worst-case compute graph, after the weights (a Go panic's frame says it)
    StageRule("reserveworstcasegraph", "kv_cache", backend="ollama"),
    StageRule("/api/chat", "inference", r"\|\s*\d{3}\s*\|.*\"/api/chat\"", backend="ollama"),
    StageRule("/api/generate", "inference", r"\|\s*\d{3}\s*\|.*\"/api/generate\"", backend="ollama"),
)

# Ahead of every accelerator's generic "out of memory" (rules.py): a ggml buffer the device would not
# give, in its allocator's words (ggml-cuda's, ggml-cann's: "allocating N MiB on device 0: cudaMalloc failed:
# out of memory"), a start-up's (see "failed to allocate" below).
BUFFER_ALLOC_ERRORS: tuple[ErrorRule, ...] = (
    ErrorRule(
        "allocating",
        "device_alloc",
        "cuda_oom",
        r"_buffer_type_alloc_buffer: allocating [\d.]+ ?mib on device \d+: \w*malloc failed",
        default_stage="load_weights",
        backend="llama.cpp",
    ),
)

DEVICE_OOM_ERRORS: tuple[ErrorRule, ...] = (
    # a weights buffer that could not be had, no line saying which ("error loading model: unable to allocate
    # backend buffer", as Ollama's runner relays it): on a GPU run most often the device's; a line naming a
    # CPU buffer or a cudaMalloc, when there is one, says so first
    ErrorRule(
        "unable to allocate backend buffer",
        "device_alloc",
        "cuda_oom",
        stage="load_weights",
        strong=False,
        hint="cuda_oom",
        backend="llama.cpp",
    ),
    # Metal's own out-of-memory for a command buffer: the graph was being computed (a request, or warm-up)
    ErrorRule(
        "kiogpucommandbuffercallbackerroroutofmemory",
        "metal_command_oom",
        "cuda_oom",
        default_stage="inference",
        backend="llama.cpp",
    ),
    # Metal's failed command buffer: most often its out-of-memory (the next line says so when it can)
    # Metal hands out no buffer past its working set: "ggml_metal_get_buffer: error: buffer is nil"
    ErrorRule(
        "buffer is nil",
        "metal_buffer_nil",
        "other",
        strong=False,
        hint="cuda_oom",
        backend="llama.cpp",
    ),
    ErrorRule(
        "failed with status 5",
        "metal_command_failed",
        "other",
        r"command buffer \d+ failed with status 5",
        strong=False,
        hint="cuda_oom",
        backend="llama.cpp",
    ),
    # A ggml buffer the device would not give. llama.cpp allocates its buffers while starting (the
    # weights first, then the KV cache and the compute buffers); a request allocates from the CUDA pool
    # ("CUDA error: out of memory ... in function alloc"). With no line around to say which buffer, it
    # was the first and largest: the weights'.
    ErrorRule(
        "failed to allocate",
        "device_alloc",
        "cuda_oom",
        rf"failed to allocate {DEVICE}(?:_host)? buffer",
        default_stage="load_weights",
        backend="llama.cpp",
    ),
    # a device backend's own buffer allocator refusing (ggml-metal's "error: failed to allocate buffer,
    # size = ...", ggml-sycl's "can't allocate N Bytes of memory on device")
    ErrorRule(
        "_buffer_type_alloc_buffer",
        "device_alloc",
        "cuda_oom",
        r"(?:metal|sycl|cann|musa|opencl)\w*_buffer_type_alloc_buffer: (?:error: )?(?:failed to|can't) allocate",
        default_stage="load_weights",
        backend="llama.cpp",
    ),
    # ggml-metal since its device split (ggml_metal_buffer_init, "failed to allocate Metal buffer of N
    # bytes (out of memory)"), OpenCL's allocation failure code
    ErrorRule(
        "failed to allocate",
        "device_alloc",
        "cuda_oom",
        r"metal_buffer_init: error: failed to allocate buffer|failed to allocate metal buffer of \d+ bytes",
        default_stage="load_weights",
        backend="llama.cpp",
    ),
    ErrorRule(
        "cl_mem_object_allocation_failure",
        "device_alloc",
        "cuda_oom",
        default_stage="load_weights",
        backend="llama.cpp",
    ),
    ErrorRule(
        "unable to allocate",
        "device_alloc",
        "cuda_oom",
        rf"unable to allocate {DEVICE} buffer",
        default_stage="load_weights",
        backend="llama.cpp",
    ),
    # ("insufficient VRAM to load any model layers" is no failure: Ollama then loads the model in host RAM,
    # a quiet CPU fallback; see NOTICES_4)
    ErrorRule(
        "insufficient vram",
        "cuda_oom",
        "cuda_oom",
        r"insufficient vram(?! to load any model layers)",
        backend="ollama",
    ),
    ErrorRule("memory layout cannot be allocated", "cuda_oom", "cuda_oom", backend="ollama"),
    # Ollama gave up on its runner's load (OLLAMA_LOAD_TIMEOUT), logged at INFO ("Load failed ... error=\"timed
    # out waiting for llama runner to start - progress 0.82 - \"")
    ErrorRule(
        "timed out waiting for llama runner to start",
        "runner_start_timeout",
        "other",
        stage="load_weights",
        strong=False,  # the runner's own error (out of memory, a bad file), where it printed one, says why
        backend="ollama",
    ),
)

CONTEXT_ERRORS: tuple[ErrorRule, ...] = (
    # the KV cache has no cells left for a batch while serving (too many slots or tokens in flight)
    # the KV cache (the context, shared by the slots) has no cells left for a batch while serving: as
    # "KV cache is full", the corpus files it with the requests too long for the context
    ErrorRule(
        "failed to find a memory slot", "kv_full", "context_too_long", stage="inference", backend="llama.cpp"
    ),
    ErrorRule(
        "free space in the kv cache", "kv_full", "context_too_long", stage="inference", backend="llama.cpp"
    ),
    ErrorRule(
        "kv cache slot",
        "kv_full",
        "context_too_long",
        r"could not find a kv cache slot",
        stage="inference",
        backend="ollama",
    ),
    # llama-server: a request that does not fit its slot's share of the context (-c / --parallel).
    ErrorRule(
        "kv cache is full", "context_too_long", "context_too_long", stage="inference", backend="llama.cpp"
    ),
    # a slot's context filled up and the model's cache cannot shift (GGML_ABORT in llama.cpp's K-shift:
    # "llama.cpp:18430: Deepseek2 does not support K-shift")
    ErrorRule(
        "does not support k-shift",
        "shift_unsupported",
        "context_too_long",
        stage="inference",
        backend="llama.cpp",
    ),
    # llama-cli's own word when a batch would not evaluate: in these builds, the context had no room left
    # (round 76: `main : failed to eval` at n_ctx 256, the second long prompt)
    ErrorRule(
        "failed to eval",
        "kv_full",
        "context_too_long",
        r"^\W*main ?: failed to eval\b",
        stage="inference",
        backend="llama.cpp",
    ),
    ErrorRule(
        "too big compared to kv size",
        "context_too_long",
        "context_too_long",
        stage="inference",
        backend="llama.cpp",
    ),
    ErrorRule(
        "failed to decode the batch",
        "context_too_long",
        "context_too_long",
        r"failed to decode the batch, n_batch = 1, ret = 1",  # older servers, after halving the batch to 1
        stage="inference",
        backend="llama.cpp",
    ),
    # a prompt longer than its slot's share, refused before any token (context shift acts on generation)
    ErrorRule(
        "exceeds the available context size",
        "prompt_over_slot",
        "context_too_long",
        stage="inference",
        backend="llama.cpp",
    ),
    # llama-server's answer when a request outgrows its slot ("Context size has been exceeded.", a 500).
    ErrorRule(
        "context size has been exceeded",
        "context_too_long",
        "context_too_long",
        stage="inference",
        backend="llama.cpp",
    ),
    ErrorRule(
        "exceed context window",
        "context_too_long",
        "context_too_long",
        r"requested tokens \(\d+\) exceed context window",
        stage="inference",
        backend="llama-cpp-python",
    ),
)

FORMAT_ERRORS: tuple[ErrorRule, ...] = (
    # a KV cache type whose block the model's head size does not divide (llama_init_from_model: "K cache
    # type q4_0 with block size 32 does not divide n_embd_head_k=576"): no context with that cache type
    ErrorRule(
        "does not divide n_embd_head",
        "kv_type_block_mismatch",
        "unsupported_quant",
        r"[kv] cache type \S+ with block size \d+ does not divide n_embd_head_[kv]",
        backend="llama.cpp",
    ),
    ErrorRule(
        "could not load llama model from path",
        "old_format",
        "unsupported_quant",
        r"could not load llama model from path: \S*ggml\S*\.bin",  # a GGML .bin: read only as GGUF since 2023
        stage="load_weights",
        strong=False,  # the wrapper's summary: an error llama.cpp printed before it says more
        backend="llama-cpp-python",
    ),
    ErrorRule(
        "is this really a ggml file",
        "old_format",
        "unsupported_quant",
        stage="load_weights",
        backend="llama.cpp",
    ),
    ErrorRule(
        "unknown (magic, version)",
        "old_format",
        "unsupported_quant",
        stage="load_weights",
        backend="llama.cpp",
    ),
    ErrorRule(
        "invalid ggml type",
        "unknown_ggml_type",
        "unsupported_quant",
        stage="load_weights",
        backend="llama.cpp",
    ),
    ErrorRule(
        "removed, use",  # a repacked type llama.cpp dropped: "of type 36 (TYPE_IQ4_NL_4_4 REMOVED, use IQ4_NL ...)"
        "removed_ggml_type",
        "unsupported_quant",
        r"\(\s*type_\w+ removed, use ",
        stage="load_weights",
        backend="llama.cpp",
    ),
    ErrorRule(
        "deprecated",  # a type id ggml retired: "of type 4 (DEPRECATED) has 2880 elements per row"
        "removed_ggml_type",
        "unsupported_quant",
        r"tensor '[^']+' of type \d+ \(deprecated\)",
        stage="load_weights",
        backend="llama.cpp",
    ),
    ErrorRule(
        "unrecognized tensor type",  # llama.cpp of 2023 on a newer quantization
        "unknown_ggml_type",
        "unsupported_quant",
        stage="load_weights",
        backend="llama.cpp",
    ),
    ErrorRule(
        "unknown type",
        "unknown_ggml_type",
        "unsupported_quant",
        r"tensor '[^']+' has (?:invalid|unknown) (?:ggml )?type",
        stage="load_weights",
        backend="llama.cpp",
    ),
)

ARCH_ERRORS: tuple[ErrorRule, ...] = (
    ErrorRule(
        "unknown model architecture",
        "unknown_arch",
        "unknown_arch",
        stage="load_weights",
        backend="llama.cpp",
    ),
    # A vision projector (--mmproj) of a kind this build does not know (clip.cpp's load_hparams).
    ErrorRule(
        "unknown projector type",
        "unknown_projector",
        "unknown_arch",
        stage="load_weights",
        backend="llama.cpp",
    ),
)

ARCH_ERRORS_2: tuple[ErrorRule, ...] = (
    ErrorRule(
        "requires a newer version of ollama",
        "unknown_arch",
        "unknown_arch",
        stage="download",
        backend="ollama",
    ),
    ErrorRule(
        "not supported by your version of ollama",
        "unknown_arch",
        "unknown_arch",
        stage="load_weights",
        backend="ollama",
    ),
)

SHAPE_ERRORS: tuple[ErrorRule, ...] = (
    ErrorRule(
        "has wrong shape", "shape_mismatch", "shape_mismatch", stage="load_weights", backend="llama.cpp"
    ),
    ErrorRule(
        "wrong number of tensors",
        "shape_mismatch",
        "shape_mismatch",
        stage="load_weights",
        backend="llama.cpp",
    ),
    ErrorRule(
        "missing tensor",
        "missing_tensor",
        "shape_mismatch",
        r"missing tensor '",
        stage="load_weights",
        backend="llama.cpp",
    ),
)

HUB_ERRORS: tuple[ErrorRule, ...] = (
    ErrorRule(
        "get failed (40",
        "gated_repo",
        "other",
        r"get failed \(40[13]\)",
        stage="download",
        backend="llama.cpp",
    ),
)

MISSING_ERRORS: tuple[ErrorRule, ...] = (
    ErrorRule("get failed (404)", "not_found_remote", "file_missing", stage="download", backend="llama.cpp"),
)

MISSING_ERRORS_2: tuple[ErrorRule, ...] = (
    ErrorRule(
        "file does not exist",
        "not_found_remote",
        "file_missing",
        r"pull model manifest: file does not exist",
        stage="download",
        backend="ollama",
    ),
    ErrorRule(
        "not found, try pulling it first",
        "not_found_remote",
        "file_missing",
        stage="download",
        backend="ollama",
    ),
    # a model file that is not where the command says: the files were never located (the download
    # stage: fetching or locating the model's files), as a hub that has no such repo
    ErrorRule(
        "model path does not exist",
        "not_found_local",
        "file_missing",
        stage="download",
        backend="llama-cpp-python",
    ),
    ErrorRule(
        "failed to open",
        "not_found_local",
        "file_missing",
        r"(?:gguf_init_from_file\w*|llama_model_load\w*|fopen): failed to open .*(?:no such file|not found)?|failed to open gguf file",
        stage="download",
        backend="llama.cpp",
    ),
    # Metal compiling its shaders from source: a header the source includes is not beside it (round 76)
    ErrorRule(
        "file not found",
        "metal_source_missing",
        "file_missing",
        r"ggml_metal_init: error: .*'[\w.-]+' file not found",
        backend="llama.cpp",
    ),
)

NETWORK_ERRORS: tuple[ErrorRule, ...] = (
    ErrorRule("dial tcp", "network", "network", stage="download", backend="ollama"),
)

BROKEN_FILE_ERRORS: tuple[ErrorRule, ...] = (
    # A PyTorch checkpoint (pickle 80 02 8a 0a, or a zip) handed to llama.cpp: it reads only GGUF.
    ErrorRule(
        "invalid magic",
        "torch_checkpoint",
        "unsupported_quant",
        r"invalid magic (?:number|characters):? ?(?:0x)?(?:0a8a0280|04034b50)\b",
        stage="load_weights",
        backend="llama.cpp",
    ),
    # GGML's magics before GGUF (ggml, ggmf, ggjt, written little-endian as they print): an old .bin file
    ErrorRule(
        "invalid magic",
        "old_format",
        "unsupported_quant",
        r"invalid magic (?:characters|number):? ?'?(?:lmgg|fmgg|tjgg|ggml|ggmf|ggjt)'?",
        stage="load_weights",
        backend="llama.cpp",
    ),
    ErrorRule("invalid magic", "bad_magic", "other", stage="load_weights", backend="llama.cpp"),
    # "model is corrupted or incomplete": the file's own bytes end early (an unfinished download, a missing
    # tail): the files family, fixed by fetching it again
    ErrorRule(
        "not within the file bounds",
        "truncated_file",
        "file_missing",
        stage="load_weights",
        backend="llama.cpp",
    ),
    ErrorRule(
        "failed to read",
        "truncated_file",
        "other",
        r"gguf_init_from_file\w*: failed to read|failed to read (?:tensor|key|magic|header)",
        stage="load_weights",
        backend="llama.cpp",
    ),
    ErrorRule(
        "failed to load model from",
        "bad_file",
        "other",
        r"llama_model_loader: failed to load model from",
        stage="load_weights",
        strong=False,
        backend="llama.cpp",
    ),
)

HOST_ALLOC_ERRORS: tuple[ErrorRule, ...] = (
    ErrorRule(
        "insufficient memory",
        "host_alloc",
        "host_oom",  # ggml's own host allocation (posix_memalign) was refused: host memory
        r"ggml_aligned_malloc: insufficient memory",
        backend="llama.cpp",
    ),
    # ggml's CPU buffer: host memory could not hold a model, KV or compute buffer (host_oom).
    ErrorRule(
        "failed to allocate",
        "host_alloc",
        "host_oom",
        r"cpu_buffer_type_alloc_buffer: failed to allocate|failed to allocate cpu(?:_\w+)? buffer",
        backend="llama.cpp",
    ),
    ErrorRule(
        "unable to allocate",
        "host_alloc",
        "other",
        r"unable to allocate cpu(?:_\w+)? buffer",
        backend="llama.cpp",
    ),
    # ggml_init's own context memory (ggml.c: mem_buffer from ggml_aligned_malloc) was refused: it asserts
    # instead of printing the malloc line (seen under vramtui's address-space budget, llama-server 0.5.0-dev)
    ErrorRule(
        "mem_buffer != null",
        "host_alloc",
        "host_oom",
        r"ggml_assert\(ctx->mem_buffer != null\) failed",
        backend="llama.cpp",
    ),
    # the graph allocator's own tables (ggml-alloc.c: calloc/malloc of its hash set, node and leaf
    # allocations) were refused: QA 12, a 16-slot llama-server under a 250 MiB budget
    ErrorRule(
        "galloc",
        "host_alloc",
        "host_oom",
        r"ggml_assert\(galloc(?:->\w+(?:\.\w+)?)? != null\) failed",
        backend="llama.cpp",
    ),
)

HOST_ALLOC_ERRORS_2: tuple[ErrorRule, ...] = (
    # std::thread could not start a thread (EAGAIN): llama-server's HTTP pool and workers start before the
    # model loads. Under vramtui's address-space budget that is the budget leaving no room for a thread's
    # stack (core/logs/verdict.py reads it so); elsewhere a limit on threads (ulimit -u, a pids cgroup).
    ErrorRule(
        "resource temporarily unavailable",
        "thread_start",
        "other",
        r"what\(\):\s+resource temporarily unavailable|libgomp: thread creation failed",
        backend="llama.cpp",
    ),
    # `ollama run`'s client: the server dropped the request with no answer ("Error: Post
    # \"http://127.0.0.1:11434/api/generate\": EOF"). A runner that fails answers with its error; only a
    # server killed outright answers nothing, the OOM killer's usual work on a load (a bare "Killed")
    ErrorRule(
        "eof",
        "server_dropped",
        "host_oom_killed",
        r'^error: post "https?://[^"]+/api/(?:generate|chat|embed\w*)": eof\s*$',
        backend="ollama",
    ),
    ErrorRule(
        "model request too large for system",
        "host_ram_short",
        "host_oom",
        stage="load_weights",
        backend="ollama",
    ),
    ErrorRule(
        "more system memory",
        "host_ram_short",
        "host_oom",
        r"model requires more system memory .* than is available",
        stage="load_weights",
        backend="ollama",
    ),
)

CONTEXT_BUFFER_ERRORS: tuple[ErrorRule, ...] = (
    # llama_init_from_model refuses a quantized V cache without flash attention.
    ErrorRule(
        "requires flash_attn",
        "v_cache_needs_flash_attn",
        "other",
        r"v cache (?:quantization )?requires flash_attn|quantized v cache requires flash_attn",
        stage="kv_cache",
        backend="llama.cpp",
    ),
    # libllama refuses more sequences than LLAMA_MAX_SEQ (llama-context.cpp): -np over 256
    ErrorRule(
        "n_seq_max must be",
        "too_many_sequences",
        "other",
        stage="kv_cache",
        backend="llama.cpp",
    ),
    ErrorRule(
        "failed to allocate buffer for kv cache",
        "kv_alloc_failed",
        "cuda_oom",
        stage="kv_cache",
        backend="llama.cpp",
    ),
    # the K-shift (a full context shifted while serving) re-reserving its graph: a decode's, not the start's
    ErrorRule(
        "kv_cache_update",
        "compute_alloc_failed",
        "cuda_oom",
        r"kv_cache_update\w*: failed to allocate compute buffers",
        stage="inference",
        backend="llama.cpp",
    ),
    ErrorRule(
        "failed to allocate compute",
        "compute_alloc_failed",
        "cuda_oom",
        r"failed to allocate compute(?: pp)? buffers?",
        stage="kv_cache",
        backend="llama.cpp",
    ),
)

GENERIC_ERRORS: tuple[ErrorRule, ...] = (
    # llama-server's handler caught an exception while serving a request (a 500 to the client): after
    # the more specific rules (a request over the context is its own class)
    ErrorRule(
        "got exception",
        "request_error",
        "other",
        r"operator\(\): got exception: ",
        default_stage="inference",
        backend="llama.cpp",
    ),
    # a backend's op failed while a graph ran (a decode: a request, or the warm-up), its cause on the next
    # line ("CUDA error: ..."): weak, so a stated cause (an out-of-memory) wins
    ErrorRule(
        "compute_forward",
        "kernel_failed",
        "other",
        r"ggml_\w+_compute_forward: \w+ failed",
        strong=False,
        default_stage="inference",
        backend="llama.cpp",
    ),
    # ggml's CUDA kernels have no path for this tensor type (GGML_ABORT in getrows.cu and its kin)
    ErrorRule("unsupported src0 type", "kernel_type_unsupported", "unsupported_quant", backend="llama.cpp"),
    # the context's GPU backend would not start (Metal, Vulkan...): what failed, not yet why
    ErrorRule(
        "backend",
        "backend_init_failed",
        "other",
        r"llama_(?:new_context_with_model|init_from_model): failed to initialize \w+ backend",
        stage="kv_cache",
        strong=False,
        backend="llama.cpp",
    ),
    ErrorRule(
        "failed to create context",
        "context_failed",
        "other",
        stage="kv_cache",
        strong=False,
        backend="llama.cpp",
    ),
    ErrorRule(
        "failed to initialize the context",
        "context_failed",
        "other",
        stage="kv_cache",
        strong=False,
        backend="llama.cpp",
    ),
    ErrorRule(
        "error loading model", "load_failed", "other", stage="load_weights", strong=False, backend="llama.cpp"
    ),
    ErrorRule(
        "failed to load model",
        "load_failed",
        "other",
        stage="load_weights",
        strong=False,
        backend="llama.cpp",
    ),
    ErrorRule(
        "unable to load model",
        "load_failed",
        "other",
        stage="load_weights",
        strong=False,
        backend="llama.cpp",
    ),
)

GENERIC_ERRORS_2: tuple[ErrorRule, ...] = (
    ErrorRule(
        "llama runner process has terminated", "runner_failed", "other", strong=False, backend="ollama"
    ),
)

GENERIC_ERRORS_3: tuple[ErrorRule, ...] = (
    # A command line or port refused: the run stops before the model is read, staged (as the corpus' labels
    # do, 4 of 5 training rows) at the first stage a local model goes through; said as "start-up".
    # common/arg.cpp: a flag it refuses ('error while handling argument "--spec-type": ...'), before anything runs
    ErrorRule(
        "error while handling argument", "bad_argument", "other", stage="load_weights", backend="llama.cpp"
    ),
    # common/arg.cpp: a flag this build does not know ("error: invalid argument: --bogus-flag"), its only line
    ErrorRule(
        "argument:",
        "bad_argument",
        "other",
        r"^error: (?:invalid|unknown) argument: -",
        stage="load_weights",
        backend="llama.cpp",
    ),
    # Python's argparse, as llama-cpp-python's server (and any Python server) refuses its command line
    ErrorRule(
        "error: unrecognized arguments:",
        "bad_argument",
        "other",
        stage="load_weights",
        backend="llama-cpp-python",
    ),
    # tools/server: another process holds the port ("E srv  start: couldn't bind HTTP server socket, ...").
    ErrorRule(
        "couldn't bind http server socket", "port_in_use", "other", stage="load_weights", backend="llama.cpp"
    ),
    # Today's llama-server prints a level letter on each line ("0.01.234.567 E func: ...", "[pid] E func: ..."):
    # an E line is an error even when its words name no cause (a port already in use).
    ErrorRule(
        "e",
        "error",
        "other",
        r"^\s*(?:\[\d+\]\s+)?(?:\d+\.\d+\.\d+\.\d+\s+)?e [a-z_][\w.]*(?:\s+[a-z_][\w.]*)?: ",
        strong=False,
        backend="llama.cpp",
    ),
    ErrorRule(
        "llama-server process has terminated", "runner_failed", "other", strong=False, backend="ollama"
    ),
    ErrorRule("ggml_assert", "assert", "other", strong=False, backend="llama.cpp"),
    # ik_llama.cpp checks each op's result and stops on the first NaN or inf ("Oops(ggml_compute_forward_...,
    # ffn_moe_weights_sum-19): found -nan for i1 = 0 ..."): a numeric fault in a kernel, not memory
    ErrorRule(
        "oops",
        "nan_in_compute",
        "other",
        r"\boops\([\w.]+, [^)]*\): found [+-]?(?:nan|inf)\b",
        backend="llama.cpp",
    ),
    ErrorRule("ggml_abort", "assert", "other", strong=False, backend="llama.cpp"),
    # GGML_ABORT's own line ("ggml.c:15229: fatal error", "ggml-cuda.cu:84: CUDA error"): ggml gave up
    ErrorRule(
        "fatal error",
        "assert",
        "other",
        r"\bggml[\w-]*\.(?:c|cpp|cu|m):\d+: fatal error",
        strong=False,
        backend="llama.cpp",
    ),
    # ... and its message where one is given: "ggml-backend.cpp:750: pre-allocated tensor (cache_k_l32 ...)
    # in a buffer (Vulkan0) that cannot run the operation (CPY)" (round 81)
    ErrorRule(
        "cannot run the operation",
        "assert",
        "other",
        r"\bggml[\w-]*\.(?:c|cpp|cu|m):\d+: .*cannot run the operation",
        strong=False,
        backend="llama.cpp",
    ),
)

RECOVERIES: tuple[NoticeRule, ...] = (
    NoticeRule(
        "retrying without pipeline parallelism",
        "recovery",
        "llama.cpp retried without pipeline parallelism",
        backend="llama.cpp",
    ),
    NoticeRule(
        "retrying with",
        "recovery",
        "the engine retried",
        r"(?:compute buffer|allocation) .*retrying with",
        backend="llama.cpp",
    ),
    # llama-server retried a batch the full KV cache could not take (smaller, or after purging another
    # slot's cached prompt) and the prompt went through: the request was served, the KV error is over
    NoticeRule(
        "prompt done",
        "recovery",
        "the request went through after the KV cache was full",
        r"update_slots: .*prompt done",
        backend="llama.cpp",
        clears="kv_full",
    ),
)

NOTICES: tuple[NoticeRule, ...] = (
    # the KV cache filled while serving and llama-server made room: a request served this way is slower,
    # and a purged slot's cached prompt is processed again next time
    NoticeRule(
        "retrying with smaller",
        "kv_pressure",
        "the KV cache filled while serving: llama-server retried with a smaller batch or purged a slot's "
        "cached prompt; each slot's share of the context is small: fewer slots (--parallel) or a bigger "
        "--ctx-size",
        r"free space in the kv cache, retrying with smaller",
        backend="llama.cpp",
    ),
    NoticeRule(
        "flash attention was auto, set to disabled",
        "kernel_fallback",
        "flash attention is off (auto turned it off): slower, and a bigger compute buffer at long context",
        backend="llama.cpp",
    ),
    # llama-server's slot cut a prompt longer than its context (older builds, and --no-context-shift off)
    NoticeRule(
        "input truncated",
        "context_truncated",
        "a prompt was cut to fit the slot's context: the model never saw all of it; raise --ctx-size "
        "(per slot: --ctx-size / --parallel)",
        r"update_slots\]?:? .*input truncated",
        backend="llama.cpp",
    ),
    # a slot released with its truncated flag set (server-context.cpp): it ran out of context while
    # generating (context shift off, today's default) or shifted: the reply was cut or lost its start
    NoticeRule(
        "truncated",
        "context_truncated",
        "a reply ran into the slot's context (truncated = 1): it stopped early or lost its oldest tokens; "
        "raise --ctx-size (per slot: --ctx-size / --parallel)",
        r"stop processing: n_(?:past|tokens) = \d+, truncated = 1\b",
        backend="llama.cpp",
    ),
    # the chat handler dropped whole messages to fit the context (server/prompt.go)
    NoticeRule(
        "which exceed context length",
        "context_truncated",
        "earlier chat messages were dropped to fit the context: raise num_ctx (OLLAMA_CONTEXT_LENGTH) or the "
        "model answers without them",
        r"truncating (?:input|native chat) messages which exceed context length",  # server/routes.go too
        backend="ollama",
    ),
    # its MLX runner on a Mac: the model's memory is past what Metal recommends keeping resident, so macOS
    # pages it (x/mlxrunner/runner.go)
    NoticeRule(
        "recommended working set",
        "cpu_fallback",
        "the model is larger than the Mac's recommended GPU working set: macOS swaps part of it out and it "
        "runs slowly; a smaller quantization or num_ctx keeps it resident",
        r"model exceeds the recommended working set",
        backend="ollama",
    ),
    # the runner's cache filled and it shifted: older tokens are gone from what the model sees
    NoticeRule(
        "context limit hit - shifting",
        "context_shift",
        "the context filled up and Ollama's runner dropped the oldest tokens to go on (context shift): raise "
        "num_ctx, or the answer no longer sees what was cut",
        backend="ollama",
    ),
    # a prompt cut to fit the context: the request "works", the model never sees all of it
    NoticeRule(
        "truncating input prompt",
        "context_truncated",
        "prompts were cut to fit the context: raise num_ctx (OLLAMA_CONTEXT_LENGTH) or the model misses part of each input",
        backend="ollama",
    ),
)

NOTICES_2: tuple[NoticeRule, ...] = (
    NoticeRule(
        "flash_attn",
        "kernel_fallback",
        "flash attention was turned off",
        r"flash_attn is not compatible|flash attention (?:not|is not) supported|flash_attn requires|auto, set to disabled",
        backend="llama.cpp",
    ),
)

NOTICES_3: tuple[NoticeRule, ...] = (
    # The buffer that failed was the compute buffer (ggml's graph allocator reserving it): the first
    # error before these lines (a malloc, a cudaMalloc) was that buffer's.
    NoticeRule(
        "failed to allocate",
        "mark",
        "compute_buffer",
        r"graph_reserve: failed to allocate compute buffers|failed to allocate compute pp buffers"
        r"|ggml_gallocr_reserve_n\w*: failed to allocate \S+ buffer",
        backend="llama.cpp",
    ),
    # The buffer that failed was the KV cache's (the lines after a failed malloc / cudaMalloc say so).
    NoticeRule(
        "kv cache",
        "mark",
        "kv_buffer",
        r"failed to allocate buffer for kv cache|kv_cache_init\(\) failed",
        backend="llama.cpp",
    ),
    # ggml's backtrace of a crash: a decode (llama_decode, llama_context::decode) called from the common
    # start-up (common_init_from_params) is the empty warm-up run, after the weights (round 68)
    NoticeRule(
        "decode",
        "mark",
        "decode_frame",
        r"\b(?:llama_decode|_zn13llama_context6decode\w*)\+0x",
        backend="llama.cpp",
    ),
    NoticeRule(
        "common_init_from_params",
        "mark",
        "init_frame",
        r"common_init_from_params\w*\+0x",
        backend="llama.cpp",
    ),
    # llama.cpp's own banner, printed before it touches a device or a file.
    NoticeRule("main: seed", "mark", "llama_banner", backend="llama.cpp"),
    # ggml's CUDA error report names the call that failed: a device memory query, or the device
    # enumeration of ggml_cuda_init, fails "out of memory" only when the GPU was already full.
    NoticeRule(
        "cuda",
        "mark",
        "device_query",
        r"in function (?:ggml_backend_cuda_get_device_memory|ggml_backend_cuda_device_get_memory"
        r"|ggml_cuda_init)\b|^\s*(?:cudamemgetinfo|cudagetdevicecount|cudasetdevice)\(",
        backend="llama.cpp",
    ),
    NoticeRule(
        "flash_attn",
        "mark",
        "flash_attn_on",
        r"(?:llama_context|llama_new_context_with_model|llama_init_from_model):\s+flash_attn\s*=\s*(?:1|enabled|true)\s*$",
        backend="llama.cpp",
    ),
    # `-fa auto` (the default) resolved on: "Flash Attention was auto, set to enabled"
    NoticeRule(
        "set to enabled",
        "mark",
        "flash_attn_on",
        r"flash attention was auto, set to enabled",
        backend="llama.cpp",
    ),
    # the GPU was not used at all, or only partly
    NoticeRule(
        "not compiled with gpu offload support",
        "cpu_fallback",
        "this build has no GPU support: the GPU-layers setting is ignored and the model runs on the CPU",
        backend="llama.cpp",
    ),
    NoticeRule(
        "failed to initialize",
        "cpu_fallback",
        "CUDA failed to initialize: the model runs on the CPU, whatever the offload lines say",
        r"ggml_cuda_init: failed to initialize",
        backend="llama.cpp",
    ),
    NoticeRule("params_fit", "mark", "fit", backend="llama.cpp"),
    # its warm-up decodes one empty batch: a device OOM there is one every request will meet
    NoticeRule("warming up the model", "mark", "warmup", backend="llama.cpp"),
    # mtmd's vision encoder warm-up ("warmup: warmup with image size = 1472 x 1472"): the server comes up
    # without it when it runs out of memory
    NoticeRule("warmup with image size", "mark", OPTIONAL_WARMUP, backend="llama.cpp"),
    # Mesa's software renderer (llvmpipe, lavapipe) is a Vulkan device that is the CPU: a box whose GPU
    # driver is missing (a container without the GPU's ICD) "offloads" every layer to it
    NoticeRule(
        "llvmpipe",
        "cpu_fallback",
        "a Vulkan device is llvmpipe, Mesa's software renderer on the CPU (the GPU's Vulkan driver was not "
        "found): the layers 'offloaded' to it run on the CPU",
        r"ggml_vulkan: \d+ = .*\b(?:llvmpipe|lavapipe)\b",
        backend="llama.cpp",
    ),
    NoticeRule(
        "device type is cpu",
        "cpu_fallback",
        "Vulkan's device is a CPU (a software renderer): the GPU's Vulkan driver was not found, and every "
        "layer 'offloaded' runs on the CPU",
        backend="llama.cpp",
    ),
    NoticeRule(
        "ggml_vulkan: no devices found",
        "cpu_fallback",
        "the Vulkan build found no GPU: every layer runs on the CPU",
        backend="llama.cpp",
    ),
    NoticeRule(
        "no usable gpu found",
        "cpu_fallback",
        "no usable GPU: the GPU-layers setting is ignored and the model runs on the CPU",
        backend="llama.cpp",
    ),
    # that said, what lands on the CPU after it is no further news (QA: "the KV cache sits in host RAM
    # while the model runs on a GPU" on every CPU-only run that asked for GPU layers)
    NoticeRule("no usable gpu found", "mark", "no_gpu", backend="llama.cpp"),
    NoticeRule("ggml_vulkan: no devices found", "mark", "no_gpu", backend="llama.cpp"),
)

# The settings that ask for layers on the GPU, as launch lines and Ollama's options spell them, and what
# comes between a flag and its count.
_GPU_LAYER_FLAGS = ("gpu_layers", "gpu-layers", "num_gpu", "-ngl")
_LAYER_COUNT = r"[\s=:\"']+"

NOTICES_4: tuple[NoticeRule, ...] = (
    # a GPU found or asked for: what lands on the CPU after this is news (a CPU-only machine means it)
    # A GPU found or asked for, one rule per wording, each behind its own anchor: behind the bare word
    # "gpu" every vLLM stats line ("GPU KV cache usage: 3.4%") ran this digit-reading regex, uncached.
    *(
        NoticeRule(anchor, "mark", "gpu_intent", pattern, backend="llama.cpp")
        for anchor, pattern in (
            ("repeating", r"offloading \d+ repeating layers to gpu\b"),
            ("offload = 1", r"\boffload = 1\b"),
            ("devices", r"found \d+ (?:cuda|rocm|vulkan|sycl) devices"),
            ("library=", r"library=(?:cuda|rocm|vulkan|metal)"),
            # a buffer on a GPU device (CUDA0, Vulkan0, ROCm0, MTL0, SYCL0, CANN0, MUSA0)
            (
                "buffer size",
                r"\b(?:cuda|vulkan|rocm|mtl|sycl|cann|musa)\d+\s+(?:model|compute|kv) buffer size",
            ),
            # layers asked for on the GPU: a count that is not 0 (`--n_gpu_layers 0` asks for the CPU)
            *((flag, rf"{flag}{_LAYER_COUNT}(?:-1|[1-9]\d*|all|auto)\b") for flag in _GPU_LAYER_FLAGS),
        )
    ),
    NoticeRule(
        "assigned to device cpu",
        "cpu_fallback",
        "layers are assigned to the CPU although a GPU was found or asked for: they run there (slow)",
        r"layer\s+\d+ assigned to device cpu",
        backend="llama.cpp",
        requires="gpu_intent",
        unless="no_gpu",
    ),
    # the cache of every layer (or of the host's layers) in host RAM: -nkvo, or layers kept on the CPU
    NoticeRule(
        "cpu kv buffer size",
        "cpu_fallback",
        "the KV cache sits in host RAM (a CPU KV buffer) while the model runs on a GPU: attention reads it "
        "from there, slower (--no-kv-offload, or layers left on the CPU)",
        r"\bcpu kv buffer size",
        backend="llama.cpp",
        requires="gpu_intent",
        unless="no_gpu",
    ),
    # ggml-cuda's pinned host buffers (CUDA_Host / ROCm_Host): refused, it falls back to pageable memory
    NoticeRule(
        "of pinned memory",
        "kernel_fallback",
        "pinned host memory could not be allocated: llama.cpp falls back to ordinary host memory, and "
        "copies between host and GPU are slower (a locked-memory limit, or host RAM short)",
        r"failed to allocate [\d.]+ \w+ of pinned memory|ggml_vulkan: failed to allocate pinned memory",
        backend="llama.cpp",
    ),
    NoticeRule(
        "dev = cpu",
        "cpu_fallback",
        "the KV cache of some layers sits in host RAM (dev = CPU) although a GPU was found or asked for",
        r"layer\s+\d+: dev = cpu",
        backend="llama.cpp",
        requires="gpu_intent",
    ),
    # no layer asked for on a GPU (`-ngl 0`, `--device none`): a CPU run on purpose
    *(
        NoticeRule(flag, "mark", "cpu_intent", rf"{flag}{_LAYER_COUNT}0\b", backend="llama.cpp")
        for flag in _GPU_LAYER_FLAGS
    ),
    NoticeRule("--device none", "mark", "cpu_intent", backend="llama.cpp"),
    # tensors moved to the host on purpose (-ot, --cpu-moe, --n-cpu-moe): a large host buffer is asked for
    NoticeRule("buffer type overridden", "mark", "tensors_overridden", backend="llama.cpp"),
    *(
        NoticeRule(flag, "mark", "tensors_overridden", rf"(?:^|\s){flag}\b", backend="llama.cpp")
        for flag in ("-ot", "--override-tensor", "--cpu-moe", "--n-cpu-moe")
    ),
    # where layers went, as marks: a log whose every layer went to the CPU and none to a device ran on the
    # CPU alone (the verdict says so where no GPU line is in the excerpt; see _placement_warnings)
    NoticeRule(
        "assigned to device cpu",
        "mark",
        "layer_on_host",
        r"layer\s+\d+ assigned to device cpu\b",
        backend="llama.cpp",
    ),
    NoticeRule("dev = cpu", "mark", "layer_on_host", r"layer\s+\d+: dev = cpu\b", backend="llama.cpp"),
    NoticeRule(
        "assigned to device",
        "mark",
        "layer_on_device",
        r"layer\s+\d+ assigned to device (?!cpu\b)\w",
        backend="llama.cpp",
    ),
    NoticeRule(": dev = ", "mark", "layer_on_device", r"layer\s+\d+: dev = (?!cpu\b)\w", backend="llama.cpp"),
    # llama-server's slot ran out of context and dropped its oldest tokens to go on (on in Ollama's runs)
    NoticeRule(
        "context shift",
        "context_shift",
        "the context filled up and the server dropped the oldest tokens to go on (context shift): the answer "
        "no longer sees what was cut; a larger context, or fewer parallel slots, keeps it",
        r"context shift(?:, n_keep| \|)",  # today's words, and the older server's `slot context shift | ...`
        backend="llama.cpp",
    ),
    # ik_llama.cpp on a DeepSeek GGUF converted for mainline (no separate attn_k_b/attn_v_b): it rebuilds
    # them at load and runs, "*** Your prompt processing speed will be crippled ***"
    NoticeRule(
        "detected incompatible deepseek model",
        "kernel_fallback",
        "ik_llama.cpp found a DeepSeek GGUF made for mainline llama.cpp: it runs, but prompt processing is "
        "much slower (the log says so); a GGUF made for ik_llama.cpp avoids it",
        backend="llama.cpp",
    ),
    NoticeRule(
        "flash attention not supported",
        "kernel_fallback",
        "flash attention is not supported on this device for this model: it runs without (more memory, slower)",
        backend="llama.cpp",
    ),
    NoticeRule(
        "failed to mlock",
        "memory_lock",
        "the weights could not be locked in RAM (mlock failed, RLIMIT_MEMLOCK): they can be swapped out",
        backend="llama.cpp",
    ),
    # older Ollama's words for the same choice (llm.go): the GPU was found but the model loads on the CPU
    NoticeRule(
        "falling back to cpu only",
        "cpu_fallback",
        "not enough VRAM was free for the model: Ollama falls back to the CPU and runs it there (slow)",
        backend="ollama",
    ),
    NoticeRule(
        "insufficient vram to load any model layers",
        "cpu_fallback",
        "the GPU had no room for a single layer: Ollama loads the whole model in host RAM and runs it on the CPU",
        backend="ollama",
    ),
    NoticeRule(
        "cudart init failure",
        "cpu_fallback",
        "Ollama could not initialize CUDA (cudart init failure): the model runs on the CPU",
        backend="ollama",
    ),
    NoticeRule(
        "not supported",
        "cpu_fallback",
        "this AMD GPU is not supported by the ROCm build: it is skipped, the model runs on the CPU",
        r"amdgpu(?: is)? (?:is )?not supported|gfx\d+\w* (?:is )?not supported|unsupported amd gpu",
        backend="ollama",
    ),
    # today's words, and 0.5-0.9's (`msg=offload library=cpu layers.offload=0`): the CPU runner
    NoticeRule(
        "offload",
        "cpu_fallback",
        "Ollama found no GPU to use and offloads to the CPU: the model runs there",
        r'msg="offload to cpu"|msg=offload library=cpu\b',
        backend="ollama",
    ),
    # Ollama's own default context, sized by the VRAM it found (server/routes.go: 262144 from 47 GiB): a
    # cap of that default to the trained length below is Ollama's doing, not a context the user asked for
    NoticeRule("vram-based default context", "mark", "auto_context", backend="ollama"),
    # a num_ctx over the model's trained length is capped to it: the context asked for is not the one run
    NoticeRule(
        "requested context",
        "setting_ignored",
        "the context asked for (num_ctx) is over the model's trained length: Ollama runs the trained "
        "length instead, and longer prompts are cut",
        r"requested context size too large for model|requested context length is greater than model max "
        r"context length",
        backend="ollama",
        unless="auto_context",
    ),
    NoticeRule(
        "quantized kv cache requested but flash attention disabled",
        "setting_ignored",
        "the quantized KV cache type asked for (OLLAMA_KV_CACHE_TYPE) needs flash attention, which is off: "
        "the cache stays f16; set OLLAMA_FLASH_ATTENTION=1",
        backend="ollama",
    ),
    NoticeRule(
        "flash attention enabled but not supported by model",
        "kernel_fallback",
        "flash attention was asked for (OLLAMA_FLASH_ATTENTION) but this model does not support it: it runs "
        "without, and a quantized KV cache stays f16",
        backend="ollama",
    ),
    # the new engine's memory lines: the KV cache of layers placed in host RAM on a machine with a GPU (its
    # "model weights" device=CPU line is there on every load: the token embeddings stay on the CPU; what
    # share of the weights sits there is the model_buffer figures' to tell)
    NoticeRule(
        "device=cpu",
        "cpu_fallback",
        "part of the model sits in host RAM (Ollama placed the KV cache of some layers on the CPU) although a "
        "GPU was found: that part runs there (slow)",
        r'msg="kv cache" device=cpu\b',
        backend="ollama",
        requires="gpu_intent",
    ),
    NoticeRule(
        "flash attention enabled but not supported by gpu",
        "kernel_fallback",
        "flash attention was asked for (OLLAMA_FLASH_ATTENTION) but this GPU does not support it: it runs "
        "without, and a quantized KV cache stays f16",
        backend="ollama",
    ),
    # `ollama ps`: the PROCESSOR column splits the model between host and GPU ("48%/52% CPU/GPU")
    NoticeRule(
        "% cpu/gpu",
        "cpu_fallback",
        "runs but slow: `ollama ps` shows part of the model on the CPU (PROCESSOR is split CPU/GPU); a "
        "smaller num_ctx or quantization, or fewer parallel requests, can bring it all onto the GPU",
        r"\b\d{1,3}%/\d{1,3}% cpu/gpu\b",
        backend="ollama",
    ),
    NoticeRule(
        "gpu inference disabled",
        "cpu_fallback",
        "Ollama turned GPU inference off (the CPU lacks the vector extensions its GPU runners need): the "
        "model runs on the CPU",
        backend="ollama",
    ),
    NoticeRule(
        "kv cache type not supported by model",
        "setting_ignored",
        "the quantized KV cache type asked for (OLLAMA_KV_CACHE_TYPE) is not used: this model does not support it, the cache stays f16",
        backend="ollama",
    ),
    NoticeRule(
        "offloaded 0/",
        "cpu_fallback",
        "no layer was offloaded to the GPU: the model runs on the CPU",
        backend="llama.cpp",
    ),
    NoticeRule(
        "no compatible gpus were discovered",
        "cpu_fallback",
        "Ollama found no compatible GPU: the model runs on the CPU",
        backend="ollama",
    ),
    NoticeRule(
        "library=cpu",
        "cpu_fallback",
        "Ollama runs the model on the CPU",
        r"inference compute.*library=cpu",
        backend="ollama",
    ),
)

FIGURES: tuple[FigureRule, ...] = (
    # The model file's quantization, as its bits per weight class ("file type = Q4_K - Medium": 4;
    # "ftype = 8 (mostly Q5_0)": 5; F16/BF16: 16), else from the file's name ("...-IQ4_XS.gguf"; a
    # projector's file is not the model's): the weights advice names the next quantization down.
    FigureRule(
        "type",
        "file_quant_bits",
        r"(?:file type|ftype)\s*=\s*(?:\d+ \()?(?:mostly |all )?i?q(?P<value>[1-8])_",
        count=True,
        backend="llama.cpp",
    ),
    FigureRule(
        "type",
        "file_quant_bits",
        r"(?:file type|ftype)\s*=\s*(?:\d+ \()?(?:mostly |all )?b?f(?P<value>16|32)\b",
        count=True,
        backend="llama.cpp",
    ),
    FigureRule(
        ".gguf",
        "file_name_quant_bits",  # the name is a guess: the file type, when printed, is what was read
        r"^(?!.*mmproj).*?\bi?q(?P<value>[1-8])_(?:k|\d|xxs|xs|s|m|nl)\w*[^\s'\"]*\.gguf",
        count=True,
        backend="llama.cpp",
    ),
    # Layers on the GPU and in all ("offloaded 30/49 layers to GPU"): the rest run on the host.
    FigureRule(
        "offloaded",
        "layers_offloaded",
        r"offloaded (?P<value>\d+)/\d+ layers to gpu",
        count=True,
        backend="llama.cpp",
    ),
    FigureRule(
        "offloaded",
        "layers_total",
        r"offloaded \d+/(?P<value>\d+) layers to gpu",
        count=True,
        backend="llama.cpp",
    ),
    # Ollama's own engine, its weights per device: "model weights" buffer=CUDA0 size="4.1 GiB" (0.6 to 0.11),
    # device=CUDA0 (0.12 on: ml/device.go), the CPU's line holding at least the token embeddings
    FigureRule(
        "model weights",
        "model_buffer",
        rf'msg="model weights" (?:buffer|device)=(?P<device>[\w-]+) size="?{NUM}{UNIT}',
        per_device=True,
        backend="ollama",
    ),
    # Ollama's plan: "offload to cuda" ... layers.model=31 layers.offload=20
    FigureRule(
        "layers.offload", "layers_offloaded", r"layers\.offload=(?P<value>\d+)", count=True, backend="ollama"
    ),
    FigureRule("layers.model", "layers_total", r"layers\.model=(?P<value>\d+)", count=True, backend="ollama"),
    # Ollama's runner command: its cells (num_ctx x parallel) and the parallel requests they are shared by.
    FigureRule(
        "starting llama server",
        "context",
        r"starting llama server.*--ctx-size (?P<value>\d+)",
        count=True,
        backend="ollama",
    ),
    FigureRule(
        "starting llama server",
        "runner_parallel",
        r"starting llama server.*--parallel (?P<value>\d+)",
        count=True,
        backend="ollama",
    ),
    # fit's own words: "context size reduced from 262144 to 65536 -> need 9802 MiB less memory"
    FigureRule(
        "context size reduced from",
        "fit_context_from",
        r"params_fit\w*: context size reduced from (?P<value>\d+) to \d+",
        count=True,
        backend="llama.cpp",
    ),
    # fit filling a device "with overflow to next device/system memory": "CUDA0 (...): 49 layers (47
    # overflowing)": those layers' experts stay in host memory though every layer counts as offloaded
    FigureRule(
        "overflowing",
        "fit_overflow_layers",
        r"params_fit\w*:.*\d+ layers \((?P<value>\d+) overflowing\)",
        count=True,
        backend="llama.cpp",
    ),
    # "cannot meet free memory target of 1024 MiB, need to reduce device memory by 2240 MiB": fit then
    # changes the run (context, layers, experts): its projection was for the settings it started from
    FigureRule(
        "reduce",
        "fit_reduce_by",
        rf"params_fit\w*: cannot meet free memory target.*need to reduce device memory by {NUM}\s*(?P<unit>MiB)",
        backend="llama.cpp",
    ),
    FigureRule(
        "context size reduced from",
        "fit_context_to",
        r"params_fit\w*: context size reduced from \d+ to (?P<value>\d+)",
        count=True,
        backend="llama.cpp",
    ),
    FigureRule(
        "model buffer size",
        "model_buffer",
        rf"(?P<device>[\w-]+)\s+model buffer size\s*=\s*{NUM}{UNIT}",
        per_device=True,
        backend="llama.cpp",
    ),
    FigureRule(
        "buffer size",
        "model_buffer",
        rf"llm_load_tensors:\s+(?P<device>[\w-]+)\s+buffer size\s*=\s*{NUM}{UNIT}",
        per_device=True,
        backend="llama.cpp",
    ),
    FigureRule(
        "kv buffer size",
        "kv_buffer",
        rf"(?P<device>[\w-]+)\s+kv buffer size\s*=\s*{NUM}{UNIT}",
        per_device=True,
        backend="llama.cpp",
    ),
    FigureRule(
        "compute buffer size",
        "compute_buffer",
        rf"(?P<device>[\w-]+)\s+compute buffer size\s*=\s*{NUM}{UNIT}",
        per_device=True,
        backend="llama.cpp",
    ),
    FigureRule(
        "output buffer size",
        "output_buffer",
        rf"(?P<device>[\w-]+)\s+output buffer size\s*=\s*{NUM}{UNIT}",
        per_device=True,
        backend="llama.cpp",
    ),
    FigureRule("kv self size", "kv_cache_size", rf"kv self size\s*=\s*{NUM}{UNIT}", backend="llama.cpp"),
    FigureRule(
        "llama_kv_cache",
        "kv_cache_size",
        rf"llama_kv_cache\w*: size\s*=\s*{NUM}{UNIT}",
        backend="llama.cpp",
    ),
    FigureRule(
        "cells",
        "kv_cache_cells",
        rf"llama_kv_cache\w*: size\s*=.*\(\s*{NUM} cells",
        count=True,
        backend="llama.cpp",
    ),
    # the layers a cache holds: a sliding-window model's full cache holds only its global layers
    FigureRule(
        "layers",
        "kv_cache_layers",
        rf"llama_kv_cache\w*: size\s*=.*cells,\s*{NUM} layers",
        count=True,
        backend="llama.cpp",
    ),
    # "(2048 cells, 4 layers, 2/2 seqs)": sequences / streams; the cells are each stream's (a cache that is
    # not unified keeps one stream per slot)
    FigureRule(
        "seqs",
        "kv_cache_streams",
        r"llama_kv_cache\w*: size\s*=.*cells,.*\d+/(?P<value>\d+) seqs\)",
        count=True,
        backend="llama.cpp",
    ),
    FigureRule(
        "n_ctx",
        "context",
        rf"(?:llama_context|llama_new_context_with_model|llama_init_from_model):\s+n_ctx\s*=\s*{NUM}\s*$",
        count=True,
        backend="llama.cpp",
    ),
    FigureRule(
        "n_ubatch",
        "ubatch_tokens",
        rf"(?:llama_context|llama_new_context_with_model|llama_init_from_model):\s+n_ubatch\s*=\s*{NUM}\s*$",
        count=True,
        backend="llama.cpp",
    ),
    # "n_ctx_seq (2048) < n_ctx_train (131072) -- the full capacity of the model will not be utilized"
    # ("n_ctx_per_seq" before 2025): what one request gets, against what the model was trained on
    FigureRule(
        "n_ctx_",
        "context_per_sequence",
        rf"(?:llama_context|llama_new_context_with_model|llama_init_from_model):\s+n_ctx_(?:per_)?seq\s*=\s*{NUM}\s*$",
        count=True,
        backend="llama.cpp",
    ),
    # llama-server's own line: "initializing, n_slots = 2, n_ctx_slot = 2048, kv_unified = 'false'" (a
    # log at its default verbosity prints no llama_context lines): the slots, and each one's share when
    # they split the context (a unified cache lets any slot use all of it)
    FigureRule(
        "n_slots",
        "server_slots",
        rf"load_model: initializing, n_slots = {NUM},",
        count=True,
        backend="llama.cpp",
    ),
    FigureRule(
        "n_ctx_slot",
        "context_per_sequence",
        rf"load_model: initializing, n_slots = \d+, n_ctx_slot = {NUM}, kv_unified = 'false'",
        count=True,
        backend="llama.cpp",
    ),
    FigureRule(
        "< n_ctx_train",
        "context_per_sequence",
        rf"n_ctx_(?:per_)?seq\s*\({NUM}\)\s*<\s*n_ctx_train",
        count=True,
        backend="llama.cpp",
    ),
    FigureRule(
        "< n_ctx_train",
        "model_trained_context",
        rf"n_ctx_(?:per_)?seq\s*\(\d+\)\s*<\s*n_ctx_train\s*\({NUM}\)",
        count=True,
        backend="llama.cpp",
    ),
    # the context the command line asked for (a run that failed before its llama_context lines says it
    # nowhere else): "llama-server --model m.gguf --ctx-size 2048", as vramtui's launch line echoes it
    FigureRule("--ctx-size", "command_context", rf"--ctx-size[= ]{NUM}\b", count=True, backend="llama.cpp"),
    # ... and the micro-batch it asked for (QA 34 L1: a run that failed in mmap was compared with fit's
    # projection at the default 512 where it ran at 256)
    FigureRule(
        "--ubatch-size", "command_ubatch", rf"--ubatch-size[= ]{NUM}\b", count=True, backend="llama.cpp"
    ),
    # ... and a quantized KV cache type (q8_0 and below): 8-bit advice would not shrink it (QA 12)
    FigureRule(
        "--cache-type-k",
        "kv_quantized",
        r"--cache-type-k[= ]i?q\d",
        count=True,
        constant=1,
        backend="llama.cpp",
    ),
    # llama-server's HTTP pool, started before the model loads: a thread (and its stack) per slot and a few
    FigureRule(
        "threads for http server",
        "http_threads",
        rf"using {NUM} threads for HTTP server",
        count=True,
        backend="llama.cpp",
    ),
    FigureRule(
        "n_head",
        "attention_heads",
        rf"(?:print_info|llm_load_print_meta):\s+n_head\s*=\s*{NUM}\s*$",
        count=True,
        backend="llama.cpp",
    ),
    FigureRule(
        "cudamalloc failed",
        "oom_requested",
        rf"allocating {NUM}{UNIT} on device \d+: cudamalloc failed",
        backend="llama.cpp",
    ),
    # Which device ran out: "allocating N MiB on device 1: cudaMalloc failed", "failed to allocate CUDA1
    # buffer" (the wizard moves layers off it when another card has room)
    FigureRule(
        "cudamalloc failed",
        "oom_device",
        r"on device (?P<value>\d+): cudamalloc failed",
        count=True,
        backend="llama.cpp",
    ),
    FigureRule(
        "failed to allocate",
        "oom_device",
        r"failed to allocate (?:cuda|rocm)(?P<value>\d+) buffer",
        count=True,
        backend="llama.cpp",
    ),
    FigureRule(
        "failed to allocate",
        "oom_requested",
        rf"failed to allocate (?:[\w-]+ )?buffer of size {NUM}(?P<unit>)",
        unit_default="B",
        backend="llama.cpp",
    ),
    FigureRule(
        "insufficient memory",
        "oom_requested",
        rf"insufficient memory \(attempted to allocate {NUM}(?:\s*(?P<unit>MB|MiB|GB))?",
        unit_default="MiB",
        backend="llama.cpp",
    ),
)

# The model's shape as llama.cpp prints it (print_info / llm_load_print_meta, and the GGUF header's
# "- kv  6: qwen3moe.block_count u32 = 48"): enough for the estimator to size a run from its log alone.
_SHAPE_FIGURES: tuple[tuple[str, str, str], ...] = (
    ("n_layer", "model_layers", "block_count"),
    ("n_embd", "model_hidden", "embedding_length"),
    ("n_head_kv", "model_kv_heads", "attention.head_count_kv"),
    ("n_embd_head_k", "model_head_dim_k", "attention.key_length"),
    ("n_embd_head_v", "model_head_dim_v", "attention.value_length"),
    ("n_vocab", "model_vocab", "vocab_size"),
    ("n_ctx_train", "model_trained_context", "context_length"),
    ("n_expert", "model_experts", "expert_count"),
    ("n_expert_used", "model_experts_used", "expert_used_count"),
    ("n_ff_exp", "model_moe_ff", "expert_feed_forward_length"),
    ("n_ff", "model_ff", "feed_forward_length"),
    ("n_swa", "model_swa_window", "attention.sliding_window"),
)


def _shape_rules() -> tuple[FigureRule, ...]:
    rules: list[FigureRule] = []
    for printed, key, gguf_key in _SHAPE_FIGURES:
        rules.append(
            FigureRule(
                printed,
                key,
                rf"(?:print_info|llm_load_print_meta):\s+{printed}\s*=\s*{NUM}\s*$",
                count=True,
                backend="llama.cpp",
            )
        )
        rules.append(
            FigureRule(
                gguf_key.rsplit(".", 1)[-1],
                key,
                rf"- kv\s+\d+:\s+\w+\.{re.escape(gguf_key)}\s+u32\s*=\s*{NUM}\s*$",
                count=True,
                backend="llama.cpp",
            )
        )
    return tuple(rules)


def _breakdown_rules() -> tuple[FigureRule, ...]:
    """fit's breakdown of each row (MiB): `self = model + context + compute`. A device row puts it in
    parentheses after `total = free +`; the Host row and the CPU's extra buffers (AMX, CPU_REPACK) have it
    alone: "|   - Host   |   27 =     0 +      16 +      11   |" (the mapped file counts 0 there). Printed
    again at each of fit's tries: the last one read is the run's."""
    row = r"memory_breakdown_print:\s*\|\s*-\s*(?P<device>[\w-]+)(?: \([^|]*\))?\s*\|\s*(?:\d+\s*=\s*\d+\s*\+\s*\()?\s*\d+\s*=\s*"
    parts = (
        r"(?P<value>\d+)\s*\+\s*\d+\s*\+\s*\d+",
        r"\d+\s*\+\s*(?P<value>\d+)\s*\+\s*\d+",
        r"\d+\s*\+\s*\d+\s*\+\s*(?P<value>\d+)",
    )
    keys = ("fit_breakdown_model", "fit_breakdown_context", "fit_breakdown_compute")
    return tuple(
        FigureRule(
            "memory_breakdown_print", key, row + part + r"(?P<unit>)", per_device=True, backend="llama.cpp"
        )
        for key, part in zip(keys, parts, strict=True)
    )


_FA_PREFIX = r"(?:llama_context|llama_new_context_with_model|llama_init_from_model):\s+flash_attn"
_OWN_LAUNCH = re.escape(ownlines.LAUNCH)

FIGURES_2: tuple[FigureRule, ...] = (
    *_shape_rules(),
    FigureRule(
        "n_head", "model_heads", rf"(?:print_info|llm_load_print_meta):\s+n_head\s*=\s*{NUM}\s*$",
        count=True, backend="llama.cpp",
    ),
    FigureRule(
        "head_count", "model_heads", rf"- kv\s+\d+:\s+\w+\.attention\.head_count\s+u32\s*=\s*{NUM}\s*$",
        count=True, backend="llama.cpp",
    ),
    # "print_info: file size = 17.28 GiB (4.86 BPW)" (older: "llm_load_print_meta: model size = ...")
    FigureRule(
        "size", "model_file", rf"(?:print_info|llm_load_print_meta):\s+(?:file|model) size\s*=\s*{NUM}{UNIT}",
        backend="llama.cpp",
    ),
    # The Mac's GPU working set, Metal's limit on what it hands out ("ggml_metal_init:
    # recommendedMaxWorkingSetSize  = 22906.50 MB", ggml-metal prints bytes / 1e6)
    FigureRule(
        "recommendedmaxworkingsetsize",
        "device_working_set",
        rf"recommendedMaxWorkingSetSize\s*=\s*{NUM}(?P<unit>)\s*MB",
        unit_default="MB_DECIMAL",
        backend="llama.cpp",
    ),
    # The card's free memory when the model loads: "using device CUDA0 (NVIDIA GeForce RTX 4080 SUPER)
    # - 15035 MiB free"; Ollama's plan: memory.available="[22.0 GiB 22.0 GiB]" (the first card's).
    FigureRule(
        "using device",
        "device_free",
        rf"using device (?P<device>[\w-]+) \(.*\)\s*-\s*{NUM}{UNIT} free",
        per_device=True,
        backend="llama.cpp",
    ),
    # Each device's free memory as fit's breakdown table prints it (llama-server, and Ollama >= 0.30 which
    # runs it): "common_memory_breakdown_print: |   - CUDA0 (V100-SXM2-32GB) | 32501 = 32192 + (15708 = ...",
    # total = free + (self ...), in MiB; the Host row names no device in parentheses and is not read.
    FigureRule(
        "memory_breakdown_print",
        "device_free",
        rf"memory_breakdown_print:\s*\|\s*-\s*(?P<device>[\w-]+) \([^|]*\)\s*\|\s*\d+\s*=\s*{NUM}(?P<unit>)\s*\+",
        unit_default="MiB",
        per_device=True,
        backend="llama.cpp",
    ),
    *_breakdown_rules(),
    # llama-server's device list (also in Ollama >= 0.30's discovery output):
    # "  Vulkan0: AMD Radeon 890M Graphics (RADV STRIX1) (33392 MiB, 33234 MiB free)"
    FigureRule(
        "mib free)",
        "device_free",
        rf"^\s*(?P<device>[A-Za-z]+\d+): .*\(\d+ MiB, {NUM}(?P<unit>) MiB free\)\s*$",
        unit_default="MiB",
        per_device=True,
        backend="llama.cpp",
    ),
    # fit's projection before it loads: "projected to use 2313 MiB of host memory vs. 24151 MiB of total
    # host memory" (a CPU run), "... MiB of device memory vs. N MiB of free device memory" (all GPUs)
    FigureRule(
        "projected to use",
        "fit_projected_device",
        rf"params_fit\w*: projected to use {NUM}(?P<unit>) MiB of device memory",
        unit_default="MiB",
        backend="llama.cpp",
    ),
    FigureRule(
        "projected to use",
        "fit_projected_host",
        rf"params_fit\w*: projected to use {NUM}(?P<unit>) MiB of host memory",
        unit_default="MiB",
        backend="llama.cpp",
    ),
    # Flash attention as the context was made: "llama_context: flash_attn = auto" (auto: no figure, the
    # engine's own default), "= disabled" / "= enabled" (today), "= 0" / "= 1" (older builds).
    FigureRule(
        "flash_attn", "flash_attn", rf"{_FA_PREFIX}\s*=\s*(?P<value>[01])\s*$", count=True, backend="llama.cpp"
    ),
    FigureRule(
        "flash_attn", "flash_attn", rf"{_FA_PREFIX}\s*=\s*(?:enabled|true)\s*$", count=True, constant=1,
        backend="llama.cpp",
    ),
    FigureRule(
        "flash_attn", "flash_attn", rf"{_FA_PREFIX}\s*=\s*(?:disabled|false)\s*$", count=True, constant=0,
        backend="llama.cpp",
    ),
    # vramtui's own launch line: what the command asked, where the log at llama-server's default
    # verbosity says nothing of flash attention (a later line of the engine's own wins)
    FigureRule(
        ownlines.LAUNCH.rstrip(), "flash_attn", rf"^\S*\s*{_OWN_LAUNCH}.*\s(?:-fa|--flash-attn)[ =]off\b",
        count=True, constant=0, backend="llama.cpp",
    ),
    FigureRule(
        ownlines.LAUNCH.rstrip(), "flash_attn", rf"^\S*\s*{_OWN_LAUNCH}.*\s(?:-fa|--flash-attn)[ =]on\b",
        count=True, constant=1, backend="llama.cpp",
    ),
    # "= auto" as the scheduler resolved it, before the compute buffers are reserved: "Flash Attention was
    # auto, set to enabled", "resolve_fused_ops: Flash Attention enabled" (the later line wins); a card or
    # head size it lacks: "resolve_fused_ops: Flash Attention not supported, set to disabled" (2026)
    FigureRule(
        "flash attention", "flash_attn", r"flash attention (?:was auto, set to )?enabled\s*$", count=True,
        constant=1, backend="llama.cpp",
    ),
    FigureRule(
        "flash attention", "flash_attn", r"flash attention (?:was auto, |not supported, )?(?:set to )?disabled\s*$",
        count=True,
        constant=0, backend="llama.cpp",
    ),
    # llama-server loads a speculative draft model after the model ("common_speculative_init_result:
    # loading draft model 'x.gguf'"): the buffers printed after it are the draft's (core/logs/state.py
    # files them under draft_*), not a new load of the model.
    # A sliding-window model's second cache ("llama_kv_cache_iswa: creating     SWA KV cache, size = 768
    # cells"; "_unified_iswa" before mid-2025): its buffer lines add to the full cache's.
    FigureRule(
        "creating", CACHE_PART_MARK, r"_iswa: creating\s+swa kv cache", count=True, constant=1, backend="llama.cpp"
    ),
    FigureRule(
        "loading draft model", DRAFT_MARK, r"loading draft model\b", count=True, constant=1, backend="llama.cpp"
    ),
    FigureRule(
        "memory.available",
        "device_free",
        rf'memory\.available="?\[{NUM}{UNIT}',
        backend="ollama",
    ),
)  # fmt: skip

MARKS: tuple[tuple[str, str], ...] = (
    ("ollama", "ollama"),
    ("source=server.go", "ollama"),
    ("source=sched.go", "ollama"),
    # more of its Go sources in its `level=... source=FILE.go:LINE` lines
    *(
        (f"source={name}.go:", "ollama")
        for name in (
            "routes",
            "ggml",
            "gpu",
            "amd_linux",
            "amd_windows",
            "images",
            "runner",
            "types",
            "payload_common",
            "memory",
            "device",
        )
    ),
    ("[gin]", "ollama"),
    ("pulling manifest", "ollama"),
    ("llama runner process", "ollama"),  # its wait for the runner (llm/server.go), as its CLI repeats it
    ("llama-server process has terminated", "ollama"),  # the same in its releases of 2023
    # its own API's routes in its GIN request lines (`500 | POST "/api/chat"`)
    ('"/api/chat"', "ollama"),
    ('"/api/generate"', "ollama"),
    # its Go sources in the plain log format of its first releases ("2023/07/07 11:30:34 routes.go:145:
    # Listening on ..."), and a Go runtime's panic: of the llama.cpp family only Ollama's runner is Go
    ("routes.go:", "ollama"),
    ("images.go:", "ollama"),
    ("server.go:", "ollama"),
    ("goroutine ", "ollama"),
    ("panic: ", "ollama"),
)

MARKS_2: tuple[tuple[str, str], ...] = (
    ("llama_cpp/", "llama-cpp-python"),
    ("llama_cpp\\", "llama-cpp-python"),
    ("llama_cpp.server", "llama-cpp-python"),
    ("[llama-cpp]", "llama-cpp-python"),
    ("model metadata: {", "llama-cpp-python"),  # llama_cpp/llama.py, verbose
    ("available chat formats from metadata", "llama-cpp-python"),
    ("using gguf chat template", "llama-cpp-python"),
    ("llama_", "llama.cpp"),
    ("ggml_", "llama.cpp"),
    ("load_tensors", "llama.cpp"),
    ("print_info:", "llama.cpp"),
    ("gguf", "llama.cpp"),
    ("llama-server", "llama.cpp"),
    ("llama.cpp", "llama.cpp"),
    ("update_slots", "llama.cpp"),
    ("print_timing", "llama.cpp"),  # llama-server's slot timings while it serves
    ("unknown model architecture: '", "llama.cpp"),  # its loader's words (Ollama's runner prints them too)
    ("error while handling argument", "llama.cpp"),  # common/arg.cpp refusing a flag
    ("flash attention not supported by", "llama.cpp"),
    ("launch_slot_", "llama.cpp"),
    ("srv ", "llama.cpp"),
)

ECHO_CUTS: tuple[tuple[str, str], ...] = (
    ("log_server_r: request:", "{"),  # llama-server --verbose: the request's JSON body
    ("log_server_r: response:", '"choices"'),  # the answer; an error response ({"error": ...}) is read
    ("converted request:", "{"),
    ("| prompt token", " '"),  # llama-server, each prompt token: "prompt token 3: 151644 '<|im_start|>'"
)

ECHO_CUTS_2: tuple[tuple[str, str], ...] = (
    ('msg="chat request"', " prompt="),  # Ollama with OLLAMA_DEBUG=1
    ('msg="generate request"', " prompt="),
)


# How far a run got (core/logs/ruletypes.MILESTONES): each line proves a step is behind it.
PROGRESS: tuple[ProgressRule, ...] = (
    ProgressRule("loaded meta data", "files", backend="llama.cpp"),
    # the context is being set up: every tensor of the model is in its buffers
    ProgressRule("llama_context:", "weights", r"^(?:.*\s)?llama_context:\s", backend="llama.cpp"),
    ProgressRule("llama_new_context_with_model", "weights", backend="llama.cpp"),
    ProgressRule("llama_init_from_model", "weights", r"llama_init_from_model: n_ctx", backend="llama.cpp"),
    ProgressRule("kv self size", "cache", backend="llama.cpp"),
    ProgressRule("kv buffer size", "cache", backend="llama.cpp"),
    # (b6428's "main: HTTP server is listening, hostname: ..." comes before the model loads: not this)
    ProgressRule("server is listening on http", "listening", backend="llama.cpp"),
    ProgressRule("listening on http", "listening", r"llama_server: listening on http", backend="llama.cpp"),
    ProgressRule("model loaded", "listening", r"\b(?:main|llama_server): model loaded", backend="llama.cpp"),
    ProgressRule("all slots are idle", "listening", backend="llama.cpp"),
    ProgressRule("uvicorn running on", "listening", backend="llama-cpp-python"),
    ProgressRule("llama runner started", "listening", backend="ollama"),
    # `ollama run`'s pull finished ("verifying sha256 digest", "writing manifest", "success"): the files are
    # on disk, and what fails after it is the load the first request starts
    ProgressRule("writing manifest", "files", backend="ollama"),
    ProgressRule("prompt eval time", "served", backend="llama.cpp"),
    ProgressRule("slot release", "served", backend="llama.cpp"),
    ProgressRule("print_timing", "served", backend="llama.cpp"),
    ProgressRule("done request", "served", r"done request: post .* 200\b", backend="llama.cpp"),
    # a new llama.cpp process: its build line, printed once at start ("build: 4891 (815dcd8f7) with cc ...",
    # older mains "main: build = 1234 (abc)", 2026's "common_params_print_info: build 1 (0c1e570) with GNU")
    ProgressRule("build", "start", r"(?:^|\s)build(?::| =)? \d+ \([0-9a-f]{6,}\)", backend="llama.cpp"),
    # a new model load (a runner started again, a draft model): milestones before it bound nothing after
    ProgressRule("starting llama server", "restart", backend="ollama"),
    ProgressRule("loading draft model", "restart", backend="llama.cpp"),
    # a vision projector loads as a model of its own after the text model (mtmd / clip)
    ProgressRule("clip_model_loader", "restart", r"clip_model_loader: model name", backend="llama.cpp"),
    ProgressRule("cleaning up before exit", "stop", backend="llama.cpp"),
    ProgressRule("received sigint", "stop", backend="llama.cpp"),
    ProgressRule("received sigterm", "stop", backend="llama.cpp"),
    # llama-server's handler of a second ctrl-c: it exits at once, and a backend's teardown may assert then
    # (round 47: Metal's "GGML_ASSERT([rsets->data count] == 0)" under exit())
    ProgressRule("received second interrupt", "stop", backend="llama.cpp"),
)


LOG = EngineLog(
    "llama.cpp",
    PROFILES,
    stages=(("first", STAGE_RULES_1), ("second", STAGE_RULES_2)),
    errors=(
        ("device_oom.share", BUFFER_ALLOC_ERRORS),
        ("device_oom", DEVICE_OOM_ERRORS),
        ("context", CONTEXT_ERRORS),
        ("format", FORMAT_ERRORS),
        ("arch", ARCH_ERRORS + ARCH_ERRORS_2),
        ("shape", SHAPE_ERRORS),
        ("hub", HUB_ERRORS),
        ("missing", MISSING_ERRORS),
        ("missing.after", MISSING_ERRORS_2),
        ("network", NETWORK_ERRORS),
        ("broken_file", BROKEN_FILE_ERRORS),
        ("host_alloc", HOST_ALLOC_ERRORS),
        ("host_alloc.after", HOST_ALLOC_ERRORS_2),
        ("context_buffer", CONTEXT_BUFFER_ERRORS),
        ("generic", GENERIC_ERRORS + GENERIC_ERRORS_2),
        ("generic.after", GENERIC_ERRORS_3),
    ),
    notices=(
        ("notices", NOTICES + NOTICES_2),
        ("notices.after", NOTICES_3 + NOTICES_4 + OLLAMA_NOTICES + LLAMA_QUIET_NOTICES),
    ),
    recoveries=RECOVERIES,
    figures=(("figures", FIGURES + FIGURES_2),),
    marks=MARKS + MARKS_2,
    echo_cuts=ECHO_CUTS + ECHO_CUTS_2,
    progress=PROGRESS,
)
