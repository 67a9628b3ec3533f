"""llama.cpp's fit projection beside vramtui's estimate, on real llama-server logs (tests/data/llama-server,
made by tests/engines/llama_server_capture.py) and a real GPU log from a public PR (unseen.jsonl)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from vramtui.core.logs.diagnose import diagnose_file, diagnose_text
from vramtui.core.memory.parts import HOST
from vramtui.core.units import MIB
from vramtui.core.wizard.fitcompare import compare_fit

DATA = Path(__file__).resolve().parents[2] / "data"
LOGS = sorted((DATA / "llama-server").glob("*.verbose.log"))
FIT_RAN = [path for path in LOGS if "projected to use" in path.read_text()]  # fit ran before it stopped
# with a draft (draft.verbose.log) fit projects both models: tests/core/logs/test_draft_figures.py checks it
VERBOSE = [path for path in FIT_RAN if "loading draft model" not in path.read_text()]
PROJECTED = re.compile(r"projected to use (\d+) MiB of (host|device) memory")


def _printed(path: Path) -> dict[str, int]:
    return {place: int(mib) * MIB for mib, place in PROJECTED.findall(path.read_text())}


@pytest.mark.parametrize("log", VERBOSE, ids=[path.name for path in VERBOSE])
def test_every_verbose_cpu_log_puts_the_projection_beside_an_estimate_for_its_own_settings(log: Path):
    diagnosis = diagnose_file(log)
    comparison = compare_fit(diagnosis.engine_figures, diagnosis.backend)
    assert comparison is not None
    assert comparison.projected == _printed(log)  # fit's own figure, as printed
    assert set(comparison.estimated) == {"host"}  # a CPU run: fit projects host memory only
    assert comparison.context == diagnosis.engine_figures["context"]  # the log's n_ctx
    # The estimate's KV cache is the one the log printed (or asked for, where it failed there), so the
    # two stand for the same run.
    figures = diagnosis.engine_figures
    printed_kv = figures.get("kv_buffer") or figures["oom_requested"]
    assert comparison.bill is not None and comparison.bill.get("kv_cache", HOST) == printed_kv
    delta = comparison.delta("host")
    assert delta == pytest.approx(
        (comparison.estimated["host"] - comparison.projected["host"]) / comparison.projected["host"]
    )
    text = "\n".join(comparison.lines())
    assert f"fit projected {comparison.projected['host'] / MIB:.0f} MiB of host memory" in text
    assert f"vramtui estimates {comparison.estimated['host'] / MIB:.0f} MiB" in text


def test_flash_attention_off_in_the_log_is_the_estimates_too():
    # compute-too-big ran with -fa off: its compute buffer (1159 MiB asked) is the estimate's too
    log = DATA / "llama-server" / "compute-too-big.verbose.log"
    diagnosis = diagnose_file(log)
    assert diagnosis.engine_figures["flash_attn"] == 0  # "llama_context: flash_attn = disabled"
    comparison = compare_fit(diagnosis.engine_figures, diagnosis.backend)
    assert comparison is not None and abs(comparison.delta("host")) < 0.10


def test_a_gpu_log_without_the_shape_gives_the_projection_and_says_why_no_estimate():
    entries = [json.loads(line) for line in (DATA / "logs" / "unseen.jsonl").read_text().splitlines()]
    entry = next(e for e in entries if "projected to use" in e["log"] and "device memory" in e["log"])
    diagnosis = diagnose_text(entry["log"], backend=entry["backend"])
    comparison = compare_fit(diagnosis.engine_figures, diagnosis.backend)
    assert comparison is not None
    assert comparison.projected["device"] == int(PROJECTED.search(entry["log"]).group(1)) * MIB
    assert not comparison.estimated and "layer count" in comparison.reason
    assert comparison.to_dict()["projected_device_mib"] == comparison.projected["device"] / MIB


def test_no_projection_in_the_log_is_none():
    assert len(VERBOSE) >= 4  # the captures: healthy, defaults, kv and compute failures)
    for log in [DATA / "llama-server" / "healthy-defaults.log", *(p for p in LOGS if p not in FIT_RAN)]:
        diagnosis = diagnose_file(log)
        assert compare_fit(diagnosis.engine_figures, diagnosis.backend) is None, log.name


ROW = re.compile(
    r"memory_breakdown_print:\s*\|\s*-\s*([\w-]+)(?: \([^|]*\))?\s*\|\s*(?:\d+\s*=\s*\d+\s*\+\s*\()?"
    r"\s*\d+\s*=\s*(\d+)\s*\+\s*(\d+)\s*\+\s*(\d+)"
)


@pytest.mark.parametrize("log", VERBOSE, ids=[path.name for path in VERBOSE])
def test_fits_breakdown_rows_are_the_last_the_log_printed(log: Path):
    rows: dict[str, dict[str, int]] = {}
    for row, model, context, compute in ROW.findall(log.read_text()):
        rows[row] = {"model": int(model) * MIB, "context": int(context) * MIB, "compute": int(compute) * MIB}
    diagnosis = diagnose_file(log)
    comparison = compare_fit(diagnosis.engine_figures, diagnosis.backend)
    assert comparison is not None and rows and comparison.breakdown == rows
    assert "fit's breakdown" in "\n".join(comparison.lines())
    # fit's host projection is its last Host row before "projected to use" (before loading: the mapped file
    # counts 0; a context fit resolved, "using 524288 for 2 sequences", is measured again first)
    text = log.read_text()
    before = text[: text.index("projected to use")]
    host = [m for m in ROW.finditer(before) if m.group(1) == "Host"][-1]
    assert comparison.projected["host"] == sum(int(host.group(i)) for i in (2, 3, 4)) * MIB


def test_the_prediction_is_set_beside_the_buffers_the_engine_printed() -> None:
    """vLLM's CPU build prints its KV cache alone: its step says the predicted KV cache beside it, not every
    buffer (the weights' gigabytes read as a miss that is not one)."""
    from vramtui.core.wizard.observe import Observation
    from vramtui.core.wizard.proposal import Proposal
    from vramtui.core.wizard.verify import predicted_against_printed

    proposal = Proposal("context", 32768, 8192, "why", predicted_mib=3300.0)
    proposal.predicted_parts = {"weights": 2900.0, "kv_cache": 256.0, "compute": 144.0}
    kv_only = Observation(
        ready=True, smoke_ok=True, stage="inference", failure_stage=None, failure=None,
        engine={"kv_cache_available": 256 << 20},
    )  # fmt: skip
    assert predicted_against_printed(proposal, kv_only) == (
        "predicted ~256 MiB for the KV cache (of ~3300 MiB of buffers in all); the engine printed 256 MiB"
    )
    # a cache set outright, printed to a hundredth of a GiB (vLLM's "Explicitly set (0.72/23.54) GiB" for
    # 733 MiB asked): the bytes asked, not the rounding (QA 23 D11: "printed 737 MiB")
    proposal.predicted_parts["kv_cache"] = 733.0
    outright = Observation(
        ready=True, smoke_ok=True, stage="inference", failure_stage=None, failure=None,
        engine={"kv_cache_available": int(0.72 * 2**30), "kv_cache_memory_bytes": 733 << 20},
    )  # fmt: skip
    assert predicted_against_printed(proposal, outright).endswith("the engine printed 733 MiB")
    proposal.predicted_parts["kv_cache"] = 256.0
    every = Observation(
        ready=True, smoke_ok=True, stage="inference", failure_stage=None, failure=None,
        engine={"model_buffer": 2900 << 20, "kv_buffer": 256 << 20, "compute_buffer": 150 << 20},
    )  # fmt: skip
    assert predicted_against_printed(proposal, every) == (
        "predicted ~3300 MiB for the weights, KV cache, compute buffers; the engine printed 3306 MiB"
    )
    # llama-cpp-python's own logits (host RAM it prints no line for) are in the proposal's figure: the step
    # names that figure beside the printed buffers' share, not two numbers that read as a miss (QA: 891/859)
    proposal.predicted_parts = {"weights": 20.5, "kv_cache": 256.0, "compute": 582.0, "output": 32.5}
    proposal.predicted_mib = 891.0
    unprinted = Observation(
        ready=True, smoke_ok=True, stage="inference", failure_stage=None, failure=None,
        engine={"model_buffer": 20.5 * MIB, "kv_buffer": 256 << 20, "compute_buffer": 583 << 20},
    )  # fmt: skip
    assert predicted_against_printed(proposal, unprinted) == (
        "predicted ~858 MiB for the weights, KV cache, compute buffers (of ~891 MiB of buffers in all); "
        "the engine printed 860 MiB"
    )
    # vLLM sizing its cache from its share: one request's need beside what it took is no miss (QA 10)
    proposal.predicted_parts, proposal.predicted_mib = {"kv_cache": 1.0, "runtime": 1967.0}, 1968.0
    took = Observation(
        ready=True, smoke_ok=True, stage="inference", failure_stage=None, failure=None,
        engine={"kv_cache_available": 20910 << 20},
    )  # fmt: skip
    said = predicted_against_printed(proposal, took)
    assert said.startswith("predicted ~1.0 MiB for the KV cache") and "from the memory its share left" in said
    proposal.predicted_mib = 3300.0
    proposal.predicted_parts = {}  # a step recorded before the parts were kept
    assert predicted_against_printed(proposal, kv_only).startswith("predicted ~3300 MiB for the buffers")


def _printout(prefix: str) -> dict:
    rows = (DATA / "printouts" / "round2.jsonl").read_text().splitlines()
    return next(case for case in map(json.loads, rows) if case["id"].startswith(prefix))


def test_a_sliding_window_models_two_caches_are_one_kv_figure_and_one_estimate():
    """gpt-oss on Metal (a public printout): llama.cpp prints a full-context cache for its 12 global
    layers, then a 768-cell one for the 12 windowed layers. Both are the run's KV cache; the first cache's
    cells stand. Before, the second cache's 18 MiB replaced the first's 3072 and the estimate sized 24
    full layers (6 GiB: +29% against fit)."""
    case = _printout("p2-llama.cpp-gpt-oss-20b-mxfp4-metal-m5-cli-ub512")
    figures = diagnose_text(case["log"]).engine_figures
    assert figures["kv_buffer.MTL0"] == (3072 + 18) * MIB and figures["kv_cache_size"] == (3072 + 18) * MIB
    assert figures["kv_cache_cells"] == 131072 and figures["kv_cache_layers"] == 12
    comparison = compare_fit(figures, "llama.cpp")
    assert comparison is not None and comparison.bill is not None
    assert comparison.bill.get("kv_cache") == pytest.approx((3072 + 18) * MIB, rel=0.01)
    assert abs(comparison.delta("device")) < 0.08  # type: ignore[arg-type]


def test_a_run_fit_had_to_cut_is_compared_at_fits_start():
    """fit projected all 29 layers of a Qwen2.5-VL on a 8 GiB-free card, then kept 21: its projection is
    of the start (every layer), as the estimate must be. Before: 21 layers, -24%."""
    case = _printout("p2-llama.cpp-qwen25vl-7b-q6kxl-rocm-radeonpro-vii")
    figures = diagnose_text(case["log"]).engine_figures
    assert figures["fit_reduce_by"] == 2240 * MIB and figures["layers_offloaded"] < figures["layers_total"]
    comparison = compare_fit(figures, "llama.cpp")
    assert comparison is not None and comparison.gpu_layers is None
    assert abs(comparison.delta("device")) < 0.05  # type: ignore[arg-type]


def test_the_device_projection_is_compared_with_the_buffers_fit_counts():
    """fit sums the model, context and compute buffers against memory already free of the CUDA context:
    vramtui's runtime share is said beside the figure, not added into it."""
    case = _printout("p2-llama.cpp-phi4-mini-q4km-vulkan-rx580-rx560")
    comparison = compare_fit(diagnose_text(case["log"]).engine_figures, "llama.cpp")
    assert comparison is not None and comparison.bill is not None and comparison.runtime > 0
    assert comparison.estimated["device"] == comparison.bill.total() - comparison.runtime
    assert comparison.bill.get("runtime") == comparison.runtime
    text = "\n".join(comparison.lines())
    assert f"the {comparison.runtime / MIB:.0f} MiB vramtui adds for the runtime" in text


@pytest.mark.parametrize(
    ("name", "context"),
    [
        ("llama-server-budget-700-mmap-weights.log", 2048),  # failed before its n_ctx line: the command's
        ("llama-server-budget-1000-ub4096-compute.log", 8192),  # -b 4096 -ub 4096: no second clamp
    ],
)
def test_the_estimate_beside_fit_is_for_the_runs_own_context_and_micro_batch(name: str, context: int) -> None:
    """QA: beside fit's 965 MiB the estimate was 2930 MiB (the trained context, not --ctx-size 2048), and
    beside fit's 1292 MiB 685 MiB (a micro-batch of 4096 clamped again to a default batch of 2048)."""
    diagnosis = diagnose_file(DATA / "logs" / name)
    comparison = compare_fit(diagnosis.engine_figures, diagnosis.backend)
    assert comparison is not None and comparison.context == context
    assert comparison.delta("host") is not None and abs(comparison.delta("host")) < 0.05  # type: ignore[arg-type]


def test_a_cache_that_is_not_unified_is_sized_per_stream_as_the_run_was():
    """QA (session 13): `check` put two estimates of one run side by side: the bill's (2 slots, a KV
    stream each) and the fit line's, which sized the log's n_ctx as one stream (compute 14 MiB against
    the engine's 11; now 12) and took a 4 x hidden feed-forward for the log's printed n_ff."""
    log = DATA / "llama-server" / "parallel-not-unified.verbose.log"
    diagnosis = diagnose_file(log)
    figures = diagnosis.engine_figures
    assert figures["context_per_sequence"] * 2 == figures["context"] and figures["model_ff"] == 1024
    comparison = compare_fit(figures, diagnosis.backend)
    assert comparison is not None and comparison.bill is not None
    printed = figures["compute_buffer"]
    assert abs(comparison.bill.get("compute", HOST) / printed - 1) < 0.15


def test_a_steps_two_vramtui_figures_say_which_is_which() -> None:
    """QA 18 F5: a wizard step printed "predicted ~224 MiB" and, three lines on, "vramtui estimates 310 MiB"
    beside llama.cpp's fit: two vramtui figures for one launch. The second is now said to be sized from the
    shape the log printed, for fit's projection."""
    import io

    from vramtui.cli.wizard import _print_step
    from vramtui.core.wizard.observe import Observation
    from vramtui.core.wizard.proposal import Proposal
    from vramtui.core.wizard.wizard import Step

    diagnosis = diagnose_file(VERBOSE[0])
    obs = Observation(ready=True, smoke_ok=True, stage="ready", failure_stage=None, failure=None)
    obs.engine = dict(diagnosis.engine_figures)
    proposal = Proposal("context", 8192, 4096, "test")
    proposal.predicted_mib = 224.0  # as Wizard.apply sets it before its note
    notes = ["predicted ~224 MiB for the weights, KV cache (of ~224 MiB in all); the engine printed 285 MiB"]
    out = io.StringIO()
    _print_step(Step(1, proposal, "works", obs, notes), out)
    text = out.getvalue()
    said = "beside llama.cpp's fit (vramtui sized from the shape the log printed):"
    assert said in text and text.index("predicted ~224") < text.index(said) < text.index("fit projected")


def test_a_run_sampled_once_has_no_peak_to_compare() -> None:
    """QA 22 #10, QA 23: two failures under a second read "peak memory 14 → 9 MiB", each one sample taken as
    the process started; `check` says "sampled once", and the wizard's step now says no peak is compared."""
    from vramtui.core.wizard.observe import Observation
    from vramtui.core.wizard.verify import _peaks

    def run(peak: float, samples: int) -> Observation:
        return Observation(
            ready=False, smoke_ok=None, stage="kv_cache", failure_stage="kv_cache", failure="host_oom",
            peak_mib=peak, samples=samples,
        )  # fmt: skip

    assert _peaks(run(14, 1), run(9, 1)) == (
        "peak memory not compared: the run before and this run ended before a second sample"
    )
    assert (
        _peaks(run(140, 12), run(9, 1)) == "peak memory not compared: this run ended before a second sample"
    )
    assert _peaks(run(140, 12), run(90, 8)) == "peak memory 140 → 90 MiB"
    # a launch that died before its buffers beside a server that runs: not the same buffers (QA 24 F7: "9 → 55")
    up = Observation(
        ready=True,
        smoke_ok=True,
        stage="inference",
        failure_stage=None,
        failure=None,
        peak_mib=55,
        samples=20,
    )
    assert _peaks(run(9, 3), up) == (
        "peak memory 55 MiB (the run before failed at kv cache with 9 MiB: not the same buffers, not compared)"
    )


def test_a_figure_under_a_mib_is_said_with_its_decimal() -> None:
    """QA 26 D7: "[weights loaded 0 MiB]" and "predicted ~0 MiB for the weights" for 0.42 MiB."""
    from vramtui.core.units import mib_figure

    assert mib_figure(0.42) == "0.4" and mib_figure(9.96) == "10.0" and mib_figure(163.4) == "163"
    assert mib_figure(0) == "0"


def test_a_server_over_its_budget_and_the_one_after_the_change_have_their_peaks_compared() -> None:
    """QA 30 S3: an attached server answering over its 60 MiB budget, relaunched with a shorter context,
    read "peak memory 43 MiB (the run before failed at kv cache with 84 MiB: not the same buffers, not
    compared)". It did not fail: it came up both times, and 84 -> 43 MiB is what the user wants to see."""
    from vramtui.core.wizard.observe import Observation
    from vramtui.core.wizard.verify import _peaks

    def up(peak: float, budget: float | None) -> Observation:
        return Observation(
            ready=False, smoke_ok=True, stage="inference", failure_stage="kv_cache", failure="host_oom",
            peak_mib=peak, samples=20, budget_mib=budget,
        )  # fmt: skip

    over = up(84, 60)
    assert over.runs_over_budget
    under = Observation(
        ready=True,
        smoke_ok=True,
        stage="inference",
        failure_stage=None,
        failure=None,
        peak_mib=43,
        samples=20,
    )
    assert _peaks(over, under) == "peak memory 84 → 43 MiB"
    assert _peaks(over, up(70, 60)) == "peak memory 84 → 70 MiB"


def test_a_run_that_failed_before_its_context_is_compared_at_its_commands_settings():
    """QA 34 L1: `check --budget 500MiB` of a 550 MiB model at `-ctk q8_0 -ctv q8_0 -ub 256` failed in mmap,
    before llama.cpp printed its context, and the fit line read "vramtui estimates 999 MiB (+28%)": an f16
    cache at the default micro-batch. The log is that real run's (vramtui's run log, timestamps and all)."""
    log = DATA / "llama-server" / "qa34-weights-fail-q8kv-ub256.runlog"
    diagnosis = diagnose_file(log)
    figures = diagnosis.engine_figures
    assert figures.get("command_ubatch") == 256 and "ubatch_tokens" not in figures
    comparison = compare_fit(figures, diagnosis.backend)
    assert comparison is not None and comparison.bill is not None
    assert comparison.projected == {"host": 780 * MIB}
    assert comparison.bill.get("kv_cache", HOST) == 204 * MIB  # q8_0, fit's own "context 204"
    assert abs(comparison.delta("host")) < 0.03, comparison.lines()
