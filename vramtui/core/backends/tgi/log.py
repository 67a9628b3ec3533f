"""How text-generation-inference (launcher, router, server) words its log: stages, errors, figures and
the marks that name it.

The diagnosis (vramtui.core.logs) reads every table of every engine on every log; vramtui.core.logs.rules
splices these pieces into its tables in their order of precedence (the first error rule that matches a line
decides its cause).
"""

from __future__ import annotations

from vramtui.core.logs.ruletypes import (
    NUM,
    EngineLog,
    ErrorRule,
    FigureRule,
    LogProfile,
    NoticeRule,
    ProgressRule,
    StageRule,
)

PROFILE = LogProfile(
    "tgi",
    precedence=60,
    command_words=("text-generation-launcher",),
    process_names=("text-generation", "python"),
    aliases=("text-generation-inference",),
    is_torch=True,
    knobs={
        "context": "--max-total-tokens",
        "input": "--max-input-tokens",
        "parallel": "--max-concurrent-requests",
        "batch": "--max-batch-prefill-tokens",
        "quant": "--quantize",
        "mem_share": "--cuda-memory-fraction",
        "kv_dtype": "--kv-cache-dtype",
        "dtype": "--dtype",
    },
    advice={
        "graph_capture": (
            "CUDA-graph capture ran out of memory: lower --cuda-memory-fraction to leave it room.",
            "Or capture fewer batch sizes (--cuda-graphs 1,2,4) or none (--cuda-graphs 0).",
        ),
        "dtype": ("Use float16 on GPUs before compute capability 8.0: --dtype half (or float16).",),
    },
)


STAGE_RULES_1: tuple[StageRule, ...] = (
    StageRule("failed to start", "load_weights", r"shard \d+ failed to start", backend="tgi"),
    StageRule("shardcannotstart", "load_weights", backend="tgi"),
)

STAGE_RULES_2: tuple[StageRule, ...] = (
    # the router panicking in its request path: it was serving
    StageRule("panicked at", "inference", r"panicked at .*router/src/(?:infer|server)", backend="tgi"),
    # text-generation-inference
    StageRule("starting check and download process", "download", backend="tgi"),
    StageRule("download: text_generation_launcher", "download", backend="tgi"),
    StageRule("starting shard", "load_weights", backend="tgi"),
    StageRule("waiting for shard to be ready", "load_weights", backend="tgi"),
    StageRule("get_model", "load_weights", backend="tgi"),
    StageRule("warming up model", "kv_cache", backend="tgi"),
    # its Warmup method, not transformers' caching_allocator_warmup (a from_pretrained step), nor a
    # flag (--no-warmup on a command line) or a notice that turns warmups off (vLLM's --enforce-eager)
    StageRule("warmup", "kv_cache", r"^(?!.*\bdisabl).*(?<!-)\bwarmup\b", backend="tgi"),
    StageRule("setting max batch total tokens", "kv_cache", backend="tgi"),
    StageRule("connected", "ready", r"text_generation_router.*: connected\s*$", backend="tgi"),
    StageRule("input validation error", "inference", backend="tgi"),
    StageRule("generate_stream", "inference", backend="tgi"),
    # the v3 router's tracing span of a batch it prefills or decodes: requests were being served
    StageRule("batch{batch_size=", "inference", backend="tgi"),
)

HOST_OOM_ERRORS: tuple[ErrorRule, ...] = (
    # text-generation-inference's launcher: a shard killed by signal 9 is the OOM killer's work.
    ErrorRule(
        "signaled to shutdown with signal",
        "host_killed",
        "host_oom_killed",
        r"signaled to shutdown with signal 9\b",
        backend="tgi",
    ),
    ErrorRule("signaled to shutdown with signal", "crash", "other", strong=False, backend="tgi"),
)

DEVICE_OOM_ERRORS: tuple[ErrorRule, ...] = (
    # text-generation-inference's warmup runs one prefill of --max-batch-prefill-tokens tokens.
    ErrorRule(
        "not enough memory to handle",
        "prefill_warmup",
        "cuda_oom",
        r"not enough memory to handle \d+ prefill tokens",
        stage="kv_cache",
        backend="tgi",
    ),
)

DEVICE_OOM_ERRORS_2: tuple[ErrorRule, ...] = (
    ErrorRule("would exceed allowed memory", "cuda_oom", "cuda_oom", backend="tgi"),
)

DEVICE_OOM_ERRORS_3: tuple[ErrorRule, ...] = (
    ErrorRule(
        "not enough memory",
        "kv_prefill_oom",
        "cuda_oom",
        r"not enough memory to handle \d+ (?:prefill|total) tokens",
        stage="kv_cache",
        backend="tgi",
    ),
)

CONTEXT_ERRORS: tuple[ErrorRule, ...] = (
    ErrorRule(
        "must be <",
        "length_settings",
        "context_too_long",
        r"`max_(?:input_tokens|input_length|total_tokens|batch_prefill_tokens)`\s*\(\d+\) must be <",
        stage="load_weights",
        backend="tgi",
    ),
    ErrorRule(
        "must be <=",
        "context_too_long",
        "context_too_long",
        r"tokens? \+ `?max_new_tokens`? must be <= \d+",
        stage="inference",
        backend="tgi",
    ),
    ErrorRule(
        "input validation error",
        "context_too_long",
        "context_too_long",
        r"input validation error:.*(?:must be <=|must have less than)",
        stage="inference",
        backend="tgi",
    ),
)

ARCH_ERRORS: tuple[ErrorRule, ...] = (
    ErrorRule("unsupported model type", "unknown_arch", "unknown_arch", stage="load_weights", backend="tgi"),
)

# a --quantize the checkpoint does not hold: TGI's weights loader finds no packed tensors for it
FORMAT_ERRORS: tuple[ErrorRule, ...] = (
    ErrorRule(
        "make sure the model is already quantized",
        "quant_not_in_checkpoint",
        "unsupported_quant",
        stage="load_weights",
        backend="tgi",
    ),
)

BROKEN_FILE_ERRORS: tuple[ErrorRule, ...] = (
    ErrorRule("downloaderror", "download_failed", "other", stage="download", strong=False, backend="tgi"),
)

GENERIC_ERRORS: tuple[ErrorRule, ...] = (
    ErrorRule("webserver crashed", "engine_failed", "other", strong=False, backend="tgi"),
    ErrorRule(
        "shard",
        "engine_failed",
        "other",
        r"shard \d+ failed to start|error when initializing model",
        strong=False,
        backend="tgi",
    ),
)

FIGURES: tuple[FigureRule, ...] = (
    FigureRule(
        "max batch total tokens",
        "kv_cache_tokens",
        rf"setting max batch total tokens to {NUM}",
        count=True,
        backend="tgi",
    ),
)

MARKS: tuple[tuple[str, str], ...] = (
    ("text_generation_launcher", "tgi"),
    ("text_generation_router", "tgi"),
    ("text_generation_server", "tgi"),
    ("input validation error", "tgi"),
    ("argumentvalidation(", "tgi"),  # the launcher's check of its token limits
)


# How far a run got (core/logs/ruletypes.MILESTONES): each line proves a step is behind it.
PROGRESS: tuple[ProgressRule, ...] = (
    ProgressRule("shard ready in", "weights", backend="tgi"),
    ProgressRule("setting max batch total tokens", "cache", backend="tgi"),
    ProgressRule("connected", "listening", r"text_generation_router.*: connected\s*$", backend="tgi"),
    ProgressRule("starting http server", "listening", backend="tgi"),
    ProgressRule("success", "served", r"text_generation_router.*\bsuccess\s*$", backend="tgi"),
)


NOTICES: tuple[NoticeRule, ...] = (
    # no flash-attention kernels in this install: TGI serves through its slower non-flash path (or not
    # at all for the models that need them)
    NoticeRule(
        "flash attention is not installed",
        "kernel_fallback",
        "flash attention is not installed: TGI runs without its flash kernels (slower, more memory per token)",
        backend="tgi",
    ),
    # TGI 2.x caps a request at 4096 tokens unless told otherwise (launcher's max_default): it says so when
    # it has read the model's longer max_position_embeddings, and only "Default ... to 4096" when it has not
    NoticeRule(
        "but tgi will now set its default to",
        "context_truncated",
        "TGI caps each request below the model's trained length (its default, to save memory): longer "
        "prompts are refused; pass --max-input-tokens and --max-total-tokens to use more of it",
        backend="tgi",
    ),
    NoticeRule(
        "default `max_total_tokens` to 4096",
        "context_truncated",
        "TGI took its default limit of 4096 tokens per request (max_total_tokens): if the model was trained "
        "on more, longer prompts are refused; --max-input-tokens and --max-total-tokens raise it",
        backend="tgi",
    ),
    # TGI 3's router picks the per-request limit itself when none is given (from its prefill budget and the
    # memory left), often far below the model's trained length: a long prompt is then refused, not served
    NoticeRule(
        "maximum total tokens defaulted to",
        "context_truncated",
        "TGI chose its own limit per request (max_total_tokens) as none was given: if the model was trained on "
        "more, longer prompts are refused; --max-input-tokens and --max-total-tokens set it",
        backend="tgi",
    ),
    # the router found no fast tokenizer: it cannot count a request's tokens, so it checks no length
    NoticeRule(
        "input length validation and truncation is disabled",
        "setting_ignored",
        "TGI's router found no fast tokenizer: it neither checks nor truncates a request's length, so an "
        "input over the limits reaches the model (and fails there, or is cut)",
        backend="tgi",
    ),
)

LOG = EngineLog(
    "tgi",
    (PROFILE,),
    stages=(("first", STAGE_RULES_1), ("second", STAGE_RULES_2)),
    errors=(
        ("host_oom", HOST_OOM_ERRORS),
        ("device_oom.share", DEVICE_OOM_ERRORS),
        ("device_oom", DEVICE_OOM_ERRORS_2 + DEVICE_OOM_ERRORS_3),
        ("context", CONTEXT_ERRORS),
        ("format", FORMAT_ERRORS),
        ("arch", ARCH_ERRORS),
        ("broken_file", BROKEN_FILE_ERRORS),
        ("generic", GENERIC_ERRORS),
    ),
    notices=(("notices", NOTICES),),
    figures=(("figures", FIGURES),),
    marks=MARKS,
    progress=PROGRESS,
)
