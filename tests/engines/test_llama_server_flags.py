"""The real llama-server the tests build (scripts/build_llama_server.sh) and the data saved from it.

The saved `--help` and logs in tests/data/llama-server must stay true for the built version: its flag set
is the live binary's, and each failure rerun live prints the saved log's error and warning lines.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import httpx
import psutil
import pytest
from llama_server_capture import (
    BY_NAME,
    DATA,
    SCENARIOS,
    VERBOSE,
    capture,
    free_port,
    help_flags,
    log_name,
    split_header,
    version,
)

pytestmark = pytest.mark.engine


def _live_help(binary: Path) -> str:
    proc = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=60, check=True)
    return proc.stdout


def test_saved_help_lists_the_live_binarys_flags(llama_server_bin: Path) -> None:
    fields, saved = split_header((DATA / "help.txt").read_text())
    live = _live_help(llama_server_bin)
    assert fields["version"] == version(llama_server_bin)
    assert help_flags(saved) == help_flags(live)
    # The parser reads the option column: the flags vramtui relies on are in it, description words are not.
    assert {
        "-m",
        "--model",
        "-c",
        "--ctx-size",
        "-fa",
        "--flash-attn",
        "--fit",
        "-lv",
        "--port",
    } <= help_flags(live)
    assert "--mmap" not in help_flags(live)


def test_every_saved_log_comes_from_this_version(llama_server_bin: Path) -> None:
    live = version(llama_server_bin)
    logs = sorted(DATA.glob("*.log"))
    expected = {log_name(s, verbose) for s in SCENARIOS for verbose in ((), VERBOSE)}
    assert {log.name for log in logs} >= expected
    for log in logs:
        fields, output = split_header(log.read_text())
        assert fields["version"] == live, log.name
        assert "llama-server" in fields["command"], log.name
        assert output.strip(), log.name


def _wait_healthy(port: int, proc: subprocess.Popen[str], timeout: float = 60.0) -> httpx.Response:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, "llama-server exited before it answered /health"
        try:
            answer = httpx.get(f"http://127.0.0.1:{port}/health", timeout=2)
        except httpx.TransportError:
            answer = None
        if answer is not None and answer.status_code == 200:
            return answer
        time.sleep(0.2)
    raise AssertionError("llama-server did not answer /health in time")


def test_starts_answers_health_and_stops_leaving_nothing(llama_server_bin: Path, make_gguf) -> None:
    model = make_gguf(n_layer=2, n_embd=128, n_head=4, n_head_kv=4, n_ff=256)
    port = free_port()
    argv = [str(llama_server_bin), "-m", str(model), "--host", "127.0.0.1", "--port", str(port), "-c", "1024"]
    proc = subprocess.Popen(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True, start_new_session=True
    )
    try:
        answer = _wait_healthy(port, proc)
        assert answer.json().get("status") == "ok"
        family = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) is not None
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert not [p for p in family if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    with pytest.raises(ProcessLookupError):
        os.killpg(proc.pid, 0)
    with pytest.raises(httpx.TransportError):
        httpx.get(f"http://127.0.0.1:{port}/health", timeout=2)


# A line is "<elapsed time> <level letter> <module> <text>", e.g. "0.00.049.738 E srv  ...".
_LINE = re.compile(r"^\d+\.\d+\.\d+\.\d+ ([EW]) (.*)$")


def _marked_lines(output: str, paths: dict[str, str]) -> list[str]:
    """The error and warning lines, without their times, with this run's paths and port replaced by names."""
    marked = []
    for line in output.splitlines():
        match = _LINE.match(line)
        if match:
            text = f"{match[1]} {match[2]}"
            for value, name in paths.items():
                text = text.replace(value, name)
            marked.append(text)
    return marked


@pytest.mark.slow
@pytest.mark.parametrize("name", ["kv-too-big", "compute-too-big", "port-in-use", "quantized-v-no-fa"])
def test_failures_rerun_live_print_the_saved_lines(name: str, llama_server_bin: Path, tmp_path: Path) -> None:
    scenario = BY_NAME[name]
    fields, saved = split_header((DATA / log_name(scenario, ())).read_text())
    saved_argv = fields["command"].split()
    saved_port = saved_argv[saved_argv.index("--port") + 1]
    saved_model = saved_argv[saved_argv.index("-m") + 1]
    port = free_port()
    live = capture(llama_server_bin, scenario, tmp_path, port)
    live_model = live.argv[live.argv.index("-m") + 1]
    assert not live.ready
    assert str(live.returncode) == fields["exit"].split()[0]
    expected = _marked_lines(saved, {saved_model: "MODEL", saved_port: "PORT"})
    assert expected, "a failure log holds at least one error line"
    assert _marked_lines(live.output, {live_model: "MODEL", str(port): "PORT"}) == expected


def test_a_flag_the_engine_refuses_is_said_as_its_command_line_with_no_memory_advice(
    llama_server_bin: Path, tiny_gguf: Path, tmp_path: Path
) -> None:
    """QA 6: llama-server's "error: invalid argument: --bogus-flag" and llama-cpp-python's argparse
    "error: unrecognized arguments" read as a run that failed at an unknown stage, advised only to read
    the line. Both real engines, run here with a flag they do not take."""
    import sys

    from vramtui.core.logs.diagnose import diagnose_text

    runs = (
        [str(llama_server_bin), "-m", str(tiny_gguf), "--bogus-flag", "3"],
        [sys.executable, "-m", "llama_cpp.server", "--model", str(tiny_gguf), "--bogus_flag", "3"],
    )
    for argv in runs:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        assert proc.returncode != 0
        diagnosis = diagnose_text(proc.stdout + proc.stderr, kernel_log=lambda: None)
        assert diagnosis.failed and diagnosis.cause == "bad_argument", diagnosis.summary
        assert diagnosis.failure_stage == "load_weights" and "before the model was read" in diagnosis.summary
        assert "--bogus" in (diagnosis.first_error_text or "")
        assert diagnosis.advice[0].startswith("Remove or respell the flag the line names")


def test_a_model_file_that_is_not_there_is_said_as_a_local_path(
    llama_server_bin: Path, tmp_path: Path
) -> None:
    """QA 6: llama-server and llama-cpp-python given a path with no file read "Failed at download", advised
    about repository ids and tokens. Both real engines, run here."""
    import sys

    from vramtui.core.logs.diagnose import diagnose_text

    missing = tmp_path / "nowhere" / "model.gguf"
    runs = (
        [str(llama_server_bin), "-m", str(missing)],
        [sys.executable, "-m", "llama_cpp.server", "--model", str(missing)],
    )
    for argv in runs:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        diagnosis = diagnose_text(proc.stdout + proc.stderr, kernel_log=lambda: None)
        assert diagnosis.failure == "file_missing" and "before the model was read" in diagnosis.summary
        assert diagnosis.advice[0].startswith(f"Check the path: no file at {missing} on this machine")
        assert not any("repository" in line for line in diagnosis.advice)
