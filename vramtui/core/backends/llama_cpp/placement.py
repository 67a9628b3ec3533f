"""Where a llama.cpp run puts each layer, tensor, cache and compute buffer: a GPU index, or host RAM.

`--gpu-layers N` fills N slots from the end (the output layer counts as one more slot): builds from about
b7300 fill the output layer's slot first ("offloading output layer to GPU", then N - 1 repeating layers),
older builds the repeating layers first (the output only with N > n_layer). Several GPUs share the
offloaded layers by `--tensor-split` (else by free memory: devices.layer_devices); `--split-mode none`
keeps them on `--main-gpu`. Each tensor then follows its layer unless an override rule (`-ot
PATTERN=DEVICE`, `--cpu-moe`, `--n-cpu-moe`) names a place: host RAM or any GPU (`CUDA1`, `Vulkan0`).
The KV cache and the recurrent state follow the layer; the token embedding stays on the host.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from vramtui.core.backends.llama_cpp import graph
from vramtui.core.estimate import devices, offload, recurrent
from vramtui.core.estimate.accounting import MLA_LATENT_AND_V
from vramtui.core.estimate.estimator import Settings
from vramtui.core.estimate.kvcache import is_swa, kv_layer_bytes
from vramtui.core.estimate.modelinfo import ModelInfo
from vramtui.core.estimate.weights import LayerWeights

Where = int | None  # a GPU index, or None for host RAM
# Tensors a row split leaves with their layer: 3D experts (no split buffer takes them), norms and biases.
NOT_ROW_SPLIT = ("_exps", "norm", ".bias")


@dataclass
class Layout:
    """One run's placement: each repeating layer's device, the output's, and every tensor's."""

    layers: list[Where]  # n_layers entries
    output: Where
    tensors: list[tuple[str, int, int, Where]]  # (name, layer, bytes, device)
    gpu_slots: int  # slots filled on GPUs (the output counts as one)
    devices: int  # GPUs in use
    weights: dict[Where, int] = field(default_factory=dict)
    kv: dict[Where, int] = field(default_factory=dict)
    rs: dict[Where, int] = field(default_factory=dict)
    moved_to_host: int = 0  # bytes the rules put on the host that their layer would have put on a GPU
    unmatched: tuple[str, ...] = ()  # the -ot patterns no layer tensor of this model matches
    mapped_extra: int = 0  # bytes of the host's mmapped span that are tensors a GPU holds

    @property
    def first_gpu_layer(self) -> int:
        return next((il for il, dev in enumerate(self.layers) if dev is not None), len(self.layers))


def gpu_slots(n: int, settings: Settings, build: graph.Build) -> tuple[int, bool]:
    """(repeating layers on GPUs, the output on a GPU) for --gpu-layers as this build counts them."""
    if not settings.on_gpu:
        return 0, False
    slots = n + 1 if settings.gpu_layers is None else min(settings.gpu_layers, n + 1)
    if build.output_first:
        return min(max(slots - 1, 0), n), slots >= 1
    return min(slots, n), slots > n


def _layer_devices(info: ModelInfo, settings: Settings, build: graph.Build) -> tuple[list[Where], Where, int]:
    n = info.n_layers
    repeating, output_on = gpu_slots(n, settings, build)
    first = n - repeating
    slots = repeating + (1 if output_on else 0)
    if not settings.several or (settings.split_mode or "layer") == "none":
        main = settings.main_gpu if settings.several else 0
        found: list[Where] = [main if il >= first else None for il in range(n)]
        return found, main if output_on else None, slots
    shares = devices.shares_for(settings.cards, settings.tensor_split)
    where = devices.layer_devices(n, first, slots, shares)
    return list(where[:n]), where[n], slots


def layout(
    info: ModelInfo,
    settings: Settings,
    weights: LayerWeights,
    kv: tuple[int, int, str],
    build: graph.Build,
    mla_layout: str = MLA_LATENT_AND_V,
) -> Layout:
    """Every layer, tensor, cache row and state where this run puts it; `mla_layout`: what an MLA model's
    cache keeps per token (mainline: the latent as K and the compressed KV as V)."""
    layers, output, slots = _layer_devices(info, settings, build)
    n_dev = len(settings.cards) if settings.on_gpu else 0
    rules = settings.offload_rules if settings.on_gpu else []
    found = Layout(layers, output, [], slots, n_dev)
    for name, layer, nbytes in weights.tensors:
        by_layer = layers[layer] if layer < len(layers) else None
        device = offload.placed(name, by_layer, rules) if rules else by_layer
        if device is not None and settings.on_gpu:
            device = min(device, n_dev - 1)  # a device past the cards given: the last one
        found.tensors.append((name, layer, nbytes, device))
        found.weights[device] = found.weights.get(device, 0) + nbytes
        if device is None and by_layer is not None:
            found.moved_to_host += nbytes
    if rules:
        # the layers' tensors and the ones outside them (an `-ot token_embd=CPU` matches the embedding)
        names = [name for name, _, _ in weights.tensors] + [
            "token_embd.weight",
            "output.weight",
            "output_norm.weight",
        ]
        found.unmatched = tuple(rule.pattern for rule in rules if not offload.matches_any(rule, names))
    _non_layer_weights(info, weights, found)
    if settings.mmap and settings.on_gpu:
        _mapped_spans(info, weights, found, settings.unified_memory)
    full, swa, kv_dtype = kv  # cells of full-attention and sliding-window layers, the cache type
    for il in range(info.n_layers):
        size = (swa if is_swa(info, il) else full) * kv_layer_bytes(info, il, kv_dtype, mla_layout)
        where = layers[il] if settings.kv_offload else None  # -nkvo: every layer's cache in host RAM
        found.kv[where] = found.kv.get(where, 0) + size
    return found


def _non_layer_weights(info: ModelInfo, weights: LayerWeights, found: Layout) -> None:
    """The token embedding on the host; the output matrix (a copy of the embedding when tied) and the rest
    (output norm) with the output layer, or on the host beside the embedding."""
    found.weights[None] = found.weights.get(None, 0) + weights.token_embd
    if found.output is not None:
        found.weights[found.output] = found.weights.get(found.output, 0) + weights.output + weights.other
    else:
        found.weights[None] += weights.other + (0 if info.tied_embeddings else weights.output)


def file_order(info: ModelInfo, weights: LayerWeights, found: Layout) -> list[tuple[str, int, Where]]:
    """(name, bytes, device) in the order llama-quantize writes a GGUF: the tensors of no layer first, then
    layer by layer, each sorted by name (llama_model_loader's weight_name_comparer)."""
    output = 0 if info.tied_embeddings else weights.output
    head = [
        ("output.weight", output, found.output),
        ("output_norm.weight", weights.other, found.output),
        ("token_embd.weight", weights.token_embd, None),
    ]
    body = sorted(found.tensors, key=lambda item: (item[1], item[0]))
    return head + [(name, nbytes, device) for name, _layer, nbytes, device in body]


def _span(order: list[tuple[str, int, Where]], wanted: Callable[[Where], bool]) -> int:
    """The bytes from the first to the last tensor `wanted` picks: what a mapping of the file covers."""
    picked = [i for i, (_name, _nbytes, device) in enumerate(order) if wanted(device)]
    if not picked:
        return 0
    return sum(nbytes for _name, nbytes, _device in order[picked[0] : picked[-1] + 1])


def _mapped_spans(info: ModelInfo, weights: LayerWeights, found: Layout, unified: bool) -> None:
    """With mmap the host's buffer is the file's span from its first host tensor to its last
    (llama_model_loader::get_mapping_range): GPU tensors between them count too (-ot exps=CPU maps
    nearly the whole file). Each part of a split GGUF is mapped apart. A GPU that shares host memory
    (Metal) maps its own span of the file as well."""
    parts = _file_parts(info, found) or [file_order(info, weights, found)]
    host = sum(_span(order, lambda device: device is None) for order in parts)
    own = found.weights.get(None, 0)
    found.mapped_extra = max(0, host - own)
    found.weights[None] = max(own, host)
    if unified and found.devices == 1:
        mapped = sum(_span(order, lambda device: device is not None) for order in parts)
        found.weights[0] = max(found.weights.get(0, 0), mapped)


def _file_parts(info: ModelInfo, found: Layout) -> list[list[tuple[str, int, Where]]]:
    """The GGUF's own tensor order, per part (empty when the layout is not the file's: a --quant, a log's
    buffers): each layer tensor where it was placed, the embedding on the host, the rest with the output."""
    if not info.file_order:
        return []
    where: dict[str, Where] = {name: device for name, _layer, _nbytes, device in found.tensors}
    if not all(name in where for name, *_ in info.file_order if name.startswith("blk.")):
        return []
    parts: dict[int, list[tuple[str, int, Where]]] = {}
    for name, part, _offset, nbytes in info.file_order:  # already by part and offset
        device = None if name == "token_embd.weight" else where.get(name, found.output)
        parts.setdefault(part, []).append((name, nbytes, device))
    return list(parts.values())


def add_recurrent(info: ModelInfo, found: Layout, sequences: int) -> None:
    """The RS buffer lives with its layer, like the KV cache: one row per sequence."""
    for il, device in enumerate(found.layers):
        size = recurrent.recurrent_state_bytes(info, sequences, [il])
        if size:
            found.rs[device] = found.rs.get(device, 0) + size


def host_layers(found: Layout) -> list[graph.HostLayer]:
    """Layers some of whose matrices stay in host RAM while the run has a GPU (norms and biases aside)."""
    by_layer: dict[int, list[int]] = {}
    experts: dict[int, list[int]] = {}
    for name, layer, nbytes, device in found.tensors:
        if device is None and "norm" not in name and ".bias" not in name:
            by_layer.setdefault(layer, []).append(nbytes)
            if "_exps" in name:
                experts.setdefault(layer, []).append(nbytes)
    return [
        graph.HostLayer(layer, tuple(sizes), found.layers[layer] is None, tuple(experts.get(layer, ())))
        for layer, sizes in sorted(by_layer.items())
    ]


def device_work(found: Layout, host_output: int) -> dict[int, graph.DeviceWork]:
    """What each GPU computes; the first GPU also multiplies the host-resident matrices."""
    layers: dict[int, list[int]] = {}
    experts: dict[int, set[int]] = {}
    for il, device in enumerate(found.layers):
        if device is not None:
            layers.setdefault(device, []).append(il)
    for name, layer, _nbytes, device in found.tensors:
        if device is not None and "_exps" in name:
            experts.setdefault(device, set()).add(layer)
    target = next((dev for dev in found.layers if dev is not None), found.output)
    if target is None:
        target = 0
    hosted = tuple(host_layers(found))
    work = {}
    for device in range(found.devices):
        work[device] = graph.DeviceWork(
            layers=tuple(layers.get(device, [])),
            expert_layers=tuple(sorted(experts.get(device, set()))),
            output=found.output == device,
            host=hosted if device == target else (),
            host_output=host_output if device == target and found.output is None else 0,
            casts_masks=device == target,
        )
    return work


def row_split(found: Layout, shares: list[float]) -> None:
    """`--split-mode row`: every offloaded layer's 2D matrices spread over the devices by the split."""
    total = sum(shares) or 1.0
    for name, _layer, nbytes, device in found.tensors:
        if device is None or any(word in name for word in NOT_ROW_SPLIT):
            continue
        found.weights[device] -= nbytes
        for other, part in enumerate(shares):
            found.weights[other] = found.weights.get(other, 0) + int(nbytes * part / total)
