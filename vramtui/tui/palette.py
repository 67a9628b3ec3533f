"""Rich styles built from the current theme's variables, for widgets that render lines themselves."""

from __future__ import annotations

from functools import lru_cache

from rich.style import Style
from textual.app import App
from textual.color import Color, ColorParseError

from vramtui.tui.themes import VARIABLE_DEFAULTS


@lru_cache(maxsize=512)
def _parse(value: str) -> Color | None:
    try:
        return Color.parse(value)
    except ColorParseError:
        return None


def theme_color(app: App, name: str) -> Color:
    """A theme variable as a Color; falls back to vramtui's default, then to the foreground."""
    variables = app.theme_variables or {}
    for value in (variables.get(name), VARIABLE_DEFAULTS.get(name), variables.get("foreground")):
        if value:
            color = _parse(value)
            if color is not None:
                return color
    return Color(200, 200, 200)


def theme_style(
    app: App, fg: str | None = None, bg: str | None = None, *, bold: bool = False, reverse: bool = False
) -> Style:
    return Style(
        color=theme_color(app, fg).rich_color if fg else None,
        bgcolor=theme_color(app, bg).rich_color if bg else None,
        bold=bold or None,
        reverse=reverse or None,
    )
