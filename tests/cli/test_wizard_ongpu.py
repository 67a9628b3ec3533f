"""`vramtui wizard LOG --goal on-gpu` on a real GPU log from a public issue (llama.cpp#13729)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ENTRY = json.loads((ROOT / "tests/data/logs/offloaded.jsonl").read_text().splitlines()[0])


def _wizard(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "vramtui", "wizard", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def test_on_gpu_from_a_saved_log(tmp_path):
    log = tmp_path / "run.log"
    log.write_text(ENTRY["log"])
    # the heads are not in this excerpt: Qwen3-30B-A3B's own print_info gives them (ollama#10458)
    proc = _wizard(
        str(log), "--goal", "on-gpu", "--heads", "32", "--kv-heads", "4", "--head-dim", "128", "--json"
    )
    assert proc.returncode == 1, proc.stderr  # no single change: the weights alone are too big
    data = json.loads(proc.stdout)
    assert data["goal"] == "on-gpu" and data["chosen"] is None
    assert (data["layers_on_gpu"], data["layers_total"]) == (30, 49)
    assert data["usable_mib"] < data["weights_mib"]
    assert data["runs_but_slow"] and "19 of 49 layers" in data["runs_but_slow"][0]
    # on a card twice as large, every layer fits as it is: the proposal is only the layer count
    proc = _wizard(
        str(log), "--goal", "on-gpu", "--heads", "32", "--kv-heads", "4", "--gpu-mem", "32GiB", "--json"
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["fits_as_is"] is True


def test_on_gpu_without_the_shape_is_one_line_and_exit_2(tmp_path):
    log = tmp_path / "run.log"
    log.write_text(ENTRY["log"])
    proc = _wizard(str(log), "--goal", "on-gpu")
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "--heads" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_every_flag_the_missing_shape_names_is_a_flag_of_the_wizard(tmp_path):
    # ollama#10458's print_info names heads and experts but no layer count or hidden size: the one line
    # asks for --layers and --hidden, and the wizard takes them (the next thing it lacks is the weights)
    entry = json.loads((ROOT / "tests/data/logs/offloaded.jsonl").read_text().splitlines()[1])
    log = tmp_path / "run.log"
    log.write_text(entry["log"])
    proc = _wizard(str(log), "--goal", "on-gpu")
    assert proc.returncode == 2 and "--layers" in proc.stderr and "--hidden" in proc.stderr
    proc = _wizard(str(log), "--goal", "on-gpu", "--layers", "48", "--hidden", "2048")
    assert proc.returncode == 2, proc.stderr
    assert "unrecognized arguments" not in proc.stderr and "--layers" not in proc.stderr
    assert proc.stderr.strip().count("\n") == 0 and "Traceback" not in proc.stderr


def test_a_config_json_gives_the_shape_and_the_log_the_weights(tmp_path):
    # the run loaded a Q4_K_M file; the published config.json (bf16) only says the shape: the weights are
    # the log's own buffers, not 57 GiB of bf16
    log = tmp_path / "run.log"
    log.write_text(ENTRY["log"])
    config = ROOT / "tests/data/configs/Qwen--Qwen3-30B-A3B.config.json"
    proc = _wizard(str(log), "--goal", "on-gpu", "--model", str(config), "--json")
    assert proc.returncode == 1, proc.stderr
    data = json.loads(proc.stdout)
    from_heads = _wizard(
        str(log), "--goal", "on-gpu", "--heads", "32", "--kv-heads", "4", "--head-dim", "128", "--json"
    )
    assert data["weights_mib"] == json.loads(from_heads.stdout)["weights_mib"] < 20 * 1024
    # the config names the experts (the excerpt does not): the MoE way out is offered
    assert 0 < data["n_cpu_moe"] <= 48 and json.loads(from_heads.stdout)["n_cpu_moe"] is None


def test_a_gpu_mem_without_a_unit_is_one_line_and_exit_2(tmp_path):
    # issue 22 #12: every size the CLI takes needs its unit ("12" is not 12 bytes)
    log = tmp_path / "run.log"
    log.write_text(ENTRY["log"])
    proc = _wizard(str(log), "--goal", "on-gpu", "--heads", "32", "--kv-heads", "4", "--gpu-mem", "12")
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "vramtui: --gpu-mem: '12' has no unit: 12GiB? (B, KiB, MiB, GiB or TiB)"
    ]


def test_a_log_with_no_layer_on_the_gpu_is_the_on_gpu_goals_to_plan(tmp_path):
    """QA: a Jetson's llama-server with `offloaded 0/29 layers to GPU` (round 14's log) got "the log shows
    no layer or expert on the host CPU" from the on-GPU goal, while `diagnose` said it runs on the CPU."""
    rows = (ROOT / "tests/data/logs/round14.jsonl").read_text().splitlines()
    entry = next(row for row in map(json.loads, rows) if row["id"] == "r14-llamacpp-orin-qwen3-cpu-offload0")
    log = tmp_path / "run.log"
    log.write_text(entry["log"])
    proc = _wizard(str(log), "--goal", "on-gpu", "--json")
    data = json.loads(proc.stdout)
    assert data["runs_but_slow"] == ["runs but slow: none of the 29 layers is on the GPU (offloaded 0/29)"]
    assert data["layers_on_gpu"] == 0 and data["layers_total"] == 29


def test_a_cpu_only_log_is_said_so_not_read_as_nothing_on_the_host() -> None:
    """QA 38 F6: a CPU build's log (only CPU buffers, no offload line) got "the log shows no layer or expert
    on the host CPU" from the on-GPU goal, while `diagnose` said nothing runs on a GPU. A real
    llama-cpp-python run's log, kept in tests/data/logs."""
    log = ROOT / "tests/data/logs/llama-cpp-python-ok.log"
    shape = ("--layers", "4", "--hidden", "512", "--heads", "8", "--kv-heads", "8", "--head-dim", "64")
    proc = _wizard(str(log), "--goal", "on-gpu", "--gpu-mem", "1GiB", *shape)
    assert "no layer or expert on the host CPU" not in proc.stdout, proc.stdout
    assert proc.stdout.startswith(
        "nothing runs on a GPU: every buffer and layer the log shows is in host RAM"
    )
    data = json.loads(_wizard(str(log), "--goal", "on-gpu", "--gpu-mem", "1GiB", *shape, "--json").stdout)
    assert [line.split(":")[0] for line in data["runs_but_slow"]] == ["nothing runs on a GPU"]
