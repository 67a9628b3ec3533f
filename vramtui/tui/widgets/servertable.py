"""The memory pane's table of every model server on this machine (`vramtui ps` in the app): engine, model,
port, settings, memory per GPU and on the host, and its bill by term with where the bill comes from.

The scan runs in a thread every few seconds (processes, ports, NVML, logs) and posts what it found; the
table owns its rows. Each server's bill is made once (its load-time figures do not change while it runs)
and again when its log was not readable yet. Enter (or a click) on a row attaches the app to that server.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from textual import on
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widgets import DataTable

from vramtui.core.units import format_bytes

SCAN_EVERY_S = 3.0
# The memory first: in a narrow pane the columns past the width are cut (QA: a 55-column pane showed no
# host or bill); the settings line, the widest, and the PID last.
COLUMNS = ("engine", "model", "GPU", "host", "bill", "port", "settings", "PID")
BILL_SOURCES = {"log": "printed", "endpoints": "endpoints", "estimate": "estimate"}


class ServersFound(Message):
    """A scan's result (a core.attach.servers.Snapshot), or why it failed."""

    def __init__(self, shot: Any, problem: str = "") -> None:
        super().__init__()
        self.shot = shot
        self.problem = problem


class AttachRequested(Message):
    """The user picked a server in the table: the app attaches to it."""

    def __init__(self, pid: int, label: str) -> None:
        super().__init__()
        self.pid = pid
        self.label = label


class HereScan:
    """This machine's servers and cards, bills left to the table; one NVML session for all the scans
    (made in the first scan's thread, given back by `close`)."""

    def __init__(self) -> None:
        self._nvml: Any = None
        self._lock = threading.Lock()

    def __call__(self) -> Any:
        from vramtui.core.attach.servers import snapshot
        from vramtui.core.memory.sampling import NvmlSource

        with self._lock:
            if self._nvml is None:
                self._nvml = NvmlSource()
            return snapshot(self._nvml, bills=False)

    def close(self) -> None:
        with self._lock:
            if self._nvml is not None:
                self._nvml.close()
                self._nvml = None


class ServerTable(DataTable):
    """One row per model server; `scan` (a no-argument callable returning a Snapshot) is the source."""

    DEFAULT_CSS = "ServerTable { height: auto; max-height: 10; }"
    BINDINGS: ClassVar[list[BindingType]] = [Binding("enter", "select_cursor", "Attach", show=False)]

    def __init__(self, scan: Callable[[], Any] | None = None, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=True)
        self.scan = scan or HereScan()
        self.shot: Any = None
        self.problem = ""
        self._bills: dict[int, Any] = {}  # pid -> the Server whose bill was made
        self._busy = threading.Lock()

    def on_mount(self) -> None:
        for label in COLUMNS:
            self.add_column(label, key=label)
        self.set_interval(SCAN_EVERY_S, self.rescan)
        self.rescan()

    def on_unmount(self) -> None:
        close = getattr(self.scan, "close", None)
        if callable(close):
            close()  # the NVML session the scans shared

    def rescan(self) -> None:
        if self._busy.acquire(blocking=False):
            threading.Thread(target=self._scan, name="vramtui-servers", daemon=True).start()

    def _scan(self) -> None:
        try:
            shot = self.scan()
            from vramtui.core.attach.servers import bill_new  # off the app's start-up path

            bill_new(shot, self._bills)
            self.post_message(ServersFound(shot))
        except Exception as error:  # a scan that fails says so in the table's title, never crashes
            self.post_message(ServersFound(None, f"{type(error).__name__}: {error}"))
        finally:
            self._busy.release()

    @on(ServersFound)
    def _found(self, message: ServersFound) -> None:
        message.stop()
        self.shot, self.problem = message.shot, message.problem
        if message.shot is None:
            self.border_title = f"model servers: scan failed ({message.problem})"
            return
        self._fill(message.shot)

    def _fill(self, shot: Any) -> None:
        cursor = self.cursor_row
        self.clear()
        gpus = [gpu.index for gpu in shot.gpus]
        for server in shot.servers:
            self.add_row(*_row(server, gpus), key=str(server.pid))
        if shot.servers:
            self.move_cursor(row=min(cursor, len(shot.servers) - 1))
        count = len(shot.servers)
        free = "; ".join(f"GPU {gpu.index} free {_size(gpu.free_bytes)}" for gpu in shot.gpus)
        self.border_title = f"{count} model server{'s' if count != 1 else ''} here" + (
            f" — {free}" if free else ""
        )

    @on(DataTable.RowSelected)
    def _selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        if event.row_key.value is None or self.shot is None:
            return
        pid = int(event.row_key.value)
        server = next((s for s in self.shot.servers if s.pid == pid), None)
        label = f"{server.engine} PID {pid}" if server is not None else f"PID {pid}"
        self.post_message(AttachRequested(pid, label))


def _size(value: int | None) -> str:
    return "—" if value is None else format_bytes(value, 1)


def _row(server: Any, gpus: list[int]) -> tuple[str, ...]:
    on_gpus = " ".join(f"{i}:{_size(server.gpu_bytes.get(i))}" for i in gpus if i in server.gpu_bytes) or "—"
    bill = "—"
    if server.bill is not None:
        total = server.bill.total() + server.bill.total("host")
        bill = f"{_size(total)} ({BILL_SOURCES.get(server.bill_source, server.bill_source)})"
    cells = {
        "PID": str(server.pid),
        "engine": server.engine,
        "model": Path(server.model).name[:32] if server.model else "?",
        "port": str(server.ports[0]) if server.ports else "—",
        "settings": server.settings_line(),
        "GPU": on_gpus,
        "host": _size(server.host_bytes),
        "bill": bill,
    }
    return tuple(cells[name] for name in COLUMNS)
