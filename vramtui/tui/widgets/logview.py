"""A log view for very long, fast logs: lines are offsets and tag bytes (`LineStore`), and only the
visible rows are read, cleaned and drawn.

Log text is shown as text: each row is built from Segments with styles, never parsed as markup, and
escape/control characters are made visible before they can reach the terminal.
"""

from __future__ import annotations

from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from textual.binding import Binding, BindingType
from textual.events import MouseScrollDown, MouseScrollUp
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from vramtui.core.logs.stages import STAGES
from vramtui.tui.palette import theme_style
from vramtui.tui.themes import stage_variable
from vramtui.tui.widgets.linestore import LineStore, RowChunk, display_text

__all__ = ["STAGE_TAGS", "LogView", "display_text"]

STAGE_TAGS = {
    "download": "DL",
    "load_weights": "LW",
    "kv_cache": "KV",
    "ready": "RD",
    "inference": "IN",
}


class LogView(ScrollView, can_focus=True):
    """Scrollable, searchable, stage-coloured log; follows the tail unless the user scrolled away."""

    DEFAULT_CSS = """
    LogView {
        height: 1fr;
        background: $background;  /* its own: a light terminal must not show through the lines */
        scrollbar-size-vertical: 1;
        scrollbar-size-horizontal: 1;
    }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "scroll_up", "Up", show=False),
        Binding("down", "scroll_down", "Down", show=False),
        Binding("left", "scroll_left", "Left", show=False),
        Binding("right", "scroll_right", "Right", show=False),
        Binding("home", "scroll_home", "Top", show=False),
        Binding("end", "scroll_end", "Follow", show=False),
        Binding("pageup", "page_up", "Page up", show=False),
        Binding("pagedown", "page_down", "Page down", show=False),
    ]

    class Marked(Message):
        """The marked line changed (search hit, first error); the pane shows where we are."""

        def __init__(self, index: int | None, total: int) -> None:
            super().__init__()
            self.index = index
            self.total = total

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.lines = LineStore()
        self.first_error: int | None = None  # 0-based index
        self.failure_stage: str | None = None
        self.marked: int | None = None
        self.search_text: str = ""
        self.follow: bool = True
        self._mark_pending = False  # the marked line is kept in view (resizes too) until the user scrolls
        self._max_width = 0
        self._styles: dict[str, Style] = {}

    def on_mount(self) -> None:
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self._restyle())

    def _restyle(self) -> None:
        self._styles.clear()
        self.refresh()

    # -- data -------------------------------------------------------------------------------------

    def clear(self, path: str | None = None) -> None:
        """Start afresh: a file's lines (`path`, read from it when drawn) or a stream's."""
        self.lines.close()
        self.lines = LineStore(path)
        self.first_error = None
        self.failure_stage = None
        self.marked = None
        self.follow = True
        self._mark_pending = False
        self._max_width = 0
        self.virtual_size = Size(0, 0)
        self.scroll_to(0, 0, animate=False, immediate=True)
        self.refresh()

    def append(self, chunk: RowChunk) -> None:
        """Add a batch of lines (one refresh per batch, however many lines)."""
        if not len(chunk):
            return
        self.lines.extend(chunk)
        self._max_width = max(self._max_width, chunk.widest)
        self.virtual_size = Size(self._max_width + self.gutter_width, len(self.lines))
        self.keep_tail()  # after the next layout the new virtual size is known: scroll to the end then
        self.refresh()

    def on_resize(self) -> None:
        # Shown again (narrow layout) or resized: a view that follows the tail shows the tail, one
        # that was sent to a line (the first error) while it had no room shows that line.
        if self.follow:
            self.keep_tail()
        elif self._mark_pending:
            self.call_after_refresh(self._scroll_to_mark)

    def keep_tail(self) -> None:
        """A view that follows the tail shows it again after the next layout: lines came, or something
        above the view took rows (a bill under the diagnosis)."""
        if self.follow:
            self.call_after_refresh(self._follow_tail)

    def watch_show_horizontal_scrollbar(self, shown: bool) -> None:
        # A line wider than the view brings the horizontal scrollbar: it takes a row without a resize,
        # and the tail must stay in view.
        self.keep_tail()

    def _follow_tail(self) -> None:
        # Now (immediate), to the end as the view's current size has it: a deferred scroll was lost when
        # the layout moved under it (the attached app showed a followed log's first lines).
        if self.follow:
            self.scroll_to(y=self.max_scroll_y, animate=False, immediate=True)

    @property
    def gutter_width(self) -> int:
        return len(str(max(1, len(self.lines)))) + 5

    # -- navigation -------------------------------------------------------------------------------

    def mark(self, index: int | None) -> None:
        """Highlight one line and bring it into view (stops following the tail)."""
        self.marked = index
        self._mark_pending = index is not None
        if index is not None:
            self.follow = False
            height = self.scrollable_content_region.height
            self.scroll_to(y=max(0, index - height // 3), animate=False, immediate=True)
            # Lines just appended, a header that grew, a pane still hidden on a small screen: the view's
            # size is known after the next layout, and a scroll before it stops at the old end.
            self.call_after_refresh(self._scroll_to_mark)
        self.refresh()
        self.post_message(self.Marked(index, len(self.lines)))

    def _scroll_to_mark(self) -> None:
        """Bring the marked line into view (again after a resize), until the user scrolls."""
        index, height = self.marked, self.scrollable_content_region.height
        if index is None or not self._mark_pending or self.follow:
            return
        if height > 0 and self.scroll_offset.y <= index < self.scroll_offset.y + height:
            return  # in view already: no jump
        self.scroll_to(y=max(0, index - height // 3), animate=False, immediate=True)

    def jump_to_first_error(self) -> bool:
        if self.first_error is None:
            return False
        self.mark(self.first_error)
        return True

    def find(self, text: str, *, forward: bool = True, from_index: int | None = None) -> int | None:
        """Mark the next line containing `text` (case-insensitive), wrapping around."""
        self.search_text = text
        count = len(self.lines)
        start = from_index if from_index is not None else self.marked
        if start is None:
            start = -1 if forward else count
        found = self.lines.find(text, start, forward=forward)
        if found is None:
            self.refresh()
            return None
        self.mark(found)
        return found

    def action_scroll_end(self) -> None:
        self.follow = True
        self.marked = None
        self._mark_pending = False
        self.scroll_end(animate=False, immediate=True)

    def action_scroll_up(self) -> None:
        self.follow = self._mark_pending = False
        super().action_scroll_up()

    def action_scroll_down(self) -> None:
        self._mark_pending = False
        super().action_scroll_down()

    def action_page_up(self) -> None:
        self.follow = self._mark_pending = False
        super().action_page_up()

    def action_page_down(self) -> None:
        self._mark_pending = False
        super().action_page_down()

    def action_scroll_home(self) -> None:
        self.follow = self._mark_pending = False
        super().action_scroll_home()

    def _on_mouse_scroll_up(self, event: MouseScrollUp) -> None:
        self.follow = self._mark_pending = False

    def _on_mouse_scroll_down(self, event: MouseScrollDown) -> None:
        self._mark_pending = False

    # -- rendering --------------------------------------------------------------------------------

    def _style(self, name: str) -> Style:
        if not self._styles:
            app = self.app
            styles = {stage: theme_style(app, stage_variable(stage)) for stage in STAGES}
            styles["none"] = theme_style(app, "foreground")
            styles["gutter"] = theme_style(app, "log-gutter")
            styles["error"] = theme_style(app, "log-error", "log-error-background", bold=True)
            styles["warning"] = theme_style(app, "log-warning")
            styles["match"] = theme_style(app, "log-match-foreground", "log-match-background", bold=True)
            styles["marked"] = Style(reverse=True)
            styles["failing"] = theme_style(app, "log-error", bold=True)
            self._styles = styles
        return self._styles[name]

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        index = scroll_y + y
        width = self.size.width
        if index >= len(self.lines) or width <= 0:
            return Strip.blank(width, self.rich_style)
        line = self.lines[index]
        stage_style = self._style(line.stage) if line.stage in STAGE_TAGS else self._style("none")
        if line.severity == "error":
            text_style, marker = self._style("error"), "✖"
        elif line.severity == "warning":
            text_style, marker = self._style("warning"), "!"
        else:
            text_style, marker = stage_style, " "
        if index == self.first_error:
            marker = "▶"
        number_width = self.gutter_width - 5
        bar = "┃" if line.stage is not None and line.stage == self.failure_stage else "│"
        gutter = [
            Segment(f"{index + 1:>{number_width}} ", self._style("gutter")),
            Segment(STAGE_TAGS.get(line.stage or "", "··"), stage_style),
            Segment(marker, text_style if marker != " " else stage_style),
            Segment(bar, self._style("failing") if bar == "┃" else self._style("gutter")),
        ]
        body = Strip(self._body_segments(line.text, text_style))
        body = body.crop(scroll_x, scroll_x + max(0, width - self.gutter_width))
        # Every segment on the view's own background and colours (a segment without a background
        # would show the terminal's through it).
        strip = Strip.join([Strip(gutter), body]).apply_style(self.rich_style)
        if index == self.marked:
            strip = strip.apply_style(self._style("marked"))
        return strip.adjust_cell_length(width, self.rich_style)

    def _body_segments(self, text: str, style: Style) -> list[Segment]:
        if not self.search_text:
            return [Segment(text, style)]
        needle = self.search_text.lower()
        lowered = text.lower()
        segments: list[Segment] = []
        position = 0
        match_style = style + self._style("match")
        while True:
            found = lowered.find(needle, position)
            if found < 0:
                break
            if found > position:
                segments.append(Segment(text[position:found], style))
            segments.append(Segment(text[found : found + len(needle)], match_style))
            position = found + len(needle)
        if position < len(text):
            segments.append(Segment(text[position:], style))
        return segments
