"""How vLLM words its log: stages, errors, notices, figures and the marks that name it.

The diagnosis (vramtui.core.logs) reads every table of every engine on every log; vramtui.core.logs.rules
splices these pieces into its tables in their order of precedence (the first error rule that matches a line
decides its cause).
"""

from __future__ import annotations

from vramtui.core.logs.ruletypes import (
    NUM,
    UNIT,
    EngineLog,
    ErrorRule,
    FigureRule,
    LogProfile,
    NoticeRule,
    StageRule,
)

PROFILE = LogProfile(
    "vllm",
    precedence=40,
    is_torch=True,
    advice={
        "context_oom_extra": ("--enforce-eager skips CUDA-graph memory.",),
        "wrong_format": (
            "GGUF is llama.cpp's format: serve this file with llama.cpp (llama-server -m FILE) or Ollama; "
            "for {this_engine} use the original safetensors checkpoint or its AWQ/GPTQ version."
            " (vLLM's GGUF support is experimental: a single-file GGUF of a supported architecture, "
            "with --tokenizer pointing at the original model.)",
        ),
        "unknown_arch": ("Upgrade vLLM, or pass --trust-remote-code for a model that ships its own code.",),
        "dtype": ("Use float16 on GPUs before compute capability 8.0: --dtype half (or float16).",),
    },
)


STAGE_RULES_1: tuple[StageRule, ...] = (
    # vLLM (V0 and V1 engine)
    StageRule("starting to load model", "load_weights", backend="vllm"),
    StageRule("loading model weights", "load_weights", backend="vllm"),
    StageRule("model loading took", "load_weights", backend="vllm"),
    StageRule("loading safetensors checkpoint", "load_weights", backend="vllm"),
    StageRule("create_weights", "load_weights", backend="vllm"),
    StageRule("create unquantized linear weights", "load_weights", backend="vllm"),
    StageRule("get_model", "load_weights", backend="vllm"),
    StageRule("load_model", "load_weights", r"\bload_model\b(?!: initializing)", backend="vllm"),
    StageRule("load_weights", "load_weights", backend="vllm"),
    StageRule("memory profiling", "kv_cache", backend="vllm"),
    StageRule("profile run", "kv_cache", backend="vllm"),
    StageRule("profile_run", "kv_cache", backend="vllm"),
    StageRule("determine_num_available_blocks", "kv_cache", backend="vllm"),
    StageRule("determine_available_memory", "kv_cache", backend="vllm"),
    StageRule("initialize_cache", "kv_cache", backend="vllm"),
    StageRule("_initialize_kv_caches", "kv_cache", backend="vllm"),
    StageRule("initialize_kv_cache", "kv_cache", backend="vllm"),
    StageRule("# gpu blocks", "kv_cache", backend="vllm"),
    StageRule("# cuda blocks", "kv_cache", backend="vllm"),
    StageRule("available kv cache memory", "kv_cache", backend="vllm"),
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
    # the offline LLM's progress bar (vllm/entrypoints/llm.py): requests are being served
    StageRule("processed prompts", "inference", backend="vllm"),
    StageRule("graph capturing", "kv_cache", backend="vllm"),
    StageRule("capture_model", "kv_cache", backend="vllm"),
    StageRule("torch.compile takes", "kv_cache", backend="vllm"),
    StageRule("compiling a graph", "kv_cache", backend="vllm"),
    StageRule("init engine (profile", "kv_cache", backend="vllm"),
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
)

KV_CACHE_ERRORS_2: tuple[ErrorRule, ...] = (
    ErrorRule(
        "available kv cache memory",
        "kv_too_small",
        "kv_cache_too_small",
        r"available kv cache memory:\s*-",  # negative: the weights and activations left nothing
        stage="kv_cache",
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
    ErrorRule(
        "longer than the maximum model length",
        "context_too_long",
        "context_too_long",
        stage="inference",
        backend="vllm",
    ),
)

FORMAT_ERRORS: tuple[ErrorRule, ...] = (
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
)

SHAPE_ERRORS: tuple[ErrorRule, ...] = (
    ErrorRule(
        "param_data.shape == loaded_weight.shape",
        "shape_mismatch",
        "shape_mismatch",
        stage="load_weights",
        backend="vllm",
    ),
)

DTYPE_ERRORS: tuple[ErrorRule, ...] = (
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
)

NOTICES_2: tuple[NoticeRule, ...] = (
    NoticeRule(
        "enforce_eager",
        "kernel_fallback",
        "CUDA graphs are off (eager mode): slower decoding",
        r"cuda graph is turned off|enforce_eager=true.*(?:disable|turned off)",
        backend="vllm",
    ),
    # marks (kind "mark"): where a step began, for the advice; never reported as quiet failures
    NoticeRule(
        "capturing cuda graph",
        "mark",
        "graph_capture",
        r"capturing cuda graphs?\b",
        backend="vllm",
    ),
    NoticeRule("capturing cudagraphs", "mark", "graph_capture", backend="vllm"),
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
        "gpu kv cache size",
        "kv_cache_tokens",
        rf"gpu kv cache size:\s*{NUM} tokens",
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
)

MARKS: tuple[tuple[str, str], ...] = (
    ("vllm", "vllm"),
    ("enginecore", "vllm"),
    ("gpu_model_runner", "vllm"),
    ("model_runner.py", "vllm"),
    ("launcher.py:", "vllm"),  # vllm/entrypoints/launcher.py lists the routes as the server comes up
    ("gguf model with architecture", "vllm"),  # vLLM's GGUF loader
    ("cannot use flashattention-2 backend", "vllm"),  # vLLM's attention choice on older GPUs
    ("using xformers backend", "vllm"),
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
    ("bfloat16 is only supported on gpus with compute capability", "vllm"),
)

ECHO_CUTS: tuple[tuple[str, str], ...] = (
    ("received request", " prompt: "),  # vLLM --enable-log-requests: prompt: %r, params: ...
    ("generated response", " output: "),  # vLLM --enable-log-outputs
)


LOG = EngineLog(
    "vllm",
    (PROFILE,),
    stages=(("first", STAGE_RULES_1), ("second", STAGE_RULES_2)),
    errors=(
        ("device_oom.share", DEVICE_OOM_ERRORS),
        ("kv_cache", KV_CACHE_ERRORS + KV_CACHE_ERRORS_2 + KV_CACHE_ERRORS_3),
        ("context", CONTEXT_ERRORS + CONTEXT_ERRORS_2),
        ("format", FORMAT_ERRORS),
        ("arch", ARCH_ERRORS + ARCH_ERRORS_2),
        ("shape", SHAPE_ERRORS),
        ("dtype", DTYPE_ERRORS),
        ("missing", MISSING_ERRORS),
        ("generic", GENERIC_ERRORS + GENERIC_ERRORS_2),
    ),
    notices=(("notices", NOTICES + NOTICES_2),),
    figures=(("figures", FIGURES),),
    marks=MARKS + MARKS_2,
    echo_cuts=ECHO_CUTS,
)
