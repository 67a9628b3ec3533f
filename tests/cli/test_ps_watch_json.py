"""`vramtui ps --watch S --json` as a script reads it: JSON Lines, one refresh a line."""

from __future__ import annotations

import json
import signal
import subprocess
import sys


def test_ps_watch_json_is_one_compact_object_a_line() -> None:
    """QA 39 F8: pretty-printed objects back to back were neither one JSON document nor JSON Lines."""
    watch = subprocess.Popen(
        [sys.executable, "-m", "vramtui", "ps", "--watch", "0.2", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert watch.stdout is not None
        lines = [watch.stdout.readline() for _ in range(3)]  # each refresh is flushed as it is written
    finally:
        watch.send_signal(signal.SIGINT)
        _out, err = watch.communicate(timeout=60)
    assert watch.returncode in (0, 130) and "Traceback" not in err, err  # 130: ctrl-c landed mid-scan
    for line in lines:
        assert line.endswith("\n") and line.count("\n") == 1, lines
        shot = json.loads(line)
        assert {"servers", "gpus", "host"} <= set(shot), shot
    # without --watch: the one document it always was, as every other --json prints it
    done = subprocess.run(
        [sys.executable, "-m", "vramtui", "ps", "--json"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("{\n  ") and "servers" in json.loads(done.stdout)
