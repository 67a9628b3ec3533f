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


def test_a_tree_sampled_only_after_it_died_has_no_readings() -> None:
    """QA 6: a run that failed before the first sample read 'plateau 0 B · last peak 0 B' (an empty tree
    sums to 0); no reading is the truth, and the pane says the process was not sampled."""
    state = MemoryState()
    feed = RunFeed(state)
    gone = HostReading(ram_used=GIB, ram_total=16 * GIB, swap_used=0, swap_total=0, tree_rss=0)
    feed(Sample(t=1000.0, host=gone))
    feed(Sample(t=1001.0, host=gone))
    assert state.series["process"].values and state.readings("process") is None
    feed(Sample(t=1002.0, host=HostReading(GIB, 16 * GIB, 0, 0, tree_rss=5 * MIB)))
    readings = state.readings("process")
    assert readings is not None and readings.peak_mib == 5.0
