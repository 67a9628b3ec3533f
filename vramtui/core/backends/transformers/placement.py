"""transformers on several GPUs: accelerate's device map (core/estimate/devices.py) and each card's bill.

Each decoder layer's weights, its dynamic cache and (a hybrid's) recurrent state sit on the card the map
gives the layer; every card that runs layers holds the prefill's MLP (and eager attention's scores), the
card with lm_head the logits; each card the process touches holds a CUDA context. Layers no card takes
run on the first card from host RAM (accelerate's CPU offload): their cache and work are on that card.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vramtui.core.errors import VramtuiError
from vramtui.core.estimate import devices
from vramtui.core.estimate.estimator import CUDA_CONTEXT_BYTES, Estimate, Settings
from vramtui.core.estimate.kvcache import kv_bytes_per_token
from vramtui.core.estimate.modelinfo import ModelInfo
from vramtui.core.estimate.weights import HfModules, dtype_bytes, hf_module_bytes
from vramtui.core.memory.parts import HOST, MemoryBill
from vramtui.core.units import format_bytes

if TYPE_CHECKING:
    from vramtui.core.backends.transformers.memory import Run

# the map sized when several cards are given and the profile names none (the runner's own default, with no
# --device-map, puts the whole model on cuda:0)
DEFAULT_DEVICE_MAP = "auto"


def _caps(settings: Settings, modules: HfModules, strategy: str) -> devices.Cap:
    """accelerate's max_memory for this run: the profile's caps, else each card's free memory."""
    cards = settings.cards
    if settings.max_memory:
        caps = devices.parse_max_memory(settings.max_memory)
        if not any(isinstance(key, int) for key in caps):
            # a host-only cap (cpu_offload's `cpu=NGiB`): the runner gives every GPU its free memory too
            # (runners/transformers_server.py with_every_gpu), as accelerate would read them as 0 bytes
            caps = {**{i: max(0, card - CUDA_CONTEXT_BYTES) for i, card in enumerate(cards)}, **caps}
        wrong = [key for key in caps if isinstance(key, int) and key >= len(cards)]
        if wrong:
            raise VramtuiError(
                f"max_memory names GPU {wrong[0]} but {len(cards)} card(s) are given (--gpu-mem 24GiB,24GiB)"
            )
    else:  # get_max_memory: what torch.cuda.mem_get_info says is free once the context is up
        caps = {index: max(0, card - CUDA_CONTEXT_BYTES) for index, card in enumerate(cards)}
    if strategy != "sequential":
        leaves = (modules.embedding, modules.lm_head, modules.norm)
        caps = devices.balanced_caps(
            caps, modules.layers, leaves, modules.total, low_zero=strategy == "balanced_low_0"
        )
    if modules.bitsandbytes:
        caps = {key: None if cap is None else int(cap * devices.BNB_CAP_SHARE) for key, cap in caps.items()}
    return caps


def module_map(settings: Settings, modules: HfModules, tied: bool) -> devices.ModuleMap:
    """Where each module goes under the profile's device map (auto when it names none)."""
    strategy = (settings.device_map or DEFAULT_DEVICE_MAP).strip().lower()
    single = strategy.removeprefix("cuda:")
    if single.isdigit() or strategy == "cuda":  # one card takes everything
        card = int(single) if single.isdigit() else 0
        if card >= len(settings.cards):
            raise VramtuiError(f"device_map {strategy}: there are {len(settings.cards)} card(s)")
        layers = (card,) * len(modules.layers)
        return devices.ModuleMap(card, layers, card, card)
    if strategy not in devices.DEVICE_MAPS:
        raise VramtuiError(
            f"device_map {settings.device_map!r}: vramtui sizes auto, balanced, balanced_low_0, sequential "
            "or cuda:N"
        )
    caps = _caps(settings, modules, strategy)
    return devices.accelerate_map(
        modules.embedding, modules.layers, modules.norm, modules.lm_head, tied, caps
    )


def _layer_state(info: ModelInfo, batch: int) -> list[int]:
    from vramtui.core.estimate import recurrent

    dtype = dtype_bytes(info.dtype if info.dtype != "fp8" else "bf16")
    total = batch * recurrent.hf_state_bytes_per_sequence(info, dtype, info.rs_ssm_f32)
    count = max(1, info.n_recurrent_layers)
    return [total // count if info.is_recurrent(il) else 0 for il in range(info.n_layers)]


def _rows(
    info: ModelInfo, settings: Settings, run: Run, modules: HfModules, where: devices.ModuleMap
) -> tuple[list[devices.DeviceRow], list[int], int]:
    """Each card's row, its margin (the caching allocator's share of the dynamic part) and the host bytes."""
    from vramtui.core.backends.transformers.memory import TORCH_FRAGMENTATION, layer_kv_bytes, prefill_parts

    rows = [devices.DeviceRow(index=i, device_bytes=card) for i, card in enumerate(settings.cards)]
    placed = [d for d in (where.embedding, where.norm, where.lm_head, *where.layers) if d is not None]
    first = min(placed, default=0)  # accelerate's main device: it runs what host RAM holds
    kv, state = layer_kv_bytes(info, run.context, run.batch, run.kv_dtype), _layer_state(info, run.batch)
    logits, work = prefill_parts(info, settings, run.context, run.batch)
    host = 0
    for size, device in (
        (modules.embedding, where.embedding),
        (modules.norm, where.norm),
        (modules.lm_head, where.lm_head),  # 0 when tied: the embedding's weight
    ):
        if device is None:
            host += size
        else:
            rows[device].weights_bytes += size
    runs = set()
    for il, device in enumerate(where.layers):
        if device is None:
            host += modules.layers[il]
        else:
            rows[device].weights_bytes += modules.layers[il]
            rows[device].layers += 1
        row = rows[first if device is None else device]
        row.kv_cache_bytes += kv[il]
        row.recurrent_state_bytes += state[il]
        runs.add(row.index)
    spilled = [modules.layers[il] for il in where.on_host()]
    if spilled:  # the offloaded layer being run is copied onto the main card
        rows[first].weights_bytes += max(spilled)
    for index in runs:
        rows[index].compute_buffer_bytes += work
    rows[first if where.lm_head is None else where.lm_head].compute_buffer_bytes += logits
    # reading every card's free memory (no max_memory given) makes a context on each of them
    touched = set(range(len(rows))) if not settings.max_memory else set(placed) | {first}
    margins = []
    for row in rows:
        row.runtime_bytes = CUDA_CONTEXT_BYTES if row.index in touched else 0
        margin = int(TORCH_FRAGMENTATION * (row.kv_cache_bytes + row.compute_buffer_bytes))
        margins.append(margin)
        row.settle(settings.share, margin)
    return rows, margins, host


def spill_note(where: devices.ModuleMap, host: int) -> str:
    return (
        f"{len(where.on_host())} layers ({format_bytes(host)}) go to host RAM (accelerate's CPU offload): "
        "every forward pass copies them to the first GPU, much slower"
    )


def _notes(
    settings: Settings, where: devices.ModuleMap, host: int, rows: list[devices.DeviceRow]
) -> list[str]:
    strategy = settings.device_map or DEFAULT_DEVICE_MAP
    counts = ", ".join(f"{row.layers} on GPU {row.index}" for row in rows)
    notes = [f'device_map="{strategy}": layers {counts}']
    if host:
        notes.append(spill_note(where, host))
    # with max_memory the runner takes device_map "auto" itself; without either it loads onto cuda:0
    if settings.device_map is None and not settings.max_memory:
        notes.append(
            'several GPUs sized as device_map="auto": set device_map (or max_memory) in the profile, '
            "the runner otherwise puts the whole model on cuda:0"
        )
    return notes


def size_device_map(info: ModelInfo, settings: Settings, run: Run, notes: list[str]) -> Estimate:
    """A transformers run over every card: the map, each card's row, and the tightest card's verdict."""
    modules = hf_module_bytes(info, settings.quant, run.weights)
    where = module_map(settings, modules, info.tied_embeddings)
    rows, margins, host = _rows(info, settings, run, modules, where)
    notes = notes + _notes(settings, where, host, rows)
    bill = MemoryBill()
    for row, margin in zip(rows, margins, strict=True):
        for part, nbytes in (
            ("weights", row.weights_bytes),
            ("kv_cache", row.kv_cache_bytes),
            ("recurrent_state", row.recurrent_state_bytes),
            ("compute", row.compute_buffer_bytes),
            ("runtime", row.runtime_bytes),
            ("margin", margin),
        ):
            bill.add(row.index, part, nbytes)  # type: ignore[arg-type]
    bill.add(HOST, "weights", host)
    # host RAM takes layers only where the profile's max_memory gives the CPU room: else it is a spill
    allowed = (
        bool(settings.max_memory) and (devices.parse_max_memory(settings.max_memory).get("cpu") or 0) > 0
    )
    said = [devices.describe_rows(rows)]
    if host and not allowed:
        said.insert(0, spill_note(where, host) + "; give max_memory a cpu=SIZE to accept it")
    reason = "; ".join(part for part in said if part) or None
    notes.append("dynamic cache: KV grows with the sequence; the figure is at the full context")
    return Estimate(
        backend=settings.backend,
        context=run.context,
        parallel=run.batch,
        weights_bytes=sum(row.weights_bytes for row in rows),
        weights_host_bytes=host,
        kv_cache_bytes=sum(row.kv_cache_bytes for row in rows),
        kv_bytes_per_token=kv_bytes_per_token(info, run.kv_dtype, "transformers"),
        activations_bytes=sum(row.compute_buffer_bytes for row in rows),
        overhead_bytes=sum(row.runtime_bytes for row in rows),
        fragmentation_bytes=sum(margins),
        total_bytes=sum(row.total_bytes for row in rows),
        device_bytes=sum(settings.cards),
        usable_bytes=sum(row.usable_bytes for row in rows),
        fits=all(row.fits for row in rows) and (not host or allowed),
        n_layers=info.n_layers,
        kv_dtype=run.kv_dtype,
        kv_cells=run.context * run.batch,  # every sequence's cache holds the whole context
        reason=reason,
        notes=notes,
        bill=bill,
        devices=rows,
    )
