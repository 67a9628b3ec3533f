"""What rides along with the model: a vision projector, a draft model, LoRA adapters, the prompt cache.

Each is added to the estimate's bill in the one memory vocabulary (weights, KV cache, compute on a
device or the host) and listed in `Estimate.extras`, one entry per file or setting, so the JSON, the text
and the pane name where each byte came from.

- The projector (`--mmproj`, llama.cpp's tools/mtmd): its tensors as stored in the mmproj GGUF (clip.cpp
  loads every one; `load_hparams: model size`), and the compute buffer of the warmup image
  (`get_dummy_batch`: `clip.vision.image_size` square). The buffer is the graph allocator's peak over the
  ViT's phases: the patch embedding (the f32 image and its im2col in the kernel's type), attention (six
  rows of the width alive, and without flash attention the KQ scores of every head, patches squared) and
  the MLP (three rows of the width and the up projection). With the projector offloaded the image also
  stays in a CPU compute buffer (the `CPU compute buffer` line beside `CUDA0`).
- The draft model (`--model-draft`): a second llama.cpp context sized by the same accounting, at the
  main context (or `--ctx-size-draft`), on `--device-draft` with `--gpu-layers-draft` layers; its runtime
  is the process's own, not a second one.
- LoRA adapters (llama.cpp `--lora`): each adapter tensor lands beside the tensor it adapts (llama-adapter:
  the base tensor's buffer type), so offloaded layers' adapters are on the device. vLLM (`--max-loras`,
  `--max-lora-rank`): it preallocates A and B slots for every LoRA-able linear layer on the device.
- The prompt cache (llama-server `--cache-ram MiB`): host RAM up to the limit, as the cache fills.
- MTP layers (`nextn_predict_layers` in GGUF metadata, `num_nextn_predict_layers` in config.json): an
  extra decoder layer's weights and KV cache.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vramtui.core.errors import VramtuiError
from vramtui.core.memory.parts import HOST, LABELS, MemoryBill, Part
from vramtui.core.units import MIB

if TYPE_CHECKING:
    from vramtui.core.estimate.estimator import Estimate, Settings
    from vramtui.core.estimate.modelinfo import ModelInfo

F32 = 4
# llama-server's prompt cache limit when --cache-ram is not given (`llama-server --help`: 8192 MiB).
DEFAULT_CACHE_RAM_MIB = 8192


# --- files --------------------------------------------------------------------------------------------


def _reader(path: str) -> Any:
    """The GGUF's header and tensor table (read once per file; its tokenizer arrays skipped)."""
    from vramtui.core.estimate.ggufheader import read_header

    file = Path(path).expanduser()
    if not file.is_file():
        raise VramtuiError(f"no such file: {path}")
    return read_header(file)  # a file that is not one is said with its path and what is wrong


def _field(reader: Any, key: str) -> Any:
    """A key's value; an array's first element (None: absent, empty or too long to have been read)."""
    value = reader.get(key)
    if isinstance(value, list):
        return value[0] if value else None
    return None if value is not None and not isinstance(value, str | int | float) else value


def _tensor_bytes(reader: Any) -> dict[str, tuple[int, str]]:
    """Each tensor's stored bytes and type name (ggml_nbytes: the data as stored)."""
    return {t.name: (t.n_bytes, t.type_name) for t in reader.tensors}


def _stamp(path: str) -> tuple[str, int, int]:
    file = Path(path).expanduser()
    try:
        stat = file.stat()
    except OSError:
        raise VramtuiError(f"no such file: {path}") from None
    return str(file.resolve()), stat.st_mtime_ns, stat.st_size


@dataclass(frozen=True)
class Projector:
    """A vision projector as clip.cpp loads it: its tensors and the ViT's shape at the warmup image."""

    path: str
    weights_bytes: int
    projector_type: str
    image_size: int
    patch_size: int
    n_embd: int
    n_head: int
    n_ff: int
    n_layer: int
    kernel_type: str  # the patch embedding's type: im2col writes in it

    @property
    def n_patches(self) -> int:
        side = self.image_size // max(1, self.patch_size)
        return side * side


def read_projector(path: str) -> Projector:
    """The mmproj GGUF's tensors and vision hparams (cached per file and modification time)."""
    return _read_projector(*_stamp(path))


@functools.lru_cache(maxsize=32)
def _read_projector(path: str, _mtime: int, _size: int) -> Projector:
    reader = _reader(path)
    if _field(reader, "general.architecture") != "clip":
        raise VramtuiError(f"--mmproj {path}: not a projector GGUF (general.architecture is not 'clip')")
    if not _field(reader, "clip.has_vision_encoder"):
        raise VramtuiError(f"--mmproj {path}: the projector has no vision encoder (audio only?)")
    tensors = _tensor_bytes(reader)

    def number(key: str) -> int:
        value = _field(reader, f"clip.vision.{key}")
        if value is None:
            raise VramtuiError(f"--mmproj {path}: clip.vision.{key} is missing")
        return int(value)

    kernel = tensors.get("v.patch_embd.weight", (0, "f16"))[1]
    return Projector(
        path=path,
        weights_bytes=sum(size for size, _type in tensors.values()),
        projector_type=str(
            _field(reader, "clip.projector_type") or _field(reader, "clip.vision.projector_type")
        ),
        image_size=number("image_size"),
        patch_size=number("patch_size"),
        n_embd=number("embedding_length"),
        n_head=number("attention.head_count"),
        n_ff=number("feed_forward_length"),
        n_layer=number("block_count"),
        kernel_type=kernel if kernel in ("f16", "f32", "bf16") else "f16",
    )


def projector_compute(proj: Projector, flash: bool) -> tuple[int, int]:
    """(the projector's main compute buffer, the image kept in the CPU one) at the warmup image."""
    n, e = proj.n_patches, proj.n_embd
    image = 3 * proj.image_size * proj.image_size * F32
    im2col = 3 * proj.patch_size * proj.patch_size * n * (F32 if proj.kernel_type == "f32" else 2)
    row = e * n * F32
    phases = [
        image + im2col,  # the image and its patches unrolled
        im2col + row,  # the patches and their embeddings
        6 * row + (0 if flash else proj.n_head * n * n * F32),  # attention
        3 * row + proj.n_ff * n * F32,  # the MLP
    ]
    return max(phases), image


@functools.lru_cache(maxsize=64)
def _lora_tensors(path: str, _mtime: int, _size: int) -> tuple[tuple[str, int], ...]:
    reader = _reader(path)
    if _field(reader, "general.type") not in (None, "adapter"):
        raise VramtuiError(f"--lora {path}: not a LoRA adapter GGUF (general.type is not 'adapter')")
    return tuple((name, size) for name, (size, _type) in _tensor_bytes(reader).items())


_LAYER_RE = re.compile(r"^blk\.(\d+)\.")


@functools.lru_cache(maxsize=32)
def _draft_info(path: str, _mtime: int, _size: int) -> ModelInfo:
    from vramtui.core.estimate.modelinfo import load_model_info

    info = load_model_info(path)
    if info.weights_source != "gguf":
        raise VramtuiError(f"--model-draft {path}: llama.cpp's draft model is a .gguf file")
    return info


def mtp_layers(info: ModelInfo) -> int:
    """Built-in multi-token-prediction layers the model declares (GGUF or config.json)."""
    return _mtp_layers(*_stamp(info.source)) if Path(info.source).expanduser().exists() else 0


@functools.lru_cache(maxsize=32)
def _mtp_layers(path: str, _mtime: int, _size: int) -> int:
    file = Path(path)
    if file.suffix == ".gguf":
        reader = _reader(path)
        arch = _field(reader, "general.architecture")
        return int(_field(reader, f"{arch}.nextn_predict_layers") or 0)
    config = file / "config.json" if file.is_dir() else file
    if config.name != "config.json" or not config.is_file():
        return 0
    try:
        cfg = json.loads(config.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return 0
    text = cfg.get("text_config") if isinstance(cfg.get("text_config"), dict) else cfg
    value = text.get("num_nextn_predict_layers") or text.get("mtp_num_hidden_layers") or 0
    return int(value) if isinstance(value, int) and value > 0 else 0


# --- the bill --------------------------------------------------------------------------------------------


def _entry(name: str, what: str, bill: MemoryBill, **more: Any) -> dict[str, Any]:
    return {"name": name, "label": what, **more, "bill": bill.by_place(), "device_bytes": bill.total(0)}


def _device_place(settings: Settings, device: str | None) -> int | str:
    """Where a draft or projector lives: device 0 (or the one named: CUDA1), the host for `none`."""
    if not settings.on_gpu or (device or "").strip().lower() == "none":
        return HOST
    digits = "".join(ch for ch in (device or "") if ch.isdigit())
    return int(digits) if digits else 0


def _layer_places(info: ModelInfo, settings: Settings, est: Estimate) -> list[int | str]:
    """Where each layer of the model sits (0..n, the last slot the output layer): its device on several
    GPUs, as llama.cpp splits them; device 0 or the host on one."""
    from vramtui.core.estimate import devices

    n = info.n_layers
    if est.layer_places and len(est.layer_places) == n + 1:  # as the engine's accounting placed them
        return list(est.layer_places)
    on_gpu = n + 1 if est.gpu_layers is None else est.gpu_layers
    first = n - min(on_gpu, n)
    if est.device != "gpu":
        return [HOST] * (n + 1)
    if not est.devices:
        return [0 if il >= first and (il < n or on_gpu > n) else HOST for il in range(n + 1)]
    if (settings.split_mode or "layer") == "none":
        return [settings.main_gpu if il >= first else HOST for il in range(n + 1)]
    shares = devices.shares_for(settings.cards, settings.tensor_split)
    found = devices.layer_devices(n, first, on_gpu, shares)
    return [HOST if where is None else where for where in found]


def _projector(settings: Settings, est: Estimate, flash: bool) -> dict[str, Any]:
    proj = read_projector(settings.mmproj or "")
    # clip.cpp takes the first GPU (ggml_backend_init_by_type(GPU)) whatever --main-gpu says, unless
    # MTMD_BACKEND_DEVICE (newer builds: --mmproj-device) names another
    place = _device_place(settings, None)
    if settings.several and settings.main_gpu != 0 and place != HOST:
        est.notes.append(
            "the projector goes to the first GPU (CUDA0), not --main-gpu: MTMD_BACKEND_DEVICE=CUDAn "
            "(newer llama-server: --mmproj-device) moves it"
        )
    main, image = projector_compute(proj, flash)
    bill = MemoryBill()
    bill.add(place, "weights", proj.weights_bytes)
    bill.add(place, "compute", main)
    if place != HOST:
        bill.add(HOST, "compute", image)  # the warmup image, read from host memory
    return _entry(
        "mmproj",
        "vision projector",
        bill,
        file=settings.mmproj,
        projector_type=proj.projector_type,
        warmup_image=f"{proj.image_size}x{proj.image_size}",
        patches=proj.n_patches,
        flash_attn=flash,
    )


def _draft(info: ModelInfo, settings: Settings, est: Estimate) -> dict[str, Any]:
    draft = _draft_info(*_stamp(settings.model_draft or ""))
    if draft.vocab and info.vocab and draft.vocab != info.vocab:
        est.notes.append(
            f"the draft's vocabulary ({draft.vocab}) differs from the model's ({info.vocab}): "
            "llama-server refuses a draft that is not compatible"
        )
    place = _device_place(settings, settings.device_draft)
    # llama-server copies the model's parameters for the draft: on several GPUs it is split as the model
    # is (--tensor-split, --split-mode), unless --device-draft names one device
    alone = settings.several and bool(settings.device_draft) and place != HOST
    cards = settings.cards
    ask = replace(
        settings,
        context=settings.ctx_size_draft or est.context,
        parallel=est.parallel,
        gpu_layers=settings.gpu_layers_draft,
        kv_dtype=None,  # the draft's cache has its own type flags (-ctkd/-ctvd), f16 by default
        on_gpu=place != HOST,
        cpu_moe=False,
        n_cpu_moe=None,
        override_tensor=(),
        quant=None,
        mmproj=None,
        model_draft=None,
        lora=(),
        cache_ram=None,
    )
    if alone:
        card = cards[int(place)] if int(place) < len(cards) else cards[0]
        ask = replace(ask, gpus=(), device_bytes=card, tensor_split=(), split_mode=None, main_gpu=0)
    sized = settings.memory.size(draft, ask)
    bill = MemoryBill()
    for where, parts in sized.bill.places.items():
        for part, nbytes in parts.items():
            if part == "runtime":
                continue  # one CUDA context per process and device, counted with the model
            bill.add(place if where == 0 else where, part, nbytes)
    return _entry(
        "draft",
        "draft model",
        bill,
        file=settings.model_draft,
        context=sized.context,
        gpu_layers=sized.gpu_layers,
        n_layers=draft.n_layers,
        kv_cells=sized.kv_cells,
    )


def _lora_llama_cpp(info: ModelInfo, settings: Settings, est: Estimate) -> list[dict[str, Any]]:
    # an adapter's tensors go to the buffer of the model tensor they modify: their layer's device
    places = _layer_places(info, settings, est)
    out = []
    for path in settings.lora:
        bill = MemoryBill()
        for name, size in _lora_tensors(*_stamp(path)):
            match = _LAYER_RE.match(name)
            layer = int(match.group(1)) if match else len(places) - 1
            bill.add(places[min(layer, len(places) - 1)], "weights", size)
        out.append(_entry("lora", "LoRA adapter", bill, file=path))
    return out


def vllm_lora_layer_bytes(info: ModelInfo, rank: int, tp: int = 1, dtype_bytes: int = 2) -> int:
    """One adapter slot's A and B in one decoder layer on one tensor-parallel rank (vLLM's lora/layers):
    a column-parallel layer (the merged qkv_proj: 3 slices, gate_up_proj: 2) keeps every slice's A whole
    (rank x hidden) and its B's rows for this rank's outputs; a row-parallel one (o_proj, down_proj) keeps
    A's columns for this rank's inputs and B whole (hidden x rank)."""
    from vramtui.core.estimate.devices import kv_heads_per_rank

    h, tp = info.hidden, max(1, tp)
    q = info.n_heads * info.head_dim_k // tp
    kept = kv_heads_per_rank(info.n_kv_heads, tp) if info.n_kv_heads else 0
    kv = kept * (info.head_dim_k + info.head_dim_v)
    ff = (info.intermediate or 4 * h) // tp
    lora_a = 3 * h + q + 2 * h + ff  # qkv, o, gate_up, down
    lora_b = (q + kv) + h + 2 * ff + h
    return rank * (lora_a + lora_b) * dtype_bytes


def vllm_lora_bytes(info: ModelInfo, max_loras: int, rank: int, dtype_bytes: int = 2) -> int:
    """vLLM's preallocated LoRA slots on one GPU: every layer's A and B for each of max_loras adapters."""
    return max_loras * vllm_lora_layer_bytes(info, rank, 1, dtype_bytes) * info.n_layers


def _lora_slots(info: ModelInfo, settings: Settings) -> dict[str, Any]:
    """vLLM's --max-loras slots: on one GPU, or each tensor-parallel rank's shard of its stage's layers."""
    from vramtui.core.estimate.devices import pp_layer_counts

    rank = settings.max_lora_rank or 16  # vLLM's default max_lora_rank
    loras = settings.max_loras or 0
    tp, pp = settings.tensor_parallel_size, settings.pipeline_parallel_size
    bill = MemoryBill()
    if tp * pp > 1:
        per_layer = vllm_lora_layer_bytes(info, rank, tp)
        for stage, count in enumerate(pp_layer_counts(max(1, info.n_layers), pp)):
            for tp_rank in range(tp):
                bill.add(stage * tp + tp_rank, "weights", loras * per_layer * count)
    else:
        bill.add(0, "weights", vllm_lora_bytes(info, loras, rank))
    return _entry("lora_slots", "LoRA slots (--max-loras)", bill, max_loras=loras, rank=rank)


def _mtp(info: ModelInfo, settings: Settings, est: Estimate, count: int) -> dict[str, Any] | None:
    """An extra decoder layer's weights and KV per MTP layer: a GGUF already holds them (block_count
    counts them); a config.json's num_hidden_layers does not."""
    if info.weights_source == "gguf":
        est.notes.append(
            f"{count} MTP layer(s) in the GGUF: their weights and KV cache are in the figures above"
        )
        return None
    place = _layer_places(info, settings, est)[-1]  # after the last layer: with the output layer
    every = [*est.bill.places]
    per_layer_weights = sum(est.bill.get("weights", where) for where in every) // max(1, info.n_layers)
    per_layer_kv = sum(est.bill.get("kv_cache", where) for where in every) // max(1, info.n_layers)
    bill = MemoryBill()
    bill.add(place, "weights", per_layer_weights * count)
    bill.add(place, "kv_cache", per_layer_kv * count)
    return _entry("mtp", "MTP layers", bill, layers=count)


def _cache_ram(settings: Settings, est: Estimate) -> dict[str, Any] | None:
    mib = settings.cache_ram or 0
    if mib < 0:
        est.notes.append(
            "--cache-ram -1: the prompt cache in host RAM has no limit and grows with every prompt"
        )
        return None
    if mib == 0:
        return None
    bill = MemoryBill()
    bill.add(HOST, "kv_cache", mib * MIB)  # saved slot states: KV cache copies in host RAM
    return _entry("prompt_cache", "prompt cache (--cache-ram)", bill, limit_mib=mib)


def collect(info: ModelInfo, settings: Settings, est: Estimate, flash: bool) -> list[dict[str, Any]]:
    """Every extra the settings ask for, sized; each entry holds its own bill."""
    memory = settings.memory
    found: list[dict[str, Any] | None] = []
    if settings.mmproj:
        if not memory.engine_probe:
            raise VramtuiError("--mmproj is llama.cpp's projector file: use a llama.cpp-family backend")
        found.append(_projector(settings, est, flash))
    if settings.model_draft:
        if not memory.places_layers:
            raise VramtuiError("--model-draft is llama.cpp's draft model: use a llama.cpp-family backend")
        found.append(_draft(info, settings, est))
    if settings.lora:
        found.extend(_lora_llama_cpp(info, settings, est))
    if settings.max_loras:
        found.append(_lora_slots(info, settings))
    if settings.cache_ram is not None and memory.offloads_tensors:
        found.append(_cache_ram(settings, est))
    count = mtp_layers(info) if settings.mtp else 0
    if count:
        found.append(_mtp(info, settings, est, count))
    return [entry for entry in found if entry]


def apply(info: ModelInfo, settings: Settings, est: Estimate, flash: bool) -> None:
    """Add the extras to the estimate: its bill, the device total and verdict, the host total."""
    entries = collect(info, settings, est, flash)
    if not entries:
        return
    place = est.place
    for entry in entries:
        for where, parts in entry["bill"].items():
            key = HOST if where == HOST else int(where)
            for part_key, nbytes in parts.items():
                est.bill.add(key, _PART_OF_KEY[part_key], nbytes)
    est.extras = entries
    if est.devices:
        _onto_devices(entries, settings, est)
        return
    device_total = est.bill.total(place)
    est.total_bytes = device_total
    est.host_bytes_needed = est.bill.total(HOST)
    est.weights_bytes = est.bill.get("weights", place)
    est.kv_cache_bytes = est.bill.get("kv_cache", place)
    est.activations_bytes = est.bill.get("compute", place) + (
        est.bill.get("output", HOST) if place == HOST else 0
    )
    if place != HOST:
        est.weights_host_bytes = est.bill.get("weights", HOST)
    est.fits = est.fits and device_total <= est.usable_bytes


_ROW_FIELDS = {
    "weights_bytes": "weights_bytes",
    "kv_cache_bytes": "kv_cache_bytes",
    "recurrent_state_bytes": "recurrent_state_bytes",
    "compute_buffer_bytes": "compute_buffer_bytes",
}


def _onto_devices(entries: list[dict[str, Any]], settings: Settings, est: Estimate) -> None:
    """Several GPUs: each extra's device bytes onto its card's row; the tightest card decides again."""
    from vramtui.core.estimate import devices

    rows = {row.index: row for row in est.devices}
    for entry in entries:
        for where, parts in entry["bill"].items():
            if where == HOST or int(where) not in rows:
                continue
            row = rows[int(where)]
            for key, nbytes in parts.items():
                field = _ROW_FIELDS.get(key)
                if field:
                    setattr(row, field, getattr(row, field) + nbytes)
                row.total_bytes += nbytes
            row.fits = row.total_bytes <= row.usable_bytes
    cards = est.devices
    est.weights_bytes = sum(row.weights_bytes for row in cards)
    est.kv_cache_bytes = sum(row.kv_cache_bytes for row in cards)
    est.activations_bytes = est.compute_buffer_bytes = sum(row.compute_buffer_bytes for row in cards)
    est.total_bytes = sum(row.total_bytes for row in cards)
    est.host_bytes_needed = est.bill.total(HOST)
    est.weights_host_bytes = est.bill.get("weights", HOST)
    fits = all(row.fits for row in cards)
    if est.fits and not fits:
        est.reason = devices.describe_rows(cards)
    est.fits = est.fits and fits


def describe(entry: dict[str, Any]) -> str:
    """`weights 0.84 MiB, compute buffers 0.86 MiB on device 0; compute buffers 0.57 MiB in host RAM`."""
    from vramtui.core.units import format_bytes

    spots = []
    for where, parts in entry["bill"].items():
        shown = ", ".join(
            f"{LABELS[_PART_OF_KEY[key]]} {format_bytes(value)}" for key, value in parts.items()
        )
        spots.append(f"{shown} {'in host RAM' if where == HOST else f'on device {where}'}")
    return "; ".join(spots)


def _part_of_key() -> dict[str, Part]:
    from vramtui.core.memory.parts import JSON_KEYS

    return {key: part for part, key in JSON_KEYS.items()}


_PART_OF_KEY = _part_of_key()


__all__ = ["Projector", "apply", "collect", "describe", "mtp_layers", "projector_compute", "read_projector"]
