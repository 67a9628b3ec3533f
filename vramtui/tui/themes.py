"""Themes as data: TOML files in `themes/` compiled to Textual themes, and the remembered choice.

A theme file has `name`, `dark`, a `[colors]` table (Textual's base colours) and a `[variables]` table
that holds vramtui's own variables: the stage colours every pane uses, the graph and verdict colours.
Users may drop their own files into `<config dir>/themes/`.
"""

from __future__ import annotations

import os
import sys
import tomllib
from pathlib import Path
from typing import Any

from textual.color import Color, ColorParseError
from textual.theme import Theme

from vramtui.core.errors import VramtuiError

DEFAULT_THEME = "vramtui-dark"

# Fallbacks for every variable vramtui's CSS and renderers use, so a user's theme may leave any out.
VARIABLE_DEFAULTS: dict[str, str] = {
    "stage-download": "#8FA7BF",
    "stage-load-weights": "#6CB6FF",
    "stage-kv-cache": "#C29BF2",
    "stage-ready": "#57B36A",
    "stage-inference": "#F0A33A",
    "log-error": "#FF7B72",
    "log-error-background": "#4A1C1C",
    "log-warning": "#E8B339",
    "log-match-background": "#6B5A12",
    "log-match-foreground": "#FFFFFF",
    "log-gutter": "#848E98",
    "graph-used": "#4FA3D9",
    "graph-peak": "#9CCBF0",
    "graph-safety": "#E8B339",
    "graph-budget": "#E5534B",
    "graph-empty": "#2A3036",
    "verdict-fits": "#57B36A",
    "verdict-fails": "#E5534B",
}

_COLOR_KEYS = (
    "primary",
    "secondary",
    "warning",
    "error",
    "success",
    "accent",
    "foreground",
    "background",
    "surface",
    "panel",
    "boost",
)


def stage_variable(stage: str) -> str:
    """CSS variable name of a stage's colour: 'kv_cache' -> 'stage-kv-cache'."""
    return "stage-" + stage.replace("_", "-")


def builtin_themes_dir() -> Path:
    """The `themes/` folder at the top of the source tree (next to the `vramtui` package); an installed
    wheel carries the same files in `<prefix>/share/vramtui/themes` (setuptools data-files)."""
    source_tree = Path(__file__).resolve().parents[2] / "themes"
    if source_tree.is_dir():
        return source_tree
    return Path(sys.prefix) / "share" / "vramtui" / "themes"


def config_dir() -> Path:
    """The user's config folder; VRAMTUI_CONFIG_DIR overrides it (tests, portable setups)."""
    override = os.environ.get("VRAMTUI_CONFIG_DIR")
    if override:
        return Path(override)
    from platformdirs import user_config_dir

    return Path(user_config_dir("vramtui"))


def theme_dirs() -> list[Path]:
    return [builtin_themes_dir(), config_dir() / "themes"]


def load_theme_file(path: Path) -> Theme:
    """Compile one theme file; a broken file is one clear error line."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise VramtuiError(f"cannot read theme {path}: {error}") from error
    name = data.get("name") or path.stem
    colors = data.get("colors", {})
    variables = data.get("variables", {})
    if not isinstance(colors, dict) or not isinstance(variables, dict):
        raise VramtuiError(f"theme {path}: [colors] and [variables] must be tables")
    if "primary" not in colors:
        raise VramtuiError(f"theme {path}: [colors] needs at least 'primary'")
    kwargs: dict[str, Any] = {}
    for key, value in colors.items():
        if key not in _COLOR_KEYS:
            raise VramtuiError(f"theme {path}: unknown colour {key!r} (known: {', '.join(_COLOR_KEYS)})")
        kwargs[key] = _checked_color(path, key, value)
    for key, value in variables.items():
        if key in VARIABLE_DEFAULTS:
            _checked_color(path, key, value)
    merged = {**VARIABLE_DEFAULTS, **{str(k): str(v) for k, v in variables.items()}}
    return Theme(
        name=str(name),
        dark=bool(data.get("dark", True)),
        luminosity_spread=float(data.get("luminosity_spread", 0.15)),
        variables=merged,
        **kwargs,
    )


def _checked_color(path: Path, key: str, value: object) -> str:
    try:
        Color.parse(str(value))
    except ColorParseError as error:
        raise VramtuiError(f"theme {path}: {key} = {value!r} is not a colour") from error
    return str(value)


def load_themes() -> dict[str, Theme]:
    """Every theme found, built-in first; a user's file with the same name wins. Broken files are skipped."""
    themes: dict[str, Theme] = {}
    for folder in theme_dirs():
        if not folder.is_dir():
            continue
        for path in sorted(folder.glob("*.toml")):
            try:
                theme = load_theme_file(path)
            except VramtuiError:
                continue
            themes[theme.name] = theme
    return themes


def config_file() -> Path:
    return config_dir() / "config.toml"


def read_config() -> dict[str, Any]:
    try:
        return tomllib.loads(config_file().read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return {}


def remembered_theme() -> str | None:
    value = read_config().get("theme")
    return value if isinstance(value, str) else None


def remember_theme(name: str) -> None:
    """Write the choice into config.toml, keeping every other key there."""
    import tomli_w

    config = read_config()
    if config.get("theme") == name:
        return
    config["theme"] = name
    path = config_file()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(".toml.tmp")
        temporary.write_text(tomli_w.dumps(config), encoding="utf-8")
        temporary.replace(path)
    except OSError:
        pass  # a read-only home must not break the app; the choice is simply not remembered
