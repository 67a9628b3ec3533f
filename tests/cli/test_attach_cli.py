"""`vramtui attach` on real servers the test starts itself, outside vramtui, with their log in a file.

Attached by URL and by PID: engine, model, context and slots read from the command line, the
endpoints found, memory readings with replay's keys, the healthy log diagnosed healthy; and the
server is still running after attach exits (the test stops it itself).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from vramtui.core.memory.nvml import first_gpu_total_bytes

REPLAY_KEYS = {"baseline_mib", "plateau_mib", "peak_mib", "after_mib", "falls_back", "rising", "samples"}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_answers(url: str, proc: subprocess.Popen[bytes], log: Path, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"server exited {proc.returncode}: {log.read_text(errors='replace')[-2000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.3)
    pytest.fail(f"server never answered {url}")


def _start(argv: list[str], log: Path, ready_path: str, port: int) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        _wait_answers(f"http://127.0.0.1:{port}{ready_path}", proc, log)
        time.sleep(0.5)  # let its "listening" lines reach the log file
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)


@pytest.fixture(scope="module")
def llama_server(llama_server_bin: Path, tiny_gguf: Path, tmp_path_factory: pytest.TempPathFactory):
    port = _free_port()
    log = tmp_path_factory.mktemp("attach") / "llama-server.log"
    argv = [str(llama_server_bin), "-m", str(tiny_gguf), "--host", "127.0.0.1", "--port", str(port)]
    argv += ["--ctx-size", "1024", "--parallel", "2", "--metrics", "--slots"]
    for proc in _start(argv, log, "/health", port):
        yield proc, port, log


@pytest.fixture(scope="module")
def llama_cpp_python_server(tiny_gguf: Path, tmp_path_factory: pytest.TempPathFactory):
    pytest.importorskip("llama_cpp.server.app")
    port = _free_port()
    log = tmp_path_factory.mktemp("attach") / "llama-cpp-python.log"
    argv = [sys.executable, "-m", "llama_cpp.server", "--model", str(tiny_gguf), "--host", "127.0.0.1"]
    argv += ["--port", str(port), "--n_ctx", "768"]
    for proc in _start(argv, log, "/v1/models", port):
        yield proc, port, log


def attach(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vramtui", "attach", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _report(*args: str) -> dict:
    proc = attach(*args, "--json", "--duration", "1")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _check_common(report: dict, proc: subprocess.Popen[bytes], log: Path, tiny_gguf: Path) -> None:
    assert report["pid"] == proc.pid
    assert report["model"] == str(tiny_gguf)
    assert report["command_line"] == proc.args
    assert set(report["readings"]) >= REPLAY_KEYS
    assert report["readings"]["series"] == "process tree RSS (host)"  # no GPU here; the tree's RSS
    assert report["readings"]["samples"] >= 3
    assert report["readings"]["plateau_mib"] > 0
    assert report["log_source"] == str(log)  # found through /proc/PID/fd: its stdout goes there
    assert report["diagnosis"]["failed"] is False
    assert report["diagnosis"]["stage"] == "ready"
    assert report["still_running"] is True
    assert proc.poll() is None  # attach never stops a server it did not start


def test_llama_server_by_url(llama_server, tiny_gguf: Path) -> None:
    proc, port, log = llama_server
    report = _report(f"http://127.0.0.1:{port}")
    assert report["backend"] == "llama.cpp"
    assert report["params"] == {"context": 1024, "parallel": 2}
    assert set(report["endpoints_found"]) >= {"/health", "/props", "/slots", "/metrics", "/v1/models"}
    assert "/api/ps" not in report["endpoints_found"]
    assert report["endpoints"]["/props"]["slots"] == 2
    assert report["endpoints"]["/props"]["n_ctx_per_slot"] == 512  # 1024 split over 2 (QA 25 P3)
    assert report["endpoints"]["/props"]["n_ctx"] == 512  # the key scripts read stays
    assert report["endpoints"]["/slots"]["slots"] == 2
    assert report["endpoints"]["/metrics"]["requests_running"] == 0
    assert report["diagnosis"]["backend"] == "llama.cpp"
    _check_common(report, proc, log, tiny_gguf)


def test_llama_server_by_pid_as_text(llama_server) -> None:
    proc, port, _log = llama_server
    text = attach(str(proc.pid), "--duration", "0.5")
    assert text.returncode == 0, text.stderr
    assert f"PID {proc.pid}" in text.stdout
    assert "context=1024, parallel=2" in text.stdout
    assert "n_ctx_per_slot=512" in text.stdout  # /props: each slot's share, named as /slots names it
    assert "n_ctx=" not in text.stdout  # said once (QA 7: "n_ctx=512" beside context 1024 read as a conflict)
    assert f"http://127.0.0.1:{port}" in text.stdout
    # the four readings, as the memory pane and replay give them (QA 30 S16: plateau and peak alone)
    assert all(word in text.stdout for word in ("baseline ", "plateau ", "peak ", "falls back "))
    # up before the watch: no idle level was seen, as replay says of such a recording (QA 36 F10d: the
    # plateau was called the baseline)
    assert "baseline n/a" in text.stdout
    report = _report(str(proc.pid))
    assert report["readings"]["baseline_mib"] is None and report["readings"]["plateau_mib"]
    assert report["url"] == f"http://127.0.0.1:{port}"
    assert report["params"] == {"context": 1024, "parallel": 2}
    assert proc.poll() is None


def test_llama_cpp_python_by_pid_and_url(llama_cpp_python_server, tiny_gguf: Path) -> None:
    proc, port, log = llama_cpp_python_server
    for target in (str(proc.pid), f"http://127.0.0.1:{port}"):
        report = _report(target)
        assert report["backend"] == "llama-cpp-python"
        assert report["params"] == {"context": 768}
        assert report["params_assumed"]["parallel"] == 1  # it runs one sequence: its default
        assert report["endpoints_found"] == ["/v1/models"]
        assert report["endpoints"]["/metrics"]["answered"] is False
        _check_common(report, proc, log, tiny_gguf)
        if first_gpu_total_bytes() is None:  # QA 30 S21: no GPU here, so its CPU buffers are no news
            assert not any("nothing runs on a GPU" in w for w in report["diagnosis"]["warnings"])


def test_a_log_given_with_log_is_diagnosed(llama_server, tmp_path: Path) -> None:
    proc, port, _log = llama_server
    saved = tmp_path / "other.log"
    saved.write_text(
        "llama_model_load: error loading model: unable to allocate CUDA0 buffer\n"
        "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 9000.00 MiB on device 0: "
        "cudaMalloc failed: out of memory\n"
    )
    report = _report(f"http://127.0.0.1:{port}", "--log", str(saved))
    assert report["log_source"] == str(saved)
    assert report["diagnosis"]["failed"] is True
    assert proc.poll() is None


@pytest.mark.parametrize(
    ("target", "says"),
    [
        ("999999999", "no process with PID"),
        ("banana", "cannot attach to 'banana'"),
        ("http://127.0.0.1:notaport", "the port is not a number"),
        ("http://[::1", "not a URL"),
        ("docker:vramtui-no-such-container", "docker:vramtui-no-such-container: docker"),
        ("systemd:vramtui-no-such.service", "systemd:vramtui-no-such.service: systemctl"),
    ],
)
def test_bad_targets_are_one_line_and_exit_2(target: str, says: str) -> None:
    proc = attach(target, "--json", "--duration", "0.2")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and says in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("duration", ["0", "-1"])
def test_a_duration_that_watches_nothing_is_one_line(duration: str) -> None:
    proc = attach(str(os.getpid()), "--json", "--duration", duration)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip().splitlines() == [
        f"vramtui: --duration must be a positive number of seconds, not {float(duration):g}"
    ]


def test_a_url_nobody_answers_and_a_process_that_is_no_server() -> None:
    closed = attach(f"http://127.0.0.1:{_free_port()}", "--json")
    assert closed.returncode == 2 and "nothing answers" in closed.stderr
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        proc = attach(str(sleeper.pid), "--json", "--duration", "0.2")
        assert proc.returncode == 2 and "no model server" in proc.stderr
        assert sleeper.poll() is None  # not stopped either
    finally:
        sleeper.kill()
        sleeper.wait()


def test_a_port_held_by_something_else_is_no_model_server(tmp_path: Path) -> None:
    port = _free_port()
    (tmp_path / "index.html").write_text("hello")
    other = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.2)
        proc = attach(f"http://127.0.0.1:{port}", "--json", "--duration", "0.2")
        assert proc.returncode == 2, proc.stdout
        assert "no model server" in proc.stderr
        assert other.poll() is None
    finally:
        other.terminate()
        other.wait(10)


OLLAMA_PS = (
    '{"models":[{"name":"llama3.2:1b","model":"llama3.2:1b","size":2523487232,"digest":"baf6a787fdff",'
    '"details":{"format":"gguf","family":"llama","parameter_size":"1.2B","quantization_level":"Q8_0"},'
    '"expires_at":"2025-06-01T10:05:00Z","size_vram":1261743616,"context_length":4096}]}'
)
OLLAMA_LIKE = f"""
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer

class H(BaseHTTPRequestHandler):
    def do_GET(self):
        ok = self.path == "/api/ps"
        body = {OLLAMA_PS!r}.encode() if ok else b"404 page not found"
        self.send_response(200 if ok else 404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass

HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""


def test_an_ollama_api_by_url_reports_what_api_ps_says(tmp_path: Path) -> None:
    # Ollama cannot run here: its /api/ps answer (the shape Ollama 0.5 sends) served on loopback.
    script = tmp_path / "ollama_like.py"
    script.write_text(OLLAMA_LIKE)
    port = _free_port()
    log = tmp_path / "ollama.log"
    argv = [sys.executable, str(script), str(port)]
    for server in _start(argv, log, "/api/ps", port):
        report = _report(f"http://127.0.0.1:{port}")
        assert report["pid"] == server.pid  # found from the listening port
        assert report["backend"] is None  # a Python script is no engine: said in the notes
        assert report["endpoints_found"] == ["/api/ps"]
        assert report["endpoints"]["/api/ps"]["models"] == [
            {"name": "llama3.2:1b", "size": 2523487232, "size_vram": 1261743616, "context_length": 4096}
        ]
        assert report["model"] == "llama3.2:1b"
        assert any("no engine vramtui knows" in note for note in report["notes"])
        assert server.poll() is None


def test_a_server_that_dies_during_the_watch_keeps_its_log_and_its_level(
    llama_server_bin: Path, tiny_gguf: Path, tmp_path: Path
) -> None:
    """QA 30 S2: a server killed during `attach` read "plateau 0 MiB" and "falls back" (the zeros after its
    exit as its curve), "no log read" (its log was looked up through /proc after it was gone), and "leaves
    it running". Its log is found while it runs, the readings stop at its exit, and the text says it ended."""
    port = _free_port()
    log = tmp_path / "llama-server.log"
    argv = [str(llama_server_bin), "-m", str(tiny_gguf), "--host", "127.0.0.1", "--port", str(port)]
    for proc in _start([*argv, "--ctx-size", "512"], log, "/health", port):
        watcher = subprocess.Popen(
            [sys.executable, "-m", "vramtui", "attach", str(proc.pid), "--json", "--duration", "6"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        time.sleep(3.0)  # attached, sampling
        proc.kill()
        proc.wait(10)
        out, err = watcher.communicate(timeout=60)
        assert watcher.returncode == 0, err
        report = json.loads(out)
        assert report["still_running"] is False
        assert report["log_source"] == str(log) and report["diagnosis"] is not None
        readings = report["readings"]
        assert readings["plateau_mib"] and readings["plateau_mib"] > 0, readings
        assert any("the process exited at" in note for note in report["notes"]), report["notes"]
