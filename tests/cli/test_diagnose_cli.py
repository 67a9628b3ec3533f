"""`vramtui diagnose FILE|- [--backend B] [--json]`: the report, the JSON, the exit status."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from vramtui.cli import main

LOGS = Path(__file__).resolve().parents[1] / "data" / "logs"

OOM_LOG = """llama_model_loader: loaded meta data with 24 key-value pairs
load_tensors:        CUDA0 model buffer size =  4155.99 MiB
llama_context: n_ctx         = 8192
ggml_backend_cuda_buffer_type_alloc_buffer: allocating 1024.00 MiB on device 0: cudaMalloc failed: out of memory
llama_init_from_model: failed to initialize the context: failed to allocate compute pp buffers
"""


@pytest.fixture
def oom_log(tmp_path: Path) -> Path:
    path = tmp_path / "server.log"
    path.write_text(OOM_LOG)
    return path


def test_text_report_quotes_the_first_error_with_its_number(
    oom_log: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["diagnose", str(oom_log)]) == 1
    out = capsys.readouterr().out
    assert "line 4" in out
    assert "cudaMalloc failed: out of memory" in out
    assert "--ctx-size 4096" in out
    assert "weights: 4.06 GiB" in out and "model_buffer" not in out  # words, not the JSON's keys (QA)


def test_json_keys(oom_log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diagnose", str(oom_log), "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    for key in (
        "backend",
        "stage",
        "failed",
        "failure_stage",
        "failure",
        "first_error_line",
        "evidence",
        "advice",
    ):
        assert key in data
    assert (data["backend"], data["failure"], data["failure_stage"], data["first_error_line"]) == (
        "llama.cpp",
        "cuda_oom",
        "kv_cache",
        4,
    )
    assert data["engine_figures"]["model_buffer"] == round(4155.99 * (1 << 20))


def test_backend_flag_changes_the_advice(oom_log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diagnose", str(oom_log), "--json", "--backend", "llama-cpp-python"]) == 1
    data = json.loads(capsys.readouterr().out)
    # A compute-buffer failure: flash attention, the micro-batch, then the context, in its own flags.
    assert data["backend"] == "llama-cpp-python" and "--flash_attn" in data["advice"][0]
    assert "--n_ubatch" in data["advice"][1] and "--n_ctx" in data["advice"][2]


def test_ok_log_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diagnose", str(LOGS / "llama-cpp-python-ok.log")]) == 0
    assert "No failure" in capsys.readouterr().out


def test_unreadable_input_exits_2_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diagnose", str(tmp_path / "nope.log")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("vramtui: no such file") and err.count("\n") == 1
    binary = tmp_path / "model.gguf"
    binary.write_bytes(b"GGUF\x03\x00\x00\x00" + bytes(range(256)) * 40)
    assert main(["diagnose", str(binary)]) == 2
    assert "binary" in capsys.readouterr().err
    assert main(["diagnose", str(tmp_path)]) == 2
    assert main(["diagnose", str(binary), "--backend", "nosuch"]) == 2
    assert "unknown backend" in capsys.readouterr().err
    # a log-only engine's near miss is named too (sglang, tgi have no Backend to suggest them)
    assert main(["diagnose", str(binary), "--backend", "sglan"]) == 2
    assert "unknown backend 'sglan'; did you mean 'sglang'?" in capsys.readouterr().err


def test_empty_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "empty.log"
    empty.write_bytes(b"")
    # not "no failure" (0): `diagnose server.log && deploy` must not pass an empty log
    assert main(["diagnose", str(empty)]) == 2
    assert capsys.readouterr().err == f"vramtui: {empty} is empty: nothing to diagnose\n"


UNKNOWN_ARCH = b"llama_model_load: error loading model: unknown model architecture: 'foo'\n"


def test_a_pipe_given_as_a_path_is_read_once(tmp_path: Path) -> None:
    # `vramtui diagnose <(docker logs srv)`: the path is a pipe; it read as empty ("no failure", exit 0),
    # and a FIFO hung on a second open
    script = f"exec {sys.executable} -m vramtui diagnose <(printf %s {UNKNOWN_ARCH.decode()!r})"
    done = subprocess.run(["bash", "-c", script], capture_output=True, timeout=60, check=False)
    assert done.returncode == 1 and b"1 line\n" in done.stdout, done.stdout + done.stderr
    fifo = tmp_path / "server.fifo"
    os.mkfifo(fifo)
    reader = subprocess.Popen(
        [sys.executable, "-m", "vramtui", "diagnose", str(fifo), "--json"], stdout=subprocess.PIPE
    )
    fifo.write_bytes(UNKNOWN_ARCH)
    out, _ = reader.communicate(timeout=60)
    assert reader.returncode == 1 and json.loads(out)["failure"] == "unknown_arch"


def test_binary_on_stdin_and_a_device_are_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    elf = b"\x7fELF\x02\x01\x01" + b"\x00" * 4096 + bytes(range(256)) * 8
    done = subprocess.run(
        [sys.executable, "-m", "vramtui", "diagnose", "-"], input=elf, capture_output=True, timeout=60
    )
    assert (done.returncode, done.stderr) == (
        2,
        b"vramtui: standard input looks like binary data, not a text log\n",
    )
    assert main(["diagnose", "/dev/zero"]) == 2  # never read: it has no end
    assert "is a device, not a log file" in capsys.readouterr().err


def test_exit_code_flag_for_a_bare_kill(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "load.log"
    log.write_text("Loading checkpoint shards:  50%|█████     | 2/4 [00:10<00:10,  5.00s/it]\n")
    assert main(["diagnose", str(log), "--exit-code", "137", "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert (data["failure"], data["failure_stage"]) == ("host_oom_killed", "load_weights")


def test_text_report_says_the_stage_is_unknown_when_no_line_names_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "killed.log"
    log.write_text("Killed\n")
    assert main(["diagnose", str(log)]) == 1
    out = capsys.readouterr().out
    assert "stage unknown" in out and "Failed at" not in out
    assert "Furthest stage reached: unknown" in out
    assert main(["diagnose", str(log), "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["failure_stage"] == "load_weights" and data["stage_inferred"] is True


def test_stdin_in_a_real_process() -> None:
    log = "\x1b[31m[bold red]ERROR[/] 07-01\x1b[0m torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
    done = subprocess.run(
        [sys.executable, "-m", "vramtui", "diagnose", "-", "--json"],
        input=log.encode() + b"\xff\xfe\n",
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    data = json.loads(done.stdout)
    assert data["failure"] == "cuda_oom" and data["first_error_line"] == 1
    assert "[bold red]" in data["first_error_text"] and "\x1b" not in data["first_error_text"]
    assert done.stderr == b""


def test_counts_the_engine_printed_are_shown_without_a_unit(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text(
        "load_tensors: offloaded 30/49 layers to GPU\n"
        "load_tensors:        CUDA0 model buffer size =  8148.38 MiB\n"
        "llama_context: n_ctx         = 32768\n"
    )
    out = subprocess.run(
        [sys.executable, "-m", "vramtui", "diagnose", str(log)], capture_output=True, text=True, timeout=60
    ).stdout
    assert "layers on the GPU: 30\n" in out and "layers in all: 49\n" in out
    assert "context: 32,768\n" in out and "weights: 7.96 GiB" in out


SERVER_LOGS = Path(__file__).resolve().parents[1] / "data" / "llama-server"


def test_the_models_shape_is_one_line_and_fits_projection_sits_beside_the_estimate(
    capsys: pytest.CaptureFixture[str],
) -> None:
    log = SERVER_LOGS / "healthy-defaults.verbose.log"  # a real llama-server log at --verbosity 4
    assert main(["diagnose", str(log)]) == 0
    out = capsys.readouterr().out
    assert "Model: 4 layers, 512 hidden, 8 heads / 8 KV heads of 64" in out
    assert "model_layers:" not in out and "model_heads:" not in out  # not a dozen lines of them
    assert "fit's breakdown (the last it printed, MiB): Host model" in out  # fit's own table, by row
    assert "fit projected 2313 MiB of host memory; vramtui estimates" in out  # the log's own 2313 MiB
    assert main(["diagnose", "--json", str(log)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["engine_figures"]["model_layers"] == 4  # the JSON keeps every figure
    fit = data["fit"]
    assert fit["projected_host_mib"] == 2313.0
    assert fit["estimated_host_mib"] > 0 and fit["context"] == data["engine_figures"]["context"]
    assert fit["host_delta"] == pytest.approx(
        (fit["estimated_host_mib"] - fit["projected_host_mib"]) / fit["projected_host_mib"], abs=1e-3
    )


def test_no_projection_is_fit_null(oom_log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    main(["diagnose", "--json", str(oom_log)])
    assert json.loads(capsys.readouterr().out)["fit"] is None


def test_text_that_is_no_servers_log_does_not_pass_as_healthy(tmp_path: Path) -> None:
    """QA 13 #5: a client's output or any other text read as "No failure", exit 0 (`diagnose && deploy`
    passed it); blank lines alone are as empty as an empty file."""
    other = tmp_path / "client.log"
    other.write_text("hello world\nthis is not a server log\n")
    proc = subprocess.run(
        [sys.executable, "-m", "vramtui", "diagnose", str(other)], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 3 and "is it the server's own log" in proc.stdout, proc.stdout
    as_json = subprocess.run(
        [sys.executable, "-m", "vramtui", "diagnose", str(other), "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert as_json.returncode == 3 and json.loads(as_json.stdout)["failed"] is False
    blank = tmp_path / "blank.log"
    blank.write_text("\n\n   \n")
    proc = subprocess.run(
        [sys.executable, "-m", "vramtui", "diagnose", str(blank)], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "blank" in proc.stderr


def test_a_reader_that_stops_early_keeps_the_verdicts_exit_status(tmp_path: Path) -> None:
    """`vramtui diagnose x.log | head` under pipefail: the status was 0 whatever the verdict (QA), because a
    closed stdout ended the run as 'not an error'. The verdict's status, settled before writing, stands."""
    failed = tmp_path / "failed.log"
    failed.write_bytes(UNKNOWN_ARCH * 2000)  # long enough that the report outruns the pipe's buffer
    healthy = tmp_path / "healthy.log"
    healthy.write_text("main: model loaded\n" * 2000)
    for log, status in ((failed, 1), (healthy, 0)):
        for extra in ([], ["--json"]):
            reader = subprocess.Popen(
                [sys.executable, "-m", "vramtui", "diagnose", str(log), *extra], stdout=subprocess.PIPE
            )
            assert reader.stdout is not None
            reader.stdout.close()  # the reader went away before a byte was read
            assert reader.wait(timeout=60) == status, (log.name, extra)


def test_a_port_held_by_another_process_fails_at_start_up_not_at_a_download(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """QA (session 13): a real llama-server that could not bind its port read "Failed at download"."""
    log = Path(__file__).resolve().parents[1] / "data" / "llama-server" / "port-in-use.log"
    assert main(["diagnose", str(log)]) == 1
    out = capsys.readouterr().out
    assert "Failed at start-up, before the model was read: the server could not listen" in out
    assert "at download" not in out and "Furthest stage reached: start-up, before the model was read" in out
    assert main(["diagnose", str(log), "--json"]) == 1
    # the JSON keeps the stage's code: the first a local model goes through, as the corpus labels it
    said = json.loads(capsys.readouterr().out)
    assert said["failure_stage"] == "load_weights"
    assert said["before_model"] is True  # QA 32 D5: a script can tell it stopped before any stage
    cut = Path(__file__).resolve().parents[1] / "data" / "logs" / "llama-cpp-python-truncated.log"
    assert main(["diagnose", str(cut), "--json"]) == 1  # a file cut short: at load_weights
    assert json.loads(capsys.readouterr().out)["before_model"] is False


def test_a_model_file_named_relative_to_the_working_folder_is_said_before_the_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """QA 34 L4: `llama-server -m models/nope.gguf` (no such file) read "Failed at download" with
    `before_model` false: the path had no leading ./ or /. The lines are that real run's."""
    log = tmp_path / "wrongpath.log"
    log.write_text(
        "0.00.001.434 I srv  llama_server: initializing ...\n"
        "0.00.005.783 I srv    load_model: loading model 'models/nope.gguf'\n"
        "0.00.006.045 E gguf_init_from_file: failed to open GGUF file 'models/nope.gguf' (No such file or directory)\n"
        "0.00.006.222 E llama_model_load: error loading model: llama_model_loader: failed to load model from "
        "models/nope.gguf\n"
        "0.00.006.369 E srv    load_model: failed to load model, 'models/nope.gguf'\n"
        "0.00.007.626 E srv  llama_server: exiting due to model loading error\n"
    )
    assert main(["diagnose", str(log), "--json"]) == 1
    said = json.loads(capsys.readouterr().out)
    assert said["cause"] == "not_found_local" and said["before_model"] is True
    assert main(["diagnose", str(log)]) == 1
    assert "Failed at start-up, before the model was read" in capsys.readouterr().out


def test_a_size_the_engine_rounded_to_zero_is_not_said_as_zero_bytes() -> None:
    """QA 10: vLLM's "(0.0 GiB KV cache is needed" and "Explicitly set (0.0/23.54) GiB" read "0 B"."""
    from vramtui.cli.diagnose import _figure_value

    assert _figure_value("kv_cache_needed", 0, frozenset()) == "0 as printed (rounded)"
    assert _figure_value("kv_cache_needed", 1 << 20, frozenset()) == "1.00 MiB"


def test_a_file_of_nul_bytes_is_nothing_to_diagnose(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """QA 19 F9: a sparse file (`truncate -s`) or one of /dev/zero's bytes read "No failure", exit 3, and its
    JSON said neither failed nor incomplete. It holds no text: one line, exit 2. A log whose NULs are
    followed by lines (logrotate's copytruncate) is still read, and --json says why a log that is no
    server's exits 3."""
    zeros = tmp_path / "zeros.log"
    zeros.write_bytes(b"\x00" * 300_000)
    assert main(["diagnose", str(zeros)]) == 2
    assert capsys.readouterr().err == f"vramtui: {zeros} holds only NUL bytes, no text: nothing to diagnose\n"
    rotated = tmp_path / "rotated.log"
    rotated.write_bytes(b"\x00" * 300_000 + UNKNOWN_ARCH)
    assert main(["diagnose", str(rotated)]) == 1
    capsys.readouterr()
    chat = tmp_path / "chat.log"
    chat.write_text("hello\nhow are you\n")
    assert main(["diagnose", str(chat), "--json"]) == 3
    data = json.loads(capsys.readouterr().out)
    assert (data["unrecognised"], data["incomplete"], data["failed"]) == (True, False, False)
    # said as what it is, not "No failure in the log" beside exit 3 (QA 32 D14)
    assert data["summary"] == "Not a model server's log."


def test_an_allocation_the_engine_got_past_is_said_so_among_its_figures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """QA 22: llama-server's compute buffer failed on CUDA1 and it retried without pipeline parallelism and
    went on (an excerpt from a comment on llama.cpp#26297); the verdict was right (no error), but the
    figures read "the allocation that failed: 50.54 GiB" as if it had."""
    log = tmp_path / "server.log"
    log.write_text(
        "1.06.520.077 E ggml_backend_cuda_buffer_type_alloc_buffer: allocating 51748.72 MiB on device 1: "
        "cudaMalloc failed: out of memory\n"
        "1.06.520.084 E ggml_gallocr_reserve_n_impl: failed to allocate CUDA1 buffer of size 54262464512\n"
        "1.06.520.086 E graph_reserve: failed to allocate compute buffers\n"
        "1.06.520.107 W sched_reserve: compute buffer allocation failed, retrying without pipeline parallelism\n"
        "1.07.304.130 I srv    load_model: initializing, n_slots = 1, n_ctx_slot = 50176, kv_unified = 'false'\n"
    )
    main(["diagnose", str(log)])
    out = capsys.readouterr().out
    assert "the allocation that failed (then recovered): 50.54 GiB" in out
    assert "the device that refused it (then recovered): 1" in out
    # a failure that stayed one keeps the plain words
    log.write_text("".join(log.read_text().splitlines(keepends=True)[:3]))
    main(["diagnose", str(log)])
    out = capsys.readouterr().out
    assert "the allocation that failed: " in out and "then recovered" not in out


@pytest.mark.engine
def test_a_run_log_of_vramtuis_names_the_wizards_first_move_as_check_does(
    llama_server_bin: Path, gqa_gguf: Path, tmp_path: Path
) -> None:
    """QA 36 F2: for one KV-cache failure diagnose said "--ctx-size 4096 ... fit the 600 MiB budget at about
    that size" (4096 then failed), check "context 32768 -> 1024". A log vramtui launched names its command and
    budget in its header: diagnose reads the profile back and gives check's first move, beside the same
    sized advice. A real llama-server, a real budget."""
    profile = tmp_path / "p.toml"
    profile.write_text(
        f'backend = "llama.cpp"\nmodel = "{gqa_gguf}"\nprogram = "{llama_server_bin}"\n[params]\n'
        'context = 32768\nparallel = 4\nbatch = 2048\nubatch = 1024\n[limits]\nmemory_budget = "390 MiB"\n',
        encoding="utf-8",
    )
    vramtui = _vramtui_in(tmp_path)

    checked = vramtui("check", str(profile), "--json")
    assert checked.returncode == 1, checked.stderr
    check = json.loads(checked.stdout)
    said = vramtui("diagnose", check["log_file"], "--json")
    assert said.returncode == 1, said.stderr
    diagnosis = json.loads(said.stdout)
    move = diagnosis["first_move"]
    assert move is not None and move["param"] == "context" and move["from"] == 32768, move
    assert {key: move[key] for key in ("param", "from", "to")} == {
        key: check["first_move"][key] for key in ("param", "from", "to")
    }
    assert diagnosis["advice"][0].startswith("first move (the wizard's, as `vramtui wizard` makes it): ")
    assert not any("fit the 390 MiB budget at about that size" in line for line in diagnosis["advice"])
    # the same log with its header cut off is only a log: the log's own arithmetic, no move
    bare = tmp_path / "bare.log"
    lines = Path(check["log_file"]).read_text().splitlines(keepends=True)
    bare.write_text("".join(line for line in lines if "vramtui: launch" not in line))
    alone = json.loads(vramtui("diagnose", str(bare), "--json").stdout)
    assert alone["first_move"] is None and not alone["advice"][0].startswith("first move")


@pytest.mark.engine
def test_a_run_vramtui_launched_here_without_a_gpu_is_no_quiet_cpu_failure(
    llama_server_bin: Path, gqa_gguf: Path, tmp_path: Path
) -> None:
    """QA 38 F3: `check` of a working llama-server on this GPU-less machine said nothing of the CPU, and
    `diagnose` of the same run's log said "nothing runs on a GPU". A log vramtui launched here, where NVML
    finds no GPU, is read as the machine had it; the same lines without vramtui's launch line (a log pasted
    from a GPU box) still say it. A real llama-server."""
    from vramtui.core.memory.nvml import first_gpu_total_bytes

    if first_gpu_total_bytes() is not None:
        pytest.skip("a GPU is here: a run on the CPU is news on it")
    profile = tmp_path / "p.toml"
    profile.write_text(
        f'backend = "llama.cpp"\nmodel = "{gqa_gguf}"\nprogram = "{llama_server_bin}"\nport = "auto"\n'
        "[params]\ncontext = 2048\n",
        encoding="utf-8",
    )
    vramtui = _vramtui_in(tmp_path)

    checked = vramtui("check", str(profile), "--json")
    assert checked.returncode == 0, checked.stdout[-2000:] + checked.stderr[-2000:]
    log = json.loads(checked.stdout)["log_file"]
    said = json.loads(vramtui("diagnose", log, "--json").stdout)
    assert not any("nothing runs on a GPU" in w for w in said["warnings"]), said["warnings"]
    pasted = tmp_path / "pasted.log"
    lines = Path(log).read_text().splitlines(keepends=True)
    pasted.write_text("".join(line for line in lines if "vramtui: launch " not in line))
    said = json.loads(vramtui("diagnose", str(pasted), "--json").stdout)
    assert any("nothing runs on a GPU" in w for w in said["warnings"]), said["warnings"]


def _vramtui_in(tmp_path: Path) -> Callable[..., subprocess.CompletedProcess[str]]:
    """`vramtui ARGS` as a user runs it, with its data dir (its run logs) under tmp_path."""
    env = dict(os.environ, XDG_DATA_HOME=str(tmp_path / "data"))

    def vramtui(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "vramtui", *args], capture_output=True, text=True, timeout=300, env=env
        )

    return vramtui
