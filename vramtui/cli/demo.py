"""`vramtui demo`: the embedded demo. Without flags it opens the app on it; `--auto --json` runs headless.

A tiny model generated once and cached, served by llama-cpp-python on the CPU under a 1400 MiB budget,
asked for its full 262,144-token context: the first launch fails for real at the KV-cache stage and the
wizard brings it up.
"""

from __future__ import annotations

import argparse
import sys

HELP = "the embedded demo: a real failing launch that the wizard brings up (--auto --json: headless)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--auto", action="store_true", help="run the wizard headless, applying every proposal"
    )
    parser.add_argument("--json", action="store_true", help="headless, and print the result as JSON")
    parser.add_argument(
        "--max-steps", type=int, default=6, metavar="N", help="at most N changes (default: 6)"
    )
    parser.add_argument(
        "--record", metavar="FILE", help="write the step record here (default: the user data dir)"
    )
    parser.add_argument(
        "--export", metavar="FILE", help="also write the record as Markdown (.md) or CSV (.csv)"
    )
    parser.add_argument(
        "--stress",
        type=int,
        default=0,
        metavar="N",
        help="once it runs: N requests of a long input while sampling",
    )
    parser.add_argument("--stress-tokens", type=int, metavar="T", help="input length of each stress request")


def run(args: argparse.Namespace) -> int:
    from vramtui.cli.common import has_terminal

    if not args.auto and not args.json:
        if has_terminal():
            from vramtui.tui.app import run_app

            return run_app(demo=True)
        print("vramtui demo: no terminal, so it runs headless (as --auto)", file=sys.stderr)
    from vramtui.cli.wizard import run_wizard
    from vramtui.core.demo import demo_profile
    from vramtui.core.estimate.calibrate import data_dir

    args.auto = True  # headless means nobody to ask
    # the profile that runs is kept, and shown: what a new user writes next for a model of their own (QA 21
    # F14: the demo ended without showing what it had launched)
    saved = data_dir() / "demo" / "vramtui-demo.toml"
    saved.parent.mkdir(parents=True, exist_ok=True)
    args.save = str(saved)
    args.margin = 0.9
    status = run_wizard(demo_profile(), args)
    if not args.json and status == 0 and saved.is_file():
        print(f"\nthe profile that runs ({saved}):")
        for line in saved.read_text(encoding="utf-8").strip().splitlines():
            print(f"  {line}" if line else "")
        print(
            "yours: the same with your model, backend and memory_budget (README, 'A bring-up session'); "
            "then `vramtui check yours.toml`, and `vramtui wizard yours.toml` when it fails"
        )
    return status
