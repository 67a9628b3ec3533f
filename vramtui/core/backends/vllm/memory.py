"""How vLLM accounts memory.

The budget is device x gpu_memory_utilization; weights, non-torch memory and the activation peak of a
profile run at max_num_batched_tokens come off it; the rest is KV blocks of 16 tokens (so the rows never
exceed the budget; CUDA graphs are captured outside it). Its token capacity and "maximum concurrency" are
reported as it prints them.
"""

from __future__ import annotations

from vramtui.core.estimate import recurrent
from vramtui.core.estimate.accounting import MLA_LATENT, MemoryAccounting
from vramtui.core.estimate.estimator import Estimate, Settings
from vramtui.core.estimate.kvcache import kv_bytes_per_token
from vramtui.core.estimate.modelinfo import ModelInfo
from vramtui.core.estimate.weights import dtype_bytes, hf_weights_bytes
from vramtui.core.memory.parts import MemoryBill
from vramtui.core.units import GIB, MIB

DEFAULT_UTILIZATION = 0.9
BLOCK_TOKENS = 16
DEFAULT_MAX_SEQS = 256
# vLLM's "non_torch_memory": CUDA context share, NCCL and cuBLAS buffers outside PyTorch's allocator.
NON_TORCH_BYTES = 512 * MIB
# vLLM captures CUDA graphs for batch sizes up to 512 after the KV cache is allocated (outside the profile).
CUDA_GRAPH_BYTES = 256 * MIB


def profile_tokens(context: int, settings: Settings) -> int:
    """max_num_batched_tokens of the profile run (V0 without chunked prefill: the model length)."""
    return settings.batch or (max(context, 2048) if context <= 32768 else 8192)


def activation_peak(info: ModelInfo, tokens: int, max_seqs: int) -> int:
    """The profile forward at `tokens`, and the sampler's dummy run."""
    act_bytes = 2
    ff = info.intermediate or 4 * info.hidden
    if info.is_moe:
        ff = max(
            ff if info.n_dense_layers else 0, (info.moe_intermediate or ff) * max(1, info.n_experts_used)
        )
    # its peak is the fused gate_up output (2 ff wide) with two hidden-width tensors (the residual and the
    # normed input) alive; the two V0 runs of the corpus (8192 and 20000 tokens, same model) differ by
    # exactly that per token
    activation = tokens * (2 * ff + 2 * info.hidden) * act_bytes
    # the sampler's dummy run: fp32 logits, probabilities and logprobs of every sequence's last token, and the
    # top-k/top-p sort (values + int64 indices) the profile asks for: 24 bytes per vocabulary entry
    activation += min(max_seqs, tokens) * info.vocab * 24
    return activation


def _refusal(context: int, per_token: int, kv_available: int, kv_tokens: int) -> str:
    return (
        f"one {context}-token request needs {context * per_token / GIB:.2f} GiB of KV cache but only "
        f"{max(kv_available, 0) / GIB:.2f} GiB is left in the budget: vLLM refuses to start; "
        f"the longest that fits is --max-model-len {kv_tokens}"
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


def _state_note(info: ModelInfo, state: int, seqs: int) -> str:
    return (
        f"hybrid/recurrent: {info.n_recurrent_layers} of {info.n_layers} layers keep a per-request state "
        f"(conv + SSM, model dtype) instead of KV: {state / max(1, seqs) / MIB:.1f} MiB a request, "
        f"{seqs} request(s) at the full context"
    )


class VllmMemory(MemoryAccounting):
    default_safety = DEFAULT_UTILIZATION
    kv_from_budget = True
    refuses_past_trained = True
    mla_layout = MLA_LATENT
    bnb_as_nf4_dq = True

    def per_sequence(self, est: Estimate) -> int:
        return est.context  # --max-model-len is per request

    def past_trained_note(self, per_sequence: int, trained: int) -> str:
        return (
            f"--max-model-len {per_sequence} is past the model's trained length {trained} "
            "(max_position_embeddings): vLLM refuses to start unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1"
        )

    def size(self, info: ModelInfo, settings: Settings) -> Estimate:
        notes: list[str] = []
        context = self.run_context(info, settings)
        max_seqs = settings.parallel or DEFAULT_MAX_SEQS
        kv_dtype = self.kv_dtype(info, settings)
        weights, _peak, wnotes = hf_weights_bytes(info, settings.quant, self.bnb_as_nf4_dq)
        notes += wnotes
        per_token = kv_bytes_per_token(info, kv_dtype, "vllm")
        budget = int(settings.device_bytes * settings.share)
        tokens = profile_tokens(context, settings)
        activation = activation_peak(info, tokens, max_seqs)
        kv_available = budget - weights - NON_TORCH_BYTES - activation
        state, state_seqs = _recurrent_reservation(info, context, per_token, max_seqs, kv_available)
        if state:
            notes.append(_state_note(info, state, state_seqs))
        block_bytes = BLOCK_TOKENS * per_token
        blocks = max(0, (kv_available - state) // block_bytes) if block_bytes else 0
        kv_tokens = blocks * BLOCK_TOKENS if block_bytes else state_seqs * context
        if info.n_recurrent_layers and not state_seqs:
            kv_tokens = 0  # not even one request's state fits
        reason = None
        if kv_available <= 0:
            notes.append("weights and activations exceed the budget: vLLM fails before the KV cache")
        elif kv_tokens < context:
            reason = _refusal(context, per_token, kv_available, kv_tokens)
            notes.append(reason)
        notes.append(f"profile run at {tokens} batched tokens; {blocks} KV blocks of {BLOCK_TOKENS} tokens")
        # the KV cache takes what the budget leaves, so the budget's rows add up to at most the budget; the
        # CUDA graphs are captured afterwards, outside it, and only have to fit on the card
        graphs_fit = budget + CUDA_GRAPH_BYTES <= settings.device_bytes
        if not graphs_fit:
            notes.append(
                f"CUDA graphs (~{CUDA_GRAPH_BYTES // MIB} MiB) are captured outside the budget and would not "
                "fit on the card: lower --safety (gpu-memory-utilization) or run with --enforce-eager"
            )
        bill = MemoryBill()
        for part, nbytes in (
            ("weights", weights),
            ("kv_cache", blocks * block_bytes),
            ("recurrent_state", state),
            ("compute", activation),
            ("runtime", NON_TORCH_BYTES),
            ("cuda_graphs", CUDA_GRAPH_BYTES),
        ):
            bill.add(0, part, nbytes)  # type: ignore[arg-type]
        concurrency = kv_tokens / context if context else None
        return Estimate(
            backend=settings.backend,
            context=context,
            parallel=max_seqs,
            weights_bytes=weights,
            weights_host_bytes=0,
            kv_cache_bytes=blocks * block_bytes,
            kv_bytes_per_token=per_token,
            activations_bytes=activation,
            overhead_bytes=NON_TORCH_BYTES,
            fragmentation_bytes=0,
            total_bytes=bill.total(0) - CUDA_GRAPH_BYTES,  # the budget's rows
            device_bytes=settings.device_bytes,
            usable_bytes=budget,
            fits=kv_available > 0 and kv_tokens >= context and graphs_fit,
            n_layers=info.n_layers,
            kv_dtype=kv_dtype,
            kv_cells=kv_tokens,
            kv_cache_tokens=kv_tokens,
            max_concurrency=round(concurrency, 2) if concurrency is not None else None,
            reason=reason,
            notes=notes,
            bill=bill,
        )


VLLM = VllmMemory()
MEMORY: dict[str, MemoryAccounting] = {"vllm": VLLM}
