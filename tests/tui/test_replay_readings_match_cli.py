"""`vramtui --replay` and `vramtui replay` read the same readings from one `record --pid` CSV (QA 7: the
app said 'baseline 64.0 MiB · plateau —' where the CLI said 'baseline n/a, plateau 64 MiB')."""

from __future__ import annotations

from pathlib import Path

import pytest

from vramtui.cli.replay import analyse
from vramtui.core.memory.sampling import ReplaySource
from vramtui.tui.panes.memory_state import MemoryState

HEADER = (
    "timestamp, host.ram_used [MiB], host.ram_total [MiB], host.swap_used [MiB], process.tree_rss [MiB], "
    "process.tree_gpu [MiB], process.pids\n"
)


def _csv(path: Path, rss: list[str]) -> Path:
    rows = [
        f"2026/12/05 05:24:{37 + i // 5:02d}.{(i % 5) * 200:03d}, 622 MiB, 24105 MiB, 0 MiB, {value}, [N/A], "
        f"{0 if value == '[N/A]' else 2}\n"
        for i, value in enumerate(rss)
    ]
    path.write_text(HEADER + "".join(rows))
    return path


@pytest.mark.parametrize(
    "rss",
    [
        ["64 MiB"] * 60,  # attached to a server already up: its flat level is its plateau
        ["3 MiB"] * 10 + ["158 MiB"] * 40 + ["[N/A]"] * 10,  # launched in the recording, then gone
    ],
)
def test_the_app_and_the_cli_read_one_recording_alike(tmp_path: Path, rss: list[str]) -> None:
    path = _csv(tmp_path / "rec.csv", rss)
    cli = analyse(ReplaySource(path).data)["process_tree_rss"]
    state = MemoryState()
    state.ingest_recorded(ReplaySource(path).data)
    app = state.readings("process")
    assert app is not None
    assert (app.baseline_mib, app.plateau_mib) == (cli["baseline_mib"], cli["plateau_mib"])
    assert app.peak_mib == cli["peak_mib"]


def test_a_process_series_says_its_80_percent_line_is_the_host_s(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """QA 7: '80% line 18.83 GiB of 23.54 GiB' beside a 64 MiB process read as the process's own limit."""
    from vramtui.cli import main

    path = _csv(tmp_path / "rec.csv", ["64 MiB"] * 30)
    assert main(["replay", str(path)]) == 0
    assert "80% line of host RAM" in capsys.readouterr().out
    assert main(["replay", str(path), "--json"]) == 0
    import json

    data = json.loads(capsys.readouterr().out)
    assert data["process_tree_rss"]["total_mib"] == data["total_mib"] == 24105


async def test_the_app_s_replay_keeps_the_recording_s_process_beside_live_sampling(tmp_path: Path) -> None:
    """QA 8: with the live sampler on (as `vramtui --replay` runs), its own samples took the place of the
    recording's last one and the process read as not known to run: 'baseline 63 MiB · plateau —'."""
    from test_tui_support import wait_for

    from vramtui.tui.app import VramtuiApp
    from vramtui.tui.panes.memory import MemoryPane

    path = _csv(tmp_path / "rec.csv", ["63 MiB"] * 60)
    cli = analyse(ReplaySource(path).data)["process_tree_rss"]
    app = VramtuiApp(replay_csv=str(path), live_sampling=True, remember=False)
    async with app.run_test(size=(120, 40)) as pilot:
        memory = app.query_one(MemoryPane)
        await wait_for(pilot, lambda: memory.state.count > 0)
        await pilot.pause(0.5)  # a few live samples beside it
        readings = memory.state.readings("process")
    assert readings is not None
    assert (
        (readings.baseline_mib, readings.plateau_mib)
        == (cli["baseline_mib"], cli["plateau_mib"])
        == (None, 63.0)
    )


def test_a_small_process_s_request_is_a_request_not_noise(tmp_path: Path) -> None:
    """QA 8: +20 MiB for 8 samples on a 63 MiB process, then back: 'request peaks none seen' under the
    card's 32 MiB noise floor. A host curve's floor is a share of its own size."""
    rss = ["63 MiB"] * 24 + ["83 MiB"] * 8 + ["63 MiB"] * 28
    path = _csv(tmp_path / "bump.csv", rss)
    cli = analyse(ReplaySource(path).data)["process_tree_rss"]
    assert cli["request_peaks_mib"] == [83.0] and cli["falls_back"] is True
    state = MemoryState()
    state.ingest_recorded(ReplaySource(path).data)
    assert state.readings("process").request_peaks_mib == [83.0]  # the app reads it alike


async def test_the_apps_replay_is_the_recording_alone(tmp_path: Path) -> None:
    """QA 17 F4: `vramtui --replay` sampled this machine too, and its host RAM (1.6 GiB) became the
    recording's peak (935 MiB). As the app is started for a replay, only the file's samples count."""
    from test_tui_support import wait_for

    from vramtui.tui.app import VramtuiApp
    from vramtui.tui.panes.memory import MemoryPane

    path = _csv(tmp_path / "rec.csv", ["63 MiB"] * 60)
    app = VramtuiApp(replay_csv=str(path), remember=False)  # the defaults `vramtui --replay` takes
    assert not app.live_sampling
    async with app.run_test(size=(120, 40)) as pilot:
        memory = app.query_one(MemoryPane)
        await wait_for(pilot, lambda: memory.state.count > 0)
        await pilot.pause(0.5)
        assert memory.state.count == 60


async def test_a_recording_without_host_columns_shows_no_host_ram_row(tmp_path: Path) -> None:
    """QA 19 F11: `vramtui --replay` of a recording with the GPUs and the process's GPU column but no host
    columns showed "host RAM 0 B / N/A": no such figure is in the file, so no such row."""
    from test_tui_support import screen_text, wait_for

    from vramtui.tui.app import VramtuiApp
    from vramtui.tui.panes.memory import MemoryPane

    rows = ["timestamp, index, name, memory.used [MiB], memory.total [MiB], process.tree_gpu [MiB]"]
    for second in range(30):
        rows.append(
            f"2026/12/06 09:00:{second:02d}.000, 0, RTX 4090, {1000 + 100 * second} MiB, 24564 MiB, 0 MiB"
        )
    path = tmp_path / "gpus.csv"
    path.write_text("\n".join(rows) + "\n")
    app = VramtuiApp(replay_csv=str(path), remember=False)
    async with app.run_test(size=(120, 40)) as pilot:
        memory = app.query_one(MemoryPane)
        await wait_for(pilot, lambda: memory.state.count >= 30)
        await pilot.pause(0.3)
        shown = screen_text(app)
        assert "GPU 0" in shown or "RTX 4090" in shown, shown
        assert "host RAM" not in shown, shown


def test_the_app_reads_a_summarised_recording_with_its_spike(tmp_path: Path) -> None:
    """A recording past the reader's threshold (QA: 1 GB took 5.3 GB to replay) reaches the pane summarised:
    its rows counted, its one spike sample drawn."""
    from test_nvsmi_fold import SPIKE, gpu_recording

    from vramtui.core.memory.nvsmi_fold import KEEP_POINTS, held

    rows = KEEP_POINTS + 30_000
    source = ReplaySource(gpu_recording(tmp_path / "long.csv", rows))
    assert source.data.summarised and held(source.data) <= KEEP_POINTS
    assert source.status().message.startswith(f"replay long.csv: {rows} rows")
    state = MemoryState()
    state.ingest_recorded(source.data)
    assert state.count == rows and state.series["gpu:0"].history.peak == SPIKE * 1024**2


def test_a_long_recording_with_a_spike_in_every_stretch_keeps_its_level(tmp_path: Path) -> None:
    """QA 24 F2: past the points the pane reads whole, its curve went in as each stretch's maximum, so a
    spike in every stretch (74 MiB one row in four, 70 MiB between) read as a plateau of 74 where the CLI
    said 70. Each stretch now goes in as its low, its high and its last reading."""
    from vramtui.tui.panes.memory_state import READINGS_POINTS

    rows = 4 * READINGS_POINTS
    lines = []
    for i in range(rows):
        minute, second = divmod(i // 5, 60)
        hour, minute = divmod(minute, 60)
        value = "74 MiB" if i % 4 == 1 else "70 MiB"  # a spike in each stretch the pane reads as one
        lines.append(
            f"2026/12/05 {5 + hour:02d}:{minute:02d}:{second:02d}.{(i % 5) * 200:03d}, 622 MiB, 24105 MiB, "
            f"0 MiB, {value}, [N/A], 2\n"
        )
    path = tmp_path / "long.csv"
    path.write_text(HEADER + "".join(lines))
    cli = analyse(ReplaySource(path).data)["process_tree_rss"]
    state = MemoryState()
    state.ingest_recorded(ReplaySource(path).data)
    app = state.readings("process")
    assert app is not None and cli["plateau_mib"] == 70
    assert (app.plateau_mib, app.peak_mib) == (cli["plateau_mib"], cli["peak_mib"]) == (70, 74)
