"""The memory pane: used/total per GPU, host and model process; the fixed-scale graph; the readings."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.message import Message
from textual.widget import Widget

from vramtui.core.memory.series import series_name
from vramtui.core.units import MIB, format_bytes
from vramtui.tui.palette import theme_style
from vramtui.tui.panes.base import Pane
from vramtui.tui.panes.memory_state import MemoryState, gpu_key, gpu_label
from vramtui.tui.widgets.graph import MemoryGraph

# A budgeted process's graph tops out this far over the budget, so the budget line sits below the top.
BUDGET_HEADROOM = 1.1

# Zoom levels the `z` key cycles through: the whole history, then the last hour, 10 and 1 minutes.
ZOOMS: tuple[tuple[str, float | None], ...] = (
    ("all", None),
    ("1 h", 3600.0),
    ("10 min", 600.0),
    ("1 min", 60.0),
)


PROCESS_ROWS = 4  # GPU processes listed per GPU; the rest as one row


def meter(used: float | None, total: float | None, width: int = 12) -> str:
    if not used or not total:
        return "▕" + " " * width + "▏"
    filled = round(max(0.0, min(1.0, used / total)) * width)
    return "▕" + "█" * filled + "░" * (width - filled) + "▏"


def short_gpu_name(name: str) -> str:
    """'NVIDIA GeForce RTX 4090' -> 'RTX 4090': the words every card shares add nothing in a narrow pane."""
    for prefix in ("NVIDIA ", "GeForce ", "Tesla "):
        name = name.removeprefix(prefix)
    return name


class TextLines(Widget):
    """A Text that re-lays its pane out only when its shape changes.

    Static.update() asks for a layout of the whole screen on every call; the memory pane's figures
    change twice a second with the same number of characters, which needs a repaint only.
    """

    DEFAULT_CSS = "TextLines { height: auto; }"

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.text = Text()

    def set_text(self, text: Text) -> None:
        old = self.text.plain
        self.text = text
        same_shape = len(old) == len(text.plain) and old.count("\n") == text.plain.count("\n")
        self.refresh(layout=not same_shape)

    def render(self) -> Text:
        return self.text


class GpuFound(Message):
    """The first GPU reading: the estimator pre-fills the card's memory from it."""

    def __init__(self, total_bytes: int) -> None:
        super().__init__()
        self.total_bytes = total_bytes


class ReplayLoaded(Message):
    """A recorded CSV is in the memory state (or could not be read: `status` says why)."""

    def __init__(self, status: str) -> None:
        super().__init__()
        self.status = status


class MemoryPane(Pane, can_focus=True):
    PANE_TITLE = "Memory"
    PANE_KEY = "1"

    DEFAULT_CSS = """
    MemoryPane:focus { border: round $accent; }
    MemoryPane #mem-lines { height: auto; }
    MemoryPane #mem-note { height: auto; color: $warning; }
    MemoryPane #mem-readings { height: auto; }
    MemoryPane MemoryGraph { margin: 0; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.state = MemoryState()
        self.selected: str | None = None
        self.paused = False
        self.zoom = 0
        # The profile's memory budget, a limit on the model's process tree: drawn on that series only
        # (never on a whole card's or the machine's RAM), with `budget_words` saying what it limits.
        self.budget: float | None = None
        self.budget_words = "budget"
        self.source_notes: list[str] = []
        self.gpu_status: str | None = None  # why there is no GPU data, when there is none
        self._painted_version = -1
        self._readings_at = 0.0
        self._readings: Any = None
        self._gpu_announced = False
        self._shown: dict[str, str] = {}
        self.watched_pid: int | None = None
        # Each GPU process's container (NVML gives host PIDs): cgroups read once per PID.
        from vramtui.core.attach.container import ContainerNames

        self.containers = ContainerNames()

    def compose(self) -> ComposeResult:
        yield TextLines(id="mem-lines")
        yield TextLines(id="mem-note")
        yield MemoryGraph(id="mem-graph")
        yield TextLines(id="mem-readings")
        scan = getattr(self.app, "server_scan", None)
        if scan is not None:  # every model server here, under the curve (Enter on one attaches)
            from vramtui.tui.widgets.servertable import ServerTable

            yield ServerTable(scan, id="mem-servers")

    def on_mount(self) -> None:
        super().on_mount()
        self.query_one(MemoryGraph).configure(self._columns, 0)
        # Samples arrive at 10 Hz; the screen follows at 2 Hz (each bucket keeps its max, so no peak is
        # lost between repaints) and only what changed is redrawn: idle CPU stays low.
        self.set_interval(0.5, self.repaint_if_changed)
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self.repaint(force=True))
        self.repaint(force=True)

    # -- data in ----------------------------------------------------------------------------------

    def ingest_from_thread(self, sample: Any) -> None:
        """The sampler's callback: runs on the sampler thread, touches no widget."""
        self.state.ingest(sample)

    def load_replay(self, path: Path) -> None:
        self._load_replay(path)

    @work(thread=True, exit_on_error=False, group="replay")
    def _load_replay(self, path: Path) -> None:
        from vramtui.core.memory.sampling import ReplaySource

        try:
            source = ReplaySource(path)  # reads the CSV into columns; no Sample per row
            self.state.ingest_recorded(source.data)
            status = source.status().message
        except Exception as error:  # a bad CSV is a message in the pane, never a crash
            status = f"cannot replay {path}: {error}"
        self.post_message(ReplayLoaded(status))

    @on(ReplayLoaded)
    def _replay_loaded(self, message: ReplayLoaded) -> None:
        self.source_notes.append(message.status)
        self.repaint(force=True)

    def set_gpu_status(self, ok: bool, message: str) -> None:
        self.gpu_status = None if ok else message
        self.repaint(force=True)

    def add_event(self, event: Any) -> None:
        self.state.add_event(event)

    # -- controls ---------------------------------------------------------------------------------

    def toggle_pause(self) -> bool:
        self.paused = not self.paused
        self.repaint(force=True)
        return self.paused

    def cycle_series(self) -> str | None:
        keys = self.state.keys()
        if not keys:
            return None
        current = self.selected if self.selected in keys else keys[0]
        self.selected = keys[(keys.index(current) + 1) % len(keys)]
        self.repaint(force=True)
        return self.selected

    def cycle_zoom(self) -> str:
        self.zoom = (self.zoom + 1) % len(ZOOMS)
        self.repaint(force=True)
        return ZOOMS[self.zoom][0]

    def selected_key(self) -> str | None:
        keys = self.state.keys()
        if self.selected in keys:
            return self.selected
        return self.state.primary_key()

    def _columns(self, n: int) -> list[float | None]:
        key = self.selected_key()
        return self.state.columns(key, n, ZOOMS[self.zoom][1]) if key else []

    # -- painting ---------------------------------------------------------------------------------

    def repaint_if_changed(self) -> None:
        if not self.paused and self.state.version != self._painted_version:
            self.repaint()

    def repaint(self, *, force: bool = False) -> None:
        if self.paused and not force:
            return
        self._painted_version = self.state.version
        latest = self.state.latest
        if not self._gpu_announced and latest is not None and latest.gpus and latest.gpus[0].total_bytes:
            self._gpu_announced = True
            self.post_message(GpuFound(latest.gpus[0].total_bytes))
        key = self.selected_key()
        self._update_static("#mem-lines", self._lines_text(key), force)
        self._update_static("#mem-note", self._note_text(), force)
        graph = self.query_one(MemoryGraph)
        top, safety_share = self.graph_scale(key)
        budget = self.budget if key == "process" else None
        graph.configure(
            self._columns, top, safety_share=safety_share, budget=budget, budget_words=self.budget_words
        )
        now = time.monotonic()
        if force or now - self._readings_at >= 2.0:
            self._readings_at = now
            self._readings = self.state.readings(key) if key else None
        self._update_static("#mem-readings", self._readings_text(key), force)
        zoom = ZOOMS[self.zoom][0]
        subtitle = f"{'PAUSED · ' if self.paused else ''}zoom {zoom} (z) · series (g)"
        if subtitle != self.border_subtitle:
            self.border_subtitle = subtitle

    def graph_scale(self, key: str | None) -> tuple[float, float | None]:
        """The graph's fixed top and its safety share for one series.

        A GPU (or the host's RAM) is drawn on 0..its total with the 80% line. A model process under a
        memory budget with no GPU in sight is drawn on 0..max(budget × 1.1, its peak), with no budget on
        0..its peak × 1.1: on 0..host RAM a 350 MiB process is a flat line at the bottom. The top still
        only moves when a new peak passes it, never to the data's own min..max.
        """
        has_gpu = self.state.has_gpu()
        with self.state.lock:
            series = self.state.series.get(key) if key else None
            total = series.total if series else 0.0
            peak = series.history.peak if series else None
        if key == "process" and self.budget and not has_gpu:
            return max(self.budget * BUDGET_HEADROOM, peak or 0.0), None
        if key == "process" and not has_gpu and peak:
            # no budget either (`--replay` of a `record --pid`, QA 6): 0..its peak with headroom, not
            # 0..the host's RAM, where a 172 MiB server is a flat line
            return peak * BUDGET_HEADROOM, None
        return total, 0.8

    def _update_static(self, selector: str, text: Text, force: bool) -> None:
        # Skip a redraw when the words did not change (the theme changing forces one).
        if not force and self._shown.get(selector) == text.plain:
            return
        self._shown[selector] = text.plain
        self.query_one(selector, TextLines).set_text(text)

    def _lines_text(self, selected: str | None) -> Text:
        app = self.app
        text = Text(no_wrap=True, overflow="ellipsis")
        sample = self.state.latest
        if sample is None:
            text.append("waiting for the first sample…", style=theme_style(app, "log-gutter"))
            return text
        rows: list[tuple[str, str, float | None, float | None, str]] = []
        for gpu in sample.gpus:
            extra = f" util {gpu.util_percent}%" if gpu.util_percent is not None else ""
            if gpu.error:
                extra = f" {gpu.error}"
            rows.append(
                (
                    gpu_key(gpu.index, gpu.mig_index),
                    gpu_label(gpu.index, gpu.mig_index, short_gpu_name(gpu.name)),
                    gpu.used_bytes,
                    gpu.total_bytes,
                    extra,
                )
            )
            rows.extend(self._process_rows(gpu, sample))
        host = sample.host
        if host is not None:
            if host.tree_rss is not None:
                pids = len(host.tree_pids)
                gpu_bytes = sample.tree_gpu_bytes() if sample.gpus else None
                # a recording keeps the tree's RSS, not its PIDs: no count then (QA 24 F11: "0 processes")
                extra = f" {pids} process{'es' if pids != 1 else ''}" if pids else ""
                if gpu_bytes:
                    extra += f", GPU {format_bytes(gpu_bytes, 1)}"
                if host.root_alive is False:
                    extra += " (exited)"
                box = self.containers.of(self.watched_pid) if self.watched_pid is not None else None
                if box is not None:
                    extra += f" in {box.label}"
                rows.append(("process", "model process", host.tree_rss, host.ram_total, extra))
            swap = f" swap {format_bytes(host.swap_used, 1)}" if host.swap_total else ""
            # a recording without host columns has no such figure (QA 19 F11: "host RAM 0 B / N/A")
            if host.ram_total or host.ram_used:
                rows.append(("host", "host RAM", host.ram_used, host.ram_total, swap))
        for number, (key, label, used, total, extra) in enumerate(rows):
            if number:
                text.append("\n")
            mark = "▸" if key == selected else " "
            text.append(f"{mark}{label[:18]:<18} ", style="bold" if key == selected else "")
            text.append(meter(used, total, 10), style=theme_style(app, "graph-used"))
            used_text = format_bytes(used, 1) if used is not None else "N/A"
            total_text = format_bytes(total, 1) if total else "N/A"
            # A GPU process's share of its card: the card's total is on the GPU's row above.
            text.append(f" {used_text}" if key.startswith("pid:") else f" {used_text} / {total_text}")
            text.append(extra, style=theme_style(app, "log-gutter"))
        return text

    def _process_rows(self, gpu: Any, sample: Any) -> list[tuple[str, str, float | None, float | None, str]]:
        """One row per process NVML charges this GPU's memory to, the largest first, with its container."""
        tree = set(sample.host.tree_pids) if sample.host is not None else set()
        rows = []
        biggest = sorted(gpu.process_bytes.items(), key=lambda item: -item[1])
        for pid, used in biggest[:PROCESS_ROWS]:
            box = self.containers.of(pid)
            extra = f" {box.label}" if box is not None else " on the host"
            if pid in tree:
                extra += " · model"
            rows.append((f"pid:{pid}", f"  PID {pid}", used, gpu.total_bytes, extra))
        if len(biggest) > PROCESS_ROWS:
            rest = sum(used for _pid, used in biggest[PROCESS_ROWS:])
            rows.append(("pid:rest", f"  {len(biggest) - PROCESS_ROWS} more", rest, gpu.total_bytes, ""))
        return rows

    def _note_text(self) -> Text:
        text = Text()
        if self.gpu_status and not self.state.has_gpu():
            text.append(f"No GPU data: {self.gpu_status}. ")
            text.append("Showing host memory and the model's process tree instead.")
        for note in self.source_notes[-1:]:
            if text:
                text.append("\n")
            text.append(note)
        return text

    def _readings_text(self, key: str | None) -> Text:
        app = self.app
        readings = self._readings
        text = Text(no_wrap=False)
        if readings is None:
            series = self.state.series.get(key) if key else None
            if key == "process" and series is not None and series.values:
                text.append("model process: not sampled while it ran (it ended before the first sample)")
                return text
            text.append(
                "readings: baseline · plateau · last peak · fell back — need a curve first", style="dim"
            )
            return text

        def mib_text(value: float | None) -> str:
            return "—" if value is None else format_bytes(value * MIB, 1)

        series = self.state.series.get(key) if key else None
        peak = series.history.peak if series else None
        # The series the figures are of, as the wizard's table names its peak: the model's process tree
        # reads what the wizard's step reads, a card or the host RAM more (everything else on them).
        text.append(f"{series_name(key)}: " if key else "", style="bold")
        text.append("baseline ", style="dim")
        text.append(mib_text(readings.baseline_mib), style="bold")
        text.append(" · plateau ", style="dim")
        text.append(mib_text(readings.plateau_mib), style="bold")
        text.append(" · last peak ", style="dim")
        text.append(mib_text(readings.peak_mib), style="bold")
        text.append(" · fell back ", style="dim")
        if readings.falls_back is None:
            text.append("—")
        else:
            style = theme_style(app, "verdict-fits" if readings.falls_back else "verdict-fails", bold=True)
            text.append("yes" if readings.falls_back else "NO", style=style)
        if peak is not None:
            text.append(f" · max ever {format_bytes(peak, 1)}", style="dim")
        if getattr(readings, "rising", False):
            # the whole machine's RAM holds every process's memory: no request or leak of a model's to name
            # there (QA 30 S22: said on a shared box where other people started servers)
            climbs = (
                "the machine's memory floor climbs (every process's, not only a model's)"
                if key == "host"
                else "the floor climbs request after request (cache not released, or a leak)"
            )
            text.append(f"\n⚠ {climbs}", style=theme_style(app, "log-warning"))
        leftover = getattr(readings, "leftover_mib", None)
        if leftover:
            text.append(
                f"\n⚠ {mib_text(leftover)} still held after the process exited",
                style=theme_style(app, "log-warning"),
            )
        return text
