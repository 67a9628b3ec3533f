"""Launching the real llama-server (issue 13 #5/#6, issue 14): what vramtui says about its own stops,
a busy port and a saved profile. Skipped where no llama-server binary was built."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

import pytest
from placeholder_files import EMPTY_GGUF
from test_llama_server_cmdline import BINARY  # tests/conftest.py puts core/backends on the path

from vramtui.core.launch import procs
from vramtui.core.launch.launcher import (
    PORT_IN_USE,
    STOPPED_BY_VRAMTUI,
    ModelServer,
    build_command,
    run_check,
)
from vramtui.core.launch.profile import Profile
from vramtui.core.logs.diagnose import diagnose_file

# The conftest fixture: skipped where no binary is built, a failure under CI (which builds it).
needs_binary = pytest.mark.usefixtures("llama_server_bin")


def _profile(model: Path, **changes: object) -> Profile:
    return Profile(backend="llama.cpp", model=str(model), port=0, program=str(BINARY), **changes)  # type: ignore[arg-type]


@needs_binary
@pytest.mark.engine
def test_our_own_stop_is_stopped_by_vramtui_not_an_oom_kill(tiny_gguf: Path, tmp_path: Path) -> None:
    # A stop before ready with a grace too short for a polite exit: the group kill is ours (SIGKILL).
    server = ModelServer(_profile(tiny_gguf, params={"context": 512}), log_dir=tmp_path)
    server.start()
    pid = server.pid
    time.sleep(0.3)
    server.stop(grace_s=0.0)
    assert pid is not None and server.exit_code is not None and not server.ready
    assert server.failure == STOPPED_BY_VRAMTUI
    diagnosis = server.diagnosis()
    assert diagnosis.failure == STOPPED_BY_VRAMTUI and diagnosis.failure != "host_oom_killed"
    assert "stopped by vramtui" in diagnosis.first_error_text
    assert not procs.group_members(pid)


@needs_binary
@pytest.mark.engine
def test_a_kill_by_the_exit_handlers_is_ours_too(tiny_gguf: Path, tmp_path: Path) -> None:
    server = ModelServer(_profile(tiny_gguf, params={"context": 512}), log_dir=tmp_path)
    server.start()
    time.sleep(0.3)
    procs.kill_all_groups()  # what SIGHUP / SIGTERM to vramtui does: the server is not told stop()
    assert not server.wait_ready(10)
    assert server.failure == STOPPED_BY_VRAMTUI and server.diagnosis().failure == STOPPED_BY_VRAMTUI
    server.stop()
    # QA 38 F11: the saved log says so too, ahead of the kill, as a stop from the app does
    text = Path(server.log_file).read_text()  # type: ignore[arg-type]
    assert "vramtui: stopping the server (vramtui is ending" in text, text[-2000:]
    assert diagnose_file(server.log_file).stopped_by_vramtui  # type: ignore[arg-type]


@needs_binary
@pytest.mark.engine
def test_a_busy_port_is_the_verdict_the_log_pane_gets(tiny_gguf: Path, tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        profile = _profile(tiny_gguf).with_changes(port=port)
        server = ModelServer(profile, log_dir=tmp_path)
        with pytest.raises(Exception, match="already in use"):
            server.start()
        diagnosis = server.diagnosis()  # what the TUI's tail hands the log pane
        result = run_check(profile, log_dir=tmp_path)
    assert diagnosis.failed and diagnosis.failure == PORT_IN_USE and str(port) in diagnosis.first_error_text
    assert result.failure == result.diagnosis.failure == PORT_IN_USE


@needs_binary
@pytest.mark.engine
def test_check_on_the_real_binary_answers(tiny_gguf: Path, tmp_path: Path) -> None:
    result = run_check(_profile(tiny_gguf, params={"context": 512}), log_dir=tmp_path, ready_timeout_s=60)
    assert result.ok, result.to_dict()
    assert result.command[0] == str(BINARY) and result.failure is None
    assert result.released
    # QA 16: where NVML finds no GPU, the CPU is the run's only place: every buffer there is no quiet failure
    # (the same log read by `diagnose`, which does not know the machine it ran on, still says it)
    from vramtui.core.logs.diagnose import diagnose_file
    from vramtui.core.memory.nvml import first_gpu_total_bytes

    nothing_on_gpu = [w for w in result.diagnosis.warnings if "nothing runs on a GPU" in str(w)]
    if first_gpu_total_bytes() is None:
        assert not nothing_on_gpu
        saved = diagnose_file(result.log_file, kernel_log=lambda: None)
        assert any("nothing runs on a GPU" in str(w) for w in saved.warnings)


@needs_binary
@pytest.mark.engine
def test_wizard_save_writes_the_profiles_own_port(tiny_gguf: Path, tmp_path: Path) -> None:
    (tmp_path / "m.gguf").symlink_to(tiny_gguf)
    path = tmp_path / "p.toml"
    path.write_text(
        f'backend = "llama.cpp"\nmodel = "m.gguf"\nport = 0\nprogram = "{BINARY}"\n[params]\ncontext = 512\n'
    )
    saved = tmp_path / "saved.toml"
    done = subprocess.run(
        [sys.executable, "-m", "vramtui", "wizard", str(path), "--auto", "--save", str(saved), "--json"],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    data = tomllib.loads(saved.read_text())
    assert data["port"] == 0 and data["program"] == str(BINARY)
    # --json's final profile is the same one (QA 5: it carried the last launch's random port)
    assert json.loads(done.stdout)["final_profile"]["port"] == 0


@needs_binary
@pytest.mark.engine
def test_wizard_save_onto_its_own_profile_with_force_keeps_the_relative_model(
    tiny_gguf: Path, tmp_path: Path
) -> None:
    # Issue 22 #29: it resolved "m.gguf" (a symlink here) to its target and wrote ready_timeout = 60.0
    (tmp_path / "m.gguf").symlink_to(tiny_gguf)
    path = tmp_path / "p.toml"
    path.write_text(
        f'# mine\nbackend = "llama.cpp"\nmodel = "m.gguf"\nport = 0\nprogram = "{BINARY}"\nready_timeout = 60\n'
        "[params]\ncontext = 512\n"
    )
    argv = [sys.executable, "-m", "vramtui", "wizard", str(path), "--auto", "--save", str(path)]
    refused = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert refused.returncode == 2 and "--force" in refused.stderr
    done = subprocess.run([*argv, "--force"], capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    data = tomllib.loads(path.read_text())
    assert (
        data["model"] == "m.gguf" and data["ready_timeout"] == 60 and isinstance(data["ready_timeout"], int)
    )
    assert data["params"] == {"context": 512}


def test_a_process_that_exits_on_its_own_was_not_signalled_by_us() -> None:
    # signalled_by_us only names groups vramtui signalled: a process that exits on its own is not one.
    proc = subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=True)
    proc.wait()
    assert not procs.signalled_by_us(proc.pid)


@needs_binary
@pytest.mark.engine
def test_the_wizard_fixes_a_kv_failure_without_proposing_what_auto_already_did(
    tiny_gguf: Path, tmp_path: Path
) -> None:
    # Issue 14: context 0 (the tiny model's 262144) under a 1500 MiB host budget fails at the KV cache;
    # flash attention is already on (auto): the wizard must not spend a relaunch turning it on.
    from vramtui.core.units import MIB
    from vramtui.core.wizard.wizard import Wizard

    profile = _profile(tiny_gguf, memory_budget=1500 * MIB)
    assert build_command(profile).env["LLAMA_ARG_LOG_VERBOSITY"] == "4"  # so the buffers are printed
    result = Wizard(profile, auto=True, record=False).run(max_steps=4)
    first = result.steps[0].observation
    assert first is not None and first.failure_stage == "kv_cache", first
    assert result.success and result.relaunches <= 2, result.reason
    assert all(step.proposal is None or step.proposal.param != "flash_attn" for step in result.steps)


def test_flash_attention_auto_is_never_proposed_on() -> None:
    from vramtui.core.backends.base import FLASH_ATTN_ON
    from vramtui.core.wizard.propose import candidates

    server = Profile(backend="llama.cpp", model="/m.gguf")
    assert candidates(FLASH_ATTN_ON, None, server, 4) == []  # default auto: on, the CPU included
    assert candidates(FLASH_ATTN_ON, "auto", server, 4) == []
    assert candidates(FLASH_ATTN_ON, False, server, 4) == [True]
    python = Profile(backend="llama-cpp-python", model="/m.gguf")
    assert candidates(FLASH_ATTN_ON, None, python, 4) == [True]  # its default is off


@needs_binary
@pytest.mark.engine
def test_the_idle_footprint_is_measured_once_per_binary_and_cached(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from vramtui.core.launch import footprint
    from vramtui.core.units import MIB

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    profile = _profile(tmp_path / "any.gguf", memory_budget=1500 * MIB)
    assert footprint.measured_floor(profile) is None  # never measured to say it in a log
    first = footprint.host_footprint(profile)
    assert footprint.measured_floor(profile) == first  # a run log's header says it from now on (QA 23 D4)
    cached = json.loads(footprint.cache_file().read_text())
    assert len(cached) == 1 and next(iter(cached.values()))["floor"] == first
    # its probe runs of a tiny model are no runs of the user's: none joins the calibration store (QA)
    from vramtui.core.estimate.calibrate import load_records

    assert load_records() == ([], [])
    assert (
        100 * MIB < first < 1024 * MIB
    )  # the least address space llama-server comes up in, tiny model included
    # what it maps with no limit is more: glibc's arena reservations it does without under a limit
    free = footprint.host_footprint(profile, "address_space")
    assert free == next(iter(cached.values()))["address_space"] and first <= free
    t0 = time.monotonic()
    assert footprint.host_footprint(profile) == first and time.monotonic() - t0 < 0.5  # from the cache
    # its resident share, from the same measurement: what an attached server's RSS budget is judged by
    resident = footprint.host_footprint(profile, "rss")
    assert resident == next(iter(cached.values()))["rss"] and 0 < resident < first
    # Without a budget nothing is measured: the backend's own figure.
    assert footprint.host_footprint(profile.with_changes(memory_budget=None)) == 240 * MIB


def test_q4_0_weights_count_twice_on_the_host_budget(make_gguf: Any, tmp_path: Path) -> None:
    # CPU_REPACK: llama.cpp keeps a repacked copy of q4_0 weights for the x86 CPU.
    import platform

    from vramtui.core.units import MIB
    from vramtui.core.wizard.budget import MemoryModel

    q4 = make_gguf(dtype="q4_0")
    q4_profile = Profile(backend="llama-cpp-python", model=str(q4), memory_budget=1500 * MIB)
    q4_bill = MemoryModel(q4_profile).raw(q4_profile)
    assert q4_bill is not None
    from vramtui.core.estimate.estimator import Settings, estimate
    from vramtui.core.estimate.modelinfo import load_model_info

    plain = load_model_info(str(q4)).weights_bytes or 0  # the file's own weights
    # The estimate of a CPU run counts the copy itself (and says so: the budget adds none of its own).
    cpu = estimate(load_model_info(str(q4)), Settings(backend="llama.cpp", on_gpu=False))
    assert cpu.counts_repack == (platform.machine().lower() in {"x86_64", "amd64"})
    host = q4_bill.get("weights", "host")
    if platform.machine().lower() in {"x86_64", "amd64"}:
        assert host >= 1.9 * plain, (host, plain)  # all but the embedding (and an output of odd rows)
    else:
        assert host < 2 * plain * 0.9


def test_an_exit_with_no_error_text_quotes_the_last_error_looking_line(tmp_path: Path) -> None:
    # Issue 13 #3: pydantic's refusal is no line the rules know; the verdict must still quote it.
    program = tmp_path / "llama-server"
    program.write_text(
        "#!/bin/sh\necho 'starting up'\necho '  Input should be greater than or equal to 0'\n"
        "echo '    For further information visit https://errors.pydantic.dev'\nexit 1\n"
    )
    program.chmod(0o755)
    (tmp_path / "m.gguf").write_bytes(EMPTY_GGUF)
    profile = Profile(backend="llama.cpp", model=str(tmp_path / "m.gguf"), port=0, program=str(program))
    result = run_check(profile, log_dir=tmp_path / "runs", ready_timeout_s=20)
    assert not result.ready and result.exit_code == 1
    assert "Input should be greater than or equal to 0" in result.message, result.message


@needs_binary
@pytest.mark.engine
@pytest.mark.parametrize("budget_mib", [60, 20])
def test_a_budget_too_small_for_the_engine_to_start_stops_the_wizard_with_that_reason(
    tiny_gguf: Path, tmp_path: Path, budget_mib: int
) -> None:
    # Issue 22 #10: under 60 MiB the real llama-server dies before loading (std::system_error, EAGAIN; or
    # a crash before its first line): the budget's doing, and no engine setting the wizard has helps.
    # QA 39 F1: at 20 MiB the dynamic loader cannot map libstdc++ ("error while loading shared libraries:
    # ... failed to map segment from shared object"), which read as a missing library.
    from vramtui.core.units import MIB
    from vramtui.core.wizard.wizard import Wizard

    profile = _profile(tiny_gguf, params={"context": 512}, memory_budget=budget_mib * MIB)
    result = run_check(profile, log_dir=tmp_path)
    assert not result.ready and result.failure == "host_oom", result.message
    assert result.diagnosis.cause == "budget_start"
    assert "too small for the engine to start" in result.diagnosis.summary
    wizard = Wizard(profile, auto=True, record=False).run(max_steps=2)
    assert not wizard.success and wizard.relaunches == 0
    assert (
        "too small for the engine to start" in wizard.reason and "not a memory problem" not in wizard.reason
    )
    assert any("memory_budget" in line for line in wizard.advice)


def test_another_engines_setting_is_named_as_such_not_as_unknown() -> None:
    """QA: vLLM's kv_cache_memory in a llama.cpp profile read "not a parameter vramtui knows"."""
    profile = Profile(
        backend="llama.cpp", model="m.gguf", program=str(BINARY),
        params={"kv_cache_memory": "1GiB"},
    )  # fmt: skip
    notes = build_command(profile).notes
    assert notes[0].startswith("kv_cache_memory: llama.cpp has no such setting (it is for vllm")


@pytest.mark.parametrize(
    ("body", "code", "said"),
    [
        ("echo 'fake: boom' >&2\nexit 1\n", 1, "the server exited with status 1"),
        ("echo 'fake: boom' >&2\nkill -SEGV $$\n", -11, "the server was killed by SIGSEGV"),
        # QA 20 D2: an exit with status 0 before ready left no line, and the saved log read "no failure"
        ("echo 'fake: boom' >&2\nexit 0\n", 0, "the server exited with status 0 before it was ready"),
    ],
    ids=["exit-1", "sigsegv", "exit-0"],
)
def test_a_program_that_dies_at_once_is_said_so_in_its_saved_log_too(
    tmp_path: Path, body: str, code: int, said: str
) -> None:
    """QA 19 F3-F5: a program that printed one line of its own and died: `check` said "at load weights ...
    with no error text" though its line was in the log, and `diagnose` on the saved log read "No failure"
    (exit 0): how it ended was never written there. Now the log ends with how it ended, and both read a
    failure at start-up, before the model was read, with its last words quoted."""
    from vramtui.core.logs.advice import START_UP_WORDS
    from vramtui.core.logs.diagnose import diagnose_file

    program = tmp_path / "llama-server"
    program.write_text("#!/bin/sh\n" + body)
    program.chmod(0o755)
    (tmp_path / "m.gguf").write_bytes(EMPTY_GGUF)
    profile = Profile(backend="llama.cpp", model=str(tmp_path / "m.gguf"), port=0, program=str(program))
    result = run_check(profile, log_dir=tmp_path / "runs", ready_timeout_s=20)
    assert not result.ready and result.exit_code == code
    assert result.message.startswith(f"failed at {START_UP_WORDS} (died_at_start)"), result.message
    # its own line is the first error, not vramtui's exit line after it (QA 20 D3)
    assert result.message.endswith("(died_at_start): fake: boom"), result.message
    saved_log = Path(result.log_file).read_text()
    assert said in saved_log.splitlines()[-1]
    saved = diagnose_file(result.log_file, kernel_log=lambda: None)
    assert saved.failed and saved.cause == "died_at_start", saved.summary
    lines = saved_log.splitlines()
    assert saved.first_error_line == len(lines) - 1 and lines[-2].endswith("fake: boom")
    assert saved.first_error_text is not None and saved.first_error_text.endswith("fake: boom")
    assert any(said in line for line in saved.evidence), saved.evidence
    # it reached no stage: --json says none, not load_weights (QA 20 D4, QA 22)
    assert saved.stage is None and result.stage is None
    # ... nor failed at one (QA 23 D6: failure_stage read load_weights beside a stage of none)
    assert saved.failure_stage is None and result.failure_stage is None
