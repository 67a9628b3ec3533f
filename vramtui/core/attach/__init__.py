"""`vramtui attach`: watch a model server vramtui did not start.

- `target`: what TARGET names (PID, URL, ollama, docker:NAME, systemd:UNIT) and how it resolves;
- `cmdline`: its command line read back into the shared vocabulary through its Backend's flags;
- `endpoints`: the HTTP endpoints it answers and what they say;
- `container`: which container a host PID runs in (/proc/PID/cgroup);
- `watch`: its process tree's memory over a few seconds, read as `vramtui replay` reads a curve.

Attach only reads: it never signals, stops or restarts the process it watches.
"""

from __future__ import annotations

from vramtui.core.attach.cmdline import ServerCommand, find_backend, read_command
from vramtui.core.attach.container import Container, container_from_cgroup, container_of
from vramtui.core.attach.endpoints import Endpoint, parse_prometheus, probe
from vramtui.core.attach.target import Target, parse_target, resolve
from vramtui.core.attach.watch import Attached, attach

__all__ = [
    "Attached",
    "Container",
    "Endpoint",
    "ServerCommand",
    "Target",
    "attach",
    "container_from_cgroup",
    "container_of",
    "find_backend",
    "parse_prometheus",
    "parse_target",
    "probe",
    "read_command",
    "resolve",
]
