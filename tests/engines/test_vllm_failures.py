"""The real vLLM (its CPU build) failing the ways a user meets on the first day, read at its default
verbosity: each launch's verdict, the line that states it, the advice with vLLM's own knob and the number
from its log; and the wizard bringing each memory failure up with the change vLLM's message names.

Config refusals die in 12-15 s; the memory ones get as far as the KV cache. Each test launches what it reads.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from vllm_capture import memory_cgroups_usable, model_for
from vllm_support import vllm_processes, vllm_profile

from vramtui.core.demo.tinyhf import write_tiny_hf
from vramtui.core.launch.launcher import run_check
from vramtui.core.logs.diagnose import diagnose_file
from vramtui.core.wizard.wizard import Wizard

pytestmark = [pytest.mark.engine, pytest.mark.slow]


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("hf")
    write_tiny_hf(folder / "tiny-qwen2")
    return folder


# (name, model kind, params, stage, failure, words of the first error, words of the first advice line).
# The other refusals (an unknown architecture, a missing path, an offline repo id) are read from the real
# server's saved logs in tests/core/logs/test_vllm_logs.py: one launch each would cost CI 20 s apiece.
REFUSALS = [
    (
        "max-model-len past the model's",
        "dense",
        {"context": 8192},
        "load_weights",
        "context_too_long",
        "greater than the derived max_model_len",
        "--max-model-len 4096",
    ),
    (
        "a quantization the checkpoint lacks",
        "dense",
        {"quant": "awq"},
        "load_weights",
        "unsupported_quant",
        "Cannot find the config file for awq",
        "drop --quantization awq",
    ),
]


@pytest.mark.parametrize(
    ("model_kind", "params", "stage", "failure", "error_words", "advice_words"),
    [case[1:] for case in REFUSALS],
    ids=[case[0] for case in REFUSALS],
)
def test_a_refused_launch_is_read_where_and_why_it_failed(
    vllm_program: Path,
    models: Path,
    tmp_path: Path,
    model_kind: str,
    params: dict[str, object],
    stage: str,
    failure: str,
    error_words: str,
    advice_words: str,
) -> None:
    model = model_for(model_kind, models)
    profile = vllm_profile(vllm_program, model, tmp_path, one_process=True, **params)
    result = run_check(profile, log_dir=tmp_path)
    diagnosis = result.diagnosis
    assert not result.ready
    assert (result.failure_stage, result.failure) == (stage, failure), diagnosis.first_error_text
    assert error_words in (diagnosis.first_error_text or "")
    assert advice_words in " ".join(diagnosis.advice)
    saved = diagnose_file(result.log_file)
    assert (saved.failure_stage, saved.failure, saved.first_error_line) == (
        diagnosis.failure_stage,
        diagnosis.failure,
        diagnosis.first_error_line,
    )
    assert not vllm_processes(model)


# (name, params, the failure it starts with, the change vLLM's message names). The share refusal and the
# KV bytes above the free RAM get their named change checked on the real server's saved logs
# (tests/core/logs/test_vllm_logs.py); a run of each with its fix costs CI two minutes apiece.
MEMORY_FAILURES = [
    ("a KV cache too small for max-model-len", {"kv_cache_memory": "1MiB", "context": 4096},
     ("kv_cache", "kv_cache_too_small"), "kv_cache_memory"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("params", "first", "changed"),
    [case[1:] for case in MEMORY_FAILURES],
    ids=[case[0] for case in MEMORY_FAILURES],
)
def test_the_wizard_brings_a_memory_failure_up_in_one_relaunch(
    vllm_program: Path,
    models: Path,
    tmp_path: Path,
    params: dict[str, object],
    first: tuple[str, str],
    changed: str,
) -> None:
    model = model_for("dense", models)
    profile = vllm_profile(vllm_program, model, tmp_path, one_process=True, **params)
    record = tmp_path / "wizard.jsonl"
    result = Wizard(profile, record_path=record, auto=True).run(max_steps=2)
    steps = result.steps
    assert (steps[0].observation.failure_stage, steps[0].observation.failure) == first
    assert result.success, result.to_dict()
    assert result.relaunches == 1
    assert steps[1].proposal.param == changed and "message names" in steps[1].proposal.rung
    recorded = [json.loads(line) for line in record.read_text().splitlines()]
    assert [row["type"] for row in recorded].count("step") == 2
    assert not vllm_processes(model)


def test_a_kv_cache_set_past_the_budget_is_sized_to_it_in_one_relaunch(
    vllm_program: Path, models: Path, tmp_path: Path
) -> None:
    """QA: 16 GiB of KV cache under a 6 GiB budget fails to allocate; the advice said to lower
    --max-model-len (which sizes nothing here) and the wizard found no rung. The KV bytes are the knob."""
    model = model_for("dense", models)
    profile = vllm_profile(
        vllm_program, model, tmp_path, budget=6 << 30, one_process=True, kv_cache_memory="16GiB"
    )
    result = Wizard(profile, record_path=tmp_path / "wizard.jsonl", auto=True).run(max_steps=2)
    first, step = result.steps[0].observation, result.steps[-1]
    assert (first.failure_stage, first.failure) == ("kv_cache", "host_oom")
    advice = " ".join(diagnose_file(first.log_file).advice)
    assert "--kv-cache-memory-bytes" in advice and "--max-model-len" not in advice
    assert result.success and result.relaunches == 1, result.to_dict()
    assert step.proposal.param == "kv_cache_memory" and step.proposal.from_ == "16GiB"
    # half of what the budget leaves beside the engine: under 3 GiB, and what the engine then printed
    assert step.proposal.predicted_parts["kv_cache"] < 3 * 1024
    assert not vllm_processes(model)


def test_a_worker_the_oom_killer_ended_is_read_and_its_kv_cache_shrunk(
    vllm_program: Path, models: Path, tmp_path: Path
) -> None:
    """A memory cgroup around the whole wizard: the kernel kills vLLM's worker while its 2 GiB KV cache is
    set up; the log says only that the worker died, the kernel log says who; the wizard sizes the cache to
    the room the tree had left once the weights were in."""
    why_not = memory_cgroups_usable()
    if why_not:
        pytest.skip(why_not)
    from vllm_capture import memory_cgroup

    model = model_for("dense", models)
    profile = vllm_profile(vllm_program, model, tmp_path, kv_cache_memory="2GiB")
    path = profile.save(tmp_path / "vllm.toml")
    with memory_cgroup(2400) as group:
        assert group is not None
        done = subprocess.run(
            [sys.executable, "-m", "vramtui", "wizard", str(path), "--auto", "--max-steps", "3", "--json"],
            capture_output=True,
            text=True,
            timeout=900,
            env={**os.environ, "VRAMTUI_DATA_DIR": str(tmp_path / "data")},
            preexec_fn=lambda: (group / "cgroup.procs").write_text(str(os.getpid())),
            check=False,
        )
    report = json.loads(done.stdout)
    first = report["first_run"]
    assert (first["failure_stage"], first["failure"]) == ("kv_cache", "host_oom_killed"), first
    assert report["success"], report
    assert report["relaunches"] <= 2
    assert report["steps"][0]["param"] == "kv_cache_memory"
    assert not vllm_processes(model)


def test_the_longest_context_the_estimate_names_is_the_one_vllm_fits(
    vllm_program: Path, models: Path, tmp_path: Path
) -> None:
    """QA 39 F2: a 4 MiB KV cache of the tiny Qwen2 holds 2,048 tokens in vLLM's 128-token CPU blocks, but
    vLLM keeps one block back (its null block): --max-model-len auto fits 1,920, and 2,048 is refused. The
    estimate said 2,048 fits. One launch: vLLM's own auto-fit against the estimate for the same settings."""
    import re
    from dataclasses import replace

    from vramtui.core.backends.vllm.version import minor_of
    from vramtui.core.estimate.estimator import Settings, estimate, max_context
    from vramtui.core.estimate.inputs import cpu_run_card
    from vramtui.core.estimate.modelinfo import load_model_info

    model = model_for("dense", models)
    profile = vllm_profile(
        vllm_program, model, tmp_path, one_process=True, kv_cache_memory="4MiB", context="auto"
    )
    result = run_check(profile, log_dir=tmp_path)
    assert result.ready, result.message
    said = re.search(r"Auto-fit max_model_len: reduced from \d+ to (\d+)", Path(result.log_file).read_text())
    assert said is not None
    fitted = int(said.group(1))
    assert result.diagnosis.engine_figures["context"] == fitted  # the figure is the fitted length

    info = load_model_info(str(model))
    params = {k: v for k, v in profile.params.items() if k != "context"}
    settings = Settings.from_params(params, backend="vllm", device_bytes=cpu_run_card())
    settings = replace(settings, on_gpu=False, engine_build=minor_of(vllm_program))
    assert max_context(info, settings) == fitted
    capacity = estimate(info, replace(settings, context=fitted)).kv_cache_tokens
    assert capacity > fitted  # the capacity vLLM prints counts the block it keeps back
    assert not estimate(info, replace(settings, context=capacity)).fits
    assert not vllm_processes(model)
