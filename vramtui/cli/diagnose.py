"""`vramtui diagnose`: where a model server's startup stopped, the first error, why, and what to change."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from vramtui.core.errors import VramtuiError

HELP = "read a model server's log: the stage it reached, the first error, the failure class and the way out"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = (
        "exit status: 0 no failure, 1 a failure, 3 no error but no sign the server came up (still loading, "
        "or killed without a message), 2 input it cannot read. --json: before_model is true for a run stopped "
        "before any stage (a flag refused, a port held, no file at the path); its failure_stage is then the "
        "stage the engine's line belongs to"
    )
    parser.add_argument("file", metavar="FILE", help="the log file, or - for standard input")
    parser.add_argument(
        "--backend",
        metavar="B",
        help="llama.cpp, ik_llama.cpp, llama-cpp-python, vllm, transformers, ollama, tgi or sglang "
        "(default: detected)",
    )
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout, for scripts")
    parser.add_argument(
        "--quant",
        metavar="TYPE",
        help="the quantization you asked for (bnb-4bit, awq, gptq, fp8 ...): warn when the log never confirms it",
    )
    parser.add_argument(
        "--exit-code",
        type=int,
        metavar="N",
        help="the server's exit status, when known (137 with no error text: host OOM killer)",
    )


def run(args: argparse.Namespace) -> int:
    from vramtui.cli.common import settle
    from vramtui.core.logs.diagnose import LogDiagnoser, diagnose_stream, open_log
    from vramtui.core.logs.encoded import STDIN, peek
    from vramtui.core.logs.textclean import is_binary_format, looks_binary

    if args.backend:
        LogDiagnoser(args.backend)  # an unknown backend name fails here, in one line
    # an exit status is 0-255, or minus a signal's number as Python reports a process a signal ended
    if args.exit_code is not None and not -64 <= args.exit_code <= 255:
        raise VramtuiError(
            f"--exit-code: an exit status is 0 to 255 (or -N for signal N), not {args.exit_code}"
        )
    with open_log(args.file) as stream:  # one open, read once: a pipe has no second reading
        head = peek(stream)
        name = STDIN if args.file == "-" else args.file
        if is_binary_format(head) or (looks_binary(head) and b"\x00" * 64 in head):
            raise VramtuiError(f"{name} looks like binary data, not a text log")  # never read to its end
        diagnosis = diagnose_stream(
            stream,
            backend=args.backend,
            requested_quant=args.quant,
            exit_code=args.exit_code,
            gpu_absent=_own_run_without_gpu(head),
        )
    if not diagnosis.failed and looks_binary(head):
        raise VramtuiError(f"{name} looks like binary data, not a text log")
    if diagnosis.lines == 0:  # not "no failure": `diagnose log && deploy` must not pass an empty log
        # NUL bytes alone (a sparse or preallocated file, what a crash leaves) are no line (QA 19 F9)
        said = "holds only NUL bytes, no text" if head else "is empty"
        raise VramtuiError(f"{name} {said}: nothing to diagnose")
    if not diagnosis.failed and not head.strip():
        raise VramtuiError(f"{name} holds only blank lines: nothing to diagnose")
    foreign = diagnosis.unrecognised
    status = settle(INCOMPLETE_STATUS if foreign else exit_status(diagnosis))
    move = _wizard_move(diagnosis, head, args.file)
    if args.json:
        from vramtui.cli.common import print_json

        data = _json_view(diagnosis)
        data["first_move"] = move.to_dict() if move is not None else None
        print_json(data)
    else:
        sys.stdout.write(render_text(diagnosis, args.file))
        if foreign:
            from vramtui.core.logs.verdict import UNRECOGNISED_WORDS

            sys.stdout.write(f"{UNRECOGNISED_WORDS}\n")
        sys.stdout.flush()
    return status


def _own_run_without_gpu(head: bytes) -> bool:
    """A run vramtui launched (its log's launch line) on a machine where NVML finds no GPU: every buffer in
    host RAM is what it could do, no quiet failure (QA 38 F3: `check` said nothing of it, `diagnose` of the
    same run's log did). A log from elsewhere, or vramtui's on a GPU box, is read as it stands."""
    from vramtui.core.logs.ownlines import LAUNCH

    if LAUNCH.encode() not in head:
        return False
    from vramtui.core.memory.nvml import first_gpu_total_bytes

    return first_gpu_total_bytes() is None


def _wizard_move(diagnosis: Any, head: bytes, source: str) -> Any:
    """A failed run vramtui launched (its log's header names the command and the budget) and whose model is
    here: the wizard's first move, as `check` names it for that run, with the advice sized beside it; the
    diagnosis' advice then says it first (QA 36 F2: three tools, three answers). None otherwise."""
    if not diagnosis.failed or source == "-" or getattr(diagnosis, "starts", 1) > 1:
        return None
    from vramtui.core.attach.logprofile import run_profile
    from vramtui.core.wizard.wizard import advice_beside, first_move_for_log

    try:
        profile = run_profile(head.decode("utf-8", "replace"))
        if profile is None:
            return None
        move, sized = first_move_for_log(profile, diagnosis, source)
    except VramtuiError:
        return None  # the log's own advice stands
    if move is not None:
        sized = [f"{FIRST_MOVE_WORDS}{move.describe()}", *advice_beside(move, sized)]
    diagnosis.advice = sized
    return move


# How `check` and `diagnose` say the wizard's move (the app's log header says it with its key)
FIRST_MOVE_WORDS = "first move (the wizard's, as `vramtui wizard` makes it): "


# diagnose's exit status: 0 no failure, 1 a failure, 3 no error but no ready either (2 is bad input)
INCOMPLETE_STATUS = 3


def exit_status(diagnosis: Any) -> int:
    """0 when the log shows the server up with no failure; 1 a failure; 3 a log that stops before the
    server was ready without an error (still loading, or killed without a message): `diagnose && deploy`
    must not pass it."""
    if diagnosis.failed:
        return 1
    return INCOMPLETE_STATUS if getattr(diagnosis, "incomplete", False) else 0


def fit_view(diagnosis: Any) -> Any:
    """llama.cpp's fit projection beside vramtui's estimate (a FitComparison), or None."""
    from vramtui.core.wizard.fitcompare import compare_fit

    return compare_fit(diagnosis.engine_figures, diagnosis.backend)


def _json_view(diagnosis: Any) -> dict[str, Any]:
    data = diagnosis.to_dict()
    # exit 3 without `incomplete`: nothing in it is a server's line (QA 19 F9: the JSON did not say why)
    data["unrecognised"] = diagnosis.unrecognised
    # a flag refused, a port held, no file at the path: it stopped before any stage, and failure_stage keeps
    # the stage code the engine's line sits in (QA 32 D5: a script read "load_weights" for a refused flag)
    from vramtui.core.logs.advice import before_the_model

    data["before_model"] = bool(diagnosis.failed and before_the_model(diagnosis))
    fit = fit_view(diagnosis)
    data["fit"] = fit.to_dict() if fit is not None else None
    ordered = {
        key: data.pop(key)
        for key in (
            "backend",
            "stage",
            "failed",
            "incomplete",
            "failure_stage",
            "before_model",
            "failure",
            "first_error_line",
            "first_error_text",
            "evidence",
            "advice",
            "warnings",
            "engine_figures",
        )
    }
    ordered.update(data)
    return ordered


def _own(key: str) -> str:
    """A draft model's figure (draft_kv_buffer) is worded as the model's own (kv_buffer)."""
    from vramtui.core.logs.ruletypes import DRAFT_PREFIX

    return key.removeprefix(DRAFT_PREFIX)


def render_text(diagnosis: Any, source: str) -> str:
    from vramtui.core.logs.advice import START_UP_WORDS, before_the_model
    from vramtui.core.logs.rules import COUNT_FIGURES
    from vramtui.core.logs.ruletypes import CACHE_PART_MARK, DRAFT_MARK
    from vramtui.core.logs.shape import DEVICE_FIGURES, SHAPE_FIGURES

    name = "standard input" if source == "-" else source
    backend = diagnosis.backend or "backend not recognised"
    out = [f"{name}: {backend}, {diagnosis.lines} line{'' if diagnosis.lines == 1 else 's'}"]
    if getattr(diagnosis, "wrapped_at", None):  # QA 27 N1: a terminal's copy, cut at its width
        out[0] += f" (hard-wrapped at {diagnosis.wrapped_at} columns: read with its lines joined)"
    starts = getattr(diagnosis, "starts", 1)
    if starts > 1:  # a log appended to across restarts (QA 27 N7)
        out.append(
            f"The log holds {starts:,} server start-ups: this is the one from line {diagnosis.start_line or 1:,}."
        )
    out.append(diagnosis.summary)
    if diagnosis.failed and diagnosis.first_error_line:
        out.append(f"First error, line {diagnosis.first_error_line}:")
        out.append(f"  {diagnosis.first_error_text}")
    elif diagnosis.failed and diagnosis.first_error_text:
        out.append("First error: no line of the log states it")
        out.append(f"  {diagnosis.first_error_text}")
    if diagnosis.failed and before_the_model(diagnosis):
        out.append(f"Furthest stage reached: {START_UP_WORDS}")
    elif getattr(diagnosis, "stage_inferred", False) and diagnosis.stage == diagnosis.failure_stage:
        out.append(f"Furthest stage reached: unknown (no stage line; best guess {diagnosis.stage})")
    elif diagnosis.stage:
        out.append(f"Furthest stage reached: {diagnosis.stage}")
    extra_evidence = [line for line in diagnosis.evidence[1:]] if diagnosis.failed else diagnosis.evidence
    if extra_evidence:
        out.append("Evidence:")
        out.extend(f"  {line}" for line in extra_evidence)
    if diagnosis.advice:
        out.append("What to change:")
        out.extend(f"  {index}. {line}" for index, line in enumerate(diagnosis.advice, 1))
    if diagnosis.warnings:
        out.append("Quiet failures:")
        out.extend(f"  - {line}" for line in diagnosis.warnings)
    out.extend(_fit_and_shape_lines(diagnosis))
    figures = {
        key: value
        for key, value in diagnosis.engine_figures.items()
        if "." not in key
        and key not in (DRAFT_MARK, CACHE_PART_MARK)
        and _own(key) not in SHAPE_FIGURES
        and key not in DEVICE_FIGURES
        and not key.startswith("fit_breakdown")
    }  # the model's (and a draft's) shape, the devices and fit's breakdown have their own lines above
    if figures:
        from vramtui.tui.words import figure_words

        out.append("The engine's own figures:")
        # an allocation the engine retried and got past (QA 22: "the allocation that failed" beside "no error")
        recovered = not diagnosis.failed and any(
            line.startswith("recovered: ") for line in diagnosis.evidence
        )
        for key, value in figures.items():
            said = figure_words(key) + (" (then recovered)" if recovered and _own(key) in _REFUSAL else "")
            out.append(f"  {said}: {_figure_value(_own(key), value, COUNT_FIGURES)}")
    return "\n".join(out) + "\n"


_REFUSAL = frozenset({"oom_requested", "oom_device"})  # the figures of an allocation that was refused


def _figure_value(key: str, value: float, counts: frozenset[str]) -> str:
    """A figure as people read it: a switch on/off, a count with its thousands (not 2.8736e+06), bytes
    in binary units."""
    from vramtui.core.units import format_bytes

    if key == "flash_attn":
        return {0: "off", 1: "on"}.get(int(value), "auto")
    if key in counts or isinstance(value, float):
        return f"{int(value):,}" if float(value).is_integer() else f"{value:g}"
    if value == 0:
        return "0 as printed (rounded)"  # QA 10: vLLM's "0.0 GiB" read as "0 B"
    return format_bytes(value)


def _fit_and_shape_lines(diagnosis: Any) -> list[str]:
    from vramtui.core.logs.shape import devices_words, shape_words

    out = []
    from vramtui.core.logs.ruletypes import DRAFT_PREFIX

    figures = diagnosis.engine_figures
    shape = shape_words(figures)
    if shape:
        out.append(f"Model: {shape}")
    draft = {key.removeprefix(DRAFT_PREFIX): v for key, v in figures.items() if key.startswith(DRAFT_PREFIX)}
    draft_shape = shape_words(draft) if draft else None
    if draft_shape:
        out.append(f"Draft model: {draft_shape}")
    devices = devices_words(diagnosis.engine_figures)
    if devices:
        out.append(f"Devices: {devices}")
    fit = fit_view(diagnosis)
    if fit is not None:
        out.append("llama.cpp's fit projection beside vramtui's estimate:")
        out.extend(f"  {line}" for line in fit.lines())
    return out
