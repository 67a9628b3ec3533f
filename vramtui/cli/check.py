"""`vramtui check PROFILE [--json]`: launch, wait for ready, send the smallest request, stop, report."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

HELP = (
    "launch a profile, wait for ready, send the smallest request, stop, and report (exit 0 when it answered)"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "profile", metavar="PROFILE", help="launch profile (TOML), or a name in the config dir"
    )
    parser.add_argument("--json", action="store_true", help="print the report as one JSON object")
    parser.add_argument(
        "--timeout", type=float, metavar="S", help="seconds to wait for ready (default: profile, else 120)"
    )
    parser.add_argument(
        "--log-dir", metavar="DIR", help="where the run's log file goes (default: the user data dir)"
    )
    parser.add_argument(
        "--show-log", action="store_true", help="echo the server's output to stderr while it runs"
    )
    parser.add_argument(
        "--budget",
        metavar="SIZE",
        help="the memory budget to run under (e.g. 600MiB), in place of the profile's [limits] memory_budget",
    )
    parser.add_argument(
        "--replay-request",
        metavar="JSON",
        help="after the smallest request, send this saved chat request (the one that failed) again",
    )


def run(args: argparse.Namespace) -> int:
    from vramtui.cli.common import print_json
    from vramtui.core.errors import VramtuiError
    from vramtui.core.launch.launcher import (
        budget_below_engine,
        build_command,
        machine_share,
        on_cpu_ignored,
        pin_port,
        run_check,
    )
    from vramtui.core.launch.profile import check_runnable, load_launch_profile
    from vramtui.core.launch.smoke import load_saved_request

    if args.timeout is not None and not 0 < args.timeout < float("inf"):
        raise VramtuiError(f"--timeout must be a positive number of seconds, not {args.timeout:g}")
    profile = pin_port(load_launch_profile(args.profile, args.budget))
    check_runnable(profile)
    replay = load_saved_request(args.replay_request) if args.replay_request else None
    plan = build_command(profile)
    # The exact command before launch; stderr in --json mode so stdout stays one JSON object.
    info = sys.stderr if args.json else sys.stdout
    sample_source = _gpu_source()
    # a budget the engine cannot start under is refused as the other settings it refuses are: one line, exit
    # 2, before any command is printed as if launched (QA 35 F5)
    if below := budget_below_engine(profile, sample_source):
        if sample_source is not None:
            sample_source.close()
        raise VramtuiError(below)
    # said before the launch, not after it (QA 14: vLLM's CPU build took 92% of the machine first)
    early = [*machine_share(profile, sample_source), *on_cpu_ignored(profile, sample_source)]
    for warning in [*profile.warnings, *early]:
        print(f"warning: {warning}", file=info)
    print(f"$ {plan.command_line()}", file=info)
    for note in plan.notes:
        print(f"not passed: {note}", file=info)
    info.flush()

    on_line = None
    if args.show_log:

        def on_line(text: str) -> None:
            print(f"  | {text}", file=sys.stderr, flush=True)

    result = run_check(
        profile,
        ready_timeout_s=args.timeout,
        on_line=on_line,
        log_dir=args.log_dir,
        sample_source=sample_source,
        replay=replay,
    )
    if sample_source is not None:
        sample_source.close()

    if result.ok and (note := _long_request_note(profile)):
        result.warnings.append(note)
    move, advice = _first_move(profile, result)
    if args.json:
        data, fit = result.to_dict(), _fit(result)
        data["fit"] = fit.to_dict() if fit is not None else None
        data["first_move"] = move.to_dict() if move is not None else None
        print_json(data)
    else:
        _print_report(result, move, advice, early=early)
    return 0 if result.ok else 1


def _first_move(profile, result):  # type: ignore[no-untyped-def]
    """The change `vramtui wizard` (and `wizard --attach`) would make first after this run (one source),
    and the run's advice sized by the same arithmetic."""
    lines = list(getattr(result.diagnosis, "advice", None) or [])
    if result.ok:
        return None, lines
    from vramtui.core.wizard.wizard import first_move_and_advice

    return first_move_and_advice(profile, result, advice=lines, with_stop=True)


def _long_request_note(profile):  # type: ignore[no-untyped-def]
    """A run that answered under a budget its whole context would not fit (a KV cache that grows per
    request): said beside "runs", as the wizard says it (one source)."""
    if not profile.backend.kv_grows_per_request:
        return None  # no budget model to build (it may measure an engine binary's footprint)
    from vramtui.core.wizard.budget import MemoryModel
    from vramtui.core.wizard.reach import long_request_note

    return long_request_note(MemoryModel(profile), profile)


def _gpu_source():  # type: ignore[no-untyped-def]
    """NVML when a driver is there (per-process GPU bytes, the GPU budget); None on a CPU box."""
    try:
        from vramtui.core.memory.sampling import NvmlSource
    except ImportError:
        return None
    source = NvmlSource()
    return source if source.available else None


def _fit(result):  # type: ignore[no-untyped-def]
    """llama.cpp's fit projection in the run's log beside vramtui's estimate, or None."""
    from vramtui.cli.diagnose import fit_view

    return fit_view(result.diagnosis) if result.diagnosis is not None else None


_QUIET_SHOWN = 3


def _budget_words(result) -> str:  # type: ignore[no-untyped-def]
    """The budget the run was under and what its peak left of it (QA 34 L9: only --json said it)."""
    budget = getattr(result, "memory_budget_mib", None)
    if not budget:
        return ""
    where = {"host": " (the host's address space)", "gpu": " (the GPU)"}.get(result.budget_mode or "", "")
    left = f", {budget - result.peak_mib:.0f} MiB left at the peak" if result.peak_mib is not None else ""
    return f"; budget {budget:.0f} MiB{where}{left}"


def _memory_words(result) -> str | None:  # type: ignore[no-untyped-def]
    """What the samples say of the run's memory: its peak, one sample, or none."""
    if result.peak_mib is not None and len(result.samples) < 2:
        # one sample, taken as it started: not its peak (QA 22: "peak 3 MiB" for a server that had loaded
        # 20 MiB of weights before it failed)
        return f"sampled once ({result.peak_mib:.0f} MiB), then the process ended: its peak is not known"
    if result.peak_mib is not None:
        return f"peak {result.peak_mib:.0f} MiB, resident {result.resident_mib:.0f} MiB"
    return "not measured (the process ended before a sample could read it)" if result.command else None


def _print_report(result, move, advice: list[str], early: Sequence[str] = ()) -> None:  # type: ignore[no-untyped-def]
    from vramtui.core.logs.advice import CAUSE_WORDS, START_UP_WORDS, before_the_model
    from vramtui.tui.words import failure_words, in_words, stage_words

    state = "ready" if result.ready else "NOT ready"
    print(f"{state}: {in_words(result.message)}")
    diagnosis = result.diagnosis
    started = diagnosis is not None and diagnosis.failed and before_the_model(diagnosis)
    # a run that died before the model was read reached no stage of its own (QA 20 D4): as diagnose says it
    reached = START_UP_WORDS if started else stage_words(result.stage) if result.stage else "-"
    print(f"  stage reached: {reached}")
    if result.failure:
        where = f" at {stage_words(result.failure_stage)}" if result.failure_stage else ""
        if started:
            where = f" at {START_UP_WORDS}"
        # what the log says failed, where it is more than the class (QA 34 L6: "host out of memory at kv cache"
        # for a compute buffer that could not be allocated, after the KV cache was)
        what = CAUSE_WORDS.get(diagnosis.cause or "") if diagnosis is not None and diagnosis.failed else None
        print(f"  failure: {failure_words(result.failure)}{where}{f': {what}' if what else ''}")
        if diagnosis is not None and diagnosis.failed and diagnosis.first_error_text:
            # the advice refers to it ("read the first error line above"): it is shown, as diagnose does
            number = f" (line {diagnosis.first_error_line} of the log)" if diagnosis.first_error_line else ""
            from vramtui.core.logs.analysis import clip_words
            from vramtui.core.logs.textclean import said_words

            print(f"  first error{number}: {clip_words(said_words(diagnosis.first_error_text), 200)}")
    if move is not None:
        print(f"  first move (the wizard's): {in_words(move.describe())}")
    if result.diagnosis is not None:
        # QA 5: beside a first move, the log's own advice read as a second answer: it is the other ways
        said = "other ways, from the log" if move is not None else "advice"
        from vramtui.core.wizard.wizard import advice_beside

        for line in advice_beside(move, advice)[: 2 if move is not None else 3]:
            print(f"  {said}: {in_words(line)}")
    if result.smoke is not None:
        smoke = result.smoke
        status = f"HTTP {smoke.status if smoke.status is not None else '-'}: "
        said = (
            smoke.meaning if smoke.meaning.startswith("HTTP ") else status + smoke.meaning
        )  # QA 5: said twice
        print(f"  smallest request: {said}")
        if smoke.text:
            from vramtui.core.attach.endpoints import printable

            # quoted, with what a terminal would not show escaped (QA 8, 9: a raw U+FFFD)
            print(f'  answer: "{printable(smoke.text[:80])}"')
    if result.replay is not None:
        replayed = result.replay
        status = replayed.status if replayed.status is not None else "-"
        print(f"  saved request: HTTP {status}: {replayed.meaning}")
    if result.load_time_s is not None:
        print(f"  load time: {result.load_time_s:.2f} s")
    if result.ttft_s is not None:
        rate = f", {result.tokens_per_s:.1f} tokens/s" if result.tokens_per_s else ""
        print(f"  first token: {result.ttft_s * 1000:.0f} ms{rate}")
    said = _memory_words(result)
    if said:
        print(f"  memory: {said}{_budget_words(result)}")
    if result.bill is not None:
        print("  bill (estimate, what the engine printed, what it held):")
        for line in result.bill.lines():
            print(f"    {line}")
    fit = _fit(result)
    for line in fit.lines() if fit is not None else []:
        print(f"  {line.strip()}")
    for warning in result.warnings:
        if warning not in early:  # said before the launch
            print(f"  warning: {warning}")
    # what the log says runs wrong though it runs (layers on the CPU, disk offload, a capped context), as
    # `diagnose` lists it (QA 11: a disk offload at 15 tokens/s was said by diagnose and not by check)
    quiet = list(getattr(result.diagnosis, "warnings", None) or [])
    for warning in quiet[:_QUIET_SHOWN]:
        print(f"  quiet failure: {in_words(warning)}")
    if len(quiet) > _QUIET_SHOWN:
        print(f"  ({len(quiet) - _QUIET_SHOWN} more: vramtui diagnose LOG)")
    if result.log_file:
        print(f"  log: {result.log_file}")
