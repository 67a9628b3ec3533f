"""`vramtui` with no subcommand: open the app (memory monitor and estimator; no model launched)."""

from __future__ import annotations

import argparse


def run(args: argparse.Namespace) -> int:
    from vramtui.tui.app import run_app  # Textual loads only when the app opens

    return run_app(
        log_file=getattr(args, "log", None),
        replay_csv=getattr(args, "replay", None),
        theme=getattr(args, "theme", None),
    )
