"""Calibration from earlier runs: real llama-server runs on this CPU fill the run store, and a later
estimate that reads it lands closer to the footprint a new run measures than the uncalibrated one."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from vramtui.cli import main
from vramtui.core.estimate.calibrate import derive, load_records, runs_dir
from vramtui.core.launch.launcher import run_check
from vramtui.core.launch.profile import Profile
from vramtui.core.units import MIB


@pytest.fixture
def on_path(llama_server_bin: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PATH", f"{llama_server_bin.parent}{os.pathsep}{os.environ['PATH']}")
    return llama_server_bin


def _run(model: Path, context: int):
    result = run_check(Profile(backend="llama.cpp", model=str(model), params={"context": context}, port=0))
    assert result.ready, result.diagnosis.first_error_text
    return result


def _estimate(capsys: pytest.CaptureFixture[str], model: Path, *flags: str) -> dict:
    main(["estimate", str(model), "--cpu", "--ctx", "4096", "--json", *flags])
    return json.loads(capsys.readouterr().out)


@pytest.mark.engine
def test_earlier_runs_bring_the_estimate_closer(
    on_path: Path, tiny_gguf: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = _estimate(capsys, tiny_gguf)
    assert before["calibration"] is None  # no run yet: the estimate as computed
    for _ in range(2):  # the runs this machine made before, at the settings estimated next
        _run(tiny_gguf, 4096)
    records, notes = load_records()
    assert len(records) == 2 and not notes
    assert all(r["device"]["name"] == "cpu" and r["printed"]["bill"]["host"] for r in records)
    # the smallest request's answer (QA 7): a random-weight model answers, in garbled words
    assert {r["request"] for r in records} == {"garbled"}

    calibrated = _estimate(capsys, tiny_gguf)
    plain = _estimate(capsys, tiny_gguf, "--no-calibrate")
    assert plain == {**before, "notes": plain["notes"]}  # --no-calibrate is the estimate without runs
    calibration = calibrated["calibration"]
    assert calibration["runs"] == 2 and calibration["device"] == "cpu"
    assert calibration["engine"]["backend"] == "llama.cpp" and calibration["engine"]["build"]
    assert calibration["terms"]["runtime_bytes"] is not None

    measured = _run(tiny_gguf, 4096).peak_mib * MIB  # what a run at those settings holds
    off_plain = abs(plain["total_bytes"] - measured)
    off_calibrated = abs(calibrated["total_bytes"] - measured)
    with capsys.disabled():  # the figures, for the record
        print(
            f"\nmeasured {measured / MIB:.2f} MiB: estimate {plain['total_bytes'] / MIB:.2f}, "
            f"calibrated {calibrated['total_bytes'] / MIB:.2f}"
        )
    assert off_calibrated < off_plain

    main(["estimate", str(tiny_gguf), "--cpu", "--ctx", "4096"])
    assert "calibration calibrated from 3 runs on cpu" in capsys.readouterr().out


def test_a_corrupt_store_is_ignored_with_a_note(capsys: pytest.CaptureFixture[str], tiny_gguf: Path) -> None:
    store = runs_dir()
    store.mkdir(parents=True)
    (store / "a.run.json").write_text("{not json")
    (store / "b.run.json").write_text(json.dumps({"version": 1, "device": "cpu"}))
    (store / "c.run.json").write_bytes(b"\xff\xfe\x00")
    records, notes = load_records()
    assert records == [] and len(notes) == 3
    code = main(["estimate", str(tiny_gguf), "--cpu", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0 and data["calibration"] is None
    assert sum("ignored" in note for note in data["notes"]) == 3


def test_other_devices_and_builds_are_not_mixed() -> None:
    def record(device: str, build: str, peak: int) -> dict:
        return {
            "version": 1, "ready": True, "place": "host", "time": peak,
            "device": {"name": device}, "engine": {"backend": "llama.cpp", "build": build},
            "printed": {"bill": {"host": {"weights_bytes": 100}}}, "peak": {"bytes": peak},
        }  # fmt: skip

    runs = [record("cpu", "old", 150), record("other", "new", 900), record("cpu", "new", 130)]
    found = derive(runs, "cpu", "llama.cpp")
    assert found is not None and (found.runs, found.build, found.runtime_bytes) == (1, "new", 30)
    assert derive(runs, "cpu", "ollama") is None


def test_a_peak_under_the_printed_buffers_measures_no_runtime() -> None:
    """A run whose sampled peak is below the buffers it printed (its mapped model not yet resident) cannot
    tell the runtime: it is left out, not learned as "runtime 0 B" over the backend's own figure."""

    def record(peak: int, time: int) -> dict:
        return {
            "version": 1, "ready": True, "place": "host", "time": time,
            "device": {"name": "cpu"}, "engine": {"backend": "llama.cpp", "build": "b"},
            "printed": {"bill": {"host": {"weights_bytes": 1000}}}, "peak": {"bytes": peak},
        }  # fmt: skip

    under = [record(400, 1), record(600, 2), record(1200, 3)]
    found = derive(under, "cpu", "llama.cpp")
    assert found is not None and found.runtime_bytes == 200  # the one run that saw its buffers whole
    assert derive(under[:2], "cpu", "llama.cpp") is None  # no run that saw them: nothing to apply


def test_a_compute_ratio_is_learned_only_from_runs_with_the_same_flash_attention() -> None:
    """QA: x0.926 learned on flash-attention runs moved a -fa off estimate (1.17 GiB) to 1.09 GiB, further
    from the 1.18 GiB the engine allocated: without flash attention the buffer holds the scores."""

    def record(flash: object, printed: int, time: int) -> dict:
        return {
            "version": 1, "ready": True, "place": "host", "time": time, "settings": {"flash_attn": flash},
            "device": {"name": "cpu"}, "engine": {"backend": "llama.cpp", "build": "b"},
            "printed": {"bill": {"host": {"compute_buffer_bytes": printed}}}, "peak": {"bytes": 10**9},
            "estimate": {"compute_buffer_bytes": 1000},
        }  # fmt: skip

    runs = [record(None, 900, 1), record("auto", 920, 2), record(True, 910, 3), record("off", 1100, 4)]
    assert derive(runs, "cpu", "llama.cpp", None).compute_ratio == 0.91  # type: ignore[union-attr]
    assert derive(runs, "cpu", "llama.cpp", True).compute_ratio == 0.91  # type: ignore[union-attr]
    assert derive(runs, "cpu", "llama.cpp", False).compute_ratio == 1.1  # type: ignore[union-attr]
    assert derive(runs[:3], "cpu", "llama.cpp", "off").compute_ratio is None  # type: ignore[union-attr]


def test_vllm_runs_on_record_are_said_not_to_calibrate_it(tmp_path: Path) -> None:
    """QA 14: earlier vLLM runs on record, and `calibration: null` with nothing said about why."""
    from vramtui.core.estimate.calibrate import calibration_for
    from vramtui.core.estimate.estimator import Settings

    record = {
        "version": 1, "ready": True, "place": "host", "time": 1,
        "device": {"name": "cpu"}, "engine": {"backend": "vllm", "build": "b"},
        "printed": {"bill": {"host": {"kv_cache_bytes": 100}}}, "peak": {"bytes": 900},
    }  # fmt: skip
    settings = Settings(backend="vllm", context=1024, on_gpu=False)
    assert calibration_for(settings, tmp_path) == (None, [])  # nothing on record: nothing to say
    (tmp_path / "a.run.json").write_text(json.dumps(record))
    found, notes = calibration_for(settings, tmp_path)
    assert found is None and any(note.startswith("not calibrated by earlier vllm runs") for note in notes)
