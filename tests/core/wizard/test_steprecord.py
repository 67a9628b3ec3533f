"""The wizard's record: append-only JSONL, fsynced per line, reopened, exported."""

from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path

import pytest

from vramtui.core.errors import VramtuiError
from vramtui.core.wizard.steprecord import (
    STEP_FIELDS,
    StepRecorder,
    list_sessions,
    new_record_path,
    open_session,
    to_csv,
    to_markdown,
    wizard_dir,
)


def _step(n: int, outcome: str = "progress", **extra: object) -> dict[str, object]:
    return {
        "step": n,
        "param": "context",
        "from": 262144 // (n or 1),
        "to": 32768,
        "why": "KV | buffer did not fit",
        "outcome": outcome,
        "stage": "kv_cache",
        "failure": "host_oom",
        "resident_mib": 71.2,
        "peak_mib": 1188.7,
        "load_time_s": 0.78,
        "ttft_s": 0.05,
        "tokens_per_s": 292.6,
        "log_file": f"/tmp/run{n}.log",
        **extra,
    }


def test_each_line_is_on_disk_when_append_returns(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "rec.jsonl"
    recorder = StepRecorder(path)
    recorder.append("session", profile={"backend": "llama-cpp-python", "model": "m.gguf", "params": {}})
    recorder.append("step", **_step(0, "first_run"))
    # Read through a second descriptor while the writer is still open: nothing is buffered.
    lines = path.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["type"] for line in lines] == ["session", "step"]
    assert json.loads(lines[1])["peak_mib"] == 1188.7
    recorder.close()


def test_reopen_a_finished_session_and_export(tmp_path: Path) -> None:
    path = tmp_path / "rec.jsonl"
    with StepRecorder(path) as recorder:
        recorder.append(
            "session", profile={"backend": "llama-cpp-python", "model": "/m/tiny.gguf", "params": {}}
        )
        recorder.append("step_start", step=0)
        recorder.append("step", **_step(0, "first_run"))
        recorder.append("step_start", step=1, param="context")
        recorder.append("step", **_step(1, "works"))
        recorder.append("end", success=True, reason="it runs", final_params={"context": 32768})
    session = open_session(path)
    assert session.finished and session.success
    assert [s["step"] for s in session.steps] == [0, 1]
    assert session.interrupted == []

    rows = list(csv.DictReader(io.StringIO(to_csv(session))))
    assert list(rows[0]) == list(STEP_FIELDS)
    assert (
        rows[1]["outcome"] == "works" and rows[1]["to"] == "32768" and rows[1]["log_file"] == "/tmp/run1.log"
    )

    markdown = to_markdown(session)
    assert "tiny.gguf" in markdown and "final parameters" in markdown and '"context": 32768' in markdown
    table = [line for line in markdown.splitlines() if line.startswith("| ")]
    assert len(table) == 1 + 2  # header + two steps
    assert "KV \\| buffer" in markdown  # a pipe inside a cell does not break the table


def test_the_exports_carry_the_speed_before_the_step(tmp_path: Path) -> None:
    path = tmp_path / "rec.jsonl"
    with StepRecorder(path) as recorder:
        recorder.append("session", profile={"backend": "llama.cpp", "model": "m.gguf", "params": {}})
        recorder.append("step", **_step(0, "first_run"))
        recorder.append("step", **_step(1, "works", tokens_per_s=181.4, tokens_per_s_before=292.6))
    session = open_session(path)
    rows = list(csv.DictReader(io.StringIO(to_csv(session))))
    # the earlier columns keep their names and order; the new one stands beside tokens_per_s
    columns = list(rows[0])
    assert columns[: columns.index("tokens_per_s") + 1] == [
        "step", "param", "from", "to", "why", "outcome", "stage", "failure",
        "resident_mib", "peak_mib", "load_time_s", "ttft_s", "tokens_per_s",
    ]  # fmt: skip
    assert columns[columns.index("tokens_per_s") + 1] == "tokens_per_s_before"
    assert columns[-1] == "log_file"
    assert rows[0]["tokens_per_s_before"] == ""  # the first run has nothing before it
    assert rows[1]["tokens_per_s"] == "181.4" and rows[1]["tokens_per_s_before"] == "292.6"
    header = next(line for line in to_markdown(session).splitlines() if line.startswith("| step"))
    assert "| tokens_per_s | tokens_per_s_before |" in header
    step_line = next(line for line in to_markdown(session).splitlines() if line.startswith("| 1 |"))
    assert "| 181.4 | 292.6 |" in step_line


def test_the_exports_carry_the_prediction_and_its_verification(tmp_path: Path) -> None:
    """QA 22: the Markdown and CSV exports had no prediction and no verification: only the terminal and
    --json said "predicted ~163 MiB ... the engine printed 162 MiB" and "the log confirms n_ctx"."""
    path = tmp_path / "rec.jsonl"
    said = [
        "the log confirms n_ctx = 16384",
        "predicted ~163 MiB for the buffers; the engine printed 162 MiB",
    ]
    with StepRecorder(path) as recorder:
        recorder.append("session", profile={"backend": "llama.cpp", "model": "m.gguf", "params": {}})
        recorder.append("step", **_step(0, "first_run"))
        recorder.append("step", **_step(1, "works", predicted_mib=186.5, verification=said))
    session = open_session(path)
    rows = list(csv.DictReader(io.StringIO(to_csv(session))))
    assert rows[1]["predicted_mib"] == "186.5" and rows[1]["verification"] == "; ".join(said)
    assert rows[0]["verification"] == "" and list(rows[0])[-1] == "log_file"
    step_line = next(line for line in to_markdown(session).splitlines() if line.startswith("| 1 |"))
    assert "| 186.5 | the log confirms n_ctx = 16384; predicted ~163 MiB" in step_line


def test_a_torn_last_line_and_an_unfinished_step_survive(tmp_path: Path) -> None:
    path = tmp_path / "rec.jsonl"
    with StepRecorder(path) as recorder:
        recorder.append("session", profile={"backend": "llama.cpp", "model": "m.gguf"})
        recorder.append("step", **_step(0, "first_run"))
        recorder.append("step_start", step=1, param="kv_dtype", to="q8_0")
    with path.open("a", encoding="utf-8") as handle:
        handle.write('{"type": "step", "step": 1, "outc')  # the machine died mid-write
    session = open_session(path)
    assert not session.finished
    assert [s["step"] for s in session.steps] == [0]
    assert (
        session.interrupted[0]["param"] == "kv_dtype" and session.interrupted[0]["outcome"] == "interrupted"
    )
    assert "did not finish" in to_markdown(session)
    assert "interrupted" in to_csv(session)


def test_bad_records_are_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(VramtuiError, match="no such wizard record"):
        open_session(tmp_path / "missing.jsonl")
    junk = tmp_path / "junk.jsonl"
    junk.write_bytes(b"\x00\xff not json\n[1, 2]\n")
    with pytest.raises(VramtuiError, match="not a vramtui wizard record"):
        open_session(junk)
    with pytest.raises(VramtuiError, match="cannot write the wizard record"):
        StepRecorder(junk / "inside-a-file.jsonl")


def test_records_live_in_the_user_data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VRAMTUI_DATA_DIR")  # the conftest gives each test its own
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert wizard_dir() == tmp_path / "vramtui" / "wizard"
    first = new_record_path("my model/../x")
    assert first.parent == wizard_dir() and "/" not in first.name and first.suffix == ".jsonl"
    with StepRecorder(first) as recorder:
        recorder.append("session", profile={})
    older = wizard_dir() / "older.jsonl"
    older.write_text('{"type": "session"}\n')
    os.utime(older, (1, 1))
    assert list_sessions() == [first, older]


def test_records_follow_vramtui_data_dir_as_run_logs_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from vramtui.core.launch.launcher import default_log_dir

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("VRAMTUI_DATA_DIR", str(tmp_path / "store"))
    record = new_record_path("model")
    with StepRecorder(record) as recorder:
        recorder.append("session", profile={})
    assert record.parent == tmp_path / "store" / "wizard" == wizard_dir()
    assert default_log_dir().parent == record.parent.parent  # beside the run logs
    assert list_sessions() == [record]
    assert not (tmp_path / "xdg").exists()


def test_a_full_disk_stops_the_record_in_one_line_and_ends_it_quietly() -> None:
    """QA: a wizard whose record hit a full disk ended with an internal error (OSError)."""
    recorder = StepRecorder("/dev/full")  # every write fails with ENOSPC
    with pytest.raises(VramtuiError, match="No space left on device"):
        recorder.append("step", index=1)
    assert recorder.closed
    assert recorder.append("end", success=False)["type"] == "end"  # the abandon's end line: no second error
