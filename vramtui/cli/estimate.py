"""`vramtui estimate`: will this model fit this card, and what to cut if it does not."""

from __future__ import annotations

import argparse
import re
from typing import Any

from vramtui.core.errors import VramtuiError

HELP = "estimate a model's memory on a GPU (weights, KV cache, buffers) before launching it"

# The largest published models have a few trillion parameters; far past that, the shape the flags imply
# is nonsense (hundreds of millions of layers) and sizing it would take forever.
MAX_PLAUSIBLE_PARAMS = 10**14

_SHAPE_FLAGS = ("layers", "kv_heads", "head_dim", "hidden", "heads", "vocab")


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
        help="weights: q4_0 q4_k_m q5_k_m q6_k q8_0 iq4_xs ... f32 f16 bf16 fp8 int8 nf4 awq gptq",
    )
    run = parser.add_argument_group("how it runs")
    run.add_argument("--backend", default="llama.cpp", help="llama.cpp, vllm, transformers or ollama")
    run.add_argument("--ctx", metavar="TOKENS", help="context length (8192, 32k)")
    run.add_argument("--parallel", metavar="N", help="concurrent sequences")
    run.add_argument("--batch", metavar="N", help="logical batch (vLLM: max-num-batched-tokens)")
    run.add_argument("--ubatch", metavar="N", help="micro-batch (llama.cpp n_ubatch)")
    run.add_argument(
        "--flash-attn",
        nargs="?",
        const="on",
        metavar="on|off",
        help="flash attention (bare flag: on; default: the backend's own)",
    )
    run.add_argument("--kv-dtype", metavar="TYPE", help="KV cache type: f16, bf16, fp8, q8_0, q4_0")
    run.add_argument("--gpu-layers", metavar="N", help="llama.cpp: layers on the GPU (default all)")
    card = parser.add_argument_group("the card")
    card.add_argument(
        "--gpu-mem", metavar="SIZE", default="24GiB", help="device memory: 24GiB, 24G, 24576MiB"
    )
    card.add_argument(
        "--safety",
        metavar="SHARE",
        help="usable share of the card (default 0.8; for vLLM its gpu-memory-utilization, default 0.9)",
    )
    card.add_argument("--cpu", action="store_true", help="size a CPU-only run (what goes to host RAM)")
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
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")


_TOKENS_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kKmM]?)\s*$")


def parse_tokens(text: str, flag: str) -> int:
    """'8192' -> 8192, '32k' -> 32768 (context sizes are powers of two in users' mouths)."""
    match = _TOKENS_RE.match(str(text))
    if not match:
        raise VramtuiError(f"{flag}: not a token count: {text!r} (try 8192 or 32k)")
    factor = {"": 1, "k": 1024, "m": 1024 * 1024}[match.group(2).lower()]
    return int(float(match.group(1)) * factor)


def parse_int(text: str | None, flag: str, minimum: int = 0) -> int | None:
    if text is None:
        return None
    try:
        value = int(str(text).strip())
    except ValueError:
        raise VramtuiError(f"{flag}: not a whole number: {text!r}") from None
    if value < minimum:
        raise VramtuiError(f"{flag}: must be at least {minimum}, not {value}")
    return value


def parse_share(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        value = float(str(text).strip().rstrip("%")) / (100 if str(text).strip().endswith("%") else 1)
    except ValueError:
        raise VramtuiError(f"--safety: not a share: {text!r} (try 0.8 or 80%)") from None
    if not 0 < value <= 1:
        raise VramtuiError(f"--safety: must be between 0 and 1, not {text}")
    return value


def parse_flash(text: str | None) -> bool | None:
    if text is None:
        return None
    value = {"on": True, "1": True, "true": True, "yes": True, "off": False, "0": False, "false": False}
    value.update({"no": False, "auto": None})  # type: ignore[dict-item]
    key = str(text).strip().lower()
    if key not in value:
        raise VramtuiError(f"--flash-attn: use on or off, not {text!r}")
    return value[key]


def _gpu_mem(text: str) -> int:
    from vramtui.core.units import parse_size

    try:
        value = parse_size(text)
    except VramtuiError as error:
        raise VramtuiError(f"--gpu-mem: {error}") from None
    if value <= 0:
        raise VramtuiError("--gpu-mem: must be more than 0")
    return value


def build(args: argparse.Namespace) -> tuple[Any, Any]:
    """(ModelInfo, Settings) from the command line."""
    from vramtui.core.estimate import modelinfo as mi
    from vramtui.core.estimate.estimator import Settings
    from vramtui.core.units import parse_count

    overrides: dict[str, Any] = {}
    for name in _SHAPE_FLAGS:
        overrides[name] = parse_int(getattr(args, name), "--" + name.replace("_", "-"), minimum=1)
    overrides["params"] = None
    if args.params is not None:
        try:
            overrides["params"] = parse_count(args.params)
        except VramtuiError as error:
            raise VramtuiError(f"--params: {error}") from None
        if overrides["params"] <= 0:
            raise VramtuiError("--params: must be positive")
        if overrides["params"] > MAX_PLAUSIBLE_PARAMS:
            raise VramtuiError(f"--params: {args.params} is not a plausible parameter count (at most 100T)")
    # --quant goes to the settings: for vLLM/transformers it is what the engine applies while loading
    # (with its 16-bit load peak), for llama.cpp the GGUF file type to size
    if args.model:
        info = mi.load_model_info(args.model, exact_params=not args.no_meta)
        info = mi.apply_overrides(info, **overrides)
    else:
        info = mi.info_from_flags(**overrides)
    settings = Settings(
        backend=args.backend,
        context=parse_tokens(args.ctx, "--ctx") if args.ctx is not None else None,
        parallel=parse_int(args.parallel, "--parallel", minimum=1),
        batch=parse_int(args.batch, "--batch", minimum=1),
        ubatch=parse_int(args.ubatch, "--ubatch", minimum=1),
        kv_dtype=args.kv_dtype,
        flash_attn=parse_flash(args.flash_attn),
        gpu_layers=parse_int(args.gpu_layers, "--gpu-layers"),
        quant=args.quant,
        device_bytes=_gpu_mem(args.gpu_mem),
        safety=parse_share(args.safety),
        on_gpu=not args.cpu,
    )
    return info, settings


def render(info: Any, est: Any) -> str:
    from vramtui.core.units import format_bytes as fb

    params = f"{info.n_params / 1e9:.2f} B params" if info.n_params else "unknown size"
    quant = est.quant or info.quant or info.dtype
    if est.quant_applied:
        quant += f" (applied; the files hold {info.quant or info.dtype})"
    bits = est.bits_per_weight or info.bits_per_weight
    bpw = f", {bits:.2f} bits/weight" if bits else ""
    lines = [
        f"model     {info.source}  ({info.arch}, {params}, {quant}{bpw}; weights from {info.weights_source})"
    ]
    run = f"backend   {est.backend}: context {est.context}"
    run += f", {est.parallel} sequence{'s' if est.parallel != 1 else ''}, KV {est.kv_dtype}"
    if est.device == "host":
        run += ", CPU only (the card below is host RAM)"
    elif est.gpu_layers is not None:
        run += f", {est.gpu_layers}/{est.n_layers + 1} layers on the GPU"
    lines.append(run)
    lines.append("")
    rows = [
        ("weights", est.weights_bytes, ""),
        ("KV cache", est.kv_cache_bytes, f"{est.kv_bytes_per_token:,} B/token, {est.kv_cells:,} cells"),
        ("activations / compute", est.activations_bytes, ""),
        (
            "runtime overhead",
            est.overhead_bytes,
            "CUDA context, engine reservations" if est.device == "gpu" else "",
        ),
        ("fragmentation margin", est.fragmentation_bytes, ""),
    ]
    for label, value, note in rows:
        lines.append(f"  {label:<24}{fb(value):>12}   {note}".rstrip())
    lines.append(f"  {'-' * 36}")
    where = "in host RAM" if est.device == "host" else "on the GPU"
    lines.append(f"  {'total ' + where:<24}{fb(est.total_bytes):>12}")
    share = est.usable_bytes / est.device_bytes if est.device_bytes else 0
    lines.append(f"  {'usable':<24}{fb(est.usable_bytes):>12}   {share:.0%} of {fb(est.device_bytes)}")
    if est.weights_host_bytes:
        lines.append(f"  {'weights in host RAM':<24}{fb(est.weights_host_bytes):>12}")
    if est.load_peak_bytes:
        lines.append(f"  {'load-time peak':<24}{fb(est.load_peak_bytes):>12}   quantizing while loading")
    lines.append("")
    headroom = est.usable_bytes - est.total_bytes
    if est.fits:
        verdict = f"FITS, {fb(headroom)} to spare" if headroom >= 0 else "FITS"
    elif est.reason:
        verdict = f"DOES NOT FIT: {est.reason}"
    elif headroom < 0:
        verdict = f"DOES NOT FIT: over by {fb(-headroom)}"
    else:  # the total would fit; a note says what does not (never a negative overshoot)
        verdict = "DOES NOT FIT (see the notes)"
    lines.append(f"verdict   {verdict}")
    solved = [f"largest context {est.max_context:,}" if est.max_context is not None else ""]
    if est.max_parallel is not None:
        solved.append(f"largest concurrency {est.max_parallel}")
    if est.max_concurrency is not None:
        solved.append(
            f"vLLM would print: KV capacity {est.kv_cache_tokens:,} tokens, max concurrency {est.max_concurrency:.2f}x"
        )
    if est.gpu_layers_fit is not None and est.device == "gpu":
        solved.append(f"GPU layers that fit {est.gpu_layers_fit}/{est.n_layers + 1}")
        if est.host_bytes_needed:
            solved.append(f"host RAM needed {fb(est.host_bytes_needed)}")
    if any(solved):
        lines.append("solvers   " + "; ".join(s for s in solved if s))
    for note in est.notes:
        if note != est.reason:  # already the verdict
            lines.append(f"note      {note}")
    return "\n".join(lines)


def _ask_engine(info: Any, est: Any, settings: Any) -> Any:
    if info.weights_source != "gguf" or settings.accounting != "llama.cpp":
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

    found = discover_models([Path(p) for p in args.search])
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


def run(args: argparse.Namespace) -> int:
    from vramtui.core.estimate.estimator import estimate

    if args.list:
        return list_models(args)

    info, settings = build(args)
    est = estimate(info, settings)
    engine = _ask_engine(info, est, settings) if args.engine else None
    if args.json:
        from vramtui.cli.common import print_json

        out = est.to_dict()
        out["model"] = {
            k: v
            for k, v in info.to_dict().items()
            if k not in ("notes", "weights_by_dtype", "kv_heads_per_layer")
        }
        if est.quant_applied:  # the model as sized, with the type --quant applied
            out["model"].update(quant=est.quant, bits_per_weight=est.bits_per_weight, file_quant=info.quant)
        if args.engine:
            out["engine"] = engine.to_dict() if engine else None
        print_json(out)
    else:
        print(render(info, est))
        if args.engine:
            print(_render_engine(engine))
    return 0 if est.fits else 1
