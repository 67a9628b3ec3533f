"""Run a real llama-server on tiny GGUFs and save what it prints: the test data in tests/data/llama-server.

The same scenarios serve the tests, which rerun them live and compare with the saved logs. Regenerate with
    PYTHONPATH=$PWD python tests/engines/llama_server_capture.py [--server PATH]
Each saved log starts with `# ` header lines (the exact command line, the version, the model's shape);
everything after the header is the server's stdout and stderr, merged as a terminal shows them.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from vramtui.core.demo.tinygguf import TinyModelSpec, write_tiny_gguf

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "llama-server"
BUILD_SCRIPT = ROOT / "scripts" / "build_llama_server.sh"
# Seen with 0.5.0-dev: "I srv  llama_server: listening on http://127.0.0.1:18181".
READY = "listening on http://"
HEADER = "# "
MIB = 1 << 20
# The verbosity that prints the llama_context lines, the buffer sizes, n_ctx and fit's lines (README.md).
VERBOSE = ("-lv", "4")


@dataclass(frozen=True)
class Scenario:
    """One way to start llama-server: its flags after the model and address, and the host budget."""

    name: str
    args: tuple[str, ...] = ()
    as_limit_mib: int | None = None  # RLIMIT_AS of the server, through `prlimit --as`
    hold_port: bool = False  # another socket listens on the port first
    spec: TinyModelSpec = field(default_factory=TinyModelSpec)
    note: str = ""


SCENARIOS = (
    Scenario(
        "healthy", ("-c", "2048"), note="comes up: stopped with SIGINT once it prints 'listening on http://'"
    ),
    Scenario(
        "healthy-defaults",
        (),
        note="every setting at llama-server's default (context 0 = the model's 262144)",
    ),
    Scenario("kv-too-big", ("-c", "262144"), as_limit_mib=1500, note="the KV cache (2 GiB) under 1500 MiB"),
    Scenario(
        "kv-q4-too-big",
        ("-c", "262144", "-ctk", "q4_0", "-ctv", "q4_0"),
        as_limit_mib=600,
        note="a q4_0 KV cache (576 MiB) under 600 MiB: fit projects it at q4_0 before the load fails",
    ),
    Scenario(
        "compute-too-big",
        ("-c", "65536", "-fa", "off"),
        as_limit_mib=1500,
        note="the compute buffer (KQ of 65536 cells without flash attention) under 1500 MiB",
    ),
    Scenario(
        "compute-fits-fa-auto",
        ("-c", "65536"),
        as_limit_mib=1500,
        note="the same under flash attention auto (on for the CPU): comes up",
    ),
    Scenario("port-in-use", ("-c", "2048"), hold_port=True, note="another socket listens on the port"),
    Scenario(
        "parallel-not-unified",
        ("-c", "4096", "-np", "2"),
        note="two slots: a KV cache that is not unified, one stream of 2048 cells per slot",
    ),
    Scenario(
        "parallel-kv-unified",
        ("-c", "4096", "-np", "2", "-kvu"),
        note="two slots given, one unified KV cache (-kvu): each slot may use all 4096 cells",
    ),
    Scenario(
        "parallel-auto-context",
        ("-np", "2"),
        as_limit_mib=1500,
        note="two slots, no context: fit gives each stream the trained length (524288 cells, 4 GiB) under 1500 MiB",
    ),
    Scenario(
        "quantized-v-no-fa",
        ("-c", "2048", "-ctk", "q8_0", "-ctv", "q8_0", "-fa", "off"),
        note="a quantized V cache with flash attention off",
    ),
)
BY_NAME = {scenario.name: scenario for scenario in SCENARIOS}


@dataclass
class Capture:
    argv: list[str]
    output: str
    returncode: int
    ready: bool


def model_name(spec: TinyModelSpec) -> str:
    return f"l{spec.n_layer}-e{spec.n_embd}-h{spec.n_head}-kv{spec.n_head_kv}-{spec.dtype}.gguf"


def model_for(spec: TinyModelSpec, folder: Path) -> Path:
    path = folder / model_name(spec)
    return path if path.is_file() else write_tiny_gguf(path, spec)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def log_until_listening(binary: Path, args: list[str], timeout_s: float = 120.0) -> str:
    """Start llama-server (verbosity 4: its buffers), read its log until it listens or exits, stop it."""
    argv = [str(binary), "--host", "127.0.0.1", "--port", str(free_port()), "-lv", "4", *args]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    deadline = time.monotonic() + timeout_s
    assert proc.stdout is not None
    try:
        for line in proc.stdout:
            lines.append(line)
            if "listening on http://" in line or time.monotonic() > deadline:
                break
    finally:
        proc.kill()  # the log is read: no graceful shutdown to wait for (SIGTERM can take 30 s here)
        proc.communicate()
    return "".join(lines)


def command(
    binary: Path, scenario: Scenario, model: Path, port: int, verbose: tuple[str, ...] = ()
) -> list[str]:
    argv = [
        str(binary),
        "-m",
        str(model),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        *scenario.args,
        *verbose,
    ]
    if scenario.as_limit_mib is not None:
        argv = ["prlimit", f"--as={scenario.as_limit_mib * MIB}", "--", *argv]
    return argv


@contextlib.contextmanager
def holding(port: int, hold: bool) -> Iterator[None]:
    if not hold:
        yield
        return
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", port))
        busy.listen()
        yield


def run(argv: list[str], timeout: float = 180.0, env: dict[str, str] | None = None) -> Capture:
    """Run the server until it exits, or until it is ready (then stop it with SIGINT, as ctrl-c does)."""
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        errors="replace",
        start_new_session=True,
        env={**os.environ, **(env or {})},
    )
    lines: list[str] = []
    ready = threading.Event()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if READY in line:
                ready.set()

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    deadline = time.monotonic() + timeout
    while proc.poll() is None and not ready.is_set() and time.monotonic() < deadline:
        time.sleep(0.05)
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGINT if ready.is_set() else signal.SIGKILL)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    reader.join(timeout=10)
    return Capture(argv, "".join(lines), proc.returncode, ready.is_set())


def capture(
    binary: Path, scenario: Scenario, models: Path, port: int, verbose: tuple[str, ...] = ()
) -> Capture:
    argv = command(binary, scenario, model_for(scenario.spec, models), port, verbose)
    with holding(port, scenario.hold_port):
        return run(argv)


def version(binary: Path) -> str:
    proc = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=60, check=True)
    return " ".join((proc.stdout + proc.stderr).split())


def header(lines: list[str]) -> str:
    return "".join(f"{HEADER}{line}\n" for line in lines)


def split_header(text: str) -> tuple[dict[str, str], str]:
    """The `# key: value` header of a saved log, and the server's output after it."""
    fields: dict[str, str] = {}
    rest = text
    while rest.startswith(HEADER):
        line, _, rest = rest.partition("\n")
        key, _, value = line[len(HEADER) :].partition(": ")
        fields[key] = value
    return fields, rest


def log_name(scenario: Scenario, verbose: tuple[str, ...]) -> str:
    return f"{scenario.name}.verbose.log" if verbose else f"{scenario.name}.log"


def save(
    binary: Path, scenario: Scenario, models: Path, port: int, verbose: tuple[str, ...], out: Path
) -> Path:
    result = capture(binary, scenario, models, port, verbose)
    spec = scenario.spec
    lines = [
        "real llama-server output, captured by tests/engines/llama_server_capture.py",
        f"command: {shlex.join(result.argv)}",
        f"version: {version(binary)}",
        f"model: write_tiny_gguf(TinyModelSpec(n_layer={spec.n_layer}, n_embd={spec.n_embd}, "
        f"n_head={spec.n_head}, n_head_kv={spec.n_head_kv}, dtype={spec.dtype!r}))",
        f"note: {scenario.note}" + (" (another socket listened on the port)" if scenario.hold_port else ""),
        f"exit: {result.returncode}" + (" (stopped with SIGINT once ready)" if result.ready else ""),
    ]
    path = out / log_name(scenario, verbose)
    path.write_text(header(lines) + result.output)
    return path


def save_help(binary: Path, out: Path) -> Path:
    proc = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=60, check=True)
    path = out / "help.txt"
    path.write_text(header([f"command: {binary} --help", f"version: {version(binary)}"]) + proc.stdout)
    return path


# `--help` prints a flag's spellings from column 0 and its description from column 40 (common/arg.cpp's
# common_arg::to_string); spellings longer than 37 characters take the whole line, the description the next.
_OPTION_COLUMN = 40
_FLAG = re.compile(r"(?<![\w-])(--?[A-Za-z0-9][\w-]*)")


def help_flags(text: str) -> set[str]:
    """Every flag spelling `llama-server --help` lists (the option column, not the descriptions)."""
    flags: set[str] = set()
    for line in text.splitlines():
        if not line.startswith("-"):
            continue
        padded = line[_OPTION_COLUMN - 3 : _OPTION_COLUMN] == "   "
        flags.update(_FLAG.findall(line[:_OPTION_COLUMN] if padded else line))
    return flags


def default_binary() -> Path:
    named = os.environ.get("VRAMTUI_LLAMA_SERVER")
    if named:
        return Path(named)
    proc = subprocess.run(["bash", BUILD_SCRIPT, "--path"], capture_output=True, text=True, check=True)
    return Path(proc.stdout.strip())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", type=Path, default=None, help="the llama-server binary")
    parser.add_argument("--out", type=Path, default=DATA)
    parser.add_argument("--models", type=Path, default=Path("/tmp/vramtui-llama-server-models"))
    parser.add_argument("--port", type=int, default=18181)
    parser.add_argument("--only", nargs="*", default=None, help="scenario names")
    args = parser.parse_args(argv)
    binary = args.server or default_binary()
    args.out.mkdir(parents=True, exist_ok=True)
    args.models.mkdir(parents=True, exist_ok=True)
    print(save_help(binary, args.out))
    for scenario in SCENARIOS:
        if args.only is not None and scenario.name not in args.only:
            continue
        for verbose in ((), VERBOSE):
            print(save(binary, scenario, args.models, args.port, verbose, args.out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
