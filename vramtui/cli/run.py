"""`vramtui run PROFILE`: open the app with a launch profile and launch it."""

from __future__ import annotations

import argparse

HELP = "open the app and launch a model from a profile (TOML); the log, memory and wizard panes follow it"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "profile", metavar="PROFILE", help="launch profile (TOML): backend, model, [params], [limits]"
    )
    parser.add_argument(
        "--theme", dest="run_theme", metavar="NAME", help="colour theme (remembered for next time)"
    )


def run(args: argparse.Namespace) -> int:
    from vramtui.cli.common import no_terminal_words
    from vramtui.tui.app import run_app  # Textual loads only when the app opens

    # run_app reads the profile and builds its command first: a bad one is one line, exit 2.
    return run_app(
        profile_path=args.profile,
        theme=args.run_theme or getattr(args, "theme", None),
        without_terminal=no_terminal_words(
            "vramtui run", f"use `vramtui check {args.profile}` or `vramtui wizard {args.profile} --auto`"
        ),
    )
