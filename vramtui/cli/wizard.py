"""`vramtui wizard PROFILE [--auto] [--max-steps N] [--json]`: the guided downgrade, without the TUI.

Launch, diagnose, propose one change, relaunch, verify, record — until the profile runs. Without
`--auto` each proposal is asked on the terminal (y / n / edit); with no terminal to ask and no `--auto`,
the proposal is printed and the wizard stops. PROFILE may also be a wizard record (.jsonl): the
finished session is reopened and shown (or exported with --export).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

HELP = "guided downgrade: one change at a time, relaunch, verify, record — until the profile runs"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "profile",
        metavar="PROFILE",
        nargs="?",
        help="launch profile (TOML) or a name in the config dir; a wizard record (.jsonl) reopens that "
        "session; none with --attach",
    )
    parser.add_argument("--auto", action="store_true", help="apply every proposal without asking")
    parser.add_argument(
        "--max-steps", type=int, default=8, metavar="N", help="at most N changes (default: 8)"
    )
    parser.add_argument("--json", action="store_true", help="print the steps and the final profile as JSON")
    parser.add_argument(
        "--record",
        metavar="FILE",
        help="write the step record here (default: $VRAMTUI_DATA_DIR/wizard, else the user data dir's)",
    )
    parser.add_argument(
        "--export", metavar="FILE", help="also write the record as Markdown (.md) or CSV (.csv)"
    )
    parser.add_argument("--save", metavar="FILE", help="save the final profile (TOML) here when it runs")
    parser.add_argument(
        "--force",
        action="store_true",
        help="let --save replace a file that is there, the profile the wizard reads included (its comments are not kept)",
    )
    parser.add_argument(
        "--stress",
        type=int,
        default=0,
        metavar="N",
        help="once it runs: N requests of the longest expected input while sampling (flags a rising floor)",
    )
    parser.add_argument(
        "--stress-tokens",
        type=int,
        metavar="T",
        help="input length of each stress request (default: the context)",
    )
    parser.add_argument(
        "--replay",
        metavar="JSON",
        help="a saved chat request (the long one that failed): every launch replays it after the smallest one",
    )
    parser.add_argument(
        "--margin",
        type=float,
        default=0.9,
        metavar="F",
        help="share of the budget a proposal may fill (default 0.9)",
    )
    from vramtui.cli import wizard_attach

    wizard_attach.add_arguments(parser)
    parser.add_argument(
        "--goal",
        choices=("start", "on-gpu"),
        default="start",
        help="start: until it runs (default); on-gpu: the fastest setup that keeps every layer on the GPU "
        "(PROFILE may then be a saved log)",
    )
    parser.add_argument(
        "--gpu-mem", metavar="SIZE", help="on-gpu: the card's memory (default: the free memory the log shows)"
    )
    parser.add_argument(
        "--model",
        metavar="PATH",
        help="on-gpu: the model (GGUF, config.json) when the log does not print its shape",
    )
    for flag, what in (
        ("--layers", "layer count"),
        ("--hidden", "hidden size"),
        ("--heads", "attention heads"),
        ("--kv-heads", "KV heads"),
        ("--head-dim", "head size"),
    ):
        parser.add_argument(
            flag, type=int, metavar="N", help=f"on-gpu: the model's {what}, when the log lacks them"
        )


def _ask(proposal: Any, out: Any, wizard: Any) -> Any:
    """y / n / skip / edit on the terminal; returns the proposal to apply, SKIP, or None (stop)."""
    from vramtui.core.errors import VramtuiError
    from vramtui.core.wizard.edit import edited_proposal
    from vramtui.core.wizard.wizard import SKIP

    print(f"\nproposed: {proposal.describe()}", file=out)
    while True:
        print(
            f"apply it? [y]es / [n]o, stop / [s]kip: keep {proposal.param} and propose another / "
            "[e]dit the value: ",
            end="",
            file=out,
            flush=True,
        )
        answer = sys.stdin.readline()
        if not answer:  # end of input
            return None
        answer = answer.strip().lower()
        if answer in ("y", "yes", ""):
            return proposal
        if answer in ("n", "no", "q"):
            return None
        if answer in ("s", "skip", "k"):
            return SKIP
        typed = answer
        if answer in ("e", "edit"):
            print(f"new value for {proposal.param} (now {proposal.from_}): ", end="", file=out, flush=True)
            typed = sys.stdin.readline()
            if not typed.strip():
                continue
        try:  # a value typed at the question itself is an edit too (QA 31 W12: it was asked again)
            edited = edited_proposal(wizard.profile, proposal, typed)
        except VramtuiError as error:  # not a value the engine runs, or the one it has
            said = error if typed is not answer else f"answer y, n, s, or e to type a new value ({error})"
            print(f"vramtui: {said}", file=out)
            continue
        if _still_wanted(edited, out, wizard):
            return edited


def _still_wanted(edited: Any, out: Any, wizard: Any) -> bool:
    """An edited value the estimate says will not fit is launched only on a second yes (QA 5: f32 was
    relaunched where 2097 MiB were needed and 877 usable)."""
    warning = wizard.fit_warning(edited)
    if warning is None:
        return True
    print(f"warning: {warning}. Relaunch anyway? [y]es / [n]o: ", end="", file=out, flush=True)
    return sys.stdin.readline().strip().lower() in ("y", "yes")


def step_status(data: dict[str, Any]) -> str:
    """How a step ended, in words (the record keeps the codes): `failed at kv cache: host out of
    memory`, `got further (stopped at kv cache: ...)`, `runs and answers`."""
    from vramtui.tui.words import failure_words, outcome_words, stage_words

    outcome = data["outcome"]
    if outcome == "works":
        return "runs and answers"
    from vramtui.core.logs.advice import BEFORE_THE_MODEL, START_UP_WORDS

    where = data.get("failure_stage") or data.get("stage")
    failure = data.get("failure")
    why = f"{stage_words(where)}: {failure_words(failure)}" if where and failure else stage_words(where)
    if data.get("cause") in BEFORE_THE_MODEL:  # as check and diagnose say it (QA 24 F10: "at load weights")
        where, why = START_UP_WORDS, f"{START_UP_WORDS}: {failure_words(failure)}"
    if data.get("over_budget"):  # an attached server, judged by its peak
        return f"{outcome_words(outcome)} (it answers, but over the budget)"
    if outcome == "first_run":
        if _not_launched(data):  # refused before any process started (QA 36: "failed at launch: budget ...")
            return f"{failure_words(failure)} (nothing was launched)"
        return f"failed at {why}" if where else "failed"
    from vramtui.core.wizard.verify import outcome_shade

    said = outcome_words(outcome_shade(outcome, data.get("verification")))
    return f"{said} (stopped at {why})" if where else said


def _not_launched(data: dict[str, Any]) -> bool:
    """The step's launch was refused before a process started: its stage is the launch and no log exists."""
    return data.get("failure_stage") == "launch" and not data.get("log_file")


def _print_step(step: Any, out: Any) -> None:
    from vramtui.core.logs.analysis import clip_words
    from vramtui.core.logs.textclean import said_words
    from vramtui.core.units import mib_figure
    from vramtui.core.wizard.proposal import value_word
    from vramtui.tui.words import figure_words, in_words, outcome_words

    data = step.to_dict()
    figures = data.get("engine_figures_mib") or {}
    figure_text = ", ".join(f"{figure_words(k)} {mib_figure(v)}" for k, v in figures.items())
    if data["step"] == 0:
        head = "before launch" if data["outcome"] == "refused" or _not_launched(data) else "first launch"
    else:
        knob = step.proposal.knob if step.proposal is not None and step.proposal.knob else None
        said = f"{data['param']} ({knob})" if knob else data["param"]  # the engine's own flag (QA 37 F13)
        head = f"step {data['step']}: {said} {value_word(data['from'])} → {value_word(data['to'])}"
    status = step_status(data)
    obs = step.observation
    if data["outcome"] != "works" and obs is not None and obs.runs_over_budget:
        status = (
            f"{outcome_words(data['outcome'])} ({obs.over_budget_text()})"  # attached: judged by its peak
        )
    print(f"{head}: {status}" + (f" [{figure_text} MiB]" if figure_text else ""), file=out)
    if data["outcome"] not in ("works", "runs") and data.get("first_error"):
        # the advice may say to read it ("read the first error line"): it is shown, as check shows it
        print(f"    first error: {clip_words(said_words(str(data['first_error'])), 200)}", file=out)
    for note in data.get("verification") or []:
        print(f"    {in_words(note)}", file=out)
    fit = step.fit()
    lines = fit.lines() if fit is not None else []
    if lines and step.proposal is not None and step.proposal.predicted_mib is not None:
        # two vramtui figures for one step read as a contradiction (QA 18 F5): this one is sized from the
        # shape the log printed, for llama.cpp's own projection, not the step's prediction from the profile
        print("    beside llama.cpp's fit (vramtui sized from the shape the log printed):", file=out)
    for line in lines:
        print(f"    {line.strip()}", file=out)
    if data.get("log_file"):
        print(f"    log: {data['log_file']}", file=out)


def show_session(path: str, as_json: bool, export: str | None) -> int:
    from vramtui.cli.common import print_json
    from vramtui.core.wizard.steprecord import open_session

    _check_export(export)
    session = open_session(path)
    if export:
        _export(session, export)
    if as_json:
        print_json(session.to_dict())
    else:
        sys.stdout.write(_markdown(session))
    return 0 if session.success else 1


def _check_run_flags(args: argparse.Namespace) -> None:
    """Numbers and an export target that make no sense are one line before anything is launched (they
    had run the whole wizard first: `--max-steps -3`, `--stress -1`, an export to a missing folder)."""

    from vramtui.core.errors import VramtuiError

    if getattr(args, "max_steps", 1) < 1:
        raise VramtuiError(f"--max-steps: at least 1, not {args.max_steps}")
    if (getattr(args, "stress", 0) or 0) < 0:
        raise VramtuiError(f"--stress: a number of requests, not {args.stress}")
    tokens = getattr(args, "stress_tokens", None)
    if tokens is not None and tokens < 1:
        raise VramtuiError(f"--stress-tokens: at least 1 token, not {tokens}")
    _check_export(getattr(args, "export", None))
    _check_target("--save", getattr(args, "save", None))


def _check_target(flag: str, name: str | None) -> None:
    """A file to write at the end is a file in a folder that is there (QA: `--save FOLDER` ran the whole
    wizard, then stopped with an internal error, IsADirectoryError)."""
    from pathlib import Path

    from vramtui.core.errors import VramtuiError

    if not name:
        return
    target = Path(name).expanduser()
    if target.is_dir():
        raise VramtuiError(f"{flag}: {name} is a folder; give a file name in it")
    if not target.parent.is_dir():
        raise VramtuiError(f"{flag}: no folder {target.parent} to write {target.name} in")


def _check_export(export: str | None) -> None:
    """An export target is a .md or .csv file in a folder that is there (a session shown again too)."""
    from pathlib import Path

    from vramtui.core.errors import VramtuiError

    if export:
        target = Path(export)
        if target.suffix.lower() not in (".md", ".csv"):
            raise VramtuiError(f"--export: {export} must end in .md (Markdown) or .csv")
        _check_target("--export", export)


def _markdown(session: Any) -> str:
    """The record as a Markdown report in the screen's words (the CSV keeps the codes, for scripts)."""
    from vramtui.core.wizard.steprecord import to_markdown
    from vramtui.tui.words import record_words

    backend = (session.header.get("profile") or {}).get("backend")
    return to_markdown(session, record_words(backend))


def _export(session: Any, target: str) -> None:
    from pathlib import Path

    from vramtui.core.errors import VramtuiError
    from vramtui.core.wizard.steprecord import to_csv

    text = to_csv(session) if target.lower().endswith(".csv") else _markdown(session)
    try:
        Path(target).write_text(text, encoding="utf-8")
    except OSError as error:
        raise VramtuiError(f"cannot write {target}: {error.strerror or error}") from None


def report(
    result: Any, args: argparse.Namespace, stress: Any | None, extra: dict[str, Any] | None = None
) -> int:
    from vramtui.cli.common import print_json

    if args.json:
        data = result.to_dict()
        if stress is not None:
            data["stress"] = stress.to_dict()
        data.update(extra or {})
        print_json(data)
    else:
        from vramtui.tui.words import in_words

        final = result.final_profile
        verdict = "it runs" if result.success else "not running yet"
        last = result.steps[-1].observation if result.steps else None
        if not result.success and last is not None and last.runs_over_budget:
            verdict = "it answers, still over the budget"  # an attached server: up, judged by its peak
        print(f"\n{verdict}: {in_words(result.reason)}")
        from vramtui.core.wizard.proposal import value_word

        params = ", ".join(f"{name} = {value_word(value)}" for name, value in sorted(final.params.items()))
        print(
            f"final parameters: {params or 'the engine defaults'}"
            + (f"; model {final.model}" if final.model else "")
        )
        for line in result.advice:
            print(f"advice: {in_words(line)}")
        if result.pending is not None:
            print(f"next proposal (not applied): {result.pending.describe()}")
        if stress is not None:
            print(f"stress check: {stress.verdict}")
        elif result.success:
            print(
                "next: the stress check: run this command again with --stress 5 (five requests of the longest "
                "input while memory is sampled; a floor that climbs is flagged)"
            )
        if result.record_path:
            print(f"record: {result.record_path}")
    if not result.success:
        return 1
    return 0 if stress is None or stress.ok else 1


def run(args: argparse.Namespace) -> int:
    from vramtui.core.errors import VramtuiError

    if getattr(args, "attach", None):
        if args.profile:
            raise VramtuiError("give a PROFILE or --attach TARGET, not both")
        from vramtui.cli.wizard_attach import run_attached

        return run_attached(args)
    if not args.profile:
        raise VramtuiError("give a PROFILE (TOML) or --attach TARGET")
    if getattr(args, "take_over", False):
        raise VramtuiError("--take-over is for --attach: vramtui starts a profile's server itself")
    if args.profile.endswith(".jsonl"):
        if getattr(args, "budget", None):
            raise VramtuiError("--budget is for a PROFILE or --attach: a record is shown as it ran")
        return show_session(args.profile, args.json, args.export)
    if getattr(args, "goal", "start") == "on-gpu":
        from vramtui.cli.wizard_ongpu import run_on_gpu

        return run_on_gpu(args)
    if args.profile.endswith(
        (".log", ".txt")
    ):  # a server log: the on-gpu goal reads one, a run needs a profile
        raise VramtuiError(
            f"{args.profile} looks like a log: `vramtui wizard {args.profile} --goal on-gpu` finds the setup "
            "that keeps every layer on the GPU; a run needs a PROFILE (TOML)"
        )
    _check_run_flags(args)  # --max-steps 0 and -1 get the same words
    if getattr(args, "keep", None):
        raise VramtuiError("--keep is for --attach: the profile wizard does not take it")
    if not 0.1 <= args.margin <= 1.0:
        raise VramtuiError("--margin must be a share between 0.1 and 1")

    from vramtui.core.launch.profile import load_launch_profile

    profile = load_launch_profile(args.profile, getattr(args, "budget", None))
    refuse_saving_over_the_source(args, profile)
    return run_wizard(profile, args)


def refuse_saving_over_the_source(args: argparse.Namespace, profile: Any) -> None:
    """--save onto a file that is there (the profile being read, or another one) replaces it, comments and
    all: only with --force, and said before anything is launched (QA 23 D1: another profile was replaced
    without a word)."""
    from pathlib import Path

    from vramtui.core.errors import VramtuiError

    save = getattr(args, "save", None)
    if not save or getattr(args, "force", False):
        return
    target = Path(save).expanduser()
    if profile.source is not None and target.resolve() == Path(profile.source).resolve():
        raise VramtuiError(
            f"--save {save} is the profile the wizard reads: saving would drop its comments; "
            "save to another file, or add --force to overwrite it"
        )
    if target.exists():
        raise VramtuiError(
            f"--save {save} is there already: save to another file, or add --force to replace it"
        )


def _export_record(record: Any, export: str, out: Any) -> None:
    from vramtui.core.wizard.steprecord import open_session

    _export(open_session(record), export)
    print(f"record exported to {export}", file=out)


def _say_measuring(profile: Any, out: Any) -> None:
    """The first sizing measures the engine's own memory by starting it (seconds, more for a slow program):
    said first, as the app's wizard says it (QA 17 F11: a minute and a half without a line)."""
    from vramtui.core.launch.footprint import binary_of, measured_already

    if not measured_already(profile):
        binary = binary_of(profile)
        name = binary.name if binary else "the engine"
        print(f"measuring {name}'s own idle memory (once per binary): the budget's share left for the model…",
              file=out, flush=True)  # fmt: skip


def run_wizard(profile: Any, args: argparse.Namespace) -> int:
    """Shared by `vramtui wizard` and `vramtui demo --auto`."""
    from vramtui.core.launch.launcher import build_command, pin_port
    from vramtui.core.wizard.wizard import Wizard, stress_check

    _check_run_flags(args)
    # A profile the launcher cannot turn into a command (a parameter of the wrong type) is the same
    # one-line error as `check` gives, before any record file is opened. A profile without a port
    # gets a free one, as `check` does, so a server already on the default port is no obstacle.
    build_command(profile)
    own_port = profile.port  # 0 ("auto") or none: what --save writes back, not the port this run used
    profile = pin_port(profile)

    out = sys.stderr if args.json else sys.stdout
    interactive = not args.auto and sys.stdin.isatty()
    replay = None
    if getattr(args, "replay", None):
        from vramtui.core.launch.smoke import load_saved_request

        replay = load_saved_request(args.replay)
    _say_measuring(profile, out)
    wizard = Wizard(
        profile,
        replay=replay,
        record_path=getattr(args, "record", None),
        auto=args.auto,
        margin=getattr(args, "margin", 0.9),
        on_step=lambda step: _print_step(step, out),
    )
    if wizard.record_path:
        print(f"recording to {wizard.record_path}", file=out)
    confirm = (lambda proposal: _ask(proposal, out, wizard)) if interactive else None
    export = getattr(args, "export", None)
    try:
        result = wizard.run(max_steps=args.max_steps, confirm=confirm)
    except KeyboardInterrupt:
        # the record ends with the step that was running (Wizard.run): the export asked for is written
        # from it as well (QA: ctrl-c left no --export file)
        if export and wizard.record_path:
            _export_record(wizard.record_path, export, out)
        raise
    if result.pending is not None and not interactive and not args.auto:
        print(f"proposed (run with --auto to apply): {result.pending.describe()}", file=out)
    # the profile as the user gave its port (QA 5: --json's final_profile pinned the last launch's random
    # port, which a script writing it back would keep); the stress check runs on the port that ran
    ran, result.final_profile = result.final_profile, result.final_profile.with_changes(port=own_port)
    save = getattr(args, "save", None)
    if save and result.success:
        result.final_profile.save(save)
        print(f"final profile saved to {save}", file=out)
    elif save:
        print(f"not saved to {save}: no setting tried here ran and answered", file=out)
    stress = None
    if result.success and getattr(args, "stress", 0):
        print(f"stress check: {args.stress} requests ...", file=out)
        stress = stress_check(ran, requests=args.stress, input_tokens=args.stress_tokens)
        if result.record_path:
            from vramtui.core.wizard.steprecord import append_stress

            append_stress(result.record_path, stress.to_dict())
    if export and result.record_path:  # after the stress check: the export holds it too
        _export_record(result.record_path, export, out)
    return report(result, args, stress)
