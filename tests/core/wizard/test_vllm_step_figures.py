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
