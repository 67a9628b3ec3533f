"""The app on a server vramtui did not start (`vramtui attach TARGET`): the memory pane follows its
process tree, the log pane its log (a file it writes, or `docker logs -f` / `journalctl -fu`), and
its command line is the current profile: the estimator's fields and the status line.

Nothing here signals the server: quitting the app leaves it running (it is no session of the app).
"""

from __future__ import annotations

import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psutil

if TYPE_CHECKING:
    from vramtui.tui.app import VramtuiApp


@dataclass
class AttachedView:
    """What the app shows of an attached server (built by the CLI from `core.attach.attach`)."""

    target: str
    pid: int | None
    url: str | None
    backend: str | None  # the engine's name, for the log engine; None: unknown
    params: dict[str, object] = field(default_factory=dict)
    # What it runs with where its command line says nothing: its endpoints' word (llama-server's slots),
    # else the engine's defaults (the estimator's fields)
    assumed: dict[str, object] = field(default_factory=dict)
    model: str | None = None
    log_file: str | None = None  # a file it writes to (followed)
    log_follow: list[str] | None = None  # docker logs -f NAME, journalctl -fu UNIT -o cat
    profile: Any = None  # a core Profile when its command line could be rebuilt
    running: Any = None  # the core.attach Running the wizard restarts or takes over (with `profile`)
    keep: tuple[str, ...] = ()  # settings the wizard leaves as they are (--keep)
    log_given: str | None = None  # --log FILE: the wizard reads each restart's lines from it
    restart_timeout_s: float = 300.0  # how long the wizard waits for the user's restart
    bill_lines: list[str] = field(default_factory=list)  # its bill reconciled over the attach's watch
    bill_render: Any = None  # the bill's lines for a label column this wide (a narrow pane)

    def describe(self) -> str:
        """`attached: llama.cpp tiny.gguf, PID 123 (context=1024, parallel=2)`: the status line."""
        name = Path(self.model).name if self.model else "model n/a"
        params = ", ".join(f"{k}={v}" for k, v in self.params.items()) or "engine defaults"
        pid = f"PID {self.pid}" if self.pid is not None else "PID not seen"
        return f"attached: {self.backend or 'unknown engine'} {name}, {pid} ({params})"


def view_from(
    attached: Any, *, budget: int | None = None, keep: tuple[str, ...] = (), log: str | None = None
) -> AttachedView:
    """The app's view of a `core.attach.Attached`; `budget` (bytes): what the wizard holds it to."""
    from vramtui.core.attach.restart import attached_profile, running_from
    from vramtui.core.errors import VramtuiError

    report = attached.to_dict()
    profile = running = None
    try:
        running = running_from(attached)
        profile = attached_profile(running, budget)
    except VramtuiError:
        pass  # an engine vramtui cannot rebuild: the params shown are still what its command line said
    log_file = report["log_source"] if attached.target.log_follow is None else None
    bill = attached.bill()
    return AttachedView(
        target=report["target"],
        pid=report["pid"],
        url=report["url"],
        backend=report["backend"],
        params=dict(report["params"]),
        assumed=dict(report["params_assumed"]),
        model=report["model"],
        log_file=log_file,
        log_follow=attached.target.log_follow,
        profile=profile,
        running=running if profile is not None else None,
        keep=tuple(keep),
        log_given=log,
        bill_lines=bill.lines() if bill is not None else [],
        bill_render=bill.lines if bill is not None else None,
    )


def attach_view(pid: int) -> AttachedView:
    """The view of a server picked in the memory pane's table (a short look; the app samples after)."""
    from vramtui.core.attach import attach

    return view_from(attach(str(pid), duration_s=0.3))


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for its parent to reap it has exited: it holds no memory)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


class AttachedFollower:
    """Follows one attached server inside the app; `stop()` ends only what vramtui started (the log
    command), never the server."""

    def __init__(self, app: VramtuiApp, view: AttachedView) -> None:
        self.app = app
        self.view = view
        self._log_proc: subprocess.Popen[bytes] | None = None
        self.exited = False
        self.taken_over = False  # the wizard stops it with the user's yes: its exit is ours

    def start(self) -> None:
        from vramtui.tui.panes.estimator import EstimatorPane
        from vramtui.tui.panes.log import LogPane
        from vramtui.tui.panes.wizard import WizardPane

        view = self.view
        if view.pid is not None:
            self.app.watch_pid(view.pid)
        if view.profile is not None:
            self.app.query_one(EstimatorPane).prefill_from_profile(view.profile, assumed=view.assumed)
        self.app.query_one(WizardPane).attach_server(view)  # n: its wizard, the two ways
        log = self.app.query_one(LogPane)
        if view.log_file is not None and Path(view.log_file).is_file():
            log.open_file(Path(view.log_file), follow=True)
        elif view.log_follow:
            feed = log.open_stream(" ".join(view.log_follow), backend=view.backend)
            threading.Thread(target=self._pump, args=(feed,), name="vramtui-attach-log", daemon=True).start()
        else:
            feed = log.open_stream(view.target)
            feed.push(f"vramtui: no log for {view.target}: pass --log FILE (its output goes to no file)")
        if view.bill_lines:  # after the feed: a new feed clears the pane's last bill
            from vramtui.tui.messages import BillReconciled

            title = "the bill at attach — estimate for its settings, what its log printed, what it holds:"
            log.post_message(BillReconciled(view.bill_lines, title, view.bill_render))
        self.app.set_interval(1.0, self._check_alive)

    def _pump(self, feed: Any) -> None:
        """Run the log command (ours) and push its lines; it ends when the app stops it."""
        assert self.view.log_follow is not None
        try:
            proc = subprocess.Popen(
                self.view.log_follow,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        except OSError as error:
            feed.push(f"vramtui: cannot run {self.view.log_follow[0]}: {error.strerror or error}")
            feed.end(None)
            return
        self._log_proc = proc
        assert proc.stdout is not None
        for raw in proc.stdout:
            feed.push(raw.decode("utf-8", "replace").rstrip("\n"))
        feed.end(None)

    def _check_alive(self) -> None:
        pid = self.view.pid
        if pid is None or self.exited or _alive(pid):
            return
        from vramtui.tui.panes.memory import MemoryPane

        panes = self.app.query(MemoryPane)
        if not panes:  # the app is closing: its panes are gone before its timers stop
            return
        self.exited = True
        from vramtui.core.memory.readings import Event

        now = time.time()
        # On the curve: the readings then tell what stayed held after it (a leak, another process).
        panes.first().add_event(Event(now, "exit", f"attached PID {pid} exited"))
        when = time.strftime("%H:%M:%S", time.localtime(now))
        who = "stopped by vramtui with your yes, to relaunch it" if self.taken_over else "not by vramtui"
        self.app.launch_note = (
            f"{self.view.describe()}: the process exited at {when} ({who}); its memory history and log "
            "stay on screen"
        )
        self.app.update_status()

    def stop(self) -> None:
        proc = self._log_proc
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
