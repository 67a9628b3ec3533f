"""The HTTP endpoints a running model server offers, probed once each with a short timeout.

llama-server: /health, /props (n_ctx, slots), /slots, /metrics; vLLM: /metrics (KV-cache usage,
running and waiting requests); Ollama: /api/ps (size, size_vram, context per loaded model); any
OpenAI-style server: /v1/models. An endpoint that answers garbage is noted, never raised.
"""

from __future__ import annotations

import http.client
import json
import re
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

TIMEOUT_S = 2.0
MAX_BODY = 4 << 20  # a /metrics page of a busy server is tens of kB; anything this big is not one

# Metric name -> the key attach reports it under.
METRICS: dict[str, str] = {
    "llamacpp:kv_cache_usage_ratio": "kv_cache_usage",
    "llamacpp:kv_cache_tokens": "kv_cache_tokens",
    "llamacpp:requests_processing": "requests_running",
    "llamacpp:requests_deferred": "requests_waiting",
    "vllm:kv_cache_usage_perc": "kv_cache_usage",
    "vllm:gpu_cache_usage_perc": "kv_cache_usage",
    "vllm:num_requests_running": "requests_running",
    "vllm:num_requests_waiting": "requests_waiting",
}


@dataclass
class Endpoint:
    path: str
    status: int | None = None  # HTTP status; None: nothing answered
    found: dict[str, Any] = field(default_factory=dict)  # what it said that matters
    problem: str | None = None

    @property
    def answered(self) -> bool:
        return self.status is not None and 200 <= self.status < 300 and self.problem is None

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "answered": self.answered, **self.found, "problem": self.problem}


class Unreachable(Exception):
    """Nothing listens, or it does not answer within the timeout: stop probing this server."""


def fetch(url: str, timeout_s: float = TIMEOUT_S) -> tuple[int, bytes]:
    request = urllib.request.Request(url, headers={"Accept": "application/json, text/plain"})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            return response.status, response.read(MAX_BODY)
    except urllib.error.HTTPError as error:
        return error.code, b""
    except TimeoutError as error:
        raise Unreachable(f"no answer within {timeout_s:g} s") from error
    except urllib.error.URLError as error:
        reason = error.reason
        raise Unreachable(getattr(reason, "strerror", None) or str(reason)) from error
    except (ConnectionError, OSError) as error:  # reset mid-answer, a non-HTTP listener
        raise Unreachable(error.strerror or type(error).__name__) from error
    except http.client.HTTPException as error:  # a listener that answers, but not in HTTP (QA: BadStatusLine)
        raise Unreachable(f"it does not answer in HTTP ({type(error).__name__})") from error


def _json(body: bytes) -> Any:
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError) as error:
        raise ValueError(f"not JSON ({_snippet(body)})") from error


def _snippet(body: bytes) -> str:
    text = " ".join(body[:60].decode("utf-8", "replace").split())
    return repr(text) if text else "empty"


def read_health(body: bytes) -> dict[str, Any]:
    if not body.strip():
        return {"health": "ok"}  # vLLM's /health: an empty 200 is its healthy answer (QA 9)
    data = _json(body)
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    return {"health": data.get("status")}


def read_props(body: bytes) -> dict[str, Any]:
    data = _json(body)
    if not isinstance(data, dict) or "default_generation_settings" not in data:
        raise ValueError("no default_generation_settings: not llama-server's /props")
    settings = data.get("default_generation_settings") or {}
    n_ctx = settings.get("n_ctx") if isinstance(settings, dict) else None
    # each slot's share of the context, named as /slots names it (QA 25 P3); "n_ctx" stays for scripts
    return {
        "n_ctx_per_slot": n_ctx,
        "n_ctx": n_ctx,
        "slots": data.get("total_slots"),
        "model_path": data.get("model_path"),
    }


def read_slots(body: bytes) -> dict[str, Any]:
    data = _json(body)
    if not isinstance(data, list) or not all(isinstance(slot, dict) for slot in data):
        raise ValueError("not a list of slots")
    busy = sum(1 for slot in data if slot.get("is_processing"))
    n_ctx = sorted({slot.get("n_ctx") for slot in data if isinstance(slot.get("n_ctx"), int)})
    return {"slots": len(data), "busy": busy, "n_ctx_per_slot": n_ctx[0] if len(n_ctx) == 1 else n_ctx}


def read_metrics(body: bytes) -> dict[str, Any]:
    samples = parse_prometheus(body.decode("utf-8", "replace"))
    if not samples:
        raise ValueError(f"no Prometheus samples ({_snippet(body)})")
    found: dict[str, Any] = {}
    for name, _labels, value in samples:
        key = METRICS.get(name)
        if key is not None:
            found[key] = found.get(key, 0.0) + value  # summed over label sets (several models)
    found["metrics"] = len(samples)
    return found


def read_ollama_ps(body: bytes) -> dict[str, Any]:
    data = _json(body)
    models = data.get("models") if isinstance(data, dict) else None
    if not isinstance(models, list):
        raise ValueError("no 'models' list: not Ollama's /api/ps")
    keep = ("name", "size", "size_vram", "context_length")
    return {"models": [{k: m.get(k) for k in keep} for m in models if isinstance(m, dict)]}


def read_models(body: bytes) -> dict[str, Any]:
    data = _json(body)
    entries = data.get("data") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise ValueError("no 'data' list: not an OpenAI /v1/models")
    found: dict[str, Any] = {"models": [e.get("id") for e in entries if isinstance(e, dict)]}
    # vLLM says each model's context (--max-model-len, or what it derived) beside its id
    lengths = [e.get("max_model_len") for e in entries if isinstance(e, dict)]
    if lengths and isinstance(lengths[0], int) and not isinstance(lengths[0], bool):
        found["max_model_len"] = lengths[0]
    return found


_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')

READERS: dict[str, Callable[[bytes], dict[str, Any]]] = {
    "/health": read_health,
    "/props": read_props,
    "/slots": read_slots,
    "/metrics": read_metrics,
    "/api/ps": read_ollama_ps,
    "/v1/models": read_models,
}


def probe(
    base_url: str, paths: tuple[str, ...] = tuple(READERS), timeout_s: float = TIMEOUT_S
) -> dict[str, Endpoint]:
    """Each path's answer; raises Unreachable when the server answers none (refused or silent)."""
    results: dict[str, Endpoint] = {}
    base = base_url.rstrip("/")
    for path in paths:
        endpoint = Endpoint(path)
        try:
            endpoint.status, body = fetch(base + path, timeout_s)
        except Unreachable as error:
            if not results:
                raise
            endpoint.problem = str(error)
            results[path] = endpoint
            break  # it stopped answering: do not wait out every other path's timeout
        if 200 <= endpoint.status < 300:
            try:
                endpoint.found = READERS[path](body)
            except ValueError as error:  # its bytes as escapes: a NUL or 0xFF in a one-line error (QA 7)
                endpoint.problem = f"answered garbage: {printable(str(error))}"
        results[path] = endpoint
    return results


def parse_prometheus(text: str) -> list[tuple[str, dict[str, str], float]]:
    """(name, labels, value) per sample of a Prometheus text page; prometheus_client's parser when
    installed, else a small one for the plain lines model servers write."""
    try:
        from prometheus_client.parser import text_string_to_metric_families
    except ImportError:
        return _parse_plain(text)
    try:
        return [
            (s.name, dict(s.labels), float(s.value))
            for family in text_string_to_metric_families(text)
            for s in family.samples
        ]
    except (ValueError, TypeError, IndexError):
        return []


def _parse_plain(text: str) -> list[tuple[str, dict[str, str], float]]:
    samples = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        head, _, rest = line.partition("{") if "{" in line.split(" ", 1)[0] else (line, "", "")
        labels: dict[str, str] = {}
        if rest:
            inside, closed, tail = rest.partition("}")
            if not closed:
                return []  # a broken line: the page is not the exposition format
            labels = dict(_LABEL.findall(inside))
            name, fields = head, tail.split()
        else:
            name, *fields = head.split()
        try:
            value = float(fields[0])
        except (IndexError, ValueError):
            return []
        if not name or not (name[0].isalpha() or name[0] in "_:"):
            return []
        samples.append((name, labels, value))
    return samples


def printable(text: str) -> str:
    """`text` with what a terminal would not show (control bytes, the replacement character) escaped."""
    if text.isprintable() and "\ufffd" not in text:
        return text
    return "".join(ch if ch.isprintable() and ch != "\ufffd" else ascii(ch)[1:-1] for ch in text)
