"""SVG snapshots of the main layouts (pytest-textual-snapshot), from frozen data: a replayed curve,
a corpus log, fixed estimator numbers; no live sampling, no wall clock on screen. Textual is pinned
in pyproject.toml, so the snapshots stay stable; update them with `pytest --snapshot-update`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_tui_support import bring_up_curve_mib, wait_for, write_nvsmi_csv
from textual.pilot import Pilot

from vramtui.tui.app import VramtuiApp
from vramtui.tui.panes.estimator import EstimatorPane
from vramtui.tui.panes.log import LogPane
from vramtui.tui.panes.memory import MemoryPane

CORPUS_CASE = "llama.cpp-1"


@pytest.fixture
def frozen_inputs(tmp_path: Path) -> tuple[Path, Path]:
    """The curve and the log every snapshot uses; the tests' own copy of the corpus keeps them fixed."""
    corpus = Path(__file__).resolve().parents[1] / "data" / "corpus.jsonl"
    rows = {row["id"]: row for row in map(json.loads, corpus.read_text().splitlines()) if row}
    folder = tmp_path / "inputs"
    folder.mkdir()
    log = folder / "server.log"
    log.write_text(rows[CORPUS_CASE]["log"] + "\n", encoding="utf-8")
    csv = write_nvsmi_csv(folder / "curve.csv", bring_up_curve_mib())
    return csv, log


def frozen_app(csv: Path | None, log: Path | None, theme: str = "vramtui-dark") -> VramtuiApp:
    return VramtuiApp(
        replay_csv=str(csv) if csv else None,
        log_file=str(log) if log else None,
        theme=theme,
        live_sampling=False,
        remember=False,
    )


async def settle(pilot: Pilot, *, estimator: bool = False) -> None:
    app = pilot.app
    log = app.query_one(LogPane)
    memory = app.query_one(MemoryPane)
    if app.log_file:  # type: ignore[attr-defined]
        await wait_for(pilot, lambda: log.finished)
    if app.replay_csv:  # type: ignore[attr-defined]
        await wait_for(pilot, lambda: memory.state.count > 0)
    if estimator:
        pane = app.query_one(EstimatorPane)
        for name, value in (("params", "8B"), ("layers", "32"), ("kv_heads", "8"), ("head_dim", "128")):
            pane.set_value(name, value)
        await wait_for(pilot, lambda: pane.estimate is not None and pane.estimate.n_layers == 32)
    memory.repaint(force=True)
    app.set_focus(None)  # no blinking cursor in the picture
    await pilot.pause()


def test_wide_layout_all_four_panes(snap_compare, frozen_inputs: tuple[Path, Path]) -> None:  # type: ignore[no-untyped-def]
    csv, log = frozen_inputs

    async def run_before(pilot: Pilot) -> None:
        await settle(pilot, estimator=True)

    assert snap_compare(frozen_app(csv, log), terminal_size=(200, 50), run_before=run_before)


def test_80x24_log_pane_with_diagnosis(snap_compare, frozen_inputs: tuple[Path, Path]) -> None:  # type: ignore[no-untyped-def]
    _csv, log = frozen_inputs

    async def run_before(pilot: Pilot) -> None:
        await settle(pilot)
        await pilot.press("e")  # jump to the first error
        pilot.app.set_focus(None)
        await pilot.pause()

    assert snap_compare(frozen_app(None, log), terminal_size=(80, 24), run_before=run_before)


def test_80x24_memory_pane_high_contrast(snap_compare, frozen_inputs: tuple[Path, Path]) -> None:  # type: ignore[no-untyped-def]
    csv, _log = frozen_inputs

    async def run_before(pilot: Pilot) -> None:
        await settle(pilot)

    app = frozen_app(csv, None, theme="vramtui-high-contrast")
    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)
