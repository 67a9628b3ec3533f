"""How transformers (with accelerate, bitsandbytes and huggingface_hub) words its log: stages, errors,
notices, figures and the marks that name it.

The diagnosis (vramtui.core.logs) reads every table of every engine on every log; vramtui.core.logs.rules
splices these pieces into its tables in their order of precedence (the first error rule that matches a line
decides its cause).
"""

from __future__ import annotations

from vramtui.core.logs.ruletypes import (
    NUM,
    UNIT,
    WHERE_BUDGET,
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

_PREQUANTIZED = (
    "load a pre-quantized checkpoint (AWQ/GPTQ): quantizing at load time still reads the "
    "16-bit weights first."
)
PROFILE = LogProfile(
    "transformers",
    precedence=10,
    process_names=("python", "pt_main_thread"),
    is_torch=True,
    advice={
        "weights_oom": (
            # Already quantized at load: the next steps are placement and a smaller file.
            Say(
                "Quantize the weights while loading: from_pretrained(..., quantization_config="
                "BitsAndBytesConfig(load_in_4bit=True)) holds about a quarter of the 16-bit weights "
                "(vramtui's transformers runner: --quantization bnb-4bit).",
                when="!quantized",
            ),
            'Let accelerate place the model: from_pretrained(..., device_map="auto", '
            'max_memory={0: "20GiB", "cpu": "64GiB"}) caps each device and puts the rest in host RAM '
            "(vramtui's transformers runner: --device-map auto --max-memory 0=20GiB,cpu=64GiB).",
            f"Or {_PREQUANTIZED}",
        ),
        "context_oom": (
            "Shorter sequences ({context}) and fewer at once ({parallel}): the dynamic KV cache grows with both.",
            "PyTorch fragmentation: set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True.",
        ),
        "host_killed": (
            "Load shard by shard straight to the GPU: device_map='auto' (low_cpu_mem_usage) and safetensors files instead of .bin.",
        ),
        "unknown_arch": (
            "Upgrade transformers (pip install -U transformers); for a model with its own code, pass trust_remote_code=True.",
        ),
        # QA 11: the runner's flags named bare (--batch-size) and the context not at all
        "request_oom": (
            "A request needed more memory than was left: shorter inputs and fewer new tokens, or a shorter "
            "{context} (context in the profile), which the runner then refuses longer prompts at.",
            "Fewer sequences at once: {parallel} (parallel in the profile).",
            "PyTorch fragmentation: set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True.",
        ),
        # QA 11: the weights did not fit host RAM (or its budget): the llama.cpp words ("a smaller file")
        # named nothing a transformers user sets
        "host_weights": (
            Say(
                "Host RAM could not hold the weights: load them at 16 bits if they load wider (dtype = "
                '"bfloat16"), quantize at load where bitsandbytes runs (quant = "bnb-4bit", a CUDA GPU), or '
                "use a pre-quantized checkpoint or a smaller model.",
                when="!weights_16bit",
            ),
            Say(
                "Host RAM could not hold the weights, loaded at 16 bits already (a lower dtype is no way "
                'out): quantize at load where bitsandbytes runs (quant = "bnb-4bit", a CUDA GPU), or use a '
                "pre-quantized checkpoint or a smaller model.",
                when="weights_16bit",
            ),
            # under vramtui's address-space budget the offloaded weights are mapped all the same (QA 13: the
            # same failure with device_map and max_memory already set)
            Say(
                'Or let accelerate keep part of them on disk: device_map = "auto" with max_memory = "cpu=NGiB" '
                "(much slower).",
                when="!own_budget",
            ),
        ),
        "loader_threads_budget": (
            Say(
                "The memory budget ({budget_mib} MiB) leaves no room for another thread (transformers' "
                "weight loader starts a pool, vramtui's runner one per request): each reserves an 8 MiB "
                "stack in the budget's address space.",
                otherwise="The memory budget leaves no room for another thread (transformers' weight loader "
                "starts a pool, vramtui's runner one per request): each reserves an 8 MiB stack in the "
                "budget's address space.",
            ),
            "Raise the memory budget " + WHERE_BUDGET + "; loading the weights one at a time "
            '(HF_DEACTIVATE_ASYNC_LOAD = "1" under [env]) starts fewer threads, but the server still needs '
            "room for its own.",
        ),
        "loader_threads": (
            "The engine could not start a thread: raise the limit on processes (`ulimit -u`, a container's "
            "pids limit) or free memory; loading the weights one at a time (HF_DEACTIVATE_ASYNC_LOAD=1) "
            "starts fewer.",
        ),
        "flash_attn_missing": (
            "FlashAttention 2 needs the flash-attn package and a CUDA GPU: set flash_attn = false in the "
            "profile (transformers' own sdpa attention; vramtui's runner: --attn-implementation sdpa), or "
            "install it in the engine's Python on a CUDA machine (pip install flash-attn).",
        ),
        "eager_attention": (
            "Eager attention holds each head's whole score matrix (the context squared) while it runs: use "
            'sdpa, which does not (attn_implementation = "sdpa" under [params]; vramtui\'s runner: '
            "--attn-implementation sdpa).",
        ),
        "bnb_missing": (
            "Install bitsandbytes with GPU support in the engine's Python (pip install -U bitsandbytes; "
            "the line names the version it needs), or load without on-the-fly quantization (drop `quant` "
            "from the profile; vramtui's runner: no --quantization).",
        ),
    },
)


STAGE_RULES_1: tuple[StageRule, ...] = (
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
    # vramtui's own runner says what it loads (its tokenizer, then its weights)
    StageRule("vramtui-runner: loading", "load_weights", backend="transformers"),
    # ... and when it serves (QA 11: the app said STARTING, load weights, for a runner that was up)
    StageRule("vramtui-runner: ready: serving", "ready", backend="transformers"),
    StageRule("modeling_utils", "load_weights", backend="transformers"),
    StageRule("configuration_auto", "load_weights", backend="transformers"),
    StageRule("load_state_dict", "load_weights", backend="transformers"),
    StageRule("dispatch_model", "load_weights", backend="transformers"),
    # torch's Module.to / .cuda() moving a loaded model's parameters to the device (its _apply frames)
    StageRule(
        "module.py",
        "load_weights",
        r'torch[/\\]nn[/\\]modules[/\\]module\.py", line \d+, in (?:to|cuda|_apply)\b',
        backend="transformers",
    ),
    StageRule("setting `pad_token_id`", "inference", backend="transformers"),
    StageRule("generate(", "inference", backend="transformers"),
    # the frame "in generate" (GenerationMixin.generate), not inductor's "in generate_and_run_autotune_block"
    StageRule("in generate", "inference", r"\bin generate\b", backend="transformers"),
    StageRule("past_key_value", "inference", backend="transformers"),
    StageRule("output generated in", "inference", backend="transformers"),
)

STAGE_RULES_2: tuple[StageRule, ...] = (
    StageRule("from_pretrained", "load_weights", backend="transformers"),  # a traceback's code line
)

FORMAT_ERRORS: tuple[ErrorRule, ...] = (
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
    # QA 11: flash_attn = true where flash-attn is not installed (or no CUDA GPU): transformers 5 first asks
    # the Hub for a kernel (a network error offline), then raises this ImportError, which stops the load
    ErrorRule(
        "flashattention2 has been toggled on, but it cannot be used",
        "flash_attn_missing",
        "other",
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
)

ARCH_ERRORS: tuple[ErrorRule, ...] = (
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
)

SHAPE_ERRORS: tuple[ErrorRule, ...] = (
    ErrorRule(
        "size mismatch for", "shape_mismatch", "shape_mismatch", stage="load_weights", backend="transformers"
    ),
    # torch's view/reshape of a tensor whose size the layout does not match (a KV cache or a checkpoint's
    # packed weight laid out for another shape): "shape '[512, 2, 32, 4, 512]' is invalid for input of size"
    ErrorRule(
        "is invalid for input of size",
        "shape_mismatch",
        "shape_mismatch",
        r"shape '\[[\d, ]+\]' is invalid for input of size \d+",
        backend="transformers",
    ),
)

SHAPE_ERRORS_2: tuple[ErrorRule, ...] = (
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
)

DTYPE_ERRORS: tuple[ErrorRule, ...] = (
    ErrorRule("not implemented for 'half'", "half_on_cpu", "dtype_unsupported", backend="transformers"),
    ErrorRule(
        "not implemented for 'bfloat16'", "bf16_unsupported", "dtype_unsupported", backend="transformers"
    ),
    # torch's dispatcher for any other type: '"fill_cuda" not implemented for 'Float4_e2m1fn_x2'' (an fp4
    # KV cache this torch build cannot zero)
    ErrorRule(
        "not implemented for '",
        "dtype_op_missing",
        "dtype_unsupported",
        r"\"\w+\" not implemented for '\w+'",
        backend="transformers",
    ),
)

HUB_ERRORS: tuple[ErrorRule, ...] = (
    ErrorRule("gatedrepoerror", "gated_repo", "other", stage="download", backend="transformers"),
    ErrorRule("cannot access gated repo", "gated_repo", "other", stage="download", backend="transformers"),
    ErrorRule(
        "trying to access a gated repo", "gated_repo", "other", stage="download", backend="transformers"
    ),
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
)

MISSING_ERRORS: tuple[ErrorRule, ...] = (
    # transformers' own words for a config.json that does not parse, after the JSONDecodeError's traceback
    # (QA 32 D3: read as "a Python exception", advised to read the first error line)
    ErrorRule(
        "is not a valid json file", "config_invalid", "other", stage="load_weights", backend="transformers"
    ),
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
    # ... except an optional file the engine goes on without ("Failed to load generation config for M:
    # M does not appear to have a file named generation_config.json": SGLang and vLLM use defaults)
    ErrorRule(
        "does not appear to have a file named",
        "not_found_local",
        "file_missing",
        r"^(?!.*failed to load generation config).*does not appear to have a file named",
        stage="download",
        backend="transformers",
    ),
)

TOKENIZER_ERRORS: tuple[ErrorRule, ...] = (
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
)

NETWORK_ERRORS: tuple[ErrorRule, ...] = (
    ErrorRule("localentrynotfounderror", "offline", "network", stage="download", backend="transformers"),
    ErrorRule(
        "cannot find the requested files in the local cache",
        "offline",
        "network",
        stage="download",
        backend="transformers",
    ),
    ErrorRule("couldn't connect to", "network", "network", stage="download", backend="transformers"),
)

BROKEN_FILE_ERRORS: tuple[ErrorRule, ...] = (
    ErrorRule("headertoolarge", "truncated_file", "other", stage="load_weights", backend="transformers"),
    ErrorRule("safetensorerror", "truncated_file", "other", stage="load_weights", backend="transformers"),
)

BROKEN_FILE_ERRORS_2: tuple[ErrorRule, ...] = (
    # accelerate refusing a device_map that puts weights on disk with no offload_folder; its "Some
    # parameters are on the meta device because they were offloaded to the disk" is a warning (a notice)
    ErrorRule(
        "offloaded to the disk",
        "disk_offload",
        "other",
        r"had weights offloaded to the disk",
        stage="load_weights",
        backend="transformers",
    ),
    ErrorRule(
        "some modules are dispatched on the cpu or the disk",
        "bnb_cpu_dispatch",
        "cuda_oom",  # "Make sure you have enough GPU RAM to fit the quantized model"
        stage="load_weights",
        backend="transformers",
    ),
)

HOST_ALLOC_ERRORS: tuple[ErrorRule, ...] = (
    ErrorRule("can't allocate memory", "host_alloc", "other", backend="transformers"),
    # transformers 5 loads the weights on a pool of threads (core_model_loading.spawn_materialize): under
    # an address-space budget each thread's stack needs room (QA 11: "RuntimeError: can't start new thread")
    ErrorRule("can't start new thread", "loader_threads", "other", backend="transformers"),
)

NOTICES: tuple[NoticeRule, ...] = (
    NoticeRule(
        "flash attention 2 is not installed",
        "kernel_fallback",
        "FlashAttention 2 is not installed: attention runs on a slower path",
        backend="transformers",
    ),
)

NOTICES_2: tuple[NoticeRule, ...] = (
    # Weights the checkpoint lacks (or holds in another shape) are random: the model runs and answers
    # garbage. transformers up to 4.x: "Some weights of X were not initialized from the model checkpoint
    # at Y and are newly initialized: [...]"; 5.x's loading report: "MISSING ... those params were newly
    # initialized because missing from the checkpoint", "Reinit due to size mismatch".
    NoticeRule(
        "initialized",
        "quality",
        "some of the model's weights are not in the checkpoint and were initialized at random: its output is "
        "not the model's (a checkpoint for another class or version, or a file missing)",
        r"not initialized from the model checkpoint|params were newly initialized because missing"
        r"|reinit due to size mismatch",
        backend="transformers",
    ),
    # generate() past max_position_embeddings (transformers' stopping criteria warn once)
    NoticeRule(
        "friendly reminder",
        "context_exceeded",
        "generation ran past the model's trained length (max_position_embeddings): its output may degrade "
        "or fail from there",
        r"friendly reminder - the current text generation call will exceed the model's predefined maximum length",
        backend="transformers",
    ),
    # the tokenizer's warning: an input longer than the model's positions goes in whole, and indexes past them
    NoticeRule(
        "token indices sequence length is longer",
        "context_exceeded",
        "an input is longer than the model's maximum sequence length: it goes in whole and the model indexes "
        "past its positions (errors or garbage); truncate it, or pick a model trained longer",
        backend="transformers",
    ),
    # generate() with the inputs on another device than the model: moved each call, or wrong results
    NoticeRule(
        "being on a device type different than your model's device",
        "setting_ignored",
        "the inputs are on another device than the model (e.g. the CPU while the model is on CUDA): move them "
        "with .to(model.device), or generate() runs slowly or fails",
        backend="transformers",
    ),
    NoticeRule(
        "torch not compiled with cuda",
        "cpu_fallback",
        "this torch has no CUDA: the model runs on the CPU",
        backend="transformers",
    ),
    # eager attention's own function in a traceback: the score matrices it builds were what ran out (QA 32 D15)
    NoticeRule("eager_attention_forward", "mark", "eager_attention", backend="transformers"),
    # vramtui's runner says the dtype it loads at: at 16 bits already, "load at 16 bits" is no advice
    # (QA 21 F3: dtype = "bfloat16" advised where it was set)
    NoticeRule(
        "vramtui-runner: loading weights",
        "mark",
        "weights_16bit",
        r"vramtui-runner: loading weights from .*\(dtype=torch\.b?float16\b",
        backend="transformers",
    ),
)

NOTICES_3: tuple[NoticeRule, ...] = (
    # quantization that did not happen
    NoticeRule(
        "compiled without gpu support",
        "quant_unconfirmed",
        "bitsandbytes has no GPU support: 4/8-bit quantization does not run",
        r"bitsandbytes.*compiled without gpu support",
        backend="transformers",
    ),
    # generation/utils.py: the prompt is already past max_length, so generation stops at once or is cut
    NoticeRule(
        "but `max_length` is set to",
        "context_exceeded",
        "the prompt is longer than generate()'s max_length: nothing (or little) is generated; pass "
        "max_new_tokens instead of max_length",
        r"input length of input_ids is \d+, but `max_length` is set to \d+",
        backend="transformers",
    ),
)

FIGURES: tuple[FigureRule, ...] = (
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
        rf"weights loaded: \d+ parameters, {NUM}{UNIT}",
        backend="transformers",
    ),
    FigureRule(
        "tried to allocate", "oom_requested", rf"tried to allocate {NUM}{UNIT}", backend="transformers"
    ),
    FigureRule(
        "total capacity of", "device_total", rf"total capacity of {NUM}{UNIT}", backend="transformers"
    ),
    FigureRule(
        "this process has",
        "oom_process_used",
        rf"this process has {NUM}{UNIT} memory in use",
        backend="transformers",
    ),
)

MARKS: tuple[tuple[str, str], ...] = (
    ("offload_folder", "transformers"),  # accelerate's device_map asking where to put weights on disk
)

MARKS_2: tuple[tuple[str, str], ...] = (
    ("transformers", "transformers"),
    ("huggingface_hub", "transformers"),
    ("checkpoint shards", "transformers"),
    ("from_pretrained", "transformers"),
    ("bitsandbytes", "transformers"),
    ("accelerate", "transformers"),
    ("pad_token_id", "transformers"),
    ("torch.cuda.outofmemoryerror", "transformers"),
    ("error(s) in loading state_dict for", "transformers"),  # a model class loading a checkpoint
    ("some parameters are on the meta device", "transformers"),  # accelerate's offload under from_pretrained
)


# How far a run got (core/logs/ruletypes.MILESTONES): each line proves a step is behind it.
PROGRESS: tuple[ProgressRule, ...] = (
    ProgressRule("checkpoint shards", "weights", r"loading checkpoint shards: 100%", backend="transformers"),
    ProgressRule("weights loaded", "weights", r"vramtui-runner: weights loaded", backend="transformers"),
    ProgressRule("ready: serving", "listening", backend="transformers"),
    ProgressRule("running on local url", "listening", backend="transformers"),
    ProgressRule("post /v1/", "served", r"\"post /v1/[^\"]*\" 200\b", backend="transformers"),
)


# Bare exceptions told by where they were raised.
FRAMES: tuple[FrameRule, ...] = (
    # a stop (SIGTERM's KeyboardInterrupt("terminated"), ctrl-c) that came while a read from the network
    # was still waiting: the download hung (huggingface_hub through httpx, requests through urllib3)
    *(
        FrameRule(
            anchor,
            "KeyboardInterrupt",
            ErrorRule("", "download_hung", "network", stage="download", backend="transformers"),
            backend="transformers",
        )
        for anchor in ("/httpcore/", "/urllib3/", "/requests/adapters.py")
    ),
    # AutoConfig looks the config's model_type up in CONFIG_MAPPING: a KeyError there is a model type
    # this transformers does not know (too old for the model, or a model that ships its own code)
    FrameRule(
        "configuration_auto.py",
        "KeyError",
        ErrorRule("", "unknown_model_type", "unknown_arch", stage="load_weights", backend="transformers"),
        backend="transformers",
    ),
)

LOG = EngineLog(
    "transformers",
    (PROFILE,),
    stages=(("first", STAGE_RULES_1), ("second", STAGE_RULES_2)),
    errors=(
        ("format.after", FORMAT_ERRORS),
        ("arch", ARCH_ERRORS),
        ("shape", SHAPE_ERRORS + SHAPE_ERRORS_2),
        ("dtype", DTYPE_ERRORS),
        ("hub", HUB_ERRORS),
        ("missing", MISSING_ERRORS),
        ("tokenizer", TOKENIZER_ERRORS),
        ("network", NETWORK_ERRORS),
        ("broken_file", BROKEN_FILE_ERRORS + BROKEN_FILE_ERRORS_2),
        ("host_alloc", HOST_ALLOC_ERRORS),
    ),
    notices=(("notices", NOTICES), ("notices.after", NOTICES_2 + NOTICES_3)),
    figures=(("figures", FIGURES),),
    frames=FRAMES,
    marks=MARKS + MARKS_2,
    progress=PROGRESS,
)
