"""The estimator pane's verdict line says what fails first (QA 17 F12: a vLLM context above its KV capacity
read "DOES NOT FIT ✖ needs 781.99 MiB of 782.00 MiB usable", and the reason said "0.00 GiB ... 0.00 GiB")."""

from __future__ import annotations

from pathlib import Path

from test_tui import quiet_app
from test_tui_support import wait_for

from vramtui.core.demo.tinyhf import write_tiny_hf
from vramtui.tui.panes.estimator import EstimatorPane


async def test_a_refusal_is_the_verdicts_own_words(tmp_path: Path) -> None:
    model = write_tiny_hf(tmp_path / "tiny-hf")
    app = quiet_app()
    async with app.run_test(size=(200, 60)) as pilot:
        pane = app.query_one(EstimatorPane)
        pane.set_value("model", str(model))
        pane.set_value("backend", "vllm")
        pane.set_value("card", "605MiB")  # 1 to 3 MiB of KV room: less than one 4096-token request
        pane.set_value("context", "4096")
        await wait_for(pilot, lambda: pane.estimate is not None and pane.estimate.backend == "vllm")
        await wait_for(pilot, lambda: pane.estimate is not None and pane.estimate.reason is not None)
        shown = str(pane.query_one("#est-result").render())
        verdict = next(line for line in shown.splitlines() if "DOES NOT FIT" in line)
        assert "--max-model-len" in verdict and "0.00 GiB" not in shown, shown
