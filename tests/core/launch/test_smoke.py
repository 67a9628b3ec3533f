"""The smallest request against real HTTP servers on loopback that answer the way servers do.

Each little server below answers like a real engine in one situation (a served-name mismatch, an empty
answer from a template mismatch, a queue that never drains); the interpretation is what is tested.
The real engines' answers are covered in test_launcher.py and test_transformers_runner.py.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from vramtui.core.launch.smoke import looks_garbled, smoke_request

Reply = Callable[[BaseHTTPRequestHandler, dict], None]


@contextmanager
def serving(reply: Reply, models: tuple[str, ...] = ("served-name",)) -> Iterator[str]:
    seen: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def _json(self, status: int, payload: object) -> None:
            body = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            self._json(200, {"object": "list", "data": [{"id": m, "object": "model"} for m in models]})

        def do_POST(self) -> None:
            request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append(request)
            reply(self, request)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
    assert seen, "the smallest request never reached the server"
    assert seen[0]["messages"] == [{"role": "user", "content": "ping"}] and seen[0]["max_tokens"] == 16


def chat(text: str, status: int = 200) -> Reply:
    def reply(handler: BaseHTTPRequestHandler, request: dict) -> None:
        handler._json(status, {"choices": [{"index": 0, "message": {"role": "assistant", "content": text}}]})  # type: ignore[attr-defined]

    return reply


def events(*sent: dict, delay_s: float = 0.0) -> Reply:
    """A stream of these server-sent events as they are, each after `delay_s`, then [DONE]."""

    def reply(handler: BaseHTTPRequestHandler, request: dict) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.send_header("Connection", "close")
        handler.end_headers()
        for event in sent:
            time.sleep(delay_s)
            handler.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
            handler.wfile.flush()
        handler.wfile.write(b"data: [DONE]\n\n")
        handler.close_connection = True

    return reply


def stream(pieces: list[str], delay_s: float = 0.01) -> Reply:
    """An answer streamed a piece at a time, as engines stream tokens."""
    return events(
        *({"choices": [{"index": 0, "delta": {"content": piece}}]} for piece in pieces), delay_s=delay_s
    )


def test_a_streamed_answer_gives_ttft_and_rate() -> None:
    with serving(stream(["Pong", "!", " How", " can", " I", " help", "?"])) as url:
        result = smoke_request(url, "served-name")
    assert result.ok and result.status == 200 and result.kind == "answered"
    assert result.text == "Pong! How can I help?"
    assert result.completion_tokens == 7
    assert result.ttft_s is not None and 0.005 < result.ttft_s < 5
    assert result.tokens_per_s is not None and result.tokens_per_s > 1
    assert result.warning is None


def test_an_answer_names_what_the_server_serves_under() -> None:
    # QA 33 V12: `check --json` carried "models": [] while vLLM listed its model at /v1/models
    with serving(chat("pong"), models=("/tmp/qa33/tiny-hf",)) as url:
        result = smoke_request(url, None)
    assert result.ok and result.models == ["/tmp/qa33/tiny-hf"]
    assert result.to_dict()["models"] == ["/tmp/qa33/tiny-hf"]


def test_an_answer_streamed_in_one_chunk_has_no_decode_rate() -> None:
    # QA 16: a runner that streams its whole answer at once, after generating it, read as 25,774 tokens/s
    answer = {"choices": [{"index": 0, "delta": {"content": "Pong! How can I help?"}}]}
    with serving(events(answer, {"choices": [], "usage": {"completion_tokens": 7}}, delay_s=0.05)) as url:
        result = smoke_request(url, "served-name")
    assert result.ok and result.text == "Pong! How can I help?" and result.completion_tokens == 7
    assert result.ttft_s is not None and result.tokens_per_s is None


def test_an_answer_streamed_in_a_few_bunched_chunks_has_no_decode_rate() -> None:
    # QA 35 F14: vLLM's CPU build sent a 16-token answer in two chunks, read as 33,795 tokens/s
    pieces = [
        {"choices": [{"index": 0, "delta": {"content": text}}]} for text in ("t343 t992", " t430 t520 t306")
    ]
    with serving(events(*pieces, {"choices": [], "usage": {"completion_tokens": 16}}, delay_s=0.05)) as url:
        result = smoke_request(url, "served-name")
    assert result.ok and result.completion_tokens == 16
    assert result.ttft_s is not None and result.tokens_per_s is None


def test_a_plain_json_answer_is_read_too() -> None:
    with serving(chat("pong")) as url:
        result = smoke_request(url, "served-name")
    assert result.ok and result.text == "pong" and result.meaning == "the server answers"


def test_model_name_mismatch_lists_the_served_names() -> None:
    def vllm_404(handler: BaseHTTPRequestHandler, request: dict) -> None:
        message = f"The model `{request['model']}` does not exist."
        handler._json(404, {"object": "error", "message": message, "type": "NotFoundError", "code": 404})  # type: ignore[attr-defined]

    with serving(vllm_404, models=("qwen-7b", "qwen-7b-lora")) as url:
        result = smoke_request(url, "/models/Qwen2.5-7B")
    assert not result.ok and result.status == 404 and result.kind == "model_not_found"
    assert result.models == ["qwen-7b", "qwen-7b-lora"]
    assert "qwen-7b, qwen-7b-lora" in result.meaning


def test_model_not_found_in_a_400_body_counts_too() -> None:
    def ollama_style(handler: BaseHTTPRequestHandler, request: dict) -> None:
        handler._json(400, {"error": {"message": "model 'llama3' not found, try pulling it first"}})  # type: ignore[attr-defined]

    with serving(ollama_style, models=("llama3.1:8b",)) as url:
        result = smoke_request(url, "llama3")
    assert result.kind == "model_not_found" and "llama3.1:8b" in result.meaning


def test_empty_answer_means_the_template_does_not_match() -> None:
    with serving(chat("")) as url:
        result = smoke_request(url, "served-name")
    assert not result.ok and result.status == 200 and result.kind == "empty"
    assert "chat template" in result.meaning


def test_garbled_answer_is_a_warning_not_a_failure() -> None:
    with serving(stream(["YT1Og6", "\x16O", "\u05a6\u0764O"])) as url:
        result = smoke_request(url, "served-name")
    assert result.ok and result.kind == "garbled"
    assert result.warning is not None and "chat template" in result.warning


def test_no_answer_before_the_timeout_means_queueing_or_cache_pressure() -> None:
    release = threading.Event()

    def stuck(handler: BaseHTTPRequestHandler, request: dict) -> None:
        release.wait(10)  # a request stuck behind others in the queue

    with serving(stuck) as url:
        t0 = time.monotonic()
        result = smoke_request(url, "served-name", timeout_s=0.5)
        release.set()
    assert time.monotonic() - t0 < 5
    assert not result.ok and result.kind == "timeout" and "queued" in result.meaning


def test_server_error_shows_its_message() -> None:
    def oom(handler: BaseHTTPRequestHandler, request: dict) -> None:
        handler._json(500, {"error": {"message": "CUDA out of memory. Tried to allocate 2.00 GiB"}})  # type: ignore[attr-defined]

    with serving(oom) as url:
        result = smoke_request(url, "served-name")
    assert not result.ok and result.status == 500 and result.kind == "http_error"
    assert "CUDA out of memory" in result.meaning


def test_connection_refused_means_the_server_is_not_up() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, not listening: connections are refused
        result = smoke_request(f"http://127.0.0.1:{port}", "m", timeout_s=2)
    assert not result.ok and result.status is None and result.kind == "refused"
    assert "not up" in result.meaning


@pytest.mark.parametrize(
    ("text", "garbled"),
    [
        ("Pong! How can I help you today?", False),
        ("Bonjour, je suis là.", False),
        ("Привет! Чем могу помочь?", False),
        ("YT1Og6\x16O\u05a6\u0764O", True),
        ("<\ufffd\ufffd\ufffd\x12\ufffd]2\x01Y/K", True),
        ("xQ7pZk Lm3Rt9 Vb2Nc8 Wd4Fg6", True),
        ("", False),
    ],
)
def test_looks_garbled(text: str, garbled: bool) -> None:
    assert looks_garbled(text) is garbled


def test_empty_stream_is_asked_again_without_streaming() -> None:
    """llama-cpp-python answers a too-long streamed request with an empty 200 stream (seen here)."""
    too_long = (
        "This model's maximum context length is 2048 tokens. However, you requested 3660 tokens "
        "(3628 in the messages, 32 in the completion). Please reduce the length of the messages or completion."
    )

    def like_llama_cpp_python(handler: BaseHTTPRequestHandler, request: dict) -> None:
        if request.get("stream"):
            handler.send_response(200)
            handler.send_header("Content-Type", "text/event-stream; charset=utf-8")
            handler.send_header("Connection", "close")
            handler.end_headers()
            handler.close_connection = True
            return
        error = {"message": too_long, "type": "invalid_request_error", "code": "context_length_exceeded"}
        handler._json(400, {"error": error})  # type: ignore[attr-defined]

    with serving(like_llama_cpp_python) as url:
        result = smoke_request(url, "served-name")
    assert not result.ok and result.status == 400 and result.kind == "context_too_long"
    assert "maximum context length is 2048 tokens" in result.meaning


def test_an_error_inside_the_stream_is_read() -> None:
    error = {"error": {"message": "CUDA out of memory. Tried to allocate 1.50 GiB", "code": 500}}
    with serving(events(error)) as url:
        result = smoke_request(url, "served-name")
    assert not result.ok and result.status == 500 and result.kind == "http_error"
    assert "CUDA out of memory" in result.meaning


def test_saved_request_is_loaded_and_checked(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from vramtui.core.errors import VramtuiError
    from vramtui.core.launch.smoke import load_saved_request, replay_request

    saved = tmp_path / "failed.json"
    saved.write_text(json.dumps({"messages": [{"role": "user", "content": "ping"}], "max_tokens": 16}))
    request = load_saved_request(saved)
    with serving(chat("pong")) as url:
        result = replay_request(url, request, model="served-name")
    assert result.ok and result.text == "pong"
    (tmp_path / "bad.json").write_text('{"prompt": "x"}')
    with pytest.raises(VramtuiError, match="messages"):
        load_saved_request(tmp_path / "bad.json")


def test_a_server_that_refuses_chat_but_completes_is_up_with_a_template_warning() -> None:
    """A base model on vLLM (no chat template) answers every chat request 400 while it serves plain
    completions: for bring-up the server is up; the template is a warning, not a failed start."""
    refusal = (
        "As of transformers v4.44, default chat template is no longer allowed, so you must provide a chat "
        "template if the tokenizer does not define one."
    )

    def base_model(handler: BaseHTTPRequestHandler, request: dict) -> None:
        if "messages" in request:
            handler._json(400, {"object": "error", "message": refusal, "code": 400})  # type: ignore[attr-defined]
        else:
            assert request["prompt"] and request["model"] == "served-name"
            handler._json(
                200, {"choices": [{"index": 0, "text": " pong"}], "usage": {"completion_tokens": 2}}
            )  # type: ignore[attr-defined]

    with serving(base_model) as url:
        result = smoke_request(url, "served-name")
    assert result.ok and result.text == " pong" and result.completion_tokens == 2
    assert result.warning and "chat template" in result.warning and "HTTP 400" in result.warning

    def broken(handler: BaseHTTPRequestHandler, request: dict) -> None:  # refuses both: not up
        handler._json(400, {"error": {"code": 400, "message": "unordered_map::at"}})  # type: ignore[attr-defined]

    with serving(broken) as url:
        result = smoke_request(url, "served-name")
    assert not result.ok and result.kind == "http_error" and "unordered_map::at" in result.meaning


def test_a_chat_refused_for_memory_is_not_retried_as_a_completion() -> None:
    asked: list[dict] = []

    def oom_on_chat(handler: BaseHTTPRequestHandler, request: dict) -> None:
        asked.append(request)
        if "messages" in request:
            handler._json(500, {"error": {"message": "CUDA out of memory. Tried to allocate 2.00 GiB"}})  # type: ignore[attr-defined]
        else:  # a plain completion would answer: the memory refusal must still be the result
            handler._json(200, {"choices": [{"index": 0, "text": " pong"}]})  # type: ignore[attr-defined]

    with serving(oom_on_chat) as url:
        result = smoke_request(url, "served-name")
    assert not result.ok and "CUDA out of memory" in result.meaning
    assert all("messages" in request for request in asked)
