"""llama.cpp's compute buffers per device and on the host, and `-ot` to a named GPU (issue 23), on real
(tiny, qwen3moe-shaped) GGUFs: the bytes each device gets are the file's own tensor bytes."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from vramtui.core.backends.llama_cpp import graph
from vramtui.core.demo.tinygguf import TinyMoESpec, write_tiny_moe_gguf
from vramtui.core.estimate import devices
from vramtui.core.estimate.estimator import Settings, estimate
from vramtui.core.estimate.modelinfo import load_model_info
from vramtui.core.memory.parts import HOST
from vramtui.core.units import GIB, MIB

SPEC = TinyMoESpec()  # 6 layers, 256 wide, 8 experts (2 active) of 128, f16
CARDS = (8 * GIB, 8 * GIB)


# Wide experts (8.5 MiB a tensor at q8_0) beside a short context: the copies of host experts show
WIDE = TinyMoESpec(
    n_layer=2, n_embd=512, n_head=8, n_head_kv=2, head_dim=64, n_expert=32, n_ff_exp=512, dtype="q8_0"
)


@pytest.fixture(scope="module")
def moe_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_moe_gguf(tmp_path_factory.mktemp("moe") / "tiny-qwen3moe-f16.gguf", SPEC)


@pytest.fixture(scope="module")
def wide_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_moe_gguf(tmp_path_factory.mktemp("wide") / "wide-qwen3moe-q8_0.gguf", WIDE)


def tensor_bytes(path: Path, pattern: str) -> int:
    """What the file itself says: the bytes of the tensors whose name matches."""
    import gguf

    reader = gguf.GGUFReader(str(path))
    return sum(int(t.n_bytes) for t in reader.tensors if re.search(pattern, t.name))


def _layers_on(device: int, n: int = SPEC.n_layer) -> list[int]:
    """The layers llama.cpp gives a device of two equal cards (every layer and the output offloaded)."""
    where = devices.layer_devices(n, 0, n + 1, [1.0, 1.0])
    return [il for il in range(n) if where[il] == device]


def _blocks(layers: list[int]) -> str:
    return "|".join(str(il) for il in layers)


def test_ot_to_a_named_gpu_puts_those_tensors_on_that_card(moe_gguf: Path) -> None:
    info = load_model_info(moe_gguf)
    first, second = _layers_on(0), _layers_on(1)
    assert first and second
    # the experts of the first card's first two layers go to the second card
    moved = first[:2]
    rule = rf"blk\.({_blocks(moved)})\.ffn_(gate|up|down)_exps=CUDA1"
    est = estimate(info, Settings(context=1024, gpus=CARDS, override_tensor=(rule,)))
    cuda0, cuda1 = est.devices
    experts = tensor_bytes(moe_gguf, rf"^blk\.({_blocks(moved)})\.ffn_(gate|up|down)_exps")
    assert experts > 0
    plain = estimate(info, Settings(context=1024, gpus=CARDS))
    assert cuda0.weights_bytes == plain.devices[0].weights_bytes - experts
    assert cuda1.weights_bytes == plain.devices[1].weights_bytes + experts
    # byte for byte what the file holds: the second card's layers, the output matrix and the moved experts
    own = tensor_bytes(moe_gguf, rf"^blk\.({_blocks(second)})\.") + tensor_bytes(moe_gguf, r"^output")
    assert cuda1.weights_bytes == own + experts
    # the KV cache stays with the layer's card; the host keeps the token embedding alone
    assert cuda0.kv_cache_bytes == plain.devices[0].kv_cache_bytes
    assert est.weights_host_bytes == tensor_bytes(moe_gguf, r"^token_embd")


def test_ot_names_any_backends_devices_and_the_host(moe_gguf: Path) -> None:
    info = load_model_info(moe_gguf)
    vulkan = estimate(info, Settings(context=1024, gpus=CARDS, override_tensor=(r"exps=Vulkan1",)))
    cuda = estimate(info, Settings(context=1024, gpus=CARDS, override_tensor=(r"exps=CUDA1",)))
    assert [row.weights_bytes for row in vulkan.devices] == [row.weights_bytes for row in cuda.devices]
    experts = tensor_bytes(moe_gguf, r"ffn_(gate|up|down)_exps")
    assert cuda.devices[1].weights_bytes - estimate(info, Settings(context=1024, gpus=CARDS)).devices[
        1
    ].weights_bytes == tensor_bytes(moe_gguf, rf"^blk\.({_blocks(_layers_on(0))})\.ffn_(gate|up|down)_exps")
    read = estimate(info, Settings(context=1024, gpus=CARDS, override_tensor=(r"exps=CPU",), mmap=False))
    assert read.expert_host_bytes == experts
    assert read.weights_host_bytes == experts + tensor_bytes(moe_gguf, r"^token_embd")


def test_mmap_maps_the_span_of_the_host_tensors(moe_gguf: Path) -> None:
    """mmapped, the host buffer is the file's span from its first host tensor to its last (a file ordered
    as llama-quantize writes it: output, output_norm, token_embd, then layer by layer, by name): with every
    expert on the host that is the whole file but the output matrix and its norm (a real run: printed
    17447.91 MiB of a 17.28 GiB file, output 249 MiB)."""
    info = load_model_info(moe_gguf)
    mapped = estimate(info, Settings(context=1024, override_tensor=(r"exps=CPU",)))
    whole = tensor_bytes(moe_gguf, r".")
    assert mapped.weights_host_bytes == whole - tensor_bytes(moe_gguf, r"^output")
    # every layer offloaded: the span is the token embedding alone
    full = estimate(info, Settings(context=1024))
    assert full.weights_host_bytes == tensor_bytes(moe_gguf, r"^token_embd")


def test_the_host_keeps_a_compute_buffer_of_the_graphs_inputs(moe_gguf: Path) -> None:
    """A GPU run's host buffer (CUDA_Host): the KQ mask of the full cache and the token embedding's rows;
    printed 36-2112 MiB on real runs, billed 0 before. The mask is f32 until llama.cpp#23764 (an f16 cast
    of it on the device under flash attention), f16 from then on with flash attention."""
    info = load_model_info(moe_gguf)
    embedding = SPEC.n_embd * 512 * 4
    for build, element in ((9100, 4), (graph.MASK_F16_BUILD, 2), (None, 2)):
        settings = Settings(context=8192, ubatch=512, flash_attn=True, engine_build=build)
        host = estimate(info, settings).bill.get("compute", HOST)
        mask = 8192 * 512 * element
        assert mask + embedding <= host <= mask + 2 * embedding + 64 * 1024, build
        # twice the context, twice the mask
        longer = estimate(info, replace(settings, context=16384)).bill.get("compute", HOST)
        assert longer - host == mask, build
    # without flash attention the mask stays f32 in every build
    plain = estimate(info, Settings(context=8192, ubatch=512, flash_attn=False)).bill.get("compute", HOST)
    assert plain >= 8192 * 512 * 4


def test_experts_in_host_ram_are_multiplied_on_the_first_gpu(wide_gguf: Path) -> None:
    """With 32 tokens or more in the micro-batch the GPU takes the host experts' products: their weights
    are copied into its compute buffer (one expert tensor at a time)."""
    info = load_model_info(wide_gguf)
    one_expert_tensor = tensor_bytes(wide_gguf, r"^blk\.0\.ffn_up_exps")
    on_gpu = estimate(info, Settings(context=512, ubatch=512))
    to_host = estimate(info, Settings(context=512, ubatch=512, cpu_moe=True))
    assert to_host.bill.get("compute", 0) >= one_expert_tensor
    assert to_host.bill.get("compute", 0) > on_gpu.bill.get("compute", 0)
    # a micro-batch of 16 tokens stays on the CPU: no copy on the GPU, the work on the host
    small = estimate(info, Settings(context=512, ubatch=16, batch=16, cpu_moe=True))
    small_gpu = estimate(info, Settings(context=512, ubatch=16, batch=16))
    assert small.bill.get("compute", 0) < one_expert_tensor
    assert small.bill.get("compute", HOST) > small_gpu.bill.get("compute", HOST)


def test_only_the_first_gpu_takes_the_host_experts(wide_gguf: Path) -> None:
    info = load_model_info(wide_gguf)
    est = estimate(info, Settings(context=512, ubatch=512, gpus=CARDS, cpu_moe=True))
    plain = estimate(info, Settings(context=512, ubatch=512, gpus=CARDS))
    one_expert_tensor = tensor_bytes(wide_gguf, r"^blk\.0\.ffn_up_exps")
    assert est.devices[0].compute_buffer_bytes >= one_expert_tensor
    assert est.devices[1].compute_buffer_bytes <= plain.devices[1].compute_buffer_bytes
    assert est.devices[0].compute_buffer_bytes > est.devices[1].compute_buffer_bytes


def test_layers_left_on_the_host_bring_their_kv_to_the_first_gpu(moe_gguf: Path) -> None:
    """A layer that is not offloaded is computed on the GPU too (micro-batch >= 32): its K and V views are
    copied in, so without flash attention the buffer holds a host layer's scores and both views."""
    info = load_model_info(moe_gguf)
    full = estimate(info, Settings(context=32768, ubatch=512, flash_attn=False))
    part = estimate(info, Settings(context=32768, ubatch=512, flash_attn=False, gpu_layers=3))
    kv_views = 32768 * SPEC.n_head_kv * SPEC.head_dim * 2 * 2  # one layer's K and V, f16
    assert part.bill.get("compute", 0) >= full.bill.get("compute", 0) + kv_views // 2
    assert part.bill.get("compute", HOST) < 64 * MIB + 32768 * 512 * 4  # the host holds the inputs only


def test_a_build_before_flash_attention_by_default_reserves_the_kq_matrix(moe_gguf: Path) -> None:
    """llama.cpp turned flash attention on by default (`-fa auto`) only at about b6320: a build before it
    with no -fa reserves the whole KQ matrix, heads x cells x micro-batch in f32 (round 56: an A100 server
    of b2167 at -c 40960 printed 3320 MiB, and the estimate, taking today's default, gave 221)."""
    info = load_model_info(moe_gguf)
    cells, ubatch = 8192, 512
    kq = SPEC.n_head * cells * ubatch * 4

    def device_compute(build: int | None, flash: bool | None = None) -> int:
        settings = Settings(context=cells, ubatch=ubatch, flash_attn=flash, engine_build=build)
        return estimate(info, settings).bill.get("compute", 0)

    before, since = graph.FLASH_AUTO_BUILD - 1, graph.FLASH_AUTO_BUILD
    old, new = device_compute(before), device_compute(since)
    assert old - new >= kq // 2, (old, new, kq)
    # the default and nothing else: -fa given reads the same in both builds, and from then on auto is on
    assert device_compute(before, flash=False) == old
    assert device_compute(before, flash=True) == device_compute(since, flash=True) == new
    assert device_compute(None) == device_compute(None, flash=True)


def test_flash_attention_on_is_offered_where_it_alone_makes_the_run_fit(moe_gguf: Path) -> None:
    """QA 35 F16: a compute buffer over the card with flash attention off was offered a 64-token micro-batch
    or a far shorter context, never `--flash-attn on`, the wizard's first move (and it fits)."""
    info = load_model_info(moe_gguf)
    off = Settings(context=32768, ubatch=512, flash_attn=False)
    on_total = estimate(info, replace(off, flash_attn=True)).total_bytes
    off_total = estimate(info, off).total_bytes
    assert off_total > on_total
    card = int((on_total + off_total) / 2 / 0.8)  # the 80% line between the two
    est = estimate(info, replace(off, device_bytes=card))
    assert not est.fits and est.flash_attn_fit is True
    assert "with flash attention on it fits" in " ".join(est.notes)
    # where it is on already, or where it would not be enough, nothing is offered
    assert estimate(info, replace(off, flash_attn=True, device_bytes=card)).flash_attn_fit is None
    short = estimate(info, replace(off, device_bytes=int(on_total * 0.5 / 0.8)))
    assert not short.fits and short.flash_attn_fit is None
