"""Rules written from round 85's training logs (tests/data/logs/round85.jsonl, sources in each record), each
checked on its training log and against a near miss it must not catch."""

from __future__ import annotations

from tests.core.logs import corpus
from vramtui.core.logs.diagnose import diagnose_text


def _diagnose(text: str):
    return diagnose_text(text, kernel_log=lambda: None)


def test_a_vllm_start_of_ten_minutes_or_more_is_said() -> None:
    # Project-Apollo's vllm_results.log: a HIP-graph capture of 2173 s on an RX 9070 XT, "init engine
    # (profile, create kv cache, warmup model) took 2267.10 seconds", then 2.28 tokens/s: no error, a quiet one
    d = _diagnose(corpus.training_log("r85-vllm-0.14rc-rocm-awq-qwen14b-tiny-kv-1856-tokens-2tok-per-s"))
    assert not d.failed and any("took ten minutes or more to start" in w for w in d.warnings), d.warnings
    quick = _diagnose(
        "INFO 03-01 16:06:36 [core.py:259] init engine (profile, create kv cache, warmup model) took 120.47 "
        "seconds\n"
    )
    assert not any("ten minutes" in w for w in quick.warnings)  # two minutes is an ordinary start
