"""Several GPUs: which device each layer, tensor and buffer lands on, and the verdict of the tightest card.

llama.cpp (`--split-mode layer`, its default) gives each device a contiguous run of layers, apportioned by
`--tensor-split` (else by each card's memory) with the same float arithmetic as llama-model.cpp
(`std::upper_bound(splits, (il - i_gpu_start) / act_gpu_layers)` over the normalised prefix sums, the output
layer counted as one more slot); each layer's KV cache and recurrent state live with it, every device with
layers holds a compute buffer, and the output layer (with the logits phase of the graph) sits on the last
one. With every layer offloaded, layer split, the KV cache offloaded and no tensor override, llama-context.cpp
turns pipeline parallelism on: the scheduler then keeps GGML_SCHED_MAX_COPIES (4) copies of each split's
inputs (the hidden state handed from device to device, the KQ mask, the positions) so micro-batches overlap.
`--split-mode row` spreads each layer's 2D matrices over every device by rows (the CUDA split buffer, which
takes no 3D expert tensor); the rest stays with the layer's device. `--split-mode none` puts everything on
`--main-gpu`.

vLLM: tensor parallelism divides the weights over the ranks and the KV heads with them (a rank keeps at
least one head: with fewer KV heads than ranks they are replicated); pipeline parallelism gives each stage a
run of layers as vllm/distributed/utils.py's get_pp_indices does (the remainder to the stages before the
last), the embedding to the first stage and the LM head to the last.

transformers (accelerate's `device_map="auto"`, transformers/integrations/accelerate.py): every card's free
memory is a cap; "auto"/"balanced" (get_balanced_memory) lower every cap but the last card's to
total / cards + 1.25 x the largest block (a decoder layer, kept whole by no_split_module_classes, or the
embedding), "balanced_low_0" leaves card 0 only what the others cannot take, "sequential" keeps the caps;
bitsandbytes takes 90% of each. infer_auto_device_map then walks the modules in order (embed_tokens, the
layers, norm, lm_head; a tied lm_head goes with the embedding), fills a card up to its cap and moves on,
keeping room on the first card (and in host RAM) for the largest module still to place; what no card takes
goes to host RAM (its layers run on the first card, their weights copied in on every forward pass).

Engine-neutral parts only: the families' memory.py (llama.cpp: its placement.py) call these with their own
per-layer figures.
"""

from __future__ import annotations

import struct
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from vramtui.core.errors import VramtuiError

if TYPE_CHECKING:
    from vramtui.core.estimate.modelinfo import ModelInfo

SPLIT_MODES = ("layer", "row", "none")
# ggml-backend.cpp: the copies the scheduler keeps of each split's inputs with pipeline parallelism.
GGML_SCHED_MAX_COPIES = 4


@dataclass
class DeviceRow:
    """One device's share of the estimate (bytes), as `--json` `devices` lists it."""

    index: int
    weights_bytes: int = 0
    kv_cache_bytes: int = 0
    recurrent_state_bytes: int = 0
    compute_buffer_bytes: int = 0
    runtime_bytes: int = 0
    cuda_graphs_bytes: int = 0  # vLLM's graphs where its budget holds them (from 0.21)
    total_bytes: int = 0
    device_bytes: int = 0
    usable_bytes: int = 0
    fits: bool = True
    layers: int = 0  # repeating layers placed here (the output layer not counted)

    def settle(self, share: float, extra: int = 0) -> DeviceRow:
        """Fill the total (plus `extra`, parts with no column of their own), the usable bytes and the verdict."""
        self.total_bytes = (
            self.weights_bytes
            + self.kv_cache_bytes
            + self.recurrent_state_bytes
            + self.compute_buffer_bytes
            + self.runtime_bytes
            + self.cuda_graphs_bytes
            + extra
        )
        self.usable_bytes = int(self.device_bytes * share)
        self.fits = self.total_bytes <= self.usable_bytes
        return self

    def to_dict(self) -> dict[str, int | bool]:
        return asdict(self)


def _f32(value: float) -> float:
    """The value as a C float holds it (llama.cpp computes the split points in single precision)."""
    return struct.unpack("f", struct.pack("f", value))[0]


def split_points(shares: Sequence[float]) -> list[float]:
    """llama-model.cpp's normalised prefix sums of the split proportions, in float."""
    total = 0.0
    points = []
    for share in shares:
        total = _f32(total + _f32(share))
        points.append(total)
    if total <= 0:
        raise VramtuiError("--tensor-split: the proportions add up to 0")
    return [_f32(point / total) for point in points]


def layer_devices(
    n_layers: int, first_gpu_layer: int, gpu_layers: int, shares: Sequence[float]
) -> list[int | None]:
    """The device of each layer 0..n_layers (the last slot is the output layer); None: the host.

    `first_gpu_layer` and `gpu_layers` as the estimate places them (the output counts as one more layer)."""
    points = split_points(shares)
    act = min(gpu_layers, n_layers + 1)
    found: list[int | None] = []
    for il in range(n_layers + 1):
        if il < first_gpu_layer or il - first_gpu_layer >= act or act <= 0:
            found.append(None)
            continue
        ratio = _f32(_f32(il - first_gpu_layer) / act)
        found.append(min(bisect_right(points, ratio), len(points) - 1))
    return found


def simplest_split(n_layers: int, counts: tuple[int, ...], largest: int = 16) -> tuple[int, ...]:
    """The smallest whole proportions (each at most `largest`) that give the same layers to each card as
    `counts` (layer slots per card): `2,1` rather than `27,14`. Two cards only; else `counts` itself."""
    if len(counts) != 2:
        return counts
    wanted = layer_devices(n_layers, 0, n_layers + 1, counts)
    for total in range(2, 2 * largest + 1):
        for first in range(max(0, total - largest), min(largest, total) + 1):
            pair = (first, total - first)
            if layer_devices(n_layers, 0, n_layers + 1, pair) == wanted:
                return pair
    return counts


def parse_split(text: str) -> tuple[float, ...]:
    """`3,1` or `0.75,0.25` (llama.cpp's -ts; also `3/1`): non-negative proportions."""
    parts = [part.strip() for part in str(text).replace("/", ",").split(",") if part.strip()]
    if not parts:
        raise ValueError("give proportions such as 3,1")
    try:
        values = tuple(float(part) for part in parts)
    except ValueError:
        raise ValueError(f"{text!r}: proportions such as 3,1") from None
    if any(value < 0 or value != value for value in values) or not sum(values) > 0:
        raise ValueError(f"{text!r}: proportions must be non-negative and not all 0")
    return values


def check_layout(
    n_devices: int, tensor_split: Sequence[float], split_mode: str | None, main_gpu: int, tp: int, pp: int
) -> None:
    """The multi-GPU settings agree with each other and with the cards given; a one-line error if not."""
    if split_mode is not None and split_mode not in SPLIT_MODES:
        raise VramtuiError(f"--split-mode {split_mode!r}: use layer, row or none")
    if tp < 1 or pp < 1:
        raise VramtuiError("--tensor-parallel-size and --pipeline-parallel-size must be at least 1")
    if tensor_split and len(tensor_split) > n_devices:
        example = ",".join(["24GiB"] * len(tensor_split))
        given = f"{n_devices} card{'s are' if n_devices != 1 else ' is'} given"
        raise VramtuiError(
            f"--tensor-split names {len(tensor_split)} devices but {given}: give one --gpu-mem size per card "
            f"({example})"
        )
    if not 0 <= main_gpu < max(n_devices, 1):
        raise VramtuiError(f"--main-gpu {main_gpu}: there are {n_devices} card(s) (0..{n_devices - 1})")
    if tp * pp > 1 and tp * pp > n_devices:
        raise VramtuiError(
            f"tensor x pipeline parallel = {tp * pp} ranks need as many cards; {n_devices} given "
            "(--gpu-mem 24GiB,24GiB,...)"
        )


def shares_for(cards: Sequence[int], tensor_split: Sequence[float]) -> list[float]:
    """The split proportions: --tensor-split (missing devices 0), else each card's memory, as llama.cpp
    splits by free memory when no split is given."""
    if tensor_split:
        return [float(tensor_split[i]) if i < len(tensor_split) else 0.0 for i in range(len(cards))]
    return [float(card) for card in cards]


def pp_layer_counts(n_layers: int, stages: int) -> list[int]:
    """vLLM's get_pp_indices: n // pp layers per stage, the remainder to the stages before the last."""
    counts = [n_layers // stages] * stages
    for i in range(2, n_layers % stages + 2):
        counts[-i] += 1
    return counts


def kv_heads_per_rank(kv_heads: int, tp: int) -> int:
    """vLLM: a rank holds kv_heads / tp heads, at least one (replicated when there are fewer than ranks)."""
    return max(1, kv_heads // max(1, tp))


def tightest(rows: Sequence[DeviceRow]) -> DeviceRow | None:
    """The card with the least room left (the one that decides the verdict)."""
    return min(rows, key=lambda row: row.usable_bytes - row.total_bytes) if rows else None


def describe_rows(rows: Sequence[DeviceRow]) -> str:
    """`device 1 over by 2.1 GiB` for the cards that do not fit (empty when all do)."""
    from vramtui.core.units import format_bytes

    over = [row for row in rows if not row.fits]
    return "; ".join(
        f"device {row.index} over by {format_bytes(row.total_bytes - row.usable_bytes)}" for row in over
    )


# --- llama.cpp ---------------------------------------------------------------------------------------------


# --- vLLM ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RankShare:
    """What one vLLM rank (tensor-parallel rank `tp_rank` of pipeline stage `stage`) holds."""

    index: int  # the card: stage * tp + tp_rank
    stage: int
    layers: range  # the decoder layers of its stage
    weights_bytes: int
    kv_bytes_per_token: int


def vllm_ranks(
    info: ModelInfo, weights: int, kv_dtype: str, mla_layout: str, tp: int, pp: int
) -> list[RankShare]:
    """Each rank's weights and KV bytes per token under tensor parallel `tp` x pipeline parallel `pp`."""
    from vramtui.core.estimate.kvcache import kv_layer_bytes

    n = max(1, info.n_layers)
    width = weights / max(1, info.n_params or 1)  # bytes per parameter as loaded
    embedding = int(info.vocab * info.hidden * width)
    head = 0 if info.tied_embeddings or info.encoder_only else embedding
    body = max(0, weights - embedding - head)
    counts = pp_layer_counts(n, pp)
    shares: list[RankShare] = []
    start = 0
    for stage, count in enumerate(counts):
        layers = range(start, start + count)
        start += count
        stage_bytes = body * count / n
        stage_bytes += embedding if stage == 0 else 0
        stage_bytes += (head or (embedding if pp > 1 else 0)) if stage == pp - 1 else 0
        per_token = 0
        replicated = 0
        for layer in layers:
            full = kv_layer_bytes(info, layer, kv_dtype, mla_layout)
            heads = info.kv_heads_at(layer)
            if info.kv_lora_rank or not heads:  # an MLA latent is not split by heads: every rank keeps it
                per_token += full
                continue
            kept = kv_heads_per_rank(heads, tp)
            per_token += full * kept // heads
            # a rank keeps `kept` heads of the K and V projections, more than its 1/tp share when replicated
            replicated += max(0, kept - heads / tp) * info.head_dim_k * 2 * info.hidden * width
        for tp_rank in range(tp):
            shares.append(
                RankShare(stage * tp + tp_rank, stage, layers, int(stage_bytes / tp + replicated), per_token)
            )
    return shares


# --- transformers: accelerate's device map -------------------------------------------------------------------

DEVICE_MAPS = ("auto", "balanced", "balanced_low_0", "sequential")
# get_balanced_memory: a card's share grows by this many of the largest block, so no layer is left over
BALANCED_BUFFER = 1.25
# bitsandbytes' adjust_max_memory: room for the buffers quantizing creates
BNB_CAP_SHARE = 0.9
HOST_DEVICES = ("cpu", "disk")

Cap = dict[int | str, int | None]  # accelerate's max_memory: a card index or "cpu" -> bytes (None: no limit)


@dataclass(frozen=True)
class ModuleMap:
    """Where accelerate puts each module: a card index, or None for host RAM (cpu, disk)."""

    embedding: int | None
    layers: tuple[int | None, ...]
    norm: int | None
    lm_head: int | None

    def on_host(self) -> list[int]:
        """The layers no card took."""
        return [il for il, device in enumerate(self.layers) if device is None]


def parse_max_memory(text: str) -> Cap:
    """`0=20GiB,1=46GiB,cpu=64GiB` (the runner's --max-memory, a profile's max_memory) as accelerate reads it."""
    from vramtui.core.units import parse_size_with_unit

    caps: Cap = {}
    for part in str(text).split(","):
        if not part.strip():
            continue
        device, sep, size = part.partition("=")
        key = device.strip().lower()
        if not sep or not (key.isdigit() or key in HOST_DEVICES):
            raise VramtuiError(f"max_memory: {part.strip()!r} is not DEVICE=SIZE (0=20GiB,1=46GiB,cpu=64GiB)")
        try:
            # a bare number is refused as accelerate refuses it ("20": 20GiB?), never read as bytes
            caps[int(key) if key.isdigit() else key] = parse_size_with_unit(size.strip())
        except (ValueError, VramtuiError) as error:
            bare = "unit" in str(error) or "no size" in str(error)  # a number without its unit: say which
            said = str(error) if bare else f"{size.strip()!r} is not a size such as 20GiB"
            raise VramtuiError(f"max_memory: {said}") from None
    if not caps:
        raise VramtuiError("max_memory: give DEVICE=SIZE pairs such as 0=20GiB,1=46GiB")
    return caps


def balanced_caps(caps: Cap, layers: Sequence[int], leaves: Sequence[int], total: int, low_zero: bool) -> Cap:
    """get_balanced_memory: each card but the last capped at its share of the model plus a buffer."""
    gpus = sorted(key for key, cap in caps.items() if isinstance(key, int) and (cap or 0) > 0)
    if len(gpus) < 2:
        return dict(caps)
    out = dict(caps)
    per_gpu = total // (len(gpus) - 1 if low_zero else len(gpus))
    per_gpu += int(BALANCED_BUFFER * max([*layers, *leaves, 0]))
    for idx in gpus[:-1]:
        out[idx] = min(per_gpu, out[idx] or 0) if not (low_zero and idx == gpus[0]) else out[idx]
    if low_zero:  # card 0 keeps only what the others cannot hold
        others = sum(out[i] or 0 for i in gpus[1:])
        out[gpus[0]] = min(max(0, total - others), out[gpus[0]] or 0)
    return out


def _unit(item: tuple[str, int, int, list]) -> int:
    """The largest module of an item that would not be split (the item itself when it has no parts)."""
    _key, _layer, size, parts = item
    return max((_unit(part) for part in parts), default=0) if parts else size


def accelerate_map(
    embedding: int, layers: Sequence[int], norm: int, lm_head: int, tied: bool, caps: Cap
) -> ModuleMap:
    """infer_auto_device_map over `model` (embed_tokens, layers, norm) and `lm_head`, in that order."""
    body = [("embedding", -1, embedding, []), *(("layer", il, size, []) for il, size in enumerate(layers))]
    body.append(("norm", -1, norm, []))
    items: list[tuple[str, int, int, list]] = [("model", -1, embedding + sum(layers) + norm, body)]
    if not tied:
        items.append(("lm_head", -1, lm_head, []))
    gpus = sorted(key for key in caps if isinstance(key, int))
    order: list[int | str] = [*gpus, "cpu", "disk"]
    main = {order[0], "cpu"}
    used = dict.fromkeys(order, 0)
    found: dict[tuple[str, int], int | None] = {}
    current = 0
    while items:
        item = items.pop(0)
        _key, _layer, size, parts = item
        device = order[current]
        cap = caps.get(device) if device != "disk" else None
        reserve = max((_unit(other) for other in items), default=0) if device in main else 0
        if cap is None or used[device] + size <= cap - reserve:
            used[device] += size
            place = device if isinstance(device, int) else None
            for part in parts or [item]:
                found[(part[0], part[1])] = place
            continue
        if parts:  # too big for this card: place its modules one by one
            items = parts + items
            continue
        current += 1  # a module that is not split: on to the next device
        items.insert(0, item)
    embedding_at = found[("embedding", -1)]
    return ModuleMap(
        embedding=embedding_at,
        layers=tuple(found[("layer", il)] for il in range(len(layers))),
        norm=found[("norm", -1)],
        lm_head=embedding_at if tied else found[("lm_head", -1)],
    )


# --- the wizard: moving the split off a full card ----------------------------------------------------------


@dataclass(frozen=True)
class SplitMove:
    """Move `layers` layers from device `source` to device `target`: `--tensor-split split`."""

    split: tuple[int, ...]
    layers: int
    source: int
    target: int

    def describe(self) -> str:
        shown = ",".join(str(part) for part in self.split)
        return (
            f"move {self.layers} layers from CUDA{self.source} to CUDA{self.target} (--tensor-split {shown})"
        )


def _device_index(name: str) -> int | None:
    digits = "".join(ch for ch in name if ch.isdigit())
    is_gpu = (
        name.upper().startswith(("CUDA", "ROCM", "VULKAN", "SYCL", "METAL")) and "HOST" not in name.upper()
    )
    return int(digits) if digits and is_gpu and "_" not in name else None


def printed_by_device(figures: dict[str, int | float], key: str) -> dict[int, int]:
    """A per-device figure the engine printed (`model_buffer.CUDA1`), by device index (GPUs only)."""
    found: dict[int, int] = {}
    for name, value in figures.items():
        figure, _, device = name.partition(".")
        index = _device_index(device) if figure == key and device else None
        if index is not None:
            found[index] = found.get(index, 0) + int(value)
    return found


def split_moves(
    figures: dict[str, int | float], n_layers: int, current: Sequence[float] = (), limit: int = 4
) -> list[SplitMove]:
    """Splits that move layers off the device that ran out (`oom_device`) to the least loaded other one.

    From what the failed run printed: each device's model and KV buffers (their layers' bytes) and the
    allocation that failed; as many layers move as that allocation's bytes, then one more at each step.
    The split is given in layers (the output layer counted on the last device), so llama.cpp places
    exactly these counts."""
    source = figures.get("oom_device")
    weights = printed_by_device(figures, "model_buffer")
    if source is None or n_layers <= 0 or len(weights) < 2 or int(source) not in weights:
        return []
    source = int(source)
    kv = printed_by_device(figures, "kv_buffer")
    compute = printed_by_device(figures, "compute_buffer")
    n_dev = max(weights) + 1
    basis = kv if len(kv) >= 2 else weights  # KV buffers grow by layer alone (no output, no embedding)
    if current:
        slots = layer_devices(n_layers, 0, n_layers + 1, shares_for([1] * n_dev, current))[:n_layers]
        counts = [sum(1 for d in slots if d == i) for i in range(n_dev)]
    else:
        total = sum(basis.values())
        counts = [round(n_layers * basis.get(i, 0) / total) for i in range(n_dev)]
        counts[-1] += n_layers - sum(counts)
    if counts[source] <= 1:
        return []
    load = {i: weights.get(i, 0) + kv.get(i, 0) + compute.get(i, 0) for i in range(n_dev) if i != source}
    target = min(load, key=lambda i: load[i])
    per_layer = (weights[source] + kv.get(source, 0)) / counts[source]
    needed = int(figures.get("oom_requested", per_layer))
    first = max(1, -(-needed // max(1, int(per_layer))))
    moves = []
    for moved in range(first, min(counts[source], first + limit)):
        new = list(counts)
        new[source] -= moved
        new[target] += moved
        new[-1] += 1  # the output layer's slot
        moves.append(SplitMove(tuple(new), moved, source, target))
    return moves
