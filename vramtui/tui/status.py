"""The app's one-line status: the model session, the graph's pause, and on a small screen the tabs."""

from __future__ import annotations

from typing import Any

from rich.text import Text


def status_text(
    session: Any, tabs: tuple[str, ...], active: str, *, paused: bool, room: int, note: str | None = None
) -> Text:
    """The longest wording that fits in `room` cells; shorter ones drop the backend name, then cut
    the tab names (`tabs`: the panes as tabs, shown on a narrow screen). `note`: what the last launch
    with no session of its own came to (a refused profile, a wizard attempt)."""
    suffix = " │ graph paused" if paused else ""
    wordings = [(False, False), (False, True), (True, True)] if tabs else [(False, False), (False, True)]
    text = Text()
    for short_tabs, short_model in wordings:
        text = Text(no_wrap=True, overflow="ellipsis")
        for number, name in enumerate(tabs, 1):
            label = f" {number} {name.capitalize()[:3] if short_tabs else name.capitalize()} "
            text.append(label, style="reverse bold" if name == active else "")
        if tabs:
            text.append(" │ ")
        if session is not None:
            text.append(session.describe(short=short_model))
        else:
            text.append(note or "no model launched")
        text.append(suffix)
        if text.cell_len <= room:
            break
    return text
