"""The lines vramtui writes into a run log of its own, spelled once for the writer (core/launch/launcher.py)
and for every reader that keys on them (the log rules, the log state, the attach profile reader, diagnose,
an engine's figure rules)."""

# heads every run log: "vramtui: launch ENV=... PROGRAM ARGS" (the log holds the run from its start)
LAUNCH = "vramtui: launch "
# under a budget: "vramtui: memory budget N MiB, enforced on the host" (or "... on the GPU")
BUDGET = "vramtui: memory budget "
# before vramtui stops the server itself: a kill after it is ours
STOP = "vramtui: stopping the server"
# names the process it launched
SERVER_PID = "vramtui: server PID "
