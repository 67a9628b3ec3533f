"""Issue 22 defect 41: after its KV cache, today's llama-server prints its slots (`slot load_model: id 0
| new slot`), its prompt cache (`srv load_model: prompt cache is enabled`) and its chat template; those
lines were tagged load_weights (LW), as if a second load began. They belong to the stage the log is in.
The log is a real one (tests/data/llama-server, printed at verbosity 4)."""

from __future__ import annotations

from pathlib import Path

from vramtui.core.logs.diagnose import LogDiagnoser

LOG = Path(__file__).resolve().parents[2] / "data" / "llama-server" / "healthy.verbose.log"


def test_the_lines_after_the_kv_cache_stay_in_its_stage_until_ready() -> None:
    lines = LOG.read_text(encoding="utf-8").splitlines()
    diagnoser = LogDiagnoser()
    stages = [diagnoser.feed(line).stage for line in lines]
    kv = next(i for i, line in enumerate(lines) if "llama_kv_cache:" in line)
    ready = next(i for i, line in enumerate(lines) if "model loaded" in line)
    template = next(i for i, line in enumerate(lines) if "chat template" in line)
    slot = next(i for i, line in enumerate(lines) if "new slot" in line)
    assert kv < slot < template < ready
    assert set(stages[kv:ready]) == {"kv_cache"}, [
        (i + 1, stage, lines[i][:60]) for i, stage in enumerate(stages[kv:ready], kv) if stage != "kv_cache"
    ]
    assert stages[ready] == "ready"
    # the load itself still reads as loading weights
    loading = next(i for i, line in enumerate(lines) if "load_model: loading model" in line)
    assert stages[loading] == "load_weights"
