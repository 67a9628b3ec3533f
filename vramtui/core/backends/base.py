"""What every engine family fills in: the shared parameters, how a backend launches, its ladder rungs.

The shared vocabulary (what a profile, the estimator, the diagnosis and the wizard speak):

    context      tokens of context per sequence (llama.cpp: the whole cache, split across slots)
    parallel     concurrent sequences (slots / max-num-seqs / OLLAMA_NUM_PARALLEL)
    batch        logical batch size
    ubatch       micro-batch (llama.cpp's n_ubatch; vLLM's max-num-batched-tokens is the nearest)
    kv_dtype     KV cache element type (f16, bf16, fp8, q8_0, q4_0)
    gpu_layers   layers on the GPU (llama.cpp family); the rest run from host RAM
    mem_share    share of the card the engine may take (vLLM's gpu-memory-utilization)
    quant        quantization the engine applies at load (vLLM --quantization, transformers bnb-4bit...)
    flash_attn   flash attention on/off
    cpu_offload  GiB of weights kept in host RAM (vLLM --cpu-offload-gb; transformers max_memory)
    kv_cache_memory  bytes of KV cache per device, set outright (vLLM --kv-cache-memory-bytes: the share
                 is then ignored for the KV cache; on vLLM's CPU build the usual way to size it)
    tensor_split, split_mode, main_gpu   several GPUs, llama.cpp (-ts 3,1; -sm layer|row|none; -mg N)
    tensor_parallel_size, pipeline_parallel_size   several GPUs, vLLM

A parameter a backend does not have maps to None here, and the launcher says so instead of dropping it.
This module imports nothing heavier than the error type: the log rules import the family packages.
"""

from __future__ import annotations

import functools
import importlib.util
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from vramtui.core.errors import VramtuiError
from vramtui.core.units import MIB

PARAMS: tuple[str, ...] = (
    "context",
    "parallel",
    "batch",
    "ubatch",
    "kv_dtype",
    "gpu_layers",
    "mem_share",
    "quant",
    "flash_attn",
    "cpu_offload",
    "kv_cache_memory",
    # Expert offload (llama.cpp): every expert tensor to the host, the experts of the first N layers,
    # or any tensor by a name pattern (`-ot PATTERN=DEVICE`, one or a list).
    "cpu_moe",
    "n_cpu_moe",
    "override_tensor",
    # What rides along (core/estimate/extras.py): llama.cpp's vision projector, draft model (its GPU
    # layers, device and context), host prompt cache (MiB; -1 no limit, 0 off) and LoRA files (one or a
    # list); vLLM's LoRA slots; the model's own MTP layers used to speculate.
    "mmproj",
    "model_draft",
    "gpu_layers_draft",
    "device_draft",
    "ctx_size_draft",
    "cache_ram",
    "lora",
    "max_loras",
    "max_lora_rank",
    "mtp",
    # Several GPUs: llama.cpp's split (proportions per device, layer|row|none, the main device) and vLLM's
    # tensor and pipeline parallel sizes.
    "tensor_split",
    "split_mode",
    "main_gpu",
    "tensor_parallel_size",
    "pipeline_parallel_size",
)


@dataclass(frozen=True)
class Translation:
    """What one shared parameter becomes for one backend."""

    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    # Options a backend takes per request, not per launch (Ollama's num_gpu, num_batch).
    request_options: dict[str, object] = field(default_factory=dict)
    # Set when the backend cannot take this parameter or this value: said, never dropped.
    problem: str | None = None


Translator = Callable[["Backend", str, object], Translation]


@dataclass(frozen=True)
class FailedRun:
    """What the wizard knows of a failed run, as an engine's named fix reads it."""

    failure: str | None
    cause: str | None
    stage: str | None
    figures: Mapping[str, float]  # the diagnosis' engine_figures
    params: Mapping[str, object]  # the profile's parameters as launched
    peak_bytes: int | None = None  # the tree's peak memory
    weights_rss_bytes: int | None = None  # its resident memory once the weights had loaded


NamedFix = Callable[[FailedRun], "tuple[str, object, str] | None"]


@dataclass(frozen=True)
class Launch:
    """How a backend's server is started and how it says it is ready."""

    # The program and its fixed leading arguments; "{python}" is the interpreter vramtui runs on.
    program: tuple[str, ...]
    # The flag that names the model; None: the model is the first positional argument.
    model_flag: str | None
    host_flag: str | None
    port_flag: str | None
    default_port: int
    # GET paths that answer 200 once the model is loaded (tried in order).
    health_paths: tuple[str, ...]
    # Lowercase substrings of the log line the server prints when it listens.
    ready_patterns: tuple[str, ...]
    # Shared parameter (and value) -> arguments/environment for this backend.
    translate: Translator
    # Backend-specific profile parameters that pass straight through as flags.
    extra_params: dict[str, str] = field(default_factory=dict)
    # What an extra parameter's value must be, checked when a profile is read: its problem in one line,
    # or None (QA 21 F2: max_memory = "cpu=10" launched, to fail at load with "other").
    value_checks: dict[str, Callable[[object], str | None]] = field(default_factory=dict)
    # What a value needs of this machine's engine (its Python's build of a package), checked before a launch
    # only, not when a profile is read (a profile for another machine stays readable): its problem, or None.
    machine_checks: dict[str, Callable[[object], str | None]] = field(default_factory=dict)
    # Ollama takes host:port from its environment, not a flag.
    host_port_env: str | None = None
    # The model is named at request time, not at launch (Ollama).
    model_at_request: bool = False
    # Pass-through on/off parameters and the arguments each state becomes ((), when the engine's own
    # default is that state): llama-server has no `--mmap false`, only `--load-mode none`.
    switches: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = field(default_factory=dict)
    # Environment that makes the server print what the diagnosis reads (buffer sizes, context, fit's
    # lines) when vramtui launches it; an environment variable, so a build that lacks it ignores it.
    log_env: dict[str, str] = field(default_factory=dict)
    # How a flag's value reads back into the shared vocabulary where the engine names values its own way
    # (vLLM's --attention-backend FLASH_ATTN is flash_attn on): param -> {engine's word: value}.
    value_names: dict[str, dict[str, object]] = field(default_factory=dict)
    # The flag that sets the engine's own fit margin per device, in MiB (llama-server's `--fit-target`):
    # under a GPU budget vramtui passes the card's memory above the budget through it, so the engine's
    # fit sizes for the budget and not for the whole card. None: the engine fits nothing itself.
    fit_target_flag: str | None = None
    # The memory per device the engine's own fit keeps free by default (llama-server: 1024 MiB): what
    # "stays on the GPU" is planned against for this engine, not vramtui's 80% line.
    fit_margin_mib: int | None = None
    # How to get its server where it is missing (said with "not found", naming this engine, not another).
    install: str = ""
    # Other spellings the engine takes for a flag it is given (llama-server's `-c` for `--ctx-size`,
    # `-ngl` and `--gpu-layers` for `--n-gpu-layers`): a command line is read back through them, and a
    # rebuilt command replaces the server's own flag whichever way it was spelled.
    spellings: dict[str, str] = field(default_factory=dict)
    # Flags a parameter's translation sets beside its own flag, with the same value (llama-server's
    # kv_dtype is `--cache-type-k` and `--cache-type-v`): read back as that parameter too.
    also_flags: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def canonical(self, flag: str) -> str:
        """The flag as this Backend writes it, whichever spelling the command line used."""
        return self.spellings.get(flag, flag)

    def switch_args(self, param: str, value: object) -> tuple[str, ...]:
        """The arguments for an on/off pass-through parameter (`switches`)."""
        when_on, when_off = self.switches[param]
        return when_on if switch(value, param) is True else when_off

    def argv_prefix(self) -> list[str]:
        return [sys.executable if part == "{python}" else part for part in self.program]

    @property
    def binary(self) -> str | None:
        """The program it runs when the profile names none, looked up on PATH (None: vramtui's own Python)."""
        return None if self.program[0] == "{python}" else self.program[0]

    @property
    def runner_module(self) -> str | None:
        """The module a runner on vramtui's own Python runs (`python -m llama_cpp.server`); None for a
        program of its own."""
        if self.program[0] != "{python}" or "-m" not in self.program[:-1]:
            return None
        return self.program[self.program.index("-m") + 1]


@dataclass(frozen=True)
class Rung:
    """One step of a downgrade ladder: one parameter and the direction it moves."""

    param: str  # a shared parameter, "model" (another file), or a request-side name (input_length ...)
    move: str  # "down" | "on" | "off" | "up" | "file" | "advice"
    label: str  # what the user reads
    cost: str = ""  # what it costs, said plainly
    needs: str = ""  # a Python module the engine must import for this change (bitsandbytes)

    def knob(self, backend: Backend) -> str | None:
        """The flag or environment variable a user changes for this rung on `backend` (None: none)."""
        if self.param == "model":
            return backend.launch.model_flag if backend.launch else None
        return backend.knob(self.param)

    def knob_words(self, backend: Backend) -> str | None:
        """As `knob`, with every flag the change takes (Backend.knob_words)."""
        return self.knob(backend) if self.param == "model" else backend.knob_words(self.param)

    def applies_to(self, backend: Backend) -> bool:
        if self.needs and not backend.importable(self.needs):
            return False  # QA 5: a relaunch (or advice) spent on a module that is not installed
        if self.move == "advice" or self.param == "model":
            return True
        if self.param in backend.fixed:
            return False  # the engine cannot change it (llama-cpp-python: one sequence)
        return self.knob(backend) is not None


Ladder = Mapping[str, tuple[Rung, ...]]  # failing stage -> rungs, in the order users are taught


@dataclass(frozen=True)
class SettingsEcho:
    """The settings an engine echoes at start-up, in its own words: how the wizard checks that a change
    took effect (a file type, a KV cache type) beside the sizes the log profile reads."""

    # The log's text -> {"file_type", "kv_type", "kv_type_k", "mmap_failed"}: the ones it printed.
    read: Callable[[str], dict[str, str]]
    # A model file's quantization (from its name) -> the file type as the engine prints it (None: unknown).
    file_type_word: Callable[[str | None], str | None]


# The short words a server list shows for the shared settings (llama-server's terms)
SHARED_SETTING_WORDS: tuple[tuple[str, str], ...] = (
    ("context", "ctx"),
    ("parallel", "slots"),
    ("kv_dtype", "KV"),
    ("gpu_layers", "layers"),
)


@dataclass(frozen=True)
class Backend:
    name: str
    # How the estimator accounts memory for it: "llama.cpp", "vllm" or "transformers".
    accounting: str
    # Shared parameter -> the backend's own command-line flag (None: the backend has no such knob).
    flags: dict[str, str | None]
    # The engine family package it lives in: "llama_cpp", "vllm" or "transformers".
    family: str = ""
    # Shared parameter -> environment variable, for knobs a backend only takes from its environment.
    env: dict[str, str] = field(default_factory=dict)
    # Environment variables that size a shared parameter in their own unit, read for the estimate only
    # (vLLM's CPU build: VLLM_CPU_KVCACHE_SPACE=4 is a 4 GiB KV cache; 0 leaves it to the share)
    env_sizes: dict[str, tuple[str, str]] = field(default_factory=dict)
    # Values the engine uses when the user says nothing (what the wizard and estimator assume).
    defaults: dict[str, object] = field(default_factory=dict)
    # KV cache types the backend accepts, in the user's spelling.
    kv_dtypes: tuple[str, ...] = ("f16",)
    aliases: tuple[str, ...] = ()
    # How its server is launched; None: vramtui reads its logs but cannot start it.
    launch: Launch | None = None
    # Values the engine always has: asking for exactly that value is no unsupported parameter.
    fixed: dict[str, object] = field(default_factory=dict)
    # The downgrade ladder per failing stage (its family's ladder.py).
    ladder: Ladder = field(default_factory=dict)
    # KV cache types from largest to smallest element, as the wizard walks them down.
    kv_dtype_order: tuple[str, ...] = ()
    # On-the-fly quantization from largest to smallest (None: 16-bit); empty: the file is the quantization.
    quant_order: tuple[str | None, ...] = ()
    # The engine rounds each KV stream's share of the context up to this many cells (and prints that n_ctx).
    context_pad_cells: int = 0
    # An argument the engine is launched with -> the Python package it needs then (module, pip name):
    # transformers' runner with flash_attention_2 needs flash-attn (QA 11: refused before the launch).
    arg_packages: dict[str, tuple[str, str]] = field(default_factory=dict)
    # llama.cpp refuses a quantized V cache without flash attention.
    quantized_v_needs_flash_attn: bool = False
    # Threads the server starts per slot (llama-server's HTTP pool: one a slot, and four more): under a host
    # budget each reserves its stack in the address space (QA 12: 16 slots' 20 threads took 160 MiB of 250)
    threads_per_slot: int = 0
    # Python packages whose versions make the engine's build (vramtui's transformers runner: transformers
    # and torch), so that a calibration learnt on one holds only for it (QA 11: the build was None)
    version_packages: tuple[str, ...] = ()
    # The model is a file on disk (a GGUF), never a hub name.
    model_is_file: bool = False
    # The model is a local folder with a config.json (vramtui's transformers runner downloads nothing): a
    # hub name is taken from the local Hugging Face cache, else refused before the launch (QA 11).
    model_is_folder: bool = False
    # What the engine process itself holds of a host budget before any model buffer.
    host_baseline_bytes: int = 256 * MIB
    # Its binary's idle footprint is measured once and cached (core.launch.footprint) under a host budget.
    measures_footprint: bool = False
    # What its largest process maps before the model's buffers, where a host budget (an address-space limit
    # on each process alone) binds that process first: a KV cache is sized beside at least this (0: none)
    address_space_floor: int = 0
    # Its CPU estimate bills the engine's own processes as its runtime row (vLLM's worker, engine core and
    # API server): a budget's room is not lowered by host_baseline_bytes again (QA 20 D1).
    cpu_bill_holds_engine: bool = False
    # Its KV cache grows with the sequences being served (transformers' dynamic cache), nothing sized by
    # `parallel` at start: for a request that failed alone (vramtui sends one at a time), a lower parallel
    # frees nothing (QA 21 F1: 4 -> 2 was tried, then the setting was called "ignored").
    kv_grows_per_request: bool = False
    # Words its users type from the engine's own API that are a setting here under another name
    # (transformers' load_in_4bit is quant = "bnb-4bit"): said in the unknown-parameter line.
    param_words: dict[str, str] = field(default_factory=dict)
    # context = 0 means the model's own trained length (llama.cpp's `-c 0`), not an impossible value.
    context_zero_is_trained: bool = False
    # parallel = "auto" (-1): the engine picks this many slots (llama-server: 4); None: no such value.
    parallel_auto_slots: int | None = None
    # flash_attn = "auto" turns it on wherever this engine runs (llama-server: GPUs and the CPU alike).
    flash_attn_auto_is_on: bool = False
    # Defaults that depend on the device it runs on (vLLM sizes its batch by the card, and differs on the
    # CPU): (device bytes or None, on the CPU) -> {param: value}, over `defaults`.
    device_defaults: Callable[[int | None, bool], Mapping[str, object]] | None = None
    # The engine's build its memory accounting keys on (Settings.engine_build), from the program a profile
    # runs; None: not told apart, sized as today's.
    engine_build_of: Callable[[Path], int | None] | None = None
    # context = "auto": the engine picks the largest context that fits (vLLM's --max-model-len auto).
    context_auto: bool = False
    # The one change the engine's own failure message names, with its value (see NamedFix): the wizard's
    # first move when it applies, before any ladder.
    named_fix: NamedFix | None = None
    # The most sequences it runs at once, whatever memory holds (llama.cpp's LLAMA_MAX_SEQ: 256; more and
    # it refuses to start, "n_seq_max must be <= 256"); None: no limit vramtui knows.
    max_sequences: int | None = None
    # The engine's own words when it refuses more than max_sequences ({cap}), quoted to the user.
    sequence_limit_words: str = ""
    # `parallel` is a ceiling on the requests it batches at once, not slots each sized for the context
    # (vLLM's --max-num-seqs): the concurrency memory holds stops there.
    parallel_caps_requests: bool = False
    # Its words when it refuses more sequences at once ({sequences}) than one batch's tokens ({batch}):
    # each running sequence takes a token a step (vLLM's SchedulerConfig); "": no such refusal.
    batch_limit_words: str = ""
    # Its words when it refuses a context past the model's own length ({context}, {trained}), and the
    # environment variable that lets it start anyway ("": it starts, past the length or capped to it)
    context_limit_words: str = ""
    context_limit_env: str = ""
    # It caps each slot's context at the model's trained length (llama-server: "the slot context (N) exceeds
    # the training context of the model (M) - capping"): past it, a request gets the trained length
    caps_slot_at_trained: bool = False
    # Said before a launch with no GPU when the KV cache is sized from a share of the whole machine
    # ({share}, {size}) and nothing sets it outright ("": the engine takes what its settings say)
    cpu_share_words: str = ""
    # Settings its CPU build takes and ignores (vLLM's flash attention backend is CUDA's): said before a
    # launch with no GPU, since the engine only logs it (QA 15)
    cpu_ignored: tuple[str, ...] = ()
    # Values its CPU build cannot run (vLLM's on-the-fly fp8: its quantization kernel is CUDA's only): the
    # wizard never proposes them where no GPU is (QA 37 F4: a relaunch that crashed at load)
    cpu_refused: tuple[tuple[str, object], ...] = ()
    # Its own words for the settings a server list shows (context, parallel, kv_dtype, gpu_layers), where
    # the shared short ones ("ctx", "slots", "KV", "layers": llama-server's) would not be its terms
    setting_words: tuple[tuple[str, str], ...] = SHARED_SETTING_WORDS
    # Flags only this engine takes: a command line of a program two engines share (ik_llama.cpp's
    # llama-server and mainline's) with one of them is this engine's.
    own_flags: tuple[str, ...] = ()
    # The settings it echoes at start-up (None: none vramtui reads).
    echo: SettingsEcho | None = None

    def __str__(self) -> str:
        return self.name

    @property
    def launchable(self) -> bool:
        return self.launch is not None

    @property
    def model_at_request(self) -> bool:
        """The model is a name the server is asked for (Ollama), not a file or folder it loads."""
        return self.launch is not None and self.launch.model_at_request

    @property
    def offloads_layers(self) -> bool:
        """It places layers on the GPU by count (llama.cpp family): gpu_layers = 0 keeps all on the host."""
        return self.knob("gpu_layers") is not None

    def flag(self, param: str) -> str | None:
        return self.flags.get(param)

    def knob(self, param: str) -> str | None:
        """What a user changes for `param`: the flag, else the environment variable, else None."""
        return self.flags.get(param) or self.env.get(param)

    def kv_8bit(self) -> str | None:
        """Its 8-bit KV cache type (vLLM's fp8, llama.cpp's q8_0), or None."""
        return next((name for name in ("fp8", "q8_0") if name in self.kv_dtypes), None)

    def knob_words(self, param: str) -> str | None:
        """The knob as a user sets it, every flag it takes: llama-server's KV cache type is two flags
        ("--cache-type-k and --cache-type-v"; QA: naming the first alone halves the change)."""
        knob = self.knob(param)
        also = self.launch.also_flags.get(param, ()) if knob and self.launch else ()
        return " and ".join((knob, *also)) if knob else None

    def default(self, param: str, device_bytes: int | None = None, on_cpu: bool = False) -> object:
        """The value `param` has when the profile says nothing (on that device, where it matters)."""
        if self.device_defaults is not None:
            by_device = self.device_defaults(device_bytes, on_cpu)
            if param in by_device:
                return by_device[param]
        return self.defaults.get(param)

    def sequence_cap(
        self, parallel: int | None, batch: int | None, device_bytes: int | None, on_cpu: bool
    ) -> int | None:
        """The most sequences this run takes at once whatever memory holds: the engine's limit, or, where
        `parallel` is a ceiling (vLLM), the run's own value, else its default on that device, which is at
        most the tokens of one batch (`batch`, else its default: each running sequence takes one a step)."""
        if not self.parallel_caps_requests:
            return self.max_sequences
        if parallel is not None:
            return parallel
        value = self.default("parallel", device_bytes, on_cpu)
        tokens = batch or self.default("batch", device_bytes, on_cpu)
        if isinstance(value, int) and isinstance(tokens, int) and tokens > 0:
            value = min(value, tokens)
        return value if isinstance(value, int) and value > 0 else self.max_sequences

    def sequence_refusal(self, sequences: int | None, batch_tokens: int | None) -> str | None:
        """Why the engine will not start with `sequences` at once and `batch_tokens` a step (None: it
        starts, or vramtui knows no limit): the estimate, the grid and `check` all ask here."""
        if sequences is None:
            return None
        cap = self.max_sequences
        if cap is not None and sequences > cap:
            words = f": {self.sequence_limit_words.format(cap=cap)}" if self.sequence_limit_words else ""
            plural = "s" if cap != 1 else ""
            return f"{self.name} runs at most {cap} sequence{plural} at once, not {sequences} (it refuses to start{words})"
        if self.batch_limit_words and batch_tokens is not None and batch_tokens < sequences:
            said = self.batch_limit_words.format(batch=batch_tokens, sequences=sequences)
            return f"{said}: raise {self.knob('batch')} to {sequences} or lower {self.knob('parallel')}"
        return None

    def rungs(self, stage: str | None, cause: str | None = None) -> list[Rung]:
        """The rungs for a failing stage that this backend can take, in the order users are taught; a
        ladder keyed "stage:cause" (the buffer that failed) comes before the stage's own."""
        rungs = self.ladder.get(f"{stage}:{cause}", ()) if cause else ()
        return [rung for rung in rungs or self.ladder.get(stage or "", ()) if rung.applies_to(self)]

    def importable(self, module: str) -> bool:
        """Can the engine import `module`? Only a runner on vramtui's own Python can be asked; any
        other engine is assumed to have what it needs."""
        if self.launch is None or "{python}" not in self.launch.program:
            return True
        return _importable(module)

    def quant_usable(self, value: object) -> bool:
        """Is the on-the-fly quantization `value` there to use (its package installed: `arg_packages`)?"""
        return self.missing_package("quant", value) is None

    def missing_package(self, param: str, value: object) -> tuple[str, str] | None:
        """The package (module, pip name) that `param = value` needs and the engine cannot import."""
        if not self.arg_packages or value is None:
            return None
        extra = self.launch.extra_params if self.launch else {}
        args = (str(value),) if param in extra else self.translate(param, value).args
        for arg in args:
            package = self.arg_packages.get(arg)
            if package is not None and not self.importable(package[0]):
                return package
        return None

    def context_as_printed(self, context: int, streams: int) -> range:
        """The n_ctx the engine may print for `context` over `streams` KV streams (one value, or the
        padded ones: a slot's share rounded up, QA 6: 50000 over 4 slots is 50176)."""
        pad = self.context_pad_cells
        if not pad:
            return range(context, context + 1)
        most = -(-context // max(1, streams) // pad) * pad * max(1, streams)
        return range(context, max(context, most) + 1)

    def flash_attn_effective(self, value: object) -> bool:
        """Is flash attention on in a run where it is set to `value` (None: the engine's default)?"""
        state = switch(self.default("flash_attn") if value is None else value)
        return state is True or (state == "auto" and self.flash_attn_auto_is_on)

    def needs_flash_attn_for(self, kv_dtype: object) -> bool:
        """Does this KV cache type need flash attention on first ("quantized V cache requires flash_attn")?"""
        k_type, _, v_type = str(kv_dtype).strip().lower().partition("/")  # "K/V": V is the second
        return self.quantized_v_needs_flash_attn and (v_type or k_type).strip().startswith(("q", "iq"))

    def takes_auto(self, param: str, value: object) -> bool:
        """Does this engine size `param` itself when told "auto" (vLLM's `--max-model-len auto`: the longest
        context that fits)? Then the profile keeps the word instead of a number."""
        if not isinstance(value, str) or value.strip().lower() != "auto" or self.launch is None:
            return False
        try:
            translated = self.launch.translate(self, param, "auto")
        except VramtuiError:  # an engine that wants a number says so in its own words
            return False
        return not translated.problem and "auto" in translated.args

    def translate(self, param: str, value: object) -> Translation:
        """The arguments/environment that give this backend `param = value` (or why it cannot)."""
        if self.launch is None:
            return Translation(problem=f"{self.name} cannot be launched by vramtui")
        if param in self.fixed and _same(self.fixed[param], value):
            return Translation()  # the engine always behaves this way: nothing to pass
        return self.launch.translate(self, param, value)


# --- value spellings shared by the translators -------------------------------------------------------

_KV_ALIASES = {
    "fp16": "f16",
    "float16": "f16",
    "half": "f16",
    "bfloat16": "bf16",
    "fp32": "f32",
    "float32": "f32",
}
_TRUE = {"1", "true", "on", "yes", "enabled"}
_FALSE = {"0", "false", "off", "no", "disabled"}


@functools.cache
def _importable(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def _same(a: object, b: object) -> bool:
    return str(a).strip().lower() == str(b).strip().lower()


def kv_dtype_name(value: object) -> str:
    """The user's KV cache type in llama.cpp's spelling (f16, q8_0 ...)."""
    text = str(value).strip().lower()
    return _KV_ALIASES.get(text, text)


def toml_spelling(value: object) -> str:
    """A profile's value as TOML writes it (true, "most", 1.5), for error lines: not Python's (True, 'most')."""
    import json

    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)


def switch(value: object, param: str | None = None) -> bool | str:
    """flash_attn and friends: True, False or "auto"."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    if text == "auto":
        return "auto"
    said = f"{param} is " if param else ""
    raise VramtuiError(f"{said}not an on/off value: {toml_spelling(value)} (use true, false or auto)")


# What a whole-number parameter takes besides a number, said when a value is neither
_WORDS_TOO = {"gpu_layers": ' or "all"'}


def whole(param: str, value: object) -> int:
    """An integer parameter; a clear error for anything else."""
    wrong = VramtuiError(
        f"{param} must be a whole number{_WORDS_TOO.get(param, '')}, not {toml_spelling(value)}"
    )
    if isinstance(value, bool):
        raise wrong
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise wrong from None
    if not number.is_integer():
        raise wrong
    return int(number)


def gib(param: str, value: object) -> float:
    """cpu_offload: a number of GiB or a size string ("4GiB")."""
    from vramtui.core.units import GIB, parse_size

    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return parse_size(str(value)) / GIB


def size_bytes(param: str, value: object) -> int:
    """A size parameter as bytes: a number with its unit ("256MiB", "1.5GiB"); a bare number is refused
    (is 600 bytes, MiB or GiB?)."""
    from vramtui.core.units import parse_size

    if isinstance(value, bool | int | float) or str(value).strip().isdigit():
        raise VramtuiError(f'{param} needs a unit, e.g. "256MiB" or "4GiB", not {value!r}')
    size = parse_size(str(value))
    if size <= 0:
        raise VramtuiError(f"{param} must be more than 0 bytes, not {value!r}")
    return size


def is_all(value: object) -> bool:
    return str(value).strip().lower() in {"all", "-1"}


def no_such(backend: Backend, param: str, why: str = "") -> Translation:
    return Translation(problem=f"{backend.name} has no {param} setting" + (f": {why}" if why else ""))


def bad_value(backend: Backend, param: str, value: object, accepted: str) -> Translation:
    return Translation(problem=f"{backend.name} does not take {param}={value!r} (it takes {accepted})")


def kv_dtype_problem(backend: Backend, value: object) -> str | None:
    """Why this engine would not start with this KV cache type (None: it takes it). The engine's own
    translation knows its types where it has a KV flag (vLLM takes f16 as its `auto`); else its list."""
    if backend.launch is not None and backend.knob("kv_dtype") is not None:
        return backend.translate("kv_dtype", value).problem
    if kv_dtype_name(value) not in backend.kv_dtypes:
        return f"{backend.name} does not take kv_dtype={value!r} (it takes {', '.join(backend.kv_dtypes)})"
    return None


def kv_check(backend: Backend, value: object) -> str | Translation:
    """The KV type in llama.cpp's spelling, or the Translation that refuses it."""
    name = kv_dtype_name(value)
    if name not in backend.kv_dtypes:
        return bad_value(backend, "kv_dtype", value, ", ".join(backend.kv_dtypes))
    return name


# --- rungs every family's ladder shares -------------------------------------------------------------
# Each family's ladder.py lists its own order; the rungs they have in common are spelled once here.

PARALLEL_DOWN = Rung("parallel", "down", "fewer concurrent sequences", "fewer users served at once")
KV_DTYPE_DOWN = Rung(
    "kv_dtype", "down", "a smaller KV cache type", "slightly lower answer quality (q4_0 more than q8_0)"
)
CONTEXT_DOWN = Rung("context", "down", "a shorter context", "long prompts and long chats no longer fit")
FLASH_ATTN_ON = Rung("flash_attn", "on", "flash attention on", "none on most GPUs; some older cards lack it")
QUANT_DOWN = Rung("quant", "down", "a lower quantization level (16 → 8 → 4 bit)", "some answer quality")
PREQUANTIZED_FILE = Rung(
    "model",
    "file",
    "a pre-quantized file of the same model",
    "some answer quality (and no near-16-bit load peak, unlike on-the-fly quantization)",
)
CPU_OFFLOAD_UP = Rung(
    "cpu_offload", "up", "keep part of the weights in host RAM", "much slower for the offloaded part"
)
SMALLER_MODEL = Rung("smaller_model", "advice", "a smaller model", "a less capable model")
SHORTER_INPUT = Rung(
    "input_length", "advice", "a shorter input (replay the failing request shortened)", "less context"
)
BATCH_DOWN = Rung("batch", "down", "a smaller batch", "slower prompt processing")
TENSOR_SPLIT_MOVE = Rung(
    "tensor_split",
    "move",
    "move layers off the GPU that ran out to one with room (--tensor-split)",
    "none while the other card has room; an uneven split",
)
CHUNKING = Rung(
    "chunking",
    "advice",
    "split the input into chunks",
    "the model no longer sees the whole input at once",
)


def sizing_params(
    backend: Backend, params: Mapping[str, object], env: Mapping[str, str]
) -> dict[str, object]:
    """The params an estimate sizes a run by: the profile's, and what its environment sets in the engine's
    own unit where the params say nothing (QA 9: a VLLM_CPU_KVCACHE_SPACE=1 run billed 22 GiB of KV)."""
    found = dict(params)
    for name, (param, unit) in backend.env_sizes.items():
        raw = str(env.get(name, "")).strip()
        if param not in found and raw and raw.replace(".", "", 1).isdigit() and float(raw) > 0:
            found[param] = f"{raw}{unit}"
    return found


def kv_set_outright(
    backend: Backend, params: Mapping[str, object], env: Mapping[str, str] | None = None
) -> bool:
    """Is the KV cache sized outright (kv_cache_memory, or the engine's environment variable for it)? Then
    the memory share sizes nothing: no share to assume, to raise, or to warn about."""
    return bool(sizing_params(backend, params, env or {}).get("kv_cache_memory"))
