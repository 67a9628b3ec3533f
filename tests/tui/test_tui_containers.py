"""The memory pane names the container of each process NVML charges GPU memory to.

NVML is the one absent part here: the samples come through vramtui's real NVML code from a
pynvml-shaped driver (test_nvml's FakeDriver: pynvml's own structs), and each PID's /proc/PID/cgroup
is a recorded printout in docker's and podman's real shapes (cgroup v1 and v2; tests/data/attach)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from test_nvml import GIB, MIB, FakeDriver, FakeGpu
from test_tui_support import screen_text, wait_for

from vramtui.core.attach.container import ContainerNames
from vramtui.core.memory.sampling import HostReading, NvmlSource
from vramtui.tui.app import VramtuiApp
from vramtui.tui.panes.memory import MemoryPane

RECORDED = Path(__file__).resolve().parents[1] / "data" / "attach" / "cgroups.jsonl"


def _printout(source_part: str) -> dict:
    records = [json.loads(line) for line in RECORDED.read_text().splitlines() if line.strip()]
    return next(r for r in records if source_part in r["source"])


def _proc(tmp_path: Path, cgroups: dict[int, str]) -> Path:
    for pid, text in cgroups.items():
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "cgroup").write_text(text)
    return tmp_path


async def test_each_gpu_process_row_shows_its_container(tmp_path: Path) -> None:
    docker_v1 = _printout("containerd/containerd/pull/285")
    podman_v2 = _printout("podman/issues/20423")
    host = _printout("needrestart/issues/165")  # dockerd's own cgroup: a host process
    proc = _proc(tmp_path, {4242: docker_v1["cgroup"], 5000: podman_v2["cgroup"], 777: host["cgroup"]})
    gpu = FakeGpu(compute=[(4242, 9 * GIB), (5000, 512 * MIB)], graphics=[(777, 200 * MIB)])
    sample = NvmlSource(FakeDriver([gpu]).module(), cuda_visible_devices=None).sample()
    assert sample is not None and sample.gpus[0].process_bytes == {
        4242: 9 * GIB,
        5000: 512 * MIB,
        777: 200 * MIB,
    }
    # The attached server's tree (its root is 4242): that row is marked as the model.
    tree = HostReading(8 * GIB, 64 * GIB, 0, 0, tree_rss=GIB, tree_pids=(4242,), root_alive=True)
    sample = dataclasses.replace(sample, host=tree)

    app = VramtuiApp(live_sampling=False, remember=False)
    async with app.run_test(size=(200, 50)) as pilot:
        memory = app.query_one(MemoryPane)
        memory.containers = ContainerNames(proc=proc, ask_names=False)  # no docker CLI here to name them
        memory.ingest_from_thread(sample)
        await wait_for(pilot, lambda: "PID 4242" in screen_text(app))
        rows = {
            line.split("PID ")[1].split()[0]: line
            for line in screen_text(app).splitlines()
            if "  PID " in line
        }
        assert f"docker {docker_v1['full_id'][:12]} · model" in rows["4242"]
        assert f"podman {podman_v2['full_id'][:12]}" in rows["5000"]
        assert "on the host" in rows["777"]
        memory.watched_pid = 4242  # the attached server: its tree's row names its container too
        memory.ingest_from_thread(dataclasses.replace(sample, t=sample.t + 0.1))
        rows_text = lambda: memory._shown.get("#mem-lines", "")  # noqa: E731 - the rows as painted
        await wait_for(pilot, lambda: f"in docker {docker_v1['full_id'][:12]}" in rows_text())
        (tree_row,) = [line for line in rows_text().splitlines() if "model process" in line]
        assert tree_row.endswith(f"1 process, GPU 9.0 GiB in docker {docker_v1['full_id'][:12]}")
        assert "9.0 GiB" in rows["4242"] and "512" in rows["5000"]  # each process's own figure
