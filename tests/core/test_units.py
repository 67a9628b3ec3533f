"""Sizes and counts as users type them, and the binary units nvidia-smi prints."""

from __future__ import annotations

import pytest

from vramtui.core.errors import VramtuiError
from vramtui.core.units import GIB, MIB, format_bytes, parse_count, parse_size


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("24GiB", 24 * GIB),
        ("24G", 24 * GIB),
        ("24576MiB", 24 * GIB),
        ("1.5 GiB", 3 * GIB // 2),
        ("512", 512),
        # binary, as the README says (QA 34 L8: "1GB" was read as 1 GiB and nothing said so)
        ("1GB", GIB),
        ("500MB", 500 * MIB),
    ],
)
def test_parse_size(text: str, expected: int) -> None:
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["banana", "24 parsecs", "-3G", "", "1e999G"])
def test_parse_size_rejects_nonsense(text: str) -> None:
    with pytest.raises(VramtuiError):
        parse_size(text)


def test_an_unknown_unit_says_how_mb_and_gb_are_read() -> None:
    with pytest.raises(VramtuiError, match="MB and GB read as MiB and GiB"):
        parse_size("3 parsecs")


@pytest.mark.parametrize(
    ("text", "expected"), [("30B", 30_000_000_000), ("7.6e9", 7_600_000_000), ("350M", 350_000_000)]
)
def test_parse_count(text: str, expected: int) -> None:
    assert parse_count(text) == expected


def test_parse_count_rejects_nonsense() -> None:
    with pytest.raises(VramtuiError):
        parse_count("lots")


def test_format_bytes_binary_units() -> None:
    assert format_bytes(512 * MIB) == "512.00 MiB"
    assert format_bytes(int(19.2 * GIB)) == "19.20 GiB"
    assert format_bytes(100) == "100 B"


def test_default_safety_share_of_a_24_gib_card_is_19_2_gib() -> None:
    from vramtui.core.estimate.estimator import Settings

    settings = Settings(device_bytes=parse_size("24GiB"))
    assert settings.share == 0.8
    assert int(settings.device_bytes * settings.share) == int(19.2 * GIB)
    assert format_bytes(int(settings.device_bytes * settings.share)) == "19.20 GiB"


def test_a_count_too_large_for_a_float_is_an_error_not_an_overflow() -> None:
    with pytest.raises(VramtuiError, match="too large"):
        parse_count("1e400")
    assert parse_count("1e30") == round(1e30)  # large but finite: the CLI judges plausibility
