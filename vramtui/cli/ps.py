"""`vramtui ps`: every model server on this machine, who holds what on which card, and what fits next.

`vramtui ps [--json] [--watch S]` lists the servers (engine, model, settings read back from each command
line, memory per GPU and on the host, the bill by term and where it comes from) and each GPU's shares;
`vramtui ps --fits MODEL|PROFILE [estimate flags]` sizes one more model against what is free now.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from vramtui.core.errors import VramtuiError

HELP = (
    "every model server running here (llama-server, llama-cpp-python, vLLM, Ollama, transformers, SGLang, "
    "TGI): its settings, its memory per GPU and on the host, its bill by term; --fits: does one more fit"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from vramtui.cli import estimate

    estimate.add_arguments(parser)  # --fits sizes a model as `estimate` does, with the same flags
    # QA 29 Q12: estimate's epilog read as ps's own; plain ps lists and exits 0
    parser.epilog = (
        "the model flags above apply with --fits only. exit status: 0 listed (with --fits: the model fits "
        "now), 1 with --fits: it does not fit, 2 bad input"
    )
    parser.add_argument(
        "--fits",
        action="store_true",
        help="size MODEL (a model file, folder or config.json, or a launch profile .toml) against the "
        "memory that is free now on each card, not the card's total",
    )
    parser.add_argument(
        "--watch",
        metavar="S",
        type=float,
        help="refresh every S seconds (ctrl-c stops); with --json, one compact object a line (JSON Lines)",
    )


def run(args: argparse.Namespace) -> int:
    from vramtui.core.memory.sampling import NvmlSource

    if args.fits:
        return _fits(args)
    if args.model:
        raise VramtuiError(f"a model ({args.model}) is only read with --fits: vramtui ps --fits {args.model}")
    if args.watch is not None and not args.watch > 0:
        raise VramtuiError("--watch must be a positive number of seconds")
    nvml = NvmlSource()  # one NVML session and one bill per server, however long --watch runs
    bills: dict[int, Any] = {}
    try:
        return _show(args, lambda: _scan(nvml, bills))
    finally:
        nvml.close()


def _scan(nvml: Any, bills: dict[int, Any]) -> Any:
    from vramtui.core.attach.servers import bill_new, snapshot

    shot = snapshot(nvml, bills=False)
    bill_new(shot, bills)
    return shot


def _show(args: argparse.Namespace, scan: Callable[[], Any]) -> int:
    while True:
        shot = scan()
        if args.json and args.watch is not None:
            # JSON Lines: one compact object per refresh, each line a document (QA 39 F8: pretty objects
            # back to back read as neither one JSON document nor one per line)
            print(json.dumps(shot.to_dict(), separators=(",", ":"), default=str), flush=True)
        elif args.json:
            from vramtui.cli.common import print_json

            print_json(shot.to_dict())
        else:
            if args.watch is not None and sys.stdout.isatty():
                print("\033[2J\033[H", end="")
            print(render(shot))
        if args.watch is None:
            return 0
        try:
            time.sleep(args.watch)
        except KeyboardInterrupt:
            return 0


def _size(value: int | None) -> str:
    from vramtui.core.units import format_bytes

    return "—" if value is None else format_bytes(value, 1)


_SOURCES = {"log": "printed", "endpoints": "its endpoints", "estimate": "estimate"}


def render(shot: Any) -> str:
    """The servers, one per row, then each GPU's shares and the host."""
    servers = shot.servers
    lines = [f"{len(servers)} model server{'s' if len(servers) != 1 else ''} running here"]
    gpu_indexes = [gpu.index for gpu in shot.gpus]
    for server in servers:
        name = Path(server.model).name if server.model else "?"
        on_gpus = " ".join(f"GPU{i} {_size(server.gpu_bytes.get(i))}" for i in gpu_indexes) or "no GPU"
        where = f":{server.port}" if server.port else ""
        if server.container:
            name += f" (in {server.container})"
        lines.append(
            f"  {server.pid:>7}  {server.engine:16} {name[:40]:40} {where:7} {server.settings_line()}"
            f"\n           memory: {on_gpus}; host {_size(server.host_bytes)} ({len(server.pids)} process{'es' if len(server.pids) != 1 else ''})"
        )
        if server.bill is not None:
            lines.append(
                f"           bill ({_SOURCES.get(server.bill_source, server.bill_source)}): {_bill(server.bill)}"
            )
        lines.extend(f"           note: {note}" for note in server.notes)
    if servers:
        lines.append("  (* the engine's default: the command line does not say)")
    lines.extend(_gpu_lines(shot))
    lines.append(f"host: {_size(shot.host_total_bytes)}, {_size(shot.host_available_bytes)} available")
    return "\n".join(lines)


def _bill(bill: Any) -> str:
    from vramtui.core.memory.parts import HOST

    parts = [f"GPU{place} {bill.describe(place)}" for place in bill.devices()]
    if bill.total(HOST):
        parts.append(f"host {bill.describe(HOST)}")
    return "; ".join(parts)


def _gpu_lines(shot: Any) -> list[str]:
    if not shot.gpus:
        return [f"no GPU: {shot.gpu_status}" if shot.gpu_status else "no GPU"]
    lines = []
    for gpu in shot.gpus:
        held = [f"{_engine_of(shot, pid)} {pid} {_size(used)}" for pid, used in gpu.servers.items()]
        held += [f"{name} ({pid}) {_size(used)}" for pid, (name, used) in gpu.others.items()]
        lines.append(
            f"GPU {gpu.index} {gpu.name}: {_size(gpu.total_bytes)}; "
            + ("; ".join(held) + "; " if held else "")
            + f"free {_size(gpu.free_bytes)}"
        )
    return lines


def _engine_of(shot: Any, pid: int) -> str:
    return next((server.engine for server in shot.servers if server.pid == pid), "?")


# --- does one more fit? ----------------------------------------------------------------------------------


def _fits(args: argparse.Namespace) -> int:
    """Size the model against each card's free memory now (no GPU: the host's available memory)."""
    from vramtui.core.attach.servers import bill_new, snapshot
    from vramtui.core.estimate.fitnow import fits_now

    if not args.model:
        raise VramtuiError("--fits needs a model (a file, folder or config.json) or a launch profile")
    if args.gpu_mem:  # QA 39 F11: ignored without a word, where `estimate` honours it
        print(
            f"vramtui: --gpu-mem {args.gpu_mem} is not used here: --fits sizes against what is free now on "
            "each card of this machine (the host's available memory where it has none); `vramtui estimate "
            "--gpu-mem` sizes a card you name",
            file=sys.stderr,
        )
    info, settings, budget, engine_bytes = _sized(args)
    shot = snapshot(bills=False)
    bill_new(shot, {})  # the servers running now are said as `ps` says them (QA 25 P1: bill and log null)
    answers = fits_now(info, settings, shot, budget, engine_bytes, calibrate=not args.no_calibrate)
    if args.json:
        from vramtui.cli.common import print_json

        print_json({"fits": [answer.to_dict() for answer in answers], "now": shot.to_dict()})
    else:
        for answer in answers:
            print(answer.describe())
    return 0 if any(answer.fits for answer in answers) else 1


def _sized(args: argparse.Namespace) -> tuple[Any, Any, int | None, int]:
    """The model, its settings, its budget and the engine's own share of it: a profile's (its backend,
    parameters, memory_budget and the engine's idle footprint, as check and the wizard take it), else
    the estimate flags'."""
    from vramtui.cli import estimate

    if str(args.model).endswith(".toml"):
        from vramtui.core.estimate.estimator import Settings
        from vramtui.core.estimate.modelinfo import load_model_info
        from vramtui.core.launch.footprint import engine_share
        from vramtui.core.launch.profile import load_profile

        profile = load_profile(args.model)
        info = load_model_info(profile.model)
        settings = Settings.from_params(profile.params, backend=profile.backend.name)
        # as estimate takes it: none where the bill's runtime row holds the engine (QA 29 Q5: vLLM's 256 MiB
        # taken off beside its 1.6 GiB runtime row)
        engine_bytes = engine_share(profile) if profile.memory_budget else 0
        return info, settings, profile.memory_budget, engine_bytes
    budget, engine_bytes = None, 0
    if args.memory_budget:  # as a profile's memory_budget caps it (QA 37 F8: the flag was dropped)
        profile, engine_bytes, _ = estimate.budget_and_engine(args)
        budget = profile.memory_budget
    if not args.gpu_mem:
        args.gpu_mem = "24GiB"  # replaced by each card's free memory
    return (*estimate.build(args), budget, engine_bytes)
