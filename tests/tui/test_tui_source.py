"""`vramtui --source URL` in the app (Pilot): the memory pane shows the remote box's GPUs from a real
loopback HTTP server answering a recorded DCGM-exporter payload, with the same history, readings
and 80% line as a local GPU, and says so when the endpoint stops answering."""

from __future__ import annotations

from prometheus_server import PayloadServer, recorded, with_memory
from test_tui_support import screen_text, wait_for

from vramtui.core.units import MIB
from vramtui.tui.app import VramtuiApp
from vramtui.tui.panes.memory import MemoryPane

T4 = "GPU-6d5c0ac5-74d7-3130-46f1-e93ed57f469a"
TOTAL_MIB = 5120 + 9791 + 447  # the recorded used + free + reserved


async def test_the_memory_pane_follows_a_remote_box_through_its_exporter() -> None:
    text = recorded("dcgm-t4.prom")
    server = PayloadServer(text).__enter__()
    try:
        app = VramtuiApp(source_url=server.url + "/metrics", remember=False)
        async with app.run_test(size=(120, 40)) as pilot:
            memory = app.query_one(MemoryPane)

            def gpu_values() -> list[float]:
                series = memory.state.series.get("gpu:0")
                return [v for v in series.values if v is not None] if series else []

            await wait_for(pilot, lambda: len(gpu_values()) >= 2)
            memory.repaint(force=True)
            await pilot.pause()
            screen = screen_text(app)
            assert "GPU0 T4" in screen and "5.0 GiB / 15.0 GiB" in screen
            assert "host RAM" not in screen  # that box's GPUs, not this machine's memory
            assert memory.graph_scale("gpu:0") == (TOTAL_MIB * MIB, 0.8)  # the 80% line of that card

            server.set_payload(with_memory(text, {T4: 12000}))
            await wait_for(pilot, lambda: 12000 * MIB in gpu_values())
            server.set_payload(with_memory(text, {T4: 5120}))
            await wait_for(pilot, lambda: gpu_values()[-1] == 5120 * MIB)
            readings = memory.state.readings("gpu:0")
            assert readings is not None and readings.peak_mib == 12000
            assert memory.state.series["gpu:0"].history.peak == 12000 * MIB

            server.__exit__(None, None, None)  # the exporter goes away mid-run
            await wait_for(
                pilot, lambda: any("no answer" in n or "cannot connect" in n for n in memory.source_notes)
            )
            memory.repaint(force=True)
            await pilot.pause()
            assert "remote box" in screen_text(app)
            assert 12000 * MIB in gpu_values()  # what was recorded stays on the curve
    finally:
        server.httpd.server_close()
