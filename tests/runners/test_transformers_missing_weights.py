"""A checkpoint that lacks some of the model's weights loads without an error in transformers, and the
model answers garbage: the diagnosis flags it as a quiet failure, on the real loader's own words."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from vramtui.core.logs.diagnose import diagnose_text

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("transformers") is None or importlib.util.find_spec("torch") is None,
    reason="transformers and torch are not installed",
)


def _tiny_checkpoint(folder: Path, dropped: str | None = None) -> Path:
    """A tiny random Llama saved by transformers; `dropped`: a tensor then deleted from its safetensors."""
    from safetensors.torch import load_file, save_file
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=300,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        tie_word_embeddings=False,
    )
    LlamaForCausalLM(config).save_pretrained(folder)
    if dropped:
        weights = folder / "model.safetensors"
        tensors = load_file(weights)
        del tensors[dropped]
        save_file(tensors, weights, metadata={"format": "pt"})
    return folder


def _load_log(folder: Path, capfd: pytest.CaptureFixture[str]) -> str:
    """What the real loader reports while loading `folder` (it loads: nothing stops the user): its stderr,
    and its logger's warnings caught here (another test may have quieted transformers' logging or left its
    handler on a stream pytest has closed)."""
    import logging

    from transformers import AutoModelForCausalLM

    records: list[str] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = lambda record: records.append(record.getMessage())  # type: ignore[method-assign]
    logger = logging.getLogger("transformers")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.WARNING)
    capfd.readouterr()
    try:
        AutoModelForCausalLM.from_pretrained(folder)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    return capfd.readouterr().err + "\n".join(records)


def test_weights_missing_from_the_checkpoint_are_a_quiet_failure(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    log = _load_log(_tiny_checkpoint(tmp_path / "no-head", "lm_head.weight"), capfd)
    assert "lm_head.weight" in log
    diagnosis = diagnose_text(log)
    assert diagnosis.failure == "none"
    assert any("initialized at random" in warning for warning in diagnosis.warnings), diagnosis.warnings


def test_a_whole_checkpoint_loads_calm(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    diagnosis = diagnose_text(_load_log(_tiny_checkpoint(tmp_path / "whole"), capfd))
    assert diagnosis.failure == "none" and not diagnosis.warnings, diagnosis.warnings
