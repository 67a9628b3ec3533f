"""`vramtui record` and `vramtui replay` as users run them: real processes, real signals, real files."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from vramtui.cli import main
from vramtui.core.memory.nvsmi_csv import read_nvsmi_csv

DATA = Path(__file__).resolve().parents[1] / "data" / "nvsmi"
MIB = 1024**2

# Idle until told to go (the recorder has its first rows: a loaded machine starts it late), then
# 200 MiB touched for a while, freed, a while more, exit.
ALLOCATOR = r"""
import os, sys, time
while not os.path.exists(sys.argv[1]):
    time.sleep(0.02)
time.sleep(0.6)
block = bytearray(200 * 1024 ** 2)
for i in range(0, len(block), 4096):
    block[i] = 1
time.sleep(0.6)
del block
time.sleep(0.6)
"""


def record(*args: str, **kwargs) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "vramtui", "record", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kwargs,
    )


def data_lines(path: Path) -> list[str]:
    return [line for line in path.read_text().splitlines() if line and not line.startswith("timestamp")]


def test_record_a_process_then_replay_it(tmp_path: Path) -> None:
    go = tmp_path / "go"
    child = subprocess.Popen([sys.executable, "-c", ALLOCATOR, str(go)])
    out = tmp_path / "run.csv"
    proc = record("--out", str(out), "--interval-ms", "50", "--pid", str(child.pid))
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (not out.is_file() or len(data_lines(out)) < 3):
            time.sleep(0.05)
        go.touch()
        child.wait(30)  # the recorder outlives the process: what it holds after exit is recorded too
        time.sleep(0.4)
    finally:
        child.kill()
        proc.send_signal(signal.SIGTERM)
        _stdout, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0, stderr
    assert "Traceback" not in stderr
    from vramtui.core.memory.sampling import NvmlSource

    if not NvmlSource().status().ok:
        assert "recording host RAM only" in stderr and "NVML not available" in stderr
    assert f"process {child.pid}" in stderr and "have exited; still recording" in stderr
    header = out.read_text().splitlines()[0]
    assert "process.tree_rss [MiB]" in header and "host.ram_used [MiB]" in header
    rows = data_lines(out)
    assert len(rows) >= 25  # about 2.2 s at 50 ms, with slack for a loaded CI machine
    assert f"{len(rows)} row(s)" in stderr
    data = read_nvsmi_csv(out)
    assert data.skipped == 0
    rss = [v for v in data.host.tree_rss if v is not None]
    assert max(rss) - min(rss) >= 190 * MIB
    assert data.host.tree_rss[-1] is None  # recorded on after the process exited

    result = subprocess.run(
        [sys.executable, "-m", "vramtui", "replay", str(out), "--json"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 0, result.stderr
    readings = json.loads(result.stdout)
    if not data.gpus:
        assert readings["series"] == "process tree RSS (host)"
        assert 190 <= readings["peak_mib"] - readings["baseline_mib"] <= 260
    assert readings["process_tree_rss"]["peak_mib"] - readings["process_tree_rss"]["baseline_mib"] >= 190


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_every_row_survives_an_interrupt(tmp_path: Path, sig: signal.Signals) -> None:
    out = tmp_path / "interrupted.csv"
    proc = record("--out", str(out), "--interval-ms", "20")
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and (not out.exists() or len(data_lines(out)) < 5):
        time.sleep(0.05)
    assert len(data_lines(out)) >= 5
    proc.send_signal(sig)
    _stdout, stderr = proc.communicate(timeout=15)
    assert proc.returncode == 0, stderr
    text = out.read_text()
    assert text.endswith("\n")  # no half-written row
    lines = text.splitlines()
    width = len(lines[0].split(","))
    assert all(len(line.split(",")) == width for line in lines)
    rows = len(lines) - 1
    assert f"{rows} row(s)" in stderr
    assert read_nvsmi_csv(out).skipped == 0


def test_record_to_stdout_and_bad_arguments() -> None:
    proc = record("--interval-ms", "100", "--duration", "0.35")
    stdout, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0, stderr
    assert stdout.startswith("timestamp, ")
    assert 3 <= len(stdout.splitlines()) - 1 <= 6
    assert "to standard output" in stderr
    for args, words in (
        (["--interval-ms", "0"], "--interval-ms"),
        (["--duration", "-1"], "--duration"),
        (["--pid", str(2**22 + 4321)], "no process"),
        (["--pid", "-5"], "positive whole number"),  # QA: psutil's ValueError was an internal error
        (["--out", "/dev/full", "--duration", "2"], "which are kept"),  # a full disk (QA: exit 3)
        (["--out", "/nonexistent-dir/x.csv", "--duration", "0.1"], "cannot write"),
    ):
        result = subprocess.run(
            [sys.executable, "-m", "vramtui", "record", *args], capture_output=True, text=True, timeout=30
        )
        assert result.returncode == 2, result.stderr
        last = result.stderr.strip().splitlines()[-1]  # after the source's status line, where one is said
        assert last.startswith("vramtui: ") and words in last
        assert "Traceback" not in result.stderr


def test_replay_json_keys_and_values(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", str(DATA / "units.csv"), "--json"]) == 0
    readings = json.loads(capsys.readouterr().out)
    for key in ("baseline_mib", "plateau_mib", "peak_mib", "after_mib", "falls_back", "rising"):
        assert key in readings
    assert (
        readings["baseline_mib"] == 1234 and readings["plateau_mib"] == 9800 and readings["peak_mib"] == 11800
    )
    assert readings["request_peaks_mib"] == [11800] and readings["falls_back"] is True
    assert readings["rising"] is False and readings["leftover_mib"] == 0
    assert readings["total_mib"] == 24564 and readings["skipped_rows"] == 0


def test_replay_text_for_two_gpus_and_malformed(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", str(DATA / "multi_index.csv")]) == 0
    text = capsys.readouterr().out
    assert "GPU 0 NVIDIA GeForce RTX 3090 memory.used" in text and "GPU 1 NVIDIA GeForce RTX 3060" in text
    assert "9.57 GiB" in text  # the 9800 MiB plateau
    assert main(["replay", str(DATA / "malformed.csv")]) == 0
    assert "7 malformed row(s) skipped, first: line 4" in capsys.readouterr().out


def test_replay_of_two_gpus_without_names(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """QA 36: `--query-gpu=timestamp,index,memory.used,memory.total` has no name column: "GPU 1 : peak"."""
    rows = ["timestamp, index, memory.used [MiB], memory.total [MiB]"]
    for second in range(5):
        stamp = f"2026/12/07 10:00:0{second}.000"
        rows += [f"{stamp}, 0, 300 MiB, 24564 MiB", f"{stamp}, 1, 500 MiB, 24564 MiB"]
    csv = tmp_path / "gpu.csv"
    csv.write_text("\n".join(rows) + "\n")
    assert main(["replay", str(csv)]) == 0
    text = capsys.readouterr().out
    assert "  GPU 1: peak 500 MiB" in text and " :" not in text, text


def test_replay_bad_input_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", str(tmp_path / "missing.csv")]) == 2
    assert capsys.readouterr().err.startswith("vramtui: no such file")
    junk = tmp_path / "junk.csv"
    junk.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00 binary, junk\nmore junk\n")
    assert main(["replay", str(junk)]) == 2
    err = capsys.readouterr().err  # QA: binary data read as 174 malformed rows
    assert err == f"vramtui: {junk} looks like binary data, not a CSV recording\n"
    # QA 14: the wizard's record (the file it points to) read as a CSV of "18 fields and no header line"
    from vramtui.core.wizard.steprecord import StepRecorder

    with StepRecorder(tmp_path / "wizard.jsonl") as record:
        record.append("session", profile={"backend": "vllm", "model": "tiny"}, params={}, auto=True)
    assert main(["replay", str(tmp_path / "wizard.jsonl")]) == 2
    assert "is a wizard record, not a memory recording: `vramtui wizard" in capsys.readouterr().err
    text = tmp_path / "text.csv"
    text.write_text("not, a, recording\nat, all, here\n")
    assert main(["replay", str(text)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("vramtui: no readable rows") and err.count("\n") == 1
    # a device or a pipe is read, not "no such file" (QA 23 D9: /dev/null)
    assert main(["replay", "/dev/null"]) == 2
    assert (
        capsys.readouterr().err == "vramtui: no readable rows in /dev/null (it is empty, or a header alone)\n"
    )


def test_replay_reads_standard_input() -> None:
    text = (DATA / "nounits.csv").read_text()
    result = subprocess.run(
        [sys.executable, "-m", "vramtui", "replay", "-", "--json"],
        input=text,
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "VRAMTUI_DEBUG": ""},
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["peak_mib"] == 11800


def test_replay_a_run_that_exits_at_its_last_peak(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Five requests on a rising floor, the process exiting right at the last peak (the QA curve)."""
    levels = [300] * 10 + [16500] * 30
    for k in range(5):
        levels += [16500 + 300 * k + 4500] * 3 + ([16500 + 300 * (k + 1)] * 10 if k < 4 else [])
    levels += [300] * 10
    rows = ["timestamp, memory.used [MiB], memory.total [MiB], utilization.gpu [%]"]
    rows += [
        f"2025/01/01 10:{i // 60:02d}:{i % 60:02d}.000, {v} MiB, 24564 MiB, 0 %" for i, v in enumerate(levels)
    ]
    path = tmp_path / "exit_at_peak.csv"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    assert main(["replay", str(path)]) == 0
    text = capsys.readouterr().out
    assert "falls back after          no: settles 1.17 GiB above the plateau (after: 17.29 GiB)" in text
    assert "floor rising              YES: the floor climbs" in text
    assert (
        "note: the last request ran until the exit: falls back judged from the 4 request(s) before it" in text
    )


def stairs_csv(path: Path) -> Path:
    """`nvidia-smi --query-gpu=timestamp,memory.used,memory.total,utilization.gpu --format=csv -l 1`
    over a run whose floor climbs: idle, the weights stream in to ~15.0 GiB, then four requests, each
    leaving the floor ~800 MiB higher; the server still runs when the recording stops."""
    import random

    rng = random.Random(13)
    levels = [420.0] * 15 + [420 + (15360 - 420) * k / 8 for k in range(1, 8)] + [15360.0] * 30
    floor = 15360.0
    for k in range(4):
        levels += [floor + 1100, floor + 1800, floor + 1600, floor + 900]  # prefill, decode, settling
        floor += 800
        levels += [floor] * (25 if k < 3 else 90)  # it idles longest on the last floor
    rows = ["timestamp, memory.used [MiB], memory.total [MiB], utilization.gpu [%]"]
    for i, level in enumerate(levels):
        used = round(level + rng.uniform(-6, 6))
        rows.append(
            f"2025/03/02 14:{i // 60:02d}:{i % 60:02d}.117, {used} MiB, 24564 MiB, {rng.randint(0, 9)} %"
        )
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def test_replay_a_floor_that_climbs_after_each_request(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 13: the plateau is the level right after loading (not the last floor), the floor rises,
    and memory does not fall back."""
    path = stairs_csv(tmp_path / "stairs.csv")
    assert main(["replay", str(path), "--json"]) == 0
    readings = json.loads(capsys.readouterr().out)
    assert readings["plateau_mib"] == pytest.approx(15360, abs=10)
    assert readings["rising"] is True and readings["falls_back"] is False
    assert [round(f / 100) for f in readings["floors_mib"]] == [154, 162, 170, 178, 186]
    assert len(readings["request_peaks_mib"]) == 4
    assert readings["leftover_mib"] is None  # never exited
    assert main(["replay", str(path)]) == 0
    text = capsys.readouterr().out
    assert "plateau (resident)        15.00 GiB" in text
    assert "falls back after          no: settles 3.1" in text and "settles higher after each request" in text
    assert "floor rising              YES" in text


def _recorded_run() -> str:
    """What `vramtui record --pid` writes for a CPU model server (no GPU): idle host, the process
    appears and loads to ~354 MiB, answers three requests (~+70 MiB each, back to its floor), exits."""
    import io

    from vramtui.core.memory.nvsmi_csv import NvsmiWriter
    from vramtui.core.memory.sampling import HostReading, Sample

    levels: list[float | None] = [None] * 20 + [35.0] * 3 + [35 + 319 * k / 6 for k in range(1, 6)]
    levels += [354.0] * 40
    for _ in range(3):
        levels += [380.0, 424.0, 410.0] + [354.0] * 25
    levels += [None] * 15
    out = io.StringIO()
    writer = NvsmiWriter(out, with_gpu=False, with_process=True)
    for i, level in enumerate(levels):
        rss = None if level is None else int(level * MIB)
        host = HostReading(
            int((6000 + (level or 0)) * MIB), 64 * 1024 * MIB, 0, 0, rss, (4242,) if rss else (), bool(rss)
        )
        writer.write(Sample(1_764_475_200 + i * 0.5, (), host))
    return out.getvalue()


def test_pane_replay_and_wizard_read_one_run_alike() -> None:
    """Issue 13: the pane, the wizard table and `replay` give the same figures for the same run."""
    import io

    from vramtui.cli.replay import analyse
    from vramtui.core.memory.series import recorded_process
    from vramtui.core.wizard.observe import step_memory
    from vramtui.tui.panes.memory_state import MemoryState

    data = read_nvsmi_csv(io.StringIO(_recorded_run()))
    events, _running = recorded_process(data.host)
    replayed = analyse(data)
    state = MemoryState()
    state.ingest_recorded(data)  # the process's launch and exit come with it (QA 7)
    key = state.primary_key()
    assert key == "process" and replayed["series"] == "process tree RSS (host)"
    pane = state.readings(key)

    from types import SimpleNamespace

    # What run_check hands the wizard: the run's own samples and events.
    check = SimpleNamespace(samples=list(data.samples), events=events, peak_mib=None, resident_mib=None)
    wizard_peak, wizard_plateau = step_memory(check)
    assert pane.plateau_mib == replayed["plateau_mib"] == wizard_plateau == pytest.approx(354, abs=1)
    assert pane.peak_mib == replayed["peak_mib"] == wizard_peak == pytest.approx(424, abs=1)
    assert [round(p) for p in pane.request_peaks_mib] == [round(p) for p in replayed["request_peaks_mib"]]
    assert pane.falls_back is replayed["falls_back"] is True


def test_memory_is_not_called_left_over_while_the_model_runs() -> None:
    """Issue 13: the host series dropped while the model still ran; that is no leftover."""
    from vramtui.core.memory.readings import Event
    from vramtui.core.memory.sampling import HostReading, Sample
    from vramtui.tui.panes.memory_state import MemoryState

    state = MemoryState()
    levels = [6000] * 10 + [7200] * 30 + [6539] * 20  # page cache let go after loading
    for i, level in enumerate(levels):
        host = HostReading(level * MIB, 64 * 1024 * MIB, 0, 0, 354 * MIB, (4242,), True)
        state.ingest(Sample(100.0 + i, (), host))
    state.add_event(Event(109.5, "launch"))
    running = state.readings("host")
    assert running.leftover_mib is None and not running.leftover
    # The same curve once the process is gone (and with the exit event): now it is said.
    state.ingest(Sample(161.0, (), HostReading(6539 * MIB, 64 * 1024 * MIB, 0, 0, None, (), False)))
    state.add_event(Event(140.5, "exit"))
    gone = state.readings("host")
    assert gone.leftover and gone.leftover_mib == pytest.approx(539, abs=1)


def up_from_start_csv(path: Path, then_exit: bool = False) -> Path:
    """`nvidia-smi --query-gpu=timestamp,index,name,memory.used,memory.total --format=csv -l 1` started
    on a box whose server is already up (the README's `record --source` use): a floor of 15405 MiB,
    three requests of +500 MiB that each fall back to it, and (`then_exit`) the server's exit."""
    import random

    rng = random.Random(22)
    levels = [15405] * 20
    for _ in range(3):
        levels += [15905] * 4 + [15405] * 15
    levels += [380] * 10 if then_exit else []
    rows = ["timestamp, index, name, memory.used [MiB], memory.total [MiB]"]
    for i, level in enumerate(levels):
        used = round(level + rng.uniform(-2, 2))
        rows.append(
            f"2025/04/07 09:{i // 60:02d}:{i % 60:02d}.250, 0, NVIDIA GeForce RTX 4090, {used} MiB, 24564 MiB"
        )
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def test_replay_a_server_up_from_the_first_row(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 22 #3: the starting level is the plateau, not an idle baseline; each +500 MiB is a request;
    memory falling back to the floor is no exit."""
    path = up_from_start_csv(tmp_path / "up.csv")
    assert main(["replay", str(path)]) == 0
    text = capsys.readouterr().out
    assert "baseline (before launch)  n/a" in text and "plateau (resident)        15.04 GiB" in text
    assert "request peaks             15.53 GiB, 15.53 GiB, 15.53 GiB" in text
    assert "falls back after          yes (after: 15.04 GiB)" in text and "held after exit" not in text
    assert "note: the recording starts with the model loaded" in text
    assert main(["replay", str(up_from_start_csv(tmp_path / "exit.csv", then_exit=True)), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert round(data["plateau_mib"] / 1024, 2) == 15.04 and len(data["request_peaks_mib"]) == 3
    assert data["falls_back"] is True and data["baseline_mib"] is None
    assert data["leftover_mib"] is None  # an exit seen, but no idle level before the launch to compare with


def test_a_gpu_that_stops_reporting_and_time_that_runs_back_are_said(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """QA: a GPU that fell off the bus mid-recording ([GPU requires reset] rows, then nothing) and rows whose
    time runs backwards were read without a word."""
    header = "timestamp, index, name, memory.used [MiB], memory.total [MiB]"
    rows = [header]
    for tick in range(60):  # 30 s at 0.5 s; GPU 1 answers for 10 s, then errors, then nothing
        stamp = f"2026/12/05 01:00:{tick // 2:02d}.{5 * (tick % 2)}00"
        rows.append(f"{stamp}, 0, NVIDIA GeForce RTX 4090, {500 + tick} MiB, 24564 MiB")
        if tick < 20:
            rows.append(f"{stamp}, 1, NVIDIA GeForce RTX 4090, 250 MiB, 24564 MiB")
        elif tick < 24:
            rows.append(f"{stamp}, 1, NVIDIA GeForce RTX 4090, [GPU requires reset], [Unknown Error]")
    vanish = tmp_path / "vanish.csv"
    vanish.write_text("\n".join(rows) + "\n")
    assert main(["replay", str(vanish), "--json"]) == 0
    notes = json.loads(capsys.readouterr().out)["notes"]
    assert any(note.startswith("GPU 1 stopped reporting at 10 s of 30 s") for note in notes), notes
    assert not any(note.startswith("GPU 0 stopped") for note in notes)
    backwards = tmp_path / "backwards.csv"
    backwards.write_text("\n".join([header, *reversed([r for r in rows[1:] if ", 0, " in r])]) + "\n")
    assert main(["replay", str(backwards), "--json"]) == 0
    assert any("time runs backwards" in n for n in json.loads(capsys.readouterr().out)["notes"])


def test_a_recorded_process_that_ended_before_the_recording_is_said(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """QA 6: `record --pid` went on 25 s past the server's exit (its RSS N/A from there); the replay said
    nothing of the end. The rows are `vramtui record`'s own columns."""
    rows = [
        "timestamp, host.ram_used [MiB], host.ram_total [MiB], host.swap_used [MiB], process.tree_rss [MiB], "
        "process.tree_gpu [MiB], process.pids"
    ]
    for tick in range(70):
        rss = "[N/A]" if tick >= 45 else f"{3 if tick < 5 else 158} MiB"
        rows.append(
            f"2026/12/05 05:24:{tick // 2 + 10:02d}.{5 * (tick % 2)}00, 700 MiB, 24105 MiB, 0 MiB, {rss}, [N/A], 1"
        )
    path = tmp_path / "ended.csv"
    path.write_text("\n".join(rows) + "\n")
    assert main(["replay", str(path)]) == 0
    text = capsys.readouterr().out
    assert "note: the recorded process ended at 22 s of 34 s (its RSS is N/A after that)" in text, text
    rows[-1] = rows[-1].replace("[N/A], [N/A], 1", "158 MiB, [N/A], 1")  # back at the end: no ended process
    path.write_text("\n".join(rows) + "\n")
    assert main(["replay", str(path)]) == 0
    assert "recorded process ended" not in capsys.readouterr().out


def test_what_an_exited_process_left_is_read_from_the_host(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """QA 33 V9: `record --pid` of a vLLM serve stopped mid-recording replayed with no "held after exit": its
    own RSS is N/A once it is gone, but the host's RAM column says what the exit gave back. The shape is
    the QA's file (host 561 MiB before, 2050 while it served, back near 590 after)."""
    header = (
        "timestamp, host.ram_used [MiB], host.ram_total [MiB], host.swap_used [MiB], process.tree_rss [MiB], "
        "process.tree_gpu [MiB], process.pids"
    )

    def recording(after_mib: int) -> Path:
        rows = [header]
        for tick in range(120):
            ram, rss = (561, 137) if tick < 4 else (2050, 1921) if tick < 90 else (after_mib, None)
            shown = "[N/A]" if rss is None else f"{rss} MiB"
            stamp = f"2026/12/07 08:{38 + (tick // 2 + 10) // 60:02d}:{(tick // 2 + 10) % 60:02d}.{5 * (tick % 2)}00"
            rows.append(f"{stamp}, {ram} MiB, 24105 MiB, 0 MiB, {shown}, [N/A], {0 if rss is None else 4}")
        path = tmp_path / f"after{after_mib}.csv"
        path.write_text("\n".join(rows) + "\n")
        return path

    assert main(["replay", str(recording(590))]) == 0
    text = capsys.readouterr().out
    # read from the host's RAM, and said as such: other processes count too (QA 37 F10)
    assert "host RAM after exit       no (" in text and "any process counts" in text, text
    assert "held after exit" not in text, text
    assert "after the process exited, host RAM used was 590 MiB (561 MiB before it)" in text, text
    assert main(["replay", str(recording(2100)), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["leftover"] is True and data["leftover_mib"] > 1400, data
    assert data["leftover_read_from"] == "host RAM", data
    assert any("host RAM still in use above the baseline" in note for note in data["notes"]), data["notes"]


def test_a_damaged_header_names_the_column_it_left_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """QA 17 F17: 'process.treeXrss' dropped the process series without a word ('problems': [])."""
    rows = "".join(
        f"2026/12/05 05:24:{10 + i:02d}.000, 622 MiB, 24105 MiB, 0 MiB, 64 MiB, [N/A], 2\n" for i in range(20)
    )
    header = (
        "timestamp, host.ram_used [MiB], host.ram_total [MiB], host.swap_used [MiB], process.treeXrss [MiB], "
        "process.tree_gpu [MiB], process.pids\n"
    )
    path = tmp_path / "bad.csv"
    path.write_text(header + rows)
    assert main(["replay", str(path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["problems"] == ["column 'process.treeXrss [MiB]' is not one vramtui reads: left out"]
    assert main(["replay", str(path)]) == 0
    assert "note: column 'process.treeXrss [MiB]' is not one vramtui reads" in capsys.readouterr().out
    path.write_text(header.replace("treeXrss", "tree_rss") + rows)  # vramtui's own header: nothing said
    assert main(["replay", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["problems"] == []


def _shared_gpus_csv(path: Path) -> Path:
    """Two cards in nvidia-smi's shape with vramtui record's process column: another user's 6 GiB on GPU 1
    from the start, and the model's process growing to 14 GiB on GPU 0."""
    rows = ["timestamp, index, name, memory.used [MiB], memory.total [MiB], process.tree_gpu [MiB]"]
    for second in range(40):
        model = 0 if second < 5 else min(14000, (second - 4) * 2800)
        stamp = f"2026/12/06 09:00:{second:02d}.000"
        rows.append(f"{stamp}, 0, RTX 4090, {1000 + model} MiB, 24564 MiB, {model} MiB")
        rows.append(f"{stamp}, 1, RTX 4090, 6000 MiB, 24564 MiB, {model} MiB")
    path.write_text("\n".join(rows) + "\n")
    return path


def test_replay_shows_the_models_process_apart_from_the_others_on_the_cards(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """QA 19 F10: a recording with the process's GPU column read as the cards' totals only: nothing said
    what the model held apart from the other processes. Its own readings, and the others' most, now."""
    csv = _shared_gpus_csv(tmp_path / "shared.csv")
    assert main(["replay", str(csv), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["process_tree_gpu"]["peak_mib"] == pytest.approx(14000)
    assert data["others_gpu_peak_mib"] == pytest.approx(7000)  # GPU 0's 1000 MiB and GPU 1's 6000 MiB
    assert main(["replay", str(csv)]) == 0
    assert "other processes held up to 6.84 GiB beside it" in capsys.readouterr().out


def test_a_per_process_query_is_said_to_be_one_not_malformed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """QA 19 F10: `nvidia-smi --query-compute-apps` rows read "the header names no memory column", though
    used_gpu_memory is one: it is the per-process query, and replay says which query it reads."""
    apps = tmp_path / "apps.csv"
    apps.write_text(
        "timestamp, gpu_uuid, pid, process_name, used_gpu_memory [MiB]\n"
        "2026/12/06 09:00:00.000, GPU-1111, 1500, /usr/lib/xorg/Xorg, 800 MiB\n"
    )
    assert main(["replay", str(apps)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"vramtui: {apps}: this is nvidia-smi's per-process query") and err.count("\n") == 1
    assert "--query-gpu=timestamp,index,memory.used,memory.total" in err
    # without a timestamp column, as `--query-compute-apps=pid,process_name,used_gpu_memory` writes it
    # (QA 35 F15: "no header line", or "bad timestamp 'gpu_uuid'")
    for header in (
        "pid, process_name, used_gpu_memory [MiB]",
        "gpu_uuid, pid, process_name, used_gpu_memory [MiB]",
    ):
        fields = header.count(",")
        row = ", ".join(["GPU-1111", "1234", "python", "5000 MiB"][-fields - 1 :])
        apps.write_text(f"{header}\n{row}\n")
        assert main(["replay", str(apps)]) == 2
        assert capsys.readouterr().err.startswith(f"vramtui: {apps}: this is nvidia-smi's per-process query")


def test_replay_of_a_recording_too_long_to_hold_is_summarised_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """QA: `vramtui replay` of a 1 GB `record --pid` CSV (14.3 M rows) took 5.3 GB of memory. Past the
    reader's threshold the file is summarised as it is read: its one spike sample, its rows and samples
    are the file's, and the notes say it was summarised. The process ends before the recording does (that
    note's scan was quadratic: hours on a file this long)."""
    from vramtui.core.memory.nvsmi_fold import KEEP_POINTS

    rows = KEEP_POINTS + 20_000
    lines = [
        "timestamp, host.ram_used [MiB], host.ram_total [MiB], host.swap_used [MiB], process.tree_rss [MiB], "
        "process.tree_gpu [MiB], process.pids\n"
    ]
    for i in range(rows):
        seconds = i // 10
        stamp = f"2026/12/0{1 + seconds // 86400} {seconds // 3600 % 24:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
        alive = 300 <= i < rows - 300
        # loaded over 10 s, a request every 90 s, the spike in the middle
        rss = 13 + 20 * (i - 300) if i < 400 else 2000 + (600 if i % 900 < 20 else 0) + i % 5
        rss = 9000 if i == rows // 2 else rss
        process = f"{rss} MiB, [N/A], 3" if alive else "[N/A], [N/A], 0"
        lines.append(
            f"{stamp}.{(i % 10) * 100:03d}, {800 + (rss if alive else 0)} MiB, 24105 MiB, 0 MiB, {process}\n"
        )
    path = tmp_path / "week.csv"
    path.write_text("".join(lines))
    assert main(["replay", str(path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["series"] == "process tree RSS (host)" and data["peak_mib"] == 9000
    assert data["rows"] == rows and data["samples"] == rows - 600  # every figure read, not those kept
    summary = data["summarised"]
    assert summary["rows_read"] == summary["timestamps_read"] == rows
    assert summary["timestamps_kept"] <= KEEP_POINTS
    assert data["plateau_mib"] == pytest.approx(2002, abs=3) and len(data["request_peaks_mib"]) >= 200
    assert main(["replay", str(path)]) == 0
    text = capsys.readouterr().out
    assert f"{rows - 600} samples over" in text and "peak                      8.79 GiB" in text
    assert f"note: a long recording, summarised as it was read to stay in memory: {rows:,} rows read" in text
    assert "note: the recorded process ended at" in text


def test_a_stop_asked_by_a_signal_ends_the_pause_without_a_lock() -> None:
    """A CI run hung 15 s after SIGINT: the handler set a threading.Event whose lock the interrupted wait
    held. The stop is a plain flag now; a signal mid-pause ends it within a slice."""
    from vramtui.cli.record import _Stop

    stop = _Stop()

    def on_alarm(signum: int, frame: object) -> None:
        stop.asked = True

    previous = signal.signal(signal.SIGALRM, on_alarm)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.1)
        started = time.monotonic()
        stop.pause(30.0)
        assert stop.asked and time.monotonic() - started < 5.0
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_record_keeps_a_recording_that_is_there_unless_forced(tmp_path: Path) -> None:
    """QA 39 F6: a repeated `record --out rec.csv` replaced a 101-row recording with 6 rows, exit 0."""
    kept = tmp_path / "rec.csv"
    kept.write_bytes((DATA / "units.csv").read_bytes())
    before = kept.read_bytes()
    result = subprocess.run(
        [sys.executable, "-m", "vramtui", "record", "--out", str(kept), "--duration", "0.3"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr == (
        f"vramtui: --out {kept} is there already: record to another file, or add --force to replace it\n"
    )
    assert kept.read_bytes() == before  # not emptied, not appended to
    empty = tmp_path / "mktemp.csv"  # nothing recorded in it: written as before
    empty.touch()
    for out, extra in ((empty, []), (kept, ["--force"])):
        proc = record("--out", str(out), "--duration", "0.3", "--interval-ms", "100", *extra)
        _stdout, stderr = proc.communicate(timeout=30)
        assert proc.returncode == 0, stderr
        assert out.read_text().startswith("timestamp, ") and 2 <= len(data_lines(out)) <= 6


def _own_recording(path: Path) -> Path:
    """`vramtui record --pid`'s columns: a process that loads 300 MiB, serves, and exits."""
    rows = [
        "timestamp, host.ram_used [MiB], host.ram_total [MiB], host.swap_used [MiB], "
        "process.tree_rss [MiB], process.tree_gpu [MiB], process.pids"
    ]
    levels = [None, None, 50, 350, 350, 350, 500, 350, 350, None, None]
    for second, rss in enumerate(levels):
        used = 1000 + (rss or 0)
        figure = "[N/A]" if rss is None else f"{rss} MiB"
        rows.append(
            f"2026/12/08 00:00:{second:02d}.000, {used} MiB, 24105 MiB, 0 MiB, {figure}, [N/A], {int(rss is not None)}"
        )
    path.write_text("\n".join(rows) + "\n")
    return path


@pytest.mark.parametrize("codec", ["utf-16", "utf-16-be", "utf-16-le"])
def test_replay_reads_a_utf16_csv_as_its_text(
    codec: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """QA 39 F7: Windows PowerShell's `nvidia-smi ... > file.csv` writes UTF-16 with a byte-order mark; replay
    read it as "bad timestamp '\\x00t\\x00i...'", exit 2. Read through diagnose's decoder (core/logs/encoded)."""
    import codecs

    mark = {"utf-16": b"", "utf-16-be": codecs.BOM_UTF16_BE, "utf-16-le": codecs.BOM_UTF16_LE}[codec]
    for plain in (DATA / "units.csv", DATA / "multi_index.csv", _own_recording(tmp_path / "own.csv")):
        wide = tmp_path / f"wide-{plain.name}"
        wide.write_bytes(
            mark + plain.read_text().replace("\n", "\r\n").encode(codec)
        )  # `utf-16`: its own BOM
        assert main(["replay", str(plain), "--json"]) == 0
        expected = json.loads(capsys.readouterr().out)
        assert main(["replay", str(wide), "--json"]) == 0, capsys.readouterr().err
        readings = json.loads(capsys.readouterr().out)
        assert readings["skipped_rows"] == 0 and readings["rows"] == expected["rows"] > 0
        assert {**readings, "file": None} == {**expected, "file": None}
