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

from rich.cells import cell_len
from textual import on
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widgets import DataTable

from vramtui.core.units import format_bytes

SCAN_EVERY_S = 3.0
# The memory first, the settings line (the widest) and the PID last. A pane too narrow for them all
# gives up the least needed cells first (`fit_columns`), never the PID.
COLUMNS = ("engine", "model", "GPU", "host", "bill", "port", "settings", "PID")
BILL_SOURCES = {"log": "printed", "endpoints": "endpoints", "estimate": "estimate"}
MAX_HEIGHT = 10  # the header and 9 rows; more rows bring a vertical scrollbar
CELL_PADDING = 1  # DataTable's default, each side of every cell


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

    DEFAULT_CSS = f"ServerTable {{ height: auto; max-height: {MAX_HEIGHT}; }}"
    BINDINGS: ClassVar[list[BindingType]] = [Binding("enter", "select_cursor", "Attach", show=False)]

    def __init__(self, scan: Callable[[], Any] | None = None, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=True, cell_padding=CELL_PADDING)
        self.scan = scan or HereScan()
        self.shot: Any = None
        self.problem = ""
        self.cells: dict[str, dict[str, str]] = {}  # pid -> every column's full text, shown or not
        self._fitted: tuple[int, list[str]] | None = None  # the room and columns the table was laid out for
        self._bills: dict[int, Any] = {}  # pid -> the Server whose bill was made
        self._busy = threading.Lock()

    def on_mount(self) -> None:
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

    def on_resize(self) -> None:
        if self.shot is not None and self._fitted is not None and self._fitted[0] != self._room():
            self._fill(self.shot)

    def _room(self) -> int:
        """The columns the cells may take: the table's width, less a vertical scrollbar when the rows
        overflow its height (with one, a table that just fits would scroll sideways)."""
        rows = len(self.shot.servers) if self.shot is not None else 0
        bar = self.styles.scrollbar_size_vertical if rows + 1 > MAX_HEIGHT else 0
        return max(0, self.size.width - self.styles.gutter.width - bar)

    def _fill(self, shot: Any) -> None:
        cursor = self.cursor_row
        gpus = [gpu.index for gpu in shot.gpus]
        self.cells = {str(server.pid): _row(server, gpus) for server in shot.servers}
        room = self._room()
        shown, rows = fit_columns(list(self.cells.values()), room)
        # QA 26 D10: the columns past the width were cut, the PID first (13869 read as 1386)
        self.clear(columns=self._fitted is None or self._fitted[1] != shown)
        if not self.columns:
            for label in shown:
                self.add_column(label, key=label)
        self._fitted = (room, shown)
        for key, cells in zip(self.cells, rows, strict=True):
            self.add_row(*cells, key=key)
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


def _row(server: Any, gpus: list[int]) -> dict[str, str]:
    on_gpus = " ".join(f"{i}:{_size(server.gpu_bytes.get(i))}" for i in gpus if i in server.gpu_bytes) or "—"
    bill = "—"
    if server.bill is not None:
        total = server.bill.total() + server.bill.total("host")
        bill = f"{_size(total)} ({BILL_SOURCES.get(server.bill_source, server.bill_source)})"
    cells = {
        "PID": str(server.pid),
        "engine": server.engine,
        "model": Path(server.model).name[:32] if server.model else "?",
        "port": str(server.port) if server.port else "—",
        "settings": server.settings_line(),
        "GPU": on_gpus,
        "host": _size(server.host_bytes),
        "bill": bill,
    }
    return {name: cells[name] for name in COLUMNS}


def _width(label: str, cells: list[str]) -> int:
    return max(cell_len(text) for text in [label, *cells]) + 2 * CELL_PADDING


def _cut(text: str, width: int) -> str:
    return text if cell_len(text) <= width else text[: max(0, width - 1)] + "…"


# How a table too wide for its pane gives way, least needed first (QA 26 D10): the bill's source words,
# the settings (shortened, then gone), the model's and the engine's names shortened, the port, the bill,
# the host's figure, the model, the engine and the GPU's figure. The PID stays whole.
_GIVE_WAY: tuple[tuple[str, str, int], ...] = (
    ("bill", "figure", 0),
    ("settings", "cut", 12),
    ("settings", "drop", 0),
    ("model", "cut", 12),
    ("engine", "cut", 10),
    ("port", "drop", 0),
    ("bill", "drop", 0),
    ("host", "drop", 0),
    ("model", "drop", 0),
    ("engine", "drop", 0),
    ("GPU", "drop", 0),
)


def fit_columns(rows: list[dict[str, str]], room: int) -> tuple[list[str], list[list[str]]]:
    """The columns to show and each row's cells, fitted into `room` columns (padding included)."""
    shown = list(COLUMNS)
    table = {name: [row[name] for row in rows] for name in COLUMNS}

    def over() -> int:
        return sum(_width(name, table[name]) for name in shown) - room

    for name, how, least in _GIVE_WAY:
        if over() <= 0:
            break
        if how == "figure":  # "79.5 MiB (printed)" -> "79.5 MiB"
            table[name] = [text.split(" (", 1)[0] for text in table[name]]
        elif how == "cut":
            width = max(least, cell_len(name), _width(name, table[name]) - 2 * CELL_PADDING - over())
            table[name] = [_cut(text, width) for text in table[name]]
        else:
            shown.remove(name)
    return shown, [[table[name][i] for name in shown] for i in range(len(rows))]
