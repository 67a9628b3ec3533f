"""A real HTTP server on loopback that answers a recorded Prometheus payload, for the --source tests.

`PayloadServer(payload)` serves `payload` at every path (a thread, `http.server`). `set_memory(used)`
rewrites the recorded DCGM_FI_DEV_FB_USED / _FREE values the way a GPU's memory moves (used + free
stays the card's size), so a reader sees the figures change while it runs. `routes` maps a path to a
(status, content type, body) for the bad-input cases; `delay_s` makes every answer slow.
"""

from __future__ import annotations

import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

DATA = Path(__file__).resolve().parents[2] / "data" / "prometheus"

_LINE = re.compile(r"^(DCGM_FI_DEV_FB_(USED|FREE)\{(?P<labels>[^}]*)\}) (?P<value>\S+)$", re.M)


def recorded(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


def with_memory(payload: str, used_mib: dict[str, int]) -> str:
    """The payload with each GPU's (by its UUID label) used MiB set and its free MiB moved to match."""

    totals: dict[str, float] = {}
    for match in _LINE.finditer(payload):
        uuid = re.search(r'UUID="([^"]*)"', match["labels"])
        key = uuid.group(1) if uuid else ""
        totals[key] = totals.get(key, 0.0) + float(match["value"])

    def replace(match: re.Match[str]) -> str:
        uuid = re.search(r'UUID="([^"]*)"', match["labels"])
        key = uuid.group(1) if uuid else ""
        if key not in used_mib:
            return match.group(0)
        value = used_mib[key] if match.group(2) == "USED" else totals[key] - used_mib[key]
        return f"{match.group(1)} {value:g}"

    return _LINE.sub(replace, payload)


def without_gpu(payload: str, uuid: str) -> str:
    """The payload with every line of one GPU taken out (the exporter lost it)."""
    return "\n".join(line for line in payload.splitlines() if f'UUID="{uuid}"' not in line) + "\n"


class PayloadServer:
    def __init__(self, payload: str, delay_s: float = 0.0) -> None:
        self.payload = payload
        self.delay_s = delay_s
        self.routes: dict[str, tuple[int, str, bytes]] = {}
        self.hits = 0
        self.paths: list[str] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                with server._lock:
                    server.hits += 1
                    server.paths.append(self.path)
                    body_text = server.payload
                if server.delay_s:
                    time.sleep(server.delay_s)
                route = server.routes.get(self.path.split("?")[0])
                status, kind, body = route or (200, "text/plain; version=0.0.4", body_text.encode())
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", kind)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the reader gave up (a timeout test)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_port}"

    def set_payload(self, payload: str) -> None:
        with self._lock:
            self.payload = payload

    def __enter__(self) -> PayloadServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def federated(answers: dict[str, str], job: str = "dcgm-exporter") -> str:
    """What a Prometheus server's /federate answers for these scrapes (instance -> payload): every
    sample once, with the `instance` and `job` labels of the scrape that took it, and one TYPE line
    per family (federation keeps the type, drops HELP)."""
    lines: list[str] = []
    typed: set[str] = set()
    for instance, payload in answers.items():
        for line in payload.splitlines():
            if line.startswith("# TYPE "):
                name = line.split()[2]
                if name not in typed:
                    typed.add(name)
                    lines.append(line)
                continue
            if not line or line.startswith("#"):
                continue
            head, brace, rest = line.partition("{")
            extra = f'instance="{instance}",job="{job}"'
            lines.append(f"{head}{{{extra},{rest}" if brace else f"{head}{{{extra}}} {line.split()[-1]}")
    return "\n".join(lines) + "\n"
