"""`vramtui check PROFILE [--json]` end to end, as a user runs it."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

PROFILES = Path(__file__).resolve().parents[1] / "data" / "profiles"
REQUIRED_KEYS = {
    "ready",
    "stage",
    "failure_stage",
    "failure",
    "smoke",
    "peak_mib",
    "resident_mib",
    "command",
    "log_file",
}


def vramtui(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vramtui", *args], capture_output=True, text=True, timeout=timeout, check=False
    )


def profile_here(tiny_gguf: Path, name: str, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tiny.gguf").symlink_to(tiny_gguf)
    shutil.copy(PROFILES / name, folder / name)
    return folder / name


@pytest.mark.engine
def test_check_json_for_a_profile_that_works(tiny_gguf: Path, tmp_path: Path) -> None:
    pytest.importorskip("llama_cpp")
    profile = profile_here(tiny_gguf, "tiny-ok.toml", tmp_path / "p")
    proc = vramtui("check", str(profile), "--json", "--log-dir", str(tmp_path / "runs"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(proc.stdout)  # stdout is exactly one JSON object
    assert set(report) >= REQUIRED_KEYS
    assert report["ready"] is True and report["stage"] == "inference" and report["failure"] is None
    assert report["smoke"]["ok"] is True and report["smoke"]["status"] == 200 and report["smoke"]["meaning"]
    assert report["peak_mib"] > 0 and report["resident_mib"] > 0
    assert report["command"][:3] == [sys.executable, "-m", "llama_cpp.server"]
    assert Path(report["log_file"]).is_file()
    # The exact command line was shown before launch, on stderr in --json mode.
    first = proc.stderr.splitlines()[0]
    assert first.startswith("$ ") and shlex.split(first[2:]) == report["command"]


@pytest.mark.engine
def test_check_exits_1_with_the_diagnosis_when_it_fails(tiny_gguf: Path, tmp_path: Path) -> None:
    pytest.importorskip("llama_cpp")
    profile = profile_here(tiny_gguf, "tiny-kv-too-big.toml", tmp_path / "p")
    proc = vramtui("check", str(profile), "--json", "--log-dir", str(tmp_path / "runs"))
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    assert report["ready"] is False and "oom" in report["failure"] and report["failure_stage"] == "kv_cache"
    assert report["smoke"] is None
    assert report["diagnosis"]["failed"] is True


@pytest.mark.engine
def test_a_budget_on_the_command_line_stands_in_for_the_profiles(tiny_gguf: Path, tmp_path: Path) -> None:
    """QA 31 W7: a budget could only be tried by editing the TOML. The profile that fits at 1500 MiB fails
    under `--budget 40MiB` (less than the engine itself takes), and the run says the budget it ran under;
    the file is left as it was."""
    pytest.importorskip("llama_cpp")
    profile = profile_here(tiny_gguf, "tiny-ok.toml", tmp_path / "p")
    before = profile.read_text()
    proc = vramtui("check", str(profile), "--json", "--budget", "40MiB", "--log-dir", str(tmp_path / "runs"))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    assert report["memory_budget_mib"] == 40 and report["ready"] is False
    assert profile.read_text() == before


@pytest.mark.engine
def test_check_human_report(tiny_gguf: Path, tmp_path: Path) -> None:
    pytest.importorskip("llama_cpp")
    profile = profile_here(tiny_gguf, "tiny-ok.toml", tmp_path / "p")
    proc = vramtui("check", str(profile), "--log-dir", str(tmp_path / "runs"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("$ ") and "llama_cpp.server" in lines[0]
    assert lines[1].startswith("ready:")
    assert any(line.strip().startswith("memory: peak") for line in lines)


def test_check_port_in_use_is_a_clear_failure(tiny_gguf: Path, tmp_path: Path) -> None:
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        profile = tmp_path / "p.toml"
        (tmp_path / "m.gguf").symlink_to(tiny_gguf)  # a model file that is there (a missing one is exit 2)
        profile.write_text(f'backend = "llama-cpp-python"\nmodel = "m.gguf"\nport = {port}\n')
        proc = vramtui("check", str(profile), "--json", "--log-dir", str(tmp_path / "runs"))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    report = json.loads(proc.stdout)
    assert report["failure"] == "port_in_use" and str(port) in report["message"]
    # Issue 13 #6: the diagnosis (what the log pane's header shows) says the same failure, not "no failure".
    diagnosis = report["diagnosis"]
    assert diagnosis["failed"] and diagnosis["failure"] == "port_in_use", diagnosis
    assert str(port) in diagnosis["first_error_text"] and "NO FAILURE" not in diagnosis["summary"].upper()


@pytest.mark.engine
def test_check_without_a_port_picks_a_free_one_when_the_default_is_busy(
    tiny_gguf: Path, tmp_path: Path
) -> None:
    import socket

    pytest.importorskip("llama_cpp")
    with socket.socket() as holder:
        try:  # hold the default port; if something else already holds it, that is the case too
            holder.bind(("127.0.0.1", 8000))
            holder.listen()
        except OSError:
            pass
        profile = tmp_path / "p.toml"
        # a real model whose context the engine refuses (negative): launched, then refused, quickly
        (tmp_path / "m.gguf").symlink_to(tiny_gguf)
        profile.write_text('backend = "llama-cpp-python"\nmodel = "m.gguf"\nextra_args = ["--n_ctx", "-5"]\n')
        proc = vramtui("check", str(profile), "--json", "--log-dir", str(tmp_path / "runs"))
    report = json.loads(proc.stdout)
    assert report["failure"] != "port_in_use", report["message"]
    port = int(report["command"][report["command"].index("--port") + 1])
    assert port != 8000 and report["base_url"] == f"http://127.0.0.1:{port}"
    shown = proc.stderr.splitlines()[0]
    assert (
        shown.startswith("$ ") and shlex.split(shown[2:]) == report["command"]
    )  # the port launched is shown


def test_check_bad_profile_is_one_line(tmp_path: Path) -> None:
    proc = vramtui("check", str(tmp_path / "missing.toml"))
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [f"vramtui: no such profile: {tmp_path / 'missing.toml'}"]
    bad = tmp_path / "bad.toml"
    bad.write_text('backend = "llama.cpp"\nmodel = "m.gguf"\n[params]\ncontext = "lots"\n')
    proc = vramtui("check", str(bad))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert (
        proc.stderr.strip().splitlines()[-1]
        == 'vramtui: context must be a whole number, not "lots" (8192 or 32k)'
    )


def test_wizard_refuses_a_bad_profile_like_check_and_writes_no_record(tmp_path: Path) -> None:
    bad = tmp_path / "types.toml"
    bad.write_text(
        'backend = "llama-cpp-python"\nmodel = "m.gguf"\n[params]\ncontext = "lots"\nparallel = -2\n'
    )
    records = tmp_path / "records"
    checked = vramtui("check", str(bad))
    wizard = vramtui("wizard", str(bad), "--auto", "--record", str(records / "w.jsonl"))
    for proc in (checked, wizard):
        assert proc.returncode == 2 and "Traceback" not in proc.stderr
        assert proc.stderr.strip().splitlines() == [
            'vramtui: context must be a whole number, not "lots" (8192 or 32k)'
        ]
    assert wizard.stdout == "" and not records.exists()  # no record for a profile that never launched
    typo = tmp_path / "typo.toml"
    typo.write_text('backend = "llama-cpp-python"\nmodel = "m.gguf"\n[params]\ncontxt = 512\n')
    for command in ("check", "wizard"):
        proc = vramtui(command, str(typo), "--auto") if command == "wizard" else vramtui(command, str(typo))
        assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
        assert "did you mean context?" in proc.stderr


def test_check_refuses_a_cut_off_gguf_download_before_launch(tiny_gguf: Path, tmp_path: Path) -> None:
    """A GGUF whose header reads whole but whose tensor data stops short is a download that stopped:
    exit 2 with both sizes, before any engine is launched (no run log is written)."""
    whole = tiny_gguf.read_bytes()
    (tmp_path / "cut.gguf").write_bytes(whole[: len(whole) - 1000])
    profile = tmp_path / "p.toml"
    profile.write_text('backend = "llama-cpp-python"\nmodel = "cut.gguf"\n')
    proc = vramtui("check", str(profile), "--log-dir", str(tmp_path / "runs"))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "truncated GGUF" in lines[0] and "download it again" in lines[0], proc.stderr
    assert f"{len(whole) - 1000:,} of the {len(whole):,} bytes" in lines[0]
    assert not (tmp_path / "runs").exists()  # nothing was launched
    # The whole file passes the same check (the refusal is about the cut, not the format).
    (tmp_path / "cut.gguf").write_bytes(whole)
    from vramtui.core.estimate.ggufheader import cut_short

    assert cut_short(tmp_path / "cut.gguf") is None
    # Cut inside the header itself (QA: `estimate` refused it in one line, `check` and `wizard` launched it)
    (tmp_path / "cut.gguf").write_bytes(whole[:1000])
    for command in ("check", "wizard"):
        extra = ("--auto", "--record", str(tmp_path / "w.jsonl")) if command == "wizard" else ("--log-dir",)
        proc = vramtui(
            command, str(profile), *extra, *(() if command == "wizard" else (str(tmp_path / "runs"),))
        )
        assert proc.returncode == 2 and "Traceback" not in proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and "download it again" in lines[0], lines
        # where it stops, in words (QA 23 D7: struct's "unpack_from requires a buffer of at least ...")
        assert "GGUF file (inside its key/value metadata: " in lines[0] and "unpack_from" not in lines[0], (
            lines
        )
    assert not (tmp_path / "runs").exists() and not (tmp_path / "w.jsonl").exists()  # nothing launched
    # a file that is no GGUF at all is not called a cut download (the magic check words it)
    (tmp_path / "page.gguf").write_bytes(b"<html>not found</html>" * 10)
    assert cut_short(tmp_path / "page.gguf") is None


@pytest.mark.parametrize("timeout", ["0", "-3", "nan"])
def test_a_timeout_that_is_no_wait_is_one_line_before_launch(timeout: str, tmp_path: Path) -> None:
    """`--timeout 0` had launched the engine and reported "not ready after 0 s" (QA)."""
    proc = vramtui("check", str(tmp_path / "missing.toml"), "--timeout", timeout)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip().splitlines() == [
        f"vramtui: --timeout must be a positive number of seconds, not {float(timeout):g}"
    ]


def test_an_answer_with_bytes_a_terminal_would_not_show_is_escaped(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """QA 8 and 9: `check`'s answer line printed a raw U+FFFD (and control bytes) from a garbled answer."""
    from types import SimpleNamespace

    from vramtui.cli.check import _print_report

    smoke = SimpleNamespace(status=200, meaning="answered", text="ok \ufffd\x1b[2J done")
    result = SimpleNamespace(
        ready=True, message="up", stage="inference", failure=None, diagnosis=None, smoke=smoke, replay=None,
        load_time_s=None, ttft_s=None, peak_mib=None, command=None, bill=None, warnings=[], log_file=None,
        fit=None,
    )  # fmt: skip
    import vramtui.cli.check as check

    monkeypatch.setattr(check, "_fit", lambda _result: None)
    _print_report(result, None, [])
    answer = next(line for line in capsys.readouterr().out.splitlines() if "answer:" in line)
    assert "\ufffd" not in answer and "\x1b" not in answer and "\\ufffd" in answer, answer


def test_check_says_the_quiet_failures_of_a_run_that_came_up(capsys: pytest.CaptureFixture[str]) -> None:
    """QA 11: a transformers run offloaded to disk (15 tokens/s instead of 40) was said by `diagnose`, and
    `check` of the same run said nothing of it."""
    from types import SimpleNamespace

    from vramtui.cli.check import _print_report
    from vramtui.core.logs.diagnose import diagnose_text

    log = (
        "vramtui-runner: transformers 5.25.0, torch 2.13.0+cpu, cuda=False\n"
        "Some parameters are on the meta device because they were offloaded to the cpu and disk.\n"
        "vramtui-runner: ready: serving '/m' on http://127.0.0.1:8000\n"
    )
    diagnosis = diagnose_text(log)
    assert diagnosis.warnings
    result = SimpleNamespace(
        ready=True, message="the server answers", stage="ready", failure=None, failure_stage=None,
        diagnosis=diagnosis, smoke=None, replay=None, load_time_s=None, ttft_s=None, peak_mib=None,
        command=None, bill=None, warnings=[], log_file=None,
    )  # fmt: skip
    _print_report(result, None, [])
    out = capsys.readouterr().out
    assert "quiet failure: part of the model was offloaded to the CPU or the disk" in out


def test_check_says_vllms_share_of_the_machine_before_it_launches(tmp_path: Path) -> None:
    """QA 14: the "takes 92% of this machine's memory" warning came after the run, when it had been taken."""
    model = tmp_path / "tiny"
    model.mkdir()
    (model / "config.json").write_text(
        json.dumps(
            {
                "model_type": "qwen2",
                "architectures": ["Qwen2ForCausalLM"],
                **{"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4},
            }
        )
    )
    program = tmp_path / "vllm"
    program.write_text("#!/bin/sh\necho 'vllm: this stand-in exits at once'\nexit 1\n")
    program.chmod(0o755)
    profile = tmp_path / "v.toml"
    profile.write_text(
        f'backend = "vllm"\nmodel = "{model}"\nprogram = "{program}"\nport = "auto"\n[params]\ncontext = 512\n'
    )
    proc = vramtui("check", str(profile), "--log-dir", str(tmp_path / "runs"))
    out = proc.stdout
    assert "of this machine's memory" in out and out.index("of this machine's memory") < out.index("$ ")
    assert out.count("of this machine's memory") == 1, out  # not said again after the run


def test_check_says_a_port_held_at_start_up_as_diagnose_does(tmp_path: Path) -> None:
    """QA 15: `check` said "failed at stage load weights (other)" where `diagnose` said "start-up, before
    the model was read: the server could not listen". The stand-in prints vLLM's real log of it."""
    log = Path(__file__).resolve().parents[1] / "data" / "vllm" / "port-in-use.log"
    lines = [line for line in log.read_text().splitlines() if not line.startswith("# ")]
    (tmp_path / "out.txt").write_text("\n".join(lines) + "\n")
    model = tmp_path / "tiny"
    model.mkdir()
    (model / "config.json").write_text(
        json.dumps(
            {
                "model_type": "qwen2",
                "architectures": ["Qwen2ForCausalLM"],
                **{"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4},
            }
        )
    )
    program = tmp_path / "vllm"
    program.write_text(f"#!/bin/sh\ncat {tmp_path / 'out.txt'}\nexit 1\n")
    program.chmod(0o755)
    profile = tmp_path / "v.toml"
    profile.write_text(
        f'backend = "vllm"\nmodel = "{model}"\nprogram = "{program}"\nport = "auto"\n'
        '[params]\ncontext = 512\nkv_cache_memory = "64MiB"\n'
    )
    proc = vramtui("check", str(profile), "--log-dir", str(tmp_path / "runs"))
    assert proc.returncode == 1, proc.stderr
    assert "failed at start-up, before the model was read (port already in use)" in proc.stdout, proc.stdout
    assert "at stage load weights" not in proc.stdout and "at load weights" not in proc.stdout


def test_check_names_what_failed_and_the_budget_it_ran_under(capsys: pytest.CaptureFixture[str]) -> None:
    """QA 34 L6, L9: a compute buffer that could not be allocated read "host out of memory at kv cache" with
    nothing naming the compute buffer, which diagnose names; and the text never said the budget. The log is
    a real llama-server's (tests/data/llama-server/compute-too-big.log: -fa off under 1500 MiB)."""
    from types import SimpleNamespace

    from vramtui.cli.check import _print_report
    from vramtui.core.logs.diagnose import diagnose_text

    log = (Path(__file__).resolve().parents[1] / "data" / "llama-server" / "compute-too-big.log").read_text()
    diagnosis = diagnose_text(log)
    assert diagnosis.cause == "compute_alloc_failed"
    result = SimpleNamespace(
        ready=False, message="failed", stage="kv_cache", failure=diagnosis.failure, failure_stage="kv_cache",
        diagnosis=diagnosis, smoke=None, replay=None, load_time_s=None, ttft_s=None, peak_mib=1210.0,
        resident_mib=300.0, samples=[1, 2], command=["llama-server"], bill=None, warnings=[], log_file=None,
        memory_budget_mib=1500.0, budget_mode="host",
    )  # fmt: skip
    _print_report(result, None, [])
    out = capsys.readouterr().out
    failure = next(line for line in out.splitlines() if line.strip().startswith("failure:"))
    assert "at kv cache: the compute buffer" in failure, out
    assert "budget 1500 MiB (the host's address space), 290 MiB left at the peak" in out, out
