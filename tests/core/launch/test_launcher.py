"""The model server's whole life, for real: llama-cpp-python's server on a loopback port, real failures.

Every test ends by checking that nothing it started is still running.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest
from placeholder_files import EMPTY_GGUF

from vramtui.core.launch import procs
from vramtui.core.launch.launcher import (
    BAD_ARGUMENTS,
    COMMAND_NOT_FOUND,
    PORT_IN_USE,
    READY_TIMEOUT,
    LaunchError,
    LogLine,
    ModelServer,
    budget_on_gpu,
    build_command,
    fit_to_budget,
    refused_arguments,
)
from vramtui.core.launch.launcher import run_check as _run_check
from vramtui.core.launch.profile import Profile, load_profile
from vramtui.core.units import MIB

PROFILES = Path(__file__).resolve().parents[2] / "data" / "profiles"
needs_llama = pytest.mark.skipif(
    subprocess.run(
        [sys.executable, "-c", "import llama_cpp.server"], capture_output=True, check=False
    ).returncode
    != 0,
    reason="llama-cpp-python[server] is not installed",
)


def run_check(profile: Profile, tmp_path: Path, **kwargs: object):  # type: ignore[no-untyped-def]
    return _run_check(profile, log_dir=tmp_path / "runs", **kwargs)  # type: ignore[arg-type]


def profile_next_to(model: Path, name: str, folder: Path) -> Profile:
    """Copy a test profile into `folder`, with the model beside it as tiny.gguf."""
    folder.mkdir(parents=True, exist_ok=True)
    link = folder / "tiny.gguf"
    if not link.exists():
        link.symlink_to(model)
    shutil.copy(PROFILES / name, folder / name)
    return load_profile(folder / name)


def assert_nothing_left(*pids: int | None) -> None:
    for pid in pids:
        if pid is None:
            continue
        assert not procs.group_members(pid), f"process group {pid} still has members"
        if psutil.pid_exists(pid):
            assert psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert not procs.live_groups()


@pytest.mark.engine
@needs_llama
def test_tiny_gguf_comes_up_answers_and_goes(tiny_gguf: Path, tmp_path: Path) -> None:
    profile = profile_next_to(tiny_gguf, "tiny-ok.toml", tmp_path / "p")
    lines: list[str] = []
    started: list[int] = []
    result = run_check(profile, tmp_path, on_line=lines.append, on_start=lambda s: started.append(s.pid))
    assert result.ready and result.ok, result.message
    assert result.stage == "inference" and result.failure is None
    assert result.smoke is not None and result.smoke.status == 200 and result.smoke.text
    assert result.ttft_s is not None and result.ttft_s > 0
    assert result.load_time_s is not None and 0 < result.load_time_s < 60
    # The memory of the process tree was measured while it ran, and given back at the end.
    assert result.peak_mib is not None and 20 < result.peak_mib < 1500
    assert result.resident_mib is not None and 0 < result.resident_mib <= result.peak_mib
    assert result.released is True
    assert result.budget_mode == "host" and result.memory_budget_mib == 1500
    assert any("uvicorn running on" in line.lower() for line in lines)
    log = Path(result.log_file or "")
    assert log.parent == tmp_path / "runs" and "Uvicorn running on" in log.read_text()
    import re

    stamped = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3} ")
    assert all(stamped.match(line) for line in log.read_text().splitlines())
    assert len(log.read_text().splitlines()) == len(lines)
    assert result.command[:3] == [sys.executable, "-m", "llama_cpp.server"]
    kinds = [e.kind for e in result.events]
    assert (
        kinds.index("launch")
        < kinds.index("ready")
        < kinds.index("request_start")
        < kinds.index("request_end")
    )
    data = result.to_dict()
    json.dumps(data)
    assert data["smoke"]["ok"] is True
    assert_nothing_left(*started)


@pytest.mark.engine
@needs_llama
def test_context_manager_stop_releases_memory(tiny_gguf: Path, tmp_path: Path) -> None:
    profile = profile_next_to(tiny_gguf, "tiny-ok.toml", tmp_path / "p")
    samples: list = []
    with ModelServer(profile, log_dir=tmp_path / "runs", on_sample=samples.append) as server:
        assert server.wait_ready(60)
        pid = server.pid
        assert pid is not None and procs.tree_rss(pid) > 20 * MIB
        assert server.stage == "ready"
    assert server.released is True
    assert server.exit_code is not None and server.stopped_by_us
    assert procs.tree_rss(pid) == 0
    # The memory samples followed the server's own tree, and their peak is the server's peak.
    trees = [s.host.tree_rss for s in samples if s.host is not None and s.host.tree_pids]
    assert trees and all(pid in s.host.tree_pids for s in samples if s.host is not None and s.host.tree_pids)
    assert server.peak_bytes == max(trees)
    assert_nothing_left(pid)


@pytest.mark.engine
@needs_llama
def test_budget_too_small_for_the_kv_cache(tiny_gguf: Path, tmp_path: Path) -> None:
    profile = profile_next_to(tiny_gguf, "tiny-kv-too-big.toml", tmp_path / "p")
    started: list[int] = []
    result = run_check(profile, tmp_path, on_start=lambda s: started.append(s.pid))
    assert not result.ready and not result.ok
    assert result.failure_stage == "kv_cache"
    assert "oom" in str(result.failure)
    log = Path(result.log_file or "").read_text()
    assert "failed to allocate" in log  # llama.cpp's own words
    assert result.diagnosis is not None
    assert result.diagnosis.failed and result.diagnosis.failure_stage == "kv_cache"
    assert result.diagnosis.failure == "host_oom"  # the log engine and the launcher name it alike
    # The saved log (timestamped lines) reads back to the same diagnosis as the live stream.
    from vramtui.core.logs.diagnose import diagnose_file

    again = diagnose_file(result.log_file or "", backend="llama-cpp-python")
    assert (again.failure, again.failure_stage) == (result.diagnosis.failure, result.diagnosis.failure_stage)
    assert again.engine_figures == result.diagnosis.engine_figures
    assert_nothing_left(*started)


@pytest.mark.engine
@needs_llama
def test_missing_model_file(tmp_path: Path) -> None:
    profile = Profile(backend="llama-cpp-python", model=str(tmp_path / "nowhere.gguf"), port=0)
    started: list[int] = []
    result = run_check(profile, tmp_path, ready_timeout_s=60, on_start=lambda s: started.append(s.pid))
    assert not result.ready and result.exit_code not in (None, 0)
    assert result.diagnosis is not None and result.diagnosis.failed
    assert result.failure == "file_missing", result.to_dict()
    assert_nothing_left(*started)


@pytest.mark.engine
@needs_llama
def test_truncated_gguf(tiny_gguf: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(tiny_gguf.read_bytes()[: tiny_gguf.stat().st_size // 3])
    profile = Profile(backend="llama-cpp-python", model=str(broken), port=0)
    started: list[int] = []
    result = run_check(profile, tmp_path, ready_timeout_s=60, on_start=lambda s: started.append(s.pid))
    assert not result.ready and result.exit_code not in (None, 0)
    assert result.failure not in (None, READY_TIMEOUT)
    assert result.diagnosis is not None and result.diagnosis.failed
    assert result.failure_stage == "load_weights"
    assert_nothing_left(*started)


@pytest.mark.engine
@needs_llama
def test_a_refused_command_line_is_a_launch_failure(tiny_gguf: Path, tmp_path: Path) -> None:
    """llama_cpp.server's argparse refuses an extra argument: nothing loaded, the argument named."""
    profile = Profile(backend="llama-cpp-python", model=str(tiny_gguf), port=0, extra_args=("$(id)",))
    started: list[int] = []
    result = run_check(profile, tmp_path, ready_timeout_s=60, on_start=lambda s: started.append(s.pid))
    assert not result.ready and result.exit_code == 2
    assert result.failure == BAD_ARGUMENTS and result.failure_stage == "launch" and result.stage is None
    assert "unrecognized arguments: $(id)" in result.message and "check extra_args" in result.message
    assert result.command[-1] == "$(id)"  # passed literally, never through a shell
    assert_nothing_left(*started)


@pytest.mark.parametrize(
    ("line", "refused"),
    [
        ("__main__.py: error: unrecognized arguments: --bogus 3", "unrecognized arguments: --bogus 3"),
        (
            "api_server.py: error: argument --max-model-len: invalid int value: 'x'",
            "argument --max-model-len: invalid int value: 'x'",
        ),
        ("error: invalid argument: --ctx-sise", "invalid argument: --ctx-sise"),
        (
            'error while handling argument "--ctx-size": stoi',
            'error while handling argument "--ctx-size": stoi',
        ),
        ("Error: unknown flag: --bogus", "unknown flag: --bogus"),
        ("llama_model_load: error loading model: unknown model architecture: 'x'", None),
        # a program that is no model server: GNU getopt (coreutils), busybox, BSD, Go's flag package, click
        ("/bin/sleep: unrecognized option '--model'", "unrecognized option '--model'"),
        ("sleep: invalid option -- 'm'", "invalid option -- 'm'"),
        ("cat: option '--model' requires an argument", "option '--model' requires an argument"),
        ("sleep: unrecognized option: model", "unrecognized option: model"),
        ("sleep: illegal option -- -", "illegal option -- -"),
        ("flag provided but not defined: -model", "flag provided but not defined: -model"),
        ("Error: No such option: --model", "No such option: --model"),
    ],
)
def test_refused_arguments_reads_each_parser(line: str, refused: str | None) -> None:
    assert refused_arguments([LogLine(0.0, "usage: server [-h]"), LogLine(1.0, line)]) == refused


def test_a_program_that_is_not_the_engines_server_is_a_bad_arguments_failure(tmp_path: Path) -> None:
    # Issue 22 #14: program = "/bin/sleep" was "failed at load_weights ... with no error text" while its
    # log's line 2 is "/bin/sleep: unrecognized option '--model'".
    sleep = shutil.which("sleep")
    assert sleep is not None
    (tmp_path / "m.gguf").write_bytes(EMPTY_GGUF)
    profile = Profile(backend="llama.cpp", model=str(tmp_path / "m.gguf"), port=0, program=sleep)
    started: list[int] = []
    result = run_check(profile, tmp_path, ready_timeout_s=30, on_start=lambda s: started.append(s.pid))
    assert not result.ready and result.exit_code not in (None, 0)
    assert result.failure == BAD_ARGUMENTS and result.failure_stage == "launch" and result.stage is None
    assert f"{sleep} is not llama.cpp's server" in result.message and "'--model'" in result.message
    advice = result.diagnosis.advice
    assert advice == [
        f"program = {sleep!r} is not llama.cpp's server: name llama-server there "
        '(program = "/path/to/llama-server"), or leave program out to run the one on PATH.'
    ]
    assert_nothing_left(*started)


def test_a_refused_flag_of_the_users_own_is_not_called_another_program(tmp_path: Path) -> None:
    # a server that takes --model, --host and --port but refuses one of extra_args, as argparse does:
    # the argument's fault, not the program's
    server = tmp_path / "llama-server"
    server.write_text('#!/bin/sh\necho "server.py: error: unrecognized arguments: --bogus" >&2\nexit 2\n')
    server.chmod(0o755)
    (tmp_path / "m.gguf").write_bytes(EMPTY_GGUF)
    profile = Profile(
        backend="llama.cpp",
        model=str(tmp_path / "m.gguf"),
        port=0,
        program=str(server),
        extra_args=("--bogus",),
    )
    result = run_check(profile, tmp_path, ready_timeout_s=30)
    assert result.failure == BAD_ARGUMENTS and "not llama.cpp's server" not in result.message
    assert "unrecognized arguments: --bogus; check extra_args" in result.message
    assert result.diagnosis.advice == [
        "Remove or fix the refused argument (extra_args, or the [params] value behind it)."
    ]


BURST_THEN_WAIT = """#!{python}
import os, sys, time
for n in range(3000):
    sys.stdout.write("load_tensors: layer %4d assigned to device CPU, is_swa = 0\\n" % n)
sys.stdout.write("llama_model_load: error loading model: the last line before the stop\\n")
sys.stdout.flush()
open(os.environ["BURST_PRINTED"], "w").close()
time.sleep(60)
"""


def test_lines_printed_before_the_stop_are_logged_before_its_stop_line(tmp_path: Path) -> None:
    # CI met it: a refusal printed just before the stop was taken by the reader after vramtui's stop line,
    # and the diagnosis read it as the stop's own noise. Every line printed before stop() precedes it.
    server_script = tmp_path / "llama-server"
    server_script.write_text(BURST_THEN_WAIT.format(python=sys.executable))
    server_script.chmod(0o755)
    (tmp_path / "m.gguf").write_bytes(EMPTY_GGUF)
    printed = tmp_path / "printed"
    profile = Profile(
        backend="llama.cpp",
        model=str(tmp_path / "m.gguf"),
        port=0,
        program=str(server_script),
        env={"BURST_PRINTED": str(printed)},
    )
    server = ModelServer(profile, log_dir=tmp_path / "runs")
    server.start()
    try:
        deadline = time.monotonic() + 30
        while not printed.exists() and time.monotonic() < deadline:
            time.sleep(0.001)
        assert printed.exists()
    finally:
        server.stop(grace_s=1.0)
    texts = [line.text for line in server.lines]
    stop_at = next(n for n, text in enumerate(texts) if text.startswith("vramtui: stopping the server"))
    assert sum(text.startswith("load_tensors: layer") for text in texts[:stop_at]) == 3000
    assert texts[stop_at - 1] == "llama_model_load: error loading model: the last line before the stop"
    assert_nothing_left(server.pid)


HEALTH_500 = """#!{python}
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer
port = int(sys.argv[sys.argv.index("--port") + 1])
class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(500)
        self.end_headers()
        self.wfile.write(b'{{"error": "internal"}}')
    def log_message(self, *args):
        pass
print("main: server is listening on http://127.0.0.1:%d" % port, flush=True)
HTTPServer(("127.0.0.1", port), Handler).serve_forever()
"""


def _check_a_fake_server(tmp_path: Path, script: str, timeout_s: float = 3) -> tuple[Any, list[int]]:
    """`check` of a stand-in llama-server (`script`, formatted with the Python to run it) on an empty GGUF."""
    server = tmp_path / "llama-server"
    server.write_text(script.format(python=sys.executable))
    server.chmod(0o755)
    (tmp_path / "m.gguf").write_bytes(EMPTY_GGUF)
    profile = Profile(backend="llama.cpp", model=str(tmp_path / "m.gguf"), port=0, program=str(server))
    started: list[int] = []
    result = run_check(profile, tmp_path, ready_timeout_s=timeout_s, on_start=lambda s: started.append(s.pid))
    return result, started


def test_a_health_check_that_never_answers_where_the_log_says_why_is_that_failure(tmp_path: Path) -> None:
    """QA 13: a runner up under a budget that could start no thread for a request: its health check never
    answered, and check said "not ready within the timeout ... check that the program is its server"
    where the log (and `diagnose`) said why."""
    said_why = HEALTH_500.replace(  # each request fails on an allocation, after the server listens
        "        self.send_response(500)",
        '        print("ggml_aligned_malloc: insufficient memory (attempted to allocate 256.00 MB)", flush=True)\n'
        "        self.send_response(500)",
    )
    result, started = _check_a_fake_server(tmp_path, said_why)
    assert not result.ready and result.failure == "host_oom", result.message
    assert "insufficient memory" in (result.diagnosis.first_error_text or "")
    # it served nothing, and its readiness probe never passed: failed coming up, not at a request (QA 26 D3)
    assert result.diagnosis.failure_stage == "ready"
    assert "not the engine's 'still loading'" not in " ".join(result.diagnosis.advice)
    assert_nothing_left(*started)


def test_a_health_check_answering_500_is_said_not_taken_for_a_slow_load(tmp_path: Path) -> None:
    """QA: a /health that answers HTTP 500 (or no HTTP at all) ended as "not ready within the timeout ...
    Raise ready_timeout if the model is large": the answer is said, and the advice is not to wait."""
    result, started = _check_a_fake_server(tmp_path, HEALTH_500)
    assert result.failure == READY_TIMEOUT
    assert '/health answered HTTP 500 ({"error": "internal"})' in result.message
    assert "Raise `ready_timeout`" not in result.diagnosis.advice[0]
    assert "not the engine's 'still loading'" in result.diagnosis.advice[0]
    assert_nothing_left(*started)


def test_a_health_check_answering_500_throughout_is_given_up_early(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """QA 26 D3: a server whose readiness probe answered HTTP 500 from its first poll was waited on for the
    whole 120 s, then read as failing "at inference" though it served nothing. Server errors for _ERRING_S
    (30 s; 1 s here) end the wait, and the failure is at ready."""
    from vramtui.core.launch import launcher

    monkeypatch.setattr(launcher, "_ERRING_S", 1.0)
    began = time.monotonic()
    result, started = _check_a_fake_server(tmp_path, HEALTH_500, timeout_s=60)
    assert time.monotonic() - began < 30  # not the 60 s timeout
    assert result.failure == READY_TIMEOUT
    assert "not ready for 1 s of server errors" in result.message and "answered HTTP 500" in result.message
    assert (result.diagnosis.stage, result.diagnosis.failure_stage) == ("ready", "ready")  # it served nothing
    assert_nothing_left(*started)


def test_port_already_in_use(tiny_gguf: Path, tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        profile = Profile(backend="llama-cpp-python", model=str(tiny_gguf), port=port)
        server = ModelServer(profile, log_dir=tmp_path / "runs")
        with pytest.raises(LaunchError, match=f"port {port}.*already in use") as caught:
            server.start()
        assert caught.value.failure == PORT_IN_USE
        assert server.proc is None  # nothing was launched
        result = run_check(profile, tmp_path)
    assert not result.ready and result.failure == PORT_IN_USE and result.failure_stage == "launch"
    assert str(port) in result.message and "pid" in result.message  # who holds it
    assert not procs.live_groups()


def test_command_not_found(tmp_path: Path) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    profile = Profile(backend="llama.cpp", model=str(tmp_path / "m.gguf"), port=0, env={"PATH": str(empty)})
    result = run_check(profile, tmp_path)
    assert not result.ready and result.failure == COMMAND_NOT_FOUND
    assert "llama-server" in result.message
    assert result.command[0] == "llama-server"
    assert not procs.live_groups()


@pytest.mark.parametrize(
    ("backend", "binary", "how"),
    [("vllm", "vllm", "pip install vllm"), ("ollama", "ollama", "https://ollama.com/download")],
)
def test_a_missing_engine_is_named_with_how_to_get_it_not_llama_server(
    tmp_path: Path, backend: str, binary: str, how: str
) -> None:
    # Issue 22 #30: the app's launch (no load-time check there) said "program = /path/to/llama-server"
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    profile = Profile(backend=backend, model="org/m", port=0, env={"PATH": str(empty)})
    result = run_check(profile, tmp_path)
    assert not result.ready and result.failure == COMMAND_NOT_FOUND
    assert result.message.startswith(f"{binary} not found on PATH: {backend}'s server is not installed")
    advice = result.diagnosis.advice
    assert len(advice) == 1 and advice[0].startswith(f"Install {backend}'s server ({how}")
    assert f'program = "/path/to/{binary}"' in advice[0] and "llama-server" not in advice[0]


HANGING_SERVER = """#!{python}
# Prints what llama.cpp prints while loading, then never gets ready.
import time
print("llama_model_loader: loaded meta data with 23 key-value pairs and 39 tensors from m.gguf", flush=True)
print("load_tensors: loading model tensors, this can take a while...", flush=True)
time.sleep(600)
"""


@pytest.mark.engine
def test_server_that_hangs_before_ready_times_out_naming_the_stage(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "llama-server"
    fake.write_text(HANGING_SERVER.replace("{python}", sys.executable))
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    profile = Profile(
        backend="llama.cpp",
        model=str(tmp_path / "m.gguf"),
        port=0,
        env={"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"},
    )
    started: list[int] = []
    t0 = time.monotonic()
    result = run_check(profile, tmp_path, ready_timeout_s=3, on_start=lambda s: started.append(s.pid))
    assert time.monotonic() - t0 < 20
    assert not result.ready and result.failure == READY_TIMEOUT
    assert result.failure_stage == "load_weights"
    assert "load_weights" in result.message
    assert_nothing_left(*started)


SIGKILLED_PARENT = """
import sys, time
from vramtui.core.launch.launcher import ModelServer
from vramtui.core.launch.profile import Profile
server = ModelServer(Profile(backend="llama-cpp-python", model=sys.argv[1], port=0), log_dir=sys.argv[2])
server.start()
assert server.wait_ready(60)
print(server.pid, flush=True)
time.sleep(600)
"""


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _wait_gone(pid: int, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False


@pytest.mark.engine
@needs_llama
def test_sigkill_of_vramtui_takes_the_server_with_it(tiny_gguf: Path, tmp_path: Path) -> None:
    server_pid = 0
    parent = subprocess.Popen(
        [sys.executable, "-c", SIGKILLED_PARENT, str(tiny_gguf), str(tmp_path / "runs")],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert parent.stdout is not None
        server_pid = int(parent.stdout.readline())
        assert psutil.Process(server_pid).ppid() == parent.pid
        parent.send_signal(signal.SIGKILL)  # no Python code of the parent runs after this
        parent.wait(10)
        assert _wait_gone(server_pid), "the server outlived a SIGKILLed vramtui"
    finally:
        parent.kill()
        parent.wait()
        if server_pid and _alive(server_pid):  # even a failing test leaves nothing behind
            os.killpg(server_pid, signal.SIGKILL)


GRANDCHILD_PARENT = """
import sys, time
from vramtui.core.launch import procs
proc = procs.spawn(["sh", "-c", "sleep 600 & echo $!; wait"])
print(proc.stdout.readline().decode().strip(), flush=True)
time.sleep(600)
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_terminal_signals_kill_the_whole_group(sig: signal.Signals) -> None:
    # `sleep` is a grandchild: PDEATHSIG does not reach it, only the group kill in the handler does.
    grandchild = 0
    parent = subprocess.Popen([sys.executable, "-c", GRANDCHILD_PARENT], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        grandchild = int(parent.stdout.readline())
        deadline = time.monotonic() + 5  # the forked shell becomes `sleep` at its exec
        while psutil.Process(grandchild).name() != "sleep" and time.monotonic() < deadline:
            time.sleep(0.01)
        assert psutil.Process(grandchild).name() == "sleep"
        parent.send_signal(sig)
        # generous: its handler scans the process table, slow on a loaded 2-core box (a clean-clone run
        # timed out at 10 s once); what is tested is that it ends and takes the grandchild along
        parent.wait(60)
        assert _wait_gone(grandchild), f"a grandchild outlived {sig.name}"
    finally:
        parent.kill()
        parent.wait()
        if grandchild and _alive(grandchild):
            os.kill(grandchild, signal.SIGKILL)


def test_a_sigint_its_shell_left_ignored_stays_ignored_servers_included() -> None:
    """A background job (`vramtui wizard ... &` from a script) starts with SIGINT ignored: a `kill -INT`
    then stops nothing, neither vramtui nor its servers (QA: it killed the server and the run went on,
    reporting the server's failure)."""
    grandchild = 0
    parent = subprocess.Popen(
        [sys.executable, "-c", GRANDCHILD_PARENT],
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),  # as a non-interactive shell's `&`
    )
    try:
        assert parent.stdout is not None
        grandchild = int(parent.stdout.readline())
        parent.send_signal(signal.SIGINT)
        time.sleep(1.0)
        assert parent.poll() is None and _alive(grandchild)
    finally:
        parent.kill()
        parent.wait()
        if grandchild and _alive(grandchild):
            os.kill(grandchild, signal.SIGKILL)


def test_normal_exit_kills_the_group_too() -> None:
    script = GRANDCHILD_PARENT.replace("time.sleep(600)", "sys.exit(0)")
    parent = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=30, check=True
    )
    grandchild = int(parent.stdout.strip())
    gone = _wait_gone(grandchild)
    if not gone:
        os.kill(grandchild, signal.SIGKILL)
    assert gone


def test_build_command_picks_a_free_port_for_zero(tiny_gguf: Path) -> None:
    plan = build_command(Profile(backend="llama-cpp-python", model=str(tiny_gguf), port=0))
    assert plan.port > 0 and not procs.port_in_use("127.0.0.1", plan.port)
    assert plan.base_url == f"http://127.0.0.1:{plan.port}"


def test_default_log_dir_is_under_the_user_data_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import platformdirs

    from vramtui.core.launch.launcher import default_log_dir

    monkeypatch.delenv("VRAMTUI_DATA_DIR")  # the conftest gives each test its own
    assert default_log_dir() == Path(platformdirs.user_data_dir("vramtui")) / "runs"
    monkeypatch.setenv("VRAMTUI_DATA_DIR", str(tmp_path))
    assert default_log_dir() == tmp_path / "runs"


def test_gpu_holders_are_reported_before_launch(tiny_gguf: Path, tmp_path: Path) -> None:
    """NVML is absent here: a source with NVML's shapes (GpuReading.process_bytes) stands in."""
    from vramtui.core.memory.sampling import GpuReading, Sample

    class FixedGpu:
        available = True

        def sample(self) -> Sample:
            gpu = GpuReading(0, "NVIDIA GeForce RTX 4090", "GPU-1", 9000 * MIB, 24564 * MIB,
                             process_bytes={os.getpid(): 8800 * MIB})  # fmt: skip
            return Sample(time.time(), (gpu,), None)

        def close(self) -> None:
            pass

    profile = Profile(backend="llama-cpp-python", model=str(tiny_gguf), port=0, params={"gpu_layers": 0})
    server = ModelServer(profile, log_dir=tmp_path, sample_source=FixedGpu())
    notes = server.preflight()
    assert notes == [f"GPU 0: pid {os.getpid()} ({psutil.Process().name()}) already holds 8800 MiB"]
    assert not budget_on_gpu(FixedGpu(), profile)  # gpu_layers = 0: a budget would apply to the host
    assert budget_on_gpu(FixedGpu(), profile.with_param("gpu_layers", 99))


@pytest.mark.engine
@needs_llama
def test_gpu_budget_stops_the_run_as_out_of_memory(tiny_gguf: Path, tmp_path: Path) -> None:
    """The GPU budget through the NVML interface: the source charges the server's real pid."""
    from vramtui.core.memory.sampling import GpuReading, Sample

    class ServerOnGpu:
        """Charges every pid of the watched tree 200 MiB per second since launch (an allocation ramp)."""

        available = True

        def __init__(self) -> None:
            self.pids: tuple[int, ...] = ()
            self.t0 = time.monotonic()

        def sample(self) -> Sample:
            pids = procs.tree_pids(self.pids[0]) if self.pids else []
            used = int((time.monotonic() - self.t0) * 200 * MIB)
            gpu = GpuReading(
                0, "NVIDIA L4", "GPU-1", used, 23034 * MIB, process_bytes=dict.fromkeys(pids, used)
            )
            return Sample(time.time(), (gpu,), None)

        def status(self) -> object:
            return None

        def close(self) -> None:
            pass

    source = ServerOnGpu()
    profile = Profile(
        backend="llama-cpp-python",
        model=str(tiny_gguf),
        port=0,
        params={"gpu_layers": 99},
        memory_budget=20 * MIB,
    )
    started: list[int] = []

    def on_start(server: ModelServer) -> None:
        source.pids = (server.pid or 0,)
        source.t0 = time.monotonic()
        started.append(server.pid or 0)

    result = run_check(profile, tmp_path, sample_source=source, on_start=on_start, ready_timeout_s=60)
    assert result.budget_mode == "gpu"
    assert result.failure == "cuda_oom" and not result.ok
    assert result.failure_stage is not None
    assert "budget" in Path(result.log_file or "").read_text()
    assert_nothing_left(*started)


@pytest.mark.engine
@needs_llama
def test_started_from_a_short_lived_thread_the_server_stays_up(tiny_gguf: Path, tmp_path: Path) -> None:
    """PDEATHSIG fires when the forking *thread* ends: a TUI worker thread must not take the server down."""
    import threading

    profile = Profile(backend="llama-cpp-python", model=str(tiny_gguf), port=0)
    server = ModelServer(profile, log_dir=tmp_path, on_log_line=lambda line: records.append(line))
    records: list = []
    worker = threading.Thread(target=server.start)
    worker.start()
    worker.join()
    try:
        assert server.wait_ready(60)
        time.sleep(0.5)
        assert server.running, "the server died with the thread that started it"
        assert records and all(r.t >= (server.started_at or 0) for r in records)
        assert any(r.stage == "kv_cache" for r in records)  # the log engine tagged the lines as they came
    finally:
        server.stop()
    assert_nothing_left(server.pid)


@pytest.mark.engine
@needs_llama
def test_replaying_the_long_request_that_failed(tiny_gguf: Path, tmp_path: Path) -> None:
    """The smallest request answers; the saved long one is over the context: the check says so."""
    profile = profile_next_to(tiny_gguf, "tiny-ok.toml", tmp_path / "p")
    long_request = {"messages": [{"role": "user", "content": "a " * 1500}], "max_tokens": 32}
    result = run_check(profile, tmp_path, replay=long_request)
    assert result.ready and result.smoke is not None and result.smoke.ok
    assert result.replay is not None and result.replay.kind == "context_too_long"
    assert not result.ok and result.failure == "context_too_long" and result.failure_stage == "inference"
    assert "maximum context length is 2048" in result.replay.meaning
    assert result.to_dict()["replay"]["status"] == 400
    fitting = run_check(
        profile, tmp_path, replay={"messages": [{"role": "user", "content": "a " * 200}], "max_tokens": 16}
    )
    assert fitting.ok and fitting.replay is not None and fitting.replay.ok


def _fitting(backend: str, budget_mode: str, monkeypatch: pytest.MonkeyPatch, **params: object):
    monkeypatch.setattr("vramtui.core.memory.nvml.first_gpu_total_bytes", lambda: 24 * 1024 * MIB)
    profile = Profile(
        backend=backend, model="/m.gguf", params=params, memory_budget=12 * 1024 * MIB, port=8080
    )
    server = ModelServer(profile)
    return server, fit_to_budget(server.plan, profile, budget_mode, profile.memory_budget)


def test_llama_servers_fit_targets_a_gpu_budget_not_the_whole_card(monkeypatch: pytest.MonkeyPatch) -> None:
    server, note = _fitting("llama.cpp", "gpu", monkeypatch)
    assert server.plan.argv[1:3] == ["--fit-target", "12288"]  # leaves free what the budget takes away
    assert note is not None and "--fit-target 12288 MiB" in note


def test_fit_under_a_host_budget_is_said_and_fit_off_or_no_fit_is_left_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server, note = _fitting("llama.cpp", "host", monkeypatch)
    assert "--fit-target" not in server.plan.argv and note is not None and "host budget" in note
    server, note = _fitting("llama.cpp", "gpu", monkeypatch, fit=False)
    assert note is None and "--fit-target" not in server.plan.argv
    server, note = _fitting("llama-cpp-python", "gpu", monkeypatch)
    assert note is None and "--fit-target" not in server.plan.argv


def test_a_log_that_cannot_be_written_is_said_once_and_its_lines_kept(tmp_path: Path) -> None:
    """QA: a full disk under the run's log took its reader thread down with a traceback, then exit 3.
    The file is closed, the lines stay in memory, and the run's warnings say so (once)."""
    profile = Profile(backend="llama.cpp", model=str(tmp_path / "m.gguf"), port=0)
    server = ModelServer(profile, log_dir=tmp_path)
    from vramtui.core.launch.runlog import RunLogFile

    server._run_log = RunLogFile(Path("/dev/full"))  # every write fails: the disk is full
    for text in ("load_tensors: loading model", "llama_context: n_ctx = 4096"):
        server._record_line(text, feed=False)
    assert [line.text for line in server.lines] == [
        "load_tensors: loading model",
        "llama_context: n_ctx = 4096",
    ]
    assert server._run_log.broken
    assert len(server.warnings) == 1 and "No space left on device" in server.warnings[0]
    assert [event.kind for event in server.events] == ["log_write_failed"]


def test_a_run_record_names_the_failed_answer_where_the_log_names_none() -> None:
    """QA 8: an endpoint that answered HTTP 200 with no completion was recorded as failure 'none'."""
    from types import SimpleNamespace

    from vramtui.core.launch.runrecord import _failure
    from vramtui.core.launch.smoke import SmokeResult

    garbage = SmokeResult(False, 200, "HTTP 200 but not a chat completion", kind="bad_response")
    assert _failure(SimpleNamespace(failure="none"), garbage) == "smoke_bad_response"
    assert _failure(SimpleNamespace(failure="cuda_oom"), garbage) == "cuda_oom"  # the log's own comes first
    garbled = SmokeResult(True, 200, "answered, in garbled words", kind="garbled")
    assert _failure(SimpleNamespace(failure="none"), garbled) == "none"


def test_a_tree_no_sample_could_read_is_not_measured_rather_than_zero(tmp_path: Path) -> None:
    # QA 16: "memory: peak 0 MiB, resident 0 MiB" for a server whose samples all read its dying tree as
    # 0 (every sample of a process that ends in milliseconds); none at all was already "not measured"
    from vramtui.core.launch.launcher import _result

    (tmp_path / "m.gguf").write_bytes(EMPTY_GGUF)
    server = ModelServer(
        Profile(backend="llama.cpp", model=str(tmp_path / "m.gguf"), port=0), log_dir=tmp_path
    )
    server.proc = subprocess.Popen(["true"])
    server.proc.wait()
    assert _result(server, None, "").peak_mib is None  # no sample
    server.samples.append(object())  # a sample whose tree read nothing: the peak stays 0
    result = _result(server, None, "")
    assert result.peak_mib is None and result.resident_mib is None
    assert result.to_dict()["peak_mib"] is None
    server.peak_bytes = server.resident_bytes = 42 * MIB  # a sample that read the tree
    assert _result(server, None, "").peak_mib == 42


def test_one_sample_is_not_called_the_peak(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """QA 22: check printed "memory: peak 3 MiB" for a server that loaded 20 MiB of weights and failed
    before the second sample: one sample, taken as it started, is said as such."""
    from vramtui.cli.check import _print_report
    from vramtui.core.launch.launcher import _result

    (tmp_path / "m.gguf").write_bytes(EMPTY_GGUF)
    server = ModelServer(
        Profile(backend="llama.cpp", model=str(tmp_path / "m.gguf"), port=0), log_dir=tmp_path
    )
    server.proc = subprocess.Popen(["true"])
    server.proc.wait()
    server.samples.append(object())
    server.peak_bytes = server.resident_bytes = 3 * MIB
    _print_report(_result(server, None, ""), None, [])
    out = capsys.readouterr().out
    assert "memory: sampled once (3 MiB), then the process ended: its peak is not known" in out
    assert "memory: peak" not in out
    server.samples.append(object())  # two samples: a curve, however short
    _print_report(_result(server, None, ""), None, [])
    assert "memory: peak 3 MiB, resident 3 MiB" in capsys.readouterr().out


HANGS_AFTER_ITS_ERROR = """#!{python}
import time
print("llama_model_load: error loading model: tensor 'blk.0.attn_q.weight' data is not within the file bounds",
      flush=True)
time.sleep(60)
"""


def test_a_server_stopped_after_printing_its_failure_keeps_that_failure(tmp_path: Path) -> None:
    """An engine that printed its error and had not exited when vramtui stopped it (the user's ctrl-c, or a
    slow exit under load, as CI saw) failed on its own: the verdict is its error, not "vramtui stopped the
    server itself: not an engine failure"."""
    program = tmp_path / "llama-server"
    program.write_text(HANGS_AFTER_ITS_ERROR.format(python=sys.executable))
    program.chmod(0o755)
    (tmp_path / "m.gguf").write_bytes(EMPTY_GGUF)
    profile = Profile(backend="llama.cpp", model=str(tmp_path / "m.gguf"), port=0, program=str(program))
    server = ModelServer(profile, log_dir=tmp_path / "runs")
    server.start()
    pid = server.proc.pid if server.proc else 0
    deadline = time.monotonic() + 30
    while (
        not any("error loading model" in line.text for line in server.lines) and time.monotonic() < deadline
    ):
        time.sleep(0.05)
    server.stop()
    diagnosis = server.diagnosis()
    assert server.failure == "stopped_by_vramtui"  # the launcher knows it stopped it
    assert diagnosis is not None and diagnosis.failed and diagnosis.failure != "stopped_by_vramtui"
    assert "data is not within the file bounds" in (diagnosis.first_error_text or "")
    assert_nothing_left(pid)
    # a check's result (what the wizard observes) names the engine's failure too
    from vramtui.core.launch.launcher import _result

    result = _result(server, None, "")
    assert result.failure == diagnosis.failure and result.failure_stage == "load_weights"


SILENT_HANG = """#!{python}
import sys, time
print("fake server starting", " ".join(sys.argv[1:]), flush=True)
time.sleep(600)
"""


def test_a_program_that_prints_no_engine_line_is_not_told_to_wait_longer(tmp_path: Path) -> None:
    """QA 35 F7/F8: a program that printed one line that is no engine's and opened no port was told "Raise
    ready_timeout if the model is large", and `diagnose` of the log it left read "No failure", exit 0."""
    result, started = _check_a_fake_server(tmp_path, SILENT_HANG, timeout_s=2)
    assert result.failure == READY_TIMEOUT
    advice = result.diagnosis.advice[0]
    assert "printed no line of llama.cpp's start-up" in advice and "'fake server starting" in advice
    assert "is llama.cpp's server" in advice and "Raise `ready_timeout` in the profile if" not in advice
    assert_nothing_left(*started)
    # the log it left: vramtui launched it and gave up, so it stops before ready (incomplete, exit 3)
    log = next(tmp_path.rglob("*.log")).read_text()
    assert "vramtui: not ready after" in log
    done = subprocess.run(
        [sys.executable, "-m", "vramtui", "diagnose", "-"], input=log, capture_output=True, text=True
    )
    assert done.returncode == 3, done.stdout + done.stderr
    assert done.stdout.count("Incomplete: no error, and not ready when vramtui's ready_timeout ran out") == 1
