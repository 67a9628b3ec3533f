"""Several GPUs: vramtui's per-device estimate against what real multi-GPU runs printed, piece by piece.

The printouts are the test data's (tests/data/logs/printouts.jsonl, tests/data/printouts/devices.jsonl,
each with its source URL); the model shapes are tests/core/estimate/test_devices.py's (what each log
prints, the rest from the published config.json). Goals: KV <= 1%, weights <= 3%, compute <= 10%.
Run: python benchmarks/bench_devices.py
"""

from __future__ import annotations

import importlib.util
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from vramtui.core.estimate.estimator import Settings, estimate  # noqa: E402
from vramtui.core.units import GIB, MIB  # noqa: E402

_spec = importlib.util.spec_from_file_location("test_devices", ROOT / "tests/core/estimate/test_devices.py")
assert _spec and _spec.loader
t = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(t)

GOALS = {"kv": 0.01, "weights": 0.03, "compute": 0.10}


def _line(case: str, device: str, piece: str, estimated: float, printed: float) -> bool:
    off = estimated / printed - 1
    ok = abs(off) <= GOALS[piece]
    print(
        f"{case:<34}{device:<8}{piece:<9}{estimated / MIB:>11.2f}{printed / MIB:>11.2f}{off:>+9.1%}  {'ok' if ok else 'MISS'}"
    )
    return ok


def main() -> int:
    print(f"{'printout':<34}{'device':<8}{'piece':<9}{'estimate':>11}{'printed':>11}{'off':>9}   (MiB)")
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        info = t._config(Path(tmp), **t.COMMAND_R)
        printed = t._printed("split-1-4070ti-3090ti-pipeline")
        est = estimate(info, Settings(context=4096, parallel=1, quant="q4_k_s", flash_attn=False,
                                      gpus=(12 * GIB, 24 * GIB), tensor_split=(12, 29)))  # fmt: skip
        for row in est.devices:
            name = f"CUDA{row.index}"
            results.append(
                _line(
                    "split-1 layer, 2 cards",
                    name,
                    "weights",
                    row.weights_bytes,
                    printed[f"model_buffer.{name}"],
                )
            )
            results.append(
                _line("split-1 layer, 2 cards", name, "kv", row.kv_cache_bytes, printed[f"kv_buffer.{name}"])
            )
            if f"compute_buffer.{name}" in printed:
                results.append(
                    _line(
                        "split-1 layer, 2 cards",
                        name,
                        "compute",
                        row.compute_buffer_bytes,
                        printed[f"compute_buffer.{name}"],
                    )
                )
        info = t._config(Path(tmp), **t.QWEN3_30B_A3B)
        printed = t._printed("row-1-qwen3-30b-a3b-4xk80-row-split")
        est = estimate(info, Settings(context=30016, parallel=1, quant="q8_0", flash_attn=True,
                                      gpus=(12 * GIB,) * 4, split_mode="row"))  # fmt: skip
        for row in est.devices:
            name = f"CUDA{row.index}"
            if f"model_buffer.{name}" in printed:
                both = printed[f"model_buffer.{name}"] + printed[f"model_buffer.{name}_Split"]
                results.append(_line("row-1 row, 4 dies", name, "weights", row.weights_bytes, both))
            if f"kv_buffer.{name}" in printed:
                results.append(
                    _line("row-1 row, 4 dies", name, "kv", row.kv_cache_bytes, printed[f"kv_buffer.{name}"])
                )
        info = t._config(Path(tmp), **t.QWEN25_14B)
        est = estimate(
            info, Settings(backend="vllm", context=8192, gpus=(24 * GIB,) * 2, tensor_parallel_size=2)
        )
        for row in est.devices:
            results.append(
                _line("vllm-tp-5 TP 2", f"rank{row.index}", "weights", row.weights_bytes, 13.9476 * GIB)
            )
    print(f"\n{sum(results)}/{len(results)} within their goals")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
