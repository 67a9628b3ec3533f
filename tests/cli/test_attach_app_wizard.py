"""The wizard pane on a server vramtui did not start (`vramtui attach TARGET`), driven with Textual's
pilot on a real llama-server the test starts itself, outside vramtui, logging to a file.

The pane shows the proposed change and the exact changed command; "take it over" asks first and a
no leaves the process running; "restart it yourself" waits while the test (as a user would) stops
the server and starts the shown command; the pane sees the new PID on the same port and verifies it
with the same core code as `vramtui wizard --attach`, and the record keeps the step.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import psutil
import pytest
from test_attach_cli import _free_port, _start
from test_attach_wizard import _rss_mib
from test_tui_support import screen_text, wait_for

from vramtui.core.attach import attach
from vramtui.core.attach.cmdline import read_command
from vramtui.core.wizard.steprecord import open_session
from vramtui.tui.app import VramtuiApp
from vramtui.tui.attached import view_from
from vramtui.tui.panes.log import LogPane
from vramtui.tui.panes.wizard import WizardPane
from vramtui.tui.screens import ConfirmTakeOver

pytestmark = pytest.mark.engine


@pytest.fixture(autouse=True)
def isolated_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME"):
        monkeypatch.setenv(name, str(tmp_path / name.lower()))
    monkeypatch.setenv("VRAMTUI_CONFIG_DIR", str(tmp_path / "config"))


@pytest.fixture
def server_8k(llama_server_bin: Path, tiny_gguf: Path, tmp_path: Path):
    port = _free_port()
    argv = [str(llama_server_bin), "-m", str(tiny_gguf), "--host", "127.0.0.1", "--port", str(port)]
    argv += ["--ctx-size", "8192", "--parallel", "1"]
    for proc in _start(argv, tmp_path / "server.log", "/health", port):
        yield proc, port


def _proposal_text(pane: WizardPane) -> str:
    return str(pane.query_one("#wiz-proposal").content)


async def test_the_pane_proposes_asks_before_a_take_over_and_verifies_your_restart(
    server_8k, tmp_path: Path
) -> None:
    proc, port = server_8k
    budget = int(_rss_mib(proc.pid) - 15)  # over it now; a smaller context brings it under
    view = view_from(
        attach(f"http://127.0.0.1:{port}", duration_s=0.3), budget=budget * 2**20, keep=("kv_dtype",)
    )
    record = tmp_path / "session.jsonl"
    app = VramtuiApp(live_sampling=False, remember=False, attached=view)
    restarted: list = []
    try:
        await _drive(app, proc, port, record, tmp_path, restarted, "/health", {"parallel": 1})
    finally:
        for gen in restarted:
            gen.close()  # the test stops what it started


async def test_the_pane_verifies_your_restart_of_a_llama_cpp_python_server_by_pid(
    tiny_gguf: Path, tmp_path: Path
) -> None:
    pytest.importorskip("llama_cpp.server.app")
    port = _free_port()
    argv = [sys.executable, "-m", "llama_cpp.server", "--model", str(tiny_gguf), "--host", "127.0.0.1"]
    argv += ["--port", str(port), "--n_ctx", "8192"]
    restarted: list = []
    for proc in _start(argv, tmp_path / "server.log", "/v1/models", port):
        budget = int(_rss_mib(proc.pid) - 15)
        view = view_from(
            attach(str(proc.pid), duration_s=0.3), budget=budget * 2**20, keep=("kv_dtype", "flash_attn")
        )
        app = VramtuiApp(live_sampling=False, remember=False, attached=view)
        try:
            await _drive(app, proc, port, tmp_path / "session.jsonl", tmp_path, restarted, "/v1/models", {})
        finally:
            for gen in restarted:
                gen.close()


async def _drive(
    app, proc, port: int, record: Path, tmp_path: Path, restarted: list, ready: str, others: dict
) -> None:
    """Propose, copy, take over and say no, restart it yourself: the whole first test's path."""
    view = app.attached
    async with app.run_test(size=(200, 50)) as pilot:
        pane = app.query_one(WizardPane)
        assert "press n" in pane.state_text
        app.action_show_pane("wizard")  # what n does first; the pane's keys act while it has focus
        pane.start_attached(record_path=record, restart_timeout_s=120)
        await wait_for(pilot, lambda: pane.proposal is not None and not pane.busy, timeout_s=90)
        proposal = pane.proposal
        assert proposal.param == "context" and proposal.from_ == 8192 and proposal.to < 8192
        change = pane.driver.change_for(proposal)
        changed = read_command(change.argv)
        assert changed.params == {"context": proposal.to, **others} and changed.port == port
        shown = _proposal_text(pane)
        assert f"command: {change.shell}" in shown  # the exact command, whole, to copy
        assert f"waits for a new PID on port {port}" in shown
        assert "Restart it yourself (n)" in screen_text(app) and "Take it over (o)" in screen_text(app)
        await pilot.press("c")
        assert app.clipboard == change.shell

        # Take it over, then no: nothing is stopped, the same proposal stays.
        await pilot.press("o")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmTakeOver))
        assert f"Stop PID {proc.pid}, which vramtui did not start" in app.screen.question
        await pilot.press("n")
        await wait_for(pilot, lambda: not isinstance(app.screen, ConfirmTakeOver))
        await pilot.pause(1.0)
        assert proc.poll() is None and psutil.pid_exists(proc.pid)
        assert pane.proposal is proposal and not pane.busy and not pane.driver.runner.allowed

        # Restart it yourself: the pane waits; the test restarts it with the shown command.
        await pilot.press("n")
        await wait_for(pilot, lambda: pane.driver.busy_waiting and "waiting for you" in pane.state_text)
        assert proc.poll() is None  # waiting stops nothing
        proc.send_signal(signal.SIGINT)
        await asyncio.to_thread(proc.wait, 15)
        assert change.env == {}  # the command line carries the change
        restarted.append(_start(change.argv, tmp_path / "restarted.log", ready, port))
        new = await asyncio.to_thread(next, restarted[0])
        await wait_for(pilot, lambda: len(pane.steps) == 2, timeout_s=120)
        step = pane.steps[1]
        assert step.outcome == "works", (step.notes, pane.state_text)
        seen = f"new process {new.pid}: its command line sets context = {proposal.to}"
        assert seen in step.notes
        await wait_for(pilot, lambda: pane.driver.finished, timeout_s=30)
        assert seen in pane.state_text
        assert f"IT RUNS with context={proposal.to}" in pane.state_text
        assert f"as PID {new.pid}, which vramtui leaves running" in pane.state_text
        # The status line and the memory pane follow the new process; the log pane its new file.
        status = screen_text(app)
        runs_with = ", ".join(f"{k}={v}" for k, v in changed.params.items())
        assert f"PID {new.pid} ({runs_with})" in status
        assert app.query_one("#memory").watched_pid == new.pid
        estimator = app.query_one("#est-context").value  # the estimator holds what it runs now
        assert estimator.replace(",", "") == str(proposal.to)
        assert view.log_file == str(tmp_path / "restarted.log")
        assert new.poll() is None
    assert new.poll() is None  # quitting the app leaves the restarted server running
    session = open_session(record)
    assert session.success and [s["outcome"] for s in session.steps] == ["first_run", "works"]


async def test_take_it_over_with_a_yes_relaunches_under_vramtui_as_the_apps_model(
    server_8k, tmp_path: Path
) -> None:
    proc, port = server_8k
    budget = int(_rss_mib(proc.pid) - 15)
    view = view_from(attach(str(proc.pid), duration_s=0.3), budget=budget * 2**20, keep=("kv_dtype",))
    app = VramtuiApp(live_sampling=False, remember=False, attached=view)
    async with app.run_test(size=(200, 50)) as pilot:
        pane = app.query_one(WizardPane)
        await pilot.press("n")  # the app's key: the wizard pane, step 0 on the running server
        await wait_for(pilot, lambda: pane.proposal is not None and not pane.busy, timeout_s=90)
        proposal = pane.proposal
        await pilot.press("o")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmTakeOver))
        await pilot.press("y")
        await wait_for(pilot, lambda: pane.driver.finished, timeout_s=120)
        assert proc.wait(5) is not None  # stopped: the user said yes
        assert pane.steps[-1].outcome == "works", pane.state_text
        assert "under vramtui, as the app's model" in pane.state_text
        await wait_for(pilot, lambda: app.session is not None and app.session.running)
        ours = psutil.Process(app.session.pid)
        assert ours.ppid() == os.getpid()  # launched by vramtui (this test's process is the app)
        assert read_command(ours.cmdline()).params == {"context": proposal.to, "parallel": 1}
        assert any(c.laddr.port == port for c in ours.net_connections(kind="tcp"))  # the same port
        assert any("taken over" in n for n in pane.driver.runner.notes)
        assert app.running_models()  # quitting asks first: it stops what vramtui now runs
    psutil.wait_procs([ours], timeout=15)
    assert not ours.is_running()  # the app's end stopped the server it took over


async def test_k_stops_waiting_for_a_restart_and_the_change_is_proposed_again(
    server_8k, tmp_path: Path
) -> None:
    proc, port = server_8k
    budget = int(_rss_mib(proc.pid) - 15)
    view = view_from(attach(str(proc.pid), duration_s=0.3), budget=budget * 2**20, keep=("kv_dtype",))
    view.restart_timeout_s = 45  # attach --restart-timeout 45
    record = tmp_path / "r.jsonl"
    app = VramtuiApp(live_sampling=False, remember=False, attached=view)
    async with app.run_test(size=(200, 50)) as pilot:
        pane = app.query_one(WizardPane)
        app.action_show_pane("wizard")
        pane.start_attached(record_path=record)
        await wait_for(pilot, lambda: pane.proposal is not None and not pane.busy, timeout_s=90)
        await pilot.press("n")
        await wait_for(pilot, lambda: pane.driver.busy_waiting and "Stop waiting (k)" in screen_text(app))
        assert "(up to 45 s; k stops waiting)" in pane.state_text
        await pilot.press("k")  # the footer's Skip: while waiting, it stops waiting
        await wait_for(pilot, lambda: len(pane.steps) == 2 and pane.proposal is not None, timeout_s=10)
        step = pane.steps[-1]
        assert step.outcome == "error"
        assert f"stopped waiting for a restart at http://127.0.0.1:{port}" in step.notes[0]
        assert pane.proposal.param == "context"  # proposed again: nothing was applied
        assert proc.poll() is None  # nothing was stopped
    session = open_session(record)
    assert [s["outcome"] for s in session.steps] == ["first_run", "error"]


def _lines(path: Path) -> int:
    return path.read_bytes().count(b"\n")


def _requests(port: int, count: int) -> None:
    import json
    import urllib.request

    for _ in range(count):
        body = json.dumps({"prompt": "hi", "n_predict": 2}).encode()
        request = urllib.request.Request(f"http://127.0.0.1:{port}/completion", data=body)
        with urllib.request.urlopen(request, timeout=30) as answer:
            answer.read()


async def test_a_restart_without_the_change_is_not_applied_in_the_pane(server_8k, tmp_path: Path) -> None:
    """The user restarts the server as it was: the new PID is seen, its command line read, and the
    step is `not_applied` (the wizard stops there, as `wizard --attach` does)."""
    proc, port = server_8k
    budget = int(_rss_mib(proc.pid) - 15)
    view = view_from(attach(str(proc.pid), duration_s=0.3), budget=budget * 2**20, keep=("kv_dtype",))
    app = VramtuiApp(live_sampling=False, remember=False, attached=view)
    restarted: list = []
    try:
        async with app.run_test(size=(200, 50)) as pilot:
            pane = app.query_one(WizardPane)
            app.action_show_pane("wizard")
            pane.start_attached(record_path=tmp_path / "r.jsonl", restart_timeout_s=120)
            await wait_for(pilot, lambda: pane.proposal is not None and not pane.busy, timeout_s=90)
            proposal = pane.proposal
            await pilot.press("n")
            await wait_for(pilot, lambda: pane.driver.busy_waiting)
            await asyncio.to_thread(_requests, port, 6)  # the old log grows longer than the new one
            log = app.query_one(LogPane)
            await wait_for(pilot, lambda: len(log.view.lines) == _lines(tmp_path / "server.log"))
            old_lines = len(log.view.lines)
            proc.send_signal(signal.SIGINT)
            await asyncio.to_thread(proc.wait, 15)
            # Unchanged, and `> server.log` again: the same file, truncated for the new process.
            restarted.append(_start(list(proc.args), tmp_path / "server.log", "/health", port))
            same = await asyncio.to_thread(next, restarted[0])
            await wait_for(pilot, lambda: len(pane.steps) == 2 and pane.driver.finished, timeout_s=120)
            step = pane.steps[1]
            assert step.outcome == "not_applied"
            assert f"(PID {same.pid}) runs with context = 8192, not {proposal.to}" in step.notes[0]
            assert "the change was not made" in pane.state_text
            # Read afresh from its start: a reader left at the old end would still count the old lines.
            await wait_for(pilot, lambda: len(log.view.lines) == _lines(tmp_path / "server.log"))
            assert len(log.view.lines) < old_lines
            assert same.poll() is None
    finally:
        for gen in restarted:
            gen.close()
