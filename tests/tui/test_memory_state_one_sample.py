"""A run that died within its first sample keeps its peak in the memory pane (CI, under load: the wizard's
step showed the one sample's peak, the pane's readings were None, as a curve of one point was none)."""

from __future__ import annotations

from vramtui.core.memory.sampling import HostReading, Sample
from vramtui.core.units import GIB, MIB
from vramtui.tui.panes.memory_state import MemoryState, RunFeed


def test_a_run_with_one_sample_has_its_peak_in_the_readings() -> None:
    state = MemoryState()
    feed = RunFeed(state)
    host = HostReading(ram_used=GIB, ram_total=16 * GIB, swap_used=0, swap_total=0, tree_rss=19 * MIB)
    assert state.readings("process") is None
    feed(Sample(t=1000.0, host=host))
    readings = state.readings("process")
    assert readings is not None and readings.peak_mib == 19.0 and readings.samples == 1
