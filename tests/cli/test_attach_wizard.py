"""`vramtui wizard --attach` on real servers the test starts itself, outside vramtui, logging to a file.

The restart-yourself way: the wizard measures the server over a memory budget, proposes one change,
prints the command rebuilt by the Backend; the test (as a user would) stops the server and starts
the printed command; the wizard sees the new PID on the same port, verifies it as it verifies its
own launches and records the step. The take-over way without a yes never stops the process.
"""

from __future__ import annotations

import json
import os
import pty
import queue
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest
from test_attach_cli import _free_port, _start

from vramtui.core.attach.cmdline import read_command
from vramtui.core.wizard.steprecord import open_session

pytestmark = pytest.mark.engine


def _lines(stream) -> queue.Queue[str]:
    """The wizard's stderr, line by line, read in a thread (it talks while it waits)."""
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        for line in stream:
            lines.put(line)
        lines.put("")

    threading.Thread(target=pump, daemon=True).start()
    return lines


def _printed_command(lines: queue.Queue[str], seen: list[str], timeout: float = 120) -> list[str]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=1)
        except queue.Empty:
            continue
        seen.append(line)
        if line == "":
            break
        if line.startswith("  command: "):
            return shlex.split(line.removeprefix("  command: "))
    pytest.fail("the wizard printed no command:\n" + "".join(seen))


def _wizard(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "vramtui", "wizard", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGINT)
    proc.wait(15)


def _rss_mib(pid: int) -> float:
    return psutil.Process(pid).memory_info().rss / 2**20


def _restart_yourself(target: str, server, log_dir: Path, ready_path: str, keep: list[str]) -> None:
    """Drive one restart-yourself session to its end and check what it verified and recorded."""
    proc, port, _log = server
    before = read_command(proc.args)
    budget = int(_rss_mib(proc.pid) - 15)  # over it now; a smaller context brings it under
    record = log_dir / "session.jsonl"
    keeps = [word for name in keep for word in ("--keep", name)]
    wizard = _wizard(
        "--attach", target, "--budget", f"{budget}MiB", *keeps, "--restart-timeout", "120",
        "--json", "--record", str(record),
    )  # fmt: skip
    lines = _lines(wizard.stderr)
    seen: list[str] = []
    argv = _printed_command(lines, seen)
    assert lines.get(timeout=30).startswith("waiting up to 120 s")  # a silent wait would look like a hang
    # why this change, with its figures, is said before the command (QA 24 F9: only the record had it)
    assert any(line.startswith("proposed: context") and "it needs about" in line for line in seen), seen
    changed = read_command(argv)
    assert changed.backend is before.backend
    assert changed.model == before.model and changed.port == port
    assert changed.params["context"] < before.params["context"]
    assert {k: v for k, v in changed.params.items() if k != "context"} == {
        k: v for k, v in before.params.items() if k != "context"
    }
    assert changed.unread == before.unread  # the words no flag reads pass through unchanged
    assert proc.poll() is None  # printed, not applied: the wizard left it running
    _stop(proc)
    for new in _start(argv, log_dir / "restarted.log", ready_path, port):
        out, err = wizard.communicate(timeout=180)
        assert wizard.returncode == 0, "".join(seen) + err
        data = json.loads(out)
        assert data["success"] is True
        assert data["first_run"]["failure"] == "host_oom"  # the budget, measured on its process tree
        (step,) = data["steps"]
        assert (step["param"], step["from"], step["to"]) == (
            "context", before.params["context"], changed.params["context"],
        )  # fmt: skip
        assert step["outcome"] == "works"
        assert (
            f"new process {new.pid}: its command line sets context = {changed.params['context']}"
            in (step["verification"])
        )
        assert step["peak_mib"] < budget < data["first_run"]["peak_mib"]
        assert step["log_file"] == str(log_dir / "restarted.log")  # found through /proc/PID/fd
        assert data["attached"]["pid"] == new.pid and data["attached"]["way"] == "restart"
        session = open_session(record)
        assert session.success and [s["outcome"] for s in session.steps] == ["first_run", "works"]
        if before.backend.measures_footprint:  # its idle RSS measured: the room is in the budget's measure
            assert "budget are left" in session.steps[-1]["why"] and "~-" not in session.steps[-1]["why"]
        assert new.poll() is None  # it never stops what it did not start


def test_restart_yourself_llama_server_by_url(
    llama_server_bin: Path, tiny_gguf: Path, tmp_path: Path
) -> None:
    port = _free_port()
    argv = [str(llama_server_bin), "-m", str(tiny_gguf), "--host", "127.0.0.1", "--port", str(port)]
    argv += ["--ctx-size", "8192", "--parallel", "1", "--metrics"]
    for proc in _start(argv, tmp_path / "server.log", "/health", port):
        _restart_yourself(f"http://127.0.0.1:{port}", (proc, port, None), tmp_path, "/health", ["kv_dtype"])


def test_restart_yourself_llama_cpp_python_by_pid(tiny_gguf: Path, tmp_path: Path) -> None:
    pytest.importorskip("llama_cpp.server.app")
    port = _free_port()
    argv = [sys.executable, "-m", "llama_cpp.server", "--model", str(tiny_gguf), "--host", "127.0.0.1"]
    argv += ["--port", str(port), "--n_ctx", "8192"]
    for proc in _start(argv, tmp_path / "server.log", "/v1/models", port):
        _restart_yourself(
            str(proc.pid), (proc, port, None), tmp_path, "/v1/models", ["kv_dtype", "flash_attn"]
        )


@pytest.fixture
def llama_server_8k(llama_server_bin: Path, tiny_gguf: Path, tmp_path: Path):
    port = _free_port()
    argv = [str(llama_server_bin), "-m", str(tiny_gguf), "--host", "127.0.0.1", "--port", str(port)]
    argv += ["--ctx-size", "8192", "--parallel", "1"]
    for proc in _start(argv, tmp_path / "server.log", "/health", port):
        yield proc, port


def test_take_over_without_yes_never_stops_it(llama_server_8k, tmp_path: Path) -> None:
    proc, port = llama_server_8k
    budget = int(_rss_mib(proc.pid) - 15)
    wizard = _wizard(
        "--attach", f"http://127.0.0.1:{port}", "--budget", f"{budget}MiB", "--keep", "kv_dtype",
        "--take-over", "--json", "--record", str(tmp_path / "r.jsonl"),
    )  # fmt: skip
    out, err = wizard.communicate(timeout=120)
    assert wizard.returncode == 1, err
    assert f"not taken over: PID {proc.pid} is left running" in err
    data = json.loads(out)
    assert data["pending"]["param"] == "context"  # proposed, not applied
    assert data["steps"] == [] and data["attached"]["taken_over"] is False
    assert proc.poll() is None and psutil.pid_exists(proc.pid)
    # Nothing else took its port either: the same process still serves.
    conns = psutil.Process(proc.pid).net_connections(kind="tcp")
    assert any(c.status == psutil.CONN_LISTEN and c.laddr.port == port for c in conns)


def test_no_restart_within_the_timeout_is_an_error_and_leaves_it_running(
    llama_server_8k, tmp_path: Path
) -> None:
    proc, port = llama_server_8k
    budget = int(_rss_mib(proc.pid) - 15)
    started = time.monotonic()
    wizard = _wizard(
        "--attach", str(proc.pid), "--budget", f"{budget}MiB", "--keep", "kv_dtype",
        "--restart-timeout", "2", "--record", str(tmp_path / "r.jsonl"),
    )  # fmt: skip
    out, err = wizard.communicate(timeout=120)
    assert time.monotonic() - started < 60  # bounded: no hang past the timeout
    assert wizard.returncode == 1, out + err
    assert (
        f"no new server answered at http://127.0.0.1:{port} within 2 s (PID {proc.pid} still serves)" in out
    )
    assert "Traceback" not in err
    assert proc.poll() is None


def test_a_healthy_server_over_its_budget_is_said_to_run_over_it_not_to_fail_at_a_stage(
    llama_server_8k, tmp_path: Path
) -> None:
    """Issue 22 #18: it answers and runs at N MiB over the budget; it was "failed at kv_cache (host_oom)"."""
    proc, port = llama_server_8k
    budget = int(_rss_mib(proc.pid) - 15)
    wizard = _wizard(
        "--attach", f"http://127.0.0.1:{port}", "--budget", f"{budget}MiB", "--keep", "kv_dtype",
        "--restart-timeout", "1", "--max-steps", "1", "--json", "--record", str(tmp_path / "r.jsonl"),
    )  # fmt: skip
    out, err = wizard.communicate(timeout=120)
    data = json.loads(out)
    first = data["first_run"]
    peak = first["peak_mib"]
    assert first["smoke_ok"] is True and peak > budget
    assert first["failure_stage"] is None  # up and answering: no stage failed
    said = f"it runs at {peak:.0f} MiB, over the {budget} MiB budget"
    assert f"as it runs now: {said}" in err, err
    (step,) = data["steps"]
    assert step["why"].startswith(said + ";"), step["why"]
    assert "failed" not in step["why"] and "failed" not in err.split("apply it yourself")[0]
    session = open_session(tmp_path / "r.jsonl")
    assert session.steps[0]["failure_stage"] is None and session.steps[1]["why"] == step["why"]
    assert proc.poll() is None


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--attach", "999999999"], "no process with PID 999999999"),
        (["--attach", "http://127.0.0.1:1"], "nothing answers at http://127.0.0.1:1"),
        (["--attach", "banana"], "cannot attach to 'banana'"),
        (["--attach", "1", "--restart-timeout", "0"], "--restart-timeout must be a positive"),
        ([], "give a PROFILE (TOML) or --attach TARGET"),
    ],
)
def test_bad_attach_input_is_one_line_and_exit_2(args: list[str], says: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "vramtui", "wizard", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.count("\n") == 1 and says in proc.stderr


def test_take_over_with_yes_relaunches_the_change_under_vramtui(llama_server_8k, tmp_path: Path) -> None:
    proc, port = llama_server_8k
    budget = int(_rss_mib(proc.pid) - 15)
    wizard = _wizard(
        "--attach", f"http://127.0.0.1:{port}", "--budget", f"{budget}MiB", "--keep", "kv_dtype",
        "--take-over", "--yes", "--json", "--record", str(tmp_path / "r.jsonl"),
    )  # fmt: skip
    lines = _lines(wizard.stderr)
    seen: list[str] = []
    argv = _printed_command(lines, seen)
    deadline = time.monotonic() + 120
    while not any("it runs under vramtui as PID" in line for line in seen) and time.monotonic() < deadline:
        try:
            seen.append(lines.get(timeout=1))
        except queue.Empty:
            continue
    assert any("it runs under vramtui as PID" in line for line in seen), "".join(seen)
    assert proc.wait(5) is not None  # stopped: the user said yes
    owner = next(
        c.pid
        for c in psutil.net_connections(kind="tcp")
        if c.status == psutil.CONN_LISTEN and c.laddr.port == port
    )
    ours = psutil.Process(owner)
    assert ours.ppid() == wizard.pid  # it runs under vramtui now
    assert read_command(ours.cmdline()).params == read_command(argv).params
    assert read_command(argv).params["context"] < 8192
    wizard.send_signal(signal.SIGTERM)  # vramtui's end stops the server it now owns
    wizard.wait(30)
    data = json.loads(wizard.stdout.read())
    assert data["success"] is True and data["attached"]["taken_over"] is True
    assert data["steps"][0]["outcome"] == "works"
    psutil.wait_procs([ours], timeout=15)
    assert not ours.is_running()


def test_at_the_prompt_take_over_needs_a_typed_yes(llama_server_8k, tmp_path: Path) -> None:
    """On a terminal: [t]ake it over, then anything but "yes" stops nothing; [n]o ends the session."""
    proc, port = llama_server_8k
    budget = int(_rss_mib(proc.pid) - 15)
    leader, follower = pty.openpty()
    wizard = subprocess.Popen(
        [sys.executable, "-m", "vramtui", "wizard", "--attach", f"http://127.0.0.1:{port}",
         "--budget", f"{budget}MiB", "--keep", "kv_dtype", "--record", str(tmp_path / "r.jsonl")],
        stdin=follower, stdout=follower, stderr=follower,
    )  # fmt: skip
    os.close(follower)
    screen = b""

    def until(text: bytes) -> None:
        nonlocal screen
        deadline = time.monotonic() + 90
        while text not in screen and time.monotonic() < deadline:
            try:
                screen += os.read(leader, 65536)
            except OSError:
                break
        assert text in screen, screen.decode(errors="replace")

    until(b"[t]ake it over")
    os.write(leader, b"t\n")
    until(b"type yes: ")
    os.write(leader, b"y\n")  # not the word: nothing is stopped
    until(b"not stopped.")
    os.write(leader, b"n\n")
    assert wizard.wait(60) == 1
    os.close(leader)
    assert proc.poll() is None and b"--ctx-size" in screen  # the changed command was shown


def test_keep_names_a_parameter_of_the_engine(llama_server_8k) -> None:
    proc, _port = llama_server_8k
    run = subprocess.run(
        [sys.executable, "-m", "vramtui", "wizard", "--attach", str(proc.pid), "--keep", "ctx"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert run.returncode == 2 and run.stderr == "vramtui: --keep ctx: not a parameter of llama.cpp\n"
    assert proc.poll() is None


def _serve(argv: list[str], log: Path, port: int, env: dict[str, str]):
    """A llama-server the user starts, its output appended to `log` (`>> server.log 2>&1`)."""
    with log.open("ab") as out:
        proc = subprocess.Popen(
            argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env={**os.environ, **env}
        )
    from test_attach_cli import _wait_answers

    _wait_answers(f"http://127.0.0.1:{port}/health", proc, log)
    time.sleep(0.5)  # its "listening" lines reach the file
    return proc


def test_a_kv_change_replaces_the_servers_short_flags_and_is_verified_on_what_it_printed(
    llama_server_bin: Path, tiny_gguf: Path, tmp_path: Path
) -> None:
    """Issue 22 #1 and #33: started with `-c 8192 -ctk f16 -ctv f16` at the verbosity that prints its KV
    line, restarted by the user with the printed command appended to the same log (`--log` names it).
    The command sets each cache type once, the step is verified on the K and V types the engine printed,
    and the step records the server's own log (where this run's lines start), no copy in the temp folder."""
    port = _free_port()
    log = tmp_path / "server.log"
    verbose = {"LLAMA_ARG_LOG_VERBOSITY": "4"}  # prints `llama_kv_cache: ... K (f16) ..., V (f16) ...`
    argv = [str(llama_server_bin), "-m", str(tiny_gguf), "--host", "127.0.0.1", "--port", str(port)]
    argv += ["-c", "8192", "-np", "1", "-ctk", "f16", "-ctv", "f16"]
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    servers = [_serve(argv, log, port, verbose)]
    try:
        budget = int(_rss_mib(servers[0].pid) - 15)
        wizard = subprocess.Popen(
            [sys.executable, "-m", "vramtui", "wizard", "--attach", f"http://127.0.0.1:{port}",
             "--budget", f"{budget}MiB", "--keep", "context", "--keep", "parallel", "--log", str(log),
             "--restart-timeout", "120", "--json", "--record", str(tmp_path / "r.jsonl")],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "TMPDIR": str(scratch)},
        )  # fmt: skip
        seen: list[str] = []
        printed = _printed_command(_lines(wizard.stderr), seen)
        changed = read_command(printed)
        wanted = changed.params["kv_dtype"]
        assert wanted != "f16" and not changed.unread, "".join(seen)
        v_flags = [printed[i + 1] for i, w in enumerate(printed) if w in ("-ctv", "--cache-type-v")]
        assert v_flags == [wanted], shlex.join(printed)  # one V flag: the server's own -ctv is gone
        offset = log.stat().st_size
        _stop(servers[0])
        servers.append(_serve(printed, log, port, verbose))
        out, err = wizard.communicate(timeout=180)
        assert wizard.returncode == 0, "".join(seen) + err
        (step,) = json.loads(out)["steps"]
        assert (step["param"], step["to"], step["outcome"]) == ("kv_dtype", wanted, "works")
        assert f"the log confirms a {wanted} KV cache (K ({wanted}), V ({wanted}))" in step["verification"]
        assert step["log_file"] == str(log) and step["log_offset"] >= offset  # the server's own log
        assert list(scratch.iterdir()) == []  # no copy of it left in the temp folder
    finally:
        for proc in servers:
            if proc.poll() is None:
                _stop(proc)
