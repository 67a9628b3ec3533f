"""How the llama.cpp family (llama-server, llama-cpp-python, Ollama) accounts memory.

Exact tensor bytes per layer; KV cells = context padded to 256; sliding-window layers keep
min(cells, window*streams + ubatch) cells; q8_0/q4_0 caches use ggml block sizes (34/32, 18/32 bytes per
element); a compute buffer sized by the worst-case graph of one micro-batch (with the KQ matrix when flash
attention is off, or the logits of the micro-batch); layers not offloaded and the token embedding live in
host RAM. Ollama runs llama-server with its own defaults: it picks the context from the free VRAM, gives
every slot the full num_ctx and places as many layers as fit.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace

from vramtui.core.backends import get_backend
from vramtui.core.estimate import devices, recurrent
from vramtui.core.estimate.accounting import MLA_LATENT_AND_V, MemoryAccounting
from vramtui.core.estimate.estimator import CUDA_CONTEXT_BYTES, Estimate, Settings, memoized
from vramtui.core.estimate.kvcache import is_swa, kv_bytes_per_token, kv_layer_bytes, round_up
from vramtui.core.estimate.modelinfo import ModelInfo
from vramtui.core.estimate.offload import moved_bytes, placed_on_host
from vramtui.core.estimate.weights import LayerWeights, llama_cpp_weights
from vramtui.core.memory.parts import HOST, MemoryBill
from vramtui.core.units import GIB, format_bytes

CELL_PAD = 256


@dataclass(frozen=True)
class RunShape:
    """The settings as llama.cpp resolves them: its defaults filled in."""

    context: int  # KV cells asked for (every slot together)
    parallel: int
    ubatch: int
    flash: bool
    kv_dtype: str


@dataclass(frozen=True)
class Placement:
    """Where the layers, their KV cache and the buffers go: the GPU or host RAM."""

    gpu_layers: int  # the output layer counts as one more
    first_gpu_layer: int  # llama.cpp offloads the last layers first
    output_on_gpu: bool
    w_gpu: int
    w_host: int
    kv_gpu: int
    kv_host: int
    moved_to_host: int = 0  # layer tensors --cpu-moe / --n-cpu-moe / -ot put in host RAM
    rs_gpu: int = 0  # recurrent state (RS buffer) of the recurrent layers on the GPU / in host RAM
    rs_host: int = 0


def kv_cells(info: ModelInfo, context: int, parallel: int, ubatch: int) -> tuple[int, int]:
    """(cells of full-attention layers, cells of sliding-window layers) as llama.cpp sizes its cache."""
    cells = round_up(max(context, 1), CELL_PAD)
    swa_cells = cells
    if info.swa_layers and info.sliding_window:
        swa_cells = min(cells, round_up(info.sliding_window * parallel + ubatch, CELL_PAD))
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
    ub = min(ubatch, cells)  # llama.cpp clamps the batch to the context
    q_width = info.n_heads * info.head_dim_k
    kv_width = info.n_kv_heads * (info.head_dim_k + info.head_dim_v)
    mask = cells * round_up(ub, 64) * (2 if flash else f32)
    out_phase = (info.vocab + h) * ub * f32
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


def _place(info: ModelInfo, settings: Settings, weights: LayerWeights, run: RunShape) -> Placement:
    n = info.n_layers
    gpu_layers = n + 1 if settings.gpu_layers is None else min(settings.gpu_layers, n + 1)
    if not settings.on_gpu:
        gpu_layers = 0
    first_gpu_layer = n - min(gpu_layers, n)
    cells, swa_cells = kv_cells(info, run.context, run.parallel, run.ubatch)
    kv_gpu = kv_host = 0
    for layer in range(n):
        layer_cells = swa_cells if is_swa(info, layer) else cells
        size = layer_cells * kv_layer_bytes(info, layer, run.kv_dtype, MLA_LATENT_AND_V)
        if layer >= first_gpu_layer and settings.on_gpu:
            kv_gpu += size
        else:
            kv_host += size
    output_on_gpu = settings.on_gpu and gpu_layers > n
    w_gpu = sum(weights.layers[first_gpu_layer:]) if settings.on_gpu else 0
    if output_on_gpu:
        w_gpu += weights.output + weights.other  # tied: a copy of the embedding goes to the GPU
    # the token embedding is always read on the host (llama.cpp keeps the input layer there)
    w_host = weights.token_embd + sum(weights.layers[:first_gpu_layer])
    if not output_on_gpu:
        w_host += weights.other + (0 if info.tied_embeddings else weights.output)
    to_host = 0
    if settings.on_gpu:
        to_host, to_gpu = moved_bytes(weights.tensors, first_gpu_layer, settings.offload_rules)
        w_gpu, w_host = w_gpu - to_host + to_gpu, w_host + to_host - to_gpu
    if not settings.on_gpu:
        w_host = weights.token_embd + sum(weights.layers) + weights.other
        w_host += 0 if info.tied_embeddings else weights.output
    # the RS buffer lives with its layer, like the KV cache: one row per sequence (llama.cpp's n_seq_max)
    on_gpu_layers = range(first_gpu_layer, n) if settings.on_gpu else range(0)
    rs_gpu = recurrent.recurrent_state_bytes(info, run.parallel, on_gpu_layers)
    rs_host = recurrent.recurrent_state_bytes(info, run.parallel) - rs_gpu
    return Placement(
        gpu_layers, first_gpu_layer, output_on_gpu, w_gpu, w_host, kv_gpu, kv_host, to_host, rs_gpu, rs_host
    )


def _notes(info: ModelInfo, settings: Settings, run: RunShape, where: Placement) -> list[str]:
    notes: list[str] = []
    if settings.on_gpu and where.gpu_layers == 0:
        notes.append("no layer on the GPU: everything runs from host RAM")
    if not run.flash and run.kv_dtype not in ("f16", "bf16", "f32"):
        notes.append("llama.cpp refuses a quantized V cache without flash attention: add --flash-attn")
    if not run.flash and settings.on_gpu:
        notes.append("flash attention off: the compute buffer holds the KQ matrix (heads x cells x ubatch)")
    if where.moved_to_host:
        notes.append(
            f"{format_bytes(where.moved_to_host)} of layer tensors (experts) in host RAM by the override rules: "
            "the CPU computes them each token, slower than on the GPU"
        )
    if info.n_recurrent_layers:
        notes.append(recurrent.describe(info, run.parallel))
    if info.swa_layers and info.sliding_window:
        cells, swa_cells = kv_cells(info, run.context, run.parallel, run.ubatch)
        notes.append(f"{info.swa_layers} sliding-window layers keep {swa_cells} cells, the others {cells}")
    return notes


def _bill(settings: Settings, where: Placement, compute: int, output_buffer: int) -> MemoryBill:
    bill = MemoryBill()
    on_device = settings.on_gpu and where.gpu_layers > 0
    if on_device:
        bill.add(0, "weights", where.w_gpu)
        bill.add(0, "kv_cache", where.kv_gpu)
        bill.add(0, "recurrent_state", where.rs_gpu)
        bill.add(0, "compute", compute)
        bill.add(0, "runtime", CUDA_CONTEXT_BYTES)
    bill.add(HOST, "weights", where.w_host)
    bill.add(HOST, "kv_cache", where.kv_host)
    bill.add(HOST, "recurrent_state", where.rs_host)
    if not (on_device and where.output_on_gpu):  # the host keeps a compute buffer of its own
        bill.add(HOST, "compute", compute)
    bill.add(HOST, "output", output_buffer)  # logits of the last token of each sequence, host side
    return bill


# Weights llama.cpp's CPU backend copies into a repacked layout for its wide instructions on x86, by
# file type (share of the CPU-resident weights but the token embedding, which is only looked up): q4_0
# in every x86 build from AVX2 up (CPU_REPACK). A build with AMX compiled in repacks f16 and q8_0 too
# (seen here: an `AMX model buffer` of 20.00 MiB beside a 20.52 MiB f16 file), but whether a build has
# AMX cannot be told from the model or the CPU, so those copies are not counted.
_REPACKED = {"q4_0": 1.0}


def repack_copy_bytes(info: ModelInfo, settings: Settings, where: Placement) -> int:
    """The second host copy of the weights a CPU-resident llama.cpp run keeps (CPU_REPACK / AMX)."""
    if settings.on_gpu and where.gpu_layers > 0:
        return 0  # offloaded layers are not repacked; a mixed run's host layers are left out too
    share = _REPACKED.get(str(info.quant or info.dtype or "").lower(), 0.0) if _cpu_has("avx2") else 0.0
    kept = int(info.token_embd_bytes or 0)  # only looked up, never multiplied: not repacked
    if info.vocab % 8:  # the repacked layouts interleave rows by 8: an output of odd rows stays as it is
        kept += int(info.output_bytes or 0)
    return int(max(where.w_host - kept, 0) * share)


@functools.cache
def _cpu_has(flag: str) -> bool:
    """A flag of this machine's CPU (x86 /proc/cpuinfo); False elsewhere."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as cpuinfo:
            return any(line.startswith("flags") and flag in line.split() for line in cpuinfo)
    except OSError:
        return False


# Tensors a row split leaves with their layer: 3D experts (no split buffer takes them), norms and biases.
_NOT_ROW_SPLIT = ("_exps", "norm", ".bias")


def _layer_plan(
    info: ModelInfo, settings: Settings, run: RunShape, weights: LayerWeights, where: Placement
) -> devices.LayerPlan:
    """The single-device placement, layer by layer, for the split over several GPUs."""
    n, first = info.n_layers, where.first_gpu_layer
    gpu = [weights.layers[il] if il >= first else 0 for il in range(n)]
    matrices = list(gpu)
    rules = settings.offload_rules
    if weights.tensors:
        matrices = [0] * n
        for name, layer, nbytes in weights.tensors:
            by_layer = layer < first
            on_host = placed_on_host(name, by_layer, rules) if rules else by_layer
            if on_host != by_layer:  # an override moved it: off its layer's GPU, or onto one
                gpu[layer] += nbytes if by_layer else -nbytes
            if not on_host and not any(word in name for word in _NOT_ROW_SPLIT):
                matrices[layer] += nbytes
    cells, swa_cells = kv_cells(info, run.context, run.parallel, run.ubatch)
    kv = [
        (swa_cells if is_swa(info, il) else cells) * kv_layer_bytes(info, il, run.kv_dtype, MLA_LATENT_AND_V)
        if il >= first
        else 0
        for il in range(n)
    ]
    rs = [recurrent.recurrent_state_bytes(info, run.parallel, [il]) if il >= first else 0 for il in range(n)]
    ub = min(run.ubatch, cells)
    mask = cells * round_up(ub, 64) * (2 if run.flash else 4)
    return devices.LayerPlan(
        layer_weights=gpu,
        layer_matrices=matrices,
        layer_kv=kv,
        layer_rs=rs,
        output_weights=weights.output + weights.other if where.output_on_gpu else 0,
        first_gpu_layer=first,
        gpu_layers=where.gpu_layers,
        compute_layers=compute_bytes(info, cells, run.ubatch, run.flash, with_output=False),
        compute_output=compute_bytes(info, cells, run.ubatch, run.flash),
        split_inputs=info.hidden * ub * 4 + mask + ub * 4,
        runtime=CUDA_CONTEXT_BYTES,
    )


def pipeline_parallel(info: ModelInfo, settings: Settings, where: Placement) -> bool:
    """llama-context.cpp's condition: several devices, every layer and the output offloaded, layer split,
    the KV cache offloaded (vramtui sizes it so) and no tensor override."""
    return (
        settings.several
        and where.gpu_layers > info.n_layers
        and (settings.split_mode or "layer") == "layer"
        and not settings.offload_rules
    )


_SPLIT_PARTS = ("weights", "kv_cache", "recurrent_state", "compute", "runtime")


def _split_devices(
    info: ModelInfo, settings: Settings, run: RunShape, weights: LayerWeights, where: Placement, est: Estimate
) -> None:
    """Spread the device part of the estimate over every card, and let the tightest one decide."""
    plan = _layer_plan(info, settings, run, weights, where)
    pipelined = pipeline_parallel(info, settings, where)
    rows = devices.llama_cpp_rows(
        plan,
        settings.cards,
        settings.tensor_split,
        settings.split_mode,
        settings.main_gpu,
        pipelined,
        settings.share,
    )
    old = est.bill.places.pop(0, {})
    bill = est.bill
    for row in rows:
        for part, value in zip(_SPLIT_PARTS, _row_parts(row), strict=True):
            bill.add(row.index, part, value)  # type: ignore[arg-type]
    extra = {part: value for part, value in old.items() if part not in _SPLIT_PARTS}
    for part, value in extra.items():  # parts the split does not place stay with the main card
        bill.add(settings.main_gpu, part, value)
    rows[settings.main_gpu].settle(settings.share, sum(extra.values()))
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
    if pipelined:
        est.notes.append(
            f"pipeline parallelism on: each device keeps {devices.GGML_SCHED_MAX_COPIES} copies of its "
            "split's inputs (hidden state, KQ mask) in its compute buffer"
        )


def _row_parts(row: devices.DeviceRow) -> tuple[int, ...]:
    return (
        row.weights_bytes,
        row.kv_cache_bytes,
        row.recurrent_state_bytes,
        row.compute_buffer_bytes,
        row.runtime_bytes,
    )


class LlamaCppMemory(MemoryAccounting):
    """llama-server and llama-cpp-python: the context is the whole cache, split across the slots."""

    solver_step = CELL_PAD
    context_is_per_sequence = False
    places_layers = True
    offloads_tensors = True
    engine_probe = True
    ignores = ("tensor_parallel_size", "pipeline_parallel_size", "device_map", "max_memory")  # vLLM's, HF's
    mla_layout = MLA_LATENT_AND_V

    def default_kv_dtype(self, info: ModelInfo) -> str:
        return "f16"

    def default_context(self, settings: Settings) -> int:
        return int(get_backend(settings.backend).defaults.get("context", 4096))

    def default_flash(self, settings: Settings) -> bool:
        """The engine's own default: llama-server's `auto` is on wherever the backend supports it, the
        CPU included (its log says `Flash Attention enabled`); llama-cpp-python's server leaves it off."""
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
        if context == 0:  # -c 0: the model's training context
            context = info.max_context or 4096
        parallel = settings.parallel or int(defaults.get("parallel", 1))
        batch = settings.batch or int(defaults.get("batch", 2048))
        ubatch = min(settings.ubatch or int(defaults.get("ubatch", 512)), batch)
        flash = settings.flash_attn
        if flash is None:
            flash = self.default_flash(settings)
        context = self.slot_cells(info, context, parallel)
        return RunShape(context, parallel, ubatch, flash, self.kv_dtype(info, settings))

    def run_context(self, info: ModelInfo, settings: Settings) -> int:
        return self.run_shape(info, settings).context

    def flash_on(self, info: ModelInfo, settings: Settings) -> bool:
        return self.run_shape(info, settings).flash  # mtmd follows -fa: auto tries it on

    def size(self, info: ModelInfo, settings: Settings) -> Estimate:
        file_type = settings.quant if settings.quant and settings.quant != info.quant else None
        weights_key = ("llama_cpp_weights", id(info), file_type)  # the grid's memo (estimator.sizing_memo)
        given = info
        if settings.quant and info.weights_source == "gguf" and file_type:
            # another file type than the GGUF's: size it from the shapes, as llama-quantize would
            info = replace(
                info,
                layer_bytes=None,
                layer_tensors=None,
                token_embd_bytes=None,
                output_bytes=None,
                params_exact=False,
            )
        run = self.run_shape(info, settings)
        weights = memoized(weights_key, given, lambda: llama_cpp_weights(info, file_type))
        where = _place(info, settings, weights, run)
        cells, _swa_cells = kv_cells(info, run.context, run.parallel, run.ubatch)
        compute = compute_bytes(info, cells, run.ubatch, run.flash)
        output_buffer = info.vocab * run.parallel * 4
        bill = _bill(settings, where, compute, output_buffer)
        repacked = repack_copy_bytes(info, settings, where)
        # mmapped, the file's pages stay beside the repacked copy; read without mmap, the repacked
        # tensors replace their file copies (a small CPU buffer beside CPU_REPACK)
        bill.add(HOST, "weights", repacked if settings.mmap else 0)
        est = _estimate(info, settings, run, where, bill)
        est.counts_repack = repacked > 0 and settings.mmap
        est.kv_cells, est.compute_buffer_bytes, est.output_buffer_bytes = cells, compute, output_buffer
        est.expert_host_bytes = where.moved_to_host
        est.notes = _notes(info, settings, run, where)
        if settings.several and settings.on_gpu:
            _split_devices(info, settings, run, weights, where, est)
        return est


def _estimate(
    info: ModelInfo, settings: Settings, run: RunShape, where: Placement, bill: MemoryBill
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
        kv_bytes_per_token=kv_bytes_per_token(info, run.kv_dtype, "llama.cpp"),
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
    if not settings.on_gpu:
        # A CPU-only run: every row is host RAM, and the rows add up to the total.
        est.device = "host"
        # the weights row holds the repacked copy too (the bill's host weights)
        est.weights_bytes, est.weights_host_bytes = bill.get("weights", HOST), 0
        est.kv_cache_bytes = where.kv_host
        est.activations_bytes = bill.get("compute", HOST) + bill.get("output", HOST)
        est.total_bytes = est.host_bytes_needed = bill.total(HOST)
        est.fits = est.total_bytes <= usable
    return est


class OllamaMemory(LlamaCppMemory):
    """Ollama: num_ctx is per sequence, it picks it from the free VRAM and places the layers itself."""

    context_is_per_sequence = True
    auto_places_layers = True
    offloads_tensors = False  # Ollama has no tensor override knob
    ignores = ("tensor_parallel_size", "pipeline_parallel_size", "cpu_moe", "n_cpu_moe", "override_tensor")

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


LLAMA_CPP = LlamaCppMemory()
OLLAMA = OllamaMemory()
# By backend name (core/backends): the accounting the estimator uses for each.
MEMORY: dict[str, MemoryAccounting] = {
    "llama.cpp": LLAMA_CPP,
    "llama-cpp-python": LLAMA_CPP,
    "ollama": OLLAMA,
}
