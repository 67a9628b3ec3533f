"""`vramtui wizard PROFILE|LOG --goal on-gpu`: the fastest setup that keeps every layer on the GPU.

From a saved log (a run on the user's GPU), or from one launch of the profile: when layers or experts
ended on the host ("runs but slow"), the one change the estimator says frees enough device memory for
all of them (core/wizard/ongpu.py). It proposes; on a profile, `--auto` applies it, relaunches, checks
that every layer is on the GPU now and compares the tokens per second (core/wizard/ongpu_apply.py), and
records both launches as a wizard session (`--save` keeps the changed profile when it works).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

_LOG_SUFFIXES = (".log", ".txt", ".out")


def _plan_from_log(path: str, args: argparse.Namespace) -> tuple[Any, Any]:
    from vramtui.core.estimate.modelinfo import load_model_info
    from vramtui.core.logs.diagnose import diagnose_file
    from vramtui.core.wizard.ongpu import (
        plan_from_figures,
        plan_on_gpu,
        settings_from_figures,
        shape_of,
    )

    diagnosis = diagnose_file(path)
    figures = diagnosis.engine_figures
    device = _gpu_mem(args.gpu_mem) if args.gpu_mem else None
    backend = diagnosis.backend or "llama.cpp"  # a log that names no engine: llama.cpp prints these lines
    info = load_model_info(args.model) if args.model else None
    if info is not None and info.weights_source == "gguf":  # the file the run loaded: its own tensors
        plan = plan_on_gpu(info, settings_from_figures(figures, backend, device))
        plan.layers_on_gpu = int(figures["layers_offloaded"]) if figures.get("layers_offloaded") else None
        plan.layers_total = int(figures["layers_total"]) if figures.get("layers_total") else None
    elif info is not None:  # a config.json: its shape, and the weights the log's buffers show
        plan = plan_from_figures(figures, backend, device, shape_of(info))
    else:
        given = {
            "layers": args.layers,
            "hidden": args.hidden,
            "heads": args.heads,
            "kv_heads": args.kv_heads,
            "head_dim_k": args.head_dim,
        }
        plan = plan_from_figures(figures, backend, device, {k: v for k, v in given.items() if v})
    return diagnosis, plan


def _plan_from_profile(args: argparse.Namespace) -> tuple[Any, Any, Any, Any]:
    from vramtui.core.estimate.estimator import Settings
    from vramtui.core.estimate.modelinfo import load_model_info
    from vramtui.core.launch.launcher import pin_port, run_check
    from vramtui.core.launch.profile import load_launch_profile
    from vramtui.core.wizard.ongpu import plan_on_gpu

    given = _gpu_mem(args.gpu_mem) if args.gpu_mem else None  # a bad size before any launch
    profile = pin_port(load_launch_profile(args.profile, getattr(args, "budget", None)))
    from vramtui.cli.wizard import refuse_saving_over_the_source

    refuse_saving_over_the_source(args, profile)
    _say_when_no_gpu(given)
    result = run_check(profile)
    diagnosis = result.diagnosis
    figures = diagnosis.engine_figures if diagnosis is not None else {}
    free = figures.get("device_free.CUDA0") or figures.get("device_free")
    device = given or (int(free) if free else None)
    if device is None:
        from vramtui.core.errors import VramtuiError

        raise VramtuiError("the run's log does not show the card's memory: give --gpu-mem")
    settings = Settings.from_params(profile.params, profile.backend.name, device_bytes=device)
    return diagnosis, plan_on_gpu(load_model_info(args.model or profile.model), settings), profile, result


def run_on_gpu(args: argparse.Namespace) -> int:
    from vramtui.cli.common import print_json
    from vramtui.core.wizard.ongpu import host_placement

    is_log = Path(args.profile).suffix.lower() in _LOG_SUFFIXES
    if is_log:
        diagnosis, plan = _plan_from_log(args.profile, args)
        if args.auto:
            import sys

            print(
                "note: a saved log is planned only; --auto applies the change to a PROFILE", file=sys.stderr
            )
    else:
        diagnosis, plan, profile, first = _plan_from_profile(args)
        if args.auto:
            return _apply(args, plan, profile, first, host_placement(diagnosis))
    slow = host_placement(diagnosis)
    if args.json:
        print_json({**plan.to_dict(), "runs_but_slow": slow})
    else:
        for line in slow or ["the log shows no layer or expert on the host CPU"]:
            print(line)
        for line in plan.lines():
            print(line)
        if plan.chosen is not None:
            print(f"proposed: {plan.chosen.describe()}")
    return 0 if plan.chosen is not None or plan.fits_as_is else 1


def _apply(args: argparse.Namespace, plan: Any, profile: Any, first: Any, slow: list[str]) -> int:
    """--auto on a profile: the one change applied, relaunched, verified, recorded."""
    import sys

    from vramtui.cli.common import print_json
    from vramtui.core.wizard.ongpu_apply import apply_on_gpu

    out = sys.stderr if args.json else sys.stdout
    for line in [*slow, *plan.lines()]:
        print(line, file=out)
    outcome = apply_on_gpu(profile, plan, first, record_path=getattr(args, "record", None))
    if outcome.changes:
        print(f"applied: {', '.join(f'{k} = {v}' for k, v in outcome.changes.items())}", file=out)
    for note in outcome.notes:
        print(f"  {note}", file=out)
    save = getattr(args, "save", None)
    if save and outcome.success and outcome.profile is not None:
        outcome.profile.with_changes(port=0).save(save)
    if args.json:
        print_json({**plan.to_dict(), "runs_but_slow": slow, "applied": outcome.to_dict()})
    else:
        verdict = "not reached"
        if outcome.success:
            verdict = "every layer on the GPU" if outcome.all_on_device else "the change works"
            if outcome.nothing_to_change:
                verdict = "nothing to change"
        print(f"{verdict}; record: {outcome.record_path}")
    return 0 if outcome.success else 1


def _say_when_no_gpu(given: int | None) -> None:
    """QA 39 F12: on a machine with no GPU the launch can show no layer on a card; say so before it."""
    import sys

    from vramtui.core.memory.nvml import first_gpu_total_bytes

    if given is not None and first_gpu_total_bytes() is None:
        print(
            "note: no GPU on this machine: the card is the --gpu-mem given, and where the layers land shows "
            "only in a run on the card (`vramtui wizard LOG --goal on-gpu` reads such a run's log)",
            file=sys.stderr,
        )


def _gpu_mem(text: str) -> int:
    """--gpu-mem as a size; a bad one is an error that names the flag."""
    from vramtui.core.errors import VramtuiError
    from vramtui.core.units import parse_size_with_unit

    try:
        return parse_size_with_unit(text)
    except VramtuiError as error:
        raise VramtuiError(f"--gpu-mem: {error}") from None
