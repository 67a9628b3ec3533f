"""How vLLM V1 lays out a hybrid model's KV cache: attention KV and the recurrent layers' state in one pool.

vLLM (vllm/v1/core/kv_cache_utils.py, kv_cache_interface.py, and the platform's hybrid block alignment) pages
every layer from one pool of equal pages. A recurrent layer's state (Mamba, Gated DeltaNet, short convolution:
conv in the model dtype, the SSM state in float32 when the config's `mamba_ssm_dtype` says so) takes one page,
so the attention block grows to `16 x ceil(state / (16 x one token's K and V in one layer))` tokens (Qwen3.6-
35B-A3B: 2096, "Setting attention block size to 2096 tokens") and the state is padded up to that page. The
layers are put in groups of equal size (the smaller layer count; the larger one when it is under 1.25 times
that), one pool tensor per group slot, so `num_blocks = memory // (page x group size)`. A request at the full
context takes ceil(context / block) blocks in each attention group and, with prefix caching (vLLM's default,
mamba_cache_mode "align"), 2 blocks in each recurrent group; the capacity vLLM prints ("GPU KV cache size") is
num_blocks / those blocks x the context, and "Maximum concurrency" num_blocks / those blocks.
"""

from __future__ import annotations

from dataclasses import dataclass

from vramtui.core.estimate import recurrent
from vramtui.core.estimate.accounting import MLA_LATENT
from vramtui.core.estimate.kvcache import is_swa, kv_layer_bytes, round_up
from vramtui.core.estimate.modelinfo import ModelInfo

KERNEL_BLOCK_ALIGNMENT = 16  # the attention kernels' smallest block (FlashAttention, FlashInfer, Triton)
STATE_PAGES_PER_REQUEST = (
    2  # mamba_cache_mode "align" (prefix caching on): the running state and a checkpoint
)
GROUP_SLACK = 1.25  # vLLM takes the larger layer count as the group size when under 1.25 x the smaller


@dataclass(frozen=True)
class HybridPool:
    """One rank's pool: its page, the attention block that fills it, and the groups."""

    block_tokens: int
    page_bytes: int  # one layer's page: an attention block, or one (padded) recurrent state
    state_bytes: int  # one layer's recurrent state before padding
    group_layers: int
    attention_groups: int
    state_groups: int
    ssm_f32: bool

    @property
    def block_bytes(self) -> int:
        """One block id across the pool: a page in every tensor of a group."""
        return self.page_bytes * self.group_layers

    def blocks_per_request(self, context: int) -> int:
        attention = self.attention_groups * -(-context // self.block_tokens)
        return attention + self.state_groups * STATE_PAGES_PER_REQUEST

    def longest(self, blocks: int) -> int:
        """The longest request `blocks` hold: each recurrent group's pages first, the attention's after."""
        room = blocks - self.state_groups * STATE_PAGES_PER_REQUEST
        return max(0, room // max(1, self.attention_groups) * self.block_tokens)

    def describe(self, context: int, blocks: int) -> str:
        per_request = self.blocks_per_request(context)
        ssm = ", its SSM part float32" if self.ssm_f32 else ""
        return (
            f"hybrid: vLLM pages the attention KV and the recurrent states from one pool: attention blocks of "
            f"{self.block_tokens} tokens, so that one {self.page_bytes:,} B page holds a layer's state "
            f"({self.state_bytes:,} B{ssm}); {self.attention_groups + self.state_groups} groups of "
            f"{self.group_layers} layers; a request at {context} tokens takes {per_request} blocks "
            f"({per_request - self.state_groups * STATE_PAGES_PER_REQUEST} of attention, "
            f"{STATE_PAGES_PER_REQUEST} in each recurrent group): {blocks} blocks hold "
            f"{blocks / max(1, per_request):.2f} such requests"
        )


def hybrid_pool(info: ModelInfo, kv_dtype: str, tp: int = 1, dtype_bytes: int = 2) -> HybridPool | None:
    """The pool of a model with both attention and recurrent layers (None for any other), per rank under tensor
    parallel `tp` (heads and state split over the ranks)."""
    n = info.n_layers
    attention = [layer for layer in range(n) if not info.is_recurrent(layer) and info.kv_heads_at(layer)]
    states = info.n_recurrent_layers
    if not attention or not states:
        return None
    layer = attention[0]
    heads = info.kv_heads_at(layer)
    kept = heads if info.kv_lora_rank else max(1, heads // max(1, tp))
    one_token = kv_layer_bytes(info, layer, kv_dtype, MLA_LATENT) * kept // heads
    per_layer = recurrent.hf_state_bytes_per_sequence(info, dtype_bytes, info.rs_ssm_f32) // states
    state = -(-per_layer // max(1, tp))
    if not one_token or not state:
        return None
    block = round_up(-(-state // one_token), KERNEL_BLOCK_ALIGNMENT)
    group = _group_size(len(attention), states)
    return HybridPool(
        block_tokens=block,
        page_bytes=block * one_token,
        state_bytes=state,
        group_layers=group,
        attention_groups=-(-len(attention) // group),
        state_groups=-(-states // group),
        ssm_f32=info.rs_ssm_f32,
    )


# Async scheduling (vLLM's default) keeps two batches in flight: a sliding-window layer holds its window
# and both batches' tokens before it frees the blocks behind it (VllmConfig.max_in_flight_tokens)
BATCHES_IN_FLIGHT = 2
# The release from which vLLM's capacity counts a sliding-window layer at its window (vllm#43308: Gemma 4's
# printed KV capacity grew about 10x from 0.20 to 0.21 on the same memory); before, as a full layer
WINDOW_POOL_MINOR = 21


@dataclass(frozen=True)
class WindowPool:
    """One rank's pool of a model with sliding-window layers (gpt-oss, Gemma 2/3): the same hybrid allocator
    pages full-attention and sliding-window layers from one pool of 16-token blocks, in groups of equal
    size, and a sliding-window layer holds at most its window and the tokens in flight, not the context
    (SlidingWindowSpec.max_admission_blocks_per_request: ceil(held / 16) + 1 blocks)."""

    page_bytes: int  # one layer's block of 16 tokens
    group_layers: int
    full_groups: int
    window_groups: int
    held_tokens: int  # a sliding-window layer's most: window - 1 + the tokens in flight

    @property
    def block_bytes(self) -> int:
        return self.page_bytes * self.group_layers

    def blocks_per_request(self, context: int) -> int:
        full = self.full_groups * -(-context // KERNEL_BLOCK_ALIGNMENT)
        held = min(self.held_tokens, context)
        return full + self.window_groups * (-(-held // KERNEL_BLOCK_ALIGNMENT) + 1)

    def longest(self, blocks: int) -> int:
        """The longest request `blocks` hold (vLLM's own --max-model-len auto solves the same)."""
        window_blocks = -(-self.held_tokens // KERNEL_BLOCK_ALIGNMENT) + 1
        if not self.full_groups:
            return 1 << 30 if blocks >= self.window_groups * window_blocks else 0
        past_window = (
            (blocks - self.window_groups * window_blocks) // self.full_groups * KERNEL_BLOCK_ALIGNMENT
        )
        if past_window > self.held_tokens:
            return past_window
        groups = self.full_groups + self.window_groups
        return max(0, (blocks - self.window_groups) // groups * KERNEL_BLOCK_ALIGNMENT)

    def describe(self, context: int, blocks: int) -> str:
        per_request = self.blocks_per_request(context)
        held = min(self.held_tokens, context)
        return (
            f"sliding window: vLLM pages the full-attention and sliding-window layers from one pool "
            f"({self.full_groups + self.window_groups} groups of {self.group_layers} layers); a sliding-window "
            f"layer holds at most {held} tokens (its window and the batches in flight), so a "
            f"request at {context} tokens takes {per_request} blocks: {blocks} blocks hold "
            f"{blocks / max(1, per_request):.2f} such requests"
        )


def _group_size(one_kind: int, other_kind: int) -> int:
    """The layers of a pool group: the smaller layer count, the larger when under 1.25 times that."""
    smaller, larger = sorted((one_kind, other_kind))
    return larger if larger < smaller * GROUP_SLACK else smaller


def window_pool(
    info: ModelInfo, kv_dtype: str, batch_tokens: int, tp: int = 1, build: int | None = None
) -> WindowPool | None:
    """The pool of a model whose attention layers include sliding-window ones, per rank under tensor
    parallel `tp`. None for any other, for layers of unequal pages (which vLLM pads differently), and for a
    vLLM before the release `build` (its minor version; None: today's) that counts them at their window."""
    window = info.sliding_window or 0
    if not info.swa_layers or window <= 0 or info.n_recurrent_layers:
        return None
    if build is not None and build < WINDOW_POOL_MINOR:
        return None
    layers = [layer for layer in range(info.n_layers) if info.kv_heads_at(layer)]
    pages = {kv_layer_bytes(info, layer, kv_dtype, MLA_LATENT) for layer in layers}
    swa = sum(1 for layer in layers if is_swa(info, layer))
    if len(pages) != 1 or not swa:
        return None
    heads = info.kv_heads_at(layers[0])
    kept = max(1, heads // max(1, tp))
    page = KERNEL_BLOCK_ALIGNMENT * pages.pop() * kept // heads
    full = len(layers) - swa
    group = _group_size(full, swa) if full else swa
    return WindowPool(
        page_bytes=page,
        group_layers=group,
        full_groups=-(-full // group),
        window_groups=-(-swa // group),
        held_tokens=window - 1 + BATCHES_IN_FLIGHT * batch_tokens,
    )


@dataclass(frozen=True)
class PoolFill:
    """What one rank's pool of `memory` bytes holds at `context` tokens a request."""

    blocks: int
    tokens: int  # the capacity vLLM prints
    requests: int  # whole requests at the full context, at most max_num_seqs: their states are in use
    kv_bytes: int  # the pool less those states
    state_bytes: int


def fill(pool: HybridPool, memory: int, context: int, max_seqs: int) -> PoolFill:
    blocks = max(0, memory) // pool.block_bytes
    per_request = pool.blocks_per_request(context)
    tokens = int(blocks / per_request * context) if per_request else 0
    requests = min(max_seqs, blocks // per_request) if per_request else 0
    state = requests * pool.state_groups * STATE_PAGES_PER_REQUEST * pool.block_bytes
    return PoolFill(blocks, tokens, requests, blocks * pool.block_bytes - state, state)
