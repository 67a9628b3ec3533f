"""The estimator pane sizes what the CLI sizes (issue 22): the profile's own engine, llama-cpp-python
included (defect 6), and the engine's defaults where a field is empty, as `vramtui estimate` takes them
(defect 31). Each answer is compared with the CLI's `--json` for the same model, run as a user runs it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from test_tui_support import screen_text, wait_for
from textual.widgets import Label, Select

from vramtui.core.launch.profile import Profile
from vramtui.core.units import MIB
from vramtui.tui.app import VramtuiApp
from vramtui.tui.panes.estimator import EstimatorPane

KEYS = ("backend", "context", "parallel", "kv_dtype", "total_bytes", "compute_buffer_bytes", "max_context")


def cli_estimate(*args: str) -> dict[str, object]:
    proc = subprocess.run(
        [sys.executable, "-m", "vramtui", "estimate", *args, "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(proc.stdout)


def pane_view(pane: EstimatorPane) -> dict[str, object]:
    data = pane.estimate.to_dict()
    return {key: data[key] for key in KEYS}


async def test_a_llama_cpp_python_profile_is_sized_as_llama_cpp_python(tiny_gguf: Path) -> None:
    """The demo's shape: llama-cpp-python at the model's full context under a 1500 MiB budget. The pane
    sized llama.cpp with flash attention auto (on), the wizard beside it llama-cpp-python (off)."""
    profile = Profile(
        backend="llama-cpp-python",
        model=str(tiny_gguf),
        params={"context": 262144},
        memory_budget=1500 * MIB,
    )
    app = VramtuiApp(live_sampling=False, remember=False)
    async with app.run_test(size=(200, 50)) as pilot:
        pane = app.query_one(EstimatorPane)
        pane.prefill_from_profile(profile)
        await wait_for(pilot, lambda: pane.estimate is not None and pane.estimate.context == 262144)
        assert pane.query_one("#est-backend", Select).value == "llama-cpp-python"
        shown = pane_view(pane)
        text = screen_text(app)
    # the budget less the engine's own share, as the CLI's --memory-budget (and the wizard) take it (QA 12)
    expected = cli_estimate(
        str(tiny_gguf), "--backend", "llama-cpp-python", "--ctx", "262144", "--memory-budget", "1500MiB"
    )
    assert shown == {key: expected[key] for key in KEYS}
    assert "llama-cpp-python: context 262,144, 1 sequence, KV f16" in text
    # the same line as the CLI and the wizard under a budget: 90% of its room (QA 36 F3)
    assert abs(pane.estimate.usable_bytes - expected["usable_bytes"]) < MIB  # the field holds whole MiB
    assert abs(expected["usable_bytes"] - 0.9 * expected["device_bytes"]) <= 1


async def test_empty_context_and_parallel_are_the_engines_defaults_as_in_the_cli(tiny_gguf: Path) -> None:
    app = VramtuiApp(live_sampling=False, remember=False)
    async with app.run_test(size=(200, 50)) as pilot:
        pane = app.query_one(EstimatorPane)
        assert pane.value("context") == "" and pane.value("parallel") == ""
        pane.set_value("model", str(tiny_gguf))
        await wait_for(pilot, lambda: pane.estimate is not None)
        llama_cpp = pane_view(pane)
        pane.query_one("#est-backend", Select).value = "vllm"
        await wait_for(pilot, lambda: pane.estimate is not None and pane.estimate.backend == "vllm")
        vllm = pane_view(pane)
    cli = cli_estimate(str(tiny_gguf), "--gpu-mem", "24GiB")
    assert llama_cpp == {key: cli[key] for key in KEYS}
    assert llama_cpp["parallel"] == 4  # llama-server's 4 slots, not 1
    cli = cli_estimate(str(tiny_gguf), "--gpu-mem", "24GiB", "--backend", "vllm")
    assert vllm == {key: cli[key] for key in KEYS}


async def test_runs_on_cpu_sizes_this_machines_ram_as_estimate_cpu_does(tiny_gguf: Path) -> None:
    """QA 13 #11: "runs on cpu" with the card left at its default sized a 24 GiB GPU; `estimate --cpu`
    sizes this machine's RAM."""
    app = VramtuiApp(live_sampling=False, remember=False)
    async with app.run_test(size=(200, 50)) as pilot:
        pane = app.query_one(EstimatorPane)
        pane.set_value("model", str(tiny_gguf))
        await wait_for(pilot, lambda: pane.estimate is not None)
        pane.query_one("#est-runs_on", Select).value = "cpu"
        await wait_for(pilot, lambda: pane.estimate is not None and pane.estimate.device == "host")
        shown = pane.estimate.to_dict()
        text = screen_text(app)
        # QA 14: the field says the RAM it sizes, not "24GiB" beside "runs on cpu"; back on the GPU, the card
        card = pane.value("card")
        assert card.endswith("GiB") and card != "24GiB"
        label = pane.query_one("#est-card-label", Label)
        assert str(label.content) == "host room"  # QA 25: "card mem" on a run with no card
        assert f"max context {shown['max_context']:,} under the 80% line" in text  # which line (QA 25)
        pane.query_one("#est-runs_on", Select).value = "gpu"
        await wait_for(pilot, lambda: pane.value("card") == "24GiB")
        assert str(label.content) == "card mem"
    cli = cli_estimate(str(tiny_gguf), "--cpu")
    assert shown["device_bytes"] == cli["device_bytes"] and shown["total_bytes"] == cli["total_bytes"]
    assert "sized for a 24 GiB card" not in text


async def test_a_cpu_runs_runtime_is_the_process_not_a_cuda_context(tiny_gguf: Path) -> None:
    """QA 5: the pane labelled a CPU run's runtime (the engine process, measured by earlier runs here)
    "runtime (CUDA context)", where `estimate --cpu` says "runtime (the process)"."""
    from vramtui.core.estimate.calibrate import save_record

    record = {
        "version": 1, "ready": True, "place": "host", "time": 1,
        "device": {"name": "cpu"}, "engine": {"backend": "llama.cpp", "build": "b"},
        "printed": {"bill": {"host": {"weights_bytes": 100 << 20}}}, "peak": {"bytes": 114 << 20},
    }  # fmt: skip
    assert save_record(record, "earlier")  # an earlier run here: 14 MiB of the process itself
    app = VramtuiApp(live_sampling=False, remember=False)
    async with app.run_test(size=(200, 50)) as pilot:
        pane = app.query_one(EstimatorPane)
        pane.set_value("model", str(tiny_gguf))
        pane.query_one("#est-runs_on", Select).value = "cpu"
        await wait_for(pilot, lambda: pane.estimate is not None and pane.estimate.device == "host")
        await wait_for(pilot, lambda: pane.estimate is not None and pane.estimate.overhead_bytes > 0)
        # the pane's own lines, joined where they wrap: its width follows the layout (QA 26 D10)
        box = pane.region
        text = " ".join(
            row[box.x : box.right].strip(" │") for row in screen_text(app).splitlines()[box.y : box.bottom]
        )
    assert "runtime (the process)" in text and "CUDA context" not in text


async def test_numbers_typed_beside_a_model_file_override_it_as_the_cli_flags_do(tiny_gguf: Path) -> None:
    """QA: the pane ignored --params 8B and 32 layers typed beside a file (20 MiB of weights, FITS) where
    `vramtui estimate FILE --params 8B --layers 32` sizes 8B (DOES NOT FIT): flags override files."""
    app = VramtuiApp(live_sampling=False, remember=False)
    async with app.run_test(size=(200, 50)) as pilot:
        pane = app.query_one(EstimatorPane)
        pane.set_value("model", str(tiny_gguf))
        await wait_for(pilot, lambda: pane.estimate is not None)
        pane.set_value("params", "8B")
        pane.set_value("layers", "32")
        await wait_for(pilot, lambda: pane.estimate is not None and pane.estimate.weights_bytes > 1 << 30)
        shown = pane_view(pane)
    cli = cli_estimate(str(tiny_gguf), "--params", "8B", "--layers", "32", "--gpu-mem", "24GiB")
    assert shown == {key: cli[key] for key in KEYS}


async def test_settings_the_engine_does_not_take_are_greyed_and_left_out(tiny_gguf: Path) -> None:
    """QA 15: the pane offered GPU layers for vLLM (it places no layers by count) and flash attention for
    its CPU build (which ignores it). Greyed out, with why, and the estimate is the CLI's without them."""
    app = VramtuiApp(live_sampling=False, remember=False)
    async with app.run_test(size=(200, 50)) as pilot:
        pane = app.query_one(EstimatorPane)
        pane.set_value("model", str(tiny_gguf))
        pane.set_value("gpu_layers", "3")
        await wait_for(pilot, lambda: pane.estimate is not None)
        assert not pane.query_one("#est-gpu_layers").disabled
        pane.query_one("#est-backend", Select).value = "vllm"
        await wait_for(pilot, lambda: pane.estimate is not None and pane.estimate.backend == "vllm")
        layers, flash = pane.query_one("#est-gpu_layers"), pane.query_one("#est-flash_attn")
        assert layers.disabled and "vllm places no layers by count" in str(layers.tooltip)
        assert not flash.disabled
        vllm_gpu = pane_view(pane)
        pane.query_one("#est-runs_on", Select).value = "cpu"
        await wait_for(pilot, lambda: pane.query_one("#est-flash_attn").disabled)
        assert "vllm's CPU build ignores it" in str(flash.tooltip)
        pane.query_one("#est-backend", Select).value = "llama.cpp"
        await wait_for(pilot, lambda: not pane.query_one("#est-gpu_layers").disabled)
        assert not flash.disabled and layers.tooltip is None
    cli = cli_estimate(str(tiny_gguf), "--gpu-mem", "24GiB", "--backend", "vllm")
    assert vllm_gpu == {key: cli[key] for key in KEYS}
