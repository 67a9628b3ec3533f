"""QA 38 F12: a server killed (SIGKILL) after it came up. The run record said stage "ready" where `run` and
`diagnose` said "inference", and `diagnose --json` on the saved log gave exit_code null though its last
line says "killed by SIGKILL (signal 9)". The record, the live diagnosis and the saved log's now agree."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

from placeholder_files import EMPTY_GGUF

from vramtui.core.launch.launcher import ModelServer
from vramtui.core.launch.profile import Profile
from vramtui.core.launch.runlog import RunLogFile
from vramtui.core.launch.runrecord import run_record
from vramtui.core.logs.diagnose import diagnose_file

# llama-server's own lines of a start that came up (b8xxx wording, from a run made here)
_CAME_UP = (
    "load_tensors: offloaded 0/3 layers to GPU",
    "load_tensors:   CPU_Mapped model buffer size =   135.02 MiB",
    "llama_kv_cache:        CPU KV buffer size =   192.00 MiB",
    "srv  llama_server: model loaded",
    "srv  llama_server: listening on http://127.0.0.1:59995",
    "srv  update_slots: all slots are idle",
)


def _killed_after_ready(tmp_path: Path) -> ModelServer:
    model = tmp_path / "m.gguf"
    model.write_bytes(EMPTY_GGUF)
    server = ModelServer(Profile(backend="llama.cpp", model=str(model), port=0), log_dir=tmp_path)
    server.log_file = tmp_path / "run.log"
    server._run_log = RunLogFile(server.log_file)
    for text in _CAME_UP:
        server._record_line(text)
    server.ready, server.ready_at = True, time.time() - 3
    server.proc = subprocess.Popen(["sleep", "60"])
    server.proc.send_signal(signal.SIGKILL)  # from outside: not vramtui's own stop
    server._died_on_its_own = True
    server._note_exit()  # the launcher's real path: it writes how the server ended into the log
    server._close_log()
    return server


def test_the_record_says_how_far_it_got_and_where_it_failed_as_diagnose_does(tmp_path: Path) -> None:
    server = _killed_after_ready(tmp_path)
    live = server.diagnosis()
    record = run_record(server)
    assert record is not None and live is not None
    assert live.failed and live.failure_stage == "inference"
    assert (
        (record["stage"], record["failure_stage"])
        == (live.stage, live.failure_stage)
        == (
            "inference",
            "inference",
        )
    )
    json.dumps(record)  # the record is written as JSON


def test_the_saved_log_gives_the_exit_status_its_last_line_states(tmp_path: Path) -> None:
    server = _killed_after_ready(tmp_path)
    assert server.exit_code == -9
    saved = diagnose_file(server.log_file)
    assert saved.exit_code == -9 and saved.failure_stage == "inference"
    assert saved.cause == server.diagnosis().cause
