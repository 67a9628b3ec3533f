"""Which container a host PID runs in, from `/proc/PID/cgroup`.

NVML reports host PIDs; a server in docker, containerd (Kubernetes), podman or CRI-O shows up there
under an id found in its cgroup path. Shapes seen in the wild:

    12:memory:/docker/<64 hex>                                          cgroup v1, docker
    0::/system.slice/docker-<64 hex>.scope                              cgroup v2, systemd driver
    0::/docker/<64 hex>                                                 cgroup v2, cgroupfs driver
    0::/kubepods.slice/.../cri-containerd-<64 hex>.scope                containerd under Kubernetes
    11:cpu:/kubepods/besteffort/pod<uid>/<64 hex>                        cgroup v1, Kubernetes
    0::/machine.slice/libpod-<64 hex>.scope                             podman (libpod-conmon-: its monitor)
    0::/kubepods.slice/.../crio-<64 hex>.scope                          CRI-O
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

# (runtime, pattern) in the order they are tried; the id is the pattern's one group.
_HEX = r"([0-9a-f]{64})"
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("podman", re.compile(rf"/libpod-(?!conmon-){_HEX}(?:\.scope)?")),
    ("containerd", re.compile(rf"/cri-containerd-{_HEX}(?:\.scope)?")),
    ("cri-o", re.compile(rf"/crio-(?!conmon-){_HEX}(?:\.scope)?")),
    ("docker", re.compile(rf"/docker-{_HEX}\.scope")),
    ("docker", re.compile(rf"/docker/{_HEX}(?:/|$)")),
    ("kubernetes", re.compile(rf"/kubepods/(?:[a-z]+/)?pod[0-9a-f-]+/{_HEX}(?:/|$)")),
    ("containerd", re.compile(rf"/containerd/{_HEX}(?:/|$)")),
)


@dataclass(frozen=True)
class Container:
    runtime: str  # docker, podman, containerd, cri-o, kubernetes
    id: str  # the full 64-hex id

    @property
    def short_id(self) -> str:
        return self.id[:12]  # what `docker ps` shows

    def to_dict(self) -> dict[str, str]:
        return {"runtime": self.runtime, "id": self.short_id, "full_id": self.id}


def container_from_cgroup(text: str) -> Container | None:
    """The container named in a `/proc/PID/cgroup` text; None for a process on the host."""
    for line in text.splitlines():
        _hierarchy, _sep, path = line.strip().partition(":")
        path = path.partition(":")[2] if ":" in path else path
        for runtime, pattern in _PATTERNS:
            found = pattern.search(path)
            if found:
                return Container(runtime, found.group(1))
    return None


def container_of(pid: int, proc: Path = Path("/proc")) -> Container | None:
    """The container `pid` runs in (None: on the host, or its cgroup cannot be read)."""
    try:
        text = (proc / str(pid) / "cgroup").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    return container_from_cgroup(text)
