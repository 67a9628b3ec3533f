"""Save the README's screenshot: the app at 200x50 running the embedded demo to a working model.

    python -m vramtui.tui.screenshot docs/screenshot.svg

It runs the real demo (llama-cpp-python on the CPU): the first launch fails under its memory budget,
the wizard proposes one change, the change is confirmed, the model comes up; then Textual saves an SVG.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from textual.pilot import Pilot

from vramtui.tui.app import VramtuiApp


async def _until(pilot: Pilot[Any], condition: Callable[[], object], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit("the demo did not get there in time")
        await pilot.pause(0.1)


async def save(path: Path, size: tuple[int, int] = (200, 50)) -> Path:
    app = VramtuiApp(demo=True, remember=False)
    async with app.run_test(size=size) as pilot:
        wizard = app.query_one("#wizard")
        await _until(
            pilot, lambda: wizard.proposal is not None or (wizard.driver and wizard.driver.finished), 180
        )
        while not wizard.driver.finished:
            await pilot.press("n")
            await _until(pilot, lambda: not wizard.busy and (wizard.proposal or wizard.driver.finished), 180)
        await _until(pilot, lambda: app.session is not None and app.session.state == "ready", 120)
        await pilot.pause(3.0)  # a few seconds of the running model's curve
        app.set_focus(None)
        await pilot.pause()
        path.parent.mkdir(parents=True, exist_ok=True)
        app.save_screenshot(filename=path.name, path=str(path.parent))
        app.stop_models()
    return path


def main() -> int:
    target = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/screenshot.svg")
    print(asyncio.run(save(target)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
