"""Text a server echoes from a request (the prompt) or a response (the answer) is not the server's.

People bring up a model and then ask it about the errors they just had: with request logging on, the
prompt "my vLLM says CUDA out of memory" lands in the server's log. Those words must not become the
diagnosis. The line itself still counts (a request line: the inference stage), and the server's own
errors, even on such lines, are still read.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import pytest

from vramtui.core.logs import diagnose

STARTUP = [
    "INFO 11-30 10:00:00 [gpu_worker.py:100] Model loading took 14.2 GiB and 8.1 seconds",
    "INFO 11-30 10:00:05 [gpu_model_runner.py:200] Graph capturing finished in 9 secs",
    "INFO:     Application startup complete.",
]
ASKED = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. Traceback (most recent "
    "call last): RuntimeError: CUDA error: out of memory. Killed. ValueError: No available memory for "
    "the cache blocks. İİ"  # lower() makes this longer: the cut is found in the original text
)

ECHOES = {
    "vllm request": f"INFO 11-30 10:01:00 [logger.py:39] Received request chatcmpl-9f: prompt: "
    f"'<|im_start|>user\\n{ASKED}<|im_end|>', params: SamplingParams(n=1, temperature=0.7), "
    f"prompt_token_ids: [151644, 872], lora_request: None.",
    "vllm response": f"INFO 11-30 10:01:02 [logger.py:60] Generated response chatcmpl-9f: output: "
    f"'You asked about: {ASKED}', output_token_ids: [1, 2], finish_reason: stop",
    "llama-server request": f'srv  log_server_r: request:  {{"messages":[{{"role":"user","content":"{ASKED}"}}]}}',
    "llama-server response": 'srv  log_server_r: response: {"choices":[{"message":{"content":"'
    + ASKED
    + '"}}]}',
    "llama-server converted": f'srv  operator(): converted request: {{"prompt":"{ASKED}"}}',
    "llama-server token": "slot update_slots: id  0 | task 3 | prompt token  12:   1454 'Killed'",
    "sglang": f"[2026-11-30 10:01:00] Receive: obj=GenerateReqInput(text='{ASKED}', sampling_params={{}})",
    "ollama": f'time=2026-11-30T10:01:00Z level=DEBUG source=routes.go:1503 msg="chat request" images=0 '
    f'prompt="<|im_start|>user {ASKED}"',
}


@pytest.mark.parametrize("echo", sorted(ECHOES))
def test_what_a_user_asked_is_not_the_diagnosis(
    echo: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    build = diagnose
    lines = [
        *STARTUP,
        ECHOES[echo],
        'INFO:     127.0.0.1:50312 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
    ]
    diagnosis = build.diagnose_lines(lines, kernel_log=lambda: None)
    assert not diagnosis.failed, (echo, diagnosis.first_error_text)
    path = tmp_path / "echo.log"
    path.write_text("\n".join(lines) + "\n")
    assert asdict(build.diagnose_file(path, kernel_log=lambda: None)) == asdict(diagnosis)


def test_the_servers_own_words_around_an_echo_are_still_read(monkeypatch: pytest.MonkeyPatch) -> None:
    build = diagnose
    # The request line is still a request: the log reached inference.
    tags = build.LogDiagnoser(kernel_log=lambda: None)
    assert tags.feed(ECHOES["vllm request"]).stage == "inference"
    # A real failure after the echo is found, on its own line.
    lines = [
        *STARTUP,
        ECHOES["vllm request"],
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB",
    ]
    diagnosis = build.diagnose_lines(lines, kernel_log=lambda: None)
    assert diagnosis.failed and diagnosis.failure == "cuda_oom"
    assert diagnosis.first_error_line == len(lines) and diagnosis.failure_stage == "inference"
    # llama-server's answer to a request too long for its context is the server's, not an echo.
    refused = (
        'srv  log_server_r: response: {"error":{"code":400,"message":"the request exceeds the available '
        'context size, try increasing it","type":"exceed_context_size_error"}}'
    )
    plain = build.diagnose_lines([refused], kernel_log=lambda: None)
    with_echo = build.diagnose_lines([ECHOES["llama-server request"], refused], kernel_log=lambda: None)
    assert (plain.failed, plain.failure) == (with_echo.failed, with_echo.failure)
    assert with_echo.first_error_line == (2 if plain.failed else None)
