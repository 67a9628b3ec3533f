"""The memory pane's table of every model server here, against a real llama-server on loopback; the GPU
column from NVML's per-process data in its real shapes (the fake driver of tests/core/memory/test_nvml.py,
given the real server's PID). Enter on its row attaches the app to it."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from test_nvml import GIB, FakeDriver, FakeGpu
from test_tui_support import wait_for

from vramtui.core.attach.servers import snapshot
from vramtui.core.memory.sampling import NvmlSource
from vramtui.tui.app import VramtuiApp
from vramtui.tui.panes.memory import MemoryPane
from vramtui.tui.widgets.servertable import COLUMNS, ServerTable

pytestmark = pytest.mark.engine


@pytest.fixture
def server(llama_server_bin: Path, tiny_gguf: Path, tmp_path: Path) -> Iterator[tuple[int, int]]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    log = (tmp_path / "server.log").open("wb")
    argv = [str(llama_server_bin), "-m", str(tiny_gguf), "--port", str(port), "-c", "512", "-np", "2"]
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        yield proc.pid, port
    finally:
        proc.kill()
        proc.wait(10)
        log.close()


async def test_the_table_lists_the_server_with_its_card_share_and_enter_attaches(
    server: tuple[int, int],
) -> None:
    pid, port = server
    driver = FakeDriver([FakeGpu(compute=[(pid, 3 * GIB)], used=3 * GIB)])
    app = VramtuiApp(live_sampling=False, remember=False)
    app.server_scan = lambda: snapshot(nvml=NvmlSource(module=driver.module()), bills=False)
    async with app.run_test(size=(200, 60)) as pilot:
        table = app.query_one(MemoryPane).query_one(ServerTable)
        await wait_for(pilot, lambda: str(pid) in {key.value for key in table.rows}, timeout_s=30)
        # llama-server at its default verbosity prints no buffer sizes: the bill is the estimate, said so

        def cells() -> dict[str, str]:
            return table.cells[str(pid)]  # every column's full text; a narrow pane shows fewer

        await wait_for(pilot, lambda: "(estimate)" in cells()["bill"], timeout_s=30)
        row = cells()
        assert row["engine"] == "llama.cpp" and row["model"] == "tiny-f16.gguf" and row["port"] == str(port)
        assert row["settings"].startswith("ctx 512, slots 2") and row["GPU"] == "0:3.0 GiB"
        # the memory comes before the settings and the PID; a narrow pane gives up cells, never the PID
        assert list(COLUMNS[:5]) == ["engine", "model", "GPU", "host", "bill"]
        assert table.get_row(str(pid))[-1] == str(pid)
        assert "GPU 0 free" in str(table.border_title)

        table.focus()
        table.move_cursor(row=table.get_row_index(str(pid)))
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.attached is not None and app.attached.pid == pid, timeout_s=30)
        assert app.query_one(MemoryPane).watched_pid == pid
        assert app.attached.params["context"] == 512
        await wait_for(pilot, lambda: "attached: llama.cpp tiny-f16.gguf" in (app.launch_note or ""))
    assert subprocess.run(["kill", "-0", str(pid)], check=False).returncode == 0, "attaching stopped it"


async def test_the_estimator_pane_applies_the_calibration_of_earlier_runs_as_the_cli_does(
    tiny_gguf: Path, llama_server_bin: Path
) -> None:
    """A real llama-server run on the CPU leaves its record in this test's run store; the pane's estimate for
    the same model is then the CLI's, calibrated, and says so."""
    import json
    import sys

    from textual.widgets import Select

    from vramtui.core.launch.launcher import run_check
    from vramtui.core.launch.profile import Profile
    from vramtui.tui.panes.estimator import EstimatorPane

    params = {"context": 1024}
    profile = Profile(
        backend="llama.cpp", model=str(tiny_gguf), params=params, port=0, program=str(llama_server_bin)
    )
    result = run_check(profile)
    assert result.ready
    cli = subprocess.run(
        [
            sys.executable,
            "-m",
            "vramtui",
            "estimate",
            str(tiny_gguf),
            "--ctx",
            "1024",
            "--parallel",
            "1",
            "--cpu",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    said = json.loads(cli.stdout)
    assert said["calibration"]["runs"] == 1
    app = VramtuiApp(live_sampling=False, remember=False)
    async with app.run_test(size=(200, 60)) as pilot:
        pane = app.query_one(EstimatorPane)
        pane.query_one("#est-backend", Select).value = "llama.cpp"
        pane.query_one("#est-runs_on", Select).value = "cpu"
        pane.set_value("context", "1024")
        pane.set_value("parallel", "1")  # as the CLI was told (empty: the engine's default, 4 slots)
        pane.set_value("model", str(tiny_gguf))
        await wait_for(
            pilot, lambda: pane.estimate is not None and pane.calibration is not None, timeout_s=30
        )
        await pilot.pause()
        assert pane.estimate.total_bytes == said["total_bytes"]
        shown = str(pane.query_one("#est-result").render())
        assert "calibrated from 1 run on cpu" in shown
