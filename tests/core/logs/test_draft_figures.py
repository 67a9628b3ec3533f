"""A llama-server with a speculative draft prints a second set of buffers: they are the draft's, and the
model's own figures stay (tests/data/llama-server/draft.verbose.log, a real run of the portable build)."""

from __future__ import annotations

from pathlib import Path

from vramtui.cli.diagnose import render_text
from vramtui.core.logs.diagnose import diagnose_file
from vramtui.core.memory.parts import HOST, bill_from_figures

LOG = Path(__file__).resolve().parents[2] / "data/llama-server/draft.verbose.log"
MIB = 1 << 20


def _printed(marker: str, after_draft: bool) -> float:
    """The number the log printed on the first line with `marker`, before or after the draft's load."""
    text = LOG.read_text()
    before, after = text.split("loading draft model", 1)
    line = next(line for line in (after if after_draft else before).splitlines() if marker in line)
    return float(line.split("=")[-1].split()[0])


def test_the_models_buffers_are_its_own_and_the_drafts_are_filed_apart() -> None:
    figures = diagnose_file(LOG).engine_figures
    for key, marker in (
        ("model_buffer", "model buffer size"),
        ("kv_buffer", "KV buffer size"),
        ("compute_buffer", "compute buffer size"),
    ):
        # printed to 2 decimals of a MiB: the model's, not the last set printed
        assert abs(figures[key] / MIB - _printed(marker, after_draft=False)) <= 0.005
        assert abs(figures[f"draft_{key}"] / MIB - _printed(marker, after_draft=True)) <= 0.005
    assert figures["model_layers"] == 4 and figures["draft_model_layers"] == 2


def test_the_bill_holds_the_model_and_the_text_names_the_draft() -> None:
    diagnosis = diagnose_file(LOG)
    bill = bill_from_figures(diagnosis.engine_figures)
    assert bill.get("weights", HOST) == diagnosis.engine_figures["model_buffer"]
    text = render_text(diagnosis, str(LOG))
    assert "Draft model: 2 layers, 256 hidden" in text
    assert "draft model: context: 2,048\n" in text  # a count, worded as the model's own is


def test_fits_projection_holds_both_models_and_says_so() -> None:
    from vramtui.core.wizard.fitcompare import compare_fit

    diagnosis = diagnose_file(LOG)
    comparison = compare_fit(diagnosis.engine_figures, diagnosis.backend)
    assert comparison is not None and comparison.with_draft
    # fit's two Host rows (the model's, then the draft's) add up to its projection, within its MiB rounding
    rows = [line for line in LOG.read_text().splitlines() if "memory_breakdown_print: |   - Host" in line]
    totals = [int(line.split("|")[2].split("=")[0]) for line in rows]
    assert len(totals) == 2 and abs(sum(totals) - comparison.projected["host"] / MIB) <= 2
    assert any("holds the draft model too" in line for line in comparison.lines())
