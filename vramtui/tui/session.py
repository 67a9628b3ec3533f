"""One model server the app launched: its lifecycle in a thread, its log into the log pane.

The launcher (`core.launcher.ModelServer`) owns the process group, readiness, budgets and reaping;
this adapter only runs it off the UI thread and tells the app what changed through messages.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual.message import Message

from vramtui.core.errors import VramtuiError
from vramtui.tui.panes.log_header import FIRST_MOVE
from vramtui.tui.words import failure_words, stage_words

if TYPE_CHECKING:
    from vramtui.tui.app import VramtuiApp

READY_TIMEOUT_S = 300.0
BILL_AFTER_READY_S = 3.0  # the plateau after ready: compute buffers and warm-up allocations are in


def finished_check(server: Any, message: str = "") -> Any:
    """The verdict `vramtui run` gives a server that failed or ended (a CheckResult): the status line
    says it, and the wizard takes it as its first step instead of launching the same profile again."""
    from vramtui.core.launch.launcher import _result

    return _result(server, None, message)


class SessionState(Message):
    """The model's state changed (started, ready, failed, exited, stopped)."""

    def __init__(self, state: str, pid: int | None = None, event: Any = None) -> None:
        super().__init__()
        self.state = state
        self.pid = pid
        self.event = event


class SessionRestart(Message):
    """The old server is stopped (a relaunch): start this session again, on the UI thread."""

    def __init__(self, session: ModelSession) -> None:
        super().__init__()
        self.session = session


class ModelSession:
    """Launch, watch, stop and relaunch one profile; the app holds at most one."""

    def __init__(self, app: VramtuiApp, profile: Any) -> None:
        self.app = app
        self.profile = profile
        self.server: Any = None
        self.state = "idle"  # idle | starting | ready | failed | exited | stopped
        self.returncode: int | None = None
        self.check: Any = None  # the launcher's verdict once the launch failed or the server ended
        self._lock = threading.Lock()
        self._generation = 0

    @classmethod
    def from_profile(cls, app: VramtuiApp, profile_or_path: Any) -> ModelSession:
        from vramtui.core.launch.profile import load_profile

        profile = (
            load_profile(Path(profile_or_path))
            if isinstance(profile_or_path, str | Path)
            else profile_or_path
        )
        if profile is None:
            raise VramtuiError("no profile to launch")
        return cls(app, profile)

    @property
    def running(self) -> bool:
        server = self.server
        return server is not None and self.state in ("starting", "ready") and server.pid is not None

    @property
    def pid(self) -> int | None:
        return None if self.server is None else self.server.pid

    def describe(self, *, short: bool = False) -> str:
        """`llama-cpp-python tiny: ready (pid 123)`; `short` leaves the backend out (a narrow status line)."""
        label = getattr(self.profile, "name", None) or Path(str(getattr(self.profile, "model", "model"))).name
        backend = "" if short else getattr(getattr(self.profile, "backend", None), "name", "")
        where = f"{backend} {label}".strip()
        if self.state in ("starting", "ready") and self.pid:
            return f"{where}: {self.state} (pid {self.pid})"
        failure = getattr(self.check, "failure", None)
        if self.state in ("failed", "exited") and failure:
            stage = getattr(self.check, "failure_stage", None)
            at = f" at {stage_words(stage)}" if stage else ""
            return f"{where}: failed{at}: {failure_words(failure)}"
        if self.state == "exited" and self.returncode is not None:
            return f"{where}: exited with {self.returncode}"
        return f"{where}: {self.state}"

    @property
    def failed_check(self) -> Any:
        """The verdict of a launch that failed and whose server is gone, else None."""
        server = self.server
        if self.check is None or not getattr(self.check, "failure", None):
            return None
        return None if server is not None and server.running else self.check

    # -- lifecycle (threads) ----------------------------------------------------------------------

    def start(self) -> None:
        """Launch in a thread; runs on the UI thread (the log pane starts a new feed)."""
        from vramtui.tui.panes.log import LogPane

        self._generation += 1
        self.check, self.returncode = None, None
        self.app.launch_note = None  # this launch is the news now, not an earlier wizard attempt's
        backend = getattr(getattr(self.profile, "backend", None), "name", "")
        label = f"{backend} {getattr(self.profile, 'label', '')}".strip()
        # The server's own log engine tags the lines and diagnoses the run: the pane shows that.
        pane = self.app.query_one(LogPane)
        feed = pane.open_stream(label, tagged=True)
        threading.Thread(
            target=self._run,
            args=(feed, self._generation, pane, self._run_feed()),
            name="vramtui-model",
            daemon=True,
        ).start()

    def _post(self, state: str, pid: int | None = None, event: Any = None) -> None:
        self.state = state
        self.app.post_message(SessionState(state, pid, event))

    def _run_feed(self) -> Any:
        """On the UI thread: the memory pane's feed for this run's own samples (None without a pane)."""
        from textual.css.query import NoMatches

        from vramtui.tui.panes.memory import MemoryPane
        from vramtui.tui.panes.memory_state import RunFeed

        try:
            return RunFeed(self.app.query_one(MemoryPane).state)
        except NoMatches:
            return None

    def _run(self, feed: Any, generation: int, pane: Any = None, samples: Any = None) -> None:
        from vramtui.core.launch.launcher import ModelServer

        def on_event(event: Any) -> None:
            self.app.post_message(SessionState(self.state, self.pid, event))

        try:
            # The run's own samples (`samples`, a RunFeed) draw the memory pane's model process curve:
            # the wizard reads this run's step 0 from the same samples (its CheckResult) when it fails.
            server = ModelServer(
                self.profile, on_log_line=feed.push_tagged, on_event=on_event, on_sample=samples
            )
            feed.follow_server(server)
            with self._lock:
                self.server = server
            self._post("starting")
            # No note of our own here: the launcher's first line says how it launched, so the pane's
            # line numbers are the log engine's (and the saved log's) numbers.
            server.start()
            if samples is not None:
                samples.pid = server.pid
            self._post("starting", server.pid)
            ready = server.wait_ready(READY_TIMEOUT_S)
            if generation != self._generation:
                return
            if not ready:
                self.check = finished_check(server)
                self._size_advice(self.check, feed, pane)
            self._post("ready" if ready else "failed", server.pid)
            if ready and pane is not None:
                self._bill_later(server, pane, generation)
            self._follow(server, feed, generation, pane)
        except VramtuiError as error:
            feed.push(f"vramtui: {error}")
            feed.end(None)
            if self.server is not None:
                self.check = finished_check(self.server, str(error))
                self._size_advice(self.check, feed, pane)
            self._post("failed")
        except Exception as error:  # the app must survive a launcher failure and say why
            feed.push(f"vramtui: could not launch: {type(error).__name__}: {error}")
            feed.end(None)
            self._post("failed")

    def _size_advice(self, check: Any, feed: Any, pane: Any) -> None:
        """The failed run's advice sized by the wizard's arithmetic, as `vramtui check` prints it, posted
        to the log pane from a thread (the estimate reads the model's files)."""
        advice = list(getattr(getattr(check, "diagnosis", None), "advice", None) or [])
        if pane is None or not advice or not getattr(check, "failure", None):
            return
        from vramtui.tui.messages import AdviceSized

        def size() -> None:
            from vramtui.core.wizard.wizard import advice_beside, first_move_and_advice

            try:
                move, sized = first_move_and_advice(self.profile, check, advice=advice)
            except VramtuiError:
                return  # the advice stays as the log gave it
            if move is not None:  # as `vramtui check` says it: the wizard's move, then the other ways
                knob = f" ({move.knob})" if move.knob else ""
                sized = [f"{FIRST_MOVE}{move.param}{knob} {move.change()}", *advice_beside(move, sized)]
            if sized != advice:
                pane.post_message(AdviceSized(feed, sized))

        threading.Thread(target=size, name="vramtui-advice", daemon=True).start()

    def _bill_later(self, server: Any, pane: Any, generation: int) -> None:
        """The bill reconciled once the server settles after ready (its plateau), into the log pane."""
        from vramtui.tui.messages import BillReconciled

        def post() -> None:
            time.sleep(BILL_AFTER_READY_S)
            if generation != self._generation or not server.running:
                return
            bill = server.bill()
            if bill is not None:
                title = "the bill at ready — estimate, what the engine printed, what it holds:"
                pane.post_message(BillReconciled(bill.lines(), title, bill.lines))

        threading.Thread(target=post, name="vramtui-bill", daemon=True).start()

    def _follow(self, server: Any, feed: Any, generation: int, pane: Any = None) -> None:
        """Wait for the server to end; one that ends on its own is reaped and its verdict kept."""
        assert server.proc is not None
        returncode = server.proc.wait()
        stopped = server.stopped_by_us or generation != self._generation
        if not stopped:
            # It ended on its own: stop() reaps what is left of its group and tells the server's log
            # engine how it exited (137 with no error text: the OOM killer).
            server.stop()
            self.returncode = returncode
            sized = self.check is not None  # a launch that never came up had its advice sized then
            self.check = finished_check(server)
            if not sized:
                self._size_advice(self.check, feed, pane)
            self._post("exited")
        # A stop we asked for is not a crash: the log engine must not read 137 as the OOM killer.
        feed.end(None if stopped else returncode)

    @classmethod
    def adopt(cls, app: VramtuiApp, profile: Any, server: Any, feed: Any) -> ModelSession:
        """The wizard's verified server becomes the app's session as it runs: no second launch."""
        session = cls(app, profile)
        session.server = server
        session._generation = 1
        session._post("ready", server.pid)
        threading.Thread(
            target=session._follow, args=(server, feed, 1), name="vramtui-model", daemon=True
        ).start()
        return session

    def stop(self) -> None:
        """Stop the server and its whole process group (blocks: call from a thread or at exit)."""
        with self._lock:
            server = self.server
        if server is not None:
            self.state = "stopped"
            server.stop()
            self.app.post_message(SessionState("stopped"))

    def stop_async(self) -> None:
        threading.Thread(target=self.stop, name="vramtui-stop", daemon=True).start()

    def relaunch(self, profile: Any = None) -> None:
        def restart() -> None:
            self.stop()
            if profile is not None:
                self.profile = profile
            self.app.post_message(SessionRestart(self))

        threading.Thread(target=restart, name="vramtui-relaunch", daemon=True).start()
