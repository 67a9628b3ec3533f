"""QA 26 D11: a run that died as it loaded showed "plateau 0 B" beside its real peak. The demo's first
launch (llama-cpp-python, host out of memory at the KV cache), as the app recorded it: its tree sampled
every 100 ms, the log's weights_loaded just before it died, the exit event after the tree was gone."""

from __future__ import annotations

from test_tui_support import screen_text

from vramtui.core.memory.readings import Event
from vramtui.core.memory.sampling import HostReading, Sample
from vramtui.core.units import GIB, MIB
from vramtui.tui.app import VramtuiApp
from vramtui.tui.panes.memory import MemoryPane
from vramtui.tui.panes.memory_state import MemoryState, RunFeed

T0 = 1000.0
CURVE_MIB = [7.6, 21.3, 41.7, 52.1, 58.1, 64.8, 103.4, 0.0, 0.0]  # the tree's RSS; 0: the tree is gone


def died_while_loading(state: MemoryState) -> None:
    feed = RunFeed(state)
    state.add_event(Event(T0 - 0.01, "launch"))
    for i, mib in enumerate(CURVE_MIB):
        host = HostReading(GIB, 16 * GIB, 0, 0, tree_rss=int(mib * MIB))
        feed(Sample(t=T0 + i / 10, host=host))
    state.add_event(Event(T0 + 0.59, "weights_loaded"))
    state.add_event(Event(T0 + 0.84, "exit"))


def test_an_empty_tree_is_no_plateau_and_no_fall_back() -> None:
    state = MemoryState()
    died_while_loading(state)
    readings = state.readings("process")
    assert readings is not None and round(readings.peak_mib, 1) == 103.4
    assert readings.plateau_mib is None  # was 0.0: the gone tree's zeros read as its level
    assert readings.falls_back is None  # was True: "fell back" to the empty tree, with no request


async def test_the_pane_says_plateau_dash_beside_the_peak() -> None:
    app = VramtuiApp(live_sampling=False, remember=False)
    async with app.run_test(size=(120, 40)) as pilot:
        memory = app.query_one(MemoryPane)
        died_while_loading(memory.state)
        memory.repaint(force=True)
        await pilot.pause()
        text = screen_text(app)
        assert "last peak 103.4 MiB" in text, text
        assert "plateau —" in text and "plateau 0 B" not in text
        assert "fell back —" in text
