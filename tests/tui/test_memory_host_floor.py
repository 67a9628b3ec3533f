"""QA 30 S22: on a shared box with no model process followed, the whole machine's RAM climbed as other
people started servers, and the memory pane said "the floor climbs request after request (cache not
released, or a leak)". The machine's RAM is every process's: its climb is said as such."""

from __future__ import annotations

from test_tui_support import screen_text

from vramtui.core.memory.sampling import HostReading, Sample
from vramtui.core.units import GIB, MIB
from vramtui.tui.app import VramtuiApp
from vramtui.tui.panes.memory import MemoryPane
from vramtui.tui.panes.memory_state import MemoryState


def climbing(state: MemoryState) -> None:
    """Six steps up, each with a spike on top: what the readings take as requests whose floor climbs."""
    values = []
    for step in range(6):
        base = 4000 + step * 600
        values += [base] * 10 + [base + 2500] * 5
    values += [4000 + 6 * 600] * 10
    for i, mib in enumerate(values):
        state.ingest(Sample(t=1000.0 + i, host=HostReading(int(mib * MIB), 16 * GIB, 0, 0)))


async def test_the_machines_ram_climbing_is_no_models_leak() -> None:
    app = VramtuiApp(live_sampling=False, remember=False)
    async with app.run_test(size=(140, 40)) as pilot:
        memory = app.query_one(MemoryPane)
        climbing(memory.state)
        readings = memory.state.readings("host")
        assert readings is not None and readings.rising  # the core reads a climbing floor
        memory.repaint(force=True)
        await pilot.pause()
        text = screen_text(app)
        assert "the machine's memory floor climbs" in text, text
        assert "or a leak" not in text
