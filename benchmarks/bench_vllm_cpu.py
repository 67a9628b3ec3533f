"""vramtui's estimate beside the figures vLLM's CPU build prints for the same launch.

Launches the real vLLM (scripts/install_vllm.sh's, or --vllm PATH) on tiny checkpoints (a dense Qwen2 and
a Qwen3-MoE) with the KV cache set outright and sized from the share of NUMA node 0, reads what vLLM
prints ("CPU KV cache size: N tokens", "Maximum concurrency for L tokens per request: C x", "Explicitly
set / Auto set (X/Y) GiB for KV cache ... non-kv usages"), and sizes the same launch with
`vramtui.core.estimate` (the node's memory taken from the log: these VMs report it differently from run to
run). The goal: tokens and concurrency within 2% of vLLM's.

Run: python benchmarks/bench_vllm_cpu.py [--vllm PATH] [--logs DIR]   (--logs: read saved logs instead)
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "engines"))

GOAL = 0.02
_TOKENS = re.compile(
    r"CPU KV cache size: ([\d,]+) tokens, Maximum concurrency for ([\d,]+) tokens per request: ([\d.]+)x"
)
_NODE = re.compile(r"set \(([\d.]+)/([\d.]+)\) GiB for KV cache on node")


@dataclass(frozen=True)
class Case:
    name: str
    model: str  # vllm_capture's model kinds
    args: tuple[str, ...]


CASES = (
    Case("dense, KV 256M", "dense", ("--kv-cache-memory-bytes", "256M")),
    Case("dense, KV 1G, max-model-len 2048", "dense", ("--kv-cache-memory-bytes", "1G", "--max-model-len", "2048")),
    Case("MoE, KV 512M", "moe", ("--kv-cache-memory-bytes", "512M")),
    Case("dense, share 0.5 of node 0", "dense", ("--gpu-memory-utilization", "0.5")),
)  # fmt: skip


def printed(log: str) -> dict[str, float]:
    tokens = _TOKENS.search(log)
    node = _NODE.search(log)
    if tokens is None or node is None:
        raise SystemExit("vLLM printed no KV cache size: see the log")
    return {
        "tokens": int(tokens.group(1).replace(",", "")),
        "context": int(tokens.group(2).replace(",", "")),
        "concurrency": float(tokens.group(3)),
        "node_gib": float(node.group(2)),
    }


def estimated(model: Path, case: Case, figures: dict[str, float]) -> dict[str, float]:
    from vramtui.core.estimate.estimator import Settings, estimate
    from vramtui.core.estimate.modelinfo import load_model_info
    from vramtui.core.units import GIB, parse_size

    args = dict(zip(case.args[::2], case.args[1::2], strict=True))
    kv = args.get("--kv-cache-memory-bytes")
    settings = Settings(
        backend="vllm",
        on_gpu=False,
        context=int(figures["context"]),
        device_bytes=int(figures["node_gib"] * GIB),
        kv_cache_memory=parse_size(kv + "iB") if kv else None,
        safety=float(args.get("--gpu-memory-utilization", 0.92)),
    )
    est = estimate(load_model_info(str(model)), settings)
    return {"tokens": float(est.kv_cache_tokens or 0), "concurrency": float(est.max_concurrency or 0)}


def run_case(program: str, case: Case, models: Path) -> str:
    from vllm_capture import Scenario, capture

    scenario = Scenario(case.name, case.args, model=case.model, when_ready="sigint")
    return capture(program, scenario, models, 18381).output


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vllm", default=None)
    parser.add_argument(
        "--logs", type=Path, default=None, help="a folder of saved logs named after each case"
    )
    args = parser.parse_args()
    from vllm_capture import default_program, model_for

    models = Path(tempfile.mkdtemp(prefix="vramtui-bench-vllm-"))
    program = args.vllm or default_program()
    print(
        f"{'case':38} {'printed tokens':>15} {'estimate':>10} {'ratio':>7} {'conc.':>8} {'est.':>8} {'ratio':>7}"
    )
    within = 0
    for case in CASES:
        log = (args.logs / f"{case.name}.log").read_text() if args.logs else run_case(program, case, models)
        figures = printed(log)
        est = estimated(Path(model_for(case.model, models)), case, figures)
        token_ratio = est["tokens"] / figures["tokens"]
        conc_ratio = est["concurrency"] / figures["concurrency"]
        ok = abs(token_ratio - 1) <= GOAL and abs(conc_ratio - 1) <= GOAL
        within += ok
        print(
            f"{case.name:38} {figures['tokens']:>15,.0f} {est['tokens']:>10,.0f} {token_ratio:>7.4f} "
            f"{figures['concurrency']:>8.2f} {est['concurrency']:>8.2f} {conc_ratio:>7.4f}"
            + ("" if ok else "  MISS")
        )
    print(f"\nwithin {GOAL:.0%} (tokens and concurrency): {within}/{len(CASES)}")
    return 0 if within == len(CASES) else 1


if __name__ == "__main__":
    sys.exit(main())
