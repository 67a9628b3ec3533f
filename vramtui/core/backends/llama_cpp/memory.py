"""How the llama.cpp family (llama-server, llama-cpp-python, Ollama) accounts memory.

Exact tensor bytes per layer; KV cells = context padded to 256; sliding-window layers keep
min(cells, window*sequences + ubatch) cells in one unified stream, window + ubatch per stream else; q8_0/q4_0 caches use ggml block sizes (34/32, 18/32 bytes per
element). Where every layer, tensor and cache goes (a GPU, or host RAM: layers not offloaded, the token
embedding, what `-ot` / `--n-cpu-moe` move) is placement.py's; the compute buffers, one per device and
one on the host, as the scheduler reserves them for one micro-batch, graph.py's. Ollama runs llama-server
with its own defaults: it picks the context from the free VRAM, gives every slot the full num_ctx and
places as many layers as fit.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace

from vramtui.core.backends import get_backend
from vramtui.core.backends.llama_cpp import graph, placement
from vramtui.core.estimate import devices, recurrent
from vramtui.core.estimate.accounting import MLA_DECOMPRESSED, MLA_LATENT, MLA_LATENT_AND_V, MemoryAccounting
from vramtui.core.estimate.estimator import CUDA_CONTEXT_BYTES, Estimate, Settings, host_ram_bytes, memoized
from vramtui.core.estimate.kvcache import kv_layer_bytes, round_up
from vramtui.core.estimate.modelinfo import ModelInfo
from vramtui.core.estimate.quant import kv_pair
from vramtui.core.estimate.weights import LayerWeights, before_layer, llama_cpp_weights
from vramtui.core.memory.parts import HOST, MemoryBill
from vramtui.core.units import GIB, MIB, format_bytes

CELL_PAD = 256


@dataclass(frozen=True)
class RunShape:
    """The settings as llama.cpp resolves them: its defaults filled in."""

    context: int  # KV cells asked for (every slot together)
    parallel: int
    ubatch: int
    flash: bool
    kv_dtype: str
    streams: int = 1  # KV streams: 1 for a unified cache (llama-server's -np auto), else one per slot
    swa_full: bool | None = None  # --swa-full given (None: the engine's own)


@dataclass(frozen=True)
class Placement:
    """Where the layers, their KV cache and the buffers go: the GPUs or host RAM (summed over the GPUs)."""

    gpu_layers: int  # slots on GPUs: the output layer counts as one more
    first_gpu_layer: int  # llama.cpp offloads the last layers
    output_on_gpu: bool
    w_gpu: int
    w_host: int
    kv_gpu: int
    kv_host: int
    moved_to_host: int = 0  # layer tensors --cpu-moe / --n-cpu-moe / -ot put in host RAM
    rs_gpu: int = 0  # recurrent state (RS buffer) of the recurrent layers on the GPUs / in host RAM
    rs_host: int = 0
    unmatched: tuple[str, ...] = ()  # -ot patterns that match no layer tensor: they move nothing
    mapped_extra: int = 0  # of w_host: the mmapped span's tensors that a GPU holds


def kv_cells(
    info: ModelInfo,
    context: int,
    parallel: int,
    ubatch: int,
    swa_full: bool = False,
    streams: int = 1,
    pad: int = CELL_PAD,
) -> tuple[int, int]:
    """(cells of full-attention layers, cells of sliding-window layers), over all KV streams, as llama.cpp
    sizes its cache (llama-kv-cache-iswa.cpp): one unified stream keeps the window of every sequence and
    a micro-batch; a stream per sequence keeps one window and a micro-batch each. `swa_full`: the
    sliding-window layers keep every cell too (--swa-full). `pad`: the build's padding of the cells."""
    cells = round_up(max(context, 1), pad)
    per_stream = cells
    if streams > 1:  # each stream its share of the context, padded to 256 (-c 8192 -np 256: 256 cells each)
        per_stream = round_up(-(-max(context, 1) // streams), pad)
        cells = per_stream * streams
    swa_cells = cells
    if info.swa_layers and info.sliding_window and not swa_full:
        if streams > 1:
            swa_cells = streams * min(per_stream, round_up(info.sliding_window + ubatch, pad))
        else:
            swa_cells = min(cells, round_up(info.sliding_window * parallel + ubatch, pad))
    return cells, swa_cells


def compute_bytes(info: ModelInfo, cells: int, ubatch: int, flash: bool, with_output: bool = True) -> int:
    """The graph allocator's peak for one micro-batch: the largest set of f32 tensors alive at once.

    The KQ mask (cells x ubatch; f16 with flash attention, else f32) is an input every layer reads, so it
    stays alive through the layers. Phases: attention (residual, normed input, Q, K, V, and without flash
    attention the KQ scores of all heads; soft_max runs in place), the MLP (gate, up and their product,
    residual and normed input) and the output (logits of every token of the micro-batch, as the worst
    case llama.cpp reserves for; `with_output` False: a device of a split that holds layers only).
    """
    f32 = 4
    h = info.hidden
    # the caller clamps the micro-batch to the whole context; `cells` may be one stream's (QA 17: clamping
    # to a stream's cells sized -np 4 -ub 2048 at 768 tokens, 2.7x under what llama-server reserved)
    ub = ubatch
    q_width = info.n_heads * info.head_dim_k
    kv_width = info.n_kv_heads * (info.head_dim_k + info.head_dim_v)
    mask = cells * round_up(ub, 64) * (2 if flash else f32)
    out_phase = (info.logits_width + h) * ub * f32
    attn_phase = mask + (3 * h + q_width + kv_width) * ub * f32
    if not flash:
        attn_phase += info.n_heads * cells * ub * f32
    ff = info.intermediate or 4 * h
    if info.is_moe:
        ff = max(
            ff if info.n_dense_layers else 0, (info.moe_intermediate or ff) * max(1, info.n_experts_used)
        )
    ffn_phase = mask + (3 * ff + 4 * h) * ub * f32
    return max(out_phase if with_output else 0, attn_phase, ffn_phase)


def _placement(found: placement.Layout) -> Placement:
    def gpus(values: dict[placement.Where, int]) -> int:
        return sum(value for device, value in values.items() if device is not None)

    return Placement(
        found.gpu_slots,
        found.first_gpu_layer,
        found.output is not None,
        gpus(found.weights),
        found.weights.get(None, 0),
        gpus(found.kv),
        found.kv.get(None, 0),
        found.moved_to_host,
        gpus(found.rs),
        found.rs.get(None, 0),
        found.unmatched,
        found.mapped_extra,
    )


def _notes(
    info: ModelInfo, settings: Settings, run: RunShape, where: Placement, cells: tuple[int, int]
) -> list[str]:
    notes: list[str] = []
    asked = round_up(max(run.context, 1), CELL_PAD)
    if run.streams > 1 and cells[0] > asked:
        notes.append(
            f"each of the {run.streams} slots gets {cells[0] // run.streams:,} cells: llama.cpp pads a slot's share "
            f"of the context ({run.context:,} / {run.streams}) up to a multiple of {CELL_PAD}, so the cache holds "
            f"{cells[0]:,} cells, not {run.context:,}"
        )
    if settings.on_gpu and where.gpu_layers == 0:
        # a GPU build still takes its context and compute buffers there (QA 28 M4: "everything runs from host
        # RAM" beside "total on the GPU 448 MiB")
        notes.append(
            "no layer on the GPU: the weights and the KV cache stay in host RAM; the GPU holds only the "
            "engine's context and its compute buffers"
        )
    if not settings.kv_offload and settings.on_gpu:
        notes.append(
            "--no-kv-offload: the KV cache and the attention that reads it are in host RAM and on the CPU "
            "(slow); the card no longer bounds the context, host RAM does"
        )
    if not run.flash and settings.on_gpu:
        notes.append("flash attention off: the compute buffer holds the KQ matrix (heads x cells x ubatch)")
    if where.moved_to_host:
        notes.append(
            f"{format_bytes(where.moved_to_host)} of layer tensors in host RAM by the override rules: "
            "the CPU computes them each token, slower than on the GPU"
        )
    if where.mapped_extra >= MIB:
        notes.append(
            f"host weights are llama.cpp's mapping of the file from its first host tensor to its last (as it "
            f"prints CPU_Mapped): {format_bytes(where.mapped_extra)} of it is tensors the GPU holds, page cache "
            f"the OS can reclaim; --no-mmap keeps only the host's own {format_bytes(where.w_host - where.mapped_extra)}"
        )
    typed = {rule.split("=", 1)[0] for rule in settings.override_tensor}  # not --n-cpu-moe's own patterns
    for pattern in where.unmatched:
        if pattern in typed or not (settings.n_cpu_moe or settings.cpu_moe):
            notes.append(f"-ot {pattern}=...: no layer tensor of this model matches it, so it moves nothing")
    if info.n_recurrent_layers:
        notes.append(recurrent.describe(info, run.parallel))
    if info.swa_layers and info.sliding_window:
        notes.append(f"{info.swa_layers} sliding-window layers keep {cells[1]} cells, the others {cells[0]}")
    return notes


def _bill(
    settings: Settings, found: placement.Layout, compute: dict[placement.Where, int], output_buffer: int
) -> MemoryBill:
    bill = MemoryBill()
    parts = (
        ("weights", found.weights),
        ("kv_cache", found.kv),
        ("recurrent_state", found.rs),
        ("compute", compute),
    )
    for part, values in parts:
        for device, value in sorted(values.items(), key=lambda item: -1 if item[0] is None else item[0]):
            bill.add(HOST if device is None else device, part, value)  # type: ignore[arg-type]
    for device in range(found.devices):
        bill.add(device, "runtime", CUDA_CONTEXT_BYTES)
    bill.add(HOST, "output", output_buffer)  # logits of the last token of each sequence, host side
    return bill


# Tensor types llama.cpp's CPU backend copies into a repacked layout for AVX2 (ggml-cpu/repack.cpp,
# ggml_repack_get_optimal_repack_type: q4_0, q4_K, iq4_nl and mxfp4 with rows in eights; checked on the
# llama-server built here: a Q4_K_M file's q4_K tensors, less the token embedding, are its CPU_REPACK
# buffer, its q6_K ones are not). The token embedding is only looked up, never repacked. A build with
# AMX compiled in repacks f16 and q8_0 too (an `AMX model buffer`), but whether a build has AMX cannot be
# told from the model or the CPU, so those copies are not counted.
_REPACKED_TYPES = frozenset({"q4_0", "q4_k", "iq4_nl", "mxfp4"})
# Where no GGUF says its tensors' types (a config.json and a file type): the file types whose every
# multiplied matrix is of a repacked type
_REPACKED_FILE_TYPES = frozenset({"q4_0", "iq4_nl", "mxfp4", "mxfp4_moe"})


def repack_copy_bytes(info: ModelInfo, settings: Settings, where: Placement) -> int:
    """The second host copy of the weights a CPU-resident llama.cpp run keeps (CPU_REPACK), per tensor
    type where the GGUF says the types (QA 18 F4: decided from the header's file type, a Q4_K_M file's
    q4_K tensors were not counted), else by the file type."""
    if settings.on_gpu and where.gpu_layers > 0:
        return 0  # offloaded layers are not repacked; a mixed run's host layers are left out too
    if not _cpu_has("avx2") or not graph.Build(settings.engine_build).repacks_on_cpu:
        return 0
    if info.weights_by_dtype and info.token_embd_type is not None:
        repacked = sum(
            size for kind, size in info.weights_by_dtype.items() if kind.lower() in _REPACKED_TYPES
        )
        if info.token_embd_type.lower() in _REPACKED_TYPES:
            repacked -= int(info.token_embd_bytes or 0)
        if info.vocab % 8 and str(info.output_type or "").lower() in _REPACKED_TYPES:
            repacked -= int(info.output_bytes or 0)  # rows interleaved by 8: an output of odd rows stays
        return max(min(repacked, where.w_host), 0)
    if str(info.quant or info.dtype or "").lower() not in _REPACKED_FILE_TYPES:
        return 0
    kept = int(info.token_embd_bytes or 0)  # only looked up, never multiplied: not repacked
    if info.vocab % 8:  # the repacked layouts interleave rows by 8: an output of odd rows stays as it is
        kept += int(info.output_bytes or 0)
    return max(where.w_host - kept, 0)


@functools.cache
def _cpu_has(flag: str) -> bool:
    """A flag of this machine's CPU (x86 /proc/cpuinfo); False elsewhere."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as cpuinfo:
            return any(line.startswith("flags") and flag in line.split() for line in cpuinfo)
    except OSError:
        return False


def pipeline_parallel(info: ModelInfo, settings: Settings, where: Placement) -> bool:
    """llama-context.cpp's condition: several devices, every layer and the output offloaded, layer split,
    the KV cache offloaded (vramtui sizes it so) and no tensor override."""
    return (
        settings.several
        and where.gpu_layers > info.n_layers
        and (settings.split_mode or "layer") == "layer"
        and not settings.offload_rules
    )


def _compute(
    info: ModelInfo, settings: Settings, g: graph.Graph, found: placement.Layout, weights: LayerWeights
) -> dict[placement.Where, int]:
    """Each device's compute buffer and the host's, as the scheduler reserves them."""
    if not settings.on_gpu:  # the CPU computes everything: one buffer, the graph's widest phase
        # each stream's tokens read its own cells: the mask and scores are a stream's cells x the micro-batch
        return {None: compute_bytes(info, g.cells // max(1, g.streams), g.ubatch, g.flash)}
    pipelined = pipeline_parallel(info, settings, _placement(found))
    host_output = 0 if found.output is not None else weights.output
    # -sm row assigns the layers to the devices as a layer split does (llama-model.cpp: the split points
    # decide each layer's device; only its matrices take the split buffer): each computes its own layers
    work = placement.device_work(found, host_output)
    found_compute: dict[placement.Where, int] = {}
    for device, todo in work.items():
        peak = graph.device_peak(g, todo)
        if pipelined and (todo.layers or todo.output):
            peak += (graph.SCHED_COPIES - 1) * _split_inputs(g, todo.casts_masks)
        found_compute[device] = peak
    hosted = placement.host_layers(found)
    found_compute[None] = graph.host_peak(g, hosted, pipelined, found.output is None)
    return found_compute


def _split_inputs(g: graph.Graph, casts_masks: bool) -> int:
    """One pipeline copy of what a device's split takes in: the hidden state, each mask (the f16 cast where
    another card casts it) and the token positions."""
    return g.hidden() + g.mask_elements(g.kinds) * g.mask_bytes_taken_in(casts_masks) + g.ubatch * 4


def _split_devices(info: ModelInfo, settings: Settings, found: placement.Layout, est: Estimate) -> None:
    """One row per card, and the tightest one decides."""
    bill = est.bill
    rows = []
    for index, card in enumerate(settings.cards):
        row = devices.DeviceRow(
            index=index,
            device_bytes=card,
            weights_bytes=bill.get("weights", index),
            kv_cache_bytes=bill.get("kv_cache", index),
            recurrent_state_bytes=bill.get("recurrent_state", index),
            compute_buffer_bytes=bill.get("compute", index),
            runtime_bytes=bill.get("runtime", index),
            layers=sum(1 for device in found.layers if device == index),
        )
        rows.append(row.settle(settings.share))
    est.devices = rows
    est.weights_bytes = sum(row.weights_bytes for row in rows)
    est.kv_cache_bytes = sum(row.kv_cache_bytes for row in rows)
    est.activations_bytes = est.compute_buffer_bytes = sum(row.compute_buffer_bytes for row in rows)
    est.overhead_bytes = sum(row.runtime_bytes for row in rows)
    est.total_bytes = sum(row.total_bytes for row in rows)
    est.device_bytes = sum(settings.cards)
    est.usable_bytes = sum(row.usable_bytes for row in rows)
    est.fits = all(row.fits for row in rows)
    if not est.fits:
        est.reason = devices.describe_rows(rows)
    if pipeline_parallel(info, settings, _placement(found)):
        est.notes.append(
            f"pipeline parallelism on: each device keeps {devices.GGML_SCHED_MAX_COPIES} copies of its "
            "split's inputs (hidden state, KQ mask) in its compute buffer"
        )


class LlamaCppMemory(MemoryAccounting):
    """llama-server and llama-cpp-python: the context is the whole cache, split across the slots."""

    solver_step = CELL_PAD
    context_is_per_sequence = False
    tower_elsewhere = "llama.cpp reads it from its own --mmproj file, not from these weights: not billed here"
    places_layers = True
    offloads_tensors = True
    engine_probe = True
    # vLLM's, HF's and ik_llama.cpp's own knobs
    ignores = (
        "tensor_parallel_size",
        "pipeline_parallel_size",
        "device_map",
        "max_memory",
        "mla",
        "attn_max_batch",
    )
    mla_layout = MLA_LATENT  # today's build; kv_layout says an older build's
    # llama-server caps the logits rows it reserves at one per sequence (builds since sched_reserve)
    server_outputs = True
    # llama-server's cache is one stream for every slot when it picks the slot count (-np auto)
    unified_kv = True
    # llama-server's fit (common/fit.cpp, on by default) gives a context left unset the trained length per
    # KV stream: `-np 2` alone (a cache that is not unified) is 2 x the trained length in all
    fit_widens_auto_context = True
    # the sliding-window layers keep only the window (plus a micro-batch) per sequence
    swa_full = False
    # a GGUF's MTP layers (last in block_count) are placed as layers, but their tensors are skipped
    # ("model has unused tensor blk.78... -- ignoring") and the main KV cache leaves them out (its layer
    # filter, il < n_layer()); --mtp loads them (an extra of the estimate)
    mtp_layers_loaded = False

    def mtp_kv_kept(self, settings: Settings) -> bool:
        """Does the main KV cache hold the MTP layers too?"""
        return self.mtp_layers_loaded

    def per_sequence(self, est: Estimate) -> int:
        """One slot's cells: its share of the context, padded as llama.cpp pads it (at least 256)."""
        return max(est.context, est.kv_cells or 0) // max(1, est.parallel)

    def default_kv_dtype(self, info: ModelInfo) -> str:
        return "f16"

    def default_context(self, settings: Settings) -> int:
        return int(get_backend(settings.backend).defaults.get("context", 4096))

    def default_is_trained(self, settings: Settings) -> bool:
        return self.default_context(settings) == 0  # llama-server's -c 0; llama-cpp-python's is 2048

    def default_flash(self, settings: Settings) -> bool:
        """The engine's own default: llama-server's `auto` is on wherever the backend supports it, the
        CPU included (its log says `Flash Attention enabled`); llama-cpp-python's server leaves it off, and
        so did every llama.cpp build before `auto` (round 56: an A100 server of b2167 reserved 3.2 GiB of KQ)."""
        if not self.build(settings).flash_by_default:
            return False
        return self.engine_default_flash(settings)

    def engine_default_flash(self, settings: Settings) -> bool:
        """The engine's `flash_attn` default as its profile table says it (`auto`: where supported)."""
        backend = get_backend(settings.backend)
        default = backend.default("flash_attn")
        if str(default).strip().lower() == "auto":
            return backend.flash_attn_auto_is_on
        return default is True

    def slot_cells(self, info: ModelInfo, context: int, parallel: int) -> int:
        """The cells asked for, from the context given (llama.cpp: the whole cache already)."""
        return context

    def run_shape(self, info: ModelInfo, settings: Settings) -> RunShape:
        defaults = get_backend(settings.backend).defaults
        context = settings.context
        if context is None:
            context = self.default_context(settings)
        auto = context == 0
        if auto:  # -c 0: the model's training context
            context = info.max_context or 4096
        parallel = settings.parallel or int(defaults.get("parallel", 1))
        batch = settings.batch or int(defaults.get("batch", 2048))
        ubatch = min(settings.ubatch or int(defaults.get("ubatch", 512)), batch)
        flash = settings.flash_attn
        if flash is None:
            flash = self.default_flash(settings)
        context = self.slot_cells(info, context, parallel)
        unified = self.unified(settings)
        streams = 1 if unified or not self.build(settings).at_least(graph.KV_STREAMS_BUILD) else parallel
        if auto:
            context *= self.auto_streams(settings)
        kv_dtype = self.kv_dtype(info, settings)
        return RunShape(context, parallel, ubatch, flash, kv_dtype, streams, settings.swa_full)

    def auto_streams(self, settings: Settings) -> int:
        """llama-server's fit gives each KV stream the trained length when the context is left unset and
        the cache is not unified (the slots given: `-np 2` alone is 2 x the trained length)."""
        if not self.fit_widens_auto_context or self.unified(settings):
            return 1
        return max(1, settings.parallel or 1)

    def run_context(self, info: ModelInfo, settings: Settings) -> int:
        return self.run_shape(info, settings).context

    def unified(self, settings: Settings) -> bool:
        """One KV stream for every slot: -kvu, or llama-server's own choice when it picks the slot count
        (-np auto); a stream per slot when --parallel is given."""
        if settings.kv_unified is not None:
            return settings.kv_unified
        return self.unified_kv and settings.parallel is None

    def slots_note(self, info: ModelInfo, settings: Settings, est: Estimate) -> str | None:
        """Said because the context is the whole cache here: one request may take all of a unified cache
        (-np auto), but only its slot's share of one split by --parallel."""
        flag = get_backend(settings.backend).knob("parallel")
        if est.parallel <= 1 or est.refused or flag is None:  # llama-cpp-python's server runs one at a time
            return None
        if self.unified(settings):
            why = "--kv-unified" if settings.kv_unified else f"{flag} left to the engine"
            return (
                f"{est.parallel} slots share one KV cache of {max(est.context, est.kv_cells or 0):,} tokens "
                f"({why}): one request may "
                "use all of it, and all of them together no more"
            )
        return (
            f"{est.parallel} slots of {self.per_sequence(est):,} tokens each ({flag} {est.parallel}): one "
            "request gets no more than its slot"
        )

    def flash_on(self, info: ModelInfo, settings: Settings) -> bool:
        return self.run_shape(info, settings).flash  # mtmd follows -fa: auto tries it on

    def size(self, info: ModelInfo, settings: Settings) -> Estimate:
        file_type = settings.quant if settings.quant and settings.quant != info.quant else None
        weights_key = ("llama_cpp_weights", id(info), file_type)  # the grid's memo (estimator.sizing_memo)
        given = info
        trunk = info.n_layers - info.mtp_layers
        if info.mtp_layers and not self.mtp_kv_kept(settings) and info.kv_layers is None:
            info = replace(info, kv_layers=trunk)
        if settings.quant and info.weights_source == "gguf" and file_type:
            # another file type than the GGUF's: size it from the shapes, as llama-quantize would
            info = replace(
                info,
                layer_bytes=None,
                layer_tensors=None,
                file_order=None,
                token_embd_bytes=None,
                output_bytes=None,
                params_exact=False,
            )
        run = self.run_shape(info, settings)
        weights = memoized(weights_key, given, lambda: llama_cpp_weights(info, file_type))
        if info.mtp_layers and not self.mtp_layers_loaded:
            weights = before_layer(weights, trunk)
        build = self.build(settings)
        cells, swa_cells = self.cells(info, run, build)
        layout = self.kv_layout(info, settings, run)
        found = placement.layout(info, settings, weights, (cells, swa_cells, run.kv_dtype), build, layout)
        placement.add_recurrent(info, found, run.parallel)
        if settings.several and (settings.split_mode or "layer") == "row":
            placement.row_split(found, devices.shares_for(settings.cards, settings.tensor_split))
        where = _placement(found)
        g = self.graph(info, run, build, settings)
        compute = _compute(info, settings, g, found, weights)
        # one row of logits per sequence (an encoder's: its pooled embedding)
        output_buffer = (info.logits_width or info.hidden) * run.parallel * 4
        bill = _bill(settings, found, compute, output_buffer)
        bill.add(HOST, "output", self.host_logits(info, run))
        repacked = repack_copy_bytes(info, settings, where)
        # mmapped, the file's pages stay beside the repacked copy; read without mmap, the repacked
        # tensors replace their file copies (a small CPU buffer beside CPU_REPACK)
        bill.add(HOST, "weights", repacked if settings.mmap else 0)
        est = _estimate(info, settings, run, where, bill, layout)
        est.counts_repack = repacked > 0 and settings.mmap
        est.kv_cells, est.output_buffer_bytes = cells, output_buffer
        est.compute_buffer_bytes = bill.get("compute", est.place)
        est.expert_host_bytes = where.moved_to_host
        est.layer_places = [HOST if device is None else device for device in [*found.layers, found.output]]
        est.notes = _notes(info, settings, run, where, (cells, swa_cells)) + self.logits_note(info, run)
        if settings.several and settings.on_gpu:
            _split_devices(info, settings, found, est)
        return est

    def cells(self, info: ModelInfo, run: RunShape, build: graph.Build | None = None) -> tuple[int, int]:
        """(cells of a full-attention layer, of a sliding-window one); a build before llama.cpp's
        sliding-window cache kept every cell in every layer."""
        swa_full = self.swa_full if run.swa_full is None else run.swa_full
        swa_full = swa_full or (build is not None and not build.at_least(graph.SWA_CACHE_BUILD))
        pad = CELL_PAD if run.flash or build is None else build.cell_pad_without_flash
        return kv_cells(info, run.context, run.parallel, run.ubatch, swa_full, run.streams, pad)

    def host_logits(self, info: ModelInfo, run: RunShape) -> int:
        """Logits a library keeps in host RAM beside llama.cpp's own output buffer (none: llama-server)."""
        return 0

    def logits_note(self, info: ModelInfo, run: RunShape) -> list[str]:
        return []

    def build(self, settings: Settings) -> graph.Build:
        """The engine build whose accounting applies (None: today's)."""
        return graph.Build(settings.engine_build)

    def kv_layout(self, info: ModelInfo, settings: Settings, run: RunShape) -> str:
        """What an MLA model's cache keeps per token: the latent alone today, a copy of it as V before;
        per-head K and V for a file converted before llama.cpp's MLA split (or read by a build before it)."""
        if not info.mla_latent:
            return MLA_DECOMPRESSED
        return MLA_LATENT if self.build(settings).at_least(graph.V_LESS_MLA_BUILD) else MLA_LATENT_AND_V

    def graph(
        self, info: ModelInfo, run: RunShape, build: graph.Build, settings: Settings | None = None
    ) -> graph.Graph:
        """The micro-batch the scheduler reserves: its tokens, its logits rows, the cache it reads."""
        cells, swa_cells = self.cells(info, run, build)
        ubatch = min(run.ubatch, cells)
        return graph.Graph(
            info=info,
            ubatch=ubatch,
            outputs=build.outputs(ubatch, run.parallel, self.server_outputs),
            flash=run.flash,
            cells=cells,
            swa_cells=swa_cells,
            streams=max(1, run.streams),
            build=build,
            kv_on_host=settings is not None and not settings.kv_offload and settings.on_gpu,
            mask_f16_with_flash=build.mask_f16_with_flash,
        )


def _estimate(
    info: ModelInfo, settings: Settings, run: RunShape, where: Placement, bill: MemoryBill, layout: str
) -> Estimate:
    usable = int(settings.device_bytes * settings.share)
    device_total = bill.total(0)
    est = Estimate(
        backend=settings.backend,
        context=run.context,
        parallel=run.parallel,
        weights_bytes=where.w_gpu,
        weights_host_bytes=bill.get("weights", HOST),  # with the repacked copy of a CPU-resident run
        kv_cache_bytes=where.kv_gpu,
        kv_bytes_per_token=sum(kv_layer_bytes(info, il, run.kv_dtype, layout) for il in range(info.n_layers)),
        activations_bytes=bill.get("compute", 0),
        overhead_bytes=bill.get("runtime", 0),
        fragmentation_bytes=0,
        total_bytes=device_total,
        device_bytes=settings.device_bytes,
        usable_bytes=usable,
        fits=device_total <= usable,
        host_bytes_needed=bill.total(HOST),
        gpu_layers=where.gpu_layers,
        n_layers=info.n_layers,
        kv_dtype=run.kv_dtype,
        bill=bill,
    )
    _refusals(settings, run, est)
    if not settings.on_gpu:
        # A CPU-only run: every row is host RAM, and the rows add up to the total.
        est.device = "host"
        # the weights row holds the repacked copy too (the bill's host weights)
        est.weights_bytes, est.weights_host_bytes = bill.get("weights", HOST), 0
        est.kv_cache_bytes = where.kv_host
        est.activations_bytes = bill.get("compute", HOST) + bill.get("output", HOST)
        est.total_bytes = est.host_bytes_needed = bill.total(HOST)
        est.fits = est.total_bytes <= usable and not est.refused  # QA: FITS beside `refused` with --cpu
    return est


def _refusals(settings: Settings, run: RunShape, est: Estimate) -> None:
    """What llama.cpp will not start with, whatever the card holds: a quantized V cache without flash
    attention; with --no-kv-offload, a cache in host RAM past this machine's RAM."""
    v_type = kv_pair(run.kv_dtype)[1]
    if not run.flash and _quantized_v(run.kv_dtype):
        # not memory: it will not start whatever the card holds (QA: it read "DOES NOT FIT", with
        # "GPU layers that fit 0/5" on a 24 GiB card)
        est.refuse(
            f"llama.cpp refuses a quantized V cache ({v_type}) without flash attention: add --flash-attn on, "
            "or keep V 16-bit (--kv-dtype K/f16)"
        )
    elif settings.on_gpu and not settings.kv_offload:
        here = host_ram_bytes()
        if here and est.host_bytes_needed > here:
            est.fits = False
            est.reason = (
                f"--no-kv-offload puts the KV cache in host RAM: this needs {format_bytes(est.host_bytes_needed)} "
                f"there and this machine has {format_bytes(here)}"
            )


def _quantized_v(kv_dtype: str) -> bool:
    """Is the V cache of this type ("K/V" names V second) a quantized one?"""
    return kv_pair(kv_dtype)[1] not in ("f16", "bf16", "f32")


class LlamaCppPythonMemory(LlamaCppMemory):
    """llama-cpp-python's server: the library reserves the logits of every token of the micro-batch, and
    its Python side keeps every position's logits (llama.py's `scores`, n_ctx x vocab f32, with the server's
    logits_all default) and token ids: host RAM that fills as the context does."""

    server_outputs = False
    fit_widens_auto_context = False  # the library sizes n_ctx itself: no fit step

    def host_logits(self, info: ModelInfo, run: RunShape) -> int:
        return run.context * (info.vocab * 4 + 4)

    def logits_note(self, info: ModelInfo, run: RunShape) -> list[str]:
        size = self.host_logits(info, run)
        if size < 64 * MIB:
            return []
        return [
            f"llama-cpp-python keeps every position's logits in host RAM (its server's logits_all): "
            f"{format_bytes(size)} at n_ctx {run.context}, filled as the context fills; the server's "
            "--logits_all false keeps one batch of them"
        ]


class OllamaMemory(LlamaCppMemory):
    """Ollama: num_ctx is per sequence, it picks it from the free VRAM and places the layers itself."""

    unified_kv = False  # its runner keeps one stream per parallel sequence
    swa_full = True  # its runner asks for full-size sliding-window caches
    fit_widens_auto_context = False  # num_ctx is per sequence already (slot_cells)

    context_is_per_sequence = True
    auto_places_layers = True
    offloads_tensors = False  # Ollama has no tensor override knob
    ignores = (
        "tensor_parallel_size", "pipeline_parallel_size", "cpu_moe", "n_cpu_moe", "override_tensor", "mla",
        "attn_max_batch", "kv_offload", "kv_unified", "swa_full",
    )  # fmt: skip

    def default_context(self, settings: Settings) -> int:
        dev = settings.device_bytes
        return 4096 if dev < 23 * GIB else 32768 if dev < 47 * GIB else 262144

    def default_flash(self, settings: Settings) -> bool:
        return False  # Ollama leaves flash attention off unless OLLAMA_FLASH_ATTENTION is set

    def slot_cells(self, info: ModelInfo, context: int, parallel: int) -> int:
        # Ollama clamps num_ctx to the trained length, then gives the runner num_ctx x OLLAMA_NUM_PARALLEL
        # cells (server/sched.go: NumCtx * numParallel): every slot gets the full num_ctx
        if info.max_context:
            context = min(context, info.max_context)
        return context * parallel

    def past_trained_note(self, per_sequence: int, trained: int) -> str:
        return f"Ollama clamps num_ctx {per_sequence} to the model's trained length {trained}"

    def run_shape(self, info: ModelInfo, settings: Settings) -> RunShape:
        """Ollama does not refuse a quantized cache without flash attention: it keeps f16 (server.go)."""
        run = super().run_shape(info, settings)
        return run if run.flash or not _quantized_v(run.kv_dtype) else replace(run, kv_dtype="f16")

    def size(self, info: ModelInfo, settings: Settings) -> Estimate:
        est = super().size(info, settings)
        asked = settings.kv_dtype
        if asked and _quantized_v(asked) and est.kv_dtype == "f16":
            est.notes.append(
                f"Ollama keeps the KV cache f16: a quantized OLLAMA_KV_CACHE_TYPE ({asked}) needs "
                "OLLAMA_FLASH_ATTENTION=1"
            )
        return est


# ik_llama.cpp's defaults (common/common.h at 8337e4cd): -mla 3, -amb 256 MiB, flash attention on.
IK_MLA_DEFAULT = 3
IK_AMB_DEFAULT = 256
# ik_llama.cpp forked from mainline in mid-2024 (build ~3300) and keeps that era's reservation: every
# token's logits in the worst-case graph, the last layers offloaded first, one hidden state on the host.
IK_FORK_BUILD = 3300
# ik_llama.cpp's own build count from which a causal mask is built in f16 with flash attention (its #825,
# 2025-10-13: build 3907); the builds it prints ("version: 3956", "build info ... build=3961") count so
IK_F16_MASK_BUILD = 3907
IK_MTP_KV_DROPPED_BUILD = 3918


class IkLlamaCppMemory(LlamaCppMemory):
    """ik_llama.cpp: mainline's placement and buffers of its fork's era, its own MLA cache per -mla and
    attention capped by -amb (src/llama.cpp llama_kv_cache_init, src/graphs/build_deepseek2.cpp); one
    cache of n_ctx cells, padded to 256 with flash attention and 32 without, for every slot."""

    swa_full = True  # sliding-window layers keep every cell (unless --swa-compress)
    # the MTP layers' tensors are skipped at load (TENSOR_SKIP since its GLM-4.5 support, #668: "model has
    # unused tensor blk.46... -- ignoring"); its cache held every layer of block_count (GLM-4.5-Air's 2025
    # printouts: 47 of 47) until #843 (2025-10-20, its build 3918: "Do not allocate KV cache for unused layers")
    mtp_layers_loaded = False

    def mtp_kv_kept(self, settings: Settings) -> bool:
        return not self.build(settings).at_least(IK_MTP_KV_DROPPED_BUILD)

    # mainline's, less its own knobs
    ignores = tuple(name for name in LlamaCppMemory.ignores if name not in ("mla", "attn_max_batch"))

    def run_shape(self, info: ModelInfo, settings: Settings) -> RunShape:
        return replace(super().run_shape(info, settings), streams=1)

    def cells(self, info: ModelInfo, run: RunShape, build: graph.Build | None = None) -> tuple[int, int]:
        cells = round_up(max(run.context, 1), CELL_PAD if run.flash else 32)
        return cells, cells

    def build(self, settings: Settings) -> graph.Build:
        return graph.Build(settings.engine_build or IK_FORK_BUILD)

    def default_flash(self, settings: Settings) -> bool:
        return self.engine_default_flash(settings)  # the fork's own count: flash attention on from its start

    def mla_mode(self, info: ModelInfo, settings: Settings) -> int:
        """-mla as the run has it: 0 for a model without MLA (ik_llama.cpp turns it off there), 1 for a file
        without attn_kv_b (it cannot decompress the latent: "changing MLA from 0 to 1")."""
        if not info.kv_lora_rank:
            return 0
        mode = IK_MLA_DEFAULT if settings.mla is None else settings.mla
        return 1 if info.mla_kv_b is False else mode

    def kv_layout(self, info: ModelInfo, settings: Settings, run: RunShape) -> str:
        """-mla 0: per-head K and V; 1 without flash attention: the latent and its transpose (V);
        otherwise the latent (c^KV and the rope part) alone."""
        mode = self.mla_mode(info, settings)
        if mode == 0:
            return MLA_DECOMPRESSED
        return MLA_LATENT_AND_V if mode == 1 and not run.flash else MLA_LATENT

    def graph(
        self, info: ModelInfo, run: RunShape, build: graph.Build, settings: Settings | None = None
    ) -> graph.Graph:
        found = super().graph(info, run, build, settings)
        settings = settings or Settings(backend="ik_llama.cpp")
        amb = IK_AMB_DEFAULT if settings.attn_max_batch is None else settings.attn_max_batch
        return replace(
            found,
            mla=self.mla_mode(info, settings),
            attn_max_batch=amb,
            experts_offload_by_share=True,
            mask_f16_with_flash=settings.engine_build is None or settings.engine_build >= IK_F16_MASK_BUILD,
        )


LLAMA_CPP = LlamaCppMemory()
LLAMA_CPP_PYTHON = LlamaCppPythonMemory()
OLLAMA = OllamaMemory()
IK_LLAMA_CPP = IkLlamaCppMemory()
# By backend name (core/backends): the accounting the estimator uses for each.
MEMORY: dict[str, MemoryAccounting] = {
    "llama.cpp": LLAMA_CPP,
    "llama-cpp-python": LLAMA_CPP_PYTHON,
    "ollama": OLLAMA,
    "ik_llama.cpp": IK_LLAMA_CPP,
}
