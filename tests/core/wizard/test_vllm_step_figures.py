"""QA 39 F3: a wizard step on vLLM recorded `engine_figures_mib: {}` while its own verification said "the
engine printed 561 MiB": vLLM's figures have names of their own (Available KV cache memory ->
kv_cache_available), which the step record did not carry. Read from a real vLLM CPU 0.32 run's log, made
here (tests/data/logs/vllm-budget-2048-kv-194mib.log)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from vramtui.core.logs.diagnose import diagnose_file
from vramtui.core.units import MIB
from vramtui.core.wizard.observe import observe

LOG = Path(__file__).resolve().parents[2] / "data" / "logs" / "vllm-budget-2048-kv-194mib.log"


def test_a_vllm_step_records_the_kv_cache_the_engine_printed() -> None:
    diagnosis = diagnose_file(LOG)
    printed = diagnosis.engine_figures["kv_cache_available"]
    assert 190 * MIB < printed < 200 * MIB  # vLLM's "Available KV cache memory: 0.19 GiB"
    step = observe(SimpleNamespace(diagnosis=diagnosis, ready=True, backend="vllm"))
    assert step.figures == {"kv_cache_available": printed}


def test_vllms_rounded_kv_figure_is_the_exact_one_it_was_given() -> None:
    """QA 39 F4: vLLM prints its KV cache to two decimals of a GiB ("Explicitly set (0.19/23.54) GiB for KV
    cache"); with the bytes set outright (--kv-cache-memory-bytes 203423744) the figure is those bytes."""
    figures = diagnose_file(LOG).engine_figures
    assert figures["kv_cache_memory_bytes"] == 203423744
    assert figures["kv_cache_available"] == 203423744
    text = LOG.read_text()
    assert "Explicitly set (0.19/23.54) GiB for KV cache" in text  # what it printed
    other = diagnose_file_text(
        text.replace("'kv_cache_memory_bytes': 203423744", "'kv_cache_memory_bytes': 536870912")
    )
    assert other["kv_cache_available"] == round(
        0.19 * 2**30
    )  # an exact figure of other bytes is no reading of it


def diagnose_file_text(text: str) -> dict[str, int | float]:
    from vramtui.core.logs.diagnose import diagnose_text

    return diagnose_text(text).engine_figures
