"""llama.cpp's compute buffers, one per device and one on the host, as its scheduler reserves them.

llama_context reserves the worst-case graph of one micro-batch (n_ubatch tokens over a full KV cache) with
ggml_backend_sched: every backend (each GPU, then the CPU, whose buffer is the first GPU's pinned host type,
`CUDA_Host` / `Vulkan_Host` / `ROCm_Host`) gets the peak of the tensors it holds alive at once. What decides
each buffer (ggml-backend.cpp, llama-graph.cpp, llama-context.cpp):

- The graph's inputs (token ids, positions, the KQ mask of every cache, its row indices and the token
  embedding, which `get_rows` reads on the CPU where the embedding lives) sit in the host buffer; with
  pipeline parallelism the scheduler keeps GGML_SCHED_MAX_COPIES copies of them.
- A device that runs attention holds its copy of each KQ mask (f32 as built) and, with flash attention, its
  f16 cast, alive through the layers; then the phase of a layer: Q, K, V, the KQ scores of every head
  (flash attention off) or the attention output; the feed-forward (or the routed experts' gate, up and down
  outputs for each token's experts); and, on the device of the output layer, the logits: every token of the
  micro-batch before build ~b7800, one row per sequence in llama-server since (it caps n_outputs_max).
- A matrix whose weights sit in host RAM (layers not offloaded, experts moved by -ot / --n-cpu-moe) is
  multiplied on the first GPU when the micro-batch has 32 tokens or more (the backend's offload_op): the
  weights are copied into that GPU's compute buffer, one tensor per split, each into the room the one
  before it left, so the largest stands at the peak; a layer that is not offloaded also brings its K and V
  cache views along. (A second copy beside it, of another size, fitted one training run, DeepSeek V3 with
  ub 1024 on four GPUs, and overshot four others by 1.2-2.2 GiB: GLM-5.2 twice, DeepSeek V3 and R1.)

Sizes are f32 unless said. The peak is the largest phase; the allocator's reuse is not simulated tensor by
tensor, so a phase counts the tensors alive together at its widest point.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from vramtui.core.estimate.kvcache import is_swa
from vramtui.core.estimate.modelinfo import ModelInfo

F32 = 4
# ggml-cuda / ggml-vulkan: an op is moved to the GPU when its batch is at least this many tokens
OP_OFFLOAD_MIN_BATCH = 32
# ggml-backend.cpp: copies of each split's inputs with pipeline parallelism
SCHED_COPIES = 4
# Builds (llama.cpp's build number) where the accounting changed. Approximate: the builds around the change.
OUTPUT_FIRST_BUILD = 7300  # -ngl fills the output layer first ("offloading output layer to GPU" comes first)
V_IDXS_BUILD = 6500  # KV rows written by index (set_rows): a V index per element without flash attention
# The sliding-window cache (llama.cpp#13194, May 2025): a window's cells in those layers; before, every layer
# kept the whole context (gemma-3 printouts of b4879 and b5050 hold it, every one from b5775 the window)
SWA_CACHE_BUILD = 5450
# A KV stream per sequence (llama.cpp#14363, July 2025, kv_unified): before, every sequence shared one cache
# and one KQ over all its cells (an Ollama 0.5 runner with 4 slots: kv_size 8192, one stream)
KV_STREAMS_BUILD = 5900
# Flash attention on by default (`-fa auto`, llama.cpp#15434, merged 2025-08-30; b6327 of 08-31 has it):
# before, off unless -fa was given (and before b2680, April 2024, there was none)
FLASH_AUTO_BUILD = 6320
# The CPU backend's run-time repack of Q4_0 weights into a second, interleaved host copy (CPU_AARCH64, later
# CPU_REPACK; llama.cpp#9921, merged mid-November 2024, refactored by #10446 in b4282): before, the weights
# were used as mapped (a May 2024 run with every layer on the host holds the file once, 4437.80 MiB)
REPACK_BUILD = 4100
HOST_HIDDEN_BUILD = 7800  # sched_reserve's era: the host buffer holds two hidden states beside the inputs
# llama-server reserves one logits row per slot (n_outputs_max) only from builds after b9090: printouts of
# b7896, b8179 and b9090 (llama-server, 2 to 4 slots) hold the micro-batch's every row (vocab x ubatch x 4)
OUTPUTS_CAP_BUILD = 9100
# An MLA model's cache keeps the latent alone, its V a view of it (llama.cpp#19067, 2026-01-24: b7780 was
# 01-20 and b7896 02-04); before, V held a copy of the latent part beside K
V_LESS_MLA_BUILD = 7820
# The KQ mask reserved in f16 when flash attention is on (llama.cpp#23764, merged 2026-05-27; b9174 was
# 05-16 and b9432 out by 06-01, so about b9330): before, an f32 mask on the host and an f16 cast of it on
# each device
MASK_F16_BUILD = 9330
# The cache padded to 256 cells whether flash attention is on or not (llama.cpp#17046, 2025-11-06, after
# #16812 of 10-28 had dropped the padding for nine days; b5968 was 07-22 and b7780 01-20, so about b7040):
# before, 256 with flash attention and 32 without (a b5968 printout: -c 64 without it keeps 64 cells)
CELL_PAD_ALWAYS_BUILD = 7040


@dataclass(frozen=True)
class Build:
    """What a llama.cpp build does that the buffers show; None: today's build."""

    number: int | None = None

    def at_least(self, build: int) -> bool:
        return self.number is None or self.number >= build

    @property
    def output_first(self) -> bool:
        return self.at_least(OUTPUT_FIRST_BUILD)

    @property
    def repacks_on_cpu(self) -> bool:
        return self.at_least(REPACK_BUILD)

    @property
    def flash_by_default(self) -> bool:
        return self.at_least(FLASH_AUTO_BUILD)

    @property
    def mask_f16_with_flash(self) -> bool:
        return self.at_least(MASK_F16_BUILD)

    @property
    def cell_pad_without_flash(self) -> int:
        return 256 if self.at_least(CELL_PAD_ALWAYS_BUILD) else 32

    @property
    def host_hidden_copies(self) -> int:
        """Hidden-state-sized tensors the host buffer holds beside the inputs (the embedding rows)."""
        return 2 if self.at_least(HOST_HIDDEN_BUILD) else 1

    def outputs(self, ubatch: int, sequences: int, server: bool) -> int:
        """Logits rows the reserved graph computes."""
        if server and self.at_least(OUTPUTS_CAP_BUILD):
            return min(ubatch, max(1, sequences))
        return ubatch


@dataclass(frozen=True)
class Graph:
    """The worst-case micro-batch as llama.cpp reserves it."""

    info: ModelInfo
    ubatch: int  # tokens of the micro-batch (clamped to the context)
    outputs: int  # logits rows
    flash: bool
    cells: int  # KV cells of a full-attention layer
    swa_cells: int  # ... of a sliding-window layer
    streams: int  # KV streams: 1 for a unified cache, else one per sequence
    build: Build
    # ik_llama.cpp's graph: its -mla mode (None: mainline's graph) and its -amb cap (MiB; 0: none)
    mla: int | None = None
    attn_max_batch: int = 0
    # ik_llama.cpp multiplies host-resident experts on the GPU only when each expert gets 32 tokens on
    # average: micro-batch x experts used >= 32 x experts (ggml_backend_cuda_offload_op, since its #520)
    experts_offload_by_share: bool = False
    # --no-kv-offload: the cache is in host RAM, so the attention that reads it (scores, masks) runs there
    kv_on_host: bool = False
    # ik_llama.cpp builds a causal KQ mask in f16 when flash attention is on (build_inp_KQ_mask): half the
    # host's input, and no f32 copy beside the f16 one on a device
    mask_f16_with_flash: bool = False

    def offloads_experts(self) -> bool:
        """Are host-resident routed experts multiplied on the GPU at this micro-batch?"""
        if self.ubatch < OP_OFFLOAD_MIN_BATCH:
            return False
        info = self.info
        if not self.experts_offload_by_share or not info.is_moe:
            return True
        return self.ubatch * max(1, info.n_experts_used) >= OP_OFFLOAD_MIN_BATCH * info.n_experts

    def kind(self, layer: int) -> str:
        if self.info.is_recurrent(layer):
            return "recurrent"
        return "swa" if is_swa(self.info, layer) else "full"

    def mask_elements(self, kinds: Sequence[str]) -> int:
        """Elements of the KQ masks of these cache kinds (n_kv x tokens per stream x streams); a sparse-
        attention indexer's cache has a mask of its own, as wide as the full cache's."""
        found = 0
        for kind, cells in (("full", self.cells), ("swa", self.swa_cells)):
            if kind in kinds:
                found += cells * self.ubatch // max(1, self.streams)
        if self.info.indexer_key_length and "full" in kinds:
            found += self.cells * self.ubatch // max(1, self.streams)
        return found

    @property
    def kinds(self) -> tuple[str, ...]:
        return tuple(sorted({self.kind(il) for il in range(self.info.n_layers)}))

    def hidden(self) -> int:
        """One hidden-state tensor of the micro-batch."""
        return self.info.hidden * self.ubatch * F32

    def mask_element_bytes(self) -> int:
        """Bytes of one element of the KQ mask as it is built (the graph's input)."""
        return 2 if self.flash and self.mask_f16_with_flash else F32

    def mask_bytes_taken_in(self, casts: bool) -> int:
        """Bytes of one mask element a device takes in: the mask as built where it casts it (or nothing
        is cast), else the f16 cast another card made under flash attention."""
        return 2 if self.flash and not casts else self.mask_element_bytes()


def host_inputs(g: Graph, copies: int = 1) -> int:
    """The host buffer of a GPU run: the graph's inputs (`copies` of each, one per pipeline stage) and the
    token embedding's rows (a computed tensor, not an input: one, whatever the copies)."""
    info, ub = g.info, g.ubatch
    found = g.mask_elements(g.kinds) * g.mask_element_bytes()
    if not g.flash and g.build.at_least(V_IDXS_BUILD):  # a transposed V is written element by element
        width = max((info.kv_heads_at(il) * info.head_dim_v for il in range(info.n_layers)), default=0)
        found += sum(1 for kind in ("full", "swa") if kind in g.kinds) * ub * width * 8
    found += ub * 4 * 4  # token ids, positions, output ids, KV row indices
    return found * copies + g.build.host_hidden_copies * g.hidden()


def masks_on_device(g: Graph, kinds: Sequence[str], casts: bool = True) -> int:
    """The device's copy of each KQ mask it reads, and its f16 cast with flash attention (none where the
    mask is built in f16). The cast runs once, where the scheduler puts it: with the first layer's
    attention. Every other device is handed the f16 result alone (a 4-card split's middle cards print the
    f16 mask and no f32 one)."""
    cast = 2 if casts and g.flash and not g.mask_f16_with_flash else 0
    return g.mask_elements(kinds) * (g.mask_bytes_taken_in(casts) + cast)


def attention_scores(g: Graph, kind: str) -> int:
    """The KQ scores of one layer without flash attention (a plain cache's: all heads x cells x tokens)."""
    if g.flash or kind == "recurrent" or g.info.kv_lora_rank:
        return 0
    cells = g.swa_cells if kind == "swa" else g.cells
    return g.info.n_heads * cells * g.ubatch // max(1, g.streams) * F32


def attention_phase(g: Graph, kind: str, kv_copies: bool = False) -> int:
    """One layer's attention at its widest: residual, normed input, Q/K/V, scores or output."""
    info, ub = g.info, g.ubatch
    heads = info.n_heads
    cells = g.swa_cells if kind == "swa" else g.cells
    base = 2 * g.hidden()
    if kind == "recurrent":
        return base + _recurrent_phase(g)
    if info.kv_lora_rank and g.mla:
        found = base + ik_mla_attention(g, cells)
    elif info.kv_lora_rank and g.mla is None:  # MLA: queries absorbed into the latent, over the latent
        rank = info.kv_lora_rank
        width = heads * (info.head_dim_k + 2 * rank) + info.head_dim_v * heads
        found = base + width * ub * F32
        if not g.flash:
            found += heads * cells * ub // max(1, g.streams) * F32
        if info.indexer_key_length:  # the lightning indexer's scores over every cell (f32), for its top-k
            found += cells * ub // max(1, g.streams) * F32
    else:
        width = heads * (info.head_dim_k + 2 * info.head_dim_v)
        width += info.n_kv_heads * (info.head_dim_k + info.head_dim_v)
        found = base + width * ub * F32
        if not g.kv_on_host:  # ik_llama.cpp computes KQ a share of the heads at a time under -amb
            found += attention_scores(g, kind) // _amb_steps(g, heads * cells * ub * F32)
    if kv_copies:  # a host layer's K and V cache views, copied in for the first GPU
        found += kv_copy_bytes(g, kind)
    return found


def _amb_steps(g: Graph, work_bytes: int) -> int:
    """Into how many steps ik_llama.cpp's -amb cuts a KQ of `work_bytes` (llama-build-context.cpp: the
    heads split evenly, ceil(KQ MiB / amb) steps); 1 without a cap (mainline)."""
    mib = work_bytes // (1 << 20)
    if g.attn_max_batch <= 0 or g.attn_max_batch >= mib:
        return 1
    return min(g.info.n_heads, -(-mib // g.attn_max_batch))


def _amb_heads(g: Graph, work_bytes: int) -> int:
    """Heads ik_llama.cpp decompresses at once for an MLA prompt (build_deepseek2.cpp): all of them, or
    under -amb the most heads n / k (k dividing n) whose share of the f32 K/V stays within the cap."""
    heads, mib = g.info.n_heads, work_bytes // (1 << 20)
    if g.attn_max_batch <= 0 or mib <= g.attn_max_batch:
        return heads
    for parts in range(2, heads):
        if heads % parts == 0 and mib // parts <= g.attn_max_batch:
            return heads // parts
    return 1


def ik_mla_attention(g: Graph, cells: int) -> int:
    """ik_llama.cpp's MLA attention at its widest, for -mla 1-3 (src/graphs/build_deepseek2.cpp).

    With -mla 2 or 3, flash attention and a micro-batch of 128 tokens or more, a prompt decompresses the
    cache's latent through wkv_b, a share of the heads at a time (`_amb_heads`): the f32 K/V of those heads,
    their f16 casts (V, K without and with its rope part, the rope part repeated) beside the queries of every
    head and the attention output gathered so far. Otherwise the queries are absorbed into the latent:
    flash attention over the latent (-mla 1 and 3), or KQ of the heads in -amb steps, its soft-max, and the
    latent's transpose."""
    info, ub = g.info, g.ubatch
    heads, rank, rope = info.n_heads, info.kv_lora_rank, info.qk_rope_head_dim
    nope = info.qk_nope_head_dim or max(info.head_dim_k - rope, 0)
    v_dim = info.head_dim_v
    queries = heads * (nope + rope) * ub * F32
    output = heads * v_dim * ub * F32
    if g.mla in (2, 3) and g.flash and ub >= 128:
        chunk = _amb_heads(g, heads * (nope + v_dim) * cells * F32)
        kv_f32 = chunk * (nope + v_dim) * cells * F32
        casts = chunk * cells * (v_dim + nope + rope) * 2
        return queries + kv_f32 + casts + output
    q_nope2 = heads * rank * ub * F32  # the no-rope queries absorbed into the latent
    q_latent = heads * (rank + rope) * ub * F32  # them with the rope part: the query over the cache
    latent_out = heads * rank * ub * F32
    if g.flash and g.mla in (1, 3):
        # each buffer is freed after its last reader: the concat (the queries, their absorbed half and the
        # query it makes), flash attention (that query and its latent output), wv_b (that output and the
        # heads' values) are the three moments; their widest is the peak (396 MiB of 394 printed for
        # DeepSeek-V3 at -ub 512 under -mla 1, round 62, where summing them gave 572)
        return max(queries + q_nope2 + q_latent, q_latent + latent_out, latent_out + output)
    absorbed = queries + q_nope2 + q_latent
    steps = _amb_steps(g, heads * cells * ub * F32)
    kq = -(-heads // steps) * cells * ub * F32  # KQ of one step; its soft-max takes its place
    return absorbed + kq + latent_out + rank * cells * 2 + output


def kv_copy_bytes(g: Graph, kind: str) -> int:
    """One host layer's K and V views as they are copied to the device (f16 cells of its width)."""
    info = g.info
    cells = g.swa_cells if kind == "swa" else g.cells
    if info.kv_lora_rank:
        return cells * (2 * info.kv_lora_rank + info.qk_rope_head_dim) * 2
    return cells * info.n_kv_heads * (info.head_dim_k + info.head_dim_v) * 2


def _recurrent_phase(g: Graph) -> int:
    """A recurrent layer's mixer over the micro-batch: four tensors of its convolution's width (the
    projected input, it with the carried conv state, the convolved output, its normalized q/k/v), the
    hidden-wide ones beside them being smaller; five Qwen3.5/3.6 printouts (CUDA, Metal, Vulkan, 512 to
    2048 tokens) put it within 8%, where adding a hidden width to each read x1.3 at 2048 tokens."""
    info = g.info
    width = info.rs_conv_elements // 3 if info.rs_conv_elements else 2 * info.hidden
    return 4 * width * g.ubatch * F32


def ffn_phase(g: Graph, layer: int, experts: bool = True) -> int:
    """One layer's feed-forward at its widest; `experts`: the routed experts are computed here."""
    info, ub = g.info, g.ubatch
    base = 2 * g.hidden()
    if info.is_moe and layer >= info.n_dense_layers:
        shared = info.shared_intermediate or (info.moe_intermediate or 0) * info.n_shared_experts
        found = base + 3 * shared * ub * F32 + 2 * info.n_experts * ub * F32
        if experts:  # gate, up and their product; then the product, the down outputs and their weighting
            used = max(1, info.n_experts_used)
            ff = info.moe_intermediate or info.intermediate or 4 * info.hidden
            found += max(3 * ff, ff + 2 * info.hidden) * used * ub * F32
        return found
    ff = info.intermediate or 4 * info.hidden
    return base + 3 * ff * ub * F32


def output_phase(g: Graph) -> int:
    return g.outputs * g.info.logits_width * F32 + 2 * g.hidden()


def weight_copies(sizes: Sequence[int]) -> int:
    """Host weights multiplied on the GPU: one copy at a time, the largest at the peak."""
    return max(sizes, default=0)


@dataclass(frozen=True)
class HostLayer:
    """A layer some of whose matrices stay in host RAM: their sizes (`experts`: those of its routed
    experts among them), and whether the whole layer does."""

    layer: int
    sizes: tuple[int, ...]
    whole: bool
    experts: tuple[int, ...] = ()

    def without_experts(self) -> tuple[int, ...]:
        left = list(self.sizes)
        for size in self.experts:
            left.remove(size)
        return tuple(left)


def offload_phase(g: Graph, host: Sequence[HostLayer]) -> int:
    """The first GPU's peak while it multiplies host-resident weights (a micro-batch of 32 tokens or more).

    By then the mask's f32 copy has gone (its one reader, the f16 cast, ran in the first split that needed
    it): the f16 cast stays with flash attention, the f32 mask without."""
    peak, experts = 0, g.offloads_experts()
    for item in host:
        sizes = item.sizes if experts else item.without_experts()
        if not sizes:
            continue  # only experts, and they are multiplied where they are
        kind = g.kind(item.layer)
        work = ffn_phase(g, item.layer, experts)
        if item.whole:
            work = max(work, attention_phase(g, kind, kv_copies=True))
        masks = g.mask_elements([kind]) * (2 if g.flash else F32)
        peak = max(peak, weight_copies(sizes) + work + masks)
    return peak


@dataclass(frozen=True)
class DeviceWork:
    """What one device computes: its repeating layers (attention and what of the feed-forward stays with
    the layer), the layers whose routed experts it holds, the output layer, and (the first GPU) the
    host-resident weights it multiplies, the output matrix among them when the output stays on the host."""

    layers: tuple[int, ...] = ()
    expert_layers: tuple[int, ...] = ()
    output: bool = False
    host: tuple[HostLayer, ...] = ()
    host_output: int = 0  # bytes of the output matrix in host RAM (0: not this device's to multiply)
    casts_masks: bool = True  # it holds the first layer: the f16 cast of the masks runs here


def device_peak(g: Graph, work: DeviceWork) -> int:
    """One device's compute buffer: the widest phase of what it computes."""
    layers, expert_layers, output, host = work.layers, work.expert_layers, work.output, work.host
    kinds = sorted({g.kind(il) for il in layers})
    attended = [kind for kind in kinds if kind != "recurrent"]
    masks = 0 if g.kv_on_host else masks_on_device(g, attended, work.casts_masks)
    peak = max((attention_phase(g, kind) for kind in kinds), default=0)
    experts = set(expert_layers)
    ffn = max((ffn_phase(g, il, il in experts) for il in _distinct(g, layers)), default=0)
    ffn = max(ffn, *(ffn_phase(g, il) for il in _distinct(g, sorted(experts - set(layers)))), 0)
    peak = max(peak, ffn) + masks if layers or experts else 0
    if output:
        peak = max(peak, output_phase(g))
    if g.ubatch >= OP_OFFLOAD_MIN_BATCH:
        peak = max(peak, offload_phase(g, host))
    if work.host_output and g.outputs >= OP_OFFLOAD_MIN_BATCH:
        peak = max(peak, output_phase(g) + work.host_output)
    return peak


def _distinct(g: Graph, layers: Sequence[int]) -> list[int]:
    """One layer of each kind of feed-forward (dense lead layers, MoE layers): their phases are alike."""
    seen: dict[bool, int] = {}
    for il in layers:
        seen.setdefault(g.info.is_moe and il >= g.info.n_dense_layers, il)
    return list(seen.values())


def host_experts_phase(g: Graph) -> int:
    """ik_llama.cpp's routed experts multiplied where they sit, on the CPU, at a micro-batch too small for
    its share rule: its fused gate-and-up gives one intermediate per used expert, beside the down outputs
    before their weighting (ub x used x (n_ff_exp + n_embd) f32: 144 of Kimi-K2.5's 159 MiB at -ub 512)."""
    info = g.info
    ff = info.moe_intermediate or info.intermediate or 4 * info.hidden
    return (ff + info.hidden) * max(1, info.n_experts_used) * g.ubatch * F32


def host_peak(g: Graph, host: Sequence[HostLayer], pipeline: bool, output_on_host: bool) -> int:
    """The host buffer of a GPU run: the inputs (copied per pipeline stage), and the host layers' own
    phases when the micro-batch is too small for the GPU to take them."""
    found = host_inputs(g, SCHED_COPIES if pipeline else 1)
    if g.ubatch < OP_OFFLOAD_MIN_BATCH and host:
        found += max(ffn_phase(g, item.layer) for item in host)
    elif host and not g.offloads_experts() and any(item.experts for item in host):
        found += host_experts_phase(g)
    if output_on_host and g.outputs < OP_OFFLOAD_MIN_BATCH:
        found += output_phase(g)
    if g.kv_on_host:  # the scores over the host's cache, beside the graph's inputs (the masks among them)
        found += max((attention_scores(g, kind) for kind in g.kinds), default=0)
    return found
