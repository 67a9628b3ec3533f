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
    11:perf_event:/kubepods-besteffort-pod<uid>.slice:cri-containerd:<64 hex>   containerd, v1 systemd

The recorded printouts these were checked on are in tests/data/attach/cgroups.jsonl (each with its
source). The container's name is not in the cgroup: the runtime's own CLI names it
(`docker|podman inspect --format {{.Name}} ID`), when it is installed and answers within a short time.
"""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path

# (runtime, pattern) in the order they are tried; the id is the pattern's one group.
_HEX = r"([0-9a-f]{64})"
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("podman", re.compile(rf"/libpod-(?!conmon-){_HEX}(?:\.scope)?")),
    ("containerd", re.compile(rf"/cri-containerd-{_HEX}(?:\.scope)?")),
    ("containerd", re.compile(rf"\.slice:cri-containerd:{_HEX}")),
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
    name: str | None = None  # what its runtime calls it (`docker ps`'s NAMES), when that could be asked

    @property
    def short_id(self) -> str:
        return self.id[:12]  # what `docker ps` shows

    @property
    def label(self) -> str:
        """`docker llama (3f2a9c0d1e4b)`, or `docker 3f2a9c0d1e4b` when no name is known."""
        return (
            f"{self.runtime} {self.name} ({self.short_id})"
            if self.name
            else f"{self.runtime} {self.short_id}"
        )

    def to_dict(self) -> dict[str, str]:
        found = {"runtime": self.runtime, "id": self.short_id, "full_id": self.id}
        return {**found, "name": self.name} if self.name else found


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


PROC = Path("/proc")  # where the cgroups are read (a test points it at recorded ones)


def container_of(pid: int, proc: Path | None = None) -> Container | None:
    """The container `pid` runs in (None: on the host, or its cgroup cannot be read)."""
    try:
        text = ((proc or PROC) / str(pid) / "cgroup").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    return container_from_cgroup(text)


# The runtimes whose CLI names a container by its id; Kubernetes' and CRI-O's need a cluster client.
NAMING_CLI = {"docker": "docker", "podman": "podman"}
NAME_TIMEOUT_S = 2.0


@functools.lru_cache(maxsize=256)  # one `inspect` per container, however many of its processes use a GPU
def container_name(container: Container, timeout_s: float = NAME_TIMEOUT_S) -> str | None:
    """Its name from its runtime's CLI (`docker inspect`): None when the CLI is not installed, not
    permitted, or does not answer in time (the id still identifies it)."""
    cli = NAMING_CLI.get(container.runtime)
    if cli is None or shutil.which(cli) is None:
        return None
    try:
        done = subprocess.run(
            [cli, "inspect", "--format", "{{.Name}}", container.id],
            capture_output=True, text=True, timeout=timeout_s, check=False,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return None
    name = done.stdout.strip().lstrip("/")  # docker writes "/NAME", podman "NAME"
    return name if done.returncode == 0 and name and "\n" not in name else None


def named(container: Container | None) -> Container | None:
    """The container with its name, asked of its runtime now (blocking, up to NAME_TIMEOUT_S)."""
    if container is None or container.name:
        return container
    name = container_name(container)
    return Container(container.runtime, container.id, name) if name else container


class ContainerNames:
    """The container of each PID, for a screen that repaints often: each cgroup is read once per PID,
    and each name is asked of the runtime once per container, in a thread of its own (never on the
    caller's, which may be a UI)."""

    MAX_PIDS = 4096

    def __init__(self, proc: Path | None = None, ask_names: bool = True) -> None:
        self.proc = proc
        self.ask_names = ask_names
        self._boxes: dict[int, Container | None] = {}
        self._names: dict[str, str | None] = {}  # container id -> name (None: asked, no answer)
        self._lock = threading.Lock()

    def of(self, pid: int) -> Container | None:
        """Its container as known now (the name comes later, once the runtime answered)."""
        with self._lock:
            if pid not in self._boxes:
                if len(self._boxes) >= self.MAX_PIDS:
                    self._boxes.clear()  # PIDs are reused: an old entry may be wrong anyway
                self._boxes[pid] = container_of(pid, self.proc)
            box = self._boxes[pid]
            if box is None:
                return None
            if box.id not in self._names:
                self._names[box.id] = None
                if self.ask_names:
                    threading.Thread(
                        target=self._ask, args=(box,), name="vramtui-container", daemon=True
                    ).start()
            name = self._names[box.id]
        return Container(box.runtime, box.id, name) if name else box

    def _ask(self, box: Container) -> None:
        name = container_name(box)
        with self._lock:
            self._names[box.id] = name
