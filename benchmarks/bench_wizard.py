"""How many relaunches the wizard needs after the first failure, beside blind halving.

Every launch is real: llama-cpp-python's server, and the real llama-server that
scripts/build_llama_server.sh builds (or $VRAMTUI_LLAMA_SERVER), on this CPU under an address-space
budget, with tiny GGUF models generated here; each scenario runs on both. Then vLLM's CPU build
(scripts/install_vllm.sh's), failing by its own memory checks on a tiny HF checkpoint: blind halving
halves its share, context or KV bytes. Blind halving halves the context (KV scenarios) or the quantization
(16 → 8 → 4 bit, weights scenarios) until the server comes up and answers. Goal: the wizard reaches
a working configuration in at most two relaunches after the first failure.

    python benchmarks/bench_wizard.py

Measured here (2 cores, the portable llama-server): 11/11 failing scenarios within 2 relaunches, each in
one (blind halving: 1 to 4); llama-server's 131072-context scenario starts as given (its flash attention
is auto). Before the portable build, llama-server met 3/6: its native build died of SIGILL on the
quantized files. On a machine loaded by other work one llama-server smoke request once timed out (`1!`).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from vramtui.core.demo.tinygguf import TinyModelSpec, write_tiny_gguf
from vramtui.core.launch.launcher import run_check
from vramtui.core.launch.profile import Profile
from vramtui.core.units import MIB, parse_size
from vramtui.core.wizard.wizard import Wizard

GOAL = 2


@dataclass
class Scenario:
    name: str
    profile: Profile
    blind: str  # "context" | "quant"


def blind_halving(profile: Profile, mode: str, limit: int = 8) -> tuple[int, str, Profile]:
    """Relaunches until it answers, halving one thing each time; (relaunches, final value, profile)."""
    relaunches = 0
    current = profile
    quants = ["f16", "q8_0", "q4_0"]
    while relaunches < limit:
        if mode == "context":
            context = int(current.params["context"]) // 2  # type: ignore[call-overload]
            if context < 256:
                return relaunches, "gave up", current
            current = current.with_param("context", context)
            value = str(context)
        elif mode == "share":
            share = round(float(current.params["mem_share"]) / 2, 3)  # type: ignore[arg-type]
            current = current.with_param("mem_share", share)
            value = str(share)
        elif mode == "kv_bytes":
            size = parse_size(str(current.params["kv_cache_memory"])) // 2
            if size < 16 * MIB:
                return relaunches, "gave up", current
            current = current.with_param("kv_cache_memory", f"{size // MIB}MiB")
            value = f"{size // MIB}MiB"
        else:
            now = next(q for q in quants if current.model.endswith(f"-{q}.gguf"))
            if now == quants[-1]:
                return relaunches, "gave up", current
            lower = quants[quants.index(now) + 1]
            current = current.with_changes(model=current.model.replace(f"-{now}.gguf", f"-{lower}.gguf"))
            value = lower
        relaunches += 1
        if run_check(current).ok:
            return relaunches, value, current
    return relaunches, "gave up", current


def llama_server_on_path() -> bool:
    """The built llama-server first on PATH (as `llama-server`, the name the backend launches)."""
    built = (
        os.environ.get("VRAMTUI_LLAMA_SERVER")
        or subprocess.run(
            [
                "bash",
                str(Path(__file__).resolve().parents[1] / "scripts" / "build_llama_server.sh"),
                "--path",
            ],
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    if not built or not Path(built).is_file():
        return False
    os.environ["PATH"] = f"{Path(built).parent}{os.pathsep}{os.environ['PATH']}"
    return True


def on_llama_server(scenarios: list[Scenario]) -> list[Scenario]:
    """The same scenarios on llama-server (its own spelling of mmap), when a binary is there."""
    if not llama_server_on_path():
        print("no llama-server built: its scenarios are left out", file=sys.stderr)
        return []
    out = []
    for scenario in scenarios:
        params = dict(scenario.profile.params)
        if "use_mmap" in params:
            params["mmap"] = params.pop("use_mmap")
        profile = scenario.profile.with_changes(backend="llama.cpp", params=params)
        out.append(Scenario(f"llama-server {scenario.name}", profile, scenario.blind))
    return out


def on_vllm(folder: Path) -> list[Scenario]:
    """vLLM's CPU build (scripts/install_vllm.sh's, or $VRAMTUI_VLLM) failing the ways it does on its own
    (no budget: its own memory checks refuse), one process for the engine and its worker."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "engines"))
    from vllm_capture import default_program
    from vllm_support import vllm_profile

    program = Path(default_program())
    if not program.is_file():
        print("no vLLM installed (scripts/install_vllm.sh): its scenarios are left out", file=sys.stderr)
        return []
    from vramtui.core.demo.tinyhf import write_tiny_hf

    model = write_tiny_hf(folder / "tiny-qwen2")

    def vllm(**params: object) -> Profile:
        return vllm_profile(program, model, folder, one_process=True, **params)

    return [
        Scenario("vllm: CPU share 0.99 of node 0 (free less)", vllm(kv_cache_memory=None, mem_share=0.99), "share"),
        Scenario("vllm: KV 1 MiB for max-model-len 4096", vllm(kv_cache_memory="1MiB", context=4096), "context"),
        Scenario("vllm: KV 200 GiB above the free RAM", vllm(kv_cache_memory="200GiB"), "kv_bytes"),
    ]  # fmt: skip


def main() -> int:
    folder = Path(tempfile.mkdtemp(prefix="vramtui-bench-wizard-"))
    print(f"generating models in {folder} ...", file=sys.stderr)
    tiny = write_tiny_gguf(folder / "tiny-f16.gguf", TinyModelSpec())
    wide = write_tiny_gguf(
        folder / "wide-f16.gguf", TinyModelSpec(n_layer=6, n_embd=768, n_head=12, n_head_kv=4)
    )
    spec = {"n_layer": 24, "n_embd": 1024, "n_head": 8, "n_head_kv": 8, "n_ff": 2816, "context_length": 4096}
    for dtype in ("f16", "q8_0", "q4_0"):
        write_tiny_gguf(folder / f"mid-{dtype}.gguf", TinyModelSpec(dtype=dtype, **spec))  # type: ignore[arg-type]

    def llama(model: Path, budget_mib: int, **params: object) -> Profile:
        return Profile(
            backend="llama-cpp-python",
            model=str(model),
            params=params,
            memory_budget=budget_mib * MIB,
            port=0,
        )

    python_server = [
        Scenario("demo: kv_cache, ctx 262144, 1500 MiB", llama(tiny, 1500, context=262144), "context"),
        Scenario("kv_cache, ctx 262144, 1000 MiB", llama(tiny, 1000, context=262144), "context"),
        Scenario("kv_cache, ctx 131072, 2500 MiB", llama(tiny, 2500, context=131072), "context"),
        Scenario("kv_cache, GQA 6x768, ctx 262144, 1200 MiB", llama(wide, 1200, context=262144), "context"),
        Scenario(
            "load_weights, f16 589 MiB, 700 MiB",
            llama(folder / "mid-f16.gguf", 700, context=512, use_mmap=False),
            "quant",
        ),
        Scenario(
            "kv_cache behind big weights, 800 MiB",
            llama(folder / "mid-f16.gguf", 800, context=512, use_mmap=False),
            "quant",
        ),
    ]
    scenarios = [*python_server, *on_llama_server(python_server), *on_vllm(folder)]
    header = (
        f"{'scenario':58} {'wizard':>7} {'blind':>6}  {'wizard changes':32} {'blind final':12} "
        f"{'ctx wizard/blind':>17} {'s':>5}"
    )
    print(header)
    print("-" * len(header))
    met = considered = 0
    for scenario in scenarios:
        start = time.monotonic()
        result = Wizard(scenario.profile, auto=True, record=False).run(max_steps=8)
        elapsed = time.monotonic() - start
        first = result.steps[0].observation
        if first is not None and first.works:
            # llama-server turns flash attention on by itself (auto), so a scenario built to fail on
            # llama-cpp-python's defaults may start: it has nothing to measure, and is not counted
            print(f"{scenario.name:58} first launch already works: nothing to fix (not counted)")
            continue
        considered += 1
        blind, blind_value, blind_profile = blind_halving(scenario.profile, scenario.blind)
        contexts = f"{result.final_profile.params.get('context')}/{blind_profile.params.get('context')}"
        changes = ", ".join(
            f"{s.proposal.param}={Path(str(s.proposal.to)).name if s.proposal.param == 'model' else s.proposal.to}"
            for s in result.steps
            if s.proposal is not None
        )
        wizard_text = str(result.relaunches) if result.success else f"{result.relaunches}!"
        met += result.success and result.relaunches <= GOAL
        print(
            f"{scenario.name:58} {wizard_text:>7} {blind:>6}  {changes[:32]:32} {blind_value:12} {contexts:>17} {elapsed:5.1f}"
        )
    print(f"\nwizard within {GOAL} relaunches after the first failure: {met}/{considered} failing scenarios")
    print("('!' after a count: the wizard did not bring it up)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
