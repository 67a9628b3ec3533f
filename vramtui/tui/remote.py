"""`vramtui --source URL`: the memory pane fed by a remote box's Prometheus text endpoint (its DCGM
exporter, or a Prometheus server's /federate) instead of this machine's NVML and RAM."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vramtui.core.memory.sampling import Sample, Sampler
    from vramtui.tui.panes.memory import MemoryPane

# An HTTP scrape per tick: a DCGM exporter refreshes its figures every second at best (30 s by default).
MIN_INTERVAL_S = 0.5


def remote_sampler(memory: MemoryPane, url: str, interval_s: float) -> Sampler:
    """A started sampler over the endpoint; what it says (its GPUs, a GPU gone from its answer, no
    answer) becomes the pane's note as it changes, read on the pane's next repaint."""
    from vramtui.core.memory.prometheus import PrometheusSource
    from vramtui.core.memory.sampling import Sampler

    source = PrometheusSource(url)
    told: list[str] = []

    def on_sample(sample: Sample) -> None:
        memory.ingest_from_thread(sample)
        status = source.status()
        words = f"remote box {status.message}"
        if not told or told[-1] != words:
            told.append(words)
            memory.source_notes.append(words)  # a list append: safe from the sampler thread

    memory.set_gpu_status(True, "")
    sampler = Sampler([source], interval_s=max(interval_s, MIN_INTERVAL_S), on_sample=on_sample)
    return sampler.start()
