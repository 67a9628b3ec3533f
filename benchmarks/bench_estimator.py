"""Estimate vs what real engines printed: per case of the numbers corpus, each figure and its error; then
every real GPU printout of the llama.cpp family and of vLLM, term by term and device by device.

    python benchmarks/bench_estimator.py [--json] [--engine] [--gguf] [--show-heldout]

The printouts (tests/data/printouts/*.jsonl, tests/data/logs/printouts.jsonl, tests/data/numbers.jsonl,
each with its source) are read by tests/core/estimate/printouts.py: the model's shape from the log's
print_info lines, its file size and type counts, the run's settings from the log and the command. Each
term (KV cache, weights, compute buffers; per device and on the host) is printed as estimate / printed, with
the share within the goal's tolerance per engine, on the training part and the held-out part (split by
source thread, as the log corpus is: tests/core/logs/corpus.py). Held-out printouts are listed one by one
only with --show-heldout; by default only their shares. A printout that lacks what a term needs (no shape
lines, no context line, placement flags not shown) is left out of that term, and counted as such; one
without shape lines whose model has a published config.json here is sized from it (printouts.py
SHAPE_CONFIGS) for its KV cache and compute buffers, not its weights (a GGUF's per-tensor types).

vLLM prints no model shape: tests/core/estimate/vllm_printouts.py sizes each vLLM printout from its model's
published config.json (tests/data/configs, sources in its README; loaded as `vramtui estimate --backend vllm`
loads one) and the settings its log, command and settings field show, and scores per GPU what vLLM printed:
the weights (`Model loading took`), the KV cache (`Available KV cache memory`) and the profile run's activation
peak. A printout whose model has no config there is left out ("no config.json found for MODEL"), as is the KV
term of a run whose card's exact memory is not printed (the KV cache is what the budget leaves).

The corpus is ../shared/logs/numbers.jsonl (else tests/data/numbers.jsonl): memory figures printed by real
llama.cpp, Ollama, vLLM and SGLang runs. The estimator gets only what a user would know before launching:
the model's published shape (its config.json, the table below), the quantization, and the run settings the
log printed (context, micro-batch, flash attention, memory share). Nothing here is fitted to the corpus:
the rules are the engines' own (see vramtui/core/estimate/estimator.py).

Goals: KV cache within 1%, weights within 3%, the whole footprint within 10%, and vLLM's KV memory left
after the whole estimate (budget minus weights, activation peak, non-torch memory) within 10%.

With --gguf it times reading a GGUF with a real-size vocabulary (Qwen's 151,936 tokens and their merges,
generated): the gguf package's reader, which parses every token, against vramtui's header reader, which
keeps the tokenizer arrays as their length, and an estimate and `estimate --table` on it.

With --engine it also loads generated GGUFs (shapes not in the corpus) with llama-cpp-python on this CPU and
prints the estimate against the buffers llama.cpp allocated, and against its own no_alloc dry run.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from vramtui.core.estimate.estimator import Settings, estimate, kv_bytes_per_token  # noqa: E402
from vramtui.core.estimate.modelinfo import ModelInfo, count_params_arithmetic  # noqa: E402
from vramtui.core.units import GIB, MIB  # noqa: E402

# Published shapes (config.json of each model; for GGUF runs the log's own print_info lines agree).
LLAMA = {"arch": "llama", "attn_bias": False, "ffn_gated": True}
MODELS: dict[str, dict[str, Any]] = {
    "llama-3.2-3b": {
        **LLAMA,
        **dict(n_layers=28, hidden=3072, n_heads=24, n_kv_heads=8, head_dim_k=128, intermediate=8192),
        **dict(vocab=128256, tied_embeddings=True),
    },
    "phi-3-mini-4k": dict(
        arch="phi3",
        n_layers=32,
        hidden=3072,
        n_heads=32,
        n_kv_heads=32,
        head_dim_k=96,
        intermediate=8192,
        vocab=32064,
        fused_qkv=True,
    ),
    "qwen2.5-vl-7b": dict(
        arch="qwen2vl",
        n_layers=28,
        hidden=3584,
        n_heads=28,
        n_kv_heads=4,
        head_dim_k=128,
        intermediate=18944,
        vocab=152064,
        attn_bias=True,
    ),
    "pythia-1.4b": dict(
        arch="gptneox",
        n_layers=24,
        hidden=2048,
        n_heads=16,
        n_kv_heads=16,
        head_dim_k=128,
        intermediate=8192,
        vocab=50304,
        attn_bias=True,
        ffn_gated=False,
        fused_qkv=True,
    ),
    "gemma-2b": dict(
        arch="gemma",
        n_layers=18,
        hidden=2048,
        n_heads=8,
        n_kv_heads=1,
        head_dim_k=256,
        intermediate=16384,
        vocab=256000,
        tied_embeddings=True,
    ),
    "phi-4": dict(
        arch="phi3",
        n_layers=40,
        hidden=5120,
        n_heads=40,
        n_kv_heads=10,
        head_dim_k=128,
        intermediate=17920,
        vocab=100352,
        fused_qkv=True,
    ),
    "llama-3-8b": {
        **LLAMA,
        **dict(n_layers=32, hidden=4096, n_heads=32, n_kv_heads=8, head_dim_k=128, intermediate=14336),
        **dict(vocab=128256),
    },
    "llama-3.1-70b": {
        **LLAMA,
        **dict(n_layers=80, hidden=8192, n_heads=64, n_kv_heads=8, head_dim_k=128, intermediate=28672),
        **dict(vocab=128256),
    },
    "mistral-large-2407": {
        **LLAMA,
        **dict(n_layers=88, hidden=12288, n_heads=96, n_kv_heads=8, head_dim_k=128, intermediate=28672),
        **dict(vocab=32768),
    },
    "qwen3-235b-a22b": dict(
        arch="qwen3moe",
        n_layers=94,
        hidden=4096,
        n_heads=64,
        n_kv_heads=4,
        head_dim_k=128,
        intermediate=12288,
        vocab=151936,
        is_moe=True,
        n_experts=128,
        n_experts_used=8,
        moe_intermediate=1536,
    ),
}


@dataclass
class Case:
    """How each corpus case ran, as its log printed it, and which published model it is."""

    model: str
    backend: str
    quant: str | None = None
    context: int = 4096
    ubatch: int = 512
    flash: bool = False
    on_gpu: bool = True
    device_gib: float | None = None
    share: float | None = None
    tp: int = 1
    parallel: int | None = None  # vLLM max_num_seqs when the log printed it
    note: str = ""


CASES: dict[str, Case] = {
    "llama.cpp-n1": Case("llama-3.2-3b", "llama.cpp", "q4_0", 131072, on_gpu=False,
                         note="Q4_0_4_4 is Q4_0 repacked: same 18 bytes per 32 weights"),
    "llama.cpp-n3": Case("phi-3-mini-4k", "llama.cpp", "q4_k_m", 4096, ubatch=256),
    "llama.cpp-n5": Case("qwen2.5-vl-7b", "llama.cpp", "bf16", 128000, flash=True, on_gpu=False,
                         note="text model only (the vision tower is a separate mmproj file)"),
    "llama.cpp-n7": Case("mistral-large-2407", "llama.cpp", None, 32768, ubatch=2048, flash=True, on_gpu=False,
                         note="quantization not in the excerpt: weights not comparable"),
    "llama.cpp-n9": Case("pythia-1.4b", "llama.cpp", "q8_0", 2048, on_gpu=False),
    "ollama-n1": Case("gemma-2b", "ollama", "q4_0", 2048),
    "ollama-n3": Case("phi-4", "ollama", "q4_k_m", 4096,
                      note="model inferred from its printed shape: 40 layers, 10x128 K/V, ctx 16384, rope 250000"),
    "vllm-n1": Case("llama-3-8b", "vllm", "bf16", 8192, device_gib=79.22, share=0.90),
    "vllm-n3": Case("llama-3-8b", "vllm", "bf16", 20000, device_gib=23.58, share=0.90),
    "vllm-n5": Case("llama-3.1-70b", "vllm", "int8", 2048, device_gib=80.0, share=0.98,
                    note="compressed-tensors w8a8; card size not printed (an 80 GiB class GPU assumed)"),
    "vllm-n7": Case("phi-4", "vllm", "gptq-g128", 2048, device_gib=79.25, share=0.15),
    "vllm-n9": Case(
        "phi-4",
        "vllm",
        "fp4",
        512,
        device_gib=79.15,
        share=0.70,
        parallel=320,
        note="bitsandbytes in flight: vLLM's loader quantizes NF4 with double quantization whatever the config says",
    ),
    "sglang-n1": Case("qwen3-235b-a22b", "sglang", "fp8", tp=4),
}  # fmt: skip

_SIZE = re.compile(r"([\d.]+)\s*(MiB|GiB|GB|KiB)")


def size_of(text: Any) -> int | None:
    """'1820.90 MiB' / '14.96GiB' / '14.9888 GB' (vLLM's GB are GiB) -> bytes."""
    if text is None:
        return None
    if isinstance(text, list):
        parts = [size_of(t) for t in text]
        return sum(p for p in parts if p) if parts else None
    match = _SIZE.search(str(text))
    if not match:
        return None
    unit = {"MiB": MIB, "GiB": GIB, "GB": GIB, "KiB": 1024}[match.group(2)]
    return int(float(match.group(1)) * unit)


def corpus_path() -> Path:
    shared = ROOT.parent / "shared" / "logs" / "numbers.jsonl"
    return shared if shared.is_file() else ROOT / "tests" / "data" / "numbers.jsonl"


def model_info(name: str) -> ModelInfo:
    shape = dict(MODELS[name])
    shape.setdefault("head_dim_v", shape["head_dim_k"])
    info = ModelInfo(source=name, **shape)
    info.n_params = count_params_arithmetic(info)
    info.params_exact = True
    return info


def pct(estimated: float, measured: float) -> float:
    return (estimated - measured) / measured * 100


@dataclass
class Row:
    case: str
    figure: str
    estimated: float
    measured: float
    goal: float | None  # percent
    is_bytes: bool = True

    @property
    def error(self) -> float:
        return pct(self.estimated, self.measured)


def llama_rows(case_id: str, case: Case, measured: dict[str, Any]) -> list[Row]:
    info = model_info(case.model)
    backend = "ollama" if case.backend == "ollama" else "llama.cpp"
    settings = Settings(
        backend=backend,
        context=case.context,
        ubatch=case.ubatch,
        batch=max(case.ubatch, 512),
        flash_attn=case.flash,
        on_gpu=case.on_gpu,
        quant=case.quant,
        device_bytes=80 * GIB,  # large enough that every layer goes to the GPU, as these runs did
    )
    est = estimate(info, settings)
    rows: list[Row] = []
    model_keys = [
        k
        for k in measured
        if "model_buffer" in k or k.endswith("CPU_buffer_size") or k == "CUDA0_buffer_size"
    ]
    model_keys += [k for k in measured if k == "CPU_Mapped_model_buffer_sizes"]
    weights_measured = sum(size_of(measured[k]) or 0 for k in model_keys)
    kv_measured = next((size_of(v) for k, v in measured.items() if "KV_buffer" in k), None)
    compute_key = "CUDA0_compute_buffer_size" if case.on_gpu else "CPU_compute_buffer_size"
    compute_measured = size_of(measured.get(compute_key))
    weights_est = est.weights_bytes + est.weights_host_bytes
    if case.quant and weights_measured:
        rows.append(Row(case_id, "weights", weights_est, weights_measured, 3.0))
    if kv_measured:
        rows.append(Row(case_id, "KV cache", est.kv_cache_bytes, kv_measured, 1.0))
    if compute_measured:
        rows.append(Row(case_id, "compute buffer", est.compute_buffer_bytes, compute_measured, None))
    if case.quant and weights_measured and kv_measured and compute_measured:
        total_est = weights_est + est.kv_cache_bytes + est.compute_buffer_bytes
        rows.append(
            Row(
                case_id, "whole footprint", total_est, weights_measured + kv_measured + compute_measured, 10.0
            )
        )
    return rows


def vllm_rows(case_id: str, case: Case, measured: dict[str, Any]) -> list[Row]:
    info = model_info(case.model)
    device = int((case.device_gib or 80) * GIB)
    settings = Settings(
        backend="vllm",
        context=case.context,
        parallel=case.parallel,
        quant=case.quant,
        device_bytes=device,
        safety=case.share,
    )
    est = estimate(info, settings)
    rows: list[Row] = []
    weights_measured = size_of(measured.get("model_weights") or measured.get("model_weights_loaded"))
    weights_measured = weights_measured or size_of(measured.get("model_loading"))
    if weights_measured:
        rows.append(Row(case_id, "weights", est.weights_bytes, weights_measured, 3.0))
    budget = size_of(measured.get("usable_by_instance"))
    if budget:
        rows.append(Row(case_id, "budget (device x share)", est.usable_bytes, budget, 1.0))
    activation = size_of(measured.get("pytorch_activation_peak_memory"))
    if activation is None and measured.get("peak_torch_memory") and weights_measured:
        activation = (size_of(measured["peak_torch_memory"]) or 0) - weights_measured
    if activation:
        rows.append(Row(case_id, "activation peak", est.activations_bytes, activation, None))
    kv_memory = size_of(
        measured.get("available_kv_cache_memory")
        or measured.get("kv_cache_size")
        or measured.get("kv_cache_memory")
    )
    blocks = measured.get("gpu_blocks") or measured.get("cuda_blocks")
    per_token = kv_bytes_per_token(info, "bf16", "vllm")
    if kv_memory and blocks:
        # the KV rule alone: the memory it reported, cut into 16-token blocks of our bytes per token
        predicted = kv_memory // (16 * per_token)
        rows.append(Row(case_id, "KV blocks from its KV memory", predicted, blocks, 1.0, is_bytes=False))
    elif blocks and not kv_memory:
        concurrency = measured.get(f"max_concurrency_at_{case.context}_tokens")
        if concurrency:
            rows.append(Row(case_id, "max concurrency from its blocks", blocks * 16 / case.context,
                            float(str(concurrency).rstrip("x")), 1.0, is_bytes=False))  # fmt: skip
    if kv_memory and weights_measured:
        # the KV cache as the whole estimate leaves it (weights, activation peak, non-torch memory all off
        # the budget), scored: the KV rows above score only the block arithmetic on vLLM's own figure
        rows.append(Row(case_id, "KV memory left (whole budget)", est.kv_cache_bytes, kv_memory, 10.0))
        fixed_est = est.weights_bytes + est.activations_bytes + 512 * MIB
        non_torch = size_of(measured.get("non_torch_memory")) or 0
        fixed_measured = weights_measured + (activation or 0) + non_torch
        rows.append(Row(case_id, "whole footprint before KV", fixed_est, fixed_measured, 10.0))
    return rows


def sglang_rows(case_id: str, case: Case, measured: dict[str, Any]) -> list[Row]:
    info = model_info(case.model)
    tokens = measured.get("kv_tokens")
    k_size = size_of(measured.get("k_size"))
    if not tokens or not k_size:
        return []
    # per GPU with tensor parallelism: the KV heads are split across the ranks; SGLang keeps bf16 K/V here
    per_rank = replace(info, n_kv_heads=info.n_kv_heads // case.tp)
    k_bytes = kv_bytes_per_token(per_rank, "bf16", "vllm") // 2 * tokens
    return [Row(case_id, "K cache per rank", k_bytes, k_size, 1.0)]


ENGINE_SHAPES = [
    # (model shape, context, ubatch, flash attention, KV type)
    (dict(n_layer=4, n_embd=512, n_head=8, n_head_kv=8), 2048, 512, False, "f16"),
    (dict(n_layer=2, n_embd=256, n_head=4, n_head_kv=2, n_ff=2048), 1000, 512, True, "f16"),
    (dict(n_layer=3, n_embd=512, n_head=8, n_head_kv=2, dtype="q8_0"), 3000, 256, True, "q8_0"),
    (dict(n_layer=6, n_embd=384, n_head=6, n_head_kv=3, n_ff=1536, dtype="q4_0"), 5000, 128, False, "f16"),
    (dict(n_layer=2, n_embd=512, n_head=8, n_head_kv=1, n_ff=4096, dtype="f32"), 700, 512, True, "q4_0"),
    (dict(n_layer=8, n_embd=768, n_head=12, n_head_kv=4, n_ff=2048, dtype="q8_0"), 16384, 512, False, "f16"),
    (dict(n_layer=8, n_embd=768, n_head=12, n_head_kv=4, n_ff=2048, dtype="q8_0"), 16384, 512, True, "q8_0"),
]


def engine_rows() -> list[Row]:
    import subprocess
    import tempfile

    from vramtui.core.demo.tinygguf import TinyModelSpec, write_tiny_gguf
    from vramtui.core.estimate.engine_probe import llama_cpp_available, probe_llama_cpp
    from vramtui.core.estimate.modelinfo import load_model_info

    if not llama_cpp_available():
        print("--engine: llama-cpp-python is not installed")
        return []
    load = (
        "import sys, llama_cpp\n"
        "p, c, u, f, k = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == '1', int(sys.argv[5])\n"
        "llama_cpp.Llama(model_path=p, n_ctx=c, n_batch=max(512, u), n_ubatch=u, flash_attn=f, type_k=k,"
        " type_v=k, n_threads=2, verbose=True)\n"
    )
    pattern = re.compile(r"(CPU_Mapped model|CPU KV|CPU compute) buffer size =\s+([\d.]+) MiB")
    kv_types = {"f16": 1, "q8_0": 8, "q4_0": 2}
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as tmp:
        for number, (shape, ctx, ubatch, flash, kv) in enumerate(ENGINE_SHAPES):
            path = write_tiny_gguf(Path(tmp) / f"m{number}.gguf", TinyModelSpec(**shape))
            args = [str(path), str(ctx), str(ubatch), "1" if flash else "0", str(kv_types[kv])]
            result = subprocess.run([sys.executable, "-c", load, *args], capture_output=True, text=True)
            real = {name.split()[-1]: float(mib) * MIB for name, mib in pattern.findall(result.stderr)}
            if set(real) != {"model", "KV", "compute"}:
                print(f"engine case {number}: llama.cpp did not load it")
                continue
            settings = Settings(
                context=ctx,
                ubatch=ubatch,
                batch=max(512, ubatch),
                flash_attn=flash,
                kv_dtype=kv,
                on_gpu=False,
            )
            est = estimate(load_model_info(path), settings)
            label = f"tiny#{number}"
            fa = "fa" if flash else "no-fa"
            print(f"{label}: {shape} ctx {ctx} ubatch {ubatch} {fa} kv {kv}")
            rows.append(Row(label, "weights (CPU_Mapped)", est.weights_bytes, real["model"], 3.0))
            # llama.cpp prints MiB with two decimals: compare at the precision it prints
            rows.append(Row(label, "KV cache", round(est.kv_cache_bytes / MIB, 2) * MIB, real["KV"], 1.0))
            rows.append(Row(label, "compute buffer", est.compute_buffer_bytes, real["compute"], None))
            total_real = real["model"] + real["KV"] + real["compute"]
            total_est = est.weights_bytes + est.kv_cache_bytes + est.compute_buffer_bytes
            rows.append(Row(label, "whole footprint", total_est, total_real, 10.0))
            dry = probe_llama_cpp(
                path, context=ctx, ubatch=ubatch, batch=max(512, ubatch), flash_attn=flash, kv_dtype=kv
            )
            if dry is not None and dry.context_ok:
                rows.append(
                    Row(
                        label,
                        "dry run compute (no_alloc)",
                        dry.compute_bytes.get("CPU", 0),
                        real["compute"],
                        None,
                    )
                )
    return rows


def gguf_speed() -> None:
    """Seconds to read a GGUF with Qwen's vocabulary size, printed (see the module's doc)."""
    import tempfile
    import time

    import gguf

    from vramtui.core.demo.tinygguf import TinyModelSpec, write_tiny_gguf
    from vramtui.core.estimate.grid import build_table
    from vramtui.core.estimate.modelinfo import load_model_info

    with tempfile.TemporaryDirectory(prefix="vramtui-bench-") as folder:
        spec = TinyModelSpec(n_embd=64, n_head=8, n_head_kv=2, n_ff=128, vocab_size=151_936)
        path = write_tiny_gguf(Path(folder) / "qwen-vocab.gguf", spec)
        timings: list[tuple[str, float]] = []
        for what, call in (
            ("gguf.GGUFReader (every token parsed)", lambda: gguf.GGUFReader(str(path), "r")),
            ("load_model_info, first read", lambda: load_model_info(path)),
            ("load_model_info, again (memoized)", lambda: load_model_info(path)),
            ("estimate at 8192", lambda: estimate(load_model_info(path), Settings(context=8192))),
            ("estimate --table", lambda: build_table(load_model_info(path), Settings(device_bytes=24 * GIB))),
        ):
            started = time.perf_counter()
            call()
            timings.append((what, time.perf_counter() - started))
    print("GGUF with a 151,936-token vocabulary and its merges (a 64-wide, 4-layer network):")
    for what, seconds in timings:
        print(f"  {what:<40}{seconds:>8.3f} s")


def _printouts() -> Any:
    spec = importlib.util.spec_from_file_location("printouts", ROOT / "tests/core/estimate/printouts.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["printouts"] = module
    spec.loader.exec_module(module)
    return module


def printout_report(show_heldout: bool, quiet: bool = False) -> dict[str, Any]:
    """Each printout's terms (estimate / printed) and the shares within tolerance per engine and split."""
    po = _printouts()
    shares: dict[tuple[str, str, str], list[int]] = {}
    left_out: dict[tuple[str, str, str], dict[str, int]] = {}
    listed: list[dict[str, Any]] = []
    latest: dict[tuple[str, str, str], list[int]] = {}  # the newest rounds, both parts: (file, family, term)
    say = (lambda *_args: None) if quiet else print
    say(f"\nprintouts: {', '.join(path.name for path in po.FILES)}")
    say(f"{'printout':<64}{'term':<9}{'place':<10}{'estimate':>11}{'printed':>11}{'ratio':>8}")
    for case in po.cases():
        family, split = case["family"], case["split"]
        if family not in ("llama.cpp", "ik_llama.cpp", "ollama", "vllm"):
            for term in po.TERMS:  # SGLang prints no model shape: the numbers corpus above sizes it
                why = left_out.setdefault((family, split, term), {})
                reason = "no shape lines (sized above from published shapes)"
                why[reason] = why.get(reason, 0) + 1
            continue
        scored = po.score(case)
        for term in po.TERMS:
            found = [t for t in scored.terms if t.term == term]
            if case["file"] in _NEWEST_ROUNDS:  # the newest rounds, both parts, as aggregates
                fresh = latest.setdefault((case["file"], family, term), [0, 0])
                fresh[0] += sum(1 for t in found if t.ok)
                fresh[1] += len(found)
            tally = shares.setdefault((family, split, term), [0, 0])
            tally[0] += sum(1 for t in found if t.ok)
            tally[1] += len(found)
            if term in scored.left_out:
                why = left_out.setdefault((family, split, term), {})
                why[scored.left_out[term]] = why.get(scored.left_out[term], 0) + 1
        for t in scored.terms:
            if split == "heldout" and not show_heldout:
                continue
            listed.append({"case": t.case, "split": split, "family": family, "term": t.term, "place": t.place,
                           "estimated": t.estimated, "printed": t.printed, "ratio": round(t.ratio, 4), "ok": t.ok})  # fmt: skip
            mark = "" if t.ok else "  MISS"
            say(f"{t.case[:63]:<64}{t.term:<9}{t.place:<10}{t.estimated / MIB:>11,.1f}"
                f"{t.printed / MIB:>11,.1f}{t.ratio:>8.3f}{mark}")  # fmt: skip
    say("\nshare within tolerance (KV 5%, weights 8%, compute 25%), per figure (a device or the host):")
    for (family, split, term), (met, counted) in sorted(shares.items()):
        share = f"{met / counted:.0%}" if counted else "-"
        out = left_out.get((family, split, term), {})
        why = "; ".join(f"{n} {reason}" for reason, n in out.items())
        say(f"  {family:<14}{split:<9}{term:<9}{met:>4}/{counted:<4}{share:>6}  left out: {sum(out.values())}"
            + (f" ({why})" if why else ""))  # fmt: skip
    for (family, split, term), out in sorted(left_out.items()):
        if (family, split, term) not in shares:
            say(f"  {family:<14}{split:<9}{term:<9}   0/0        left out: {sum(out.values())}")
    # Round 3 (9 printouts gathered blind, 2026-12-02) was scored whole at e950a35 before any change: llama.cpp
    # KV 4/4, weights 7/8, compute 7/8 (8/8 once the reader added a BLAS build's second host buffer); ik_llama.cpp
    # KV 5/5, weights 8/8, compute 6/8; its vLLM one unscored (no config).
    # Round 4 (14 mainline llama.cpp printouts gathered blind, 2026-12-03) was scored whole at 04c0642 before any
    # change: KV 15/16, weights 23/27, compute 21/28 (after 1611590: 16/16, 23/27, 26/28). Round 5 (12, half
    # on two to eight GPUs) at 0c4dc4d: KV 11/24, weights 31/33, compute 23/34 (after 3bd7a53: 27/28, 36/38,
    # 28/39). Round 6 (13 vLLM V1 printouts of models with published configs) at ad60ba1: KV 4/5, weights
    # 11/11, compute 1/6 (after the V1 MLP's third ff-wide tensor: 4/5, 11/11, 2/6). Round 7 (11 mainline, 5
    # vLLM, none with -ot, --n-cpu-moe or a large ubatch: none left outside used threads) at 09a089b: llama.cpp
    # KV 18/18, weights 24/26, compute 22/26; vLLM unscored (no config.json here; Qwen3-8B's added after:
    # KV 1/1, weights 1/1, no compute figure printed in its version). Round 8 (13 mainline printouts, most from
    # log files committed to public repositories; retyped by the helper, who could not pipe them) at 30f026f:
    # KV 12/16, weights 17/23, compute 17/23. Round 9 (16: 13 ik_llama.cpp, 2 mainline, 1 Ollama with no
    # model buffer line; few mainline printouts were left outside used sources) at 301e3fd: ik_llama.cpp KV
    # 19/25, weights 13/35, compute 23/34; mainline KV 1/1, weights 2/2, compute 2/2. After the reader took
    # comma-separated -ot rules and -ctk from the command, and a file's type counts were handed out exactly
    # where it has more tensors than the estimator's groups (the commit adding round 9): ik KV 20/25, weights 21/35, compute 23/34.
    # Round 12 (17: 7 mainline, 3 ik_llama.cpp, 3 Ollama, 4 vLLM; no mainline -ot, -ts or --n-cpu-moe run was
    # left outside used sources) at e7ef493 before any change: mainline KV 13/14, weights 18/20, compute 9/21;
    # ik KV 16/16, weights 11/17, compute 17/17; Ollama 4/4, 6/6, 6/6; vLLM weights 1/1. Its one training KV
    # miss (x10.8, Gemma 4 with a slot per sequence) was the harness's reading of the global layers (fewer,
    # not wider) and the product's sliding window per KV stream: mainline KV 14/14 after.
    # Round 13 (15: 7 mainline, 6 ik_llama.cpp, 2 vLLM; 7 on two to four GPUs, 8 with -ot, 5 of them to named
    # GPUs; every llama.cpp run from the ik_llama.cpp threads, where users paste mainline logs too) at 810028b
    # before any change: mainline KV 12/12, weights 18/19, compute 19/19; ik KV 11/11, weights 16/17, compute
    # 12/17; vLLM unscored (no config.json; Llama 3.1 8B's taken under its first name after: weights 1/1).
    # Round 14 (12, only 3 whole: the search tool gives one excerpt per thread, and few threads were left
    # unused) at 17f88f1 before any change: mainline KV 1/1, compute 2/2 (one Metal run; nine fragments print
    # no shape lines); ik KV 2/2, weights 1/2, compute 2/4. Its ik misses showed ik_llama.cpp's f16 mask from
    # its build 3907 (host x2.09 -> x1.13, the rest Qwen3-VL's deepstack width in the printed n_embd).
    # Round 15 (10 whole logs committed to public repositories: 7 mainline, most of them llama.cpp's own CI
    # on a V100 and an M4, 3 vLLM V1) at 4994429 before any change: mainline KV 8/8, weights 11/14, compute
    # 11/14; vLLM unscored (no config.json here; two published shapes added after: weights 2/2, KV 0/1).
    # Its training misses showed an encoder (bge-small, BERT) sized with a head and logits it does not
    # have: weights x1.57 -> x1.02, compute x3.65 -> x1.09 once encoders are read as such.
    # Round 16 (10 whole logs: 4 Strix Halo runs of b6040-b6066 on ROCm and Vulkan, an early-2024 4x MI100
    # run through llama-cpp-python, 5 vLLM V1) at a15d334 before any change: mainline KV 8/8, weights 11/13,
    # compute 5/13; vLLM unscored (no config.json here). Its training misses showed Llama 4's chunked
    # attention (llama.cpp's 8192-token window in 3 of 4 layers, named by no GGUF key): compute 6/13 after.
    # Round 17 (8, 6 whole) before any change: mainline KV 2/2, compute 2/4; vLLM weights 1/1.
    # Round 18 (10: 6 ik_llama.cpp excerpts from a thread archive no round had used, 2 mainline, 1 Ollama,
    # 1 vLLM) at 62004e7 before any change: mainline KV 1/1, weights 2/2, compute 2/2 (one ROCm run; the
    # rest print no shape lines, the vLLM model's config.json is not here). Published shapes for
    # Qwen3-235B-A22B and DeepSeek-R1 added after let nine older printouts with no shape lines be scored
    # (KV and compute; an MLA cache's layout in mainline depends on when the GGUF was converted: left out).
    # Round 19 (9 whole: 5 mainline on Strix Halo, ROCm and Vulkan; an Ollama 0.20 run; 3 vLLM whose
    # config.json is not here) at bfaa293 before any change: mainline KV 5/5, weights 6/10, compute 10/10;
    # Ollama 1/1, 2/2, 2/2. Its four weights misses are Unsloth's UD embedding types (listed as known).
    # Round 20 (1: the gatherer found nearly every whole log already used) at 6dcaa77 before any change:
    # mainline KV 1/1, compute 1/2 (a Vulkan host buffer with four KV streams, listed as known).
    # Round 21 (5: 3 mainline, 1 Ollama, 1 vLLM Whisper whose config.json is not here) at 3cc4c98 before
    # any change: mainline KV 2/2, weights 2/2, compute 2/3; Ollama 1/1, 2/2, 2/2. Its miss was a
    # -np 2 -kvu run sized as two KV streams (llama-server's -kvu was not known): x0.62, then x1.06.
    # Round 22 (3: LM Studio's gpt-oss-120b on Metal, an Ollama phi-4 partial offload, a vLLM excerpt of a
    # model with no config here) at cdbf024 before any change: mainline KV 0/1, weights 2/2, compute 0/2;
    # Ollama KV 2/2, weights 2/2. The KV miss was LM Studio's full-size SWA cache (--swa-full, not known):
    # x0.59, then exact; its Metal compute without flash attention stays x0.69 (listed as known). Round 23
    # (3 vLLM logs typed by hand from the index, with no config.json here) is not taken. Round 24 (6: five
    # vLLM starts, one llama.cpp gpt-oss-20b over 8 Ascend NPUs with CANN) at 33a0e05 before any change:
    # mainline KV 8/8, weights 0/9, compute 0/9 (all the CANN run: it keeps 10.9 of 11.3 GiB in host RAM
    # with every layer "offloaded"; its weights and compute are now left out, said why); vLLM weights 1/1
    # (the others name models with no config here). Six configs found with it made rows measurable: vLLM
    # held-out weights 11/11 -> 12/12; training weights 19/19 -> 23/24, the miss DeepSeek-V4-Flash (x1.84,
    # its `expert_dtype: fp4` not read; then x1.02, KV x0.97). Round 25 (3: two vLLM Qwen3-30B-A3B-FP8
    # starts on an RTX 5090 with --cpu-offload-gb, an Ollama QwQ-32B partial offload) at 6990a14 before any
    # change: Ollama KV 2/2, weights 2/2, compute 2/2; vLLM weights 0/2 (x1.39, x1.16: this harness did
    # not read --cpu-offload-gb from the logs' non-default args; then x1.006, x1.002). Round 26 (17 other
    # runs in files already used: 12 llama.cpp, 5 vLLM) at d16ae25: mainline KV 12/12, weights 19/23,
    # compute 23/24; vLLM weights 3/3. The weights misses are host token embeddings of Unsloth's dynamic
    # recipes (the printout counts types, not which tensor has which), listed as known. Round 27 (6 mainline
    # runs with device and host compute buffers; 4 training, 2 held-out) at b1d71ff: KV 8/8, weights 11/12,
    # compute 12/12 (held-out 3/3, 4/4, 4/4); the miss, a UD-Q3_K_XL host embedding, is listed as known.
    # Round 28 (2 whole NVIDIA logs, both training) at 25032df: KV 3/3, weights 4/4, compute 3/4: the miss is
    # DeepSeek-V3's host buffer with layers on the CPU, 88 MiB as in round 5's (listed). Round 29 (3 whole
    # NVIDIA logs, all training: two GLM-5.2 runs over 4 GPUs, one V100) at 1995c15: KV 3/9, weights 8/12,
    # compute 3/12. The MTP layer (placed, not loaded, not cached) and the sparse-attention indexer's keys
    # made KV 9/9 and weights 12/12, its indexer's mask and scores compute 10/12; the misses, the first
    # GPU's copies of host experts of a UD recipe (x1.26, x1.33), are listed. Round 30 (7 whole NVIDIA logs,
    # all training) at 485d323: KV 6/10, weights 9/17, compute 13/17. Its GLM-5.2 run names no command (its
    # experts went to the host by rules the printout does not show): left out as such runs are, it was
    # sized with every expert on the GPUs. Of the other six, KV 6/6, weights 9/12, compute 12/12: the misses
    # are UD recipes' host embeddings (listed). Round 31 (4 whole logs of gpt-oss-20b on a T4, all training)
    # at db7ff06: KV 4/4, weights 8/8, compute 8/8. Round 32 (3 llama.cpp logs, training; a vLLM log of
    # a model whose config.json was not found, held-out, left out) at 88ba73e: KV 1/5 (a b5968 build pads
    # the cache to 32 cells without flash attention, now read from the build), weights 6/6, compute 3/4 (a
    # UD recipe's bf16 output weight, listed). Round 33 (3 vLLM logs, training; two models' config.json not
    # found, left out) at 88ba73e: weights 1/1 (Qwen3-32B over two GPUs; its card and compute not printed).
    # Round 34 found no row. Round 35 (1 llama.cpp log of ggml-org's CI, a V100, training) at b21c577:
    # KV 1/1, weights 2/2, compute 2/2. Round 36 (a llama.cpp log of ggml-org's CI, held-out; 3 vLLM logs,
    # training, two of models whose config.json was not found, left out) at 7f45aa7: llama.cpp KV 1/1,
    # weights 2/2, compute 2/2; vLLM weights 1/1 (a reranker on Qwen3-8B's shapes; its card not printed).
    # Round 37 (3 llama.cpp logs: two committed GLM-5.2 runs on 4 cards, a Vulkan run of ggml-org's CI; a
    # vLLM log whose config.json was not found, left out) at ce1e115: held-out llama.cpp KV 1/5, weights
    # 2/7, compute 5/7; its training run left out (tensor placement overridden, not shown how). Round 38 (5
    # llama.cpp logs: four runs of one Qwen3.5-122B-A10B box on 4 P100s, a 2024 Phi-2 ROCm run; a vLLM
    # gpt-oss-120b log whose config.json was not found, left out) at ed88eb7: held-out llama.cpp KV 1/1,
    # weights 2/2, compute 1/2; training KV 16/16, weights 10/20, compute 11/20 (its build prints no n_ff_exp:
    # weights and compute are now left out there). Round 39 (4 llama.cpp logs: three more runs of that box, one
    # of ggml-org's V100 CI; a vLLM granite-4.0-micro log whose config.json was not found, left out) at
    # 2523a2c: held-out llama.cpp KV 4/4, weights 5/5, compute 2/5 (one run left out: tensor placement
    # overridden, not shown how); training KV 5/5, weights 6/7, compute 4/7. Round 40 (2 vLLM runs whose GPU is
    # not known) was not registered. Round 41 (a Gemma 4 12B Vulkan run on a 12 GB card and a V100 CI run of
    # llama.cpp; vLLM Qwen3-8B bf16 and AWQ on a 4090; a MiniCPM-V vLLM run whose config.json was not found,
    # left out) at 787a58a: held-out llama.cpp KV 1/1, weights 2/2, compute 1/2, vLLM KV 0/1, weights 0/1;
    # training llama.cpp KV 1/1, weights 2/2, compute 2/2, vLLM weights 1/1, KV 0/1 (the card was read
    # from nvidia-smi's free memory before the harness took its largest figure: x0.63, then x0.90). Round 42 (an
    # early-2024 llama.cpp run on a 4070 with 25 of 33 layers offloaded; vLLM 0.27.1 Qwen3-8B and Qwen3-4B with
    # LoRA on a 4090, 0.30 Gemma 4 runs on L4s whose config.json was not found, left out) at 252de5a: no
    # held-out figure scored; training llama.cpp KV 2/2, weights 1/2, compute 0/2, vLLM weights 2/2, KV 1/2,
    # compute 0/2 (the misses are xfails with their reasons: the old build's whole-file CPU buffer and its
    # scheduler; vLLM 0.27.1's activation peaks of 1.18 and 0.15 GiB, which no one model of its profile makes).
    # Round 43 (vLLM only: Qwen3-4B+LoRA on a 4090 at 0.92, failing in the sampler's warm-up; two Gemma 4 runs,
    # a T4 and an MI300X, whose config.json was not found, left out) at 76a44e6: training KV 1/1, weights 1/1,
    # compute 0/1; it showed what round 42's peaks differ by: a start that compiles its graph (no torch.compile
    # cache) printed 0.80 GiB for the model whose cached start printed 0.15. Round 44 (a 2024 V100 CI run of
    # llama.cpp, pythia 2.8B; two vLLM GLM-5 NVFP4 runs whose config.json was not found, left out) at a8c7cd5:
    # training llama.cpp KV 1/1, weights 2/2, compute 2/2. Round 45 (two 2024 V100 CI runs of llama.cpp,
    # pythia 2.8B, one per part; vLLM 0.19 Qwen3-0.6B under --enforce-eager on a 3060 12 GB, twice, held-out;
    # Qwen3-0.6B's config.json added, and the harness reads the card from "Free memory on device cuda:0
    # (free/total GiB)") at 09f9631: held-out llama.cpp KV 1/1, weights 2/2, compute 2/2, vLLM weights 2/2,
    # KV 0/2 (no compute printed); training llama.cpp KV 1/1, weights 2/2, compute 2/2. Round 46 (three 2025
    # V100 CI runs of llama.cpp, pythia 2.8B f16, Q8_0 and Q4_1 of builds 4722, 4509 and 4477; ik_llama.cpp
    # Ling-1T IQ2_K on two 3090s with its experts on the host and -ub 4096) at 048f0f8: held-out llama.cpp KV
    # 1/1, weights 2/2, compute 2/2; training llama.cpp KV 2/2, weights 4/4, compute 4/4, ik_llama.cpp KV 2/2,
    # weights 3/3, compute 3/3. Round 47 (one vLLM 0.28 run of Qwen2.5-1.5B under --enforce-eager on a 24 GB
    # Turing card, training) at 89c3271: KV 1/1, weights 1/1, compute 1/1. Round 48 (two vLLM runs on a B300
    # from one article: DeepSeek-V4-Flash-0731, held-out, sized from DeepSeek-V4-Flash's config by the name
    # match; Gemma 4 31B, training, whose config.json is not here) at ca5e0a2: held-out vLLM weights 1/1, KV
    # 0/1, compute 0/1 (not looked into). Round 49 (two vLLM runs on H200s, both training: DeepSeek-V4-Flash
    # at TP 2 under a 256K context; GLM-5.1-FP8 at TP 8, whose config.json is not here) at d9d0dc6: KV 1/1,
    # weights 1/1, no compute printed. Round 50 (both training: llama.cpp b9100 gpt-oss-120b over ten 8 GB
    # P104-100s with pipeline parallelism; vLLM Gemma-4-26B-A4B-NVFP4 on a 5090, whose config.json is not
    # here) at e54f755: llama.cpp KV 10/10, weights 11/11, compute 3/11 (the eight middle cards x1.85: their
    # 741 MiB is under the ends' 1.4 GiB, and the model gives every card the same; not looked into further).
    for name, words in _NEWEST_ROUNDS.items():
        say(f"\n{words}:")
        for (file, family, term), (met, counted) in sorted(latest.items()):
            if file == name:
                say(f"  {family:<14}{term:<9}{met:>4}/{counted:<4}")
    return {"figures": listed, "shares": {"/".join(key): value for key, value in shares.items()}}


_NEWEST_ROUNDS = {
    "round3.jsonl": "round 3, both parts (gathered after the estimator of 2026-12-02, fourth session)",
    "round4.jsonl": "round 4, both parts (gathered after the estimator of 2026-12-03, fifth session)",
    "round5.jsonl": "round 5, both parts (gathered after the estimator of 2026-12-03, sixth session)",
    "round6.jsonl": "round 6 (vLLM), both parts (gathered after the estimator of 2026-12-03, sixth session)",
    "round7.jsonl": "round 7, both parts (gathered after the estimator of 2026-12-03, seventh session)",
    "round8.jsonl": "round 8, both parts (gathered after the estimator of 2026-12-03, seventh session, later)",
    "round9.jsonl": "round 9, both parts (gathered after the estimator of 2026-12-03, eighth session)",
    "round10.jsonl": "round 10, both parts (gathered after the estimator of 2026-12-03, ninth session)",
    "round11.jsonl": "round 11, both parts (gathered after the estimator of 2026-12-03, ninth session, later)",
    "round12.jsonl": "round 12, both parts (gathered after the estimator of 2026-12-03, tenth session)",
    "round13.jsonl": "round 13, both parts (gathered after the estimator of 2026-12-04, eleventh session)",
    "round14.jsonl": "round 14, both parts (gathered after the estimator of 2026-12-04, twelfth session)",
    "round15.jsonl": "round 15, both parts (gathered after the estimator of 2026-12-04, twelfth session, later)",
    "round16.jsonl": "round 16, both parts (gathered after the estimator of 2026-12-04, twelfth session, third)",
    "round17.jsonl": "round 17, both parts (gathered after the estimator of 2026-12-04, twelfth session, fourth)",
    "round18.jsonl": "round 18, both parts (gathered after the estimator of 2026-12-04, thirteenth session)",
    "round19.jsonl": "round 19, both parts (gathered after the estimator of 2026-12-04, thirteenth session, later)",
    "round20.jsonl": "round 20 (gathered after the estimator of 2026-12-04, thirteenth session, third)",
    "round21.jsonl": "round 21 (gathered after the estimator of 2026-12-04, fourteenth session)",
    "round22.jsonl": "round 22 (gathered after the estimator of 2026-12-05, fifteenth session)",
    "round24.jsonl": "round 24 (gathered after the estimator of 2026-12-05, sixteenth session)",
    "round25.jsonl": "round 25 (gathered after the estimator of 2026-12-05, sixteenth session, later)",
    "round26.jsonl": "round 26 (other runs in files already used; sixteenth session)",
    "round27.jsonl": "round 27 (compute buffers on the device and the host; seventeenth session)",
    "round28.jsonl": "round 28 (NVIDIA runs, seventeenth session, later)",
    "round29.jsonl": "round 29 (NVIDIA runs, eighteenth session)",
    "round30.jsonl": "round 30 (NVIDIA runs, eighteenth session, later)",
    "round31.jsonl": "round 31 (a T4's gpt-oss runs, eighteenth session, last)",
    "round32.jsonl": "round 32 (an A4000's partial offload and a Metal run, nineteenth session, first)",
    "round33.jsonl": "round 33 (vLLM runs of 2026, nineteenth session, second)",
    "round35.jsonl": "round 35 (a V100 run of ggml-org's CI, twentieth session)",
    "round36.jsonl": "round 36 (a V100 run of ggml-org's CI and vLLM runs of 2026, twenty-first session)",
    "round37.jsonl": "round 37 (GLM-5.2 on 4 cards, a Vulkan CI run, twenty-second session)",
    "round38.jsonl": "round 38 (Qwen3.5-122B-A10B on 4 P100s, a Phi-2 ROCm run, twenty-third session)",
    "round39.jsonl": "round 39 (three more runs of that box, a V100 CI run, twenty-fourth session)",
    "round41.jsonl": "round 41 (Gemma 4 12B on Vulkan, a V100 CI run, vLLM on a 4090, twenty-fifth session)",
    "round42.jsonl": "round 42 (an early-2024 llama.cpp run on a 4070, vLLM 0.27.1 on a 4090, twenty-sixth session)",
    "round43.jsonl": "round 43 (vLLM 0.27.1 Qwen3-4B with LoRA on a 4090, twenty-sixth session)",
    "round44.jsonl": "round 44 (a V100 CI run of llama.cpp, twenty-sixth session)",
    "round45.jsonl": "round 45 (two V100 CI runs, vLLM 0.19 Qwen3-0.6B on a 3060, twenty-seventh session)",
    "round46.jsonl": "round 46 (three V100 CI runs, ik_llama.cpp Ling-1T on two 3090s, twenty-seventh session)",
    "round47.jsonl": "round 47 (vLLM 0.28 Qwen2.5-1.5B eager on a 24 GB Turing card, twenty-eighth session)",
    "round48.jsonl": "round 48 (vLLM on a B300: DeepSeek-V4-Flash-0731, Gemma 4 31B; twenty-eighth session)",
    "round49.jsonl": "round 49 (vLLM on H200s: DeepSeek-V4-Flash at 256K, GLM-5.1-FP8; twenty-ninth session)",
    "round50.jsonl": "round 50 (gpt-oss-120b on ten P104-100s, a vLLM NVFP4 run on a 5090; twenty-ninth session)",
    "round52.jsonl": "round 52 (DeepSeek-Coder-V2-Lite from Ollama's llama-server on a 5080; thirty-first session)",
    "round53.jsonl": "round 53 (vLLM on an A6000, four 3090s and an 80 GB card; ik_llama.cpp GLM-4.5 and Qwen3.8-27B; Ollama's Mixtral on an A4000; thirty-second session)",
    "round54.jsonl": "round 54 (llama.cpp over 13 and 6 P104-100s; ik_llama.cpp Kimi-K2.5 and GLM-5.1; vLLM on a DGX Spark, a Strix Halo and four 3090s; thirty-third session)",
    "round55.jsonl": "round 55 (issue bodies of 2024-2025: llama.cpp on a 3090, a 4090, Arc cards and four H100s; vLLM 0.8 on H100 NVLs, A100s, an A6000 and an 80 GB card; thirty-third session)",
    "round56.jsonl": "round 56 (issue bodies of 2024-2025: llama.cpp on a 3090, a 4070 Ti Super, two 5090s, an A100, a 2080, a 3060 Ti, an MI25 and six 4060 Tis; vLLM on a 4090 and a T4; thirty-fourth session)",
    "round57.jsonl": "round 57 (issue bodies of 2024-2025: llama.cpp on a 4090, a T4, 4070 and 3060 laptops, a 3060, a 3080, a 4090 with a 3060, two RX 7900 XTXs; vLLM on a W6800 and T4s; thirty-fourth session)",
    "round58.jsonl": "round 58 (issue bodies of 2024-2025: llama.cpp on an A800, a T4G, SYCL over eight and four devices, an Arc A750, Intel iGPUs, an AMD W7900 through SYCL, Metal; thirty-fourth session)",
    "round59.jsonl": "round 59 (issue bodies of 2024-2025: vLLM on sixteen H800s, T4s and an Intel XPU; llama.cpp on Metal, Arc cards, two A800s and eight 3090s; thirty-fifth session)",
    "round60.jsonl": "round 60 (llama.cpp on an Apple M5, an Arc A770, a Radeon iGPU, an M3 Max and an A14; thirty-fifth session)",
    "round61.jsonl": "round 61 (ik_llama.cpp and Thireus' runs on RTX PRO 6000s, a 5090, two 6000 Adas and a 4090; llama.cpp with experts on the host on a 3090; thirty-sixth session)",
    "round62.jsonl": "round 62 (llama.cpp with experts in host RAM on an A6000, an A100 with four slots; ik_llama.cpp over two A6000s, two 4090s, four and seven mixed cards; thirty-sixth session)",
    "round63.jsonl": "round 63 (ik_llama.cpp with experts in host RAM on an A6000, an RTX PRO 6000 and a 4080, and over four cards; thirty-seventh session)",
    "round64.jsonl": "round 64 (ik_llama.cpp perplexity runs of a GGUF tool suite on RTX PRO 6000s and a 5090: DeepSeek-V3.1, Kimi-K2, GLM, Qwen3.5, Gemma 4; thirty-seventh session)",
    "round65.jsonl": "round 65 (llama.cpp b8829: Qwen3.5-122B-A10B with its experts in host RAM over four P100s, nine settings; thirty-seventh session)",
    "round66.jsonl": "round 66 (llama.cpp b10505: GLM-5.2 with its experts in host RAM over four RTX PRO 6000s; thirty-eighth session)",
}


def main() -> int:
    if "--gguf" in sys.argv:
        gguf_speed()
        return 0
    rows: list[Row] = []
    skipped: list[str] = []
    for line in corpus_path().read_text().splitlines():
        if not line.strip():
            continue
        record = json.loads(line)
        case_id = record["id"]
        case = CASES.get(case_id)
        if case is None:
            skipped.append(f"{case_id}: no published shape for {record.get('model')!r}")
            continue
        measured = record.get("measured", {})
        if case.backend in ("llama.cpp", "ollama"):
            rows += llama_rows(case_id, case, measured)
        elif case.backend == "vllm":
            rows += vllm_rows(case_id, case, measured)
        else:
            rows += sglang_rows(case_id, case, measured)
    if "--engine" in sys.argv:
        rows += engine_rows()
    as_json = "--json" in sys.argv
    if as_json:
        numbers = [{**r.__dict__, "error_pct": round(r.error, 2)} for r in rows]
        printouts = printout_report("--show-heldout" in sys.argv, quiet=True)
        print(json.dumps({"numbers": numbers, "printouts": printouts}, indent=2))
        return 0
    try:
        return _print_rows(rows, skipped)
    finally:
        printout_report("--show-heldout" in sys.argv)


def _print_rows(rows: list[Row], skipped: list[str]) -> int:
    print(f"corpus: {corpus_path()}")
    print(f"{'case':<14}{'figure':<32}{'estimate':>14}{'measured':>14}{'error':>9}  goal")
    for r in rows:
        est = f"{r.estimated / MIB:,.1f} MiB" if r.is_bytes else f"{r.estimated:,.2f}"
        mea = f"{r.measured / MIB:,.1f} MiB" if r.is_bytes else f"{r.measured:,.2f}"
        goal = "" if r.goal is None else ("ok" if abs(r.error) <= r.goal else "MISSED") + f" (±{r.goal:g}%)"
        print(f"{r.case:<14}{r.figure:<32}{est:>14}{mea:>14}{r.error:>+8.2f}%  {goal}")
    for case_id, case in CASES.items():
        if case.note:
            print(f"note {case_id}: {case.note}")
    for line in skipped:
        print(f"skipped {line}")
    for figure, goal in (("KV", 1.0), ("weights", 3.0), ("whole footprint", 10.0), ("KV memory left", 10.0)):
        chosen = [
            r
            for r in rows
            if r.goal == goal
            and (figure in r.figure or (figure == "KV" and "K cache" in r.figure))
            and not (figure == "whole footprint" and "KV memory left" in r.figure)
        ]
        if chosen:
            worst = max(abs(r.error) for r in chosen)
            met = sum(abs(r.error) <= goal for r in chosen)
            print(f"summary {figure:<16} {met}/{len(chosen)} within ±{goal:g}% (worst {worst:.2f}%)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
