"""`vramtui record --source URL` as users run it: a real process reading a real loopback HTTP server
that answers a recorded DCGM-exporter payload whose memory changes while it records."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from prometheus_server import PayloadServer, federated, recorded, with_memory, without_gpu

from vramtui.core.memory.nvsmi_csv import read_nvsmi_csv

MIB = 1024**2
T4 = "GPU-6d5c0ac5-74d7-3130-46f1-e93ed57f469a"
A100 = "GPU-0946f70c-659b-4c39-8b78-7e7600000000"


def vramtui(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "vramtui", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def rows(path: Path) -> int:
    if not path.is_file():
        return 0
    return sum(1 for line in path.read_text().splitlines() if line and not line.startswith("timestamp"))


def wait_rows(path: Path, at_least: int, proc: subprocess.Popen[str], timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while rows(path) < at_least:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, f"only {rows(path)} rows"
        time.sleep(0.05)


def stop(proc: subprocess.Popen[str]) -> tuple[str, str]:
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    return out, err


def test_the_csv_holds_the_memory_the_exporter_reported_as_it_changed(tmp_path: Path) -> None:
    text = recorded("dcgm-t4.prom")
    csv = tmp_path / "remote.csv"
    with PayloadServer(text) as server:
        proc = vramtui(
            "record", "--source", server.url + "/metrics", "--interval-ms", "50", "--out", str(csv)
        )
        steps = (5120, 1000, 6000, 2500)  # the recorded figure first, then a load, a bigger one, a fall
        try:
            for used in steps:
                server.set_payload(with_memory(text, {T4: used}))
                wait_rows(csv, rows(csv) + 3, proc)
        finally:
            _, err = stop(proc)
    data = read_nvsmi_csv(csv)
    assert data.skipped == 0 and len(data.gpus) == 1
    series = next(iter(data.gpus.values()))
    assert series.uuid == T4 and series.name == "Tesla T4"
    values = [round(v / MIB) for v in series.used if v is not None]
    changes = [v for i, v in enumerate(values) if i == 0 or v != values[i - 1]]
    assert changes == list(steps)
    assert round(series.total / MIB) == 5120 + 9791 + 447  # used + free + reserved, as recorded
    assert "1 GPU(s)" in err and "Traceback" not in err

    replay = subprocess.run(
        [sys.executable, "-m", "vramtui", "replay", str(csv), "--json"], capture_output=True, text=True
    )
    assert replay.returncode == 0, replay.stderr
    readings = json.loads(replay.stdout)
    # The same readings as for a local GPU: the peak, and the 80% line of that box's card.
    assert readings["peak_mib"] == 6000
    assert readings["total_mib"] == 5120 + 9791 + 447
    assert readings["safety_line_mib"] == pytest.approx(0.8 * readings["total_mib"], abs=0.1)


def test_a_gpu_that_vanishes_mid_run_loses_no_recorded_row(tmp_path: Path) -> None:
    fleet = federated({"a:9400": recorded("dcgm-a100-vgpu.prom"), "b:9400": recorded("dcgm-t4.prom")})
    csv = tmp_path / "fleet.csv"
    with PayloadServer(fleet) as server:
        proc = vramtui(
            "record", "--source", server.url + "/federate", "--interval-ms", "50", "--out", str(csv)
        )
        try:
            wait_rows(csv, 6, proc)
            server.set_payload(without_gpu(fleet, T4))
            wait_rows(csv, rows(csv) + 6, proc)
            server.set_payload(fleet)
            wait_rows(csv, rows(csv) + 6, proc)
        finally:
            _, err = stop(proc)
    data = read_nvsmi_csv(csv)
    assert data.skipped == 0
    by_uuid = {series.uuid: series for series in data.gpus.values()}
    assert set(by_uuid) == {A100, T4}
    t4 = by_uuid[T4].used
    gap = [i for i, v in enumerate(t4) if v is None]
    assert gap and gap[0] > 0 and gap[-1] < len(t4) - 1  # figures before, none while gone, figures after
    assert all(v is not None for v in by_uuid[A100].used)
    assert len(by_uuid[A100].used) == len(t4)  # one row per GPU per sample, the lost one included
    assert "gone from the answer" in err and err.count("gone from the answer") <= 2


def test_record_source_stops_after_its_duration(tmp_path: Path) -> None:
    csv = tmp_path / "short.csv"
    with PayloadServer(recorded("dcgm-a100-vgpu.prom")) as server:
        proc = vramtui(
            "record", "--source", server.url, "--duration", "1", "--interval-ms", "100", "--out", str(csv)
        )
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert rows(csv) >= 2 and "recorded" in err


@pytest.mark.parametrize(
    ("route", "words"),
    [
        ((200, "text/html", b"<html><body>Sign in</body></html>"), "answered HTML"),
        ((200, "application/json", b'{"gpus": [1, 2]}'), "answered JSON"),
        ((200, "application/octet-stream", b"\x00\x01\x02\xff" * 64), "binary"),
        ((503, "text/plain", b"busy"), "HTTP 503"),
    ],
)
def test_an_answer_that_is_no_metrics_page_is_one_line_and_exit_2(tmp_path: Path, route, words: str) -> None:
    with PayloadServer("") as server:
        server.routes["/metrics"] = route
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "vramtui",
                "record",
                "--source",
                server.url,
                "--out",
                str(tmp_path / "x.csv"),
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert result.returncode == 2
    assert words in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("name", ["llama-server.prom", "vllm-0.10.prom"])
def test_a_model_server_metrics_page_says_it_has_no_gpu_memory(name: str) -> None:
    with PayloadServer(recorded(name)) as server:
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "vramtui",
                "record",
                "--source",
                server.url + "/metrics",
                "--duration",
                "1",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert result.returncode == 2 and "no GPU memory figures" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and result.stdout == ""


def test_nothing_listening_and_a_slow_endpoint_are_one_line_and_no_hang() -> None:
    with PayloadServer("") as server:
        closed = server.url
    with PayloadServer(recorded("dcgm-t4.prom"), delay_s=10) as slow:
        for url, words in ((closed, "cannot connect"), (slow.url, "no answer within")):
            started = time.monotonic()
            result = subprocess.run(
                [sys.executable, "-m", "vramtui", "record", "--source", url],
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert result.returncode == 2 and words in result.stderr, result.stderr
            assert len(result.stderr.strip().splitlines()) == 1
            assert time.monotonic() - started < 9  # the 2 s timeout, plus Python's start on a loaded box


def test_pid_and_source_together_are_refused() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "vramtui", "record", "--source", "http://127.0.0.1:9/metrics", "--pid", "1"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2 and "--source" in result.stderr


def test_the_app_refuses_a_source_it_cannot_read_before_the_screen_opens() -> None:
    with PayloadServer(recorded("llama-server.prom")) as server:
        result = subprocess.run(
            [sys.executable, "-m", "vramtui", "--source", server.url + "/metrics"],
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
    assert result.returncode == 2 and "no GPU memory figures" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "\x1b[" not in result.stdout  # no screen drawn


@pytest.mark.engine
def test_a_llama_server_without_metrics_is_told_to_start_with_metrics(
    llama_server_bin: Path, tiny_gguf: Path, tmp_path: Path
) -> None:
    """Issue 22 defect 41: a real llama-server started without --metrics answers /metrics with 501; the
    one line said only `HTTP 501 Not Implemented`. It now says what the server said, and the flag."""
    from test_attach_cli import _free_port, _start

    port = _free_port()
    argv = [str(llama_server_bin), "-m", str(tiny_gguf), "--port", str(port), "-c", "512"]
    for _proc in _start(argv, tmp_path / "server.log", "/health", port):
        result = subprocess.run(
            [sys.executable, "-m", "vramtui", "record", "--source", f"127.0.0.1:{port}", "--duration", "1"],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert result.returncode == 2 and "Traceback" not in result.stderr
    line = result.stderr.strip()
    assert len(line.splitlines()) == 1 and "HTTP 501" in line and "--metrics" in line, line
    # QA 39 F13: and that --metrics gives no GPU memory either, so the restart is not the way (DCGM is)
    assert "no GPU memory" in line and "DCGM" in line, line
