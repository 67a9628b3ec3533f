"""`vramtui attach TARGET` on a terminal (the app's path) with bad input: one line on stderr and exit 2
before the screen opens, within a short time, never a traceback. Real processes and sockets: a PID
that does not exist, a port nobody listens on, a plain `python -m http.server`, a server answering
garbage to every path, and a listener that accepts and never answers."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_attach_cli import _free_port

GARBAGE = textwrap.dedent(
    """
    import sys
    from http.server import BaseHTTPRequestHandler, HTTPServer

    class Garbage(BaseHTTPRequestHandler):
        def do_GET(self):
            body = b"\\x00\\xffgarbage {{{ not json"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    HTTPServer(("127.0.0.1", int(sys.argv[1])), Garbage).serve_forever()
    """
)
SILENT = textwrap.dedent(
    """
    import socket, sys
    server = socket.socket()
    server.bind(("127.0.0.1", int(sys.argv[1])))
    server.listen(8)
    held = []
    while True:
        held.append(server.accept()[0])  # accepted, never answered
    """
)


def _listening(port: int, timeout: float = 20) -> None:
    import socket

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    pytest.fail(f"nothing listens on {port}")


def _serve(argv: list[str], port: int) -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _listening(port)
        yield proc
    finally:
        proc.kill()
        proc.wait(10)


@pytest.fixture
def http_server() -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    port = _free_port()
    argv = [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"]
    for proc in _serve(argv, port):
        yield proc, port


@pytest.fixture
def garbage_server(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    port = _free_port()
    script = tmp_path / "garbage_server.py"
    script.write_text(GARBAGE)
    for proc in _serve([sys.executable, str(script), str(port)], port):
        yield proc, port


@pytest.fixture
def silent_server(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    port = _free_port()
    script = tmp_path / "silent_server.py"
    script.write_text(SILENT)
    for proc in _serve([sys.executable, str(script), str(port)], port):
        yield proc, port


def attach_on_a_terminal(target: str, *args: str) -> tuple[int, str, bytes, float]:
    """Run `vramtui attach TARGET` with its stdout on a terminal, as a user does: the app's path.
    Returns (exit status, stderr, what reached the terminal, seconds)."""
    leader, follower = pty.openpty()
    started = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "vramtui", "attach", target, *args],
        stdin=follower,
        stdout=follower,
        stderr=subprocess.PIPE,
    )
    os.close(follower)
    try:
        _out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    took = time.monotonic() - started
    screen = b""
    os.set_blocking(leader, False)
    try:
        screen = os.read(leader, 65536)
    except OSError:
        pass
    os.close(leader)
    return proc.returncode, err.decode("utf-8", "replace"), screen, took


def _check_refused(target: str, says: str) -> str:
    code, err, screen, took = attach_on_a_terminal(target)
    assert code == 2, err
    assert err.count("\n") == 1 and err.startswith("vramtui: ") and says in err, err
    assert "Traceback" not in err
    assert b"\x1b[?1049h" not in screen  # the app never took the screen
    assert took < 15, took  # refused within a short timeout, no hang
    return err


def test_a_pid_that_does_not_exist() -> None:
    _check_refused("999999999", "no process with PID 999999999")


def test_a_url_nobody_answers() -> None:
    port = _free_port()
    _check_refused(f"http://127.0.0.1:{port}", f"nothing answers at http://127.0.0.1:{port}")


def test_a_port_held_by_a_plain_http_server(http_server) -> None:
    proc, port = http_server
    err = _check_refused(f"http://127.0.0.1:{port}", f"(process {proc.pid}) is no model server")
    assert "'python" in err or "http.server" in err  # it names what holds the port
    assert "its endpoints answer HTTP 404" in err
    assert proc.poll() is None  # attach stops nothing


def test_an_endpoint_that_answers_garbage(garbage_server) -> None:
    proc, port = garbage_server
    err = _check_refused(f"http://127.0.0.1:{port}", "is no model server")
    assert "answered garbage: not JSON" in err
    # QA 7: the body's NUL and 0xFF went raw into the line; they are escapes now
    assert all(ch.isprintable() and ch != "\ufffd" for ch in err.rstrip("\n")), repr(err)
    by_pid = _check_refused(str(proc.pid), f"process {proc.pid} is no model server")
    assert "answered garbage" in by_pid
    assert f"garbage_server.py {port}'" in by_pid  # its whole command, not cut within an argument
    assert proc.poll() is None


def test_a_listener_that_never_answers(silent_server) -> None:
    proc, port = silent_server
    err = _check_refused(f"http://127.0.0.1:{port}", "does not answer: no answer within 2 s")
    assert proc.poll() is None
    assert err.count("\n") == 1


def test_a_budget_that_is_no_size_and_a_timeout_that_is_no_time() -> None:
    _check_refused_args(["999999999", "--budget", "lots"], "lots")
    _check_refused_args(["999999999", "--restart-timeout", "0"], "--restart-timeout must be a positive")


def _check_refused_args(args: list[str], says: str) -> str:
    code, err, screen, took = attach_on_a_terminal(*args)
    assert code == 2 and err.count("\n") == 1 and says in err and "Traceback" not in err, err
    assert b"\x1b[?1049h" not in screen and took < 15
    return err


@pytest.mark.engine
def test_keep_names_a_parameter_of_the_attached_engine(
    llama_server_bin: Path, tiny_gguf: Path, tmp_path: Path
) -> None:
    from test_attach_cli import _start

    port = _free_port()
    argv = [str(llama_server_bin), "-m", str(tiny_gguf), "--host", "127.0.0.1", "--port", str(port)]
    for server in _start(argv, tmp_path / "server.log", "/health", port):
        err = _check_refused_args(
            [str(server.pid), "--keep", "ctx"], "--keep ctx: not a parameter of llama.cpp"
        )
        assert err == "vramtui: --keep ctx: not a parameter of llama.cpp\n"
        assert server.poll() is None


@pytest.mark.parametrize(
    ("target", "says"),
    [
        ("docker:vramtui-no-such-container", "docker:vramtui-no-such-container: docker"),
        ("systemd:vramtui-no-such.service", "systemd:vramtui-no-such.service: systemctl"),
    ],
)
def test_a_container_or_unit_whose_tool_is_missing_or_refuses(target: str, says: str) -> None:
    """docker not installed here; systemctl either missing or without that unit: one line either way."""
    _check_refused(target, says)
