"""Rules written from round 71's training logs (tests/data/logs/round71.jsonl, sources in each record): a
vLLM weight repack running out of device memory after "Loading weights took", and an idle Ollama server
whose settings dump names OLLAMA_CONTEXT_LENGTH and OLLAMA_KV_CACHE_TYPE."""

from __future__ import annotations

from tests.core.logs import corpus
from vramtui.core.logs.diagnose import Diagnosis, diagnose_text


def _read(text: str) -> Diagnosis:
    return diagnose_text(text, kernel_log=lambda: None)


def test_a_weight_repack_out_of_memory_after_the_checkpoint_is_read_is_still_the_load() -> None:
    # "Loading weights took 3.77 seconds" (the checkpoint read), then the NVFP4 repack in
    # process_weights_after_loading: "Failed to load model - not enough GPU memory" (read kv_cache before)
    text = corpus.training_log("r71-vllm-v100-16gb-weights-oom")
    assert "Loading weights took 3.77 seconds" in text
    diagnosis = _read(text)
    assert (diagnosis.failure_stage, diagnosis.failure) == ("load_weights", "cuda_oom"), diagnosis.summary
    assert diagnosis.first_error_line == 81


def test_a_failure_after_model_loading_took_is_past_the_weights() -> None:
    # the weights' own end ("Model loading took N GiB") still places what follows it at start-up's next stage
    text = corpus.training_log("r71-vllm-v100-16gb-weights-oom")
    lines = text.splitlines()
    at = next(n for n, line in enumerate(lines) if "Failed to load model" in line)
    done = "(Worker_TP0 pid=240) INFO 09-23 12:15:26 [gpu_model_runner.py:4467] Model loading took 10.21 GiB"
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."
    profiled = "\n".join([*lines[: at - 1], done, "determine_available_memory", oom])
    assert _read(profiled).failure_stage == "kv_cache"


def test_an_idle_ollama_server_is_up_whatever_its_settings_dump_names() -> None:
    # Ollama 0.15.4 on an M4 Pro: settings dump, "Listening on", two GETs of /v1/models, no model loaded
    # (read "stops while allocating its KV cache": OLLAMA_KV_CACHE_TYPE held "llama_kv_cache")
    diagnosis = _read(corpus.training_log("r71-ollama-m4pro-metal-low-vram-ok"))
    assert not diagnosis.failed and not diagnosis.incomplete, diagnosis.summary
    assert diagnosis.stage != "kv_cache"
    # llama.cpp's own function names still place a line
    assert _read("llama_kv_cache: size = 64.00 MiB").stage == "kv_cache"
    assert _read("llama_context: n_ctx = 4096").stage == "kv_cache"
