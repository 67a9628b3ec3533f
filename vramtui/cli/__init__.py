"""The command line: one subcommand per pane, for scripts and SSH.

Each subcommand lives in its own module with `HELP`, `add_arguments(parser)` and `run(args) -> int`.
Modules here import only light things at the top: `vramtui --help` must never import torch,
transformers or Textual.
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import sys
from collections.abc import Sequence
from typing import NoReturn

from vramtui import __version__
from vramtui.cli.common import ReaderGone, settled
from vramtui.core.errors import VramtuiError

# Subcommand name -> module under vramtui.cli. Order is the order `--help` lists them.
COMMANDS: dict[str, str] = {
    "estimate": "estimate",
    "diagnose": "diagnose",
    "record": "record",
    "replay": "replay",
    "check": "check",
    "wizard": "wizard",
    "demo": "demo",
    "run": "run",
    "attach": "attach",
    "ps": "ps",
}


class _Parser(argparse.ArgumentParser):
    """argparse with bad input as one line and exit 2, as every other bad input is (not the usage text);
    its subcommands' parsers are of this class too (add_subparsers takes the parent's)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="vramtui",
        description="Get a local LLM to start and stay up on the GPU you have. "
        "Without a subcommand, opens the app (memory monitor and estimator; no model is launched).",
    )
    parser.add_argument("--version", action="version", version=f"vramtui {__version__}")
    parser.add_argument("--log", metavar="FILE", help="open a saved model-server log in the log pane")
    parser.add_argument("--replay", metavar="CSV", help="show a recorded nvidia-smi CSV in the memory pane")
    parser.add_argument(
        "--source",
        metavar="URL",
        help="show a remote box's GPU memory from its DCGM exporter (http://box:9400/metrics) "
        "or a Prometheus server's /federate",
    )
    parser.add_argument(
        "--theme", metavar="NAME", help="colour theme (see themes/); remembered for next time"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module_name in COMMANDS.items():
        module = importlib.import_module(f"vramtui.cli.{module_name}")
        # no abbreviations: a prefix picks another flag silently (`--ctx-size` read as `--ctx-size-draft`)
        command_parser = sub.add_parser(name, help=module.HELP, description=module.HELP, allow_abbrev=False)
        module.add_arguments(command_parser)
        command_parser.set_defaults(_module=module)
    return parser


# A negative number with a unit ("-5GiB", "-32k"): argparse takes it for an option, and says only "expected
# one argument"; joined to its flag, the flag's own check says what is wrong with the value.
_NEGATIVE_VALUE = re.compile(r"-\d[\d.,]*\s*[A-Za-z%]*")


def join_negative_values(argv: Sequence[str]) -> list[str]:
    """`--gpu-mem -5GiB` as `--gpu-mem=-5GiB`, and `-ts -1,2` as `-ts=-1,2` (QA 21 F10)."""
    joined: list[str] = []
    for token in argv:
        previous = joined[-1] if joined else ""
        if (
            _NEGATIVE_VALUE.fullmatch(token)
            and previous.startswith("-")
            and not _NEGATIVE_VALUE.fullmatch(previous)
            and "=" not in previous
            and len(previous) > 1
        ):
            joined[-1] = f"{previous}={token}"
        else:
            joined.append(token)
    return joined


def _options(parser: argparse.ArgumentParser) -> list[str]:
    return [option for action in parser._actions for option in action.option_strings]


def _subparser(parser: argparse.ArgumentParser, command: str | None) -> argparse.ArgumentParser:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and command in action.choices:
            return action.choices[command]
    return parser


def _did_you_mean(parser: argparse.ArgumentParser, tokens: Sequence[str]) -> str:
    """The hint for the first unknown flag close to one this parser takes ("; did you mean --ctx?"), or ""
    (QA 17: profile keys got a suggestion, flags did not)."""
    import difflib

    for token in tokens:
        if token.startswith("--"):
            close = difflib.get_close_matches(token.split("=")[0], _options(parser), n=1, cutoff=0.75)
            if close:
                return f"; did you mean {close[0]}?"
    return ""


def _unknown_top_option(parser: argparse.ArgumentParser, argv: Sequence[str]) -> str | None:
    """A flag before the subcommand that vramtui itself does not take (QA 17 F16: `vramtui --thme dark`
    was reported as a bad subcommand 'dark')."""
    known = set(_options(parser))
    for token in argv:
        if token in COMMANDS:
            return None
        name = token.split("=")[0]
        if token.startswith("--") and name not in known:
            return f"vramtui: unknown option {name}{_did_you_mean(parser, [name])} (see vramtui --help)"
    return None


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    argv = join_negative_values(sys.argv[1:] if argv is None else argv)
    if problem := _unknown_top_option(parser, argv):
        print(problem, file=sys.stderr)
        return 2
    args, extra = parser.parse_known_args(argv)
    if extra:  # `diagnose a.log b.log`: the subcommand's help says what it takes, not the top level's
        command = getattr(args, "command", None)
        prog = f"vramtui {command}" if command else "vramtui"
        hint = _did_you_mean(_subparser(parser, command), extra)
        print(f"{prog}: unrecognized arguments: {' '.join(extra)}{hint} (see {prog} --help)", file=sys.stderr)
        return 2
    settled()  # a status left by an earlier command in this process is not this one's
    stdout = sys.stdout
    try:
        module = getattr(args, "_module", None)
        if module is None:
            from vramtui.cli import app_entry

            return app_entry.run(args)
        sys.stdout = ReaderGone(stdout)
        return int(module.run(args) or 0)
    except VramtuiError as error:
        print(f"vramtui: {error}", file=sys.stderr)
        return error.exit_code
    except KeyboardInterrupt:
        from vramtui.core.launch import procs

        procs.interrupt_handled()
        print("vramtui: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # `vramtui diagnose big.log | head` closes our stdout early; that is not an error: the status the
        # command had settled on (its verdict) stands
        try:
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - silence the flush at exit
        except OSError:
            pass
        return settled()
    except Exception as error:  # the promise is: never a traceback for the user
        if os.environ.get("VRAMTUI_DEBUG"):
            raise
        message = " ".join(f"{type(error).__name__}: {error}".split())
        print(f"vramtui: internal error: {message} (set VRAMTUI_DEBUG=1 for the traceback)", file=sys.stderr)
        return 3
    finally:
        if isinstance(sys.stdout, ReaderGone) and not sys.stdout.broken:
            sys.stdout = stdout  # the pipe held: the stream as it was (a test's capture among them)
