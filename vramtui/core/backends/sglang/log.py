"""How SGLang words its log: stages, errors, notices, figures and the marks that name it.

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
    "sglang",
    precedence=50,
    command_words=("sglang.launch_server", "-m sglang", "sglang serve"),
    process_names=("sglang", "python", "scheduler"),
    is_torch=True,
    knobs={
        "context": "--context-length",
        "parallel": "--max-running-requests",
        "batch": "--chunked-prefill-size",
        "quant": "--quantization",
        "mem_share": "--mem-fraction-static",
        "kv_dtype": "--kv-cache-dtype",
        "cpu_offload": "--cpu-offload-gb",
        "dtype": "--dtype",
        "tensor_parallel_size": "--tp-size",
    },
    outweighed_by=("vllm",),
    kills_own_tree=True,
    advice={
        "graph_capture": (
            "CUDA-graph capture ran out of memory: lower --mem-fraction-static (e.g. 0.8 or 0.7) to leave it room.",
            "Or capture fewer batch sizes: a smaller --cuda-graph-max-bs (e.g. 16); or --disable-cuda-graph.",
        ),
        "dtype": ("Use float16 on GPUs before compute capability 8.0: --dtype half (or float16).",),
        "kv_pool_exhausted": (
            "The KV token pool ran dry while serving: cap the batch with a lower --max-running-requests "
            "(or a smaller --chunked-prefill-size for long prompts).",
            "Or give the pool more room: raise --mem-fraction-static a little (e.g. 0.85 to 0.88).",
        ),
    },
    holds_its_share=True,
)


STAGE_RULES_1: tuple[StageRule, ...] = (
    StageRule("init_memory_pool", "kv_cache", backend="sglang"),  # its frames in an allocation traceback
)

STAGE_RULES_2: tuple[StageRule, ...] = (
    # SGLang
    StageRule("load weight begin", "load_weights", backend="sglang"),
    StageRule("load weight end", "load_weights", backend="sglang"),
    StageRule("kv cache is allocated", "kv_cache", backend="sglang"),
    StageRule("memory pool end", "kv_cache", backend="sglang"),
    StageRule("capture cuda graph", "kv_cache", backend="sglang"),
    StageRule("max_total_num_tokens", "kv_cache", backend="sglang"),
    StageRule("the server is fired up and ready", "ready", backend="sglang"),
    StageRule("prefill batch", "inference", backend="sglang"),
    StageRule("decode batch", "inference", backend="sglang"),
    StageRule("forward_batch_generation", "inference", backend="sglang"),
    # the scheduler's batch path in a traceback's frames: it was serving requests
    *(
        StageRule(frame, "inference", backend="sglang")
        for frame in (
            "prepare_for_extend",
            "prepare_for_decode",
            "forward_fill_batch",
            "forward_decode_batch",
        )
    ),
)

KV_CACHE_ERRORS: tuple[ErrorRule, ...] = (
    ErrorRule(
        "larger than the profiled value",
        "kv_too_small",
        "kv_cache_too_small",
        r"larger than the profiled value -",  # SGLang: a negative budget of KV tokens
        stage="kv_cache",
        backend="sglang",
    ),
)

KV_CACHE_ERRORS_2: tuple[ErrorRule, ...] = (
    ErrorRule(
        "no gpu memory for the kv cache",
        "kv_no_room",
        "kv_cache_too_small",
        stage="kv_cache",
        backend="sglang",
    ),
    ErrorRule(
        "not enough memory",
        "kv_no_room",
        "kv_cache_too_small",
        r"not enough memory\. please try to increase --mem-fraction-static",
        stage="kv_cache",
        backend="sglang",
    ),
)

CONTEXT_ERRORS: tuple[ErrorRule, ...] = (
    # the scheduler's KV token pool ran dry while serving: "Decode out of memory. Try to lower your batch
    # size." / "Prefill out of memory. ...", then "Try to allocate N tokens. Available tokens: M"
    ErrorRule(
        "out of memory. try to lower your batch size",
        "kv_pool_exhausted",
        "kv_cache_too_small",
        r"(?:decode|prefill) out of memory\. try to lower your batch size",
        stage="inference",
        backend="sglang",
    ),
    ErrorRule(
        "is longer than the model's context length",
        "context_too_long",
        "context_too_long",
        stage="inference",
        backend="sglang",
    ),
    # a request over what the scheduler takes (its max_req_input_len: the context or the pool, the less):
    # "Input length (160062 tokens) exceeds the maximum allowed length (59862 tokens)."
    ErrorRule(
        "exceeds the maximum allowed length",
        "context_too_long",
        "context_too_long",
        r"input length \(\d+ tokens\) exceeds the maximum allowed length",
        stage="inference",
        backend="sglang",
    ),
)

GENERIC_ERRORS: tuple[ErrorRule, ...] = (
    # prefill/decode disaggregation: the prefill server could not hand a request's KV cache to the decode
    # server ("Prefill transfer failed for request ... KVTransferError"), after it came up (round 82)
    ErrorRule(
        "prefill transfer failed",
        "kv_transfer_failed",
        "other",
        r"prefill transfer failed for request",
        stage="inference",
        backend="sglang",
    ),
    ErrorRule("hit an exception", "worker_failed", "other", strong=False, backend="sglang"),
)

NOTICES: tuple[NoticeRule, ...] = (
    NoticeRule(
        "token usage",
        "kv_full",
        "the KV cache pool is full while requests wait: they queue or are retracted (throughput falls)",
        r"\btoken usage: 1\.00\b.*#queue-req: [1-9]",
        backend="sglang",
    ),
    # server_args or the runner turning CUDA graphs off by itself (low memory, an attention backend that
    # cannot take them): decoding runs eager, slower
    NoticeRule(
        "cuda graph",
        "kernel_fallback",
        "SGLang turned CUDA graphs off (the line says why): decoding runs without them, slower",
        r"disable cuda graph because of|cuda graph is disabled because",
        backend="sglang",
    ),
    NoticeRule(
        "performance might be sub-optimal",
        "kernel_fallback",
        "a MoE kernel runs without a tuned config for this GPU (slower)",
        r"moe kernel config.*performance might be sub-optimal",
        backend="sglang",
    ),
    # the scheduler's own words when decoding outgrows the pool (scheduler.py): running requests are
    # retracted and queued again, the server stays up
    NoticeRule(
        "decode out of memory happened",
        "kv_full",
        "the KV cache pool ran out while decoding: SGLang retracted running requests to be redone later "
        "(slower); a larger --mem-fraction-static or fewer --max-running-requests gives the pool room",
        backend="sglang",
    ),
)

NOTICES_2: tuple[NoticeRule, ...] = (
    NoticeRule("capture cuda graph begin", "mark", "graph_capture", backend="sglang"),
    # its own warm-up request failed: it listened, never came up ready, and kills itself (round 69)
    NoticeRule(
        "warmup error", "mark", "warmup_failed", r"initialization failed\. warmup error", backend="sglang"
    ),
    # server_args turns the overlap scheduler off when a setting or the model cannot take it
    NoticeRule(
        "disabling overlap schedule",
        "kernel_fallback",
        "SGLang turned its overlap scheduler off (the line says why): batches are scheduled and run in "
        "turn, slower",
        backend="sglang",
    ),
)

FIGURES: tuple[FigureRule, ...] = (
    FigureRule(
        "fraction",
        "memory_share",
        r"(?:--mem-fraction-static[= ]|mem_fraction_static=)(?P<value>0?\.\d+|1(?:\.0+)?)\b",
        count=True,
        backend="sglang",
    ),
)

FIGURES_2: tuple[FigureRule, ...] = (
    FigureRule(
        "load weight end",
        "weights_loaded",
        rf"load weight end\..*mem usage={NUM}\s*(?P<unit>GB|GiB)",
        backend="sglang",
    ),
    # What the weights left free: with them, the memory --mem-fraction-static is a share of.
    FigureRule(
        "load weight end",
        "free_after_weights",
        rf"load weight end\..*avail mem={NUM}\s*(?P<unit>GB|GiB)",
        backend="sglang",
    ),
    FigureRule(
        "kv cache is allocated",
        "kv_cache_tokens",
        rf"kv cache is allocated\. #tokens:\s*{NUM}",
        count=True,
        backend="sglang",
    ),
    FigureRule(
        "k size",
        "kv_cache_k",
        rf"kv cache is allocated\..*k size:\s*{NUM}\s*(?P<unit>GB|GiB)",
        backend="sglang",
    ),
    FigureRule(
        "v size",
        "kv_cache_v",
        rf"kv cache is allocated\..*v size:\s*{NUM}\s*(?P<unit>GB|GiB)",
        backend="sglang",
    ),
    FigureRule(
        "max_total_num_tokens",
        "kv_cache_tokens",
        rf"max_total_num_tokens={NUM}",
        count=True,
        backend="sglang",
    ),
    # the context the same line states beside its pool: the scheduler takes no request longer than the
    # pool holds (its max_req_input_len), so a pool under it caps the context (core/logs/verdict.py)
    FigureRule(
        "max_total_num_tokens",
        "pool_context",
        rf"max_total_num_tokens=.*\bcontext_len={NUM}",
        count=True,
        backend="sglang",
    ),
    FigureRule(
        "capture cuda graph end",
        "cuda_graphs",
        rf"capture cuda graph end\..*mem usage={NUM}\s*(?P<unit>GB|GiB)",
        backend="sglang",
    ),
)

MARKS: tuple[tuple[str, str], ...] = (
    ("sglang", "sglang"),
    ("mem-fraction-static", "sglang"),
    ("max_total_num_tokens", "sglang"),
    ("load weight end", "sglang"),
    ("tp0]", "sglang"),
    ("decode batch, #running-req", "sglang"),  # its scheduler's stats lines
    ("prefill batch, #new-seq", "sglang"),
    ("decode batch. #running-req", "sglang"),  # the same, as its releases since 2025 word them
    ("prefill batch. #new-seq", "sglang"),
    ("scheduler_metrics_mixin", "sglang"),
)

MARKS_2: tuple[tuple[str, str], ...] = (("is longer than the model's context length", "sglang"),)

ECHO_CUTS: tuple[tuple[str, str], ...] = (
    ("receive: obj=", ""),  # SGLang --log-requests
    ("finish: obj=", ""),
)


# How far a run got (core/logs/ruletypes.MILESTONES): each line proves a step is behind it.
PROGRESS: tuple[ProgressRule, ...] = (
    ProgressRule("load weight end", "weights", backend="sglang"),
    ProgressRule("kv cache is allocated", "cache", backend="sglang"),
    ProgressRule("memory pool end", "cache", backend="sglang"),
    ProgressRule("the server is fired up and ready", "listening", backend="sglang"),
    ProgressRule("decode batch", "served", backend="sglang"),
    # its scheduler retracting requests to free KV room while decoding: requests are being served
    ProgressRule("decode out of memory happened", "served", backend="sglang"),
    ProgressRule("prefill batch", "served", r"prefill batch.*#new-token", backend="sglang"),
)


LOG = EngineLog(
    "sglang",
    (PROFILE,),
    stages=(("first", STAGE_RULES_1), ("second", STAGE_RULES_2)),
    errors=(
        ("kv_cache", KV_CACHE_ERRORS + KV_CACHE_ERRORS_2),
        ("context", CONTEXT_ERRORS),
        ("generic", GENERIC_ERRORS),
    ),
    notices=(("notices", NOTICES + NOTICES_2),),
    figures=(("figures.first", FIGURES), ("figures", FIGURES_2)),
    marks=MARKS + MARKS_2,
    echo_cuts=ECHO_CUTS,
    progress=PROGRESS,
)
