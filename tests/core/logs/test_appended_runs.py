"""A log appended to across restarts (`llama-server ... >> server.log`, a restarted container's `docker logs`,
vramtui's own run logs concatenated): a new server process starts a new run (QA 16)."""

from __future__ import annotations

from pathlib import Path

from vramtui.core.logs.diagnose import diagnose_text

LOGS = Path(__file__).resolve().parents[2] / "data" / "logs"
# a tiny model up on a real llama-server, one request served, stopped by vramtui (made here)
HEALTHY = (LOGS / "llama-server-healthy-stopped-by-vramtui.log").read_text()
# a real llama-server under a 700 MiB address-space budget: its weights' allocation failed (made here)
FAILING = (LOGS / "llama-server-budget-700-mmap-weights.log").read_text()


def _diagnose(text: str):  # type: ignore[no-untyped-def]
    return diagnose_text(text, kernel_log=lambda: None)


def test_each_log_alone() -> None:
    healthy, failing = _diagnose(HEALTHY), _diagnose(FAILING)
    assert not healthy.failed and healthy.stopped_by_vramtui and healthy.stage == "inference"
    assert failing.failed and (failing.failure_stage, failing.failure) == ("load_weights", "host_oom")


def test_a_failure_after_a_healthy_run_that_was_stopped_is_the_logs_verdict() -> None:
    # it read "No failure (reached: inference); vramtui stopped the server itself", exit 0
    after = _diagnose(HEALTHY + FAILING)
    alone = _diagnose(FAILING)
    assert after.failed and (after.failure_stage, after.failure) == ("load_weights", "host_oom")
    assert not after.stopped_by_vramtui
    assert after.first_error_line == alone.first_error_line + len(HEALTHY.splitlines())


def test_a_run_that_came_up_after_a_failure_is_the_verdict_and_the_failure_is_quoted() -> None:
    # the last run came up and served: no failure now; the earlier one stays in the evidence as recovered
    before = _diagnose(FAILING + HEALTHY)
    assert not before.failed and before.stopped_by_vramtui and before.stage == "inference"
    assert any(line.startswith("recovered: ") for line in before.evidence)


def test_a_run_cut_off_after_a_failure_keeps_the_failure() -> None:
    # a second start whose log stops while loading (the user gave up, a crash loop cut short) proves nothing
    # against the failure before it: the first error is still the log's
    cut = HEALTHY.split("\n")[:12]
    assert not any("listening" in line for line in cut)
    again = _diagnose(FAILING + "\n".join(cut) + "\n")
    assert again.failed and (again.failure_stage, again.failure) == ("load_weights", "host_oom")
    assert again.first_error_line == _diagnose(FAILING).first_error_line


def test_a_new_run_keeps_the_readers_own_settings() -> None:
    # the new run starts the verdict over, not the reader: the backend named and the kernel log given stay
    from vramtui.core.logs.diagnose import LogDiagnoser

    def kernel() -> None:
        return None

    diagnoser = LogDiagnoser(backend="llama.cpp", kernel_log=kernel)
    for line in (HEALTHY + FAILING).splitlines():
        diagnoser.feed(line)
    assert diagnoser.backend == "llama.cpp" and diagnoser._kernel_log is kernel
    found = diagnoser.result()
    assert found.failed and found.failure == "host_oom"


def test_vllms_banner_starts_a_new_run() -> None:
    """QA 17 F3: vLLM 0.32 says its version in ASCII-art ("█  version 0.32.0"), not "vLLM API server version":
    a healthy run stopped, then a run whose KV cache had no room, read "No failure", exit 0."""
    import json

    made = {}
    for line in (LOGS / "made-here.jsonl").read_text().splitlines():
        case = json.loads(line)
        made[case["id"]] = case["log"]
    healthy, failing = made["made-vllm-healthy"], made["made-vllm-kv-too-small"]
    assert any("█  version" in line for line in failing.splitlines())
    alone, after = _diagnose(failing), _diagnose(healthy.rstrip("\n") + "\n" + failing)
    assert after.failed and (after.failure_stage, after.failure) == (alone.failure_stage, alone.failure)
    assert after.first_error_line == alone.first_error_line + len(healthy.rstrip("\n").split("\n"))


def test_a_cpu_builds_log_cut_in_its_traceback_ran_out_of_host_memory_not_the_gpus() -> None:
    """QA 17 F9: vLLM's CPU build, its log cut inside the traceback: 'most likely the GPU ran out of memory'."""
    import json

    made = {}
    for line in (LOGS / "made-here.jsonl").read_text().splitlines():
        case = json.loads(line)
        made[case["id"]] = case["log"]
    log = made["made-vllm-kv-too-small"]
    result = _diagnose(log.encode()[:12000].decode(errors="ignore"))  # as `head -c 12000` cuts it
    assert result.failed and result.cause == "cut_traceback"
    assert result.failure == "host_oom", result.summary


def test_two_failing_runs_are_the_last_ones_failure_with_its_own_figures() -> None:
    """QA 17 F2: the first run's error beside the second run's budget, model and advice (a '+119%' fit
    comparison of two runs' figures), and the second run's own failure said nowhere."""
    first = (LOGS / "llama-server-budget-250-np16-q4-kv.log").read_text()
    both = _diagnose(first + FAILING)
    alone = _diagnose(FAILING)
    assert (both.failure_stage, both.failure) == (alone.failure_stage, alone.failure)
    assert both.first_error_line == alone.first_error_line + len(first.splitlines())
    assert both.engine_figures == alone.engine_figures


def test_a_healthy_run_after_a_failure_has_its_own_figures() -> None:
    first = (LOGS / "llama-server-budget-250-np16-q4-kv.log").read_text()
    after = _diagnose(first + HEALTHY)
    assert not after.failed
    assert after.engine_figures == _diagnose(HEALTHY).engine_figures


def test_the_start_ups_a_log_holds_and_the_one_judged_are_said() -> None:
    """QA 27 N7: a crash loop's 3,700 start-ups in one log read "First error, line 517601" with nothing
    to say it was the last start-up's."""
    alone = _diagnose(FAILING)
    assert alone.starts == 1
    looped = _diagnose(FAILING * 3)
    assert looped.starts == 3 and looped.failed
    assert looped.start_line is not None and looped.start_line > 2 * len(FAILING.splitlines())
    assert looped.first_error_line == alone.first_error_line + 2 * len(FAILING.splitlines())
    # a second start cut off while loading: the verdict is the first run's, and it says where that began
    cut = HEALTHY.split("\n")[:12]
    again = _diagnose(FAILING + "\n".join(cut) + "\n")
    assert again.starts == 2 and (again.start_line or 1) <= alone.first_error_line


def test_the_cli_names_the_start_up_it_read(tmp_path: Path) -> None:
    import subprocess
    import sys

    path = tmp_path / "loop.log"
    path.write_text(FAILING + "\n".join(HEALTHY.split("\n")[:12]) + "\n")  # the judged run is the first
    done = subprocess.run(
        [sys.executable, "-m", "vramtui", "diagnose", str(path)], capture_output=True, text=True, timeout=60
    )
    assert "The log holds 2 server start-ups: this is the one from line 1." in done.stdout, done.stderr
