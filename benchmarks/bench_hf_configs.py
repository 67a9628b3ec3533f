"""The estimate of each published config.json (tests/data/configs) beside the real size of its files.

For every config (and every quantization_config applied to the Qwen3-30B-A3B shapes) it prints the weights
vLLM would hold as the estimator sizes them, the quantization layout it read, and the real size where one is
published (gpt-oss-20b's index total_size) or exact (a BF16 checkpoint: 2 bytes x the real model class's
parameters). Then the device/host split with every expert on the host (`--cpu-moe`) against the split of
the real files by tensor name, and the recurrent state of the published hybrids per engine (vLLM's KV is the budget it leaves).

Run: python benchmarks/bench_hf_configs.py
"""

from __future__ import annotations

import json
from pathlib import Path

from vramtui.core.estimate.estimator import Settings, estimate
from vramtui.core.estimate.modelinfo import ModelInfo, info_from_config
from vramtui.core.memory.parts import HOST
from vramtui.core.units import GIB, MIB

CONFIGS = Path(__file__).resolve().parents[1] / "tests" / "data" / "configs"
GPT_OSS_20B_TOTAL_SIZE = 13_761_264_768  # its model.safetensors.index.json metadata.total_size
CARD = 80 * GIB


def load(name: str, quant: str | None = None) -> ModelInfo:
    cfg = json.loads((CONFIGS / name).read_text())
    if quant:
        cfg["quantization_config"] = json.loads((CONFIGS / quant).read_text())
    return info_from_config(cfg, quant or name)


def gib(nbytes: float) -> str:
    return f"{nbytes / GIB:8.3f}"


def weights_table() -> None:
    print("weights (vLLM, as the checkpoint stores them)")
    print(f"{'config':58} {'layout':44} {'estimate GiB':>12} {'real GiB':>9} {'error':>7}")
    qwen = "Qwen--Qwen3-30B-A3B.config.json"
    rows: list[tuple[str, ModelInfo, float | None]] = [
        ("openai/gpt-oss-20b", load("openai--gpt-oss-20b.config.json"), GPT_OSS_20B_TOTAL_SIZE),
    ]
    base = load(qwen)
    rows.append(("Qwen/Qwen3-30B-A3B (BF16: 2 x parameters)", base, (base.n_params or 0) * 2))
    for quant in sorted(CONFIGS.glob("*.quantization_config.json")):
        label = "Qwen3-30B-A3B + " + quant.name.removesuffix(".quantization_config.json")
        rows.append((label, load(qwen, quant.name), None))
    for label, info, real in rows:
        est = estimate(info, Settings(backend="vllm", device_bytes=CARD))
        layout = info.quant_spec.describe() if info.quant_spec else (info.quant or info.dtype)
        real_text = gib(real) if real else "       -"
        error = f"{(est.weights_bytes / real - 1) * 100:+6.2f}%" if real else "      -"
        print(f"{label[:58]:58} {layout[:44]:44} {gib(est.weights_bytes):>12} {real_text:>9} {error:>7}")


def split_table() -> None:
    print("\nllama.cpp --cpu-moe: device / host weights against the real files split by tensor name")
    info = load("Qwen--Qwen3-30B-A3B.config.json")
    experts = 48 * 128 * 3 * 768 * 2048 * 2  # model.layers.N.mlp.experts.E.*_proj.weight, BF16
    host = experts + 151936 * 2048 * 2  # + model.embed_tokens.weight, which llama.cpp keeps on the host
    device = (info.n_params or 0) * 2 - host
    est = estimate(info, Settings(cpu_moe=True, device_bytes=24 * GIB))
    for place, real, got in (
        ("device", device, est.bill.get("weights", 0)),
        ("host", host, est.bill.get("weights", HOST)),
    ):
        print(
            f"  Qwen3-30B-A3B {place:6} estimate {gib(got)} GiB, files {gib(real)} GiB ({(got / real - 1) * 100:+.2f}%)"
        )


HYBRIDS = (
    ("Qwen3.5-9B", "Qwen--Qwen3.5-9B.text_config.json"),
    ("Qwen3-Next-80B-A3B", "Qwen--Qwen3-Next-80B-A3B.config.json"),
    ("LFM2.5-2.6B", "LiquidAI--LFM2.5-2.6B.config.json"),
)


def recurrent_table() -> None:
    print("\nhybrids: KV and recurrent state at context 8192 per sequence, 4 sequences")
    for label, name in HYBRIDS:
        info = load(name)
        print(f"  {label} ({info.n_recurrent_layers} recurrent of {info.n_layers} layers)")
        for backend in ("llama.cpp", "vllm", "transformers"):
            context = 8192 * (4 if backend == "llama.cpp" else 1)  # llama.cpp's context is every slot's
            est = estimate(
                info, Settings(backend=backend, context=context, parallel=4, device_bytes=200 * GIB)
            )
            state = est.bill.get("recurrent_state", 0) + est.bill.get("recurrent_state", HOST)
            kv = est.kv_cache_bytes / MIB
            print(f"    {backend:12} KV {kv:10.1f} MiB   recurrent state {state / MIB:8.1f} MiB")


def main() -> None:
    weights_table()
    split_table()
    recurrent_table()


if __name__ == "__main__":
    main()
