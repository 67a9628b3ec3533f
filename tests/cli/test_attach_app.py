"""The app on a server vramtui did not start, when that server goes away: the status line says so and
the memory pane keeps what it recorded. Real llama-server, started by the test outside vramtui."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest
from test_attach_cli import _free_port, _start
from test_tui_support import screen_text, wait_for

from vramtui.core.attach import attach
from vramtui.tui.app import VramtuiApp
from vramtui.tui.attached import view_from
from vramtui.tui.panes.log import LogPane
from vramtui.tui.panes.memory import MemoryPane
from vramtui.tui.panes.wizard import WizardPane

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


async def test_the_wizard_on_a_server_that_stopped_answering_says_so_in_the_pane(
    llama_server_bin: Path, tiny_gguf: Path, tmp_path: Path
) -> None:
    port = _free_port()
    argv = [str(llama_server_bin), "-m", str(tiny_gguf), "--host", "127.0.0.1", "--port", str(port)]
    for proc in _start(argv, tmp_path / "server.log", "/health", port):
        view = view_from(attach(f"http://127.0.0.1:{port}", duration_s=0.3))
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        await _pane_says_it_does_not_answer(view, port)


async def _pane_says_it_does_not_answer(view, port: int) -> None:
    app = VramtuiApp(live_sampling=False, remember=False, attached=view)
    async with app.run_test(size=(200, 50)) as pilot:
        pane = app.query_one(WizardPane)
        started = time.monotonic()
        await pilot.press("n")
        await wait_for(pilot, lambda: pane.driver is not None and pane.driver.finished, timeout_s=20)
        assert time.monotonic() - started < 15  # bounded: the health check's short timeout
        said = f"http://127.0.0.1:{port} does not answer its health check"
        assert said in pane.state_text and "Traceback" not in pane.state_text
        assert pane.steps[0].outcome == "error" and pane.proposal is None
        assert said in screen_text(app)
    # CI saw the once-a-second liveness check fire while the app closed, its panes already gone
    # (NoMatches). The same check after the close, on the dead process, must pass quietly.
    app.follower.exited = False
    app.follower._check_alive()
    assert app.follower.exited is False


async def test_the_estimator_takes_the_slots_the_attached_server_reports(
    llama_server_bin: Path, tiny_gguf: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 22 defect 31: a llama-server with 3 slots set by its environment (LLAMA_ARG_N_PARALLEL, as
    container images set it), nothing on its command line: the report took the engine's default (4) and
    the estimator pane its own (parallel 1). Both take the slots its /props and /slots report."""
    monkeypatch.setenv("LLAMA_ARG_N_PARALLEL", "3")
    port = _free_port()
    argv = [str(llama_server_bin), "-m", str(tiny_gguf), "--host", "127.0.0.1", "--port", str(port)]
    argv += ["--ctx-size", "1536"]
    for proc in _start(argv, tmp_path / "server.log", "/health", port):
        attached = attach(str(proc.pid), duration_s=0.3)
        report = attached.to_dict()
        assert "parallel" not in report["params"] and report["endpoints"]["/props"]["slots"] == 3
        assert report["params_assumed"]["parallel"] == 3
        await _estimator_fields(view_from(attached))


async def _estimator_fields(view) -> None:  # type: ignore[no-untyped-def]
    from vramtui.tui.panes.estimator import EstimatorPane

    app = VramtuiApp(live_sampling=False, remember=False, attached=view)
    async with app.run_test(size=(200, 50)) as pilot:
        pane = app.query_one(EstimatorPane)
        await wait_for(pilot, lambda: pane.estimate is not None)
        assert (pane.value("context"), pane.value("parallel")) == ("1536", "3")
        assert pane.estimate.parallel == 3 and pane.estimate.backend == "llama.cpp"
