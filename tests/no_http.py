"""A real listener on loopback that answers bytes that are no HTTP (a stray service on the port a user
named): what the probes and sources must say in one line, without echoing its bytes."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

JUNK = b"\x00\xff GARBAGE not http \x13\x37\n"


@contextmanager
def no_http_listener(answers: int = 4) -> Iterator[str]:
    """The URL of a socket that reads each request and answers JUNK, `answers` times."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(answers)

        def junk() -> None:
            for _ in range(answers):
                try:
                    conn, _address = sock.accept()
                except OSError:
                    return
                with conn:
                    conn.recv(65536)
                    conn.sendall(JUNK)

        threading.Thread(target=junk, daemon=True).start()
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
