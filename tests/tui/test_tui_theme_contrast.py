"""Every theme paints its own backgrounds and keeps text at WCAG AA (4.5:1) against them: computed
from the theme files themselves (themes/*.toml), for each pair of colours the app draws."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from vramtui.tui.themes import builtin_themes_dir

THEME_FILES = sorted(builtin_themes_dir().glob("*.toml"))
AA = 4.5

# Text colours, each against the backgrounds it is drawn on. Names are [colors] or [variables] keys.
PLAIN_BACKGROUNDS = ("background", "surface", "panel", "boost")
TEXT_ON_EVERY_BACKGROUND = ("foreground", "text-muted", "text-disabled")  # text-disabled: placeholders
LOG_TEXT = (
    "stage-download",
    "stage-load-weights",
    "stage-kv-cache",
    "stage-ready",
    "stage-inference",
    "log-warning",
    "log-gutter",
    "log-error",
    "foreground",
)
PAIRS = (
    *((text, back) for text in TEXT_ON_EVERY_BACKGROUND for back in PLAIN_BACKGROUNDS),
    # The log view paints `background` under every line; an error line has its own background, a
    # search match its own colours.
    *((text, "background") for text in LOG_TEXT),
    ("log-error", "log-error-background"),
    ("log-match-foreground", "log-match-background"),
    # Verdicts are drawn reversed: the pane's background on the verdict's colour.
    ("background", "verdict-fits"),
    ("background", "verdict-fails"),
    ("verdict-fits", "background"),
    ("verdict-fails", "background"),
    # Accented words (the wizard's state, advice arrows, the proposal) and the footer's keys.
    ("accent", "background"),
    ("warning", "background"),
    ("error", "background"),
    ("footer-key-foreground", "panel"),
)


def luminance(hex_colour: str) -> float:
    value = hex_colour.lstrip("#")
    assert len(value) == 6, f"{hex_colour}: the contrast test reads #RRGGBB colours"
    channels = [int(value[i : i + 2], 16) / 255 for i in (0, 2, 4)]
    linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast(a: str, b: str) -> float:
    high, low = sorted((luminance(a), luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def theme_colours(path: Path) -> dict[str, str]:
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    return {**data.get("colors", {}), **data.get("variables", {})}


def test_contrast_of_known_pairs() -> None:
    assert contrast("#000000", "#FFFFFF") == pytest.approx(21.0)
    assert contrast("#777777", "#FFFFFF") == pytest.approx(4.48, abs=0.01)


@pytest.mark.parametrize("path", THEME_FILES, ids=[p.stem for p in THEME_FILES])
def test_theme_text_keeps_aa_contrast_on_its_own_backgrounds(path: Path) -> None:
    colours = theme_colours(path)
    missing = sorted({name for pair in PAIRS for name in pair} - colours.keys())
    # Every colour is the theme's own: nothing left to Textual's translucent defaults (text-muted,
    # text-disabled, boost are alpha blends that a light terminal shows through).
    assert not missing, f"{path.name} leaves these to defaults: {missing}"
    low = [
        f"{text} on {back}: {contrast(colours[text], colours[back]):.2f}"
        for text, back in PAIRS
        if contrast(colours[text], colours[back]) < AA
    ]
    assert not low, f"{path.name}: under {AA}:1 — " + "; ".join(low)


def test_there_are_three_builtin_themes() -> None:
    assert {p.stem for p in THEME_FILES} >= {"vramtui-dark", "vramtui-light", "vramtui-high-contrast"}
