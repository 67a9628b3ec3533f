"""The wizard's step figures and the memory pane's readings, for one real llama-server run (issue 22
defect 27): one curve, one name."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_tui_support import screen_text, wait_for

from vramtui.core.launch.profile import Profile
from vramtui.core.units import MIB, format_bytes
from vramtui.tui.app import VramtuiApp
from vramtui.tui.panes.memory import MemoryPane
from vramtui.tui.panes.wizard import WizardPane

pytestmark = pytest.mark.engine


async def test_the_wizards_step_peak_is_the_memory_panes_peak_of_the_same_run(
    llama_server_bin: Path, tiny_gguf: Path
) -> None:
    """Step 0 asks for a 120,000-token KV cache (938 MiB) under a 1 GiB address-space budget: llama-server
    fails at the KV cache about 0.1 s after it starts. The wizard read the step's peak from the run's own
    samples (11.4 and 18.8 MiB in two runs here); the pane from the app's sampler, which found the PID
    after the process was gone and drew 0 B. Now the run's own samples draw the pane's model process curve, and both sides
    name the series: the table's `peak RSS`, the readings' `process tree RSS (host)`."""
    profile = Profile(
        backend="llama.cpp",
        model=str(tiny_gguf),
        program=str(llama_server_bin),
        params={"context": 120_000},
        memory_budget=1024 * MIB,
        port=0,
    )
    app = VramtuiApp(live_sampling=True, remember=False)
    async with app.run_test(size=(200, 50)) as pilot:
        wizard = app.query_one(WizardPane)
        memory = app.query_one(MemoryPane)
        wizard.start_profile(profile)
        wizard.driver.launch_first()  # type: ignore[union-attr]
        await wait_for(pilot, lambda: len(wizard.steps) >= 1 and not wizard.busy, timeout_s=180)
        step = wizard.steps[0].observation
        assert step.failure is not None

        memory.selected = "process"
        memory.repaint(force=True)
        await pilot.pause()
        readings = memory.state.readings("process")
        if step.peak_mib is None:
            # it died before the first sample (on a loaded machine): neither side reads "0 B" (QA 6)
            assert readings is None or not readings.peak_mib
            row = next(line for line in screen_text(app).splitlines() if "first launch" in line)
            assert "0 B" not in row and "—" in row
            return
        assert readings is not None and readings.peak_mib == step.peak_mib
        if readings.samples > 1:  # a run that died within one sample has no plateau on its curve
            # a tree sampled after it died reads 0 on the curve; the step says "not sampled" (a dash)
            assert readings.plateau_mib == step.resident_mib or (
                step.resident_mib is None and not readings.plateau_mib
            )
        assert step.memory_series == "process" and step.memory_words == "process tree RSS (host)"
        text = screen_text(app)
        peak = format_bytes(step.peak_mib * MIB, 1)
        assert "process tree RSS (host): baseline" in text and f"last peak {peak}" in text, text
        assert "peak RSS" in text and "resident RSS" in text  # the table's headings
        row = next(line for line in text.splitlines() if "first launch" in line)
        assert peak in row
