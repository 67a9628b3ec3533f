"""Will this model fit this card, and what to cut if it does not: the settings, the estimate, the solvers.

Each engine accounts memory its own way; its accounting lives with the engine
(`vramtui/core/backends/<family>/memory.py`) and is found by backend name through
`accounting.accounting_for`. What stays here is engine-neutral: the settings a user gives, the estimate
and its bill (the memory vocabulary of `vramtui.core.memory.parts`), and the solvers (largest context,
largest concurrency, layers on the GPU) that ask the accounting what differs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any, TypeVar

from vramtui.core.backends import get_backend
from vramtui.core.backends.base import gib, kv_dtype_problem, size_bytes
from vramtui.core.errors import VramtuiError
from vramtui.core.estimate import devices, extras, offload
from vramtui.core.estimate import quant as q
from vramtui.core.estimate.accounting import BUDGET_LINE, MLA_LATENT_AND_V, accounting_for
from vramtui.core.estimate.devices import DeviceRow
from vramtui.core.estimate.kvcache import kv_bytes_per_token, kv_layer_bytes
from vramtui.core.estimate.modelinfo import ModelInfo, load_model_info
from vramtui.core.estimate.weights import hf_weights_bytes, llama_cpp_weights
from vramtui.core.memory.parts import HOST, JSON_KEYS, PARTS, MemoryBill
from vramtui.core.units import GIB, MIB, format_bytes, parse_size

if TYPE_CHECKING:
    from vramtui.core.estimate.accounting import MemoryAccounting

DEFAULT_DEVICE_BYTES = 24 * GIB
# CUDA context + cuBLAS/cuDNN workspaces a process holds before any model byte (300-500 MiB on current
# drivers; nvidia-smi shows it, the engines' own logs do not).
CUDA_CONTEXT_BYTES = 400 * MIB
# Far past any real model (the deepest have under 200 layers); bounds the per-layer loops the solvers repeat.
MAX_LAYERS = 2048
# The context solver searches no further than this (a trained length of 10**30 in a config is a typo).
MAX_CONTEXT_SEARCH = 1 << 27


@dataclass
class Settings:
    """How the model is run. None means the backend's own default."""

    backend: str = "llama.cpp"
    context: int | None = None
    parallel: int | None = None
    batch: int | None = None
    ubatch: int | None = None
    kv_dtype: str | None = None
    # the engine's --dtype for the weights (vLLM, transformers: "auto", "float32", "bfloat16"...); None: auto
    dtype: str | None = None
    flash_attn: bool | None = None
    gpu_layers: int | None = None  # llama.cpp family: None = all layers
    quant: str | None = None  # quantization applied at load (overrides the model's)
    device_bytes: int = DEFAULT_DEVICE_BYTES
    safety: float | None = None  # usable share (vLLM: gpu_memory_utilization); None: 0.8 (vLLM 0.9)
    # The room is a memory budget less the engine's own share: the line is BUDGET_LINE where the engine's
    # default share is lower (an engine's own utilization setting stands)
    room_is_budget: bool = False
    on_gpu: bool = True  # False: what the engine allocates on a CPU-only run (no CUDA context)
    # What the engine's share is of, where that is not the room (vLLM's CPU build takes its share of the whole
    # machine's memory, whatever a memory budget leaves it): None: device_bytes
    share_of_bytes: int | None = None
    # llama.cpp family's expert offload: every expert to the host (--cpu-moe), those of the first N layers
    # (--n-cpu-moe N), and -ot PATTERN=DEVICE rules (core/estimate/offload.py)
    cpu_moe: bool = False
    n_cpu_moe: int | None = None
    override_tensor: tuple[str, ...] = ()
    # vLLM's --cpu-offload-gb: GiB of the decoder layers' weights kept in pinned host RAM, per GPU
    cpu_offload_gb: float = 0.0
    # vLLM's --kv-cache-memory-bytes: the KV cache per device, set outright (the share then does not count)
    kv_cache_memory: int | None = None
    enforce_eager: bool = False  # vLLM: no CUDA graphs captured
    # llama.cpp reads the file by mmap (its default); False: --load-mode none / use_mmap=False
    mmap: bool = True
    # llama.cpp keeps the KV cache with its layers (its default); False: --no-kv-offload (-nkvo) keeps it in
    # host RAM, and the attention that reads it runs on the CPU
    kv_offload: bool = True
    # llama.cpp's KV cache as one stream for every slot (-kvu / --kv-unified): None is llama-server's own
    # choice (unified when it picks the slot count, -np auto; a stream per slot when --parallel is given)
    kv_unified: bool | None = None
    # llama.cpp's sliding-window layers keeping every cell (--swa-full); None: the engine's own (window
    # only in llama.cpp, every cell in Ollama's runner)
    swa_full: bool | None = None
    # Terms measured on earlier runs of this engine build on this device (core/estimate/calibrate.py's
    # Calibration); None: the estimate as computed, nothing measured added.
    calibration: Any = None
    # What rides along (core/estimate/extras.py): llama.cpp's vision projector, draft model (its layers on
    # the GPU, its device, its context), LoRA files and host prompt cache (MiB; -1 no limit, 0 off);
    # vLLM's LoRA slots; the model's own MTP layers used for speculation.
    mmproj: str | None = None
    model_draft: str | None = None
    gpu_layers_draft: int | None = None
    device_draft: str | None = None
    ctx_size_draft: int | None = None
    cache_ram: int | None = None
    lora: tuple[str, ...] = ()
    max_loras: int | None = None
    max_lora_rank: int | None = None
    mtp: bool = False
    # Several GPUs (core/estimate/devices.py): every card's bytes when more than one is given (device_bytes is
    # then the first); llama.cpp's --tensor-split / --split-mode / --main-gpu; vLLM's parallel sizes
    gpus: tuple[int, ...] = ()
    tensor_split: tuple[float, ...] = ()
    split_mode: str | None = None
    main_gpu: int = 0
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    # transformers: accelerate's device map (auto, balanced, balanced_low_0, sequential; cpu, cuda:N) and its
    # per-device caps (0=20GiB,1=46GiB,cpu=64GiB), the runner's --device-map / --max-memory
    device_map: str | None = None
    max_memory: str | None = None
    # The engine build the run uses (llama.cpp's build number, `llama-server --version`): where its memory
    # accounting changed between builds (which slot -ngl fills first, how many logits the graph reserves),
    # the older behaviour is sized for an older build; None: today's build.
    engine_build: int | None = None
    # The GPU shares host memory (Apple silicon under Metal): llama.cpp maps the model file's pages into it
    # whole, the token embedding's among them, beside the host's own mapping of the host tensors.
    unified_memory: bool = False
    # ik_llama.cpp's own knobs: -mla (how an MLA model's cache and attention are laid out: 0 per-head K and
    # V, 1 the latent and its transpose, 2 and 3 the latent alone) and -amb (MiB: the cap on the attention's
    # work tensors); None: its defaults. The other engines have no such knob.
    mla: int | None = None
    attn_max_batch: int | None = None

    def __post_init__(self) -> None:
        self.backend = get_backend(self.backend).name
        names = ("context", "parallel", "batch", "ubatch", "gpu_layers", "n_cpu_moe", "gpu_layers_draft")
        names = (*names, "engine_build", "attn_max_batch")
        for name in (*names, "ctx_size_draft", "max_loras", "max_lora_rank"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                raise VramtuiError(f"{name} must be a non-negative whole number, not {value!r}")
        if self.parallel == 0:
            raise VramtuiError("parallel must be at least 1")
        if self.mla is not None and (isinstance(self.mla, bool) or self.mla not in (0, 1, 2, 3)):
            raise VramtuiError(f"mla must be 0, 1, 2 or 3 (ik_llama.cpp's -mla), not {self.mla!r}")
        if self.safety is not None and not 0 < self.safety <= 1:
            raise VramtuiError(f"safety must be a share between 0 and 1, not {self.safety!r}")
        if self.device_bytes <= 0:
            raise VramtuiError("device memory must be positive")
        if isinstance(self.cpu_offload_gb, bool) or not float(self.cpu_offload_gb) >= 0:
            raise VramtuiError(f"cpu_offload_gb must be 0 or more GiB, not {self.cpu_offload_gb!r}")
        self.cpu_offload_gb = float(self.cpu_offload_gb)
        if self.kv_dtype is not None and str(self.kv_dtype).strip().lower() == "auto":
            self.kv_dtype = None  # the engine's own default, whatever it names it
        if self.kv_dtype is not None:
            problem = kv_dtype_problem(get_backend(self.backend), self.kv_dtype)
            if problem:  # llama-server would not start with `-ctk q3_k`: no estimate says it fits
                raise VramtuiError(problem)
            q.kv_bytes_per_element(self.kv_dtype)  # validates
        if self.quant is not None:
            self.quant = q.normalize_quant(self.quant)
        self.override_tensor = tuple(self.override_tensor)
        self.lora = tuple(self.lora)
        if self.cache_ram is not None and (isinstance(self.cache_ram, bool) or self.cache_ram < -1):
            raise VramtuiError(f"cache_ram must be MiB, -1 (no limit) or 0 (off), not {self.cache_ram!r}")
        chosen = offload.rules(self.override_tensor, self.cpu_moe, self.n_cpu_moe)  # validates
        self.gpus, self.tensor_split = tuple(int(b) for b in self.gpus), tuple(self.tensor_split)
        if any(card <= 0 for card in self.gpus):
            raise VramtuiError("device memory must be positive")
        if self.gpus:
            self.device_bytes = self.gpus[0]
        # Only the layout flags this engine has are checked against the cards: another engine's (-tp under
        # llama.cpp, -ts under vLLM) is left out of the sizing with a note (estimate's _drop_ignored).
        ignored = self.memory.ignores
        devices.check_layout(
            len(self.cards),
            () if "tensor_split" in ignored else self.tensor_split,
            None if "split_mode" in ignored else self.split_mode,
            0 if "main_gpu" in ignored else self.main_gpu,
            1 if "tensor_parallel_size" in ignored else self.tensor_parallel_size,
            1 if "pipeline_parallel_size" in ignored else self.pipeline_parallel_size,
        )
        if "override_tensor" not in ignored:
            offload.check_devices(chosen, len(self.cards))

    @property
    def cards(self) -> tuple[int, ...]:
        """Every card's bytes (one: device_bytes)."""
        return self.gpus if len(self.gpus) > 1 else (self.device_bytes,)

    @property
    def several(self) -> bool:
        """More than one card is sized (each gets its own row and must fit on its own)."""
        return len(self.cards) > 1

    @property
    def asks_extras(self) -> bool:
        """A projector, a draft, adapters, a prompt cache limit or MTP layers to add (extras.py)."""
        return bool(self.mmproj or self.model_draft or self.lora or self.max_loras or self.mtp) or (
            self.cache_ram is not None
        )

    @property
    def offload_rules(self) -> list[offload.TensorOverride]:
        """The tensor placement rules, in llama.cpp's order."""
        return offload.rules(self.override_tensor, self.cpu_moe, self.n_cpu_moe)

    @property
    def accounting(self) -> str:
        """The backend's accounting family name (core/backends' Backend.accounting)."""
        return get_backend(self.backend).accounting

    @property
    def memory(self) -> MemoryAccounting:
        """How this backend accounts memory (its family's memory.py)."""
        return accounting_for(self.backend)

    @property
    def share(self) -> float:
        if self.safety is not None:
            return self.safety
        default = self.memory.default_safety
        return max(default, BUDGET_LINE) if self.room_is_budget else default

    @classmethod
    def from_params(
        cls,
        params: Mapping[str, Any],
        backend: str = "llama.cpp",
        device_bytes: int | str | None = None,
        safety: float | None = None,
    ) -> Settings:
        """From a launch profile's shared vocabulary (context, parallel, batch, ubatch, kv_dtype, gpu_layers,
        mem_share, quant, flash_attn). Unknown keys are ignored; mem_share becomes the usable share."""
        flash = params.get("flash_attn")
        if isinstance(flash, str):
            flash = {"on": True, "true": True, "1": True, "off": False, "false": False, "0": False}.get(
                flash.strip().lower()
            )
        share = params.get("mem_share")
        if safety is None and share is not None:
            try:
                safety = float(share)
            except (TypeError, ValueError):
                raise VramtuiError(f"mem_share must be a share such as 0.9, not {share!r}") from None
        kv = params.get("kv_dtype")
        overrides = params.get("override_tensor") or ()
        overrides = [overrides] if isinstance(overrides, str) else list(overrides)
        return cls(
            **_extras_params(params),
            **_split_params(params),
            cpu_moe=_is_on(params.get("cpu_moe")),
            n_cpu_moe=_as_int(params, "n_cpu_moe"),
            override_tensor=tuple(str(rule) for rule in overrides),
            cpu_offload_gb=_offload_gib(params.get("cpu_offload", params.get("cpu_offload_gb"))),
            kv_cache_memory=(
                size_bytes("kv_cache_memory", params["kv_cache_memory"])
                if params.get("kv_cache_memory")
                else None
            ),
            enforce_eager=_is_on(params.get("enforce_eager")),
            # ik_llama.cpp's -rtr repacks the weights at load, which turns mmap off
            mmap=mmap_from_params(params) and not _is_on(params.get("run_time_repack")),
            backend=backend,
            context=_as_int(params, "context"),
            parallel=_as_int(params, "parallel"),
            batch=_as_int(params, "batch"),
            ubatch=_as_int(params, "ubatch"),
            kv_dtype=str(kv) if kv not in (None, "", "auto") else None,
            flash_attn=flash if isinstance(flash, bool) else None,
            gpu_layers=_as_int(params, "gpu_layers"),
            quant=str(params["quant"]) if params.get("quant") else None,
            dtype=str(params["dtype"]) if params.get("dtype") else None,  # QA 11: the profile's was dropped
            device_bytes=parse_size(device_bytes) if device_bytes is not None else DEFAULT_DEVICE_BYTES,
            safety=safety,
            mla=_as_int(params, "mla"),
            attn_max_batch=_as_int(params, "attn_max_batch"),
            kv_unified=_is_on(params["kv_unified"]) if params.get("kv_unified") not in (None, "") else None,
            swa_full=_is_on(params["swa_full"]) if params.get("swa_full") not in (None, "") else None,
        )


def _as_int(params: Mapping[str, Any], name: str) -> int | None:
    """A whole-number param; "all", "auto", "max" (and llama.cpp's -1 GPU layers) leave it to the engine."""
    value = params.get(name)
    if value is None or value == "" or str(value).strip().lower() in ("all", "auto", "max"):
        return None
    if name == "gpu_layers" and str(value).strip() == "-1":  # llama.cpp's "all layers"
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        raise VramtuiError(f"{name} must be a whole number, not {value!r}") from None


def _is_on(value: object) -> bool:
    return str(value if value is not None else "").strip().lower() in ("1", "true", "on", "yes")


def _text(params: Mapping[str, Any], name: str) -> str | None:
    value = params.get(name)
    return str(value).strip() if value not in (None, "") else None


def _extras_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """What rides along (extras.py): the projector, the draft, LoRA, the prompt cache, MTP."""
    loras = params.get("lora") or ()
    loras = [loras] if isinstance(loras, str) else list(loras)
    return {
        "mmproj": str(params["mmproj"]) if params.get("mmproj") else None,
        "model_draft": str(params["model_draft"]) if params.get("model_draft") else None,
        "gpu_layers_draft": _as_int(params, "gpu_layers_draft"),
        "device_draft": str(params["device_draft"]) if params.get("device_draft") else None,
        "ctx_size_draft": _as_int(params, "ctx_size_draft"),
        "cache_ram": _as_int(params, "cache_ram"),
        "lora": tuple(str(path) for path in loras),
        "max_loras": _as_int(params, "max_loras"),
        "max_lora_rank": _as_int(params, "max_lora_rank"),
        "mtp": _is_on(params.get("mtp")),
    }


def _split_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """Several GPUs (devices.py): llama.cpp's split, vLLM's parallel sizes, transformers' device map."""
    split = params.get("tensor_split")
    if isinstance(split, list | tuple):
        split = ",".join(str(part) for part in split)
    try:
        tensor_split = devices.parse_split(str(split)) if split not in (None, "") else ()
    except ValueError as error:
        raise VramtuiError(f"tensor_split: {error}") from None
    mode = _text(params, "split_mode")
    return {
        "device_map": _text(params, "device_map"),
        "max_memory": _text(params, "max_memory"),
        "tensor_split": tensor_split,
        "split_mode": mode.lower() if mode else None,
        "main_gpu": _as_int(params, "main_gpu") or 0,
        "tensor_parallel_size": _as_int(params, "tensor_parallel_size")
        or _as_int(params, "tensor_parallel")
        or 1,
        "pipeline_parallel_size": _as_int(params, "pipeline_parallel_size") or 1,
    }


def mmap_from_params(params: Mapping[str, Any]) -> bool:
    """llama.cpp's load mode from a profile: `mmap` (llama-server) or `use_mmap` (llama-cpp-python)."""
    for name in ("mmap", "use_mmap"):
        value = params.get(name)
        if value is not None and str(value).strip().lower() in ("0", "false", "off", "no", "none"):
            return False
    return True


def _offload_gib(value: object) -> float:
    """A profile's cpu_offload (GiB, or a size such as "4GiB"), as vLLM's --cpu-offload-gb takes it."""
    if value in (None, ""):
        return 0.0
    try:
        return gib("cpu_offload", value)
    except (TypeError, ValueError):
        raise VramtuiError(f"cpu_offload must be GiB such as 4, not {value!r}") from None


@dataclass
class Estimate:
    """Bytes on the device, a verdict, and the solvers' answers."""

    backend: str
    context: int
    parallel: int
    weights_bytes: int  # on the device
    weights_host_bytes: int  # in host RAM (layers not offloaded, llama.cpp's token embedding)
    kv_cache_bytes: int
    kv_bytes_per_token: int
    activations_bytes: int
    overhead_bytes: int
    fragmentation_bytes: int
    total_bytes: int
    device_bytes: int
    usable_bytes: int
    fits: bool
    max_context: int | None = None
    max_parallel: int | None = None
    max_parallel_tokens: int | None = None  # the length of each of those sequences (llama.cpp: ctx / slots)
    max_parallel_capped: bool = False  # max_parallel is the engine's own limit, not what memory holds
    # max_parallel is for every layer on the GPU, where the engine placed fewer for this run (Ollama)
    max_parallel_all_layers: bool = False
    gpu_layers_fit: int | None = None
    n_cpu_moe_fit: int | None = None  # the fewest layers whose experts go to the host for it to fit
    # the first quantization at load, in the engine's own order (bnb-8bit, bnb-4bit; fp8), that fits
    quant_fit: str | None = None
    cpu_offload_fit: int | None = None  # vLLM: the fewest GiB of --cpu-offload-gb (per GPU) that fits
    # vLLM's CPU build under a budget that cannot hold its share of the machine: the KV size to set outright
    kv_cache_memory_fit: int | None = None
    # when it does not fit: the 8-bit KV type (any engine) and the larger share of the card (vLLM) that give
    # the most room without touching the weights (QA 33 V3, V4), and the longest context each gives
    kv_dtype_fit: str | None = None
    kv_dtype_fit_context: int | None = None
    share_fit: float | None = None
    share_fit_context: int | None = None
    ubatch_fit: int | None = None  # llama.cpp: the largest smaller micro-batch at which the context fits
    flash_attn_fit: bool | None = None  # llama.cpp: flash attention on (where it is off) makes it fit
    # several cards: the --tensor-split (layers per card, the output layer on the last) that fits them all
    tensor_split_fit: tuple[int, ...] | None = None
    expert_host_bytes: int = 0  # of weights_host_bytes: the tensors the offload rules put in host RAM
    host_bytes_needed: int = 0
    gpu_layers: int | None = None
    n_layers: int = 0
    kv_cells: int = 0
    kv_dtype: str = "f16"
    compute_buffer_bytes: int = 0
    output_buffer_bytes: int = 0
    load_peak_bytes: int | None = None
    load_peak_words: str = "quantizing while loading"  # what the peak holds, on the estimate's row
    kv_cache_tokens: int | None = None  # vLLM: token capacity of the KV blocks
    # vLLM: the longest single request the KV blocks hold (None: kv_cache_tokens; a pool whose layers
    # hold less than the context, sliding-window or recurrent, holds a request longer than its capacity
    # figure divided by the concurrency suggests, and the capacity it prints moves with the context)
    kv_longest_request: int | None = None
    max_concurrency: float | None = None  # vLLM: as it prints "Maximum concurrency ... x"
    load_peak_fits: bool | None = None  # transformers: None when there is no separate load peak
    reason: str | None = None  # why it does not fit when the total is not the cause
    weights_unknown: str | None = None  # config.json's quant_method vramtui does not know (16-bit sized)
    past_trained_context: bool = False  # the context asked for exceeds max_position_embeddings/context_length
    refused: bool = False  # the engine will not start with these settings, whatever memory holds (`reason`)
    counts_repack: bool = False  # the host weights include llama.cpp's repacked copy (a CPU-resident run)
    quant: str | None = None  # the weights' type as sized: --quant when given, else the model's own
    bits_per_weight: float | None = None
    quant_applied: bool = False  # True when --quant changed the model's own type
    loaded_dtype: str | None = None  # the width the engine runs 16/32-bit weights in, where not the file's
    # Where the breakdown lives: "gpu", or "host" for a CPU-only run (then the device is host RAM).
    device: str = "gpu"
    notes: list[str] = field(default_factory=list)
    # What rides along (core/estimate/extras.py): one entry per projector, draft, adapter or cache, each
    # with its own bill by place; already inside `bill` and the totals.
    extras: list[dict[str, Any]] = field(default_factory=list)
    # Every part by place (device 0, HOST) in the one memory vocabulary; the fields above are its legacy
    # views, kept as users script against them.
    bill: MemoryBill = field(default_factory=MemoryBill)
    # Several GPUs: one row per device (core/estimate/devices.DeviceRow); empty for one card, whose output
    # stays as it was
    devices: list[DeviceRow] = field(default_factory=list)
    # Where each layer sits (n_layers + 1 slots, the last the output layer): a device index or HOST, when
    # the engine places layers (llama.cpp); empty otherwise. Not in the JSON.
    layer_places: list[int | str] = field(default_factory=list)

    @property
    def place(self) -> int | str:
        """Where the breakdown lives: device 0, or the host for a CPU-only run."""
        return HOST if self.device == "host" else 0

    @property
    def longest_request(self) -> int:
        """vLLM: the longest single request its KV blocks hold (0 where none is known)."""
        return self.kv_longest_request or self.kv_cache_tokens or 0

    def refuse(self, reason: str) -> None:
        """The engine will not start with these settings, whatever memory holds: it says `reason`."""
        self.fits, self.reason, self.refused = False, reason, True

    def to_dict(self) -> dict[str, Any]:
        out = asdict(replace(self, bill=MemoryBill(), devices=[], layer_places=[]))
        del out["bill"], out["devices"], out["layer_places"]
        out["usable_share"] = round(self.usable_bytes / self.device_bytes, 4) if self.device_bytes else None
        out["headroom_bytes"] = self.usable_bytes - self.total_bytes
        # the parts without a legacy key: over every GPU, as the legacy totals are (QA 18: GPU 0's share
        # alone beside totals), or the host's for a CPU run
        every = self.place if self.place == HOST else None
        for part in PARTS:
            out.setdefault(JSON_KEYS[part], self.bill.get(part, every))
        out["bill"] = self.bill.by_place()
        if self.devices:
            out["devices"] = [row.to_dict() for row in self.devices]
        return out


# --- a memo for many estimates of one model (the grid) ---------------------------------------------------

_T = TypeVar("_T")
_SIZING_MEMO: ContextVar[dict[tuple[Any, ...], tuple[object, Any]] | None] = ContextVar(
    "vramtui_sizing_memo", default=None
)


@contextmanager
def sizing_memo() -> Iterator[None]:
    """Within it, what does not move with the context or the sequences (a model's weights at one
    quantization) is sized once; `estimate --table` makes hundreds of estimates of each row."""
    token = _SIZING_MEMO.set({})
    try:
        yield
    finally:
        _SIZING_MEMO.reset(token)


def memoized(key: tuple[Any, ...], keep: object, compute: Callable[[], _T]) -> _T:
    """compute() once per key inside `sizing_memo()`, every time outside it. `keep` (the ModelInfo the
    key names by id) is held with the value, so its id is not reused while the memo lives."""
    memo = _SIZING_MEMO.get()
    if memo is None:
        return compute()
    if key not in memo:
        memo[key] = (keep, compute())
    return memo[key][1]  # type: ignore[no-any-return]


# --- entry points ---------------------------------------------------------------------------------------------


def _estimate_core(info: ModelInfo, settings: Settings) -> Estimate:
    if info.n_layers <= 0 or (info.n_heads <= 0 and info.n_recurrent_layers < info.n_layers):
        raise VramtuiError("the model has no layers or heads: give --layers and --heads")
    if info.n_layers > MAX_LAYERS:
        # every estimate walks the layers, and the solvers run dozens of estimates
        raise VramtuiError(f"{info.n_layers} layers is not a plausible model (at most {MAX_LAYERS})")
    est = settings.memory.size(info, settings)
    if settings.asks_extras:
        extras.apply(info, settings, est, settings.memory.flash_on(info, settings))
    if settings.calibration is not None:
        settings.calibration.apply(est)
    return est


def size(info: ModelInfo, settings: Settings) -> Estimate:
    """The breakdown and verdict at exactly these settings, without the solvers (the grid's cells)."""
    return _estimate_core(info, settings)


def host_ram_bytes() -> int:
    """This machine's RAM (0 where it cannot be read): what bounds what an engine keeps in host RAM."""
    import psutil

    try:
        return int(psutil.virtual_memory().total)
    except (OSError, RuntimeError):
        return 0


def _fits(info: ModelInfo, settings: Settings) -> bool:
    return _estimate_core(info, settings).fits


def largest_where(lo: int, hi: int, ok: Callable[[int], bool]) -> int:
    """Largest value in [lo, hi] with ok(value) true, ok monotone (true then false); lo-1 when none."""
    if not ok(lo):
        return lo - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def unknown_weights_note(method: str) -> str:
    return (
        f"the weights are unknown: quant_method {method!r} is not one vramtui knows, so they are sized as "
        "16-bit (an upper bound); give --quant for the real figure"
    )


def trained_context(info: ModelInfo) -> int:
    """The model's own trained context, what a context of 0 means (llama-server's `-c 0`)."""
    if not info.max_context:
        raise VramtuiError(
            "context 0 means the model's own trained context, and this model does not say it: give --ctx"
        )
    return info.max_context


def _check_trained_context(info: ModelInfo, settings: Settings, est: Estimate) -> None:
    """A context past the trained length: llama.cpp accepts it (RoPE scaling), vLLM refuses to start."""
    if not info.max_context or settings.context is None:
        return
    memory = settings.memory
    per_sequence = settings.context
    if not memory.context_is_per_sequence:
        per_sequence = settings.context // max(1, est.parallel)  # llama.cpp splits its cache across slots
    if per_sequence > info.max_context:
        est.past_trained_context = True
        note = memory.past_trained_note(per_sequence, info.max_context)
        est.notes.append(note)
        if memory.refuses_past_trained:
            est.refuse(note)


def max_context(info: ModelInfo, settings: Settings) -> int:
    """The largest context that fits at the given concurrency (0 when none does)."""
    memory = settings.memory
    if memory.kv_from_budget:  # the KV cache's token capacity is the answer
        sized = memory.size(info, settings)
        if sized.total_bytes > sized.usable_bytes:
            return 0  # over the room whatever the context: the share sizes the cache, not the context (QA 16)
        tokens = sized.longest_request
        return min(tokens, info.max_context) if info.max_context else tokens
    step = memory.solver_step
    # the model's trained context caps the answer; with no such figure, search up to 1M tokens
    limit = min(info.max_context or (1 << 20), MAX_CONTEXT_SEARCH)
    found = largest_where(1, limit // step, lambda k: _fits(info, replace(settings, context=k * step)))
    return max(0, found * step)


# How far the concurrency search goes for an engine with no limit of its own (transformers): a binary search,
# so 65536 costs six more tries than 1024; an answer there is said as "or more" (QA 11: 1024 said as the answer)
MAX_PARALLEL_SEARCH = 65536


def max_parallel(info: ModelInfo, settings: Settings, limit: int = MAX_PARALLEL_SEARCH) -> int:
    """How many sequences of `context` tokens each run at once (0 when not even one), as memory holds
    them (the engine's own limit is `capped_parallel`'s)."""
    memory = settings.memory
    if memory.kv_from_budget:  # as many requests as the KV cache's token capacity holds
        est = memory.size(info, settings)
        if est.total_bytes > est.usable_bytes:
            return 0  # over the room whatever the concurrency
        if not est.kv_cache_tokens or est.longest_request < est.context:
            return 0  # not one request of the context: the capacity counts a block vLLM keeps back
        return int(est.kv_cache_tokens // max(1, est.context))
    if memory.context_is_per_sequence:
        return max(0, largest_where(1, limit, lambda p: _fits(info, replace(settings, parallel=p))))
    # the context is the whole cache, split across the slots: each slot adds one sequence's context
    per_seq = memory.run_context(info, settings)
    return max(
        0, largest_where(1, limit, lambda p: _fits(info, replace(settings, parallel=p, context=per_seq * p)))
    )


def fit_gpu_layers(info: ModelInfo, settings: Settings) -> int:
    """llama.cpp family: how many layers (the output layer counts as one more) fit on the GPU."""
    if not settings.memory.places_layers:
        return info.n_layers if _fits(info, settings) else 0
    found = largest_where(
        0, info.n_layers + 1, lambda n: _fits(info, replace(settings, gpu_layers=n, on_gpu=True))
    )
    return max(0, found)


def fit_n_cpu_moe(info: ModelInfo, settings: Settings) -> int | None:
    """llama.cpp family, MoE models: the smallest --n-cpu-moe that fits (None when even every layer's
    experts on the host does not)."""
    if not (info.is_moe and settings.memory.offloads_tensors and settings.on_gpu):
        return None

    def ok(n: int) -> bool:
        return _fits(info, replace(settings, n_cpu_moe=n, cpu_moe=False))

    return _smallest(0, info.n_layers, ok)


def _smallest(lo: int, hi: int, ok: Callable[[int], bool]) -> int | None:
    """Smallest value in [lo, hi] with ok(value) true, ok monotone (false then true); None when none."""
    if not ok(hi):
        return None
    while lo < hi:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


def fit_cpu_offload(info: ModelInfo, settings: Settings, weights_bytes: int) -> int | None:
    """vLLM: the fewest whole GiB of --cpu-offload-gb (each GPU's) past the one given with which the run
    fits; None when even all of a rank's weights in host RAM do not (the embedding stays, and activations)."""
    if not (settings.memory.offloads_by_size and settings.on_gpu):
        return None

    def ok(gb: int) -> bool:
        return _fits(info, replace(settings, cpu_offload_gb=float(gb)))

    lo = int(settings.cpu_offload_gb) + 1
    # a rank holds at most all the weights; more offload only frees the card
    return _smallest(lo, max(lo, -(-weights_bytes // GIB)), ok)


def _splits_layers(settings: Settings) -> bool:
    """Several cards sharing the layers by --tensor-split (llama.cpp's layer split)."""
    memory = settings.memory
    mode = settings.split_mode or "layer"
    return memory.places_layers and settings.several and settings.on_gpu and mode == "layer"


def _slot_counts(info: ModelInfo, settings: Settings) -> list[int]:
    """Layer slots per card as the settings split them (the output layer is the last card's last slot)."""
    n, cards = info.n_layers, settings.cards
    where = devices.layer_devices(n, 0, n + 1, devices.shares_for(cards, settings.tensor_split))
    return [sum(1 for device in where if device == i) for i in range(len(cards))]


def _move_layers(counts: list[int], rows: list[DeviceRow]) -> list[int] | None:
    """Layers off the card most over its room onto the one with the most room left: as many as the
    overshoot needs at that card's bytes per layer (one at least); None when nothing can move."""
    over = max(rows, key=lambda row: row.total_bytes - row.usable_bytes)
    room = max(rows, key=lambda row: row.usable_bytes - row.total_bytes)
    if over.index == room.index or counts[over.index] <= 1:
        return None
    per_layer = max(1, (over.weights_bytes + over.kv_cache_bytes) // max(1, counts[over.index]))
    need = -(-(over.total_bytes - over.usable_bytes) // per_layer)
    moved = max(1, min(need, counts[over.index] - 1))
    new = list(counts)
    new[over.index] -= moved
    new[room.index] += moved
    return new


def _spare(rows: list[DeviceRow]) -> int:
    return min(row.usable_bytes - row.total_bytes for row in rows)


def _balanced(
    info: ModelInfo, settings: Settings, counts: list[int], rows: list[DeviceRow]
) -> tuple[int, ...]:
    """From a split that fits, one layer at a time onto the roomiest card while the tightest card's room
    grows: the split that leaves every card the most room."""
    best, best_spare = list(counts), _spare(rows)
    for _ in range(info.n_layers):
        tight = min(rows, key=lambda row: row.usable_bytes - row.total_bytes)
        roomy = max(rows, key=lambda row: row.usable_bytes - row.total_bytes)
        if tight.index == roomy.index or best[tight.index] <= 1:
            break
        trial = list(best)
        trial[tight.index] -= 1
        trial[roomy.index] += 1
        rows = _estimate_core(info, replace(settings, tensor_split=tuple(float(c) for c in trial))).devices
        if _spare(rows) <= best_spare:
            break
        best, best_spare = trial, _spare(rows)
    return tuple(best)


def fit_tensor_split(info: ModelInfo, settings: Settings) -> tuple[int, ...] | None:
    """Several cards of unequal room: the --tensor-split (layer slots per card) that fits every card, found
    by moving layers off the card that is over onto the one with room; None when no split fits (or the
    engine does not split by layers). Every layer stays on a GPU: no speed is given up."""
    if not _splits_layers(settings):
        return None
    counts = _slot_counts(info, settings)
    seen: set[tuple[int, ...]] = set()
    for _ in range(info.n_layers + 2):
        key = tuple(counts)
        if key in seen:
            return None
        seen.add(key)
        est = _estimate_core(info, replace(settings, tensor_split=tuple(float(c) for c in counts)))
        if est.fits:
            return devices.simplest_split(info.n_layers, _balanced(info, settings, counts, est.devices))
        moved = _move_layers(counts, est.devices)
        if moved is None:
            return None
        counts = moved
    return None


def _solve_split(info: ModelInfo, settings: Settings, est: Estimate) -> None:
    """The split that fits, said before the moves that cost speed (experts or layers to the host)."""
    if est.fits or not _splits_layers(settings):
        return
    est.tensor_split_fit = fit_tensor_split(info, settings)
    if est.tensor_split_fit is None:
        return
    split = est.tensor_split_fit
    fitted = _estimate_core(info, replace(settings, tensor_split=tuple(float(c) for c in split)))
    spare = ", ".join(
        f"device {row.index} {(row.usable_bytes - row.total_bytes) / GIB:.2f} GiB" for row in fitted.devices
    )
    shown = ",".join(str(part) for part in split)
    est.notes.append(
        f"with --tensor-split {shown} it fits ({spare} to spare): every layer stays on a GPU, no speed lost"
    )


def _solve_experts(info: ModelInfo, settings: Settings, est: Estimate) -> None:
    if settings.cpu_moe:  # every expert is already on the host: nothing left to move
        return
    est.n_cpu_moe_fit = fit_n_cpu_moe(info, settings)
    if not est.fits and est.n_cpu_moe_fit is not None:
        after = _estimate_core(info, replace(settings, n_cpu_moe=est.n_cpu_moe_fit)).expert_host_bytes
        # what the run's own tensor overrides already keep there is not the flag's (QA 36 F9)
        already = est.expert_host_bytes or 0
        beside = ", beside those the tensor overrides already keep there" if already else ""
        est.notes.append(
            f"with --n-cpu-moe {est.n_cpu_moe_fit} it fits: the experts of the first {est.n_cpu_moe_fit} "
            f"layers ({format_bytes(after - already)}) go to host RAM{beside}, at some speed cost (measure "
            "tokens/s)"
        )


def _moe_note(info: ModelInfo, est: Estimate) -> str:
    if est.expert_host_bytes:
        return (
            f"MoE: {info.n_experts} experts, {info.n_experts_used} active per token; "
            f"{format_bytes(est.expert_host_bytes)} of them in host RAM"
        )
    return f"MoE: all {info.n_experts} experts are resident, {info.n_experts_used} active per token"


def _applied_quant(info: ModelInfo, settings: Settings, est: Estimate) -> None:
    est.quant_applied = bool(settings.quant) and settings.quant != info.quant
    if est.quant_applied:
        est.quant, est.bits_per_weight = settings.quant, q.bits_per_weight(settings.quant)
        est.notes.extend(q.mix_notes(settings.quant))
    else:
        est.quant, est.bits_per_weight = info.quant or info.dtype, info.bits_per_weight


def _solve_context(info: ModelInfo, settings: Settings, est: Estimate) -> None:
    memory = settings.memory
    est.max_context = max_context(info, settings)
    step = memory.solver_step
    if not info.max_context and info.source != "flags":  # a file that gives no trained length
        est.notes.append(
            f"the model's trained context is not known (no max_position_embeddings or GGUF context_length): sized at context "
            f"{est.context:,}; the largest context is memory's alone, not the model's; pass --ctx"
        )
    elif not info.max_context and settings.context is None and memory.default_is_trained(settings):
        # numbers typed as flags give no trained length, the length an unset context means
        est.notes.append(
            f"context not given, and the flags do not say the model's trained length: sized at {est.context:,} "
            "tokens (--ctx to set it)"
        )
    if info.max_context and est.max_context >= info.max_context - step + 1:
        if memory.kv_from_budget:
            more = est.longest_request > info.max_context
        else:
            more = _fits(info, replace(settings, context=info.max_context + step))
        if more:
            est.notes.append(
                f"largest context capped at the model's trained length {info.max_context}; "
                "memory alone would allow more"
            )


def _solve_layers(info: ModelInfo, settings: Settings, est: Estimate) -> None:
    est.gpu_layers_fit = fit_gpu_layers(info, settings)
    if not est.fits and est.gpu_layers_fit < info.n_layers + 1:
        partial = _estimate_core(info, replace(settings, gpu_layers=est.gpu_layers_fit))
        # not even with that few layers (a refusal, or host RAM short): no layer count helps
        if not partial.fits:
            return
        est.host_bytes_needed = partial.host_bytes_needed
        est.notes.append(
            f"with --gpu-layers {est.gpu_layers_fit} it fits; the rest needs "
            f"{format_bytes(est.host_bytes_needed)} of host RAM"
        )


_HIGHEST_SHARE = 0.97  # a share above this leaves the driver and other processes next to nothing


def _solve_room(info: ModelInfo, settings: Settings, est: Estimate) -> None:
    """The moves that keep the weights as they are: an engine that sizes its KV cache from a share of the
    card (vLLM), over it, a larger share; any engine, an 8-bit KV cache; llama.cpp, a smaller micro-batch
    (QA 34 L3: a compute buffer over the budget at -ub 4096 was offered only a quarter of the context)."""
    if est.fits or est.refused:
        return
    if settings.memory.kv_from_budget and settings.on_gpu:
        _solve_share(info, settings, est)
        _solve_kv_8bit(info, settings, est)
    elif not settings.memory.kv_from_budget:
        _solve_flash(info, settings, est)
        _solve_kv_8bit(info, settings, est)
        _solve_ubatch(info, settings, est)


def _solve_flash(info: ModelInfo, settings: Settings, est: Estimate) -> None:
    """Flash attention on, where it is off in an engine whose compute buffer is a ggml graph: no KQ matrix of
    heads x cells x micro-batch, at no cost (QA 35 F16: the wizard's first move, never offered here)."""
    backend = get_backend(settings.backend)
    if backend.knob("ubatch") is None or backend.knob("flash_attn") is None:
        return
    if settings.memory.flash_on(info, settings):
        return
    if _estimate_core(info, replace(settings, flash_attn=True)).fits:
        est.flash_attn_fit = True
        est.notes.append("with flash attention on it fits (no KQ matrix in the compute buffer)")


_LEAST_UBATCH = 64  # below it prompt processing crawls, and the compute buffer saves little more


def _solve_ubatch(info: ModelInfo, settings: Settings, est: Estimate) -> None:
    """The largest micro-batch under the one asked, halving down to _LEAST_UBATCH, at which the context
    asked fits: the compute buffer grows with it, so it is the cheapest cut where that buffer is the excess
    (prompts process in smaller steps; the context and the weights stay)."""
    backend = get_backend(settings.backend)
    if backend.knob("ubatch") is None:
        return
    asked = settings.ubatch or backend.default("ubatch")
    if not isinstance(asked, int) or isinstance(asked, bool):
        return
    ubatch = asked // 2
    while ubatch >= _LEAST_UBATCH:
        if _estimate_core(info, replace(settings, ubatch=ubatch)).fits:
            est.ubatch_fit = ubatch
            est.notes.append(f"with a micro-batch of {ubatch} it fits (prompts process in smaller steps)")
            return
        ubatch //= 2


def _solve_share(info: ModelInfo, settings: Settings, est: Estimate) -> None:
    """The smallest larger share of the card (vLLM's --gpu-memory-utilization) at which the context asked
    fits, else the longest context the highest share gives (QA 33 V3: a 7B model over 0.92 of a 16 GiB card
    was offered only fp8 or CPU offload, where 0.97 runs it in 16 bits at a shorter context)."""
    now = round(settings.share, 2)
    for step in range(round(now * 100) + 1, round(_HIGHEST_SHARE * 100) + 1):
        share = step / 100
        if _estimate_core(info, replace(settings, safety=share)).fits:
            est.share_fit, est.share_fit_context = share, est.context
            est.notes.append(
                f"with --gpu-memory-utilization {share:g} it fits (less of the card left to others)"
            )
            return
    if now >= _HIGHEST_SHARE:
        return
    longest = max_context(info, replace(settings, safety=_HIGHEST_SHARE))
    if longest > est.max_context:
        est.share_fit, est.share_fit_context = _HIGHEST_SHARE, longest
        est.notes.append(
            f"with --gpu-memory-utilization {_HIGHEST_SHARE:g} the longest context that fits is {longest:,}"
        )


def _solve_kv_8bit(info: ModelInfo, settings: Settings, est: Estimate) -> None:
    """The engine's 8-bit KV type, where the cache is 16-bit: half the bytes a token, the weights untouched
    (QA 33 V4: --kv-cache-dtype fp8 doubles the longest context and was never named)."""
    eight = get_backend(settings.backend).kv_8bit()
    if eight is None or (settings.kv_dtype or "auto") not in ("auto", "f16", "bf16", "float16", "bfloat16"):
        return
    trial = replace(settings, kv_dtype=eight)
    if _estimate_core(info, trial).fits:
        est.kv_dtype_fit, est.kv_dtype_fit_context = eight, est.context
        est.notes.append(f"with the KV cache in {eight} it fits (half the bytes a token)")
        return
    longest = max_context(info, trial)
    if longest > est.max_context:
        est.kv_dtype_fit, est.kv_dtype_fit_context = eight, longest
        est.notes.append(f"with the KV cache in {eight} the longest context that fits is {longest:,}")


def _solve_quant(info: ModelInfo, settings: Settings, est: Estimate) -> None:
    """The first quantization at load, in the engine's own order, that fits (QA 21 F6: a transformers run
    over its card was offered no way out, where bnb-8bit or bnb-4bit would do). Said after the moves that
    keep the weights as they are; a checkpoint quantized ahead is not quantized again."""
    order = get_backend(settings.backend).quant_order
    if est.fits or est.refused or not order or info.quant or settings.quant not in order:
        return
    for quant in order[order.index(settings.quant) + 1 :]:
        if quant is None:
            continue
        trial = _estimate_core(info, replace(settings, quant=quant))
        if trial.fits:
            est.quant_fit = quant
            spare = format_bytes(max(trial.usable_bytes - trial.total_bytes, 0))
            est.notes.append(f"with --quant {quant} (quantized at load) it fits, {spare} to spare")
            return


def _solve_offload(info: ModelInfo, settings: Settings, est: Estimate) -> None:
    """vLLM's own way to hold weights a card cannot (QA 21 F5: tensor parallel on 24 + 12 GiB offered no
    way out): said after quantization, since every forward pass then reads those layers over PCIe."""
    if est.fits or est.refused:
        return
    est.cpu_offload_fit = fit_cpu_offload(info, settings, est.weights_bytes)
    if est.cpu_offload_fit is None:
        return
    each = " on each GPU" if settings.several else ""
    est.notes.append(
        f"with --cpu-offload-gb {est.cpu_offload_fit} it fits: that many GiB of the first layers' weights{each} "
        "stay in pinned host RAM and cross PCIe on every forward pass (much slower generation)"
    )


def _model_notes(info: ModelInfo, memory: MemoryAccounting) -> list[str]:
    """The model's own notes, as this engine reads the model (a vision tower in a file of its own)."""
    if not (info.vision_params and memory.tower_elsewhere):
        return list(info.notes)
    said = (
        f"vision tower: {info.vision_params / 1e9:.3f}B parameters in vision_config; {memory.tower_elsewhere}"
    )
    return [said if note.startswith("vision tower: ") else note for note in info.notes]


def _drop_ignored(settings: Settings) -> str | None:
    """Reset what the engine has no knob for (its accounting's `ignores`) and say which flags those were."""
    defaults = Settings()
    given = [name for name in settings.memory.ignores if getattr(settings, name) != getattr(defaults, name)]
    for name in given:
        setattr(settings, name, getattr(defaults, name))
    if not given:
        return None
    from vramtui.core.estimate.inputs import FLAGS  # the CLI's spelling (inputs.py builds on this module)

    flags = ", ".join(FLAGS.get(name, "--" + name.replace("_", "-")) for name in given)
    article = "an" if settings.backend[:1].lower() in "aeiou" else "a"
    return f"{flags}: not {article} {settings.backend} setting, left out"


def _default_cache_note(settings: Settings, est: Estimate) -> None:
    """llama-server's prompt cache grows in host RAM up to its default limit: not a load-time bill (it
    fills with use), but the host RAM a long session takes, so it is said (extras.py bills a given one)."""
    limit = get_backend(settings.backend).defaults.get("cache_ram")
    if settings.cache_ram is None and isinstance(limit, int) and limit > 0:
        est.notes.append(
            f"host RAM: llama-server's prompt cache fills up to {limit} MiB with use (--cache-ram; 0 "
            "turns it off); not in the totals"
        )


def capped_parallel(info: ModelInfo, settings: Settings) -> int:
    """`max_parallel`, never past the engine's own limit (llama.cpp's 256: `ps --fits` said 1024)."""
    cap = sequence_cap(settings)
    found = max_parallel(info, settings)
    return min(found, cap) if cap else found


def _expert_flag_notes(info: ModelInfo, settings: Settings, est: Estimate) -> None:
    """Expert flags that do less than they say: on a dense model, or past the model's layers."""
    if "n_cpu_moe" in settings.memory.ignores and "cpu_moe" in settings.memory.ignores:
        return
    if (settings.n_cpu_moe or settings.cpu_moe) and not info.is_moe:
        flag = "--cpu-moe" if settings.cpu_moe else f"--n-cpu-moe {settings.n_cpu_moe}"
        est.notes.append(f"{flag}: this model has no experts, so it moves nothing")
    elif settings.n_cpu_moe and settings.n_cpu_moe > info.n_layers:
        est.notes.append(
            f"--n-cpu-moe {settings.n_cpu_moe} is past the model's {info.n_layers} layers: every layer's "
            "experts go to host RAM (as --cpu-moe)"
        )


def sequence_cap(settings: Settings) -> int | None:
    """The most sequences the engine runs at once on these settings, whatever memory holds (None: no limit)."""
    return get_backend(settings.backend).sequence_cap(
        settings.parallel, settings.batch, settings.device_bytes, not settings.on_gpu
    )


def cap_note(settings: Settings, cap: int) -> str:
    """What stops the concurrency at `cap`: the engine's own limit, or the flag that sets it (vLLM)."""
    backend = get_backend(settings.backend)
    why = (
        f"{backend.knob('parallel')} {cap} caps it"
        if backend.parallel_caps_requests
        else f"{settings.backend} runs no more"
    )
    return f"at most {cap} sequence{'s' if cap != 1 else ''} at once: {why}"


def _sequence_limit(settings: Settings, est: Estimate, cap: int | None) -> None:
    """The engine's own limit on sequences at once (llama.cpp's 256; vLLM's --max-num-seqs): the
    concurrency answer stops there, and more asked for does not run, whatever memory holds."""
    if cap is None:
        return
    if est.max_parallel is not None and est.max_parallel > cap:
        est.max_parallel = cap
        est.max_parallel_capped = True
        est.notes.append(f"{cap_note(settings, cap)} (memory would hold more)")
    refusal = get_backend(settings.backend).sequence_refusal(settings.parallel, None)
    if refusal is not None:
        est.refuse(refusal)
        est.max_context = None  # no context starts it (QA 38 F13: "largest context 384,000 (300 slots)")


def _engine_layer_default(info: ModelInfo, settings: Settings) -> str | None:
    """A GPU run with no layer count takes the engine's own default: llama-cpp-python's server keeps every
    layer on the host unless told (QA 26 D1: sized as all on the GPU while its run put none there). Says
    so, and how many would fit."""
    backend = get_backend(settings.backend)
    default = backend.defaults.get("gpu_layers")
    if settings.gpu_layers is not None or not settings.on_gpu or settings.memory.auto_places_layers:
        return None
    if not isinstance(default, int) or isinstance(default, bool) or default > info.n_layers:
        return None  # "all", or no layer knob
    settings.gpu_layers = default
    slots = info.n_layers + 1
    fit = fit_gpu_layers(info, replace(settings, gpu_layers=None))
    knob = backend.knob("gpu_layers") or "gpu_layers"
    would = (
        f"all {slots} would fit ({knob} -1)" if fit >= slots else f"{fit} of {slots} would fit ({knob} {fit})"
    )
    return (
        f"no layer count given: {backend.name} puts {default} of {slots} layers on the GPU unless told "
        f"(its {knob} default); on this card {would}"
    )


def estimate(info: ModelInfo, settings: Settings) -> Estimate:
    """The breakdown and verdict, with the solvers' answers filled in."""
    settings = replace(settings)
    memory = settings.memory
    ignored_note = _drop_ignored(settings)
    context_note = None
    if settings.context == 0:
        trained, streams = trained_context(info), memory.auto_streams(settings)
        settings.context = trained * streams
        context_note = f"context 0: the model's own trained context, {trained:,} tokens" + (
            f", for each of {streams} KV streams (llama-server's fit, with --parallel given)"
            if streams > 1
            else ""
        )
    layers_note = _engine_layer_default(info, settings)
    requested_gpu_layers = settings.gpu_layers
    if memory.auto_places_layers and settings.gpu_layers is None and settings.on_gpu:
        # Ollama places as many layers as fit, like llama.cpp's --fit
        settings.gpu_layers = fit_gpu_layers(info, settings)
    est = _estimate_core(info, settings)
    if settings.cpu_offload_gb and not memory.offloads_by_size:
        est.notes.append(f"--cpu-offload-gb is vLLM's: {settings.backend} keeps those weights where they are")
    _default_cache_note(settings, est)
    if context_note:
        est.notes.insert(0, context_note)
    if layers_note:
        est.notes.insert(0, layers_note)
    if ignored_note:
        est.notes.insert(0, ignored_note)
    if info.unknown_quant and not settings.quant:
        est.weights_unknown = info.unknown_quant
        est.notes.insert(0, unknown_weights_note(info.unknown_quant))
    _applied_quant(info, settings, est)
    if est.load_peak_fits is False:
        # no context or batch helps while the 16-bit load itself does not fit; the reason says so
        est.notes = list(dict.fromkeys(_model_notes(info, memory) + est.notes))
        return est
    _check_trained_context(info, settings, est)
    _solve_context(info, settings, est)
    # the concurrency answer is for the layers asked for (all of them by default), not for the placement
    # this one request got (Ollama's shrinks as slots are added); sequences of this run's own share, so
    # the answer is the same whether the engine's default context was typed or left out
    per_sequence = memory.per_sequence(est)
    cap = sequence_cap(settings)
    est.max_parallel = max_parallel(
        info,
        replace(
            settings,
            context=per_sequence if est.context else settings.context,
            gpu_layers=requested_gpu_layers,
        ),
        limit=cap + 1 if cap else MAX_PARALLEL_SEARCH,  # one past the engine's limit: whether it binds
    )
    if not cap and est.max_parallel >= MAX_PARALLEL_SEARCH:
        est.notes.append(f"{MAX_PARALLEL_SEARCH} sequences or more fit at once: the search stops there")
    est.max_parallel_tokens = per_sequence or None
    placed = settings.gpu_layers if requested_gpu_layers is None else None  # the engine's own placement
    est.max_parallel_all_layers = isinstance(placed, int) and placed < est.n_layers + 1
    _sequence_limit(settings, est, cap)
    slots = memory.slots_note(info, settings, est)
    if slots:
        est.notes.append(slots)
    _expert_flag_notes(info, settings, est)
    if memory.places_layers and settings.on_gpu and not est.refused:  # a CPU-only run places no layer
        _solve_split(info, settings, est)  # another split of the layers first: it costs no speed
        if info.is_moe and memory.offloads_tensors:  # experts to the host first: cheaper than layers
            _solve_experts(info, settings, est)
        _solve_layers(info, settings, est)
    _solve_room(info, settings, est)  # the weights as they are, at full speed: before quantizing
    _solve_quant(info, settings, est)
    _solve_offload(info, settings, est)
    if not est.fits and est.max_context:
        est.notes.append(f"largest context that fits: {est.max_context}")
    if info.is_moe:
        est.notes.append(_moe_note(info, est))
    if info.kv_lora_rank and settings.mla != 0:  # ik_llama.cpp's -mla 0 keeps per-head K and V
        est.notes.append("MLA: the cache holds a latent per token, not per-head K/V")
    est.notes = list(dict.fromkeys(_model_notes(info, memory) + est.notes))
    return est


def describe_math(info: ModelInfo, kv_dtype: str = "f16") -> str:
    """The worked arithmetic of the KV cache, for humans."""
    per_layer = kv_layer_bytes(info, 0, kv_dtype, MLA_LATENT_AND_V)
    return (
        f"{info.n_kv_heads} KV heads x {info.head_dim_k} x {kv_dtype} (K and V) = {per_layer:,} B per token per "
        f"layer; x {info.n_layers} layers = {per_layer * info.n_layers:,} B per token"
    )


def bytes_per_param(dtype: str) -> float:
    return q.bits_per_weight(dtype) / 8


__all__ = [
    "Estimate",
    "Settings",
    "describe_math",
    "estimate",
    "fit_gpu_layers",
    "hf_weights_bytes",
    "kv_bytes_per_token",
    "llama_cpp_weights",
    "load_model_info",
    "max_context",
    "max_parallel",
]
