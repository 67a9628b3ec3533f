"""`vramtui wizard --attach TARGET`: the wizard on a server vramtui did not start.

It proposes the next single change as usual, then offers two ways: restart the server yourself with
the printed command (vramtui waits, bounded by --restart-timeout, for a new process at the same place
and verifies it), or let vramtui take it over (stop it, relaunch the changed command under vramtui),
which happens only after an explicit yes: the prompt, or --take-over --yes.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("on a server vramtui did not start")
    group.add_argument(
        "--attach",
        metavar="TARGET",
        help="tune a running server: a PID, http://HOST:PORT, ollama, docker:NAME or systemd:UNIT",
    )
    group.add_argument(
        "--take-over",
        action="store_true",
        help="stop it and relaunch the changed command under vramtui (needs --yes without a terminal)",
    )
    group.add_argument(
        "--yes", action="store_true", help="the yes --take-over needs to stop a process vramtui did not start"
    )
    group.add_argument(
        "--restart-timeout",
        type=float,
        default=300.0,
        metavar="S",
        help="how long to wait for you to restart it with the printed command (default 300)",
    )
    group.add_argument(
        "--budget",
        metavar="SIZE",
        help="the memory it may hold (e.g. 6GiB): over it, the wizard proposes; with a PROFILE, in place of "
        "its [limits] memory_budget",
    )
    group.add_argument(
        "--keep",
        action="append",
        default=[],
        metavar="PARAM",
        help="a setting the wizard must leave as it is (repeatable), e.g. --keep kv_dtype",
    )
    group.add_argument(
        "--log", metavar="FILE", help="the server's log (default: the file its output goes to)"
    )


def _print_change(change: Any, out: Any, way: str, pid: int | None, timeout_s: float | None = None) -> None:
    # a setting its command line leaves out is the engine's own default, not "None"
    moves = ", ".join(f"{k} {'(default)' if a is None else a} → {b}" for k, (a, b) in change.changes.items())
    if way == "take_over":
        print(f"relaunching under vramtui ({moves}):\n  command: {change.shell}", file=out, flush=True)
        return
    print(f"apply it yourself ({moves}), PID {pid} is left as it is:", file=out)
    for line in change.how:
        print(f"  {line}", file=out)
    print(f"  command: {change.shell}", file=out, flush=True)
    if timeout_s is not None:  # else a silent wait looks like a hang
        print(
            f"waiting up to {timeout_s:.0f} s for the restarted server (ctrl-c to stop)", file=out, flush=True
        )


def _ask_way(wizard: Any, proposal: Any, out: Any) -> str | None:
    """On a terminal: restart it yourself, take it over (then a second, explicit yes), or no."""
    from vramtui.core.attach.restart import proposed_command

    runner = wizard.attached
    change = proposed_command(runner.running, wizard.profile, proposal)
    print(f"\nproposed: {proposal.describe()}\n  command: {change.shell}", file=out)
    pid = runner.running.pid
    while True:
        print(
            f"[r]estart it yourself (vramtui waits for the new PID) / [t]ake it over (stop PID {pid}, "
            "relaunch under vramtui) / [n]o: ",
            end="",
            file=out,
            flush=True,
        )
        answer = sys.stdin.readline().strip().lower()
        if answer in ("r", "restart", ""):
            return "restart"
        if answer in ("n", "no", "q"):
            return None
        if answer in ("t", "take", "take over"):
            print(f"stop PID {pid}, which vramtui did not start? type yes: ", end="", file=out, flush=True)
            if sys.stdin.readline().strip().lower() == "yes":
                runner.allowed = True
                return "take_over"
            print("not stopped.", file=out)


def _confirm(wizard: Any, args: argparse.Namespace, out: Any, interactive: bool) -> Any:
    runner = wizard.attached

    def confirm(proposal: Any) -> Any:
        if runner.way == "take_over" and runner.allowed and runner.server is not None:
            return proposal  # the server is ours now: the wizard relaunches it as usual
        if interactive:
            way = _ask_way(wizard, proposal, out)
            if way is None:
                return None
            runner.way = way
            return proposal
        if args.take_over and not args.yes:
            print(
                f"proposed: {proposal.describe()}\nnot taken over: PID {runner.running.pid} is left "
                "running (a process vramtui did not start is stopped only with --take-over --yes)",
                file=out,
            )
            return None
        # why this change, its figures and cost, as the prompt says them (QA 24 F9: only the record had them)
        print(f"proposed: {proposal.describe()}", file=out)
        return proposal

    return confirm


def run_attached(args: argparse.Namespace) -> int:
    from vramtui.cli.wizard import report
    from vramtui.core.attach import attach
    from vramtui.core.attach.guided import AttachedRunner, AttachedWizard
    from vramtui.core.attach.restart import attached_profile, running_from
    from vramtui.core.errors import VramtuiError
    from vramtui.core.units import parse_size_with_unit

    if args.restart_timeout <= 0:
        raise VramtuiError("--restart-timeout must be a positive number of seconds")
    budget = parse_size_with_unit(args.budget) if args.budget else None
    attached = attach(args.attach, duration_s=0.3, log=args.log)
    running = running_from(attached)
    profile = attached_profile(running, budget)
    from vramtui.core.launch.profile import known_params

    for name in args.keep:
        if name not in (*known_params(profile.backend), "model"):
            raise VramtuiError(f"--keep {name}: not a parameter of {profile.backend.name}")
    out = sys.stderr if args.json else sys.stdout
    interactive = sys.stdin.isatty() and not args.auto
    runner = AttachedRunner(
        running,
        log=args.log,
        way="take_over" if args.take_over else "restart",
        allowed=args.take_over and args.yes,
        restart_timeout_s=args.restart_timeout,
    )
    replay = None
    if getattr(args, "replay", None):
        from vramtui.core.launch.smoke import load_saved_request

        replay = runner.replay = load_saved_request(args.replay)
    wizard = AttachedWizard(
        profile,
        runner,
        keep=set(args.keep),
        record_path=args.record,
        auto=False,
        margin=args.margin,
        replay=replay,
        on_step=lambda step: _print_step(step, out),
    )
    runner.on_command = lambda change: _print_change(
        change, out, runner.way, running.pid, runner.restart_timeout_s
    )
    print(f"attached to PID {running.pid} at {running.url}: {shown(profile)}", file=out)
    if wizard.record_path:
        print(f"recording to {wizard.record_path}", file=out)
    result = wizard.run(max_steps=args.max_steps, confirm=_confirm(wizard, args, out, interactive))
    code = report(result, args, None, extra={"attached": _attached_json(runner)})
    return _stay_up(runner, out) if code == 0 else code


def _print_step(step: Any, out: Any) -> None:
    from vramtui.cli.wizard import _print_step as print_step
    from vramtui.tui.words import failure_words, in_words, stage_words

    if step.index == 0 and step.observation is not None:
        obs = step.observation
        failed = f"{failure_words(obs.failure)} at {stage_words(obs.failure_stage)}"
        said = "runs and answers" if obs.works else in_words(obs.message) or failed
        if obs.runs_over_budget:
            said = obs.over_budget_text()
        print(f"as it runs now: {said}", file=out)
        if obs.log_file:
            print(f"    log: {obs.log_file}", file=out)
        return
    print_step(step, out)


def shown(profile: Any) -> str:
    params = ", ".join(f"{k}={v}" for k, v in profile.params.items()) or "the engine's defaults"
    return f"{profile.backend.name} {profile.label} ({params})"


def _attached_json(runner: Any) -> dict[str, Any]:
    change = runner.last_change
    return {
        "target": runner.running.target.text,
        "url": runner.running.url,
        "pid": runner.running.pid,
        "way": runner.way,
        "taken_over": runner.server is not None,
        "changed_command": change.to_dict() if change else None,
        "notes": runner.notes,
    }


def _stay_up(runner: Any, out: Any) -> int:
    """A taken-over server runs under vramtui: in the foreground, until ctrl-c or a signal stops it."""
    server = runner.server
    if server is None or not server.running:
        return 0
    print(
        f"it runs under vramtui as PID {server.pid} (log {server.log_file}); ctrl-c stops it",
        file=out,
        flush=True,
    )
    try:
        assert server.proc is not None
        server.proc.wait()
    except KeyboardInterrupt:
        from vramtui.core.launch.procs import interrupt_handled

        interrupt_handled()
    finally:
        server.stop()
    return 0
