"""`vramtui attach TARGET`: watch a model server vramtui did not start (it never stops it)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

HELP = (
    "watch a running model server vramtui did not start (a PID, http://HOST:PORT, ollama, "
    "docker:NAME or systemd:UNIT) in the app: its memory, its log's diagnosis and its parameters from "
    "its command line (--json or --text: one report); it never stops the server"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "target", metavar="TARGET", help="a PID, a server URL, ollama, docker:NAME or systemd:UNIT"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object after watching (no app)")
    parser.add_argument(
        "--text",
        action="store_true",
        help="print the report as text (no app; also when stdout is no terminal)",
    )
    parser.add_argument(
        "--duration", metavar="S", type=float, default=3.0, help="watch for S seconds (default 3)"
    )
    parser.add_argument(
        "--log",
        metavar="FILE",
        help="the server's log (default: the file its output goes to, or docker/journald)",
    )
    wizard = parser.add_argument_group("the app's wizard on it (n in the wizard pane)")
    wizard.add_argument(
        "--budget", metavar="SIZE", help="the memory it may hold (e.g. 6GiB): over it, the wizard proposes"
    )
    wizard.add_argument(
        "--keep",
        action="append",
        default=[],
        metavar="PARAM",
        help="a setting the wizard must leave as it is (repeatable), e.g. --keep kv_dtype",
    )
    wizard.add_argument(
        "--restart-timeout",
        type=float,
        default=300.0,
        metavar="S",
        help="how long the wizard pane waits for you to restart it with the shown command (default 300)",
    )


def run(args: argparse.Namespace) -> int:
    from vramtui.cli.common import print_json
    from vramtui.cli.diagnose import _json_view
    from vramtui.core.attach import attach

    if not 0 < args.duration < float("inf"):
        from vramtui.core.errors import VramtuiError

        raise VramtuiError(f"--duration must be a positive number of seconds, not {args.duration:g}")
    if args.budget:
        from vramtui.core.units import parse_size_with_unit

        parse_size_with_unit(args.budget)  # `--budget 12` is one line in every mode, not ignored in some
    if not args.json and not args.text and sys.stdout.isatty():
        return open_app(args)
    attached = attach(args.target, duration_s=args.duration, log=args.log)
    report = attached.to_dict(_json_view)
    if args.json:
        print_json(report)
    else:
        print(render_text(report))
        bill = attached.bill()
        if bill is not None:
            print("  bill (estimate for its settings, what its log printed, what it held):")
            print("\n".join(f"    {line}" for line in bill.lines()))
    return 0


def open_app(args: argparse.Namespace) -> int:
    """The app on the attached server: its tree in the memory pane, its log in the log pane."""
    from vramtui.core.attach import attach
    from vramtui.core.errors import VramtuiError
    from vramtui.core.units import parse_size_with_unit

    budget = parse_size_with_unit(args.budget) if args.budget else None
    if not args.restart_timeout > 0:
        raise VramtuiError("--restart-timeout must be a positive number of seconds")
    # A short look first: a bad target is one line before the screen opens; the app samples after.
    attached = attach(args.target, duration_s=0.3, log=args.log)
    from vramtui.tui.app import run_app
    from vramtui.tui.attached import view_from

    view = view_from(attached, budget=budget, keep=tuple(args.keep), log=args.log)
    view.restart_timeout_s = args.restart_timeout
    if args.keep and view.profile is None:
        raise VramtuiError(
            f"--keep: vramtui cannot rebuild {args.target}'s command line, so it proposes nothing"
        )
    if view.profile is not None:
        from vramtui.core.launch.profile import known_params

        for name in args.keep:
            if name not in (*known_params(view.profile.backend), "model"):
                raise VramtuiError(f"--keep {name}: not a parameter of {view.profile.backend.name}")
    return run_app(attached=view, theme=getattr(args, "theme", None))


# /props' n_ctx is kept in --json for scripts; the text says it once, as n_ctx_per_slot (QA 7, QA 25 P3:
# n_ctx=2048 beside context=4096 read as a conflict)
_UNSAID = {("/props", "n_ctx")}


def _mib(value: Any) -> str:
    if value is None:
        return "n/a"
    return f"{value / 1024:.2f} GiB" if abs(value) >= 1024 else f"{value:.0f} MiB"


def _box(container: dict[str, Any]) -> str:
    """`docker llama (3f2a9c0d1e4b)`, or `docker 3f2a9c0d1e4b` when its runtime gave no name."""
    name = container.get("name")
    return (
        f"{container['runtime']} {name} ({container['id']})"
        if name
        else f"{container['runtime']} {container['id']}"
    )


def render_text(report: dict[str, Any]) -> str:
    """The report as lines (the app view of an attached server is to come)."""
    lines = [
        f"{report['target']}: {report['backend'] or 'unknown engine'}, PID {report['pid'] or 'not seen'}"
        + (f" in {_box(report['container'])}" if report["container"] else ""),
        f"  model       {report['model'] or 'n/a'}",
    ]
    params = ", ".join(f"{k}={v}" for k, v in report["params"].items()) or "none on the command line"
    lines.append(f"  parameters  {params}")
    if report["params_assumed"]:
        assumed = ", ".join(f"{k}={v}" for k, v in report["params_assumed"].items())
        lines.append(f"  defaults    {assumed}")
    found = ", ".join(report["endpoints_found"]) or "none"
    lines.append(f"  endpoints   {found}" + (f" at {report['url']}" if report["url"] else ""))
    for path, endpoint in report["endpoints"].items():
        said = {k: v for k, v in endpoint.items() if k not in ("status", "answered", "problem")}
        if endpoint["problem"]:
            lines.append(f"    {path}: {endpoint['problem']}")
        elif said and endpoint["answered"]:
            lines.append(
                f"    {path}: " + ", ".join(f"{k}={v}" for k, v in said.items() if (path, k) not in _UNSAID)
            )
    readings = report["readings"]
    if readings:
        # the four readings the memory pane and `replay` give (QA 30 S16: plateau and peak alone)
        falls = {True: "yes", False: "no"}.get(readings.get("falls_back"), "unknown")
        lines.append(
            f"  memory      {readings['series']}: baseline {_mib(readings.get('baseline_mib'))}, plateau "
            f"{_mib(readings['plateau_mib'])}, peak {_mib(readings['peak_mib'])}, falls back {falls} over "
            f"{readings['samples']} samples"
        )
    for row in report["gpu_processes"]:
        box = f" ({_box(row['container'])})" if row["container"] else ""
        lines.append(f"    GPU {row['gpu']} PID {row['pid']}{box}: {_mib(row['used_mib'])}")
    diagnosis = report["diagnosis"]
    if diagnosis is not None:
        failed = diagnosis.get("failed")
        verdict = diagnosis.get("summary") or (diagnosis.get("failure") if failed else diagnosis.get("stage"))
        lines.append(f"  log         {report['log_source']}: {verdict}")
    for note in report["notes"]:
        lines.append(f"  note: {note}")
    if report.get("still_running") is not False:  # one that exited during the watch says so in a note
        lines.append("  (vramtui did not start this server and leaves it running)")
    return "\n".join(lines)
