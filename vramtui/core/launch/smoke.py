"""The smallest chat request ("ping", 16 tokens) and what its answer means for the person waiting.

connection refused → the server is not up (see the log); 404 or "model not found" → the name differs
from what the server registered (we list the names it has); 200 with empty text → the chat template
does not match; 200 with garbled text → a warning (random weights answer like that, so do mismatched
templates), not a failure; no answer before the timeout → queueing or cache pressure.
Time to first token and tokens per second come from the streamed answer.
"""

from __future__ import annotations

import json
import re
import time
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

PING = {"messages": [{"role": "user", "content": "ping"}], "max_tokens": 16}


@dataclass(frozen=True)
class SmokeResult:
    ok: bool  # the server answered with well-formed, non-empty text
    status: int | None  # HTTP status; None when no HTTP answer came
    meaning: str  # one line for the user
    text: str = ""
    kind: str = "answered"  # answered | garbled | empty | refused | model_not_found | timeout | http_error | bad_response
    warning: str | None = None
    ttft_s: float | None = None
    tokens_per_s: float | None = None
    completion_tokens: int | None = None
    elapsed_s: float | None = None
    models: list[str] = field(default_factory=list)  # what /v1/models lists (when we looked)

    @property
    def failure(self) -> str | None:
        """The failure code a request that did not answer well is filed under (`smoke_bad_response` ...)."""
        return None if self.ok else f"smoke_{self.kind}"

    def to_dict(self) -> dict[str, object]:
        return {
            "ok": self.ok,
            "status": self.status,
            "meaning": self.meaning,
            "kind": self.kind,
            "text": self.text,
            "warning": self.warning,
            "ttft_s": None if self.ttft_s is None else round(self.ttft_s, 4),
            "tokens_per_s": None if self.tokens_per_s is None else round(self.tokens_per_s, 1),
            "completion_tokens": self.completion_tokens,
            "elapsed_s": None if self.elapsed_s is None else round(self.elapsed_s, 3),
            "models": self.models,
        }


def list_models(base_url: str, timeout_s: float = 5.0) -> list[str]:
    """The model names the server registered (/v1/models), or [] when it does not say."""
    import httpx

    try:
        response = httpx.get(base_url.rstrip("/") + "/v1/models", timeout=timeout_s)
        data = response.json()
    except (httpx.HTTPError, ValueError):
        return []
    items = data.get("data") if isinstance(data, dict) else None
    if not isinstance(items, list):
        return []
    return [str(item["id"]) for item in items if isinstance(item, dict) and "id" in item]


def looks_garbled(text: str) -> bool:
    """Random-weight or template-mismatch output: mostly symbols, control or replacement characters."""
    stripped = text.strip()
    if not stripped:
        return False
    if "\ufffd" in stripped:
        return True
    normal = 0
    for char in stripped:
        category = unicodedata.category(char)
        if char.isascii() and (char.isalnum() or char in " .,!?'\"-:;()\n"):
            normal += 1
        elif category.startswith("L") and not char.isascii():
            normal += 1  # letters of other scripts are text too
    if normal / len(stripped) < 0.8:
        return True
    words = stripped.split()
    # Long runs without spaces and mixed-case noise ("YT1Og6O") read as garbage.
    noisy = sum(1 for w in words if len(w) > 3 and _mixed(w))
    return bool(words) and noisy / len(words) > 0.5


def _mixed(word: str) -> bool:
    has_upper_inside = any(c.isupper() for c in word[1:])
    has_lower = any(c.islower() for c in word)
    has_digit = any(c.isdigit() for c in word)
    return (has_upper_inside and has_lower) or (has_digit and (has_lower or has_upper_inside))


def _error_message(body: str) -> str:
    try:
        data = json.loads(body)
    except ValueError:
        return body.strip()[:200]
    if isinstance(data, dict):
        error = data.get("error", data.get("detail", data))
        if isinstance(error, dict):
            return str(error.get("message", error))[:200]
        return str(error)[:200]
    return str(data)[:200]


def _error_status(event: dict[str, object], status: int | None) -> int | None:
    error = event.get("error")
    code = error.get("code") if isinstance(error, dict) else None
    return code if isinstance(code, int) and 400 <= code < 600 else status


def _is_error_body(body: str) -> bool:
    try:
        data = json.loads(body) if body else None
    except ValueError:
        return False
    return isinstance(data, dict) and bool(data.get("error")) and "choices" not in data


def _too_long(body: str) -> bool:
    lowered = body.lower()
    return "maximum context length" in lowered or "context_length_exceeded" in lowered


def _not_found(status: int, body: str) -> bool:
    lowered = body.lower()
    return status == 404 or ("model" in lowered and ("not found" in lowered or "does not exist" in lowered))


def smoke_request(
    base_url: str,
    model: str | None,
    timeout_s: float = 30.0,
    max_tokens: int = 16,
    options: dict[str, object] | None = None,
) -> SmokeResult:
    """POST the smallest chat request (streamed) and interpret the answer."""
    payload: dict[str, object] = {**PING, "max_tokens": max_tokens}
    if model:
        payload["model"] = model
    if options:
        payload["options"] = options  # Ollama's per-request model options (num_gpu, num_batch)
    result = chat_request(base_url, payload, timeout_s)
    if result.kind == "http_error" and result.status in _CHAT_REFUSED and not _MEMORY.search(result.meaning):
        # the server is up and refuses chat (a model with no or a broken chat template): whether it
        # serves at all is what memory bring-up asks, so a plain completion settles it
        plain = _completion(base_url, model, timeout_s, max_tokens)
        if plain is not None:
            result = replace(
                plain,
                warning=f"chat requests fail ({result.meaning}) while plain completions answer: "
                "the model's chat template does not work here (a base model has none)",
            )
    if result.ok and not result.models:
        # the name the server serves under is what a client must send (QA 33 V12: the key was always empty)
        result = replace(result, models=list_models(base_url))
    return result


# What a server answers to a chat request it cannot template: llama-server's 400/500, vLLM's 400.
_CHAT_REFUSED = (400, 422, 500)
# ... unless the refusal is about memory: that is the answer, whatever a plain completion does
_MEMORY = re.compile(r"\boom\b|alloc|memory", re.IGNORECASE)


def _completion(base_url: str, model: str | None, timeout_s: float, max_tokens: int) -> SmokeResult | None:
    """One plain (non-chat) completion; the result when it answered with text, else None."""
    import httpx

    body: dict[str, object] = {"prompt": "ping", "max_tokens": max_tokens, "stream": False}
    if model:
        body["model"] = model
    started = time.monotonic()
    try:
        response = httpx.post(base_url.rstrip("/") + "/v1/completions", json=body, timeout=timeout_s)
        data = response.json()
        text = str(data["choices"][0]["text"])
    except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError):
        return None
    if response.status_code != 200:
        return None
    tokens = (data.get("usage") or {}).get("completion_tokens") if isinstance(data, dict) else None
    return SmokeResult(
        True,
        200,
        "the server answers plain completions",
        text=text,
        kind="answered",
        completion_tokens=tokens if isinstance(tokens, int) else None,
        elapsed_s=time.monotonic() - started,
    )


def load_saved_request(path: str | Path) -> dict[str, object]:
    """A saved chat request (the JSON body that failed), for replaying against a fixed server."""
    from vramtui.core.errors import VramtuiError

    file = Path(path)
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except OSError as error:
        raise VramtuiError(f"cannot read the saved request {file}: {error.strerror}") from None
    except ValueError:
        raise VramtuiError(f"{file}: not a JSON chat request") from None
    if not isinstance(data, dict) or not isinstance(data.get("messages"), list):
        raise VramtuiError(f'{file}: a chat request needs a "messages" list')
    return data


def replay_request(
    base_url: str, request: dict[str, object], model: str | None = None, timeout_s: float = 300.0
) -> SmokeResult:
    """Send a saved (long) request again, e.g. the one that failed at the inference stage."""
    payload = dict(request)
    if model and "model" not in payload:
        payload["model"] = model
    return chat_request(base_url, payload, timeout_s)


def chat_request(base_url: str, payload: dict[str, object], timeout_s: float = 30.0) -> SmokeResult:
    """POST one chat request (streamed, for the first-token time) and interpret the answer."""
    streamed = _send(base_url, {**payload, "stream": True}, timeout_s)
    if streamed.kind == "no_events":
        # Some servers (llama-cpp-python) answer a refused streamed request with an empty 200 stream:
        # ask once more without streaming to get the server's own error.
        return _send(base_url, {**payload, "stream": False}, timeout_s)
    return streamed


@dataclass
class _Reply:
    """What came back for one chat request, as it arrived (a stream's pieces, or a plain body)."""

    status: int | None = None
    body: str = ""
    events: int = 0
    pieces: list[str] = field(default_factory=list)
    chunks: int = 0
    usage_tokens: int | None = None
    first: float | None = None  # when the first piece arrived (monotonic)


def _read_event(reply: _Reply, event: object) -> bool:
    """Fold one stream event into the reply; False when it was an error (the stream stops there)."""
    reply.events += 1
    if not isinstance(event, dict):
        return True
    if event.get("error"):
        reply.body = json.dumps(event)  # an error sent inside the stream
        reply.status = _error_status(event, reply.status)
        return False
    usage = event.get("usage")
    if isinstance(usage, dict) and usage.get("completion_tokens") is not None:
        reply.usage_tokens = int(usage["completion_tokens"])
    for choice in event.get("choices", []):
        delta = choice.get("delta") or choice.get("message") or {}
        piece = delta.get("content") or ""
        if piece:
            if reply.first is None:
                reply.first = time.monotonic()
            reply.pieces.append(piece)
            reply.chunks += 1
    return True


def _read_stream(reply: _Reply, lines: Iterator[str], started: float, timeout_s: float) -> None:
    """Server-sent events until [DONE], an error event, or the time is up (httpx.ReadTimeout)."""
    import httpx

    for line in lines:
        if time.monotonic() - started > timeout_s:
            raise httpx.ReadTimeout("stream took too long")
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            return
        try:
            event = json.loads(data)
        except ValueError:
            continue
        if not _read_event(reply, event):
            return


def _post(url: str, payload: dict[str, object], timeout_s: float, started: float) -> _Reply | SmokeResult:
    """Send the request and read the answer; a SmokeResult when the connection itself failed."""
    import httpx

    reply = _Reply()
    try:
        with (
            httpx.Client(timeout=httpx.Timeout(timeout_s, connect=5.0)) as client,
            client.stream("POST", url, json=payload) as response,
        ):
            reply.status = response.status_code
            content_type = response.headers.get("content-type", "")
            if reply.status != 200 or "text/event-stream" not in content_type:
                reply.body = response.read().decode("utf-8", errors="replace")
            else:
                _read_stream(reply, response.iter_lines(), started, timeout_s)
    except httpx.ConnectError:
        return SmokeResult(
            False, None, "connection refused: the server is not up (see the log)", kind="refused"
        )
    except httpx.TimeoutException:
        return SmokeResult(
            False,
            reply.status,
            f"no answer within {timeout_s:g} s: the request is queued or the KV cache is under pressure (see the log)",
            kind="timeout",
            elapsed_s=time.monotonic() - started,
        )
    except httpx.HTTPError as error:
        return SmokeResult(False, reply.status, f"the connection failed: {error}", kind="bad_response")
    return reply


def _refusal(reply: _Reply, base_url: str, model: object, elapsed_s: float) -> SmokeResult | None:
    """The server said no (an HTTP error, an error body, an empty stream), or None when it answered."""
    status, body = reply.status, reply.body
    if status == 200 and not body and reply.events == 0:
        return SmokeResult(False, status, "the stream ended without a single event", kind="no_events")
    if status is None or (status == 200 and not _is_error_body(body)):
        return None
    if _too_long(body):
        return SmokeResult(
            False,
            status,
            f"the request is longer than the server's context: {_error_message(body)}",
            kind="context_too_long",
            elapsed_s=elapsed_s,
        )
    if _not_found(status, body):
        names = list_models(base_url)
        listed = ", ".join(names) if names else "none listed"
        return SmokeResult(
            False,
            status,
            f"model {model!r} not found: the server registered {listed}; use that name",
            kind="model_not_found",
            models=names,
        )
    return SmokeResult(
        False, status, f"HTTP {status}: {_error_message(body)}", kind="http_error", elapsed_s=elapsed_s
    )


def _read_plain(reply: _Reply, finished: float) -> SmokeResult | None:
    """A 200 that was not a stream: take its JSON answer into the reply (or say it is not one)."""
    try:
        data = json.loads(reply.body)
        message = data["choices"][0].get("message") or {}
        reply.pieces = [message.get("content") or ""]
        reply.usage_tokens = (data.get("usage") or {}).get("completion_tokens")
        reply.first = finished
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        return SmokeResult(
            False,
            reply.status,
            "HTTP 200 but not a chat completion",
            text=reply.body[:200],
            kind="bad_response",
        )
    return None


def _answer(reply: _Reply, started: float, finished: float) -> SmokeResult:
    """An answer: its timings, and whether its text is empty or looks garbled."""
    text = "".join(reply.pieces)
    tokens = reply.usage_tokens if reply.usage_tokens is not None else reply.chunks
    first = reply.first
    rate = None
    # the decode rate after the first token, where the tokens came over time: a server that sends its whole
    # answer in one chunk after generating it (QA 16: 25,774 tokens/s from a transformers runner) shows none,
    # nor one whose tokens came bunched in a few chunks (QA 35 F14: vLLM's 16 tokens in two chunks read as
    # 33,795 tokens/s): at least half the tokens each in a chunk of their own
    streamed = reply.chunks > 1 and 2 * (reply.chunks - 1) >= (tokens or 0) - 1
    if first is not None and tokens and tokens > 1 and finished > first and streamed:
        rate = (tokens - 1) / (finished - first)
    common = {
        "text": text,
        "ttft_s": (first - started) if first is not None else None,
        "tokens_per_s": rate,
        "completion_tokens": tokens,
        "elapsed_s": finished - started,
    }
    if not text.strip():
        return SmokeResult(
            False,
            reply.status,
            "answered 200 with empty text: the chat template probably does not match the model",
            kind="empty",
            **common,  # type: ignore[arg-type]
        )
    if looks_garbled(text):
        return SmokeResult(
            True,
            reply.status,
            "the server answers (the text looks garbled: random weights, or a chat template that does not match)",
            kind="garbled",
            warning="answer looks garbled: check the chat template (expected with random-weight models)",
            **common,  # type: ignore[arg-type]
        )
    return SmokeResult(True, reply.status, "the server answers", kind="answered", **common)  # type: ignore[arg-type]


def _send(base_url: str, payload: dict[str, object], timeout_s: float) -> SmokeResult:
    """POST one chat request (streamed when the server streams) and say what the answer means."""
    started = time.monotonic()
    reply = _post(base_url.rstrip("/") + "/v1/chat/completions", payload, timeout_s, started)
    if isinstance(reply, SmokeResult):
        return reply
    finished = time.monotonic()
    refused = _refusal(reply, base_url, payload.get("model"), finished - started)
    if refused is not None:
        return refused
    if reply.body:
        not_chat = _read_plain(reply, finished)
        if not_chat is not None:
            return not_chat
    return _answer(reply, started, finished)
