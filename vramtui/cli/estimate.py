"""`vramtui estimate`: will this model fit this card, and what to cut if it does not."""

from __future__ import annotations

import argparse
import re
import shutil
import sys
from typing import Any

from vramtui.core.errors import VramtuiError
from vramtui.core.memory.parts import HOST, PARTS, part_label

HELP = "estimate a model's memory on a GPU (weights, KV cache, buffers) before launching it"

EXIT_STATUS = "exit status: 0 the model fits, 1 it does not fit, 2 bad input (a flag or a model file)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = EXIT_STATUS
    parser.add_argument(
        "model",
        nargs="?",
        help="a .gguf file, a Hugging Face folder or config.json, an Ollama name (llama3:8b) "
        "or an HF repo id in the local cache; omit to describe the model with flags",
    )
    shape = parser.add_argument_group("model (override what the files say)")
    shape.add_argument("--params", metavar="N", help="parameter count: 30B, 7.6e9, 350M")
    shape.add_argument("--layers", metavar="N", help="transformer layers")
    shape.add_argument("--kv-heads", metavar="N", help="key/value heads (GQA)")
    shape.add_argument("--head-dim", metavar="N", help="dimension of one attention head")
    shape.add_argument("--hidden", metavar="N", help="hidden size")
    shape.add_argument("--heads", metavar="N", help="attention (query) heads")
    shape.add_argument("--vocab", metavar="N", help="vocabulary size")
    shape.add_argument(
        "--quant",
        metavar="TYPE",
        help="weights: q4_0 q4_k_m q5_k_m q6_k q8_0 iq4_xs ... f32 f16 bf16 fp8 int8 nf4 (bitsandbytes) awq gptq",
    )
    run = _add_run(parser)
    _add_host_weights(run)
    _add_extras(parser)
    card = parser.add_argument_group("the card")
    card.add_argument(
        "--gpu-mem",
        metavar="SIZE[,SIZE...]",
        help="device memory: 24GiB, 24G, 24576MiB; several GPUs: 24GiB,12GiB (default: every GPU NVML "
        "sees, else 24GiB)",
    )
    _add_several_gpus(parser)
    _add_ik_llama(parser)
    card.add_argument(
        "--safety",
        "--gpu-memory-utilization",
        metavar="SHARE",
        help="usable share of the card (default 0.8; for vLLM its gpu-memory-utilization, default 0.92)",
    )
    card.add_argument("--cpu", action="store_true", help="size a CPU-only run (what goes to host RAM)")
    card.add_argument(
        "--memory-budget",
        metavar="SIZE",
        help="a profile's [limits] memory_budget (an address-space cap on the host): sized as check and the "
        "wizard size it, the engine's own footprint taken off first",
    )
    card.add_argument(
        "--program",
        metavar="PATH",
        help="with --memory-budget: the engine's binary (a profile's program), whose own footprint is measured "
        "(default: the engine's program on PATH)",
    )
    _add_modes(parser)


def _add_run(parser: argparse.ArgumentParser) -> Any:
    """How it runs: the engine, the context, the slots, the batches, the cache and the placement."""
    run = parser.add_argument_group("how it runs")
    run.add_argument(
        "--backend",
        default=None,  # llama.cpp, the estimate's default, where none is given (said for a safetensors folder)
        help="llama.cpp (the default), llama-cpp-python, ik_llama.cpp, vllm, transformers or ollama",
    )
    # llama-server's own spellings too (-c, -np, -ngl ...): typed from habit, they must mean what they mean
    # there (QA: `-c 4096` was read as -cram's prefix and `-ngl 2` as -ngld's, silently)
    # ... and vLLM's (QA 9: `--max-model-len`, the spelling diagnose's advice prints, was refused)
    run.add_argument(
        "--ctx", "-c", "--ctx-size", "--max-model-len", metavar="TOKENS", help="context length (8192, 32k)"
    )
    run.add_argument("--parallel", "-np", "--max-num-seqs", metavar="N", help="concurrent sequences")
    run.add_argument(
        "--batch",
        "-b",
        "--batch-size",
        "--max-num-batched-tokens",
        metavar="N",
        help="logical batch (vLLM: max-num-batched-tokens)",
    )
    run.add_argument("--ubatch", "-ub", "--ubatch-size", metavar="N", help="micro-batch (llama.cpp n_ubatch)")
    run.add_argument(
        "--flash-attn",
        "-fa",
        nargs="?",
        const="on",
        metavar="on|off",
        help="flash attention (bare flag: on; default: the backend's own)",
    )
    run.add_argument(
        "--kv-dtype",
        metavar="TYPE",
        help="KV cache type: f16, bf16, q8_0, q4_0 (llama.cpp; K/V apart: q4_0/f16), fp8 (vLLM)",
    )
    # llama-server's K and V types apart (QA 7: `-ctk q8_0` was read as `-c tk`, and `--cache-type-k`, the
    # spelling diagnose's advice prints, was refused)
    run.add_argument("-ctk", "--cache-type-k", metavar="TYPE", help="llama.cpp: the K cache's type alone")
    run.add_argument("-ctv", "--cache-type-v", metavar="TYPE", help="llama.cpp: the V cache's type alone")
    run.add_argument(
        "--gpu-layers",
        "-ngl",
        "--n-gpu-layers",
        metavar="N",
        help="llama.cpp: layers on the GPU (default all)",
    )
    run.add_argument(
        "--cpu-moe", action="store_true", help="llama.cpp, MoE models: every expert tensor in host RAM"
    )
    run.add_argument(
        "--n-cpu-moe",
        metavar="N",
        help="llama.cpp, MoE models: the experts of the first N layers in host RAM",
    )
    run.add_argument(
        "-ot",
        "--override-tensor",
        metavar="PATTERN=DEVICE",
        action="append",
        default=[],
        help="llama.cpp: tensors whose name matches PATTERN go to DEVICE (CPU for host RAM; repeatable)",
    )
    return run


def _add_modes(parser: argparse.ArgumentParser) -> None:
    """What else to ask and how to answer: the engine's dry run, the disk's models, the grid, the JSON."""
    parser.add_argument(
        "--engine",
        action="store_true",
        help="also ask llama.cpp itself (a no_alloc dry run through llama-cpp-python) for a .gguf",
    )
    parser.add_argument(
        "--no-meta", action="store_true", help="count parameters by arithmetic, not transformers"
    )
    parser.add_argument(
        "--list",
        action="store_true",
        help="list models already on disk (HF cache, Ollama store, GGUFs under --search folders) and exit",
    )
    parser.add_argument(
        "--search", metavar="DIR", action="append", default=[], help="a folder with .gguf files (repeatable)"
    )
    parser.add_argument(
        "--table",
        action="store_true",
        help="a grid: which quantization (files beside the model, else the usual ones) fits at which "
        "context (4k up to the trained length), with the sequences that fit at once",
    )
    parser.add_argument(
        "--no-calibrate",
        action="store_true",
        help="leave out what earlier runs on this machine measured (runtime overhead, compute buffers)",
    )
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")


def _add_host_weights(run: Any) -> None:
    """How the weights sit in host RAM: llama.cpp's load mode, vLLM's CPU offload."""
    run.add_argument(
        "--no-mmap",
        action="store_true",
        help="llama.cpp: the file is read, not mapped (--load-mode none): q4_0's repacked copy replaces it",
    )
    run.add_argument(
        "-nkvo",
        "--no-kv-offload",
        action="store_true",
        help="llama.cpp: the KV cache stays in host RAM, its attention on the CPU",
    )
    run.add_argument(
        "-kvu",
        "--kv-unified",
        action="store_true",
        help="llama.cpp: one KV cache for every slot, so one request may use all of it (llama-server's own "
        "choice with --parallel left out)",
    )
    run.add_argument(
        "--swa-full",
        action="store_true",
        help="llama.cpp: sliding-window layers keep every cell, not just the window (Gemma, gpt-oss)",
    )
    run.add_argument(
        "--cpu-offload-gb",
        metavar="GiB",
        help="vLLM: GiB of the decoder layers' weights kept in host RAM, per GPU (much slower)",
    )
    run.add_argument(
        "--kv-cache-memory",
        metavar="SIZE",
        help="vLLM: the KV cache set outright (--kv-cache-memory-bytes, e.g. 4GiB); the share then does not count",
    )
    run.add_argument(
        "--kv-cache-memory-bytes",
        metavar="BYTES",
        help="vLLM's spelling of --kv-cache-memory: bytes, or with its suffix (4G, 512M)",
    )
    run.add_argument(
        "--enforce-eager", action="store_true", help="vLLM: no CUDA graphs (their memory unbilled)"
    )
    run.add_argument(
        "--dtype",
        metavar="TYPE",
        help="vLLM, transformers: the weights' type at load (auto, float32, float16, bfloat16)",
    )


def _add_ik_llama(parser: argparse.ArgumentParser) -> None:
    """ik_llama.cpp's own knobs, spelled as it spells them."""
    ik = parser.add_argument_group("ik_llama.cpp (--backend ik_llama.cpp)")
    ik.add_argument(
        "-mla",
        "--mla-use",
        dest="mla",
        metavar="0-3",
        help="MLA models: 0 per-head K and V, 1 the latent and its transpose, 2/3 the latent alone (default 3)",
    )
    ik.add_argument(
        "-amb",
        "--attention-max-batch",
        dest="attn_max_batch",
        metavar="MiB",
        help="the cap on the attention's work tensors (default 256; 0: none)",
    )


def _add_several_gpus(parser: argparse.ArgumentParser) -> None:
    """llama.cpp's split and vLLM's parallel sizes, spelled as the engines spell them."""
    gpus = parser.add_argument_group("several GPUs")
    gpus.add_argument(
        "-ts", "--tensor-split", metavar="N0,N1,...", help="llama.cpp: share of the model per GPU"
    )
    gpus.add_argument("-sm", "--split-mode", metavar="layer|row|none", help="llama.cpp: how to split (layer)")
    gpus.add_argument("-mg", "--main-gpu", metavar="INDEX", help="llama.cpp: the GPU of -sm none / row (0)")
    gpus.add_argument("-tp", "--tensor-parallel-size", metavar="N", help="vLLM: tensor-parallel ranks")
    gpus.add_argument("-pp", "--pipeline-parallel-size", metavar="N", help="vLLM: pipeline stages")
    gpus.add_argument(
        "--device-map",
        metavar="auto|balanced|balanced_low_0|sequential|cuda:N",
        help="transformers: accelerate's device map (auto when several GPUs are given)",
    )
    gpus.add_argument(
        "--max-memory", metavar="0=20GiB,1=46GiB,cpu=64GiB", help="transformers: per-device caps for the map"
    )


def _add_extras(parser: argparse.ArgumentParser) -> None:
    """The flags of what rides along with the model, spelled as llama-server (and vLLM) spell them."""
    extra = parser.add_argument_group("what rides along (llama.cpp's spelling; vLLM's LoRA slots)")
    extra.add_argument("-mm", "--mmproj", metavar="FILE", help="llama.cpp: a vision projector GGUF")
    extra.add_argument("-md", "--model-draft", metavar="FILE", help="llama.cpp: a draft model GGUF")
    extra.add_argument(
        "-ngld",
        "--gpu-layers-draft",
        metavar="N",
        help="llama.cpp: the draft's layers on the GPU (default all)",
    )
    extra.add_argument(
        "-devd", "--device-draft", metavar="DEV", help="llama.cpp: the draft's device (none: host)"
    )
    extra.add_argument(
        "--ctx-size-draft",
        metavar="TOKENS",
        help="the draft's context (default the model's; older llama-server)",
    )
    extra.add_argument(
        "-cram",
        "--cache-ram",
        metavar="MiB",
        help="llama-server's host prompt cache limit (-1 no limit, 0 off)",
    )
    extra.add_argument(
        "--lora",
        metavar="FILE",
        action="append",
        default=[],
        help="llama.cpp: a LoRA adapter GGUF (repeatable)",
    )
    extra.add_argument("--max-loras", metavar="N", help="vLLM: LoRA adapters served at once (its slots)")
    extra.add_argument("--max-lora-rank", metavar="N", help="vLLM: the largest LoRA rank (default 16)")
    extra.add_argument(
        "--mtp", action="store_true", help="the model's own MTP layers speculate (an extra layer)"
    )


def _texts(args: argparse.Namespace) -> dict[str, str | None]:
    """The flags as typed, by input name (core/estimate/inputs.py parses them, as it does the pane's)."""
    from vramtui.core.estimate.inputs import PARSERS

    names = {"context": "ctx", "card": "gpu_mem"}
    texts = {name: getattr(args, names.get(name, name), None) for name in PARSERS}
    texts["override_tensor"] = ",".join(args.override_tensor or [])
    texts["cpu_moe"] = "on" if args.cpu_moe else None
    texts["lora"] = ",".join(args.lora or [])
    texts["mtp"] = "on" if args.mtp else None
    texts["mmap"] = "off" if args.no_mmap else None
    texts["kv_offload"] = "off" if args.no_kv_offload else None
    texts["kv_unified"] = "on" if args.kv_unified else None
    texts["swa_full"] = "on" if args.swa_full else None
    texts["kv_dtype"] = _kv_types(args.kv_dtype, args.cache_type_k, args.cache_type_v)
    texts["enforce_eager"] = "on" if args.enforce_eager else None
    if args.kv_cache_memory_bytes and not args.kv_cache_memory:  # vLLM's own spelling, read as vLLM reads it
        texts["kv_cache_memory"] = _vllm_bytes(args.kv_cache_memory_bytes.strip())
    if not texts.get("card"):
        texts["card"] = _default_cards()
    return texts


_VLLM_SUFFIXED = re.compile(r"(\d+(?:\.\d+)?)([kKmMgGtT])")


def _vllm_bytes(given: str) -> str:
    """--kv-cache-memory-bytes as vLLM's human_readable_int takes it: a bare number is bytes, k/m/g/t are
    powers of 1000 (decimals allowed), K/M/G/T powers of 1024 and whole numbers only (QA 29: "3.2G" was
    taken here as 3.2 GiB, and vLLM refuses it). Other spellings ("4GiB") are read as sizes."""
    if given.isdigit():
        return f"{given}B"
    match = _VLLM_SUFFIXED.fullmatch(given)
    if match is None:
        return given
    number, suffix = match.groups()
    if suffix.islower():
        return f"{int(float(number) * 1000 ** ('kmgt'.index(suffix) + 1))}B"
    if "." in number:
        raise VramtuiError(
            f"--kv-cache-memory-bytes {given}: vLLM refuses decimals with its binary suffix {suffix}; "
            f"use {number}{suffix.lower()} (powers of 1000) or a whole number of {suffix}"
        )
    return f"{int(number) * 1024 ** ('KMGT'.index(suffix) + 1)}B"


def _kv_types(both: str | None, k_type: str | None, v_type: str | None) -> str | None:
    """--kv-dtype with llama-server's -ctk / -ctv laid over it: "K/V" where they differ (f16 where unsaid)."""
    if k_type is None and v_type is None:
        return both
    k_default, _, v_default = (both or "f16").partition("/")
    k_found, v_found = k_type or k_default, v_type or v_default or k_default
    return k_found if k_found == v_found else f"{k_found}/{v_found}"


NO_GPU_CARD = "24GiB"
# said whenever that card is assumed (the estimator pane says the same): a FITS for a card not there misleads
NO_GPU_NOTE = "no GPU found: sized for a 24 GiB card (give yours with --gpu-mem SIZE)"


def _host_ram_note(est: Any) -> str | None:
    """The host's share against this machine's RAM: 504 GiB of host weights on a 23.5 GiB box is no fit
    here, whatever the GPU verdict says (sized for another machine, the note says how much it needs)."""
    from vramtui.core.estimate.estimator import host_ram_bytes
    from vramtui.core.memory.parts import HOST
    from vramtui.core.units import format_bytes

    needed = est.bill.total(HOST) if est.device == "gpu" else est.total_bytes
    here = host_ram_bytes()
    if not here or needed <= here:
        return None
    return (
        f"host RAM: this needs {format_bytes(needed)} in host RAM and this machine has {format_bytes(here)} "
        "in all: it would not load here (on another machine, it needs that much free)"
    )


def _share_over_free(est: Any, settings: Any) -> None:
    """An engine whose CPU build takes a share of the whole machine at start and refuses when less is free
    (vLLM's: "less than requested memory for kv"): measured against what is free now, the verdict says so
    (QA 29 Q8: "FITS, 878 MiB to spare", exit 0, for a share of 21.7 GiB with 21.4 GiB free; check warned)."""
    import psutil

    from vramtui.core.backends import get_backend
    from vramtui.core.units import format_bytes

    backend = get_backend(est.backend)
    if not backend.cpu_share_words or est.device != "host" or settings.kv_cache_memory or est.refused:
        return
    asked = int(est.device_bytes * settings.share)
    free = int(psutil.virtual_memory().available)
    if asked <= free:
        return
    est.fits = False
    est.reason = (
        f"its CPU build asks for {settings.share:.0%} of this machine's memory ({format_bytes(asked)}) at start, "
        f"more than the {format_bytes(free)} free now: it refuses to start; set --kv-cache-memory-bytes (the KV "
        "cache outright) or a lower --safety"
    )


def _default_cards() -> str:
    """Every GPU NVML sees (its total memory), else 24GiB: the size sized when --gpu-mem is not given."""
    from vramtui.core.memory.nvml import gpu_total_bytes

    found = gpu_total_bytes()
    return ",".join(f"{size}B" for size in found) if found else NO_GPU_CARD


def _assumed_cards(args: argparse.Namespace) -> int:
    """How many 24 GiB cards to assume with no GPU here: as many as the layout asked for names (a
    --tensor-split's shares, tensor x pipeline ranks), else one."""
    shares = len([part for part in str(args.tensor_split or "").replace("/", ",").split(",") if part.strip()])
    try:
        ranks = int(args.tensor_parallel_size or 1) * int(args.pipeline_parallel_size or 1)
    except ValueError:
        ranks = 1  # the layout's own check words a bad count
    return max(shares, ranks, 1)


def _no_gpu_note(cards: int) -> str:
    if cards == 1:
        return NO_GPU_NOTE
    sizes = ",".join([NO_GPU_CARD] * cards)
    return f"no GPU found: sized for {cards} cards of 24 GiB, as the layout asks (give yours with --gpu-mem {sizes})"


def build(args: argparse.Namespace) -> tuple[Any, Any]:
    """(ModelInfo, Settings) from the command line."""
    from vramtui.core.estimate import modelinfo as mi
    from vramtui.core.estimate.inputs import model_overrides, parse_value, settings_from

    values = {name: parse_value(name, text) for name, text in _texts(args).items()}
    overrides = model_overrides(values)
    # --quant goes to the settings: for vLLM/transformers it is what the engine applies while loading
    # (with its 16-bit load peak), for llama.cpp the GGUF file type to size
    if args.model:
        info = mi.load_model_info(args.model, exact_params=not args.no_meta)
        info = mi.apply_overrides(info, **overrides)
    else:
        info = mi.info_from_flags(**overrides)
    settings = settings_from(values, on_gpu=not args.cpu)
    _check_load_quant(settings, info, args)
    return info, settings


def _check_load_quant(settings: Any, info: Any, args: argparse.Namespace) -> None:
    """--quant for an engine that quantizes while loading is what it applies (transformers: bitsandbytes): a
    method it cannot apply is refused, as `check` refuses it (QA 11: estimate said "awq (applied)"). The
    table's rows size other checkpoints, and a checkpoint already in that method asks nothing."""
    from vramtui.core.backends import get_backend
    from vramtui.core.errors import VramtuiError

    backend = get_backend(settings.backend)
    if not settings.quant or args.table or backend.knob("quant") is None:
        return
    if str(info.quant or "").lower() == str(settings.quant).lower():
        return
    problem = backend.translate("quant", settings.quant).problem
    if problem:
        raise VramtuiError(f"--quant {settings.quant}: {problem}")


def _kv_note(est: Any) -> str:
    """Bytes a token takes and how many the cache holds: llama.cpp's cells, or vLLM's capacity in tokens
    (its pool's bytes over that capacity, as a sliding-window or hybrid layer holds less than the context)."""
    if est.kv_cache_tokens:
        per_token = est.kv_cache_bytes // est.kv_cache_tokens
        if est.kv_bytes_per_token and abs(per_token - est.kv_bytes_per_token) < 0.01 * est.kv_bytes_per_token:
            # the pool holds whole blocks, so its bytes over its tokens run a byte or so over the layers'
            # own figure (QA 33 V11: 16,385 B/token where 16 layers x 4 heads x 64 x 2 x 2 B make 16,384)
            per_token = est.kv_bytes_per_token
        return f"{per_token:,} B/token, {est.kv_cache_tokens:,} tokens"
    cells, per_token = est.kv_cells, est.kv_bytes_per_token
    # the whole cache, wherever its layers sit (QA 26: "0 B/cell" beside a cache kept on the host)
    whole = est.bill.get("kv_cache") + est.bill.get("kv_cache", HOST)
    if cells and whole < 0.99 * per_token * cells:
        # sliding-window layers keep a window of cells, not the context: the all-layer figure times the
        # cells is not the total beside it (QA 21 F8: 49,152 B/token x 131,072 cells "= 3.02 GiB")
        return (
            f"{per_token:,} B/token in all layers, {cells:,} cells; "
            f"{whole // cells:,} B/cell as the window layers keep fewer"
        )
    return f"{per_token:,} B/token, {cells:,} cells"


def _outside_total(est: Any) -> int:
    """What the cards hold beyond the total (vLLM before 0.21 captured its CUDA graphs past the budget)."""
    on_cards = sum(est.bill.total(index) for index in est.bill.devices())
    return max(0, on_cards - est.total_bytes) if est.device == "gpu" else 0


def _rows(est: Any) -> list[tuple[str, int, str]]:
    """(label, bytes, note) of each memory part where the breakdown lives, in the vocabulary's order."""
    notes = {
        "kv_cache": _kv_note(est),
        "runtime": "engine reservations outside the model" if est.device == "gpu" else "",
        "cuda_graphs": (
            "captured after the KV cache, outside the budget"
            if _outside_total(est)
            else "taken off the budget before the KV cache"
        ),
        "margin": "allocator fragmentation",
    }
    shown = []
    place = None if est.devices else est.place  # several GPUs: every device together
    for part in PARTS:
        value = est.bill.get(part, place)
        if value or part in ("weights", "kv_cache"):
            # no CUDA context in a CPU-only run: its runtime is the engine process's own memory
            label = part_label(part, HOST if est.device == "host" else None)
            shown.append((label, value, notes.get(part, "")))
    return shown


def device_lines(est: Any) -> list[str]:
    """A row per GPU when several are sized (none for one card: its output stays as it was)."""
    from vramtui.core.units import format_bytes as fb

    lines = []
    for row in est.devices:
        parts = f"weights {fb(row.weights_bytes)}, KV {fb(row.kv_cache_bytes)}, compute {fb(row.compute_buffer_bytes)}"
        if row.recurrent_state_bytes:
            parts += f", recurrent state {fb(row.recurrent_state_bytes)}"
        if row.runtime_bytes:  # the parts add up to the row (QA 18)
            parts += f", runtime {fb(row.runtime_bytes)}"
        if row.cuda_graphs_bytes:  # ... the graphs too (QA 36 F7)
            parts += f", CUDA graphs {fb(row.cuda_graphs_bytes)}"
        verdict = "fits" if row.fits else f"OVER by {fb(row.total_bytes - row.usable_bytes)}"
        if not row.fits and row.total_bytes <= row.usable_bytes:
            # the card holds its part; what fails is the run's (a request longer than the KV cache holds):
            # QA 21 F5 read "OVER by -11.04 GiB"
            verdict = "holds its part (the run does not fit: see the verdict)"
        label = f"GPU {row.index} ({row.layers} layers)"
        lines.append(
            f"  {label:<24}{fb(row.total_bytes):>12}   of {fb(row.usable_bytes)}: {verdict}; {parts}"
        )
    return lines


def format_count(n: int) -> str:
    """A parameter count as people say it: 107K, 350M, 7.62B (never "0.00 B")."""
    for scale, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if n >= scale:
            value = n / scale
            return f"{value:.2f}{suffix}" if value < 100 else f"{value:.0f}{suffix}"
    return str(n)


def render(info: Any, est: Any) -> str:
    from vramtui.core.units import format_bytes as fb

    params = f"{format_count(info.n_params)} params" if info.n_params else "unknown size"
    quant = est.quant or info.quant or info.dtype
    if est.quant_applied:
        if info.weights_source == "params":  # a shape from flags: no files to speak of
            quant += " (applied)"
        else:
            quant += f" (applied; the files hold {info.quant or info.dtype})"
    bits = est.bits_per_weight or info.bits_per_weight
    bpw = f", {bits:.2f} bits/weight" if bits else ""
    lines = [
        f"model     {info.source}  ({info.arch}, {params}, {quant}{bpw}; weights from {info.weights_source})"
    ]
    run = f"backend   {est.backend}: context {est.context}"
    # QA 27 N6: "context 1" beside 256 cells; not a cache sized in bytes (QA 29: vLLM's capacity as padding)
    if est.kv_cells and est.kv_cells > est.context and est.kv_cache_tokens is None:
        run += f" (the engine pads its cache to {est.kv_cells:,} cells)"
    run += f", {est.parallel} sequence{'s' if est.parallel != 1 else ''}, KV {est.kv_dtype}"
    if est.device == "host":
        run += ", CPU only (the card below is host RAM)"
    elif est.gpu_layers is not None:
        run += f", {est.gpu_layers}/{est.n_layers + 1} layers on the GPU"
    lines.append(run)
    lines.append("")
    for label, value, note in _rows(est):
        lines.append(f"  {label:<24}{fb(value):>12}   {note}".rstrip())
    lines.append(f"  {'-' * 36}")
    where = "in host RAM" if est.device == "host" else "on the GPU"
    lines.append(f"  {'total ' + where:<24}{fb(est.total_bytes):>12}")
    if beyond := _outside_total(est):  # QA 16: a row above the line that the total left out
        lines.append(
            f"  {'on the card':<24}{fb(est.total_bytes + beyond):>12}   with what the budget leaves out"
        )
    share = est.usable_bytes / est.device_bytes if est.device_bytes else 0
    lines.append(f"  {'usable':<24}{fb(est.usable_bytes):>12}   {share:.0%} of {fb(est.device_bytes)}")
    lines += device_lines(est)
    if est.weights_host_bytes:
        lines.append(f"  {'weights in host RAM':<24}{fb(est.weights_host_bytes):>12}")
    if est.device == "gpu" and est.bill.total(HOST):
        lines.append(f"  {'host RAM':<24}{fb(est.bill.total(HOST)):>12}   {est.bill.describe(HOST)}")
    for entry in est.extras:  # what rides along, already in the rows above: where it sits
        on_device = fb(entry["device_bytes"]) if entry["device_bytes"] else ""
        lines.append(f"  {'+ ' + entry['label']:<24}{on_device:>12}   {describe_extra(entry)}")
    if est.load_peak_bytes:
        lines.append(f"  {'load-time peak':<24}{fb(est.load_peak_bytes):>12}   {est.load_peak_words}")
    lines.append("")
    headroom = est.usable_bytes - est.total_bytes
    if est.devices:  # several GPUs: the tightest card's room
        headroom = min(row.usable_bytes - row.total_bytes for row in est.devices)
    if est.fits:
        verdict = f"FITS, {fb(headroom)} to spare" if headroom >= 0 else "FITS"
    elif est.refused:  # not memory: no smaller setting of another kind helps
        verdict = f"WILL NOT START: {est.reason}"
    elif est.reason:
        verdict = f"DOES NOT FIT: {est.reason}"
    elif headroom < 0 and not est.devices and est.total_bytes <= est.device_bytes:
        # past the 80% line only: the room itself holds it, with no margin (QA 27 N3: "DOES NOT FIT" at a
        # 900 MiB budget where the run came up)
        share = round(100 * est.usable_bytes / est.device_bytes) if est.device_bytes else 100
        room = "card" if est.device == "gpu" else "room"
        verdict = (
            f"DOES NOT FIT under the {share}% line: over it by {fb(-headroom)}; the whole {room} holds it with "
            f"{fb(est.device_bytes - est.total_bytes)} to spare, no margin for what the estimate misses"
        )
    elif headroom < 0:
        verdict = f"DOES NOT FIT: over by {fb(-headroom)}"
    else:  # the total would fit; a note says what does not (never a negative overshoot)
        verdict = "DOES NOT FIT (see the notes)"
    if est.weights_unknown:
        verdict = f"WEIGHTS UNKNOWN (quant_method {est.weights_unknown!r}, sized as 16-bit): {verdict}"
    lines.append(f"verdict   {verdict}")
    solved = _solvers(est)
    if solved:
        lines.append("solvers   " + "; ".join(solved))
    for note in est.notes:
        if note != est.reason:  # already the verdict
            lines.append(f"note      {note}")
    return "\n".join(lines)


def _context_share(est: Any) -> str:
    """Whose context the largest one is, where several sequences run: each sequence's (vLLM, transformers),
    or one the slots share (llama-server): "largest context 4,096" beside 4 sequences read either way."""
    from vramtui.core.estimate.accounting import accounting_for

    if est.parallel <= 1:
        return ""
    if accounting_for(est.backend).context_is_per_sequence:
        return f" per sequence ({est.parallel} sequences)"
    return f" (shared by {est.parallel} slots)"


def _solvers(est: Any) -> list[str]:
    """What the solvers found: the largest context and concurrency, the split, the experts and layers that fit."""
    from vramtui.core.units import format_bytes as fb

    # a refusal no context cures (a quantized V without flash attention): its zeros would read as memory's
    cured = not (est.refused and not est.max_context)
    solved = [
        f"largest context {est.max_context:,}{_context_share(est)}"
        if est.max_context is not None and cured
        else ""
    ]
    # no concurrency at a length the engine refuses (QA 10: 256 sequences of 4,096 beside WILL NOT START)
    at_length = not (est.refused and est.past_trained_context)
    if est.max_parallel is not None and cured and at_length:
        tokens = getattr(est, "max_parallel_tokens", None)  # the sequences' length: ctx / slots on llama.cpp
        each = f" (sequences of {tokens:,} tokens)" if tokens else ""
        layers = " with every layer on the GPU" if est.max_parallel_all_layers else ""
        # QA 31 W10: "0 (sequences of 65,536)" read as if nothing fit, beside a context that does
        if est.max_parallel == 0 and tokens:
            one = f"; one of {est.max_context:,} does" if est.max_context else ""
            solved.append(f"largest concurrency{layers} 0: not one sequence of {tokens:,} tokens fits{one}")
        else:
            solved.append(f"largest concurrency{layers} {est.max_parallel}{each}")
    if est.load_peak_fits is False:  # the 16-bit read before quantizing does not fit: nothing runs yet
        return ["none until the load fits (the verdict says how)"]
    if est.kv_cache_memory_fit is not None:  # no context helps a cache sized by the share (QA 23 D10)
        from vramtui.core.backends import get_backend
        from vramtui.core.logs.advice import engine_size

        flag = get_backend(est.backend).knob("kv_cache_memory")
        return [
            f"KV cache size that fits the budget {flag} {engine_size(est.kv_cache_memory_fit, down=True)}"
        ]
    # weights and activations over the budget: vLLM stops before it sizes any cache, and prints no capacity
    if est.max_concurrency is not None and at_length and est.kv_cache_tokens:
        solved.append(
            f"vLLM would print: KV capacity {est.kv_cache_tokens:,} tokens, max concurrency {est.max_concurrency:.2f}x"
        )
    if est.tensor_split_fit is not None:  # several cards: before the moves that cost speed
        solved.append(f"split that fits --tensor-split {','.join(map(str, est.tensor_split_fit))}")
    solved += _room_moves(est)
    if est.quant_fit is not None:
        # estimate's own flag, and the engine's where it spells it otherwise (QA 33 V5: vLLM's --quantization)
        flag = _engine_flag(est, "quant")
        theirs = f" ({est.backend}: {flag} {est.quant_fit})" if flag and flag != "--quant" else ""
        solved.append(f"quantized at load that fits: --quant {est.quant_fit}{theirs}")
    if est.cpu_offload_fit is not None:
        solved.append(f"smallest --cpu-offload-gb that fits {est.cpu_offload_fit}")
    if est.n_cpu_moe_fit is not None and est.device == "gpu":
        solved.append(f"smallest --n-cpu-moe that fits {est.n_cpu_moe_fit}")
    if est.gpu_layers_fit is not None and est.device == "gpu":
        solved.append(f"GPU layers that fit {est.gpu_layers_fit}/{est.n_layers + 1}")
        if est.host_bytes_needed:
            solved.append(f"host RAM needed {fb(est.host_bytes_needed)}")
    return [s for s in solved if s]


def _engine_flag(est: Any, param: str) -> str | None:
    from vramtui.core.backends import get_backend

    try:
        return get_backend(est.backend).knob(param)
    except VramtuiError:
        return None


def _room_moves(est: Any) -> list[str]:
    """A larger share of the card (vLLM), an 8-bit KV cache, a smaller micro-batch (llama.cpp): the weights
    as they are, in the engine's own flags (QA 34 L3: llama-server's were never spelled)."""
    from vramtui.core.backends import get_backend

    try:
        backend = get_backend(est.backend)
    except VramtuiError:
        return []
    moves = []
    for value, context, param in (
        ("on" if est.flash_attn_fit else None, est.context, "flash_attn"),
        (est.share_fit, est.share_fit_context, "mem_share"),
        (est.kv_dtype_fit, est.kv_dtype_fit_context, "kv_dtype"),
        (est.ubatch_fit, est.context, "ubatch"),
    ):
        words = backend.knob_words(param)  # every flag it takes: both of llama-server's cache flags
        if value is None or words is None:
            continue
        at = "it fits" if context == est.context else f"longest context {context:,}"
        moves.append(" ".join(f"{one} {value}" for one in words.split(" and ")) + f": {at}")
    return moves


def fit_terminal(text: str, width: int) -> str:
    """Long lines wrapped at word boundaries, each continuation under its own text: a 'note      ...'
    line under its words, a breakdown row under its description (a terminal breaks them mid-word)."""
    import re
    import textwrap

    lines = []
    for line in text.splitlines():
        if len(line) <= width:
            lines.append(line)
            continue
        keyed = re.match(r"[a-z]+ +(?=\S)", line)  # 'note      ', 'solvers   ', 'model     '
        row = re.match(r"  .{24}.{12}   (?=\S)", line)  # '  label', its figure, then its description
        indent = len(keyed.group(0)) if keyed else len(row.group(0)) if row else 2
        indent = indent if indent <= width - 30 else 10  # a narrow terminal: under the label
        glued = re.sub(r"(\d) (?=[KMG]?i?B\b)", "\\1\u00a0", line)  # '2.32 MiB' stays on one line
        wrapped = textwrap.wrap(glued, width, subsequent_indent=" " * indent, break_on_hyphens=False)
        lines += [part.replace("\u00a0", " ") for part in wrapped] or [line]
    return "\n".join(lines)


def describe_extra(entry: dict[str, Any]) -> str:
    from vramtui.core.estimate.extras import describe

    return describe(entry)


def _ask_engine(info: Any, est: Any, settings: Any) -> Any:
    if info.weights_source != "gguf" or not settings.memory.engine_probe:
        raise VramtuiError(
            "--engine asks llama.cpp about a .gguf file: give one, with a llama.cpp-family backend"
        )
    from vramtui.core.estimate.engine_probe import llama_cpp_available, probe_llama_cpp

    if not llama_cpp_available():
        raise VramtuiError("--engine needs llama-cpp-python (pip install 'vramtui[llama]')")
    return probe_llama_cpp(
        info.source,
        context=est.context,
        ubatch=settings.ubatch or 512,
        batch=settings.batch or 2048,
        parallel=est.parallel,
        flash_attn=settings.flash_attn,
        kv_dtype=est.kv_dtype,
        gpu_layers=settings.gpu_layers,
    )


def _render_engine(engine: Any) -> str:
    from vramtui.core.units import format_bytes as fb

    if engine is None:
        return "engine    llama.cpp could not be asked (the dry run failed); the figures above are arithmetic"
    if not engine.context_ok:
        return "engine    llama.cpp's dry run could not create this context: it would fail at start-up"
    compute = ", ".join(f"{name} {fb(size)}" for name, size in engine.compute_bytes.items())
    return (
        f"engine    llama.cpp dry run (no_alloc): weights {fb(engine.model_bytes)}, KV {fb(engine.kv_bytes)} "
        f"({engine.kv_cells:,} cells), compute {compute}"
    )


def list_models(args: argparse.Namespace) -> int:
    from pathlib import Path

    from vramtui.core.estimate.discover import discover_models
    from vramtui.core.units import format_bytes

    folders = [Path(p).expanduser() for p in args.search]
    for folder in folders:
        if not folder.exists():
            raise VramtuiError(f"--search {folder}: no such folder")
        if not folder.is_dir() and folder.suffix != ".gguf":
            raise VramtuiError(f"--search {folder}: not a folder (nor a .gguf file)")
    found = discover_models(folders)
    if args.json:
        from vramtui.cli.common import print_json

        print_json({"models": [m.to_dict() for m in found]})
        return 0
    if not found:
        print("no models found (looked in the Hugging Face cache, Ollama's store and the --search folders)")
        return 0
    width = max(len(m.name) for m in found)
    for m in found:
        print(f"{m.kind:<7}{m.name:<{width + 2}}{format_bytes(m.size_bytes):>12}  {m.path}")
    return 0


def json_out(args: argparse.Namespace, info: Any, est: Any, engine: Any, calibration: Any) -> dict[str, Any]:
    """The --json object: the estimate's keys, the model, the engine's dry run, the calibration."""
    out = est.to_dict()
    out["model"] = {
        k: v
        for k, v in info.to_dict().items()
        if k not in ("notes", "weights_by_dtype", "kv_heads_per_layer", "layer_plan")
    }
    if est.quant_applied:  # the model as sized, with the type --quant applied
        out["model"].update(quant=est.quant, bits_per_weight=est.bits_per_weight, file_quant=info.quant)
    if args.engine:
        out["engine"] = engine.to_dict() if engine else None
    out["calibration"] = calibration.to_dict() if calibration is not None else None
    return out


def _file_engine_note(info: Any, settings: Any, args: argparse.Namespace) -> str | None:
    """A Hugging Face folder sized for an engine that runs GGUF files only, with no --backend asked: said, so
    a FITS is not read as "llama.cpp runs this folder" (QA 13: a transformers model sized as llama.cpp)."""
    from vramtui.core.backends import get_backend

    if args.backend or info.weights_source not in ("safetensors", "index"):
        return None
    if not get_backend(settings.backend).model_is_file:
        return None
    return (
        f"sized as {settings.backend} (the default engine), which runs GGUF files: this folder runs on vLLM "
        "or transformers as it is (--backend vllm / transformers), or on llama.cpp once converted to GGUF"
    )


def budget_and_engine(args: argparse.Namespace) -> tuple[Any, int, bool]:
    """--memory-budget as the profile it stands for, the engine's own share of it, and whether that share
    was measured (on its binary: --program, else the engine's program on PATH). `ps --fits` takes the same
    (QA 37 F8: it ignored the flag); a zero is no budget (QA 37 F12), as a profile's is refused."""
    from vramtui.core.errors import VramtuiError
    from vramtui.core.launch.footprint import binary_of, engine_share
    from vramtui.core.launch.profile import Profile
    from vramtui.core.units import parse_size_with_unit

    try:
        budget = parse_size_with_unit(args.memory_budget)
    except VramtuiError as error:
        if "is no size" not in str(error):
            raise VramtuiError(f"--memory-budget: {error}") from None
        budget = 0
    if budget <= 0:
        raise VramtuiError(
            f"--memory-budget {args.memory_budget!r} is no budget: leave it out to size without one, or give a "
            "size such as 1500MiB"
        )
    profile = Profile(
        backend=args.backend or "llama.cpp",
        model=args.model or "model",
        memory_budget=budget,
        program=args.program,
    )
    if args.program and binary_of(profile) is None:
        raise VramtuiError(f"--program {args.program}: no such program")
    measured = bool(args.model and profile.backend.measures_footprint and binary_of(profile) is not None)
    return profile, engine_share(profile, measure=measured), measured


def _budget_card(args: argparse.Namespace) -> str:
    """--memory-budget: a CPU run whose room is the budget less the engine's own address space, as `check`,
    the wizard and `ps --fits` take it (QA 12: estimate said 21504 tokens fit where they said 8192). The
    measured footprint is the engine's share, so no earlier run's runtime is added on top."""
    from vramtui.core.errors import VramtuiError
    from vramtui.core.units import MIB, format_bytes

    if args.gpu_mem:
        raise VramtuiError("--memory-budget is the room: leave --gpu-mem out")
    profile, engine, measured = budget_and_engine(args)
    budget = int(profile.memory_budget or 0)
    room = max(budget - engine, MIB)
    args.cpu, args.gpu_mem, args.no_calibrate = True, f"{room}B", True
    # the engine's own share past the whole budget: the room left is none, not the 1 MiB stand-in
    args.budget_engine = engine if budget - engine < MIB else 0
    left = format_bytes(room, 1) if not args.budget_engine else "nothing"
    said = (
        f"memory_budget {format_bytes(budget, 1)}: {left} left after the engine's own "
        f"{engine / MIB:.0f} MiB of address space"
    )
    if not engine:
        said = f"memory_budget {format_bytes(budget, 1)}: the engine's own processes are its runtime row"
    if profile.backend.measures_footprint and not measured:  # QA 13: 240 assumed where 147 was measured
        said += " (assumed: no engine binary found to measure; --program PATH names it)"
    elif engine and not profile.backend.measures_footprint:  # QA 26 D4, D5: a constant said as a fact
        owner = profile.backend.name + ("'" if profile.backend.name.endswith("s") else "'s")
        said += f" ({owner} assumed figure, not measured here)"
    return said


def _budget_short(args: argparse.Namespace, est: Any) -> None:
    """A budget the engine's own share already fills: the verdict says so and what budget would hold the
    bill, not "over by" the 1 MiB left as the card (QA: 300 MiB read "over by 79.76 MiB" where the engine's
    352 MiB and the bill's 81 needed 433)."""
    from vramtui.core.units import format_bytes

    engine = getattr(args, "budget_engine", 0)  # set by _budget_card only where the engine fills it
    if not engine or est.refused:
        return
    share = est.usable_bytes / est.device_bytes if est.device_bytes else 0.8
    est.fits = False
    est.reason = (
        f"the engine's own {format_bytes(engine, 1)} already take the whole budget; this bill needs "
        f"{format_bytes(est.total_bytes, 1)} more (a memory_budget of at least "
        f"{format_bytes(engine + est.total_bytes, 1)}, {format_bytes(engine + est.total_bytes / share, 1)} to "
        f"stay under the {share:.0%} line)"
    )


def _calibrate(args: argparse.Namespace, settings: Any) -> tuple[Any, list[str]]:
    """Earlier runs' terms for these settings (core/estimate/calibrate.py); none with --no-calibrate."""
    if args.no_calibrate:
        return None, []
    from vramtui.core.estimate.calibrate import calibration_for

    calibration, notes = calibration_for(settings)
    settings.calibration = calibration
    return calibration, notes


def _auto_context(args: argparse.Namespace) -> bool:
    """`--max-model-len auto` (QA 35 F12): the engine picks the longest context that fits, where it can."""
    if str(args.ctx or "").strip().lower() != "auto":
        return False
    from vramtui.core.backends import get_backend

    backend = get_backend(args.backend or "llama.cpp")
    if not backend.takes_auto("context", "auto"):
        flag = backend.flags.get("context") or "--ctx"
        raise VramtuiError(
            f"{backend.name} takes no 'auto' context: give {flag} a number of tokens (8192 or 32k)"
        )
    args.ctx = None
    return True


def _longest_that_fits(info: Any, settings: Any, est: Any) -> Any:
    """The estimate at the context `auto` gives: the model's own length where it fits, else the longest that
    does (the engine's own search, as vLLM's `--max-model-len auto` makes it)."""
    from dataclasses import replace

    from vramtui.core.estimate.estimator import estimate

    flag = _engine_flag(est, "context") or "--ctx"
    if not est.fits and est.max_context:
        est = estimate(info, replace(settings, context=est.max_context))
        est.notes.insert(
            0,
            f"{flag} auto: the engine takes the longest context that fits, {est.context:,} tokens by this estimate",
        )
    elif est.fits:
        est.notes.insert(0, f"{flag} auto: the model's own length, {est.context:,} tokens, fits")
    else:  # no context fits alone: what the cache is sized by is the move (the solvers say it)
        est.notes.insert(
            0, f"{flag} auto: no context fits as the rest is set; the engine would refuse to start"
        )
    return est


def run(args: argparse.Namespace) -> int:
    from vramtui.core.backends import get_backend
    from vramtui.core.estimate.estimator import estimate

    if args.list:
        return list_models(args)

    budget_note = _budget_card(args) if args.memory_budget else None
    this_machine = bool(args.cpu and not args.gpu_mem)  # the card is this machine's RAM, not one named
    assumed_card = not args.gpu_mem and not args.cpu
    if assumed_card:  # asked once here, so the note below knows whether a card was found
        args.gpu_mem = _default_cards()
        assumed_card = args.gpu_mem == NO_GPU_CARD
        if assumed_card:
            args.gpu_mem = ",".join([NO_GPU_CARD] * _assumed_cards(args))
    elif args.cpu and not args.gpu_mem:
        from vramtui.core.estimate.inputs import cpu_run_card

        args.gpu_mem = f"{cpu_run_card()}B"
    auto_context = _auto_context(args)
    info, settings = build(args)
    if budget_note:  # the room is the budget's: the line check and the wizard size it at (QA 36 F3)
        settings.room_is_budget = True
    if budget_note and get_backend(settings.backend).cpu_share_words:
        # QA 16: the share is of the machine (vLLM's CPU build), not of what the budget leaves
        from vramtui.core.estimate.inputs import cpu_run_card

        settings.share_of_bytes = cpu_run_card()
    calibration, store_notes = _calibrate(args, settings)
    est = estimate(info, settings)
    if auto_context:
        est = _longest_that_fits(info, settings, est)
    est.notes.extend(store_notes)  # a run record that could not be read: ignored, and said so
    if assumed_card:
        est.notes.insert(0, _no_gpu_note(args.gpu_mem.count(",") + 1))
    if budget_note:
        est.notes.insert(0, budget_note)
        _budget_short(args, est)
    engine_note = _file_engine_note(info, settings, args)
    if engine_note:
        est.notes.insert(0, engine_note)
    host_note = _host_ram_note(est)
    if host_note:
        est.notes.insert(0, host_note)
    if this_machine:  # what is free now says nothing of a machine --gpu-mem names
        _share_over_free(est, settings)
    if args.table:
        from vramtui.cli.estimate_table import run_table

        return run_table(args, info, settings, est, calibration)
    engine = _ask_engine(info, est, settings) if args.engine else None
    from vramtui.cli.common import settle

    status = settle(0 if est.fits else 1)
    if args.json:
        from vramtui.cli.common import print_json

        print_json(json_out(args, info, est, engine, calibration))
    else:
        text = render(info, est)
        if sys.stdout.isatty():  # piped, every item stays one line for grep
            text = fit_terminal(text, shutil.get_terminal_size().columns)
        print(text)
        if calibration is not None:
            print(f"calibration {calibration.describe()}")
        if args.engine:
            print(_render_engine(engine))
    return status
