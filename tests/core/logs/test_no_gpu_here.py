"""A run on a machine where NVML found no GPU: every buffer on the CPU is its only way to run, and the
launcher says so to the diagnosis; a saved log read elsewhere still warns (QA 16)."""

from __future__ import annotations

from pathlib import Path

from vramtui.core.logs.diagnose import LogDiagnoser

LOG = Path(__file__).resolve().parents[2] / "data" / "logs" / "llama-server-healthy-stopped-by-vramtui.log"
NOTHING_ON_GPU = "nothing runs on a GPU"


def _warnings(gpu_absent: bool | None) -> list[str]:
    diagnoser = LogDiagnoser(kernel_log=lambda: None)
    if gpu_absent is not None:
        diagnoser.gpu_absent = gpu_absent
    for line in LOG.read_text().splitlines():
        diagnoser.feed(line)
    return [str(warning) for warning in diagnoser.result().warnings]


def test_every_buffer_on_the_cpu_is_no_quiet_failure_where_no_gpu_was_found() -> None:
    assert any(NOTHING_ON_GPU in warning for warning in _warnings(None))  # `diagnose` of a log from anywhere
    assert not any(NOTHING_ON_GPU in warning for warning in _warnings(True))  # the launcher's run here
    assert any(NOTHING_ON_GPU in warning for warning in _warnings(False))
