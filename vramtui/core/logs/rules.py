"""How each model server words its startup stages, its errors and its quiet failures — as data.

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
from dataclasses import dataclass, field

from vramtui.core.logs.stages import FAILURES, STAGE_INDEX, STAGES  # noqa: F401  (re-exported)

# Backend names the diagnosis reports; the first five are the ones in vramtui.core.backends.
BACKEND_NAMES: tuple[str, ...] = (
    "llama.cpp",
    "llama-cpp-python",
    "vllm",
    "transformers",
    "ollama",
    "tgi",
    "sglang",
)
# Which corpus family a backend belongs to (llama-cpp-python prints llama.cpp's own log).
FAMILY: dict[str, str] = {"llama-cpp-python": "llama.cpp"}


def _rx(pattern: str | None, flags: int = 0) -> re.Pattern[str] | None:
    return re.compile(pattern, flags) if pattern else None


@dataclass(frozen=True)
class StageRule:
    """A line that shows the server is in `stage`."""

    anchor: str
    stage: str
    pattern: str | None = None
    backend: str = ""  # whose wording this is (documentation and tests; all rules apply to all logs)
    regex: re.Pattern[str] | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "regex", _rx(self.pattern))


@dataclass(frozen=True)
class ErrorRule:
    """A line that says why the run failed.

    `cause` is a finer name than the failure class (the advice keys on it). `stage` pins the stage
    when the wording itself says where it happened. `strong=False` marks a generic error ("failed to
    load model") that only counts when no specific cause shows up; its `hint` is the class to assume
    then. `case_sensitive` regexes run on the original line.
    """

    anchor: str
    cause: str
    failure: str
    pattern: str | None = None
    stage: str | None = None
    strong: bool = True
    hint: str | None = None
    backend: str = ""
    case_sensitive: bool = False
    regex: re.Pattern[str] | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "regex", _rx(self.pattern))


@dataclass(frozen=True)
class NoticeRule:
    """A quiet failure (`kind`: kernel_fallback, cpu_fallback, quant_unconfirmed), a recovery, or a mark."""

    anchor: str
    kind: str
    message: str
    pattern: str | None = None
    backend: str = ""
    regex: re.Pattern[str] | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "regex", _rx(self.pattern))


@dataclass(frozen=True)
class FigureRule:
    """A number the engine printed about its own memory. Regex on the original line, case-insensitive.

    Groups: `device` (optional), `value`, `unit` (optional; `unit_default` otherwise). `per_device`
    figures are summed over devices; a device seen again starts a new set (a new load).
    """

    anchor: str
    key: str
    pattern: str
    unit_default: str = "MiB"
    per_device: bool = False
    count: bool = False  # a count (tokens, blocks), not bytes
    backend: str = ""
    regex: re.Pattern[str] | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "regex", re.compile(self.pattern, re.IGNORECASE))


# ---------------------------------------------------------------------------------------------
# Stages. A line takes the furthest stage among the rules it matches ("GPU KV cache usage" inside
# vLLM's serving stats line is still serving).
# ---------------------------------------------------------------------------------------------
STAGE_RULES: tuple[StageRule, ...] = (
    # llama.cpp / llama-server / llama-cpp-python / Ollama's runner
    StageRule("common_download_file", "download", backend="llama.cpp"),
    StageRule("get_repo_commit", "download", backend="llama.cpp"),
    StageRule("get_repo_files", "download", backend="llama.cpp"),
    StageRule("curl_perform_with_retry", "download", backend="llama.cpp"),
    StageRule("llama_load_model_from_url", "download", backend="llama.cpp"),
    StageRule("llama_model_loader", "load_weights", backend="llama.cpp"),
    StageRule("print_info:", "load_weights", backend="llama.cpp"),
    StageRule("llm_load_print_meta", "load_weights", backend="llama.cpp"),
    StageRule("load_tensors", "load_weights", backend="llama.cpp"),
    StageRule("llm_load_tensors", "load_weights", backend="llama.cpp"),
    StageRule("llama_model_load", "load_weights", backend="llama.cpp"),
    StageRule("llama_load_model_from_file", "load_weights", backend="llama.cpp"),
    StageRule("gguf_init_from_file", "load_weights", backend="llama.cpp"),
    StageRule(
        "loading model", "load_weights", r"(?:load_model|main|llama\.cpp): loading model", backend="llama.cpp"
    ),
    StageRule("llama_context", "kv_cache", backend="llama.cpp"),
    StageRule("llama_new_context_with_model", "kv_cache", backend="llama.cpp"),
    StageRule("llama_init_from_model", "kv_cache", backend="llama.cpp"),
    StageRule("llama_kv_cache", "kv_cache", backend="llama.cpp"),
    StageRule("kv buffer size", "kv_cache", backend="llama.cpp"),
    StageRule("compute buffer size", "kv_cache", backend="llama.cpp"),
    StageRule("graph_reserve", "kv_cache", backend="llama.cpp"),
    StageRule("sched_reserve", "kv_cache", backend="llama.cpp"),
    StageRule("failed to create context", "kv_cache", backend="llama.cpp"),
    StageRule("server is listening on", "ready", backend="llama.cpp"),
    StageRule("model loaded", "ready", r"\bmain: model loaded", backend="llama.cpp"),
    StageRule("all slots are idle", "ready", backend="llama.cpp"),
    StageRule("launch_slot_", "inference", backend="llama.cpp"),
    StageRule("update_slots", "inference", r"update_slots: id", backend="llama.cpp"),
    StageRule("log_server_r", "inference", r"log_server_r: request: post", backend="llama.cpp"),
    StageRule("prompt eval time", "inference", backend="llama.cpp"),
    StageRule("llama_perf_context_print", "inference", backend="llama.cpp"),
    StageRule("create_completion", "inference", backend="llama-cpp-python"),
    StageRule("create_chat_completion", "inference", backend="llama-cpp-python"),
    StageRule("llama runner started", "ready", backend="ollama"),
    StageRule("failed to start", "load_weights", r"shard \d+ failed to start", backend="tgi"),
    StageRule("shardcannotstart", "load_weights", backend="tgi"),
    # Ollama plans the load (layers offloaded to each device) just before it starts the runner.
    StageRule("offload to", "load_weights", r'msg="offload to \w+"', backend="ollama"),
    StageRule("while running the model", "inference", backend="ollama"),
    StageRule("pulling manifest", "download", backend="ollama"),
    StageRule("pulling ", "download", r"^(?:\S+\s+\|\s+)?pulling [0-9a-f]{6,}", backend="ollama"),
    StageRule("starting llama server", "load_weights", backend="ollama"),
    StageRule("/api/chat", "inference", r"\|\s*\d{3}\s*\|.*\"/api/chat\"", backend="ollama"),
    StageRule("/api/generate", "inference", r"\|\s*\d{3}\s*\|.*\"/api/generate\"", backend="ollama"),
    # huggingface_hub / transformers / accelerate / bitsandbytes
    StageRule("hf_hub_download", "download", backend="transformers"),
    StageRule("snapshot_download", "download", backend="transformers"),
    StageRule("cached_file", "download", backend="transformers"),
    StageRule("get_hf_file_metadata", "download", backend="transformers"),
    StageRule("fetching ", "download", r"fetching \d+ files", backend="transformers"),
    StageRule(
        "downloading",
        "download",
        r"^(?:.*\]\s*)?downloading\b|downloading (?:shards|model|weights)",
        backend="transformers",
    ),
    StageRule("from_pretrained", "load_weights", backend="transformers"),
    StageRule("checkpoint shards", "load_weights", backend="transformers"),
    StageRule("modeling_utils", "load_weights", backend="transformers"),
    StageRule("configuration_auto", "load_weights", backend="transformers"),
    StageRule("load_state_dict", "load_weights", backend="transformers"),
    StageRule("dispatch_model", "load_weights", backend="transformers"),
    StageRule("setting `pad_token_id`", "inference", backend="transformers"),
    StageRule("generate(", "inference", backend="transformers"),
    StageRule("in generate", "inference", backend="transformers"),
    StageRule("past_key_value", "inference", backend="transformers"),
    StageRule("output generated in", "inference", backend="transformers"),
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
    StageRule("from_pretrained", "load_weights", backend="transformers"),  # a traceback's code line
    StageRule("init_memory_pool", "kv_cache", backend="sglang"),  # its frames in an allocation traceback
    # The HTTP server is up: vLLM lists its routes, then uvicorn starts (vLLM, SGLang).
    StageRule("route:", "ready", r"launcher\.py:\d+\] route: /", backend="vllm"),
    StageRule("started server process", "ready", backend="vllm"),
    StageRule("gpu kv cache size", "kv_cache", backend="vllm"),
    StageRule("maximum concurrency", "kv_cache", backend="vllm"),
    StageRule("cuda graph", "kv_cache", backend="vllm"),
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
    # text-generation-inference
    StageRule("starting check and download process", "download", backend="tgi"),
    StageRule("download: text_generation_launcher", "download", backend="tgi"),
    StageRule("starting shard", "load_weights", backend="tgi"),
    StageRule("get_model", "load_weights", backend="tgi"),
    StageRule("warming up model", "kv_cache", backend="tgi"),
    StageRule("warmup", "kv_cache", backend="tgi"),
    StageRule("setting max batch total tokens", "kv_cache", backend="tgi"),
    StageRule("connected", "ready", r"text_generation_router.*: connected\s*$", backend="tgi"),
    StageRule("input validation error", "inference", backend="tgi"),
    StageRule("generate_stream", "inference", backend="tgi"),
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
)

# ---------------------------------------------------------------------------------------------
# Errors: most specific first; the first rule that matches a line decides its cause.
# ---------------------------------------------------------------------------------------------
_DEVICE = r"(?:cuda|rocm|hip|vulkan|metal|sycl|cann|musa)\d*"

ERROR_RULES: tuple[ErrorRule, ...] = (
    # --- host RAM: the kernel's OOM killer or a failed host allocation ---
    ErrorRule("out of memory: kill", "host_oom_killer", "host_oom_killed", stage=None),
    ErrorRule("oom-kill", "host_oom_killer", "host_oom_killed"),
    ErrorRule("oomkilled", "host_oom_killer", "host_oom_killed"),
    ErrorRule(
        "killed",
        "host_killed",
        "host_oom_killed",
        r"(?:^|[|\]\s])killed\s*$|\[\d+\]\s+\d+\s+killed\s+\S|^\s*\d+\s+killed\s+\S|\bsignal: killed\b",
    ),
    # Filed under "code" and "status", not "137": a digit word would make every 3-digit number special.
    ErrorRule("code 137", "host_killed", "host_oom_killed", r"exit(?:ed)? (?:with )?code 137\b"),
    ErrorRule("status 137", "host_killed", "host_oom_killed", r"exit(?:ed)? (?:with )?status 137\b"),
    # text-generation-inference's launcher: a shard killed by signal 9 is the OOM killer's work.
    ErrorRule(
        "signaled to shutdown with signal",
        "host_killed",
        "host_oom_killed",
        r"signaled to shutdown with signal 9\b",
        backend="tgi",
    ),
    ErrorRule("signaled to shutdown with signal", "crash", "other", strong=False, backend="tgi"),
    # --- device memory ---
    # text-generation-inference's warmup runs one prefill of --max-batch-prefill-tokens tokens.
    ErrorRule(
        "not enough memory to handle",
        "prefill_warmup",
        "cuda_oom",
        r"not enough memory to handle \d+ prefill tokens",
        stage="kv_cache",
        backend="tgi",
    ),
    # vLLM checks the share it was asked for (--gpu-memory-utilization) against what is free at start:
    # another process holds GPU memory, or the share is set higher than the card has free.
    ErrorRule(
        "less than desired gpu memory utilization",
        "gpu_share_short",
        "cuda_oom",
        stage="load_weights",
        backend="vllm",
    ),
    ErrorRule(
        "out of memory",
        "cuda_oom",
        "cuda_oom",
        r"(?:cuda|hip|cudamalloc|hipmalloc|cublas|gpu|device)\b.*out of memory|out of memory.*\b(?:cuda|hip|gpu|device)",
    ),
    ErrorRule("outofmemoryerror", "cuda_oom", "cuda_oom"),
    ErrorRule("cuda error: out of memory", "cuda_oom", "cuda_oom"),
    ErrorRule("cudaerrormemoryallocation", "cuda_oom", "cuda_oom"),
    ErrorRule("hiperroroutofmemory", "cuda_oom", "cuda_oom"),
    ErrorRule("cublas_status_alloc_failed", "cuda_oom", "cuda_oom"),
    ErrorRule("erroroutofdevicememory", "cuda_oom", "cuda_oom"),
    ErrorRule("would exceed allowed memory", "cuda_oom", "cuda_oom", backend="tgi"),
    ErrorRule(
        "failed to allocate",
        "device_alloc",
        "cuda_oom",
        rf"failed to allocate {_DEVICE}(?:_host)? buffer",
        backend="llama.cpp",
    ),
    ErrorRule(
        "unable to allocate",
        "device_alloc",
        "cuda_oom",
        rf"unable to allocate {_DEVICE} buffer",
        backend="llama.cpp",
    ),
    ErrorRule("insufficient vram", "cuda_oom", "cuda_oom", backend="ollama"),
    ErrorRule("memory layout cannot be allocated", "cuda_oom", "cuda_oom", backend="ollama"),
    ErrorRule(
        "not enough memory",
        "kv_prefill_oom",
        "cuda_oom",
        r"not enough memory to handle \d+ (?:prefill|total) tokens",
        stage="kv_cache",
        backend="tgi",
    ),
    # --- vLLM / SGLang: the KV cache has no room left ---
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
    ErrorRule("insufficient memory for kv cache", "kv_too_small", "kv_cache_too_small", stage="kv_cache"),
    ErrorRule(
        "available kv cache memory",
        "kv_too_small",
        "kv_cache_too_small",
        r"available kv cache memory:\s*-",  # negative: the weights and activations left nothing
        stage="kv_cache",
        backend="vllm",
    ),
    ErrorRule(
        "larger than the profiled value",
        "kv_too_small",
        "kv_cache_too_small",
        r"larger than the profiled value -",  # SGLang: a negative budget of KV tokens
        stage="kv_cache",
        backend="sglang",
    ),
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
    # --- requests longer than the context ---
    # llama-server: a request that does not fit its slot's share of the context (-c / --parallel).
    ErrorRule(
        "kv cache is full", "context_too_long", "context_too_long", stage="inference", backend="llama.cpp"
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
    ErrorRule(
        "exceeds the available context size",
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
    ErrorRule(
        "is longer than the model's context length",
        "context_too_long",
        "context_too_long",
        stage="inference",
        backend="sglang",
    ),
    ErrorRule(
        "longer than the maximum model length",
        "context_too_long",
        "context_too_long",
        stage="inference",
        backend="vllm",
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
    ErrorRule(
        "context length",
        "context_too_long",
        "context_too_long",
        r"input (?:length|tokens?) .*exceeds? (?:the )?(?:maximum )?context length",
        stage="inference",
    ),
    # --- file formats and quantizations the build cannot read ---
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
    ErrorRule(
        "quantization method",
        "quant_unsupported",
        "unsupported_quant",
        r"quantization method .*(?:is not supported|not supported for the current gpu)",
        stage="load_weights",
        backend="vllm",
    ),
    ErrorRule("unknown quantization", "quant_unsupported", "unsupported_quant", stage="load_weights"),
    ErrorRule(
        "quantization",
        "quant_unsupported",
        "unsupported_quant",
        r"(?:unsupported|does not support) (?:this )?quantization|quantization .*(?:is not supported|not supported yet)",
        stage="load_weights",
    ),
    ErrorRule(
        "cuda setup: setup failed",
        "bnb_missing",
        "unsupported_quant",
        stage="load_weights",
        backend="transformers",
    ),
    ErrorRule(
        "bitsandbytes",
        "bnb_missing",
        "unsupported_quant",
        r"requires? .*bitsandbytes|please install bitsandbytes"
        r"|bitsandbytes .*(?:not installed|was compiled without gpu support).*error",
        stage="load_weights",
        backend="transformers",
    ),
    ErrorRule(
        "gptq",
        "gptq_missing",
        "unsupported_quant",
        r"(?:install|requires?) .*(?:auto-gptq|auto_gptq|gptqmodel|optimum)",
        stage="load_weights",
        backend="transformers",
    ),
    # --- architectures the engine does not know ---
    ErrorRule("unsupported model type", "unknown_arch", "unknown_arch", stage="load_weights", backend="tgi"),
    ErrorRule(
        "is not supported yet",
        "unknown_arch",
        "unknown_arch",
        r"gguf model with architecture \S+ is not supported",
        stage="load_weights",
        backend="vllm",
    ),
    ErrorRule(
        "unknown model architecture",
        "unknown_arch",
        "unknown_arch",
        stage="load_weights",
        backend="llama.cpp",
    ),
    ErrorRule(
        "does not recognize this architecture",
        "unknown_arch",
        "unknown_arch",
        stage="load_weights",
        backend="transformers",
    ),
    ErrorRule(
        "unrecognized configuration class",
        "unknown_arch",
        "unknown_arch",
        stage="load_weights",
        backend="transformers",
    ),
    ErrorRule(
        "unrecognized model in", "unknown_arch", "unknown_arch", stage="load_weights", backend="transformers"
    ),
    ErrorRule(
        "trust_remote_code",
        "remote_code",
        "unknown_arch",
        r"(?:set|pass) the option `?trust_remote_code=true|requires you to execute the configuration file",
        stage="load_weights",
        backend="transformers",
    ),
    ErrorRule(
        "are not supported for now",
        "unknown_arch",
        "unknown_arch",
        r"model architectures? \[.*\] (?:are|is) not supported",
        stage="load_weights",
        backend="vllm",
    ),
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
    # --- weights that do not fit the model's shape ---
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
    ErrorRule(
        "size mismatch for", "shape_mismatch", "shape_mismatch", stage="load_weights", backend="transformers"
    ),
    ErrorRule("shape mismatch", "shape_mismatch", "shape_mismatch", stage="load_weights"),
    ErrorRule(
        "whose dimensions in the model are",
        "shape_mismatch",
        "shape_mismatch",
        stage="load_weights",
        backend="transformers",
    ),
    ErrorRule(
        "trying to set a tensor of shape",
        "shape_mismatch",
        "shape_mismatch",
        stage="load_weights",
        backend="transformers",
    ),
    ErrorRule(
        "param_data.shape == loaded_weight.shape",
        "shape_mismatch",
        "shape_mismatch",
        stage="load_weights",
        backend="vllm",
    ),
    # --- data types the GPU or the build cannot run ---
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
    ErrorRule("not implemented for 'half'", "half_on_cpu", "dtype_unsupported", backend="transformers"),
    ErrorRule(
        "not implemented for 'bfloat16'", "bf16_unsupported", "dtype_unsupported", backend="transformers"
    ),
    ErrorRule("does not support bf16", "bf16_unsupported", "dtype_unsupported"),
    ErrorRule("bf16 is not supported", "bf16_unsupported", "dtype_unsupported"),
    ErrorRule(
        "dtype",
        "dtype_unsupported",
        "dtype_unsupported",
        r"(?:unsupported|not supported) (?:d)?type|dtype .* is not supported",
        stage="load_weights",
    ),
    # --- disk ---
    ErrorRule("no space left on device", "disk_full", "disk_full"),
    ErrorRule("disk quota exceeded", "disk_full", "disk_full"),
    ErrorRule("enospc", "disk_full", "disk_full"),
    ErrorRule("not enough free disk space", "disk_full", "disk_full", stage="download"),
    # --- the hub: a gated repository, then "not found" (which the hub also answers, with 401, for a
    # private repository and no token: the advice says so), then other refusals ---
    ErrorRule("gatedrepoerror", "gated_repo", "other", stage="download", backend="transformers"),
    ErrorRule("cannot access gated repo", "gated_repo", "other", stage="download", backend="transformers"),
    ErrorRule(
        "repositorynotfounderror",
        "not_found_remote",
        "file_missing",
        stage="download",
        backend="transformers",
    ),
    ErrorRule(
        "repository not found", "not_found_remote", "file_missing", stage="download", backend="transformers"
    ),
    ErrorRule("401 client error", "gated_repo", "other", stage="download", backend="transformers"),
    ErrorRule("403 client error", "gated_repo", "other", stage="download", backend="transformers"),
    ErrorRule(
        "get failed (40",
        "gated_repo",
        "other",
        r"get failed \(40[13]\)",
        stage="download",
        backend="llama.cpp",
    ),
    # --- files that are not there ---
    ErrorRule(
        "cache directory not found", "not_found_local", "file_missing", stage="load_weights", backend="vllm"
    ),
    ErrorRule("get failed (404)", "not_found_remote", "file_missing", stage="download", backend="llama.cpp"),
    ErrorRule("localentrynotfounderror", "offline", "network", stage="download", backend="transformers"),
    ErrorRule(
        "cannot find the requested files in the local cache",
        "offline",
        "network",
        stage="download",
        backend="transformers",
    ),
    ErrorRule(
        "entrynotfounderror", "not_found_remote", "file_missing", stage="download", backend="transformers"
    ),
    ErrorRule(
        "is not a valid model identifier",
        "not_found_remote",
        "file_missing",
        stage="download",
        backend="transformers",
    ),
    ErrorRule(
        "does not appear to have a file named",
        "not_found_local",
        "file_missing",
        stage="download",
        backend="transformers",
    ),
    ErrorRule("404 client error", "not_found_remote", "file_missing", stage="download"),
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
    ErrorRule(
        "model path does not exist",
        "not_found_local",
        "file_missing",
        stage="load_weights",
        backend="llama-cpp-python",
    ),
    ErrorRule(
        "failed to open",
        "not_found_local",
        "file_missing",
        r"(?:gguf_init_from_file\w*|llama_model_load\w*|fopen): failed to open .*(?:no such file|not found)?|failed to open gguf file",
        stage="load_weights",
        backend="llama.cpp",
    ),
    ErrorRule("no such file or directory", "not_found_local", "file_missing"),
    ErrorRule("filenotfounderror", "not_found_local", "file_missing"),
    # --- tokenizer files (transformers' PreTrainedTokenizerFast and AutoTokenizer wording) ---
    ErrorRule(
        "couldn't instantiate the backend tokenizer",
        "tokenizer_files",
        "other",
        stage="load_weights",
        backend="transformers",
    ),
    ErrorRule(
        "can't load tokenizer for",
        "tokenizer_files",
        "file_missing",
        stage="load_weights",
        backend="transformers",
    ),
    # --- network ---
    ErrorRule("localentrynotfounderror", "offline", "network", stage="download", backend="transformers"),
    ErrorRule(
        "cannot find the requested files in the local cache",
        "offline",
        "network",
        stage="download",
        backend="transformers",
    ),
    ErrorRule("couldn't connect to", "network", "network", stage="download", backend="transformers"),
    ErrorRule("max retries exceeded", "network", "network", stage="download"),
    ErrorRule("dial tcp", "network", "network", stage="download", backend="ollama"),
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
    # A PyTorch checkpoint (pickle 80 02 8a 0a, or a zip) handed to llama.cpp: it reads only GGUF.
    ErrorRule(
        "invalid magic",
        "torch_checkpoint",
        "unsupported_quant",
        r"invalid magic (?:number|characters):? ?(?:0x)?(?:0a8a0280|04034b50)\b",
        stage="load_weights",
        backend="llama.cpp",
    ),
    ErrorRule("invalid magic", "bad_magic", "other", stage="load_weights", backend="llama.cpp"),
    ErrorRule(
        "not within the file bounds", "truncated_file", "other", stage="load_weights", backend="llama.cpp"
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
    ErrorRule("headertoolarge", "truncated_file", "other", stage="load_weights", backend="transformers"),
    ErrorRule("safetensorerror", "truncated_file", "other", stage="load_weights", backend="transformers"),
    ErrorRule("downloaderror", "download_failed", "other", stage="download", strong=False, backend="tgi"),
    ErrorRule(
        "offloaded to the disk",
        "disk_offload",
        "other",
        stage="load_weights",
        backend="transformers",
    ),
    ErrorRule(
        "some modules are dispatched on the cpu or the disk",
        "bnb_cpu_dispatch",
        "other",
        stage="load_weights",
        backend="transformers",
    ),
    # --- host allocations (malloc, ggml CPU buffers, torch's CPU allocator) ---
    ErrorRule(
        "insufficient memory",
        "host_alloc",
        "other",
        r"ggml_aligned_malloc: insufficient memory",
        backend="llama.cpp",
    ),
    ErrorRule(
        "failed to allocate",
        "host_alloc",
        "other",
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
    ErrorRule("can't allocate memory", "host_alloc", "other", backend="transformers"),
    ErrorRule("cannot allocate memory", "host_alloc", "other"),
    ErrorRule("std::bad_alloc", "host_alloc", "other"),
    ErrorRule("memoryerror", "host_alloc", "other", r"^\s*memoryerror\b"),
    ErrorRule(
        "model request too large for system",
        "host_ram_short",
        "other",
        stage="load_weights",
        backend="ollama",
    ),
    ErrorRule(
        "more system memory",
        "host_ram_short",
        "other",
        r"model requires more system memory .* than is available",
        stage="load_weights",
        backend="ollama",
    ),
    # --- llama.cpp's context buffers: the device allocator's own line (CUDA0 / CPU above) comes first
    # and decides; alone, a KV-cache or compute-buffer failure is the accelerator's out-of-memory
    # (llama_kv_cache_init / llama_kv_cache_unified / graph_reserve / llama_new_context_with_model).
    ErrorRule(
        "failed to allocate buffer for kv cache",
        "kv_alloc_failed",
        "cuda_oom",
        stage="kv_cache",
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
    # --- generic errors: count only when nothing more specific shows up ---
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
    ErrorRule("enginecore failed to start", "engine_failed", "other", strong=False, backend="vllm"),
    ErrorRule("engine core initialization failed", "engine_failed", "other", strong=False, backend="vllm"),
    ErrorRule("hit an exception", "worker_failed", "other", strong=False, backend="sglang"),
    ErrorRule(
        "llama runner process has terminated", "runner_failed", "other", strong=False, backend="ollama"
    ),
    ErrorRule("webserver crashed", "engine_failed", "other", strong=False, backend="tgi"),
    ErrorRule(
        "shard",
        "engine_failed",
        "other",
        r"shard \d+ failed to start|error when initializing model",
        strong=False,
        backend="tgi",
    ),
    ErrorRule("panicked at", "panic", "other", strong=False),
    ErrorRule("panic:", "panic", "other", r"^\s*panic:", strong=False),
    ErrorRule("ggml_assert", "assert", "other", strong=False, backend="llama.cpp"),
    ErrorRule("ggml_abort", "assert", "other", strong=False, backend="llama.cpp"),
    ErrorRule("watchdog caught collective operation timeout", "nccl_timeout", "other"),
    ErrorRule("segmentation fault", "crash", "other", strong=False),
    ErrorRule("core-dump", "crash", "other", r"result: core-dump", strong=False),  # systemd's unit status
    ErrorRule("core dumped", "crash", "other", strong=False),
    ErrorRule("terminate called", "crash", "other", strong=False),
    ErrorRule("error: ", "error", "other", r"^\s*error: |\berror: (?!0\b)", strong=False),
    ErrorRule(
        "error",
        "error",
        "other",
        r"(?:^|\s)(?:error|err|critical|fatal)\s+(?:\d|\[)|\blevel=error\b|\"level\":\"err",
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
RECOVERY_RULES: tuple[NoticeRule, ...] = (
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
)

# Quiet failures: the run goes on, slower or bigger than the user thinks.
NOTICE_RULES: tuple[NoticeRule, ...] = (
    NoticeRule(
        "performance might be sub-optimal",
        "kernel_fallback",
        "a MoE kernel runs without a tuned config for this GPU (slower)",
        r"moe kernel config.*performance might be sub-optimal",
        backend="sglang",
    ),
    NoticeRule(
        "flash attention was auto, set to disabled",
        "kernel_fallback",
        "flash attention is off (auto turned it off): slower, and a bigger compute buffer at long context",
        backend="llama.cpp",
    ),
    # a prompt cut to fit the context: the request "works", the model never sees all of it
    NoticeRule(
        "truncating input prompt",
        "context_truncated",
        "prompts were cut to fit the context: raise num_ctx (OLLAMA_CONTEXT_LENGTH) or the model misses part of each input",
        backend="ollama",
    ),
    # kernels and attention that fell back to a slower or hungrier path
    NoticeRule(
        "falling back to",
        "kernel_fallback",
        "a kernel fell back to a slower path",
        r"(?:kernel|attention|flash|sdpa|triton|marlin|punica|sgmv|cuda graph).*falling back to|falling back to (?:the )?(?:eager|manual|math|naive|loop|slow|default|torch|xformers|sdpa)",
    ),
    NoticeRule(
        "fall back to",
        "kernel_fallback",
        "a kernel fell back to a slower path",
        r"(?:kernel|attention|flash|sdpa).*fall back to",
    ),
    NoticeRule(
        "flash attention 2 is not installed",
        "kernel_fallback",
        "FlashAttention 2 is not installed: attention runs on a slower path",
        backend="transformers",
    ),
    NoticeRule(
        "flashattention2 has been toggled on, but it cannot be used",
        "kernel_fallback",
        "FlashAttention 2 was requested but cannot be used",
        backend="transformers",
    ),
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
    NoticeRule(
        "flash_attn",
        "kernel_fallback",
        "flash attention was turned off",
        r"flash_attn is not compatible|flash attention (?:not|is not) supported|flash_attn requires|auto, set to disabled",
        backend="llama.cpp",
    ),
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
    NoticeRule("capture cuda graph begin", "mark", "graph_capture", backend="sglang"),
    NoticeRule("cuda_graph_runner", "mark", "graph_capture"),  # the graph runner's frames (SGLang, vLLM V0)
    # a traceback through torch's CUDA-graph capture (its frames, when the engine's own line is cut off)
    NoticeRule("cuda/graphs.py", "mark", "graph_capture", r"torch[/\\]cuda[/\\]graphs\.py"),
    NoticeRule(
        "flash_attn",
        "mark",
        "flash_attn_on",
        r"(?:llama_context|llama_new_context_with_model|llama_init_from_model):\s+flash_attn\s*=\s*(?:1|enabled|true)\s*$",
        backend="llama.cpp",
    ),
    # the GPU was not used at all, or only partly
    NoticeRule(
        "no usable gpu found",
        "cpu_fallback",
        "no usable GPU: the GPU-layers setting is ignored and the model runs on the CPU",
        backend="llama.cpp",
    ),
    NoticeRule(
        "compiled without gpu support",
        "cpu_fallback",
        "this build has no GPU support: everything runs on the CPU",
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
    NoticeRule(
        "torch not compiled with cuda",
        "cpu_fallback",
        "this torch has no CUDA: the model runs on the CPU",
        backend="transformers",
    ),
    NoticeRule("cuda is not available", "cpu_fallback", "CUDA is not available: the model runs on the CPU"),
    # quantization that did not happen
    NoticeRule(
        "compiled without gpu support",
        "quant_unconfirmed",
        "bitsandbytes has no GPU support: 4/8-bit quantization does not run",
        r"bitsandbytes.*compiled without gpu support",
        backend="transformers",
    ),
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
_NUM = r"(?P<value>\d+(?:[.,]\d+)*)"
_UNIT = r"\s*(?P<unit>[KMGT]i?B)"
FIGURE_RULES: tuple[FigureRule, ...] = (
    # vramtui's launcher heads each run log with the budget it enforced, so a saved log reads back
    # the same as the live run: under a host budget, a failed allocation is that budget's OOM.
    # The share of the card the engine was told to take, as its flags or its config dump print it.
    FigureRule(
        "memory",
        "memory_share",
        r"(?:--gpu-memory-utilization[= ]|gpu_memory_utilization[=:]\s*|gpu_memory_utilization \("
        r"|--cuda-memory-fraction[= ])(?P<value>0?\.\d+|1(?:\.0+)?)\b",
        count=True,
    ),
    FigureRule(
        "fraction",
        "memory_share",
        r"(?:--mem-fraction-static[= ]|mem_fraction_static=)(?P<value>0?\.\d+|1(?:\.0+)?)\b",
        count=True,
        backend="sglang",
    ),
    FigureRule(
        "vramtui: memory budget",
        "host_budget",
        rf"vramtui: memory budget {_NUM}{_UNIT}, enforced on the host",
    ),
    FigureRule(
        "model buffer size",
        "model_buffer",
        rf"(?P<device>[\w-]+)\s+model buffer size\s*=\s*{_NUM}{_UNIT}",
        per_device=True,
        backend="llama.cpp",
    ),
    FigureRule(
        "buffer size",
        "model_buffer",
        rf"llm_load_tensors:\s+(?P<device>[\w-]+)\s+buffer size\s*=\s*{_NUM}{_UNIT}",
        per_device=True,
        backend="llama.cpp",
    ),
    FigureRule(
        "kv buffer size",
        "kv_buffer",
        rf"(?P<device>[\w-]+)\s+kv buffer size\s*=\s*{_NUM}{_UNIT}",
        per_device=True,
        backend="llama.cpp",
    ),
    FigureRule(
        "compute buffer size",
        "compute_buffer",
        rf"(?P<device>[\w-]+)\s+compute buffer size\s*=\s*{_NUM}{_UNIT}",
        per_device=True,
        backend="llama.cpp",
    ),
    FigureRule(
        "output buffer size",
        "output_buffer",
        rf"(?P<device>[\w-]+)\s+output buffer size\s*=\s*{_NUM}{_UNIT}",
        per_device=True,
        backend="llama.cpp",
    ),
    FigureRule("kv self size", "kv_cache_size", rf"kv self size\s*=\s*{_NUM}{_UNIT}", backend="llama.cpp"),
    FigureRule(
        "llama_kv_cache",
        "kv_cache_size",
        rf"llama_kv_cache\w*: size\s*=\s*{_NUM}{_UNIT}",
        backend="llama.cpp",
    ),
    FigureRule(
        "cells",
        "kv_cache_cells",
        rf"llama_kv_cache\w*: size\s*=.*\(\s*{_NUM} cells",
        count=True,
        backend="llama.cpp",
    ),
    FigureRule(
        "n_ctx",
        "context",
        rf"(?:llama_context|llama_new_context_with_model|llama_init_from_model):\s+n_ctx\s*=\s*{_NUM}\s*$",
        count=True,
        backend="llama.cpp",
    ),
    FigureRule(
        "n_ubatch",
        "ubatch_tokens",
        rf"(?:llama_context|llama_new_context_with_model|llama_init_from_model):\s+n_ubatch\s*=\s*{_NUM}\s*$",
        count=True,
        backend="llama.cpp",
    ),
    FigureRule(
        "n_head",
        "attention_heads",
        rf"(?:print_info|llm_load_print_meta):\s+n_head\s*=\s*{_NUM}\s*$",
        count=True,
        backend="llama.cpp",
    ),
    FigureRule(
        "cudamalloc failed",
        "oom_requested",
        rf"allocating {_NUM}{_UNIT} on device \d+: cudamalloc failed",
        backend="llama.cpp",
    ),
    FigureRule(
        "failed to allocate",
        "oom_requested",
        rf"failed to allocate (?:[\w-]+ )?buffer of size {_NUM}(?P<unit>)",
        unit_default="B",
        backend="llama.cpp",
    ),
    FigureRule(
        "insufficient memory",
        "oom_requested",
        rf"insufficient memory \(attempted to allocate {_NUM}(?:\s*(?P<unit>MB|MiB|GB))?",
        unit_default="MiB",
        backend="llama.cpp",
    ),
    FigureRule(
        "loading model weights took",
        "weights_loaded",
        rf"loading model weights took {_NUM}\s*(?P<unit>GiB|GB)",
        backend="vllm",
    ),
    FigureRule(
        "model loading took",
        "weights_loaded",
        rf"model loading took {_NUM}\s*(?P<unit>GiB|GB)",
        backend="vllm",
    ),
    FigureRule("model weights take", "weights_loaded", rf"model weights take {_NUM}{_UNIT}", backend="vllm"),
    FigureRule(
        "total_gpu_memory", "device_total", rf"total_gpu_memory\s*[(=]?\s*{_NUM}{_UNIT}", backend="vllm"
    ),
    FigureRule(
        "non_torch_memory",
        "non_torch_memory",
        rf"non_torch_memory(?: takes)?\s*=?\s*{_NUM}{_UNIT}",
        backend="vllm",
    ),
    FigureRule(
        "activation peak memory",
        "activation_peak",
        rf"activation peak memory(?: takes)?\s*{_NUM}{_UNIT}",
        backend="vllm",
    ),
    FigureRule(
        "reserved for kv cache is",
        "kv_cache_available",
        rf"reserved for kv cache is {_NUM}{_UNIT}",
        backend="vllm",
    ),
    FigureRule(
        "available_kv_cache_memory",
        "kv_cache_available",
        rf"available_kv_cache_memory\s*{_NUM}{_UNIT}",
        backend="vllm",
    ),
    FigureRule("kv_cache_size=", "kv_cache_available", rf"kv_cache_size={_NUM}{_UNIT}", backend="vllm"),
    FigureRule(
        "available kv cache memory",
        "kv_cache_available",
        rf"available kv cache memory:\s*{_NUM}{_UNIT}",
        backend="vllm",
    ),
    FigureRule(
        "gpu kv cache size",
        "kv_cache_tokens",
        rf"gpu kv cache size:\s*{_NUM} tokens",
        count=True,
        backend="vllm",
    ),
    FigureRule("gpu blocks", "kv_cache_blocks", rf"# gpu blocks:\s*{_NUM}", count=True, backend="vllm"),
    FigureRule("cuda blocks", "kv_cache_blocks", rf"# cuda blocks:\s*{_NUM}", count=True, backend="vllm"),
    FigureRule(
        "num_gpu_blocks is", "kv_cache_blocks", rf"num_gpu_blocks is:\s*{_NUM}", count=True, backend="vllm"
    ),
    FigureRule(
        "maximum concurrency",
        "max_concurrency",
        rf"maximum concurrency for [\d,]+ tokens per request:\s*{_NUM}\s*x",
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
        rf"graph capturing finished in .*took {_NUM}{_UNIT}",
        backend="vllm",
    ),
    FigureRule(
        "estimated maximum model length is",
        "max_model_len_fit",
        rf"estimated maximum model length is {_NUM}",
        count=True,
        backend="vllm",
    ),
    # vramtui's transformers runner: "weights loaded: N parameters, X MiB on DEVICE" (get_memory_footprint)
    FigureRule(
        "weights loaded:",
        "model_parameters",
        r"weights loaded: (?P<value>\d+) parameters,",
        count=True,
        backend="transformers",
    ),
    FigureRule(
        "weights loaded:",
        "weights_loaded",
        rf"weights loaded: \d+ parameters, {_NUM}{_UNIT}",
        backend="transformers",
    ),
    FigureRule(
        "tried to allocate", "oom_requested", rf"tried to allocate {_NUM}{_UNIT}", backend="transformers"
    ),
    FigureRule(
        "total capacity of", "device_total", rf"total capacity of {_NUM}{_UNIT}", backend="transformers"
    ),
    FigureRule(
        "load weight end",
        "weights_loaded",
        rf"load weight end\..*mem usage={_NUM}\s*(?P<unit>GB|GiB)",
        backend="sglang",
    ),
    FigureRule(
        "kv cache is allocated",
        "kv_cache_tokens",
        rf"kv cache is allocated\. #tokens:\s*{_NUM}",
        count=True,
        backend="sglang",
    ),
    FigureRule(
        "k size",
        "kv_cache_k",
        rf"kv cache is allocated\..*k size:\s*{_NUM}\s*(?P<unit>GB|GiB)",
        backend="sglang",
    ),
    FigureRule(
        "v size",
        "kv_cache_v",
        rf"kv cache is allocated\..*v size:\s*{_NUM}\s*(?P<unit>GB|GiB)",
        backend="sglang",
    ),
    FigureRule(
        "max_total_num_tokens",
        "kv_cache_tokens",
        rf"max_total_num_tokens={_NUM}",
        count=True,
        backend="sglang",
    ),
    FigureRule(
        "capture cuda graph end",
        "cuda_graphs",
        rf"capture cuda graph end\..*mem usage={_NUM}\s*(?P<unit>GB|GiB)",
        backend="sglang",
    ),
    FigureRule(
        "max batch total tokens",
        "kv_cache_tokens",
        rf"setting max batch total tokens to {_NUM}",
        count=True,
        backend="tgi",
    ),
)

# GiB-valued units: vLLM's and SGLang's "GB" are GiB (they divide by 2**30).
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
}

# ---------------------------------------------------------------------------------------------
# Which backend wrote the log: (anchor, backend). Scored; see diagnose.detect_backend.
# ---------------------------------------------------------------------------------------------
BACKEND_MARKS: tuple[tuple[str, str], ...] = (
    ("ollama", "ollama"),
    ("source=server.go", "ollama"),
    ("source=sched.go", "ollama"),
    ("[gin]", "ollama"),
    ("pulling manifest", "ollama"),
    ("text_generation_launcher", "tgi"),
    ("text_generation_router", "tgi"),
    ("text_generation_server", "tgi"),
    ("input validation error", "tgi"),
    ("sglang", "sglang"),
    ("mem-fraction-static", "sglang"),
    ("max_total_num_tokens", "sglang"),
    ("load weight end", "sglang"),
    ("tp0]", "sglang"),
    ("vllm", "vllm"),
    ("enginecore", "vllm"),
    ("gpu_model_runner", "vllm"),
    ("model_runner.py", "vllm"),
    ("launcher.py:", "vllm"),  # vllm/entrypoints/launcher.py lists the routes as the server comes up
    ("gguf model with architecture", "vllm"),  # vLLM's GGUF loader
    ("cannot use flashattention-2 backend", "vllm"),  # vLLM's attention choice on older GPUs
    ("using xformers backend", "vllm"),
    ("is longer than the model's context length", "sglang"),
    ("offload_folder", "transformers"),  # accelerate's device_map asking where to put weights on disk
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
    ("srv ", "llama.cpp"),
    ("transformers", "transformers"),
    ("huggingface_hub", "transformers"),
    ("checkpoint shards", "transformers"),
    ("from_pretrained", "transformers"),
    ("bitsandbytes", "transformers"),
    ("accelerate", "transformers"),
    ("pad_token_id", "transformers"),
    ("torch.cuda.outofmemoryerror", "transformers"),
)
# When marks of several backends show up, the one that embeds the others wins.
BACKEND_PRECEDENCE: tuple[str, ...] = (
    "ollama",
    "tgi",
    "sglang",
    "vllm",
    "llama-cpp-python",
    "llama.cpp",
    "transformers",
)

# Flags of the two backends vramtui.core.backends does not model (their own CLI spelling).
EXTRA_KNOBS: dict[str, dict[str, str]] = {
    "tgi": {
        "context": "--max-total-tokens",
        "input": "--max-input-tokens",
        "parallel": "--max-concurrent-requests",
        "batch": "--max-batch-prefill-tokens",
        "quant": "--quantize",
        "mem_share": "--cuda-memory-fraction",
        "kv_dtype": "--kv-cache-dtype",
        "dtype": "--dtype",
    },
    "sglang": {
        "context": "--context-length",
        "parallel": "--max-running-requests",
        "batch": "--chunked-prefill-size",
        "quant": "--quantization",
        "mem_share": "--mem-fraction-static",
        "kv_dtype": "--kv-cache-dtype",
        "cpu_offload": "--cpu-offload-gb",
        "dtype": "--dtype",
    },
}


# Lines that echo what a user sent, or what the model answered, when the server logs requests. The
# echoed text is theirs, not the server's: no rule reads it, so a prompt that asks about "CUDA out of
# memory" is not a failure. (The line's anchor, the marker where the echo starts after it: "" for right
# after the anchor), lower case.
ECHO_CUTS: tuple[tuple[str, str], ...] = (
    ("received request", " prompt: "),  # vLLM --enable-log-requests: prompt: %r, params: ...
    ("generated response", " output: "),  # vLLM --enable-log-outputs
    ("log_server_r: request:", "{"),  # llama-server --verbose: the request's JSON body
    ("log_server_r: response:", '"choices"'),  # the answer; an error response ({"error": ...}) is read
    ("converted request:", "{"),
    ("| prompt token", " '"),  # llama-server, each prompt token: "prompt token 3: 151644 '<|im_start|>'"
    ("receive: obj=", ""),  # SGLang --log-requests
    ("finish: obj=", ""),
    ('msg="chat request"', " prompt="),  # Ollama with OLLAMA_DEBUG=1
    ('msg="generate request"', " prompt="),
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
