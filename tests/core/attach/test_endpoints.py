"""Endpoints probed over real HTTP on loopback: a server that answers garbage is noted, not raised."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from vramtui.core.attach.endpoints import Unreachable, parse_prometheus, probe

GARBAGE = {
    "/health": (200, b"<html>it works</html>"),
    "/props": (200, b'{"hello": "world"}'),
    "/slots": (200, b"[1, 2, 3]"),
    "/metrics": (200, b"\x00\xff binary \x01"),
    "/api/ps": (500, b"boom"),
    "/v1/models": (200, b'{"data": [{"id": "tiny"}]}'),
}


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        status, body = GARBAGE.get(self.path, (404, b"no"))
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def garbage_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_garbage_answers_are_noted_each_on_its_own(garbage_server: str) -> None:
    found = probe(garbage_server)
    assert set(found) == set(GARBAGE)
    for path in ("/health", "/props", "/slots", "/metrics"):
        assert found[path].status == 200
        assert not found[path].answered
        assert found[path].problem and found[path].problem.startswith("answered garbage"), path
    assert found["/api/ps"].status == 500 and not found["/api/ps"].answered
    assert found["/v1/models"].answered and found["/v1/models"].found == {"models": ["tiny"]}


def test_a_closed_port_is_unreachable() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(Unreachable):
        probe(f"http://127.0.0.1:{port}")


def test_a_silent_listener_times_out_quickly() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)  # accepts the connection, never answers
        with pytest.raises(Unreachable, match=r"timed out|no answer"):
            probe(f"http://127.0.0.1:{sock.getsockname()[1]}", timeout_s=0.5)


def test_a_listener_that_answers_in_no_http_is_unreachable() -> None:
    """QA: a server answering bytes that are no HTTP status line (BadStatusLine) took `ps` and `attach`
    down with an internal error, hiding every other server."""
    from no_http import no_http_listener

    with no_http_listener() as url, pytest.raises(Unreachable, match="does not answer in HTTP"):
        probe(url, timeout_s=5)


VLLM_METRICS = """\
# HELP vllm:num_requests_running Number of requests currently running on GPU.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="Qwen/Qwen2.5-0.5B"} 2.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="Qwen/Qwen2.5-0.5B"} 5.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="Qwen/Qwen2.5-0.5B"} 0.4375
"""


def test_vllm_metrics_page_is_read() -> None:
    from vramtui.core.attach.endpoints import read_metrics

    found = read_metrics(VLLM_METRICS.encode())
    assert found["requests_running"] == 2.0
    assert found["requests_waiting"] == 5.0
    assert found["kv_cache_usage"] == 0.4375
    samples = parse_prometheus(VLLM_METRICS)
    assert samples[0] == (
        "vllm:num_requests_running",
        {"engine": "0", "model_name": "Qwen/Qwen2.5-0.5B"},
        2.0,
    )


def test_ollama_ps_is_read() -> None:
    from vramtui.core.attach.endpoints import read_ollama_ps

    body = (
        b'{"models":[{"name":"llama3.2:1b","model":"llama3.2:1b","size":2523487232,'
        b'"digest":"baf6a787fdff","size_vram":1261743616,"context_length":4096,'
        b'"expires_at":"2025-01-01T00:05:00Z"}]}'
    )
    assert read_ollama_ps(body) == {
        "models": [
            {"name": "llama3.2:1b", "size": 2523487232, "size_vram": 1261743616, "context_length": 4096}
        ]
    }


def test_an_empty_health_answer_is_healthy() -> None:
    """QA 9: vLLM's /health answers 200 with no body; it was called garbage ("not JSON (empty)")."""
    from vramtui.core.attach.endpoints import read_health

    assert read_health(b"") == {"health": "ok"}
    assert read_health(b'{"status": "ok"}') == {"health": "ok"}
    with pytest.raises(ValueError):
        read_health(b"<html>it works</html>")
