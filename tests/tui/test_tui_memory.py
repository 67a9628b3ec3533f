"""The memory pane's state: MIG instances keep their own curves (NVML in its real shapes, through
the pynvml-shaped driver of test_nvml), and a recorded CSV goes straight into the histories."""

from __future__ import annotations

import io
import math
from pathlib import Path

import pytest
from test_nvml import GIB, FakeDriver, FakeGpu
from test_tui_support import screen_text, wait_for

from vramtui.core.memory.nvsmi_csv import NvsmiWriter, read_nvsmi_csv
from vramtui.core.memory.sampling import GpuReading, HostReading, NvmlSource, Sample
from vramtui.tui.app import VramtuiApp
from vramtui.tui.panes.memory import MemoryPane
from vramtui.tui.panes.memory_state import MemoryState

MIB = 1024**2


def mig_card() -> tuple[FakeGpu, FakeGpu, FakeGpu]:
    instance_a = FakeGpu(name="NVIDIA A100 MIG 3g.40gb", uuid="MIG-1111", total=40 * GIB, used=GIB, util=None)
    instance_b = FakeGpu(name="NVIDIA A100 MIG 3g.40gb", uuid="MIG-2222", total=40 * GIB, used=GIB, util=None)
    parent = FakeGpu(
        name="NVIDIA A100-SXM4-80GB",
        uuid="GPU-cccc",
        total=80 * GIB,
        used=2 * GIB,
        util=None,
        mig_enabled=True,
        mig_slots={0: instance_a, 2: instance_b},
    )
    return parent, instance_a, instance_b


async def test_mig_instances_keep_their_own_curves_beside_their_parents() -> None:
    parent, instance_a, instance_b = mig_card()
    source = NvmlSource(FakeDriver([parent]).module())
    state = MemoryState()
    # A model loads into instance 0 only: the instance climbs to 30 GiB, the parent (which holds both
    # instances) to 31 GiB, instance 2 stays at 1 GiB.
    for step in range(10):
        instance_a.used = (1 + 29 * step // 9) * GIB
        parent.used = instance_a.used + instance_b.used
        sample = source.sample()
        assert sample is not None
        state.ingest(Sample(float(step), sample.gpus, None))
    keys = state.keys()
    assert keys == ["gpu:0", "gpu:0:mig0", "gpu:0:mig2"]
    whole, a, b = (state.series[key] for key in keys)
    assert (whole.history.peak, a.history.peak, b.history.peak) == (31 * GIB, 30 * GIB, GIB)
    assert (whole.total, a.total, b.total) == (80 * GIB, 40 * GIB, 40 * GIB)
    assert len(whole.values) == len(a.values) == len(b.values) == 10  # nobody wrote into another's curve
    assert a.label == "GPU0 MIG0 NVIDIA A100 MIG 3g.40gb"

    app = VramtuiApp(live_sampling=False, remember=False)
    async with app.run_test(size=(120, 40)) as pilot:
        memory = app.query_one(MemoryPane)
        memory.ingest_from_thread(sample)
        memory.repaint(force=True)
        await pilot.pause()
        text = screen_text(app)
        assert "GPU0 MIG0" in text and "GPU0 MIG2" in text and "30.0 GiB / 40.0 GiB" in text


def _recorded_csv() -> str:
    """What `vramtui record` writes for two GPUs and a watched process: 3000 samples at 10 Hz."""
    out = io.StringIO()
    writer = NvsmiWriter(out, with_gpu=True, with_process=True)
    for i in range(3000):
        load = max(0.0, math.sin(i / 400))
        gpus = (
            GpuReading(
                0, "NVIDIA GeForce RTX 4090", "GPU-aaaa", int((1 + 20 * load) * GIB), 24 * GIB, 300 * MIB, 50
            ),
            GpuReading(
                1, "NVIDIA RTX A6000", "GPU-bbbb", int((2 + 40 * load) * GIB), 48 * GIB, 400 * MIB, None
            ),
        )
        host = HostReading(
            int((8 + 4 * load) * GIB), 64 * GIB, 0, 8 * GIB, int((1 + 3 * load) * GIB), tree_pids=(4242,)
        )
        writer.write(Sample(1_764_475_200 + i / 10, gpus, host))
    return out.getvalue()


def test_a_recorded_csv_fills_the_histories_as_samples_would_without_building_them() -> None:
    data = read_nvsmi_csv(io.StringIO(_recorded_csv()))
    by_samples = MemoryState()
    by_samples.ingest_many(list(data.samples))
    fast = MemoryState()
    data = read_nvsmi_csv(io.StringIO(_recorded_csv()))  # a fresh read: no Sample built for this one
    fast.ingest_recorded(data)
    assert data._samples is None  # the fast path built no Sample per row
    keys = fast.keys()
    assert keys == by_samples.keys() == ["gpu:0", "gpu:1", "process", "host"]
    for key in keys:
        ours, theirs = fast.series[key], by_samples.series[key]
        assert ours.label == theirs.label and ours.total == theirs.total
        assert ours.history.peak == theirs.history.peak and ours.history.count == theirs.history.count
        assert ours.history.buckets(80) == theirs.history.buckets(80)
        assert list(ours.values) == list(theirs.values) and list(ours.times) == list(theirs.times)
        assert fast.readings(key) == by_samples.readings(key)
    # the recording's process column says it still ran at the last row (as `vramtui replay` reads it,
    # QA 7); samples fed one by one leave that unknown
    from dataclasses import replace

    assert by_samples.latest is not None and by_samples.latest.host is not None
    assert fast.latest == replace(by_samples.latest, host=replace(by_samples.latest.host, root_alive=True))
    assert fast.count == data.rows


async def test_replay_in_the_app_shows_the_recorded_curve(tmp_path: Path) -> None:
    path = tmp_path / "record.csv"
    path.write_text(_recorded_csv())
    app = VramtuiApp(replay_csv=str(path), live_sampling=False, remember=False)
    async with app.run_test(size=(120, 40)) as pilot:
        memory = app.query_one(MemoryPane)
        await wait_for(pilot, lambda: memory.state.count > 0 and memory.source_notes)
        memory.repaint(force=True)
        await pilot.pause()
        text = screen_text(app)
        assert "replay record.csv: 6000 rows, 2 GPU(s)" in text
        assert "GPU1" in text and "model process" in text
        assert memory.state.series["gpu:1"].history.peak == pytest.approx(42 * GIB, rel=0.01)


async def test_a_budgeted_process_without_a_gpu_is_drawn_against_its_budget(tmp_path: Path) -> None:
    """No GPU (this machine): a model process under a 1.5 GiB budget is drawn on 0..budget × 1.1, with
    the budget line, not on 0..host RAM where a few hundred MiB are a flat line at the bottom. A new
    peak over that top raises it; with a GPU in sight every series keeps its 0..total scale."""
    import subprocess
    import sys

    from vramtui.tui.panes.memory import BUDGET_HEADROOM
    from vramtui.tui.widgets.graph import MemoryGraph, threshold_row

    budget = 1536 * MIB
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time; x = bytearray(300 * 1024**2); x[::4096] = b'1' * len(x[::4096]); time.sleep(60)",
        ]
    )
    try:
        app = VramtuiApp(live_sampling=True, remember=False)
        async with app.run_test(size=(200, 50)) as pilot:
            memory = app.query_one(MemoryPane)
            graph = app.query_one(MemoryGraph)
            memory.budget = float(budget)
            app.watch_pid(holder.pid)
            await wait_for(
                pilot,
                lambda: (
                    "process" in memory.state.series
                    and (memory.state.series["process"].history.peak or 0) > 250 * MIB
                ),
                timeout_s=20,
            )
            memory.repaint(force=True)
            await pilot.pause()
            assert memory.selected_key() == "process"
            host_total = memory.state.series["host"].total
            assert graph.total == pytest.approx(budget * BUDGET_HEADROOM) and graph.total < host_total
            assert graph.safety_share is None  # 80% of this top is no card's limit
            text = screen_text(app)
            assert "budget 1.5 GiB" in text and "80% " not in text
            # The curve stands clear of the floor: ~300 MiB of ~1.65 GiB is about a fifth of the height.
            height = graph.size.height
            level = max(graph._levels)
            assert level >= height * 8 * 0.15
            assert threshold_row(budget / graph.total, height) == int(height / BUDGET_HEADROOM)

            # A peak above budget × 1.1 raises the top to the peak (fixed: the top never follows the
            # data back down).
            series = memory.state.series["process"]
            peak_t = series.times[-1] + 0.05
            memory.state.ingest(
                Sample(
                    peak_t, (), HostReading(GIB, int(host_total), 0, 0, 2 * 1024 * MIB, (holder.pid,), True)
                )
            )
            memory.repaint(force=True)
            assert graph.total == 2 * 1024 * MIB

            # The host series keeps 0..total, and so does everything once a GPU reports.
            assert memory.graph_scale("host") == (host_total, 0.8)
            memory.state.ingest(
                Sample(
                    peak_t + 0.1,
                    (GpuReading(0, "NVIDIA GeForce RTX 4090", "GPU-1", 2 * GIB, 24 * GIB),),
                    None,
                )
            )
            assert memory.graph_scale("process") == (host_total, 0.8)
            assert memory.graph_scale("gpu:0") == (24 * GIB, 0.8)
    finally:
        holder.kill()
        holder.wait()


async def test_the_budget_is_drawn_on_the_model_process_never_on_the_machines_ram(
    tiny_gguf: Path,
) -> None:
    """Issue 22 defect 27: a profile's `memory_budget` limits the model's process tree (for a launched
    server, its address space). It was drawn as a line on the host RAM chart too (the whole machine's
    memory, 23 GiB here), where it means nothing. It belongs on the model process's own series, named
    for what it limits."""
    import subprocess
    import sys

    from vramtui.core.launch.profile import Profile
    from vramtui.core.units import format_bytes
    from vramtui.tui.widgets.graph import MemoryGraph

    budget = 1024 * MIB
    profile = Profile(
        backend="llama.cpp", model=str(tiny_gguf), params={"context": 512}, memory_budget=budget
    )
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time; x = bytearray(200 * 1024**2); x[::4096] = b'1' * len(x[::4096]); time.sleep(60)",
        ]
    )
    try:
        app = VramtuiApp(live_sampling=True, remember=False)
        async with app.run_test(size=(200, 50)) as pilot:
            memory = app.query_one(MemoryPane)
            graph = app.query_one(MemoryGraph)
            app.follow_profile(profile)
            app.watch_pid(holder.pid)
            await wait_for(
                pilot,
                lambda: "process" in memory.state.series and "host" in memory.state.series,
                timeout_s=20,
            )
            shown = f"budget {format_bytes(budget, 1)}"
            memory.selected = "host"
            memory.repaint(force=True)
            await pilot.pause()
            host_total = memory.state.series["host"].total
            assert graph.total == host_total and host_total > budget  # the machine's RAM, 0..total
            text = screen_text(app)
            assert graph.budget is None and shown not in text, text
            assert "host RAM used: baseline" in text  # the readings say whose they are

            memory.selected = "process"
            memory.repaint(force=True)
            await pilot.pause()
            assert graph.budget == budget
            text = screen_text(app)
            # A launched server's budget caps its address space (the launcher's rlimit), not its RSS.
            assert f"address-space {shown}" in text
            assert "process tree RSS (host): baseline" in text
    finally:
        holder.kill()
        holder.wait()


async def test_a_process_with_no_budget_and_no_gpu_is_drawn_on_its_own_peak() -> None:
    """QA 6: `vramtui --replay` of a `record --pid` recording drew a 3 -> 172 MiB server on the host's
    23.5 GiB: a flat line. With no budget and no GPU it is drawn on 0..its peak x 1.1."""
    app = VramtuiApp(live_sampling=False, remember=False)
    async with app.run_test(size=(200, 50)) as pilot:
        memory = app.query_one(MemoryPane)
        host_total = 24 * GIB
        for tick, rss in enumerate((3, 158, 158, 172, 172)):
            memory.state.ingest(
                Sample(100.0 + tick, (), HostReading(GIB, host_total, 0, 0, rss * MIB, (4242,), True))
            )
        memory.repaint(force=True)
        await pilot.pause()
        assert memory.graph_scale("process") == (pytest.approx(172 * MIB * 1.1), None)
        assert memory.graph_scale("host") == (host_total, 0.8)
