"""`vramtui` with no subcommand: open the app (memory monitor and estimator; no model launched)."""

from __future__ import annotations

import argparse


def run(args: argparse.Namespace) -> int:
    from vramtui.cli.common import input_file, read_replay_csv

    # Refused here as `vramtui replay` and `vramtui diagnose` refuse them, before the screen opens.
    if getattr(args, "replay", None):
        if args.replay != "-":
            input_file(args.replay, "replay CSV")
        read_replay_csv(args.replay, check_only=True)
    if getattr(args, "log", None):
        input_file(args.log, "log file")
    if getattr(args, "source", None):
        _check_source(args.source)

    from vramtui.cli.common import no_terminal_words
    from vramtui.tui.app import run_app  # Textual loads only when the app opens

    instead = "use a subcommand (`vramtui --help`): estimate, diagnose, record, check, wizard ..."
    if getattr(args, "log", None):
        instead = f"`vramtui diagnose {args.log}` reads the log"
    elif getattr(args, "replay", None):
        instead = f"`vramtui replay {args.replay}` reads the recording"
    return run_app(
        log_file=getattr(args, "log", None),
        replay_csv=getattr(args, "replay", None),
        theme=getattr(args, "theme", None),
        source_url=getattr(args, "source", None),
        without_terminal=no_terminal_words("vramtui", instead),
    )


def _check_source(url: str) -> None:
    """A --source that cannot be read is one line before the screen opens, as `record --source` says."""
    from vramtui.core.memory.prometheus import PrometheusSource

    source = PrometheusSource(url)
    try:
        source.check()
    finally:
        source.close()
