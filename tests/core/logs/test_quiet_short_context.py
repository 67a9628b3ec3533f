"""A context per request far below what the model was trained on is a quiet failure: llama.cpp's own
"n_ctx_seq (2048) < n_ctx_train (131072)" line says it, in llama-server's and Ollama's runner logs alike."""

from __future__ import annotations

from tests.core.logs import corpus
from vramtui.core.logs.diagnose import diagnose_text


def _case(case_id: str) -> dict:
    return next(case for case in corpus.cases() if case["id"] == case_id)


def test_an_ollama_runner_whose_slots_get_2048_tokens_of_a_131072_model_is_warned() -> None:
    case = _case("r19-ollama-v100-context-capped-2048")  # training part: 4 slots share 8192 cells
    diagnosis = diagnose_text(case["log"], kernel_log=lambda: None)
    assert not diagnosis.failed
    assert any(w.startswith("each request gets only 2048 tokens of context") for w in diagnosis.warnings)
    assert diagnosis.engine_figures["model_trained_context"] == 131072


def test_4096_of_16384_and_a_long_context_stay_calm() -> None:
    # A context of 4096 is a choice users make (labels of real logs say so both ways); 65536 of 131072 is no cap.
    text = "llama_context: n_ctx_seq (4096) < n_ctx_train (16384) -- the full capacity of the model will not be utilized\n"
    assert not any("tokens of context" in w for w in diagnose_text(text).warnings)
    short = text.replace("(4096)", "(2048)").replace("(16384)", "(4096)")
    assert not any("tokens of context" in w for w in diagnose_text(short).warnings)  # trained on only twice
    older = (
        "llama_new_context_with_model: n_ctx_per_seq (1024) < n_ctx_train (32768) -- the full capacity ...\n"
    )
    assert any("only 1024 tokens of context" in w for w in diagnose_text(older).warnings)
