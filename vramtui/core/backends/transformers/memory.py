"""How transformers (generate() on a PyTorch model) accounts memory.

Weights with bitsandbytes/GPTQ/AWQ leaving embeddings, lm_head and norms in 16-bit (bitsandbytes
quantizes each weight as it loads: no 16-bit load peak); a dynamic KV cache that grows with the sequence; generate()'s
prefill: the MLP of every token, logits of the last position only (logits_to_keep=1) and, with eager
attention, the score matrices.
"""

from __future__ import annotations

from dataclasses import dataclass

from vramtui.core.estimate import recurrent
from vramtui.core.estimate.accounting import MLA_DECOMPRESSED, MemoryAccounting
from vramtui.core.estimate.estimator import CUDA_CONTEXT_BYTES, Estimate, Settings
from vramtui.core.estimate.kvcache import is_swa, kv_bytes_per_token, kv_layer_bytes
from vramtui.core.estimate.modelinfo import ModelInfo
from vramtui.core.estimate.weights import as_loaded, dtype_bytes, hf_weights_bytes
from vramtui.core.memory.parts import HOST, MemoryBill, Place
from vramtui.core.units import MIB

# PyTorch's caching allocator keeps freed blocks; transformers runs grow by this share of the dynamic part.
TORCH_FRAGMENTATION = 0.10
DEFAULT_CONTEXT = 4096
# A CPU-only run's process besides the model (the interpreter, torch's CPU build, transformers, the HTTP
# server): vramtui's transformers runner held 412 MiB resident beyond a 5 MiB model here (`check`, torch
# 2.x CPU). Host RAM, in place of the GPU's CUDA context.
CPU_PROCESS_BYTES = 400 * MIB


def layer_kv_bytes(info: ModelInfo, context: int, batch: int, kv_dtype: str) -> list[int]:
    """Each layer's dynamic cache at the full context; sliding-window layers keep the window only."""
    found = []
    for layer in range(info.n_layers):
        window = info.sliding_window if is_swa(info, layer) else None
        tokens = min(context, window) if window else context
        found.append(tokens * batch * kv_layer_bytes(info, layer, kv_dtype, MLA_DECOMPRESSED))
    return found


def kv_cache_bytes(info: ModelInfo, context: int, batch: int, kv_dtype: str) -> int:
    """The dynamic cache at the full context; sliding-window layers keep the window only."""
    return sum(layer_kv_bytes(info, context, batch, kv_dtype))


def prefill_parts(info: ModelInfo, settings: Settings, context: int, batch: int) -> tuple[int, int]:
    """(the logits of the last positions, on lm_head's device; the work of a layer, on each device that runs
    layers: the MLP of every token and, with eager attention, the score matrices)."""
    act = dtype_bytes(info.dtype if info.dtype != "fp8" else "bf16")
    # generate() passes logits_to_keep=1: the prefill projects only the last position of each sequence
    # (lm_head output in the model dtype, then the fp32 copy and the processed scores generate() keeps)
    logits = info.logits_width * batch * (act + 4 + 4)
    ff = info.intermediate or 4 * info.hidden
    mlp = context * batch * 3 * ff * act
    scores = 0
    if settings.flash_attn is False:  # eager attention materialises heads x q x k scores (and softmax)
        scores = 2 * info.n_heads * context * context * batch * act
    return logits, mlp + scores


def prefill_activations(info: ModelInfo, settings: Settings, context: int, batch: int) -> int:
    return sum(prefill_parts(info, settings, context, batch))


@dataclass(frozen=True)
class Run:
    """What one transformers run sizes before its memory is placed."""

    context: int
    batch: int
    kv_dtype: str
    weights: int


class TransformersMemory(MemoryAccounting):
    mla_layout = MLA_DECOMPRESSED
    solver_step = 1  # its cache grows a token at a time: no padding to round to (QA 17 F10)
    typical_quants = ("int8", "nf4", "awq", "gptq")  # bitsandbytes at load; AWQ/GPTQ checkpoints
    ignores = (
        "tensor_split", "split_mode", "main_gpu", "cpu_moe", "n_cpu_moe", "override_tensor",
        "tensor_parallel_size", "pipeline_parallel_size", "mla", "attn_max_batch", "kv_offload",
        "kv_unified", "swa_full",
    )  # fmt: skip

    def run_context(self, info: ModelInfo, settings: Settings) -> int:
        return settings.context or min(info.max_context or DEFAULT_CONTEXT, DEFAULT_CONTEXT)

    def per_sequence(self, est: Estimate) -> int:
        return est.context  # each sequence of a batch has its own dynamic cache of the whole context (QA 5)

    def size(self, info: ModelInfo, settings: Settings) -> Estimate:
        mapped = info.largest_shard_bytes or info.weights_bytes  # the file as stored, before any cast
        info, cast = as_loaded(info, settings.dtype)
        context = self.run_context(info, settings)
        batch = settings.parallel or 1
        kv_dtype = self.kv_dtype(info, settings)
        weights, peak, notes = hf_weights_bytes(info, settings.quant)
        if peak is not None:
            # bitsandbytes, the one in-flight method here, quantizes each weight as it is loaded
            # (transformers' Bnb8bitQuantize / Bnb4bitQuantize ops, 5.x): no 16-bit copy of the whole
            # model is ever on the card (QA 21 F6: an 8B at 8 bits "does not fit" 12 GiB for its load peak)
            notes = [note for note in notes if "applied while loading" not in note]
            notes.append(
                f"bitsandbytes ({settings.quant}) quantizes each weight as it loads: no 16-bit load peak"
            )
        notes[:0] = cast
        # several cards, or one with the profile's max_memory (its caps and host RAM offload): the device map
        if (settings.several or settings.max_memory) and settings.on_gpu:
            from vramtui.core.backends.transformers.placement import size_device_map

            return size_device_map(info, settings, Run(context, batch, kv_dtype, weights), notes)
        kv = kv_cache_bytes(info, context, batch, kv_dtype)
        # a hybrid's Mamba / linear-attention layers keep a conv and SSM state per sequence instead of KV
        state = batch * recurrent.hf_state_bytes_per_sequence(
            info, dtype_bytes(info.dtype if info.dtype != "fp8" else "bf16"), info.rs_ssm_f32
        )
        activations = prefill_activations(info, settings, context, batch)
        if settings.flash_attn is False:
            notes.append("eager attention: score matrices grow with context squared")
        # a CPU-only run (device_map "cpu", or no GPU): every term is host RAM, and no CUDA context
        place: Place = 0 if settings.on_gpu else HOST
        runtime = CUDA_CONTEXT_BYTES if settings.on_gpu else CPU_PROCESS_BYTES
        bill = MemoryBill()
        bill.add(place, "weights", weights)
        bill.add(place, "kv_cache", kv)
        bill.add(place, "recurrent_state", state)
        bill.add(place, "compute", activations)
        bill.add(place, "runtime", runtime)
        bill.add(place, "margin", int(TORCH_FRAGMENTATION * (kv + activations)))
        total = bill.total(place)
        usable = int(settings.device_bytes * settings.share)
        notes.append("dynamic cache: KV grows with the sequence; the figure is at the full context")
        load_peak = budget_load_peak(settings, runtime + weights, mapped, bool(cast))
        loads = load_peak is None or load_peak <= usable
        est = Estimate(
            backend=settings.backend,
            context=context,
            parallel=batch,
            weights_bytes=weights,
            weights_host_bytes=0,
            kv_cache_bytes=kv,
            kv_bytes_per_token=kv_bytes_per_token(info, kv_dtype, "transformers"),
            activations_bytes=activations,
            compute_buffer_bytes=activations,  # the shared term's key, as the text and the bill name it (QA 5)
            overhead_bytes=runtime,
            fragmentation_bytes=bill.get("margin", place),
            total_bytes=total,
            device_bytes=settings.device_bytes,
            usable_bytes=usable,
            fits=total <= usable and loads,
            n_layers=info.n_layers,
            kv_dtype=kv_dtype,
            kv_cells=context * batch,  # every sequence's cache holds the whole context
            reason=None,
            notes=notes,
            bill=bill,
            device="gpu" if settings.on_gpu else "host",
            host_bytes_needed=0 if settings.on_gpu else total,
            load_peak_bytes=load_peak,
            load_peak_words="checkpoint mapped while loading",
            load_peak_fits=None if load_peak is None else loads,
        )
        if not loads:
            est.reason = load_peak_reason(load_peak or 0, usable, settings.share, mapped, bool(cast))
        return est


def budget_load_peak(settings: Settings, resident: int, mapped: int, cast: bool) -> int | None:
    """Under a memory budget on the CPU (an address-space limit), what the load maps at its peak: the process
    and the weights it fills, the safetensors file mapped beside them, and where --dtype casts, each tensor
    first read in the file's own dtype (QA 38 F1: 96M fp32 parameters "fit" 1550 MiB and failed to map the
    file; measured here, VmPeak 1007 MiB over the process at fp32 and 1167 at bf16: 368 MiB of weights,
    368 mapped, the cast's fp32 copy). None: no budget, or a GPU run (the page cache is not the card's)."""
    if settings.on_gpu or not settings.room_is_budget or not mapped:
        return None
    return resident + mapped + (mapped if cast else 0)


def load_peak_reason(peak: int, usable: int, share: float, mapped: int, cast: bool) -> str:
    """Why a load over the budget cannot start, and by how much the budget must grow (its line included)."""
    copy = ", and a copy in the file's dtype before the cast" if cast else ""
    short = -(-int((peak - usable) / share) // MIB)  # the room past the line that holds the peak
    return (
        f"the load does not fit: transformers maps the {mapped / MIB:.0f} MiB checkpoint beside the weights it "
        f"fills{copy}, about {peak / MIB:.0f} MiB at its peak against {usable / MIB:.0f} MiB usable; no context "
        f"or batch helps: raise the memory budget by at least {short} MiB"
    )


TRANSFORMERS = TransformersMemory()
MEMORY: dict[str, MemoryAccounting] = {"transformers": TRANSFORMERS}
