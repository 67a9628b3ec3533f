"""Shared pieces of the TUI tests (no tests here): real nvidia-smi CSV curves, screen text, waiting."""

from __future__ import annotations

import asyncio
import datetime as dt
import math
import time
from collections.abc import Callable
from pathlib import Path

from textual.app import App
from textual.pilot import Pilot

NVSMI_HEADER = "timestamp, name, memory.used [MiB], memory.total [MiB], utilization.gpu [%]"


def bring_up_curve_mib(n: int = 1200) -> list[int]:
    """A 24 GiB card through a bring-up, sampled at 10 Hz: idle, weights loading, plateau, a request
    whose prefill spike goes over 80%, back to the plateau, one short spike of 2 samples, idle again."""
    values = []
    for i in range(n):
        if i < 100:
            used = 310.0
        elif i < 300:
            used = 310 + (i - 100) * 70
        elif i < 600:
            used = 14400
        elif i < 640:
            used = 14400 + 5500 * math.sin((i - 600) / 40 * math.pi)
        elif i < 900:
            used = 14400
        elif i < 902:
            used = 21800  # a 200 ms spike that nvidia-smi -l 1 would miss
        else:
            used = 14450
        values.append(int(used))
    return values


def write_nvsmi_csv(
    path: Path, values_mib: list[int], total_mib: int = 24564, name: str = "NVIDIA GeForce RTX 4090"
) -> Path:
    """The text `nvidia-smi --query-gpu=timestamp,name,memory.used,memory.total,utilization.gpu
    --format=csv -lms 100` writes."""
    start = dt.datetime(2026, 11, 30, 4, 0, 0)
    lines = [NVSMI_HEADER]
    for index, used in enumerate(values_mib):
        t = start + dt.timedelta(milliseconds=100 * index)
        util = 97 if used > 15000 else 0
        stamp = f"{t:%Y/%m/%d %H:%M:%S}.{t.microsecond // 1000:03d}"
        lines.append(f"{stamp}, {name}, {used} MiB, {total_mib} MiB, {util} %")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def screen_text(app: App) -> str:
    """What the terminal shows, as plain text rows."""
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


async def wait_for(pilot: Pilot, condition: Callable[[], bool], timeout_s: float = 20.0) -> None:
    """Let the app run until `condition()` holds (thread workers post messages meanwhile)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout_s} s")
        await pilot.pause(0.05)
    await asyncio.sleep(0)
    await pilot.pause()
