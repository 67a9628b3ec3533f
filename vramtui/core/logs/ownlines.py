"""The lines vramtui writes into a run log of its own, spelled once for the writer (core/launch/launcher.py)
and for every reader that keys on them (the log rules, the log state, the attach profile reader, diagnose,
an engine's figure rules)."""

import re

# heads every run log: "vramtui: launch ENV=... PROGRAM ARGS" (the log holds the run from its start)
LAUNCH = "vramtui: launch "
# under a budget: "vramtui: memory budget N MiB, enforced on the host" (or "... on the GPU")
BUDGET = "vramtui: memory budget "
# before vramtui stops the server itself: a kill after it is ours
STOP = "vramtui: stopping the server"
# names the process it launched
SERVER_PID = "vramtui: server PID "
# how the server ended (core/launch/launcher.exit_words): "the server exited with status 1", "the server was
# killed by SIGKILL (signal 9) 3 s after it was ready"
ENDED = "vramtui: the server "
_ENDED_RE = re.compile(
    r"vramtui: the server (?:exited with status (\d+)|was killed by .{1,20}? \(signal (\d+)\))"
)


def exit_code_in(text: str) -> int | None:
    """The exit status a saved log's end line states (negative: killed by that signal), as the launcher saw
    it: `diagnose` of the file then reports what the live run did."""
    if ENDED not in text or (found := _ENDED_RE.search(text)) is None:
        return None
    status, signal_number = found.groups()
    return int(status) if status is not None else -int(signal_number)
