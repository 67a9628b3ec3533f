"""What `run_app` checks and sets up before the screen opens: a bad file or profile is one line on
stderr (exit 2), SIGTERM leaves the terminal clean, and SIGHUP never leaves the app running."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path
from typing import Any

from textual.app import App

from vramtui.core.errors import VramtuiError


def refuse_binary_log(path: str) -> None:
    """Refuse a file that is not a text log, as `vramtui diagnose` does (the same test, the same line):
    binary bytes at its head and no failure a log engine can read in it."""
    from vramtui.core.logs.encoded import compression_of, utf16_of
    from vramtui.core.logs.textclean import looks_binary

    try:
        with Path(path).open("rb") as stream:
            head = stream.read(8192)
    except OSError as error:
        raise VramtuiError(f"cannot read {path}: {error.strerror or error}") from None
    packed, codec = compression_of(head), utf16_of(head)
    if packed is not None or codec is not None:  # the pane reads plain text by offsets, as the file grows
        form = f"{packed[0]}-compressed" if packed else "UTF-16"
        iconv = str(codec).upper().replace("-LE", "LE").replace("-BE", "BE")
        convert = f"{packed[1]} {path}" if packed else f"iconv -f {iconv} -t UTF-8 {path}"
        plain = f"{path}.txt"  # never the file itself, nor a live log beside it (QA: `> server.log`)
        raise VramtuiError(
            f"{path} is {form}: the log pane reads plain text (`{convert} > {plain}`, then "
            f"`vramtui --log {plain}`); `vramtui diagnose {path}` reads it as it is"
        )
    if not looks_binary(head):
        return
    from vramtui.core.logs.diagnose import diagnose_file

    if not diagnose_file(path).failed:
        raise VramtuiError(f"{path} looks like binary data, not a text log")


def check_profile(path: str) -> None:
    """Read the profile and build its command line now: a bad value is one line before the screen opens,
    not a note in the log pane."""
    from vramtui.core.launch.launcher import build_command
    from vramtui.core.launch.profile import check_runnable, load_launch_profile

    profile = load_launch_profile(path)
    check_runnable(profile)  # a setting the engine refuses: said now, not after a model load (as `check`)
    build_command(profile)


def leave_cleanly_on_sigterm(app: App[int], signum: int = signal.SIGTERM) -> Any:
    """SIGTERM (a kill from another shell): stop every server at once, then leave the screen the way
    the shell had it (no raw mode, no alternate screen) and exit 143. A second SIGTERM, or one that
    comes before the app runs, does what the exit handlers do: stop the servers and die of it. The same
    for a SIGINT sent from another shell (`kill -INT`, exit 130: the screen's own ctrl-c is a key)."""
    from vramtui.core.launch.procs import kill_all_groups

    previous = signal.getsignal(signum)
    asked = False

    def on_sigterm(signum: int, frame: Any) -> None:
        nonlocal asked
        if not asked and app.is_running:
            asked = True
            kill_all_groups()
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                loop = None
            if loop is not None:
                # Thread- and signal-safe: the app exits from its own loop, restoring the terminal.
                loop.call_soon_threadsafe(app.exit, 128 + signum)
                return
        if callable(previous):
            previous(signum, frame)
            return
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    signal.signal(signum, on_sigterm)
    return previous


def die_with_the_servers_on_hangup() -> Any:
    """SIGHUP (the terminal closed): stop every server, then die of the signal, whatever disposition
    vramtui inherited. A full-screen app whose terminal hung up has nobody left to show anything to: under
    `nohup` (SIGHUP ignored) the exit handlers alone would stop the servers and leave the app running."""
    from vramtui.core.launch.procs import kill_all_groups

    previous = signal.getsignal(signal.SIGHUP)

    def on_sighup(signum: int, frame: Any) -> None:
        kill_all_groups()
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    signal.signal(signal.SIGHUP, on_sighup)
    return previous


def run_app(
    *,
    profile_path: str | None = None,
    log_file: str | None = None,
    replay_csv: str | None = None,
    demo: bool = False,
    theme: str | None = None,
    attached: Any = None,
    source_url: str | None = None,
    without_terminal: str | None = None,
) -> int:
    """Open the app; the CLI (`vramtui`, `vramtui run`, `vramtui demo`, `vramtui attach`) calls exactly
    this. `attached`: a `tui.attached.AttachedView`, a server vramtui did not start (never stopped).
    `without_terminal`: the one line to stop with, after every input was checked, when there is no
    terminal to draw on (QA: the screen drew into a pipe and waited for keys nobody sends)."""
    for label, value in (("log file", log_file), ("replay CSV", replay_csv), ("profile", profile_path)):
        if value is not None and not Path(value).is_file():
            raise VramtuiError(f"{label} not found: {value}")
    if log_file is not None:
        refuse_binary_log(log_file)
    if profile_path is not None:
        check_profile(profile_path)
    # Signal handlers can only be set on the main thread, and servers start from worker threads: set
    # them here, so a closed terminal (SIGHUP) or a kill (SIGTERM) still stops every server we started.
    from vramtui.core.launch.procs import install_exit_handlers

    install_exit_handlers()
    from vramtui.tui.app import VramtuiApp

    app = VramtuiApp(
        profile_path=profile_path,
        log_file=log_file,
        replay_csv=replay_csv,
        demo=demo,
        theme=theme,
        attached=attached,
        source_url=source_url,
    )
    if without_terminal is not None and not (sys.stdin.isatty() and sys.stdout.isatty()):
        # after the app is built (its theme checked), before it runs: nothing was started, so nothing is
        # stopped (QA: shutting down an app that never ran was ScreenStackError, an internal error)
        raise VramtuiError(without_terminal)
    previous = leave_cleanly_on_sigterm(app)
    # a SIGINT the shell left ignored (a background job) stays ignored, as everywhere in vramtui
    interrupt = signal.getsignal(signal.SIGINT)
    if interrupt is not signal.SIG_IGN:
        leave_cleanly_on_sigterm(app, signal.SIGINT)
    previous_hangup = die_with_the_servers_on_hangup()
    try:
        result = app.run()
    finally:
        signal.signal(signal.SIGTERM, previous)
        signal.signal(signal.SIGINT, interrupt)
        signal.signal(signal.SIGHUP, previous_hangup)
        app.shutdown()
    return int(result or 0)
