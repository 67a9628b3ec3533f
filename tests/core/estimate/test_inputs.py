"""One parser of the estimator's inputs: what a user types becomes Settings and ModelInfo overrides."""

from __future__ import annotations

import pytest

from vramtui.core.estimate.estimator import Settings
from vramtui.core.estimate.inputs import (
    InputError,
    model_overrides,
    parse_inputs,
    parse_settings,
    parse_value,
)
from vramtui.core.units import GIB


@pytest.mark.parametrize(
    ("text", "tokens"),
    [("8192", 8192), ("32k", 32768), ("32K", 32768), ("32,768", 32768), ("32_768", 32768), ("1m", 1 << 20),
     ("1.5k", 1536), (" 4 k ", 4096), ("1e9", 10**9), ("3.2e4", 32000)],
)  # fmt: skip
def test_context_spellings(text: str, tokens: int) -> None:
    assert parse_value("context", text) == tokens


def test_the_other_spellings() -> None:
    assert parse_value("card", "12GiB") == 12 * GIB
    assert parse_value("params", "8B") == 8_000_000_000
    assert parse_value("gpu_layers", "all") is None and parse_value("gpu_layers", "-1") is None
    assert parse_value("gpu_layers", "20") == 20
    assert parse_value("safety", "80%") == pytest.approx(0.8)
    assert parse_value("flash_attn", "off") is False and parse_value("flash_attn", "auto") is None
    assert parse_value("layers", "1,024") == 1024
    assert parse_value("parallel", "") is None and parse_value("parallel", None) is None


@pytest.mark.parametrize(
    ("name", "text", "said"),
    [
        ("context", "lots", "--ctx: 'lots' is not a whole number of tokens"),
        ("context", "1.3", "--ctx: '1.3' is not a whole number of tokens"),
        ("context", "3e10", "--ctx: 3e10 tokens is past any engine's limit"),
        ("parallel", "0", "--parallel: must be at least 1"),
        ("card", "banana", "--gpu-mem: "),
        ("safety", "1.7", "--safety: must be between 0 and 1"),
        ("gpu_layers", "some", "--gpu-layers: 'some': a number of layers, or 'all'"),
        ("params", "1e30", "--params: 1e30 is not a plausible parameter count"),
        ("flash_attn", "maybe", "--flash-attn: use on or off"),
        # marked under its field in the pane, as the others are (QA 24 F12)
        ("quant", "zzz", "--quant: unknown quantization 'zzz'"),
    ],
)
def test_bad_values_are_one_line_errors_naming_the_flag(name: str, text: str, said: str) -> None:
    with pytest.raises(InputError) as caught:
        parse_value(name, text)
    assert str(caught.value).startswith(said) and "\n" not in str(caught.value)
    assert caught.value.name == name and not caught.value.problem.startswith("--")


@pytest.mark.parametrize(
    ("name", "text", "said"),
    [
        ("card", "12", "--gpu-mem: '12' has no unit: 12GiB?"),
        ("card", "24GiB,12", "--gpu-mem: '12' has no unit: 12GiB?"),
        ("card", "24576", "--gpu-mem: '24576' has no unit: 24576MiB?"),
        ("card", "0", "--gpu-mem: '0' is no size"),
        ("max_memory", "0=20,cpu=64GiB", "--max-memory: max_memory: '20' has no unit: 20GiB?"),
    ],
)
def test_a_size_without_its_unit_is_refused_not_read_as_bytes(name: str, text: str, said: str) -> None:
    # issue 22 #12: `--gpu-mem 12` was a 12-byte card; the estimator pane reads its fields the same way
    with pytest.raises(InputError) as caught:
        parse_value(name, text)
    assert str(caught.value).startswith(said) and "\n" not in str(caught.value)
    values, problems = parse_inputs({name: text})
    assert name not in values and problems[name].startswith(said.split(": ", 1)[1])


def test_a_form_gets_every_problem_at_once_and_the_good_values() -> None:
    values, problems = parse_inputs({"context": "32k", "parallel": "x", "card": "0GiB", "layers": "32"})
    assert values == {"context": 32768, "layers": 32}
    assert set(problems) == {"parallel", "card"}
    assert model_overrides(values)["layers"] == 32 and model_overrides(values)["params"] is None


def test_settings_from_strings() -> None:
    settings = parse_settings(
        {"backend": "vllm", "context": "32k", "parallel": "4", "card": "80GiB", "safety": "0.95"}
    )
    assert settings == Settings(backend="vllm", context=32768, parallel=4, device_bytes=80 * GIB, safety=0.95)
    with pytest.raises(InputError, match="--ctx"):
        parse_settings({"context": "lots"})
