"""fit's printed projection (llama.cpp --fit, before it loads) is read as figures, from real logs."""

from __future__ import annotations

from pathlib import Path

from vramtui.core.logs.diagnose import diagnose_file
from vramtui.core.units import MIB

DATA = Path(__file__).resolve().parents[2] / "data" / "llama-server"


def test_fit_projection_on_a_cpu_run_is_read_from_the_real_log():
    # "common_params_fit_impl: projected to use 2313 MiB of host memory vs. 24151 MiB of total host memory"
    figures = diagnose_file(DATA / "healthy-defaults.verbose.log").engine_figures
    assert figures["fit_projected_host"] == 2313 * MIB
    assert "fit_projected_device" not in figures  # no GPU: fit projects host memory only
    # the shape llama-server prints, read as the estimator's model numbers
    assert (figures["model_layers"], figures["model_hidden"], figures["model_heads"]) == (4, 512, 8)


def test_default_verbosity_prints_no_projection():
    figures = diagnose_file(DATA / "healthy-defaults.log").engine_figures
    assert "fit_projected_host" not in figures
