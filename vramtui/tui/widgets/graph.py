"""A memory graph on a fixed 0..total scale.

Textual's Sparkline scales to its data's own min..max, so a 1% wobble fills the height. This widget
draws each column as a bar whose height is the column's value over a fixed top (the card's total, or
for a budgeted model process on the host, a little over its budget), with the 80% safety line and
the budget as threshold rows. Columns come from a peak-preserving history (max per
bucket), so the true peak shows at every width; a column with no sample is left blank.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rich.segment import Segment
from rich.style import Style
from textual.geometry import Region
from textual.strip import Strip
from textual.widget import Widget

from vramtui.core.units import format_bytes
from vramtui.tui.palette import theme_style

BLOCKS = " ▁▂▃▄▅▆▇█"

# Called with the number of columns; returns that many values (max per bucket, None where no data).
ColumnSource = Callable[[int], Sequence[float | None]]


def threshold_row(share: float, height: int) -> int:
    """Row index counted from the bottom (0) that holds `share` of the scale."""
    return max(0, min(height - 1, int(share * height)))


def column_cells(value: float | None, total: float, height: int) -> list[int]:
    """Eighths filled in each row of one column, bottom row first (0..8 each)."""
    if value is None or total <= 0:
        return [0] * height
    level = round(max(0.0, min(1.0, value / total)) * height * 8)
    if value > 0 and level == 0:
        level = 1  # something is there: show one eighth rather than nothing
    return [max(0, min(8, level - row * 8)) for row in range(height)]


class MemoryGraph(Widget):
    """Fixed-scale bar graph of one memory series."""

    DEFAULT_CSS = """
    MemoryGraph {
        height: 1fr;
        min-height: 3;
    }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.source: ColumnSource | None = None
        self.total: float = 0.0
        self.safety_share: float | None = 0.8  # None: no safety line (the top is not a card's total)
        self.budget: float | None = None
        self.budget_words = "budget"  # what the budget limits, before its size on its row
        self._columns: list[float | None] = []
        self._levels: list[int] = []
        self._styles: dict[str, Style] = {}
        self._theme_seen: str | None = None

    def on_mount(self) -> None:
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self._restyle())

    def _restyle(self) -> None:
        self._styles.clear()
        self.refresh()

    def configure(
        self,
        source: ColumnSource | None,
        total: float,
        *,
        safety_share: float | None = 0.8,
        budget: float | None = None,
        budget_words: str = "budget",
    ) -> None:
        self.source = source
        self.total = float(total)
        self.safety_share = safety_share
        self.budget = budget
        self.budget_words = budget_words
        self.refresh()

    def _style(self, name: str) -> Style:
        if not self._styles:
            app = self.app
            self._styles = {
                "used": theme_style(app, "graph-used"),
                "warn": theme_style(app, "graph-safety"),
                "over": theme_style(app, "graph-budget"),
                "safety": theme_style(app, "graph-safety"),
                "budget": theme_style(app, "graph-budget", bold=True),
                "empty": theme_style(app, "graph-empty"),
                "label": theme_style(app, "log-gutter"),
            }
        return self._styles[name]

    def render_lines(self, crop: Region) -> list[Strip]:
        self._prepare()
        return super().render_lines(crop)

    def _prepare(self) -> None:
        # Ask the history once per frame for exactly as many columns as we have cells.
        width = self.size.width
        columns = list(self.source(width)) if self.source is not None and width > 0 else []
        columns = columns[-width:] if width > 0 else []
        self._columns = [None] * (width - len(columns)) + columns
        self._levels = [self._level(value, self.size.height) for value in self._columns]

    def _level(self, value: float | None, height: int) -> int:
        """Eighths of the whole height that a value fills."""
        if value is None or self.total <= 0:
            return 0
        level = round(max(0.0, min(1.0, value / self.total)) * height * 8)
        return max(level, 1) if value > 0 else level

    def render_line(self, y: int) -> Strip:
        width, height = self.size.width, self.size.height
        if width <= 0 or height <= 0:
            return Strip.blank(width)
        row = height - 1 - y  # counted from the bottom
        if len(self._columns) != width:  # rendered outside render_lines (tests, first frame)
            self._prepare()
        safety_row = None if self.safety_share is None else threshold_row(self.safety_share, height)
        budget_row = (
            threshold_row(self.budget / self.total, height)
            if self.budget is not None and self.total > 0 and self.budget < self.total
            else None
        )
        # Cells of one style are merged into one segment: a 200-column row is a handful of segments.
        segments: list[Segment] = []
        run_chars: list[str] = []
        run_style: Style | None = None
        blank = Style()
        for value, level in zip(self._columns, self._levels, strict=True):
            eighths = max(0, min(8, level - row * 8))
            if eighths:
                char, style = BLOCKS[eighths], self._bar_style(value)
            elif row == budget_row:
                char, style = "━", self._style("budget")
            elif row == safety_row:
                char, style = "╌", self._style("safety")
            elif row == 0 and value is not None:  # a sample of (almost) nothing: the floor shows
                char, style = "▁", self._style("empty")
            else:
                char, style = " ", blank
            if style is not run_style and run_chars:
                segments.append(Segment("".join(run_chars), run_style))
                run_chars = []
            run_style = style
            run_chars.append(char)
        if run_chars:
            segments.append(Segment("".join(run_chars), run_style))
        strip = Strip(segments, width)
        label = self._row_label(row, height, safety_row, budget_row)
        if label and len(label) < width:
            kind = "budget" if row == budget_row else "safety" if row == safety_row else "label"
            # Labels sit at the left, over the oldest data: the newest columns stay visible.
            strip = Strip.join([Strip([Segment(label, self._style(kind))]), strip.crop(len(label), width)])
        return strip

    def _bar_style(self, value: float | None) -> Style:
        if value is None:
            return self._style("used")
        if self.budget is not None and value > self.budget:
            return self._style("over")
        if self.safety_share is not None and self.total > 0 and value > self.total * self.safety_share:
            return self._style("warn")
        return self._style("used")

    def _row_label(self, row: int, height: int, safety_row: int | None, budget_row: int | None) -> str:
        if row == budget_row and self.budget is not None:
            return f"{self.budget_words} {format_bytes(self.budget, 1)} "
        if row == safety_row and self.safety_share is not None and height >= 3:
            return f"{round(self.safety_share * 100)}% "
        if row == height - 1 and self.total > 0 and row not in (safety_row, budget_row):
            return f"{format_bytes(self.total, 1)} "
        return ""
