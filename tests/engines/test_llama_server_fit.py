"""fit's printed projection beside vramtui's estimate, in `check` and `wizard` on a real llama-server that
vramtui launches (it asks for the verbosity that prints fit's lines)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from vramtui.cli import main
from vramtui.core.units import MIB

pytestmark = pytest.mark.engine

PROJECTED = re.compile(r"projected to use (\d+) MiB of host memory")


def _profile(tmp_path: Path, binary: Path, model: Path, context: int) -> Path:
    path = tmp_path / "server.toml"
    path.write_text(
        f'backend = "llama.cpp"\nprogram = {str(binary)!r}\nmodel = {str(model)!r}\nport = 0\n'
        f"[params]\ncontext = {context}\nparallel = 1\n"
    )
    return path


def test_check_json_and_text_put_fits_projection_beside_the_estimate(
    llama_server_bin: Path, tiny_gguf: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    profile = _profile(tmp_path, llama_server_bin, tiny_gguf, 4096)
    assert main(["check", str(profile), "--json", "--log-dir", str(tmp_path / "logs")]) == 0
    data = json.loads(capsys.readouterr().out)
    printed = PROJECTED.search(Path(data["log_file"]).read_text())
    assert printed, "vramtui's launch did not get fit's projection printed"
    fit = data["fit"]
    assert fit["projected_host_mib"] == float(printed.group(1))
    assert fit["context"] == 4096 and fit["estimated_host_mib"] > 0
    # vramtui's estimate and fit's projection of this run agree within the estimator's goals
    assert abs(fit["host_delta"]) < 0.25
    assert main(["check", str(profile), "--log-dir", str(tmp_path / "logs")]) == 0
    out = capsys.readouterr().out
    assert re.search(r"fit projected \d+ MiB of host memory; vramtui estimates \d+ MiB", out)


def test_wizard_steps_say_fits_projection(
    llama_server_bin: Path, tiny_gguf: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    profile = _profile(tmp_path, llama_server_bin, tiny_gguf, 2048)
    assert main(["wizard", str(profile), "--auto", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    first = data["first_run"]
    printed = PROJECTED.search(Path(first["log_file"]).read_text())
    assert printed and first["fit"]["projected_host_mib"] == float(printed.group(1))
    assert first["fit"]["estimated_host_mib"] * MIB > 0
