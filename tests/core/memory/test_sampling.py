"""The host source, for real: a child (and its own child) allocate and free known amounts."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest

from vramtui.core.memory.history import PeakHistory
from vramtui.core.memory.sampling import (
    HostSource,
    Sample,
    Sampler,
    SourceStatus,
    TreeWatch,
    measure_process_tree,
)

MIB = 1024**2

# Phases driven over a pipe: each "go" line moves the child one step; it answers with the phase name
# once the memory is really touched (bytearray pages are only resident once written).
CHILD = r"""
import subprocess, sys
MIB = 1024 ** 2
def step(name):
    print(name, flush=True)
    if not sys.stdin.readline():
        sys.exit(0)
def touched(n):
    block = bytearray(n)
    for i in range(0, n, 4096):
        block[i] = 1
    return block
step("idle")
block = touched(200 * MIB)
step("allocated")
del block
step("freed")
grandchild = subprocess.Popen([sys.executable, "-c", "import sys\nb = bytearray(100 * 1024 ** 2)\nfor i in range(0, len(b), 4096): b[i] = 1\nprint('held', flush=True)\nsys.stdin.readline()"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
grandchild.stdout.readline()
print(grandchild.pid, file=sys.stderr, flush=True)
step("grandchild")
grandchild.stdin.close()
grandchild.wait()
step("grandchild-gone")
"""


class Child:
    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", CHILD],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.pid = self.proc.pid

    def expect(self, phase: str) -> None:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()
        assert line == phase, f"child said {line!r}, expected {phase!r}"

    def go(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)


@pytest.fixture
def child() -> Iterator[Child]:
    c = Child()
    try:
        yield c
    finally:
        c.close()


def rss(source: HostSource) -> int:
    host = source.sample().host
    assert host is not None and host.tree_rss is not None
    return host.tree_rss


def test_host_source_sees_known_allocations_and_frees(child: Child) -> None:
    source = HostSource(child.pid, tree_refresh_s=0.0)
    assert source.status().ok and str(child.pid) in source.status().message
    child.expect("idle")
    idle = rss(source)
    child.go()
    child.expect("allocated")
    allocated = rss(source)
    assert 190 * MIB <= allocated - idle <= 240 * MIB
    child.go()
    child.expect("freed")
    freed = rss(source)
    assert 190 * MIB <= allocated - freed <= 240 * MIB  # a big bytearray is unmapped on free
    child.go()
    assert child.proc.stderr is not None
    grandchild_pid = int(child.proc.stderr.readline())
    child.expect("grandchild")
    sample = source.sample()
    host = sample.host
    assert host is not None and host.tree_rss is not None
    assert grandchild_pid in host.tree_pids and child.pid in host.tree_pids
    assert host.tree_rss - freed >= 95 * MIB  # the grandchild's 100 MiB counts in the tree
    assert host.ram_total > host.ram_used > 0 and host.root_alive is True
    child.go()
    child.expect("grandchild-gone")
    host = source.sample().host
    assert host is not None and grandchild_pid not in host.tree_pids
    child.go()
    child.proc.wait(10)
    host = source.sample().host
    assert host is not None and host.tree_pids == () and host.tree_rss == 0 and host.root_alive is False


def test_sampler_history_and_tree_watch_keep_the_peak(child: Child) -> None:
    history = PeakHistory(capacity=256, factor=4)
    seen: list[Sample] = []

    def on_sample(sample: Sample) -> None:
        seen.append(sample)
        if sample.host and sample.host.tree_rss is not None and sample.host.tree_pids:
            history.add(sample.t, sample.host.tree_rss)

    child.expect("idle")
    idle = measure_process_tree(child.pid)
    assert idle.rss_bytes and idle.pids == (child.pid,) and idle.gpu_bytes is None
    with TreeWatch(child.pid, interval_s=0.02, nvml=False, on_sample=on_sample) as watch:
        time.sleep(0.15)
        child.go()
        child.expect("allocated")
        time.sleep(0.2)
        child.go()
        child.expect("freed")
        time.sleep(0.2)
    assert watch.samples >= 10 and len(seen) == watch.samples
    assert watch.peak_rss - idle.rss_bytes >= 190 * MIB
    assert watch.last_rss is not None and watch.peak_rss - watch.last_rss >= 190 * MIB
    assert history.peak == watch.peak_rss
    buckets = history.buckets(4)
    assert max(b.max for b in buckets) == watch.peak_rss  # the spike survives downsampling
    assert buckets[-1].last == watch.last_rss


def test_a_sample_taken_at_once_holds_a_peak_between_two_ticks(child: Child) -> None:
    """A run of a second (a tiny model's check) can allocate and stop between two ticks of a slow watch:
    the launcher samples at once after its request, before the stop."""
    child.expect("idle")
    with TreeWatch(child.pid, interval_s=60, nvml=False) as watch:  # one tick at start, none after
        child.go()
        child.expect("allocated")
        before = watch.peak_rss
        sample = watch.sample_now()
        assert sample.host is not None and child.pid in sample.host.tree_pids
        assert watch.peak_rss - before >= 190 * MIB
        child.go()
        child.expect("freed")


def test_sampler_survives_a_failing_source() -> None:
    class Broken:
        calls = 0

        def sample(self) -> Sample | None:
            Broken.calls += 1
            raise RuntimeError("driver hiccup")

        def status(self) -> SourceStatus:
            return SourceStatus(False, "broken")

        def close(self) -> None:
            pass

    got = threading.Event()
    samples: list[Sample] = []

    def on_sample(sample: Sample) -> None:
        samples.append(sample)
        if len(samples) >= 3:
            got.set()

    sampler = Sampler([Broken(), HostSource()], interval_s=0.01, on_sample=on_sample)
    sampler.start()
    assert got.wait(5)
    sampler.close()
    assert Broken.calls >= 3 and "driver hiccup" in sampler.errors[0]
    assert all(s.host is not None and s.host.tree_rss is None for s in samples)  # host RAM still flows
    assert [st.ok for st in sampler.statuses()] == [False, True]


def test_watch_pid_switches_and_missing_pid_is_a_state() -> None:
    source = HostSource(pid=2**22 + 12345)  # above the default pid_max: no such process
    assert not source.status().ok and "no process" in source.status().message
    assert source.sample().host is not None
    sampler = Sampler([source], interval_s=0.05)
    import os

    sampler.watch_pid(os.getpid())
    assert source.status().ok
    sample = sampler.sample_once()
    assert sample.host is not None and os.getpid() in sample.host.tree_pids
    with pytest.raises(ValueError):
        Sampler([source], interval_s=0)


@pytest.mark.parametrize("children_files", [True, False])
def test_tree_found_with_and_without_proc_children_files(
    children_files: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Linux lists a tree through /proc/PID/task/TID/children; elsewhere psutil's ppid scan does it."""
    from vramtui.core.memory import sampling

    if not children_files:
        monkeypatch.setattr(sampling, "_descendants_linux", lambda members: None)
    script = (
        "import subprocess, sys\n"
        "kid = subprocess.Popen([sys.executable, '-c', 'import sys; print(1, flush=True); sys.stdin.read()'],"
        " stdin=subprocess.PIPE, stdout=subprocess.PIPE)\n"
        "kid.stdout.readline()\n"
        "print(kid.pid, flush=True)\n"
        "sys.stdin.read()\n"
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert parent.stdout is not None
        kid = int(parent.stdout.readline())
        host = HostSource(parent.pid, tree_refresh_s=0.0).sample().host
        assert host is not None and host.tree_pids == tuple(sorted((parent.pid, kid)))
        assert host.tree_rss is not None and host.tree_rss > 2 * 1024**2
    finally:
        parent.kill()  # the kid reads the parent's pipe: it ends with it
        parent.wait()
