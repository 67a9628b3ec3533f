"""The app on a server vramtui did not start, when that server goes away: the status line says so and
the memory pane keeps what it recorded. Real llama-server, started by the test outside vramtui."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest
from test_attach_cli import _free_port, _start
from test_tui_support import screen_text, wait_for

from vramtui.core.attach import attach
from vramtui.tui.app import VramtuiApp
from vramtui.tui.attached import view_from
from vramtui.tui.panes.log import LogPane
from vramtui.tui.panes.memory import MemoryPane

pytestmark = pytest.mark.engine


async def test_the_attached_process_exiting_is_said_and_its_history_kept(
    llama_server_bin: Path, tiny_gguf: Path, tmp_path: Path
) -> None:
    port = _free_port()
    argv = [str(llama_server_bin), "-m", str(tiny_gguf), "--host", "127.0.0.1", "--port", str(port)]
    argv += ["--ctx-size", "1024"]
    for proc in _start(argv, tmp_path / "server.log", "/health", port):
        await _exit_seen(proc)


async def _exit_seen(proc: subprocess.Popen[bytes]) -> None:
    view = view_from(attach(str(proc.pid), duration_s=0.3))
    app = VramtuiApp(remember=False, attached=view, sample_interval_s=0.1)
    async with app.run_test(size=(200, 50)) as pilot:
        memory = app.query_one(MemoryPane)
        series = lambda: memory.state.series.get("process")  # noqa: E731
        await wait_for(pilot, lambda: series() is not None and len(series().values) >= 10)
        await wait_for(pilot, lambda: len(app.query_one(LogPane).view.lines) > 0, timeout_s=20)
        assert "the process exited" not in screen_text(app)
        lines_before = len(app.query_one(LogPane).view.lines)
        proc.send_signal(signal.SIGKILL)  # a crash: nothing of vramtui's stops it
        proc.wait(10)
        await wait_for(pilot, lambda: app.follower.exited, timeout_s=10)
        kept = list(series().values)
        await pilot.pause(1.0)  # sampling goes on after the exit
        status = screen_text(app).splitlines()[-2]
        assert f"PID {proc.pid} (context=1024): the process exited at" in status
        # Nothing recorded is dropped: the curve up to the exit, its values, and the log's lines.
        assert list(series().values)[: len(kept)] == kept and len(kept) >= 10
        assert max(kept) > 10 * 2**20  # the server's RSS (tens of MiB), not an empty series
        assert [e.kind for e in memory.state.events][-1:] == ["exit"]
        assert memory.selected_key() == "process"  # the graph still shows its curve
        assert len(app.query_one(LogPane).view.lines) >= lines_before
