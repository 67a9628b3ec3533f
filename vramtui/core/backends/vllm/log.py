"""How vLLM words its log: stages, errors, notices, figures and the marks that name it.

The diagnosis (vramtui.core.logs) reads every table of every engine on every log; vramtui.core.logs.rules
splices these pieces into its tables in their order of precedence (the first error rule that matches a line
decides its cause).
"""

from __future__ import annotations

import re

from vramtui.core.logs.ruletypes import (
    NOT_AN_ERROR,
    NUM,
    UNIT,
    EngineLog,
    ErrorRule,
    FigureRule,
    FrameRule,
    LogProfile,
    NoticeRule,
    ProgressRule,
    Say,
    StageRule,
)

PROFILE = LogProfile(
    "vllm",
    precedence=40,
    process_names=("vllm", "python", "pt_main_thread"),
    is_torch=True,
    # V1's client kills its own process tree after a worker failed ("Got fatal signal from worker processes,
    # shutting down"): a shell's "Killed" after the error is that kill, not the OOM killer's
    kills_own_tree=True,
    # its GiB figures have two decimals: the KV cache it was given outright is the exact one
    exact_figures={"kv_cache_available": ("kv_cache_memory_bytes", 0.0051 * 2**30)},
    advice={
        "context_oom_extra": ("--enforce-eager skips CUDA-graph memory.",),
        "swap_space_pinned": (
            "The card has room: the CPU swap space (--swap-space, 4 GiB of pinned host RAM per GPU by "
            "default) could not be allocated. Lower it: --swap-space 1 (0 turns it off); WSL2 and containers "
            "limit pinned memory.",
        ),
        "wrong_format": (
            "GGUF is llama.cpp's format: serve this file with llama.cpp (llama-server -m FILE) or Ollama; "
            "for {this_engine} use the original safetensors checkpoint or its AWQ/GPTQ version."
            " (vLLM's GGUF support is experimental: a single-file GGUF of a supported architecture, "
            "with --tokenizer pointing at the original model.)",
        ),
        "unknown_arch": ("Upgrade vLLM, or pass --trust-remote-code for a model that ships its own code.",),
        "gpus_short": (
            "Not a memory failure: the run asks for more GPUs (--tensor-parallel-size x "
            "--pipeline-parallel-size) than Ray sees. Lower --tensor-parallel-size to the GPUs `nvidia-smi -L` "
            "lists (and CUDA_VISIBLE_DEVICES leaves), or join more nodes to the Ray cluster.",
        ),
        "dtype": ("Use float16 on GPUs before compute capability 8.0: --dtype half (or float16).",),
        # The KV cache cannot hold one request of --max-model-len: the knob that sized it is the fix. Set
        # outright (--kv-cache-memory-bytes), the share does not count; on the CPU build the share is of
        # NUMA node 0's memory, not of a card.
        "kv_too_small": (
            Say(
                "The KV cache is set outright ({kv_cache_memory} {kv_bytes}; the memory share does not "
                "count then): raise it to {kv_cache_memory} {kv_needed} for one {context_now}-token request.",
                when="kv_bytes_set",
            ),
            Say("Or lower the context to what fits: {context} {fit_tokens}.", when="fit_known kv_bytes_set"),
            # (sized by the share, the GPU advice below says it with the number)
            Say(
                "On the CPU build the KV cache is sized by {mem_share} as a share of NUMA node 0's memory: "
                "size it outright instead, {kv_cache_memory} 1G (or more).",
                when="cpu_platform !kv_bytes_set",
            ),
            Say("@kv_too_small_gpu", when="!cpu_platform !kv_bytes_set"),
        ),
        "cpu_share_short": (
            Say(
                "On vLLM's CPU build {mem_share} is the share of NUMA node 0's memory: {share_taken} of "
                "{node_total} GiB is more than the {node_free} GiB free at start. Ask for what is free: "
                "{mem_share} {free_share}.",
                otherwise="On vLLM's CPU build {mem_share} is the share of NUMA node 0's memory, and more "
                "was asked than is free at start: ask for less, {mem_share} {free_share}.",
            ),
            Say(
                "Or size the KV cache outright, which leaves the share out: {kv_cache_memory} {kv_fit_bytes}.",
                otherwise="Or size the KV cache outright, which leaves the share out: {kv_cache_memory} 1G.",
            ),
            "Or free host RAM: stop what else runs on this machine.",
        ),
        "kv_bytes_over_free": (
            Say(
                "{kv_cache_memory} asks for {kv_requested} GiB of KV cache, but only {node_free} GiB of "
                "node 0's memory is free: ask for less, {kv_cache_memory} {kv_fit}.",
                otherwise="{kv_cache_memory} asks for more KV cache than node 0 has free: ask for less.",
            ),
            "Or free host RAM: stop what else runs on this machine.",
        ),
        "max_len_over_model": (
            Say(
                "The model's own length is {derived_len} tokens: {context} {derived_len} (or less).",
                otherwise="Lower {context} to the model's own length (max_position_embeddings).",
            ),
            "Past it only with RoPE scaling in the model's config and VLLM_ALLOW_LONG_MAX_MODEL_LEN=1.",
        ),
        "quant_not_in_checkpoint": (
            Say(
                "The checkpoint is not quantized with {quant_asked}: drop {quant} {quant_asked} (vLLM reads "
                "a checkpoint's own quantization from its config), or serve a checkpoint quantized with {quant_asked}.",
                otherwise="The checkpoint is not quantized that way: drop {quant}, or serve a checkpoint "
                "quantized with that method.",
            ),
        ),
        "worker_died": (
            "A worker process died without a word of its own: most often the kernel's out-of-memory "
            "killer. Look: `dmesg -T | grep -i 'killed process'`.",
            Say(
                "If it was: lower what the worker holds, {kv_cache_memory} (on the CPU build the KV cache "
                "is the worker's own memory) or {mem_share}.",
            ),
        ),
        "host_killed": (
            Say(
                "Lower what the worker holds: {kv_cache_memory} (on the CPU build the KV cache is the "
                "worker's own memory), or a smaller {context}.",
                when="cpu_platform",
            ),
            Say(
                "Keep less in host RAM: lower {cpu_offload} or use a smaller checkpoint.",
                when="!cpu_platform",
            ),
        ),
    },
    holds_its_share=True,
)


STAGE_RULES_1: tuple[StageRule, ...] = (
    # vLLM (V0 and V1 engine)
    StageRule("starting to load model", "load_weights", backend="vllm"),
    StageRule("loading model weights", "load_weights", backend="vllm"),
    StageRule("model loading took", "load_weights", backend="vllm"),
    StageRule("loading drafter model", "load_weights", backend="vllm"),  # the speculative model's load
    StageRule("loading safetensors checkpoint", "load_weights", backend="vllm"),
    StageRule("loading weights took", "load_weights", backend="vllm"),  # read; its repack may follow
    StageRule("create_weights", "load_weights", backend="vllm"),
    StageRule("create unquantized linear weights", "load_weights", backend="vllm"),
    StageRule("get_model", "load_weights", backend="vllm"),
    StageRule("load_model", "load_weights", r"\bload_model\b(?!: initializing)", backend="vllm"),
    # the engine being built (a frame of its construction): start-up, the weights at the latest
    StageRule("from_engine_args", "load_weights", backend="vllm"),
    # a worker joining the process group: the model load comes next (a log that stops here never loaded)
    StageRule("distributed_init_method", "load_weights", backend="vllm"),
    StageRule("load_weights", "load_weights", backend="vllm"),
    StageRule("memory profiling", "kv_cache", backend="vllm"),
    StageRule("profile run", "kv_cache", backend="vllm"),
    StageRule("profile_run", "kv_cache", backend="vllm"),
    StageRule(
        "determine_num_available_blocks",
        "kv_cache",
        r"^(?!.*\bnot implemented in\b).*determine_num_available_blocks",
        backend="vllm",
    ),
    StageRule("determine_available_memory", "kv_cache", backend="vllm"),
    StageRule(
        "initialize_cache", "kv_cache", r"^(?!.*\bnot implemented in\b).*initialize_cache", backend="vllm"
    ),
    StageRule("_initialize_kv_caches", "kv_cache", backend="vllm"),
    # vLLM 0.1's engine sizing its cache (a traceback frame: `in _init_cache`), after the workers loaded
    StageRule("_init_cache", "kv_cache", r"\bin _init_cache\b", backend="vllm"),
    StageRule("initialize_kv_cache", "kv_cache", backend="vllm"),
    StageRule("# gpu blocks", "kv_cache", backend="vllm"),
    StageRule("# cuda blocks", "kv_cache", backend="vllm"),
    StageRule("available kv cache memory", "kv_cache", backend="vllm"),
    # the CPU build's worker sizing its cache: "Explicitly set (1.0/23.54) GiB for KV cache on node 0."
    StageRule("for kv cache on node", "kv_cache", backend="vllm"),
    StageRule("x gpu_memory_utilization", "kv_cache", backend="vllm"),  # V0's profile: total x share
    StageRule("_allocate_kv_cache", "kv_cache", backend="vllm"),  # frames of the KV allocation
    StageRule("warming up sampler", "kv_cache", backend="vllm"),  # the startup profile's dummy requests
    StageRule("dummy_metadata", "kv_cache", backend="vllm"),
)

STAGE_RULES_2: tuple[StageRule, ...] = (
    # The HTTP server is up: vLLM lists its routes, then uvicorn starts (vLLM, SGLang).
    StageRule("route:", "ready", r"launcher\.py:\d+\] route: /", backend="vllm"),
    StageRule("started server process", "ready", backend="vllm"),
    StageRule("gpu kv cache size", "kv_cache", backend="vllm"),
    StageRule("maximum concurrency", "kv_cache", backend="vllm"),
    StageRule("cuda graph", "kv_cache", backend="vllm"),
    # a traceback frame in torch's CUDA-graph capture (vLLM captures its graphs after the KV cache)
    StageRule("cuda/graphs.py", "kv_cache", backend="vllm"),
    StageRule("capturing a cudagraph", "kv_cache", backend="vllm"),  # V1's debug line per graph captured
    # torch.compile and Triton's JIT in an engine or worker process: vLLM compiles and first runs its
    # kernels in the start-up profile, after the weights (its process prefix: not a transformers run,
    # which compiles while it generates)
    *(
        StageRule(
            anchor,
            "kv_cache",
            rf"^\((?:enginecore|vllmworkerprocess|worker)\w* pid=\d+\).*{re.escape(anchor)}",
            backend="vllm",
        )
        for anchor in ("torch/_dynamo", "torch._dynamo", "torch/_inductor", "torch._inductor", "/triton/")
    ),
    # the offline LLM's progress bar (vllm/entrypoints/llm.py): requests are being served
    StageRule("processed prompts", "inference", backend="vllm"),
    StageRule("graph capturing", "kv_cache", backend="vllm"),
    StageRule("capture_model", "kv_cache", backend="vllm"),
    StageRule("torch.compile takes", "kv_cache", backend="vllm"),
    StageRule("compiling a graph", "kv_cache", backend="vllm"),
    StageRule("init engine (profile", "kv_cache", backend="vllm"),
    StageRule("supported_tasks", "ready", backend="vllm"),  # the engine is up (offline runs never listen)
    StageRule("starting vllm api server", "ready", backend="vllm"),
    StageRule("available routes are", "ready", backend="vllm"),
    StageRule("uvicorn running on", "ready", backend="vllm"),
    StageRule("application startup complete", "ready", backend="vllm"),
    StageRule("avg prompt throughput", "inference", backend="vllm"),
    StageRule("received request", "inference", backend="vllm"),
    StageRule("added request", "inference", backend="vllm"),
    # "POST /v1/chat/completions HTTP/1.1": a request to any API version.
    StageRule("post /v", "inference", backend="vllm"),
    StageRule("scheduler.py", "inference", r"scheduler\.py:\d+\].*(?:prompt|request)", backend="vllm"),
    StageRule("execute_model", "inference", backend="vllm"),
    # the engine's dump of the step that failed (logging_utils/dump_input.py): requests were scheduled
    StageRule("dumping scheduler output", "inference", backend="vllm"),
    StageRule("dumping input data for v1 llm engine", "inference", backend="vllm"),
)

# The CPU build: the worker's memory checks on NUMA node 0 (vllm/v1/worker/cpu_worker.py). The share of the
# node (--gpu-memory-utilization, despite its name) is more than is free at start; the KV bytes asked
# (--kv-cache-memory-bytes, VLLM_CPU_KVCACHE_SPACE) are more than is free when the cache is allocated.
HOST_OOM_ERRORS: tuple[ErrorRule, ...] = (
    ErrorRule(
        "less than desired cpu memory utilization",
        "cpu_share_short",
        "host_oom",
        stage="load_weights",
        backend="vllm",
    ),
    ErrorRule(
        "less than requested memory for kv",
        "kv_bytes_over_free",
        "host_oom",
        stage="kv_cache",
        backend="vllm",
    ),
)

DEVICE_OOM_ERRORS: tuple[ErrorRule, ...] = (
    # vLLM checks the share it was asked for (--gpu-memory-utilization) against what is free at start:
    # another process holds GPU memory, or the share is set higher than the card has free.
    ErrorRule(
        "less than desired gpu memory utilization",
        "gpu_share_short",
        "cuda_oom",
        stage="load_weights",
        backend="vllm",
    ),
)

KV_CACHE_ERRORS: tuple[ErrorRule, ...] = (
    ErrorRule(
        "no available memory for the cache blocks",
        "kv_no_room",
        "kv_cache_too_small",
        stage="kv_cache",
        backend="vllm",
    ),
    # vllm-ascend's worker: nothing left for the KV cache after the profile ("Available memory: 0, total
    # memory: 65452113920"); the error it raises next, when the log has it, states the failure (weak)
    ErrorRule(
        "available memory: 0,",
        "kv_no_room",
        "kv_cache_too_small",
        r"\bavailable memory: 0, total memory: \d+",
        stage="kv_cache",
        strong=False,
        hint="kv_cache_too_small",
        backend="vllm",
    ),
    # a hybrid model's recurrent state: one Mamba cache block per running sequence, and fewer blocks than
    # --max-num-seqs ("max_num_seqs (1024) exceeds available Mamba cache blocks (939)")
    ErrorRule(
        "cache blocks",
        "kv_too_small",
        "kv_cache_too_small",
        r"max_num_seqs \(\d+\) exceeds available \w+ cache blocks",
        stage="kv_cache",
        backend="vllm",
    ),
    ErrorRule(
        "maximum number of tokens that can be stored in kv cache",
        "kv_too_small",
        "kv_cache_too_small",
        stage="kv_cache",
        backend="vllm",
    ),
    ErrorRule(
        "larger than the available kv cache memory",
        "kv_too_small",
        "kv_cache_too_small",
        stage="kv_cache",
        backend="vllm",
    ),
    # the same error's first words (kv_cache_utils.py), on its own line where a terminal wrapped it
    ErrorRule(
        "to serve at least one request with the",
        "kv_too_small",
        "kv_cache_too_small",
        r"to serve at least one request with the models?'s max seq len",
        stage="kv_cache",
        backend="vllm",
    ),
)

KV_CACHE_ERRORS_2: tuple[ErrorRule, ...] = (
    # negative: the weights and activations left nothing. The error that follows it ("No available memory
    # for the cache blocks") states the failure where the log has it: this figure is the first error only
    # in an excerpt that stops before that line (weak).
    ErrorRule(
        "available kv cache memory",
        "kv_too_small",
        "kv_cache_too_small",
        r"available kv cache memory:\s*-",
        stage="kv_cache",
        strong=False,
        hint="kv_cache_too_small",
        backend="vllm",
    ),
)

KV_CACHE_ERRORS_3: tuple[ErrorRule, ...] = (
    ErrorRule(
        "reserved for kv cache is",
        "kv_too_small",
        "kv_cache_too_small",
        r"reserved for kv cache is\s*-",  # vLLM V0's profile line, negative as above
        stage="kv_cache",
        backend="vllm",
    ),
    ErrorRule(
        "blocks:",
        "kv_too_small",
        "kv_cache_too_small",
        r"# (?:gpu|cuda|npu|xpu|hpu) blocks: 0,",  # vLLM V0: not one block of KV cache on the device
        stage="kv_cache",
        backend="vllm",
    ),
)

CONTEXT_ERRORS: tuple[ErrorRule, ...] = (
    ErrorRule(
        "is too long and exceeds limit",
        "context_too_long",
        "context_too_long",
        stage="inference",
        backend="vllm",
    ),
    ErrorRule(
        "maximum context length is",
        "context_too_long",
        "context_too_long",
        r"maximum context length is \d+ tokens",
        stage="inference",
        backend="vllm",
    ),
)

CONTEXT_ERRORS_2: tuple[ErrorRule, ...] = (
    # --max-model-len past the model's own length (max_position_embeddings), refused at config validation
    ErrorRule(
        "is greater than the derived max_model_len",
        "max_len_over_model",
        "context_too_long",
        stage="load_weights",
        backend="vllm",
    ),
    ErrorRule(
        "longer than the maximum model length",
        "context_too_long",
        "context_too_long",
        stage="inference",
        backend="vllm",
    ),
    # a completion refused with HTTP 400 and no reason logged: vLLM sends "This model's maximum context
    # length is N" to the client alone (0.11 on), and a prompt over max_model_len is what it refuses most
    ErrorRule(
        "400 bad request",
        "request_refused",
        "context_too_long",
        r'"post /v1/(?:chat/)?completions http/[\d.]+" 400 bad request',
        stage="inference",
        strong=False,
        backend="vllm",
    ),
)

FORMAT_ERRORS: tuple[ErrorRule, ...] = (
    # a quantized MoE layer whose scales this build's fused kernel does not take ("For FP8 Fused MoE layers,
    # only per-tensor scales for weights and activations are supported. Found ... strategy='channel'")
    ErrorRule(
        "fused moe layers, only",
        "quant_unsupported",
        "unsupported_quant",
        r"for \w+ fused moe layers, only .* (?:is|are) supported",
        stage="load_weights",
        backend="vllm",
    ),
    # no kernel of this build runs the checkpoint's quantized layers on this GPU (an NVFP4 or FP8 model
    # whose kernels need another compute capability): its reasons follow, one per kernel tried
    ErrorRule(
        "failed to find a kernel that can implement",
        "quant_unsupported",
        "unsupported_quant",
        stage="load_weights",
        backend="vllm",
    ),
    # --quantization METHOD on a checkpoint that was not quantized that way (no METHOD config beside it)
    ErrorRule(
        "cannot find the config file for",
        "quant_not_in_checkpoint",
        "unsupported_quant",
        stage="load_weights",
        backend="vllm",
    ),
    ErrorRule(
        "quantization method",
        "quant_unsupported",
        "unsupported_quant",
        r"quantization method .*(?:is not supported|not supported for the current gpu)",
        stage="load_weights",
        backend="vllm",
    ),
)

ARCH_ERRORS: tuple[ErrorRule, ...] = (
    ErrorRule(
        "is not supported yet",
        "unknown_arch",
        "unknown_arch",
        r"gguf model with architecture \S+ is not supported",
        stage="load_weights",
        backend="vllm",
    ),
)

ARCH_ERRORS_2: tuple[ErrorRule, ...] = (
    ErrorRule(
        "are not supported for now",
        "unknown_arch",
        "unknown_arch",
        r"model architectures? \[.*\] (?:are|is) not supported",
        stage="load_weights",
        backend="vllm",
    ),
    # an architecture this vLLM has no implementation of runs through its Transformers fallback
    # (model_executor/models/transformers.py), which splits over GPUs only models that ship a TP plan
    ErrorRule(
        "trying to run tensor parallelization but the model does not support it",
        "fallback_no_tp",
        "unknown_arch",
        stage="load_weights",
        backend="vllm",
    ),
)

SHAPE_ERRORS: tuple[ErrorRule, ...] = (
    ErrorRule(
        "param_data.shape == loaded_weight.shape",
        "shape_mismatch",
        "shape_mismatch",
        stage="load_weights",
        backend="vllm",
    ),
    # weight_utils' default loader: "Attempted to load weight (torch.Size([..])) into parameter (..)"
    ErrorRule(
        "attempted to load weight",
        "shape_mismatch",
        "shape_mismatch",
        r"attempted to load weight \(.*\) into parameter \(",
        stage="load_weights",
        backend="vllm",
    ),
)

DTYPE_ERRORS: tuple[ErrorRule, ...] = (
    # the CPU build's attention kernels take only some head sizes (QA 9: a tiny model with head_dim 16 came
    # up, then failed at its first request: "Unsupported CPU attention configuration: head_dim=16")
    ErrorRule(
        "unsupported cpu attention configuration",
        "cpu_attn_head_dim",
        "unknown_arch",
        r"unsupported cpu attention configuration: head_dim=\d+",
        backend="vllm",
    ),
    # no attention backend of this build runs the KV cache type asked for (--kv-cache-dtype nvfp4)
    ErrorRule(
        "no valid attention backend found",
        "kv_dtype_no_backend",
        "dtype_unsupported",
        r"no valid attention backend found .*kv_cache_dtype=(?!auto\b)\w+",
        backend="vllm",
    ),
    # config validation: a dtype the quantization method or the model type refuses
    ErrorRule(
        "is not supported for quantization method",
        "dtype_for_quant",
        "dtype_unsupported",
        stage="load_weights",
        backend="vllm",
    ),
    ErrorRule(
        "does not support float16",
        "dtype_unsupported",
        "dtype_unsupported",
        r"does not support (?:float16|bfloat16|half)\b",
        stage="load_weights",
        backend="vllm",
    ),
    ErrorRule(
        "bfloat16 is only supported on gpus",
        "bf16_unsupported",
        "dtype_unsupported",
        stage="load_weights",
        backend="vllm",
    ),
    ErrorRule(
        "compute capability below",
        "gpu_too_old",
        "dtype_unsupported",
        r"compute capability below [\d.]+ (?:are|is) not supported",
        stage="load_weights",
        backend="vllm",
    ),
)

MISSING_ERRORS: tuple[ErrorRule, ...] = (
    ErrorRule(
        "cache directory not found", "not_found_local", "file_missing", stage="load_weights", backend="vllm"
    ),
    # --chat-template given as a path that is not there (entrypoints/chat_utils.py validate_chat_template),
    # checked before the engine starts
    ErrorRule(
        "appears path-like",
        "not_found_local",
        "file_missing",
        r"chat template .*appears path-like, but doesn't exist",
        stage="download",
        backend="vllm",
    ),
)

GENERIC_ERRORS: tuple[ErrorRule, ...] = (
    ErrorRule(
        "error executing method",
        "worker_method_failed",
        "other",
        r"error executing method '?initialize_cache",
        stage="kv_cache",
        strong=False,
        hint="kv_cache_too_small",
        backend="vllm",
    ),
    ErrorRule(
        "error executing method",
        "worker_method_failed",
        "other",
        r"error executing method '?determine_num_available_blocks",
        stage="kv_cache",
        strong=False,
        hint="cuda_oom",
        backend="vllm",
    ),
    ErrorRule("error executing method", "worker_method_failed", "other", strong=False, backend="vllm"),
)

# A worker (or the engine core) died without a word of its own: the kernel's OOM killer most often (the
# verdict looks in the kernel log), a segfault otherwise.
# V1's client watches its engine cores only once they are up: a core that died was serving
DIED_ERRORS: tuple[ErrorRule, ...] = (
    ErrorRule("died unexpectedly", "worker_died", "other", default_stage="inference", backend="vllm"),
)

# More ranks (tensor x pipeline parallel) than GPUs: Ray waits for a placement group it cannot build,
# warning once, until someone stops it (the stop's tracebacks follow, the cause is this line)
LAUNCH_ERRORS: tuple[ErrorRule, ...] = (
    ErrorRule("exceeds the total number of available gpus", "gpus_short", "other", backend="vllm"),
    # its argparse refusing a flag's value or a missing one ("vllm serve: error: argument --dtype: invalid
    # choice: 'float64x' (choose from ...)"): the command line, before anything was read (QA 19 F6)
    ErrorRule(
        "error: ",
        "bad_argument",
        "other",
        r"^(?:vllm(?: serve)?|usage:[^:]*|[\w./-]+): error: (?:argument -|the following arguments are required)",
        stage="load_weights",
        backend="vllm",
    ),
)

GENERIC_ERRORS_2: tuple[ErrorRule, ...] = (
    ErrorRule("enginecore failed to start", "engine_failed", "other", strong=False, backend="vllm"),
    ErrorRule("engine core initialization failed", "engine_failed", "other", strong=False, backend="vllm"),
)

NOTICES: tuple[NoticeRule, ...] = (
    NoticeRule(
        "cannot use flashattention",
        "kernel_fallback",
        "FlashAttention cannot be used: vLLM picked a slower attention backend",
        backend="vllm",
    ),
    # vLLM logs this at ERROR level (vllm/attention/utils/fa_utils.py) and goes on with another backend
    NoticeRule(
        "cannot use fa version",
        "kernel_fallback",
        "this FlashAttention version cannot run on this GPU (the line says why): vLLM picks another, slower "
        "attention backend",
        backend="vllm",
    ),
    # a start-up run of ten minutes or more (round 68: 621 s on a DGX Spark, no warning): kernels compiled
    # or tuned for the card on first use; it outlasts a readiness timeout (vramtui's, a Kubernetes probe)
    NoticeRule(
        "initial profiling/warmup run took",
        "slow_start",
        "vLLM's first profiling/warm-up run took ten minutes or more (kernels compiled or tuned for this card "
        "on first use, most of them cached for the next start): a start this slow outlasts most readiness "
        "timeouts (ready_timeout in the profile, a Kubernetes probe)",
        r"initial profiling/warmup run took (?:[6-9]\d\d|\d{4,})(?:\.\d+)? s",
        backend="vllm",
    ),
    # the whole engine start-up (profile, KV cache, warm-up, graph capture) of ten minutes or more, what V1
    # prints where its profiling line is quick and the graph capture is slow (round 85: a HIP-graph capture
    # of 2173 s on an RX 9070 XT, the start 2267 s; training runs of 682 and 780 s are labelled quiet too)
    NoticeRule(
        "init engine (profile",
        "slow_start",
        "vLLM's engine took ten minutes or more to start (profiling, the KV cache, warm-up and graph capture: "
        "kernels compiled or tuned for this card, graphs captured one size at a time): a start this slow "
        "outlasts most readiness timeouts, and may show an untuned card or backend",
        r"init engine \(profile.*took (?:[6-9]\d\d|\d{4,})(?:\.\d+)? seconds",
        backend="vllm",
    ),
    NoticeRule(
        "using xformers backend",
        "kernel_fallback",
        "vLLM uses the XFormers attention backend (FlashAttention unavailable)",
        backend="vllm",
    ),
    NoticeRule(
        "is not fully optimized yet",
        "kernel_fallback",
        "the quantization kernel is not fully optimized (slower than expected)",
        backend="vllm",
    ),
    NoticeRule(
        "forcing awq",
        "kernel_fallback",
        "vLLM forced the plain AWQ kernel although awq_marlin would be faster",
        backend="vllm",
    ),
    # marlin_utils_fp4/fp8: a card older than the format's tensor cores runs the weights through Marlin,
    # dequantized on the fly ("Your GPU does not have native support for FP4 computation but FP4
    # quantization is being used. Weight-only FP4 compression will be used leveraging the Marlin kernel")
    NoticeRule(
        "does not have native support for fp",
        "kernel_fallback",
        "this GPU has no native support for the checkpoint's FP4/FP8 format: vLLM runs it weight-only "
        "through the Marlin kernel (the memory saving stays, prefill is slower); a card of that generation "
        "or an AWQ/GPTQ checkpoint runs at full speed",
        r"does not have native support for fp(?:4|8) computation",
        backend="vllm",
    ),
)

NOTICES_2: tuple[NoticeRule, ...] = (
    NoticeRule(
        "enforce_eager",
        "kernel_fallback",
        "CUDA graphs are off (eager mode): slower decoding",
        r"cuda graph is turned off|enforce_eager=true.*(?:disable|turned off)",
        backend="vllm",
        unless="cpu_platform",  # the CPU build has no CUDA graphs to turn off
    ),
    # V1's dispatcher found no captured graph to replay (a connector or setting skipped the capture); said
    # during the profile run too, before the graphs are captured: a capture that finished settles it
    NoticeRule(
        "no cudagraph will be used",
        "kernel_fallback",
        "no CUDA graph is used (vLLM's graph dispatcher has no keys): every step runs eagerly, decoding is slower",
        backend="vllm",
        unless="cpu_platform graphs_captured",
    ),
    # a hybrid model's Mamba cache has fewer blocks than the graph batch sizes: the larger ones are dropped
    # ("Capping cudagraph capture sizes from max 512 to 352 to fit Mamba cache blocks")
    NoticeRule(
        "capping cudagraph capture sizes",
        "kernel_fallback",
        "vLLM capped its CUDA-graph batch sizes to what the Mamba cache blocks hold: decode batches above "
        "the cap run without graphs (slower); more memory for the cache, or a smaller --max-num-seqs",
        backend="vllm",
    ),
    # vLLM 0.5-0.6 turned chunked prefill on by itself past a 32K context, at 512 tokens a step: a long
    # prompt prefills in hundreds of small steps (V1 always chunks, at 2048 or more, and says it otherwise)
    NoticeRule(
        "chunked prefill is enabled by default",
        "kernel_fallback",
        "vLLM turned chunked prefill on by itself (max_model_len over 32K), at a small budget per step: long "
        "prompts prefill slowly; give --max-num-batched-tokens a larger budget (or --enable-chunked-prefill "
        "false with enough memory)",
        r"chunked prefill is enabled by default for models with max_model_len > 32k",
        backend="vllm",
    ),
    # marks: the run is vLLM's CPU build (its KV cache and workers are the host's)
    NoticeRule(
        "no platform detected",
        "cpu_fallback",
        "vLLM detected no GPU platform (UnspecifiedPlatform): check the driver and that this vLLM build "
        "matches the card; it cannot run the model on a GPU",
        backend="vllm",
    ),
    # a config.json with no length key: vLLM assumes 2048 tokens, whatever the model was trained on
    NoticeRule(
        "assuming the model's maximum length is",
        "context_truncated",
        "config.json gives no maximum length, so vLLM assumes a short one: pass --max-model-len if the "
        "model was trained longer",
        backend="vllm",
    ),
    NoticeRule(
        "max_model_len",
        "context_truncated",
        "vLLM lowered the context to what fits (--max-model-len auto): longer requests are refused",
        r"auto-fit max_model_len: reduced from",
        backend="vllm",
    ),
    NoticeRule(
        "cudagraphmode",
        "kernel_fallback",
        "vLLM downgraded its CUDA-graph mode (a feature or backend does not support the full graphs): slower",
        r"cudagraphmode\.\w+ is not supported",
        backend="vllm",
    ),
    NoticeRule(
        "dispatch keys",
        "kernel_fallback",
        "vLLM serves without its CUDA graphs (their dispatch keys are not set up): eager, slower decoding",
        r"cudagraph dispatch keys (?:are )?not initialized",
        backend="vllm",
    ),
    NoticeRule(
        "weight-only fp8",
        "kernel_fallback",
        "this GPU has no native FP8: vLLM runs the FP8 weights weight-only through Marlin (slower than native)",
        r"^(?!.*does not have native support).*weight-only fp8",  # that line is said above, once
        backend="vllm",
    ),
    NoticeRule(
        "weight-only fp4",
        "kernel_fallback",
        "this GPU has no native FP4: vLLM runs the FP4 weights weight-only through Marlin (slower than native)",
        r"^(?!.*does not have native support).*weight-only fp4",  # that line is said above, once
        backend="vllm",
    ),
    NoticeRule(
        "uncalibrated",
        "quality",
        "FP8 attention or KV cache with uncalibrated scales (1.0): answers may lose accuracy",
        backend="vllm",
    ),
    NoticeRule("cpu kv cache size", "mark", "cpu_platform", backend="vllm"),
    # the engine's config dump, its first line of the platform ("... device_config=cpu, ...")
    NoticeRule("device_config=cpu", "mark", "cpu_platform", backend="vllm"),
    NoticeRule("cpu_worker.py", "mark", "cpu_platform", backend="vllm"),
    NoticeRule("cpu_model_runner", "mark", "cpu_platform", backend="vllm"),
    # marks (kind "mark"): where a step began, for the advice; never reported as quiet failures
    NoticeRule(
        "capturing cuda graph",
        "mark",
        "graph_capture",
        r"capturing cuda graphs?\b",
        backend="vllm",
    ),
    NoticeRule("capturing cudagraphs", "mark", "graph_capture", backend="vllm"),
    # V1's dump of the step that failed (logging_utils/dump_input.py) is logged at ERROR level before the
    # exception that says why: context, not the first error
    NoticeRule("dumping input data", "mark", NOT_AN_ERROR, backend="vllm"),
    NoticeRule("dumping scheduler output", "mark", NOT_AN_ERROR, backend="vllm"),
    NoticeRule("dumping scheduler stats", "mark", NOT_AN_ERROR, backend="vllm"),
    # the wrappers' lines before the traceback that says what failed
    NoticeRule("encountered a fatal error", "mark", NOT_AN_ERROR, backend="vllm"),
    NoticeRule("workerproc failed to start", "mark", NOT_AN_ERROR, backend="vllm"),
    NoticeRule("enginecore failed to start", "mark", NOT_AN_ERROR, backend="vllm"),
    # a request naming a model the server does not serve (its 404 to the client, logged at ERROR level):
    # the client's mistake; the server goes on serving (round 76)
    NoticeRule(
        "error with model",
        "mark",
        NOT_AN_ERROR,
        r"error with model .*type='notfounderror'.*code=404",
        backend="vllm",
    ),
    NoticeRule("graph capturing finished", "mark", "graphs_captured", backend="vllm"),
    # the engine core's own wrapper of a start-up error: whatever failed before it, it was not a request
    NoticeRule(
        "failed to start",
        "mark",
        "start_failed",
        r"enginecore failed to start|engine core initialization failed",
        backend="vllm",
    ),
)

FIGURES: tuple[FigureRule, ...] = (
    FigureRule(
        "loading model weights took",
        "weights_loaded",
        rf"loading model weights took {NUM}\s*(?P<unit>GiB|GB)",
        backend="vllm",
    ),
    FigureRule(
        "model loading took",
        "weights_loaded",
        rf"model loading took {NUM}\s*(?P<unit>GiB|GB)",
        backend="vllm",
    ),
    FigureRule("model weights take", "weights_loaded", rf"model weights take {NUM}{UNIT}", backend="vllm"),
    FigureRule(
        "total_gpu_memory", "device_total", rf"total_gpu_memory\s*[(=]?\s*{NUM}{UNIT}", backend="vllm"
    ),
    FigureRule(
        "non_torch_memory",
        "non_torch_memory",
        rf"non_torch_memory(?: takes)?\s*=?\s*{NUM}{UNIT}",
        backend="vllm",
    ),
    FigureRule(
        "activation peak memory",
        "activation_peak",
        rf"activation peak memory(?: takes)?\s*{NUM}{UNIT}",
        backend="vllm",
    ),
    FigureRule(
        "reserved for kv cache is",
        "kv_cache_available",
        rf"reserved for kv cache is {NUM}{UNIT}",
        backend="vllm",
    ),
    FigureRule(
        "available_kv_cache_memory",
        "kv_cache_available",
        rf"available_kv_cache_memory\s*{NUM}{UNIT}",
        backend="vllm",
    ),
    FigureRule("kv_cache_size=", "kv_cache_available", rf"kv_cache_size={NUM}{UNIT}", backend="vllm"),
    FigureRule(
        "available kv cache memory",
        "kv_cache_available",
        rf"available kv cache memory:\s*{NUM}{UNIT}",
        backend="vllm",
    ),
    FigureRule(
        "kv cache size",
        "kv_cache_tokens",
        rf"(?:gpu|cpu|xpu|npu) kv cache size:\s*{NUM} tokens",
        count=True,
        backend="vllm",
    ),
    # the CPU build: "Explicitly set (0.25/8.96) GiB for KV cache on node 0." / "Auto set (4.62/10.34) GiB
    # for KV cache on node 0, with 5.17 GiB requested memory for the worker. 0.55 GiB memory was consumed
    # by non-kv usages."
    FigureRule(
        "for kv cache on node",
        "kv_cache_available",
        rf"set \({NUM}/[\d.]+\) GiB for kv cache on node",
        unit_default="GiB",
        backend="vllm",
    ),
    FigureRule(
        "for kv cache on node",
        "node_memory",
        rf"set \([\d.]+/{NUM}\) GiB for kv cache on node",
        unit_default="GiB",
        backend="vllm",
    ),
    FigureRule(
        "consumed by non-kv usages",
        "non_kv_memory",
        rf"{NUM} GiB memory was consumed by non-kv usages",
        unit_default="GiB",
        backend="vllm",
    ),
    # the memory a refusal names: "Available memory on node 0 (8.1/10.21 GiB) ..."
    FigureRule(
        "available memory on node",
        "node_free_memory",
        rf"available memory on node \d+ \({NUM}/[\d.]+ GiB\)",
        unit_default="GiB",
        backend="vllm",
    ),
    FigureRule(
        "available memory on node",
        "node_memory",
        rf"available memory on node \d+ \([\d.]+/{NUM} GiB\)",
        unit_default="GiB",
        backend="vllm",
    ),
    FigureRule(
        "less than requested memory for kv",
        "kv_cache_requested",
        rf"less than requested memory for kv \({NUM}(?:/[\d.]+)? GiB\)",
        unit_default="GiB",
        backend="vllm",
    ),
    FigureRule(
        "memory utilization (",
        "memory_share",
        r"desired (?:cpu|gpu) memory utilization \((?P<value>0?\.\d+|1(?:\.0+)?)[,)]",
        count=True,
        backend="vllm",
    ),
    # the launch's own settings, from its "non-default args: {...}" line
    FigureRule(
        "kv_cache_memory_bytes",
        "kv_cache_memory_bytes",
        r"'kv_cache_memory_bytes': (?P<value>\d+)",
        unit_default="B",
        backend="vllm",
    ),
    FigureRule("using max model len", "context", rf"using max model len {NUM}", count=True, backend="vllm"),
    # --max-model-len auto, as the engine resolved it after the profile (QA 39 F5: the figure kept 4096)
    FigureRule(
        "auto-fit max_model_len",
        "context",
        r"auto-fit max_model_len: reduced from \d+ to (?P<value>\d+)",
        count=True,
        backend="vllm",
    ),
    FigureRule(
        "derived max_model_len",
        "max_model_len_derived",
        r"derived max_model_len \(max_position_embeddings=(?P<value>\d+)",
        count=True,
        backend="vllm",
    ),
    FigureRule("gpu blocks", "kv_cache_blocks", rf"# gpu blocks:\s*{NUM}", count=True, backend="vllm"),
    FigureRule("cuda blocks", "kv_cache_blocks", rf"# cuda blocks:\s*{NUM}", count=True, backend="vllm"),
    FigureRule(
        "num_gpu_blocks is", "kv_cache_blocks", rf"num_gpu_blocks is:\s*{NUM}", count=True, backend="vllm"
    ),
    FigureRule(
        "maximum concurrency",
        "max_concurrency",
        rf"maximum concurrency for [\d,]+ tokens per request:\s*{NUM}\s*x",
        count=True,
        backend="vllm",
    ),
    FigureRule(
        "maximum concurrency",
        "max_concurrency_tokens",
        r"maximum concurrency for (?P<value>[\d,]+) tokens per request",
        count=True,
        backend="vllm",
    ),
    FigureRule(
        "graph capturing finished",
        "cuda_graphs",
        rf"graph capturing finished in .*took {NUM}{UNIT}",
        backend="vllm",
    ),
    FigureRule(
        "estimated maximum model length is",
        "max_model_len_fit",
        rf"estimated maximum model length is {NUM}",
        count=True,
        backend="vllm",
    ),
    # "To serve at least one request with the model's max seq len (2048), (0.0 GiB KV cache is needed, ...":
    # one request's KV cache, said to a tenth of a GiB (0.0: under 0.05 GiB)
    FigureRule(
        "kv cache is needed",
        "kv_cache_needed",
        rf"\({NUM}{UNIT} kv cache is needed",
        backend="vllm",
    ),
    # V0 says it as the tokens the KV cache can store: the same figure, the longest context that fits.
    FigureRule(
        "stored in kv cache (",
        "max_model_len_fit",
        rf"maximum number of tokens that can be stored in KV cache \({NUM}\)",
        count=True,
        backend="vllm",
    ),
)

# Its name counts as a module, a package path, a word or an env var ("vllm.entrypoints", "/vllm/", "vLLM
# version", "VLLM_CPU_KVCACHE_SPACE") or a virtualenv named for it (".../my-vllm/lib/python3.12"), not
# inside another name: a llama-server reading "/home/me/gemma4-vllm/models/x.gguf" is no vLLM log; nor a
# quoted one (a GGUF's own tags, `general.tags arr[str,2] = ["vllm", "text-generation"]`, round 45)
MARK_GUARDS: tuple[tuple[str, str], ...] = (("vllm", r'(?<![\w"-])vllm(?![a-z0-9"-])|-vllm/lib\d*/python'),)

MARKS: tuple[tuple[str, str], ...] = (
    ("vllm", "vllm"),  # only as a name of its own: see MARK_GUARDS
    ("enginecore", "vllm"),
    ("gpu_model_runner", "vllm"),
    ("model_runner.py", "vllm"),
    ("launcher.py:", "vllm"),  # vllm/entrypoints/launcher.py lists the routes as the server comes up
    ("gguf model with architecture", "vllm"),  # vLLM's GGUF loader
    ("cannot use flashattention-2 backend", "vllm"),  # vLLM's attention choice on older GPUs
    ("using xformers backend", "vllm"),
    ("rayworkerwrapper", "vllm"),  # vLLM's Ray worker actor (vllm/executor/ray_utils.py)
)

MARKS_2: tuple[tuple[str, str], ...] = (
    ("kv_cache_utils", "vllm"),
    ("gpu_memory_utilization", "vllm"),
    ("worker_base.py", "vllm"),
    ("llm_engine", "vllm"),
    ("scheduler.py", "vllm"),
    ("avg prompt throughput", "vllm"),
    ("llm engine", "vllm"),
    ("serving_chat.py", "vllm"),
    ("serving_completion.py", "vllm"),
    ("are not supported for now", "vllm"),
    ("gpu kv cache usage", "vllm"),
    ("core_client.py", "vllm"),  # V1's client of its engine cores (vllm/v1/engine/core_client.py)
    ("fatal signal from worker processes", "vllm"),
    ("(apiserver pid=", "vllm"),  # V1's process prefixes
    ("(worker_", "vllm"),
    ("(vllmworker", "vllm"),
    ("(vllmworkerprocess", "vllm"),  # V0's multiprocess workers, and their error prefix's module
    ("multiproc_worker_utils", "vllm"),
    ("does not support float16. reason: numerical instability", "vllm"),  # its model config's dtype check
    ("[parallel_state.py:", "vllm"),
    ("[topk_topp_sampler.py:", "vllm"),
    ("backend on v1 engine", "vllm"),
    ("[monitor.py:", "vllm"),  # "torch.compile takes N s in total"
    ("bfloat16 is only supported on gpus with compute capability", "vllm"),
    # V1's memory profile and compile lines, worded by vLLM alone (SGLang and TGI word theirs otherwise)
    ("available kv cache memory", "vllm"),
    ("profiling cuda graph memory", "vllm"),
    ("compiling a graph for compile range", "vllm"),
    ("moe backend out of potential backends", "vllm"),
    ("does not have native support for fp", "vllm"),
)

ECHO_CUTS: tuple[tuple[str, str], ...] = (
    ("received request", " prompt: "),  # vLLM --enable-log-requests: prompt: %r, params: ...
    ("generated response", " output: "),  # vLLM --enable-log-outputs
)


# How far a run got (core/logs/ruletypes.MILESTONES): each line proves a step is behind it.
PROGRESS: tuple[ProgressRule, ...] = (
    ProgressRule("vllm api server version", "start", backend="vllm"),  # a new API server process
    # ... and its banner from 0.2x on, ASCII art that ends "█  version 0.32.0" (QA 17 F3)
    ProgressRule("█  version ", "start", r"█\s+version \d+\.\d+", backend="vllm"),
    ProgressRule("resolved architecture", "files", backend="vllm"),
    # not "Loading weights took N seconds": the checkpoint is read, but its quantization repack
    # (process_weights_after_loading) still allocates, and fails as "Failed to load model"
    ProgressRule("model loading took", "weights", backend="vllm"),
    ProgressRule("loading model weights took", "weights", backend="vllm"),
    ProgressRule("kv cache size", "cache", r"(?:gpu|cpu|xpu|npu) kv cache size", backend="vllm"),
    ProgressRule("available kv cache memory", "cache", r"available kv cache memory:\s*\d", backend="vllm"),
    ProgressRule("init engine (profile, create kv cache", "cache", backend="vllm"),
    # the engine is up and says what it serves: the API server's, and an offline LLM(...)'s, which never
    # listens (llm.py: "Supported_tasks: ['encode', 'embed']")
    ProgressRule("supported_tasks", "listening", backend="vllm"),
    ProgressRule("application startup complete", "listening", backend="vllm"),
    ProgressRule("starting vllm server on", "listening", backend="vllm"),
    ProgressRule("uvicorn running on", "listening", backend="vllm"),
    ProgressRule("post /v", "served", r"\"post /v\d[^\"]*\" 200\b", backend="vllm"),
    ProgressRule("processed prompts", "served", r"processed prompts: 100%", backend="vllm"),
    # ctrl-c, or a SIGTERM from a supervisor: the errors its engine's teardown prints are not failures
    ProgressRule("received signal", "stop", r"trigger received signal=sig(?:int|term)", backend="vllm"),
    ProgressRule("shutdown triggered", "stop", backend="vllm"),
    ProgressRule("shutting down", "stop", r"^(?:info:\s+)?shutting down\s*$", backend="vllm"),
    # V0's engine process on SIGINT/SIGTERM: its signal handler raises KeyboardInterrupt("MQLLMEngine
    # terminated"), the stop itself, not an error (round 56: a healthy TP=2 run stopped after serving)
    ProgressRule("mqllmengine terminated", "stop", backend="vllm"),
)


# Bare exceptions told by where they were raised.
FRAMES: tuple[FrameRule, ...] = (
    # CUDA's out-of-memory raised while V0's cache engine allocates its CPU swap space (pinned host RAM,
    # `--swap-space`, 4 GiB by default; a WSL2 box refuses pinned memory early): the host's, not the card's
    FrameRule(
        "in allocate_cpu_cache",
        "",
        ErrorRule("", "swap_space_pinned", "host_oom", stage="kv_cache", backend="vllm"),
        backend="vllm",
        refines="cuda_oom",
    ),
    # V0's engine loop gives each step ENGINE_ITERATION_TIMEOUT_S (60 s): a step that never returns (a
    # kernel hung on an old card's quantized GEMM, round 82) ends in a bare asyncio TimeoutError there
    FrameRule(
        "in run_engine_loop",
        "TimeoutError",
        ErrorRule("", "engine_step_timeout", "other", stage="inference", backend="vllm"),
        backend="vllm",
    ),
    # a weight loader's bare assert: the checkpoint's tensor is not the shape (or size) the layer built
    # (a pre-quantized checkpoint of another layout, a wrong tensor-parallel split)
    FrameRule(
        "in weight_loader",
        "AssertionError",
        ErrorRule("", "loader_shape_assert", "shape_mismatch", stage="load_weights", backend="vllm"),
        backend="vllm",
    ),
    # CUDA's "no kernel image" out of a quantized GEMM (FlashInfer's mm_fp4, CUTLASS's scaled_mm, Marlin,
    # a method of vLLM's quantization package): this card has no kernel for the checkpoint's format
    *(
        FrameRule(
            anchor,
            "",
            ErrorRule("", "quant_kernel_missing", "unsupported_quant", backend="vllm"),
            backend="vllm",
            refines="no_kernel_image",
        )
        for anchor in ("layers/quantization/", "mm_fp4", "scaled_mm", "marlin")
    ),
)

LOG = EngineLog(
    "vllm",
    (PROFILE,),
    stages=(("first", STAGE_RULES_1), ("second", STAGE_RULES_2)),
    errors=(
        ("host_oom", HOST_OOM_ERRORS),
        ("device_oom.share", DEVICE_OOM_ERRORS),
        ("kv_cache", KV_CACHE_ERRORS + KV_CACHE_ERRORS_2 + KV_CACHE_ERRORS_3),
        ("context", CONTEXT_ERRORS + CONTEXT_ERRORS_2),
        ("format", FORMAT_ERRORS),
        ("arch", ARCH_ERRORS + ARCH_ERRORS_2),
        ("shape", SHAPE_ERRORS),
        ("dtype", DTYPE_ERRORS),
        ("missing", MISSING_ERRORS),
        ("generic", LAUNCH_ERRORS + DIED_ERRORS + GENERIC_ERRORS + GENERIC_ERRORS_2),
    ),
    notices=(("notices", NOTICES + NOTICES_2),),
    figures=(("figures", FIGURES),),
    frames=FRAMES,
    marks=MARKS + MARKS_2,
    mark_guards=MARK_GUARDS,
    echo_cuts=ECHO_CUTS,
    progress=PROGRESS,
)
