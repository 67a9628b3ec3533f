"""Ollama >= 0.30 runs llama-server and prints its lines: real excerpts of 2026 issues (the r8-ollama030
entries of tests/data/logs/unseen.jsonl, each with its source) read for their stage, fit's lines (its
projection and the per-device free memory of its breakdown), the context, and the GPU/CPU split (the
offload lines, against the real GPU logs already in the corpus)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from vramtui.core.logs.diagnose import diagnose_text
from vramtui.core.units import MIB

DATA = Path(__file__).resolve().parents[2] / "data" / "logs"
ENTRIES = [json.loads(line) for line in (DATA / "unseen.jsonl").read_text().splitlines()]
OLLAMA_030 = [entry for entry in ENTRIES if entry["id"].startswith("r8-ollama030-")]
IDS = [entry["id"] for entry in OLLAMA_030]


def test_there_are_real_ollama_030_logs_from_2026():
    assert len(OLLAMA_030) >= 3
    assert all(entry["source"].startswith("https://github.com/ollama/ollama/issues/") for entry in OLLAMA_030)


@pytest.mark.parametrize("entry", OLLAMA_030, ids=IDS)
def test_read_as_ollama_with_llama_servers_own_figures(entry: dict) -> None:
    log = entry["log"]
    diagnosis = diagnose_text(log)
    assert diagnosis.backend == "ollama"
    figures = diagnosis.engine_figures
    projected = re.search(r"projected to use (\d+) MiB of device memory", log)
    if projected:  # fit's projection, as printed
        assert figures["fit_projected_device"] == int(projected.group(1)) * MIB
    # every device's free memory, from fit's breakdown table or llama-server's device list
    for device, free in re.findall(r"\|\s*-\s*(\w+) \([^|]*\)\s*\|\s*\d+\s*=\s*(\d+)", log) + re.findall(
        r"^\s*(\w+): .*\(\d+ MiB, (\d+) MiB free\)", log, re.M
    ):
        assert figures[f"device_free.{device}"] == int(free) * MIB
    context = re.search(r"llama_context: n_ctx\s+=\s+(\d+)", log)
    if context:
        assert figures["context"] == int(context.group(1))
        assert diagnosis.stage == "kv_cache"  # the context is made: past the weights
    if "flash_attn    = enabled" in log:
        assert figures["flash_attn"] == 1
    if "llama_model_loader" in log or "load_model: loading model" in log:
        assert diagnosis.stage in ("load_weights", "kv_cache")


def test_the_cpu_gpu_split_of_the_llama_server_lines_ollama_prints():
    """Ollama >= 0.30 prints llama-server's `offloaded N/M layers`: every real log in the corpus with that
    line reads its split, and a partial one is "runs but slow" with the share on the host; a run that
    failed while starting never ran, and is not said to run slowly."""
    split = [e for e in ENTRIES if re.search(r"offloaded \d+/\d+ layers to GPU", e["log"])]
    assert split
    for entry in split:
        on_gpu, total = map(int, re.findall(r"offloaded (\d+)/(\d+) layers to GPU", entry["log"])[-1])
        diagnosis = diagnose_text(entry["log"])
        assert (diagnosis.engine_figures["layers_offloaded"], diagnosis.engine_figures["layers_total"]) == (
            on_gpu,
            total,
        ), entry["id"]
        slow = [w for w in diagnosis.warnings if w.startswith("runs but slow")]
        started = not diagnosis.failed or diagnosis.failure_stage in ("ready", "inference")
        assert bool(slow) == (0 < on_gpu < total and started), entry["id"]
