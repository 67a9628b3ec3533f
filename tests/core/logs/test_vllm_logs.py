"""The logs a real vLLM (its CPU build, 0.32) printed for each way it fails, saved by
tests/engines/vllm_capture.py: the verdict, the line that states it, the advice with vLLM's own knob and the
number from its log, and the change the wizard makes first (the one vLLM's message names)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from vllm_capture import split_header

from tests.core.logs import corpus
from vramtui.core.backends import get_backend
from vramtui.core.backends.base import FailedRun
from vramtui.core.logs.diagnose import Diagnosis, LogDiagnoser, diagnose_lines
from vramtui.core.logs.kernel import kernel_line_time

DATA = Path(__file__).resolve().parents[2] / "data" / "vllm"
VLLM = get_backend("vllm")


def _read(name: str, kernel: bool = False) -> Diagnosis:
    fields, log = split_header((DATA / f"{name}.log").read_text())
    kernel_line = fields.get("kernel") if kernel else None
    diagnoser = LogDiagnoser(kernel_log=lambda: kernel_line)
    if kernel_line:
        diagnoser.log_time = kernel_line_time(kernel_line)  # the log ends when the worker was killed
    for line in log.rstrip("\n").split("\n"):
        diagnoser.feed(line)
    return diagnoser.result()


@pytest.mark.parametrize("name", ["healthy", "share-auto", "moe"])
def test_a_healthy_run_stopped_with_ctrl_c_is_no_failure(name: str) -> None:
    """vLLM's engine dies under its API server's output handler while it shuts down (EngineDeadError
    after 'shutdown triggered'): that is the stop, not a failure. And eager mode on the CPU build is
    no missed CUDA graph."""
    diagnosis = _read(name)
    assert not diagnosis.failed and not diagnosis.incomplete, diagnosis.summary
    assert diagnosis.stage == "inference"
    assert not any("CUDA graph" in warning for warning in diagnosis.warnings)
    figures = diagnosis.engine_figures
    assert figures["kv_cache_tokens"] > 0 and figures["max_concurrency"] > 0


def test_eager_mode_on_the_cpu_build_flags_no_line() -> None:
    """QA 14: the config dump (enforce_eager=True, device_config=cpu) was marked `!` in the log pane, though
    the CPU build has no CUDA graphs to turn off and the verdict says nothing of it."""
    _, log = split_header((DATA / "healthy.log").read_text())
    diagnoser = LogDiagnoser(kernel_log=lambda: None)
    tags = [(line, diagnoser.feed(line)) for line in log.rstrip("\n").split("\n")]
    (dump,) = [tag for line, tag in tags if "Initializing a V1 LLM engine" in line]
    assert dump.severity == "info"


def test_the_shutdown_traceback_is_in_the_log() -> None:
    # the case above is not empty: the saved shutdown holds vLLM's EngineDeadError after its stop
    _, log = split_header((DATA / "share-auto.log").read_text())
    assert log.index("shutdown triggered") < log.index("EngineDeadError")


# name -> (stage, failure, words of the first error, words of the first line of advice)
FAILURES = {
    "cpu-share-refused": (
        "load_weights",
        "host_oom",
        "less than desired CPU memory utilization",
        "--gpu-memory-utilization 0.77",
    ),
    "kv-too-small": (
        "kv_cache",
        "kv_cache_too_small",
        "To serve at least one request",
        "--kv-cache-memory-bytes 16M",
    ),
    # QA 9: a 100 KiB cache for a 1 MiB request; the message rounds both to 0.0 GiB and names no length
    "kv-too-small-no-fit": (
        "kv_cache",
        "kv_cache_too_small",
        "To serve at least one request",
        "(--kv-cache-memory-bytes 100K; the memory share does not count then): raise it to "
        "--kv-cache-memory-bytes 64M",
    ),
    # QA 9: the CPU build's attention takes no head_dim 16; it failed at the first request
    "cpu-attn-head-dim": (
        "inference",
        "unknown_arch",
        "Unsupported CPU attention configuration: head_dim=16",
        "do not take this model's head size",
    ),
    "kv-above-free-ram": (
        "kv_cache",
        "host_oom",
        "less than requested memory for kv",
        "--kv-cache-memory-bytes 4301M",
    ),
    "max-model-len-above-derived": (
        "load_weights",
        "context_too_long",
        "User-specified max_model_len (8192)",
        "--max-model-len 4096",
    ),
    # QA 19 F6: its argparse refusing a value ("argument --dtype: invalid choice") read "stage unknown"
    "bad-dtype-choice": (
        "load_weights",
        "other",
        "argument --dtype: invalid choice",
        "--dtype takes no such value",
    ),
    "unknown-arch": ("load_weights", "unknown_arch", "does not recognize this architecture", "Upgrade vLLM"),
    "missing-path": ("download", "file_missing", "Repo id must be in the form", "Check the path"),
    "offline-repo-id": ("download", "network", "outgoing traffic has been disabled", ""),
    # a request over max_model_len: vLLM 0.32 answers the client 400 and logs only the access line
    "request-too-long": (
        "inference",
        "context_too_long",
        '"POST /v1/chat/completions HTTP/1.1" 400 Bad Request',
        "does not say why",
    ),
    # QA 9: a 3 GiB budget, and the share set 21 GiB aside for the KV cache; QA 14: the fit was in raw bytes
    "budget-share-kv": ("kv_cache", "host_oom", "can't allocate memory", "--kv-cache-memory-bytes 561M"),
    # QA 14: the bind failed ("OSError: [Errno 98] Address already in use") before the model was read
    "port-in-use": ("load_weights", "other", "[Errno 98] Address already in use", 'port = "auto"'),
    "quant-missing": (
        "load_weights",
        "unsupported_quant",
        "Cannot find the config file for awq",
        "drop --quantization awq",
    ),
}


@pytest.mark.parametrize("name", sorted(FAILURES))
def test_each_failure_is_read_with_the_knob_and_number_from_its_log(name: str) -> None:
    stage, failure, error_words, advice_words = FAILURES[name]
    diagnosis = _read(name)
    assert (diagnosis.failure_stage, diagnosis.failure) == (stage, failure), diagnosis.summary
    assert error_words in (diagnosis.first_error_text or "")
    assert advice_words in diagnosis.advice[0], diagnosis.advice


def test_a_head_size_the_cpu_kernels_do_not_take_is_said_as_such() -> None:
    # QA 14: the summary said "the engine does not know this model architecture" for a known qwen2
    diagnosis = _read("cpu-attn-head-dim")
    assert "CPU attention kernels do not take this model's head size" in diagnosis.summary
    # QA 15: the served request's "200 OK" stood in the evidence unexplained; it is where inference began
    began = [line for line in diagnosis.evidence if '"POST /v1/chat/completions HTTP/1.1" 200 OK' in line]
    assert began and re.match(r"line \d+ \(inference began\): ", began[0])


def test_the_share_is_read_from_the_refusal_not_from_its_hint() -> None:
    # "... (0.99, 10.11 GiB). ... decrease `--gpu-memory-utilization` (e.g. `--gpu-memory-utilization 0.5`)"
    figures = _read("cpu-share-refused").engine_figures
    assert figures["memory_share"] == pytest.approx(0.99)


def test_a_kv_cache_set_outright_is_not_advised_a_larger_share() -> None:
    advice = " ".join(_read("kv-too-small").advice)
    assert "--gpu-memory-utilization" not in advice and "--cpu-offload-gb" not in advice
    assert "--max-model-len 384" in advice


def test_a_dead_worker_is_the_oom_killer_when_the_kernel_says_so() -> None:
    killed = _read("worker-oom-killed", kernel=True)
    assert (killed.failure_stage, killed.failure) == ("kv_cache", "host_oom_killed"), killed.summary
    assert "died unexpectedly" in (killed.first_error_text or "")
    assert any("Killed process" in line for line in killed.evidence)
    assert "--kv-cache-memory-bytes" in " ".join(killed.advice)
    unknown = _read("worker-oom-killed")  # no kernel log to read: said as what it is, with where to look
    assert unknown.failure == "other" and unknown.cause == "worker_died"
    assert "dmesg" in unknown.advice[0]


def _fix(name: str, **run: object) -> tuple[str, object, str] | None:
    diagnosis = _read(name, kernel=True)
    assert VLLM.named_fix is not None
    failed = FailedRun(
        failure=diagnosis.failure,
        cause=diagnosis.cause,
        stage=diagnosis.failure_stage,
        figures=diagnosis.engine_figures,
        params={},
        **run,  # type: ignore[arg-type]
    )
    return VLLM.named_fix(failed)


def test_the_wizard_s_first_change_is_the_one_vllms_message_names() -> None:
    assert _fix("cpu-share-refused")[:2] == ("mem_share", 0.77)  # type: ignore[index]
    assert _fix("kv-too-small")[:2] == ("kv_cache_memory", "16MiB")  # type: ignore[index]
    # QA 9: under a tenth of a GiB needed and no length that fits said: what holds 0.05 GiB, not the
    # --max-num-seqs the ladder tried first
    assert _fix("kv-too-small-no-fit")[:2] == ("kv_cache_memory", "64MiB")  # type: ignore[index]
    assert _fix("kv-above-free-ram")[:2] == ("kv_cache_memory", "4254MiB")  # type: ignore[index]
    assert _fix("max-model-len-above-derived")[:2] == ("context", 4096)  # type: ignore[index]
    # killed while its 2 GiB cache was set up, with 300 MiB to grow into once the weights were in
    param, value, _ = _fix("worker-oom-killed", peak_bytes=2200 << 20, weights_rss_bytes=1900 << 20)  # type: ignore[misc]
    assert (param, value) == ("kv_cache_memory", "180MiB")
    assert _fix("unknown-arch") is None  # no setting fixes an architecture vLLM lacks


def test_a_bare_vllm_oom_holding_well_under_the_card_was_still_starting() -> None:
    """vLLM takes its whole share while it starts (the KV cache fills what is left): a process that ran
    out holding 5.02 of 7.75 GiB was not serving. With no line to say where, that is the start-up after
    the weights, not a request (vllm-project/vllm#12529). Holding 99% of the card, it was serving."""
    oom = (
        "ERROR 03-13 09:00:43 [core.py:330] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
        "1.16 GiB. GPU 0 has a total capacity of 7.75 GiB of which 1.17 GiB is free. Including non-PyTorch "
        "memory, this process has {used} GiB memory in use. Of the allocated memory 4.81 GiB is allocated by "
        "PyTorch, and 18.97 MiB is reserved by PyTorch but unallocated."
    )
    client = (
        "CRITICAL 03-13 09:00:43 [core_client.py:260] Got fatal signal from worker processes, shutting down. "
        "See stack trace above for root cause issue."
    )
    starting = diagnose_lines([oom.format(used="5.02"), client], kernel_log=lambda: None)
    assert starting.backend == "vllm"
    assert (starting.failure, starting.failure_stage) == ("cuda_oom", "kv_cache")
    serving = diagnose_lines([oom.format(used="7.70"), client], kernel_log=lambda: None)
    assert (serving.failure, serving.failure_stage) == ("cuda_oom", "inference")


def test_an_unplaced_error_the_engine_core_calls_a_start_up_failure_was_not_a_request() -> None:
    """A kernel fault with no line to place it reads as a request's; when vLLM's engine core then says it
    "failed to start", no request was ever served: it failed starting, after the weights."""
    fault = [
        "(Worker_PP0 pid=23) ERROR 07-15 21:01:01 [multiproc_executor.py:1007] torch.AcceleratorError: CUDA "
        "error: an illegal memory access was encountered",
        "(Worker_PP0 pid=23) ERROR 07-15 21:01:01 [multiproc_executor.py:1007] For debugging consider passing "
        "CUDA_LAUNCH_BLOCKING=1",
    ]
    wrapper = "(EngineCore pid=12) ERROR 07-15 21:01:01 [core.py:1240] EngineCore failed to start."
    starting = diagnose_lines([*fault, wrapper], kernel_log=lambda: None)
    assert starting.backend == "vllm" and starting.failure_stage == "kv_cache"
    assert starting.first_error_line == 1
    serving = diagnose_lines(fault, "vllm", kernel_log=lambda: None)
    assert serving.failure_stage == "inference"


def test_a_cache_that_would_hold_one_request_but_not_fit_the_budget_is_answered_with_the_context() -> None:
    """QA 31 W1: vLLM's message names a bigger --kv-cache-memory-bytes (1016 MiB -> 4096 MiB) that the budget
    could not hold beside the engine: a relaunch that could only fail. The context the cache holds fits."""
    diagnosis = _read("kv-too-small", kernel=True)
    fit = diagnosis.engine_figures["max_model_len_fit"]

    def fix(budget: int) -> tuple[str, object, str]:
        figures = {**diagnosis.engine_figures, "host_budget": budget}
        failed = FailedRun(
            failure=diagnosis.failure, cause=diagnosis.cause, stage=diagnosis.failure_stage, figures=figures,
            params={}, peak_bytes=2 << 30,
        )  # fmt: skip
        assert VLLM.named_fix is not None
        found = VLLM.named_fix(failed)
        assert found is not None
        return found

    param, value, why = fix((2 << 30) + (8 << 20))  # 8 MiB beside the engine: the 16 MiB cache does not fit
    assert (param, value) == ("context", int(fit)), why
    assert "16 MiB" in why and "8 MiB the budget leaves beside the engine" in why
    assert fix((2 << 30) + (64 << 20))[:2] == ("kv_cache_memory", "16MiB")  # room for it: the bytes named


def test_under_a_host_budget_the_cpu_share_refusal_is_answered_with_kv_bytes() -> None:
    """QA 5: under a 6 GiB budget the wizard followed vLLM's message twice (share 0.92 -> 0.86 -> 0.82 of
    the machine's 23.5 GiB), moves the budget could never hold; the KV cache sized outright can."""
    diagnosis = _read("cpu-share-refused", kernel=True)
    figures = {**diagnosis.engine_figures, "host_budget": 6 << 30}
    failed = FailedRun(
        failure=diagnosis.failure, cause=diagnosis.cause, stage=diagnosis.failure_stage, figures=figures,
        params={}, peak_bytes=1 << 30,
    )  # fmt: skip
    assert VLLM.named_fix is not None
    param, value, why = VLLM.named_fix(failed)  # type: ignore[misc]
    assert param == "kv_cache_memory" and "6.0 GiB budget" in why
    assert int(str(value).removesuffix("MiB")) <= (6 << 10) // 2  # half of what the budget leaves, at most


@pytest.mark.parametrize("name", ["healthy", "cpu-share-refused"])
def test_the_live_stage_stays_before_the_cache_until_the_weights_loaded(name: str) -> None:
    """QA: `check --json` said stage kv_cache beside failure_stage load_weights for the share refused at
    start-up. `--enforce-eager`'s notice ("disabling torch.compile, CUDAGraphs, and JIT kernel warmup")
    had tagged every later line kv_cache, through TGI's word for its Warmup method."""
    _, log = split_header((DATA / f"{name}.log").read_text())
    diagnoser = LogDiagnoser()
    stages = [(line, diagnoser.feed(line).stage) for line in log.rstrip("\n").split("\n")]
    loaded = next((i for i, (line, _) in enumerate(stages) if "Loading weights took" in line), len(stages))
    assert any("Enforce eager set" in line for line, _ in stages[:loaded])
    assert all(stage not in {"kv_cache", "ready", "inference"} for _, stage in stages[:loaded])
    if name == "healthy":
        assert [stage for _, stage in stages][-1] == "inference"


def test_the_cpu_workers_kv_sizing_line_is_the_kv_cache_stage() -> None:
    """QA 9: "Explicitly set (0.0/23.54) GiB for KV cache on node 0." was tagged load weights in the log
    pane, and the traceback after it too, though the weights had loaded."""
    _, log = split_header((DATA / "kv-too-small-no-fit.log").read_text())
    diagnoser = LogDiagnoser()
    stages = {line: diagnoser.feed(line).stage for line in log.rstrip("\n").split("\n")}
    assert [stage for line, stage in stages.items() if "GiB for KV cache on node 0" in line] == ["kv_cache"]


def test_a_folded_recursion_and_the_step_dump_are_not_the_first_error() -> None:
    """Round 36 (training part): Python's "[Previous line repeated 1 more time]" inside a traceback, and V1's
    dump of the failed step (logged at ERROR before its exception), were read as the first error."""
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    import corpus

    cases = {case["id"]: case for case in corpus.cases() if case["id"].startswith("r36-vllm-neuron")}
    keyerror = diagnose_lines(cases["r36-vllm-neuron-gemma4-12b-keyerror-v-proj"]["log"].split("\n"))
    assert keyerror.first_error_line == 138 and "KeyError:" in (keyerror.first_error_text or "")
    oob = diagnose_lines(cases["r36-vllm-neuron-gemma4-12b-oob-access-first-request"]["log"].split("\n"))
    assert oob.stage == "inference" and oob.first_error_line is not None and oob.first_error_line > 51
    assert "RuntimeError:" in (oob.first_error_text or "")


def test_an_inspection_wrapper_over_a_subprocess_gives_way_to_the_exception_inside_it() -> None:
    """Round 43 (training part): vLLM's "Error in inspecting model architecture" relays its subprocess's
    traceback at ERROR: the blank ERROR lines, the subprocess's exit status and a RuntimeWarning it printed
    were read as the first error, before the ModuleNotFoundError that says what failed."""
    tag = "ERROR 06-13 11:12:03 [registry.py:963] "
    lines = [
        tag + "Error in inspecting model architecture 'Gemma4UnifiedForConditionalGeneration'",
        tag + "Traceback (most recent call last):",
        tag + '  File "/usr/lib/python3.12/subprocess.py", line 502, in check_returncode',
        tag + "    raise CalledProcessError(self.returncode, self.args, self.stdout,",
        tag
        + "subprocess.CalledProcessError: Command '['python', '-m', 'x']' returned non-zero exit status 1.",
        tag,
        tag + "The above exception was the direct cause of the following exception:",
        tag,
        tag + "RuntimeError: Error raised in subprocess:",
        tag
        + "<frozen runpy>:128: RuntimeWarning: 'vllm.model_executor.models.registry' found in sys.modules",
        tag + "Traceback (most recent call last):",
        tag
        + '  File "/venv/site-packages/transformers/image_processing_gemma4_unified.py", line 23, in <module>',
        tag + "    from torchvision.transforms.v2 import functional as tvF",
        tag + "ModuleNotFoundError: No module named 'torchvision'",
    ]
    diagnosis = diagnose_lines(lines, "vllm")
    assert diagnosis.first_error_line == 14, diagnosis.first_error_text
    # cut before any exception says more, the wrapper stays the first error (a Windows log of round 1)
    cut = diagnose_lines([*lines[:7], tag, tag + "Traceback (most recent ca"], "vllm")
    assert cut.first_error_line == 1, cut.first_error_text


def test_a_kv_cache_too_small_for_one_request_walks_only_the_rungs_that_can_help(tmp_path: Path) -> None:
    """QA 10: after Skip on the named fix (a larger --kv-cache-memory-bytes), the wizard proposed
    --max-num-seqs 4 -> 2 (vLLM sizes that check by one request) and a larger memory share (which a KV
    cache set outright leaves out): neither can help."""
    from types import SimpleNamespace

    from vramtui.core.launch.profile import Profile
    from vramtui.core.wizard.wizard import Wizard

    diagnosis = _read("kv-too-small-no-fit")
    model = tmp_path / "m"
    model.mkdir()

    def fails(_profile: Profile) -> object:
        return SimpleNamespace(
            ready=False, stage="kv_cache", failure_stage="kv_cache", failure="kv_cache_too_small",
            diagnosis=diagnosis, smoke=None, log_file=None, peak_mib=1588.0,
        )  # fmt: skip

    params = {"context": 2048, "parallel": 4, "kv_cache_memory": "100KiB", "enforce_eager": True}
    wizard = Wizard(Profile(backend="vllm", model=str(model), params=params), runner=fails, record=False)
    wizard.start()
    seen = []
    while (proposal := wizard.propose()) is not None and len(seen) < 8:
        seen.append(proposal.param)
        wizard.skip(proposal)
    assert seen[0] == "kv_cache_memory", seen
    assert "parallel" not in seen and "mem_share" not in seen, seen
    assert {"kv_dtype", "context"} <= set(seen), seen


def test_v0s_keyboard_interrupt_from_its_signal_handler_is_the_stop() -> None:
    """Round 56: a healthy vLLM 0.7.2 (V0) run that served requests, stopped with ctrl-c. Its engine's
    signal handler raises KeyboardInterrupt("MQLLMEngine terminated"): that line is the stop, not a
    failure at inference. The same line before the server came up is a stop too, not a finished run."""
    from vramtui.core.logs.diagnose import diagnose_text

    stop = (
        "Traceback (most recent call last):\n"
        '  File "/x/vllm/engine/multiprocessing/engine.py", line 374, in signal_handler\n'
        '    raise KeyboardInterrupt("MQLLMEngine terminated")\n'
        "KeyboardInterrupt: MQLLMEngine terminated\n"
        "INFO:     Shutting down\n"
    )
    served = (
        "INFO 04-14 08:30:01 api_server.py:840] vLLM API server version 0.7.2\n"
        "INFO 04-14 08:31:30 worker.py:267] Memory profiling takes 4.84 seconds\n"
        "INFO 04-14 08:31:31 executor_base.py:110] # CUDA blocks: 11770, # CPU blocks: 2730\n"
        "INFO:     Application startup complete.\n"
        'INFO:     127.0.0.1:53422 - "POST /v1/chat/completions HTTP/1.1" 200 OK\n'
    )
    after = diagnose_text(served + stop, kernel_log=lambda: None)
    assert not after.failed and after.stopped and after.stage == "inference", after.summary
    during = diagnose_text(served.splitlines(keepends=True)[0] + stop, kernel_log=lambda: None)
    assert not during.failed and during.stopped, during.summary


def test_a_stop_before_the_server_was_ready_is_incomplete_not_a_pass() -> None:
    """ctrl-c during the load: no error, and no failure, but the server never came up, so `vramtui
    diagnose log && deploy` must not pass it (exit 3, as a log that stops during the load)."""
    from vramtui.cli.diagnose import INCOMPLETE_STATUS, exit_status
    from vramtui.core.logs.diagnose import diagnose_text

    log = (
        "INFO 10-01 08:30:01 [api_server.py:1351] vLLM API server version 0.10.2\n"
        "INFO 10-01 08:30:09 [gpu_model_runner.py:2338] Starting to load model Qwen/Qwen3-8B...\n"
        "INFO 10-01 08:30:40 [launcher.py:101] Shutting down FastAPI HTTP server.\n"
        "INFO 10-01 08:30:40 [core.py:710] EngineCore shutdown triggered\n"
    )
    diagnosis = diagnose_text(log, kernel_log=lambda: None)
    assert not diagnosis.failed and diagnosis.stopped and diagnosis.incomplete, diagnosis.summary
    assert exit_status(diagnosis) == INCOMPLETE_STATUS
    assert "stopped on purpose" in diagnosis.summary and "before the server was ready" in diagnosis.summary


@pytest.mark.parametrize("name", ["bad-dtype-choice", "max-model-len-above-derived"])
def test_a_refusal_before_any_weight_was_read_is_said_as_the_start_ups(name: str) -> None:
    """QA 19 F6, F8: a value argparse refuses, and --max-model-len past the model's own length (refused by
    the config check, before a weight is read), read "Failed at load_weights"."""
    from vramtui.core.logs.advice import START_UP_WORDS, before_the_model

    diagnosis = _read(name)
    assert before_the_model(diagnosis) and not diagnosis.stage_inferred
    assert diagnosis.summary.startswith(f"Failed at {START_UP_WORDS}:"), diagnosis.summary


def test_pydantics_validation_error_is_the_first_error_not_the_traceback_header() -> None:
    """QA 19 F7: vLLM's config check failing in pydantic with no "Value error, ..." line (a config.json's
    `architectures` given as a string) named "Traceback (most recent call last):" as the first error."""
    from vramtui.core.logs.diagnose import diagnose_text

    log = (
        "(APIServer pid=1) INFO 12-06 08:23:00 [utils.py:253] non-default args: {'model': '/m'}\n"
        "Traceback (most recent call last):\n"
        '  File "/v/vllm/engine/arg_utils.py", line 1955, in create_model_config\n'
        "    return ModelConfig(\n"
        '  File "/v/pydantic/_internal/_dataclasses.py", line 121, in __init__\n'
        "    s.__pydantic_validator__.validate_python(ArgsKwargs(args, kwargs), self_instance=s)\n"
        "pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig\n"
        "architectures\n"
        "  Input should be a valid list [type=list_type, input_value='Qwen2ForCausalLM', input_type=str]\n"
    )
    diagnosis = diagnose_text(log, kernel_log=lambda: None)
    assert diagnosis.first_error_line == 7, diagnosis.first_error_text
    # the detail line vLLM's own checks print ("Value error, ...") still comes first where there is one
    detail = log.replace("architectures\n", "  Value error, max_model_len is too large [type=value_error]\n")
    assert "Value error, max_model_len" in (
        diagnose_text(detail, kernel_log=lambda: None).first_error_text or ""
    )


def test_the_kv_size_advised_under_a_budget_is_the_wizards_when_the_log_says_what_the_engine_held() -> None:
    """QA 19 F2: diagnose sized the cache beside vLLM's printed non-KV memory (0.53 GiB) and advised 1.2G,
    which failed again under the same 3 GiB budget, where check and the wizard (beside the 1.6 GiB the
    process tree held) said 733 MiB. vramtui's run log now ends with what the tree held; read from it, the
    advice is the wizard's size."""
    from vramtui.core.logs.diagnose import diagnose_text

    _, log = split_header((DATA / "budget-share-kv.log").read_text())
    held = "2026-12-05T10:03:55.000 vramtui: the server's process tree held at most 1570 MiB\n"
    diagnosis = diagnose_text(log + held, kernel_log=lambda: None)
    assert diagnosis.engine_figures["tree_peak"] == 1570 << 20
    # half of what the 3072 MiB budget leaves beside the engine: at least its worker's 1950 MiB of address
    # space (QA 29: beside the 1570 MiB the tree kept resident, 194 MiB failed under 2 GiB), 561 MiB, as the
    # ladder's named fix sizes it
    assert "--kv-cache-memory-bytes 561M" in diagnosis.advice[0], diagnosis.advice
    run = FailedRun(
        failure=diagnosis.failure, stage=diagnosis.failure_stage, cause=diagnosis.cause,
        figures=dict(diagnosis.engine_figures), params={}, peak_bytes=1570 << 20,
    )  # fmt: skip
    fix = VLLM.named_fix(run) if VLLM.named_fix else None
    assert fix is not None and fix[:2] == ("kv_cache_memory", "561MiB"), fix


@pytest.mark.parametrize(
    "report",
    [
        './tools/vllm/serve.sh: line 193: 124064 Killed                  vllm serve "$MODEL" --dtype auto',
        "[1]+  Killed                  vllm serve Qwen/Qwen3-8B",
        "124064 Killed                  vllm serve Qwen/Qwen3-8B",
    ],
)
def test_a_shells_report_that_it_killed_the_server_is_a_kill(report: str) -> None:
    """Round 57: a vLLM that served requests, then a script's shell reported its child killed ("line 193:
    124064 Killed  vllm serve ..."), read "no failure". A SIGKILL's work while serving, in the shell's
    forms (a script's, job control's, a bare PID's)."""
    from vramtui.core.logs.diagnose import diagnose_text

    served = (
        "INFO 09-26 23:39:00 [api_server.py:1896] vLLM API server version 0.10.1.1\n"
        "INFO:     Application startup complete.\n"
        'INFO:     127.0.0.1:60538 - "POST /v1/chat/completions HTTP/1.1" 200 OK\n'
    )
    diagnosis = diagnose_text(served + report + "\n", kernel_log=lambda: None)
    assert (diagnosis.failure_stage, diagnosis.failure) == ("inference", "host_oom_killed"), diagnosis.summary
    assert diagnosis.first_error_line == 4


def test_the_transformers_fallback_that_cannot_split_a_model_is_the_architectures() -> None:
    """Round 65 (training): vLLM 0.7.3 had no Gemma 4, fell back to its Transformers implementation, and
    that refused tensor parallelism; it read "other", with no word of the fallback. The architecture is
    what this vLLM lacks: upgrade it, or run on one GPU."""
    from vramtui.core.logs.diagnose import diagnose_text

    case = next(case for case in corpus.cases() if case["id"] == "r65-vllm-gemma4-tp-transformers-fallback")
    assert case["split"] == "train"
    diagnosis = diagnose_text(case["log"], kernel_log=lambda: None)
    assert (diagnosis.failure_stage, diagnosis.failure, diagnosis.cause) == (
        "load_weights",
        "unknown_arch",
        "fallback_no_tp",
    )
    assert diagnosis.first_error_line == 46
    assert "Transformers fallback" in diagnosis.summary
    assert any("--tensor-parallel-size 1" in line and "upgrade vLLM" in line for line in diagnosis.advice)


def test_diagnose_and_the_wizard_size_one_request_alike() -> None:
    """QA 29 Q10: a 1 MiB cache for one 4096-token request (a real run here): check's first move said
    16MiB, diagnose "raise it to --kv-cache-memory-bytes 8M". Both take the power of two from 16 MiB."""
    from vramtui.core.logs.diagnose import diagnose_text

    log = (DATA.parent / "logs" / "vllm-kv-1mib-context-4096.log").read_text()
    diagnosis = diagnose_text(log, kernel_log=lambda: None)
    assert diagnosis.failure == "kv_cache_too_small"
    assert "raise it to --kv-cache-memory-bytes 16M for one 4096-token request" in diagnosis.advice[0]
    run = FailedRun(
        failure=diagnosis.failure, stage=diagnosis.failure_stage, cause=diagnosis.cause,
        figures=dict(diagnosis.engine_figures), params={},
    )  # fmt: skip
    fix = VLLM.named_fix(run) if VLLM.named_fix else None
    assert fix is not None and fix[:2] == ("kv_cache_memory", "16MiB"), fix


def test_a_kv_cache_asked_for_under_a_budget_is_asked_less_beside_the_workers_address_space() -> None:
    """QA 29 (a real run here): under a 2 GiB budget a 194 MiB cache set outright failed ("can't allocate
    memory"). The advice read "set its size outright" (it was) and "97M", which failed too; 48 MiB ran. Half
    of what the budget leaves beside the worker's 1.9 GiB of address space, and "ask for less"."""
    from vramtui.core.logs.diagnose import diagnose_text

    log = (DATA.parent / "logs" / "vllm-budget-2048-kv-194mib.log").read_text()
    diagnosis = diagnose_text(log, kernel_log=lambda: None)
    assert (diagnosis.failure_stage, diagnosis.failure) == ("kv_cache", "host_oom")
    advice = diagnosis.advice[0]
    assert "KV cache asked for: ask for less, --kv-cache-memory-bytes 49M" in advice, advice
    assert "set its size outright" not in advice


def test_a_kv_cache_already_at_the_least_is_not_asked_less() -> None:
    """QA 37 F3: a 16 MiB cache set outright under a budget below the worker's own address space was told
    "ask for less, --kv-cache-memory-bytes 16M" (the value it had) about "the 0.0 GiB KV cache". The same
    real run, its cache and budget lowered: no smaller cache makes room, so only the budget is advice."""
    from vramtui.core.logs.diagnose import diagnose_text

    log = (DATA.parent / "logs" / "vllm-budget-2048-kv-194mib.log").read_text()
    log = log.replace("203423744", "16777216").replace("(0.19/23.54)", "(0.02/23.54)")
    tight = diagnose_text(
        log.replace("memory budget 2048 MiB", "memory budget 1900 MiB"), kernel_log=lambda: None
    )
    assert (tight.failure_stage, tight.failure) == ("kv_cache", "host_oom")
    assert not any("ask for less" in line for line in tight.advice), tight.advice
    assert any("raise the memory budget" in line for line in tight.advice), tight.advice
    # where a smaller cache makes room it is still asked less, the cache said in its own unit (not "0.2 GiB")
    real = diagnose_text(
        (DATA.parent / "logs" / "vllm-budget-2048-kv-194mib.log").read_text(), kernel_log=lambda: None
    )
    assert "Host RAM could not hold the 194.0 MiB KV cache asked for: ask for less" in real.advice[0]


_SWAP_FRAMES = (
    "INFO 06-21 21:40:12 llm_engine.py:128] # GPU blocks: 37375, # CPU blocks: 7281\n"
    "Traceback (most recent call last):\n"
    '  File "/mnt/d/github/vllm/vllm/worker/worker.py", line 126, in init_cache_engine\n'
    "    self.cache_engine = CacheEngine(\n"
    '  File "/mnt/d/github/vllm/vllm/worker/cache_engine.py", line 41, in __init__\n'
    "    self.cpu_cache = self.allocate_cpu_cache()\n"
    '  File "/mnt/d/github/vllm/vllm/worker/cache_engine.py", line 89, in {frame}\n'
    "    key_blocks = torch.empty(\n"
    "RuntimeError: CUDA error: out of memory\n"
)


def test_cudas_out_of_memory_while_pinning_the_cpu_swap_space_is_the_hosts() -> None:
    """Round 79 (vllm#188, WSL2, a 125M model on a 3090): "CUDA error: out of memory" raised in the cache
    engine's allocate_cpu_cache, the pinned host RAM of --swap-space, after the GPU blocks were sized."""
    from vramtui.core.logs.diagnose import diagnose_text

    swap = diagnose_text(_SWAP_FRAMES.format(frame="allocate_cpu_cache"), kernel_log=lambda: None)
    assert (swap.failure_stage, swap.failure, swap.cause) == ("kv_cache", "host_oom", "swap_space_pinned")
    assert "--swap-space 1" in swap.advice[0]
    card = diagnose_text(_SWAP_FRAMES.format(frame="allocate_gpu_cache"), kernel_log=lambda: None)
    assert card.failure == "cuda_oom"  # the same error in the GPU cache's frame is the card's
