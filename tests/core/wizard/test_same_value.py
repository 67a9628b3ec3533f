"""A setting is the same however it is written (QA 37 F1, F3): a size with its unit is its bytes."""

from __future__ import annotations

import pytest

from vramtui.core.wizard.proposal import same_value


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (268435456, "256MiB"),  # vLLM's command line holds bytes; the wizard proposed 256MiB (F1)
        ("16777216B", "16MiB"),  # diagnose read the run's 16777216 back as a size: no change to offer (F3)
        ("1G", "1GiB"),
        ("4096", 4096),
        ("Q8_0", "q8_0"),
    ],
)
def test_the_same_setting_written_two_ways(a: object, b: object) -> None:
    assert same_value(a, b) and same_value(b, a)


@pytest.mark.parametrize(
    ("a", "b"),
    [("256MiB", "255MiB"), (512, 1024), ("q8_0", "f16"), ("q8_0", "8B"), (True, "on")],
)
def test_different_settings(a: object, b: object) -> None:
    assert not same_value(a, b) and not same_value(b, a)
