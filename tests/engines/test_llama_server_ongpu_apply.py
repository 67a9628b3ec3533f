"""`vramtui wizard PROFILE --goal on-gpu --auto` on a real llama-server: the one change applied to the
profile, relaunched, seen in the relaunched log (its KV type, its n_ctx), tokens per second before and
after, and both launches in the wizard record. This CPU build prints no offload line, so "every layer
on the GPU" is unknown here (tests/core/wizard/test_ongpu_apply.py checks it on real GPU logs); the
card is given by --gpu-mem, so the estimator's choice is the one a card of that size would get."""

from __future__ import annotations

import json
import re
from pathlib import Path

import psutil
import pytest

from vramtui.cli import main
from vramtui.core.wizard.steprecord import open_session

pytestmark = pytest.mark.engine


def _profile(tmp_path: Path, binary: Path, model: Path) -> Path:
    path = tmp_path / "slow.toml"
    path.write_text(
        f'backend = "llama.cpp"\nprogram = {str(binary)!r}\nmodel = {str(model)!r}\nport = 0\n'
        "[params]\ncontext = 65536\nparallel = 1\n"
    )
    return path


def _no_server_of(model: Path) -> bool:
    return not any(str(model) in " ".join(p.info["cmdline"] or []) for p in psutil.process_iter(["cmdline"]))


@pytest.mark.parametrize(
    ("gpu_mem", "param", "seen"),
    [
        # 920 MiB usable beside llama-server's 1024 MiB fit margin; the relaunched log's KV cache line
        ("1944MiB", "kv_dtype", r"K \(q8_0\)"),
        ("600MiB", "context", r"n_ctx\s+= 4096"),
    ],
    ids=["q8_0 KV cache", "shorter context"],
)
def test_the_on_gpu_change_is_applied_relaunched_verified_and_recorded(
    llama_server_bin: Path,
    tiny_gguf: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    gpu_mem: str,
    param: str,
    seen: str,
) -> None:
    model = tmp_path / "tiny.gguf"
    model.write_bytes(tiny_gguf.read_bytes())
    record = tmp_path / "record.jsonl"
    argv = ["wizard", str(_profile(tmp_path, llama_server_bin, model)), "--goal", "on-gpu", "--auto"]
    argv += ["--gpu-mem", gpu_mem, "--record", str(record), "--json", "--save", str(tmp_path / "fast.toml")]
    assert main(argv) == 0
    data = json.loads(capsys.readouterr().out)
    applied = data["applied"]
    chosen = data["chosen"]
    assert chosen["param"] == param and applied["applied_changes"][param] == chosen["to"]
    assert applied["change_took_effect"] and applied["success"]
    assert applied["all_layers_on_device"] is None  # this build has no GPU backend: the log cannot say
    assert applied["tokens_per_s_before"] and applied["tokens_per_s_after"]  # measured, both runs
    assert any("tokens per second" in note for note in applied["verification"])
    session = open_session(record)
    assert [step["step"] for step in session.steps] == [0, 1] and session.success
    relaunch = session.steps[1]
    assert (relaunch["param"], relaunch["to"]) == (param, chosen["to"])
    assert re.search(seen, Path(relaunch["log_file"]).read_text())  # the engine got the change
    assert session.end["final_params"][param] == chosen["to"]
    assert f"{param} = " in (tmp_path / "fast.toml").read_text().replace('"', "")
    assert _no_server_of(model)


def test_a_profile_that_already_fits_the_card_is_nothing_to_change(
    llama_server_bin: Path, tiny_gguf: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """QA 39 F12: with a card every layer fits, the wizard proposed "put them all on the GPU (gpu_layers
    all)", which the profile already asks, and exited 1; on a machine with no GPU nothing said so."""
    model = tmp_path / "tiny.gguf"
    model.write_bytes(tiny_gguf.read_bytes())
    record = tmp_path / "record.jsonl"
    argv = ["wizard", str(_profile(tmp_path, llama_server_bin, model)), "--goal", "on-gpu", "--auto"]
    assert main([*argv, "--gpu-mem", "12GiB", "--record", str(record), "--json"]) == 0
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    assert data["fits_as_is"] and data["applied"]["success"] and not data["applied"]["applied_changes"]
    assert "nothing to change" in " ".join(data["applied"]["verification"])
    from vramtui.core.memory.nvml import first_gpu_total_bytes

    if first_gpu_total_bytes() is None:
        assert "no GPU on this machine" in captured.err
    session = open_session(record)
    assert [step["step"] for step in session.steps] == [0] and session.success  # no relaunch
    assert _no_server_of(model)
