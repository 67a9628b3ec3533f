"""CPU cost of sampling at 10 Hz: NVML (a pynvml-shaped fake: no GPU here) plus one process tree.

Goal: under 1% of one core. Run: python benchmarks/bench_sampling.py [seconds]
The fake answers from memory, so this measures vramtui's own work per sample (struct handling,
versioned-function probing, psutil reads of the tree); a real driver adds its ioctl time on top.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "core" / "memory"))

from test_nvml import FakeDriver, FakeGpu  # noqa: E402  (the same fake the tests use)

from vramtui.core.memory.sampling import HostSource, NvmlSource, Sampler  # noqa: E402

GIB = 1024**3

# A server-shaped tree: a parent with three workers.
TREE = (
    "import subprocess, sys, time\n"
    "kids = [subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']) for _ in range(3)]\n"
    "time.sleep(600)\n"
)


def cpu_share(sources: list, seconds: float, interval_s: float = 0.1) -> tuple[float, int]:
    sampler = Sampler(sources, interval_s=interval_s)
    cpu0, wall0 = time.process_time(), time.monotonic()
    sampler.start()
    time.sleep(seconds)
    sampler.stop()
    cpu, wall = time.process_time() - cpu0, time.monotonic() - wall0
    return cpu / wall * 100, sampler.count


def per_call_us(fn, n: int = 2000) -> float:
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - start) / n * 1e6


def main() -> None:
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 10.0
    # Its own process group, so that the workers go with it: they outlive a parent killed alone.
    tree = subprocess.Popen([sys.executable, "-c", TREE], start_new_session=True)
    time.sleep(1.0)  # let the workers start
    try:
        gpus = [
            FakeGpu(compute=[(tree.pid, 9 * GIB), (4000, GIB)], graphics=[(1500, 200 * 1024**2)]),
            FakeGpu(name="NVIDIA RTX A6000", uuid="GPU-b", total=48 * GIB),
        ]
        nvml = NvmlSource(FakeDriver(gpus).module())
        host = HostSource(tree.pid)
        sample = Sampler([nvml, host]).sample_once()
        assert sample.host is not None and len(sample.host.tree_pids) == 4, sample.host
        print(
            f"tree: {len(sample.host.tree_pids)} processes; GPUs: {len(sample.gpus)} (fake NVML, 2 GPUs, 3 processes)"
        )
        print(f"one NVML pass (2 GPUs):          {per_call_us(nvml.sample):8.1f} us")
        print(f"one host pass (RAM + 4-process tree, cached tree): {per_call_us(host.sample):8.1f} us")
        host_refresh = HostSource(tree.pid, tree_refresh_s=0.0)
        print(
            f"one host pass re-listing the tree (/proc children files): {per_call_us(host_refresh.sample, 300):8.1f} us"
        )
        share, count = cpu_share([nvml, HostSource(tree.pid)], seconds)
        print(
            f"10 Hz for {seconds:.0f} s, NVML + tree: {share:.2f}% of one core ({count} samples)  goal < 1%"
        )
        share, count = cpu_share([HostSource(tree.pid)], seconds / 2)
        print(f"10 Hz, tree only (no GPU):        {share:.2f}% of one core ({count} samples)")
        share, count = cpu_share([NvmlSource(), HostSource(tree.pid)], seconds / 2)
        print(f"10 Hz, real pynvml without driver + tree: {share:.2f}% of one core ({count} samples)")
    finally:
        os.killpg(tree.pid, signal.SIGKILL)
        tree.wait()


if __name__ == "__main__":
    main()
