"""QA 26 D10: the memory pane's table of model servers fits its pane, giving up the least needed cells
first and never cutting the PID (at 120 columns PID 13869 showed as "1386", another process's number);
at 200 columns a replay's curve had 80 columns while the empty log and wizard panes had 120: the room
now follows content."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.cells import cell_len
from test_tui_support import bring_up_curve_mib, screen_text, wait_for, write_nvsmi_csv

import vramtui.core.attach.servers as servers
from vramtui.core.attach.servers import Server, Snapshot
from vramtui.core.memory.parts import HOST, PARTS, MemoryBill
from vramtui.tui.app import VramtuiApp
from vramtui.tui.panes.memory import MemoryPane
from vramtui.tui.widgets.servertable import CELL_PADDING, COLUMNS, ServerTable, _row, fit_columns

MIB = 2**20


def qa_server(pid: int = 13869) -> Server:
    """The QA's llama-cpp-python server on the CPU: its bill printed in its log."""
    bill = MemoryBill()
    bill.add(HOST, PARTS[0], int(79.5 * MIB))
    return Server(
        pid=pid,
        engine="llama-cpp-python",
        pids=[pid],
        model="/tmp/qa26/models/tiny.gguf",
        params={"context": 2048},
        assumed={"parallel": 1, "kv_dtype": "f16", "gpu_layers": 0},
        ports=[8000],
        host_bytes=int(111.8 * MIB),
        bill=bill,
        bill_source="log",
    )


def shot_of(count: int = 1) -> Snapshot:
    found = [qa_server(13869 + i) for i in range(count)]
    return Snapshot(servers=found, gpus=[], host_total_bytes=24 * 2**30, host_available_bytes=20 * 2**30)


def laid_out_width(shown: list[str], rows: list[list[str]]) -> int:
    return sum(
        max(cell_len(text) for text in [name, *column]) + 2 * CELL_PADDING
        for name, column in zip(shown, zip(*rows, strict=True), strict=True)
    )


@pytest.mark.parametrize("room", [200, 116, 96, 76, 66, 40, 9])
def test_the_cells_fit_the_room_and_the_pid_is_whole(room: int) -> None:
    full = _row(qa_server(), [])
    assert full["bill"] == "79.5 MiB (printed)" and full["settings"].startswith("ctx 2048")
    shown, rows = fit_columns([full], room)
    assert laid_out_width(shown, rows) <= room, (shown, rows)
    assert shown[-1] == "PID" and rows[0][-1] == "13869"
    if room >= 120:  # room for everything: nothing given up
        assert shown == list(COLUMNS) and rows[0] == list(full.values())
    if room >= 66:  # a pane at 80x24 or a wide screen's 140 columns keeps what the memory is
        assert shown[:5] == ["engine", "model", "GPU", "host", "bill"] and rows[0][4].startswith("79.5 MiB")


@pytest.fixture
def no_bills(monkeypatch: pytest.MonkeyPatch) -> None:
    # the recorded servers' bills stand: no log, endpoint or estimate read for a made-up PID
    monkeypatch.setattr(servers, "bill_new", lambda shot, known: None)


@pytest.mark.parametrize(("size", "count"), [((80, 24), 1), ((120, 40), 1), ((200, 60), 1), ((120, 40), 12)])
async def test_the_table_fits_its_pane_at_every_size(
    no_bills: None, size: tuple[int, int], count: int
) -> None:
    app = VramtuiApp(live_sampling=False, remember=False)
    app.server_scan = lambda: shot_of(count)
    async with app.run_test(size=size) as pilot:
        table = app.query_one(MemoryPane).query_one(ServerTable)
        await wait_for(pilot, lambda: table.row_count == count)
        await pilot.pause()
        # nothing past the pane's edge: no sideways scrolling, the PID column shown whole
        assert table.virtual_size.width <= table.scrollable_content_region.width, table.ordered_columns
        assert [column.key.value for column in table.ordered_columns][-1] == "PID"
        assert table.get_row("13869")[-1] == "13869"
        assert any(line.rstrip(" │").endswith("13869") for line in screen_text(app).splitlines())
        assert table.cells["13869"]["bill"] == "79.5 MiB (printed)"  # the full cells stay at hand
        await pilot.resize_terminal(80, 24)  # a resize lays the table out again
        await pilot.pause()
        await wait_for(pilot, lambda: table.virtual_size.width <= table.scrollable_content_region.width)


async def test_the_room_follows_content_when_wide(tmp_path: Path) -> None:
    """A replay with no log: the curve's column gets the room; a log to read: the log's column does."""
    csv = write_nvsmi_csv(tmp_path / "curve.csv", bring_up_curve_mib())
    log = tmp_path / "server.log"
    log.write_text("llama_model_loader: loaded meta data\n" * 20, encoding="utf-8")
    for log_file, wider in ((None, "memory"), (str(log), "log")):
        app = VramtuiApp(replay_csv=str(csv), log_file=log_file, live_sampling=False, remember=False)
        async with app.run_test(size=(200, 60)) as pilot:
            await pilot.pause()
            widths = {name: app.pane(name).region.width for name in ("memory", "log", "estimator", "wizard")}
            assert widths["memory"] == widths["estimator"] and widths["log"] == widths["wizard"], widths
            narrower = "log" if wider == "memory" else "memory"
            assert widths[wider] == 120 and widths[narrower] == 80, (log_file, widths)
