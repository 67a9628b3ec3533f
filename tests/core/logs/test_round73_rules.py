"""Rules written from round 73's training logs (tests/data/logs/round73.jsonl, sources in each record): a
vLLM boot on two DGX Sparks whose worker's own traceback is not in the log."""

from __future__ import annotations

from tests.core.logs import corpus
from vramtui.core.logs.diagnose import diagnose_text


def test_a_traceback_header_gives_way_to_the_wrapper_exception_that_ends_it() -> None:
    # "Traceback (most recent call last):" at line 17, and its exception at line 41: "Exception: WorkerProc
    # initialization failed ... See stack trace for root cause." The root cause was never logged: the line
    # that states the failure is that exception, not the header (issue 21 f)
    text = corpus.training_log("r73-vllm-dsv41-exl3-2xspark-workerinit")
    diagnosis = diagnose_text(text, kernel_log=lambda: None)
    assert diagnosis.first_error_line == 41, diagnosis.first_error_text
    assert "WorkerProc initialization failed" in (diagnosis.first_error_text or "")


def test_a_root_cause_after_the_wrapper_still_wins() -> None:
    # the same header and wrapper, then the worker's own exception a few lines on: the cause is that one
    text = corpus.training_log("r73-vllm-dsv41-exl3-2xspark-workerinit")
    lines = text.splitlines()[:41]
    cause = (
        "(EngineCore pid=451) ERROR 09-22 07:22:28 [core.py:1385] torch.OutOfMemoryError: CUDA out of memory."
    )
    diagnosis = diagnose_text("\n".join([*lines, cause]), kernel_log=lambda: None)
    assert diagnosis.first_error_line == 42 and diagnosis.failure == "cuda_oom", diagnosis.first_error_text
