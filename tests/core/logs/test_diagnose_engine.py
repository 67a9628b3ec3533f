"""Real llama-cpp-python runs on this CPU, diagnosed from their own output.

A tiny random-weight GGUF (vramtui.core.demo.tinygguf) loads in well under a second; the failures are
llama.cpp's own: an address-space cap on the child process, a path that does not exist, a file cut
in half.
"""

from __future__ import annotations

import resource
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from vramtui.core.logs.diagnose import LogDiagnoser, diagnose_lines, diagnose_text

pytestmark = pytest.mark.engine

pytest.importorskip("llama_cpp")

LOAD_SCRIPT = (
    "import sys, llama_cpp\n"
    "llm = llama_cpp.Llama(model_path=sys.argv[1], n_ctx=int(sys.argv[2]), verbose=True)\n"
    "print(llm('hi', max_tokens=4)['choices'][0]['text'] != None)\n"
)


def _run_load(model: Path | str, n_ctx: int, cap_mib: int | None = None) -> tuple[str, int]:
    def limit() -> None:
        if cap_mib is not None:
            cap = cap_mib << 20
            resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    done = subprocess.run(
        [sys.executable, "-c", LOAD_SCRIPT, str(model), str(n_ctx)],
        preexec_fn=limit,
        capture_output=True,
        text=True,
        errors="replace",
        timeout=120,
        check=False,
    )
    return done.stdout + done.stderr, done.returncode


def _diagnose(output: str, returncode: int):
    diagnoser = LogDiagnoser(kernel_log=lambda: None)
    for line in output.splitlines():
        diagnoser.feed(line)
    diagnoser.note_exit(returncode)
    live = diagnoser.result()
    assert live.to_dict() == diagnose_text(output, exit_code=returncode, kernel_log=lambda: None).to_dict()
    return live


def test_memory_cap_fails_at_the_kv_cache_stage(tiny_gguf: Path) -> None:
    output, code = _run_load(tiny_gguf, 262144, cap_mib=1500)
    assert code != 0
    d = _diagnose(output, code)
    assert (d.failed, d.failure_stage, d.failure, d.cause) == (
        True,
        "kv_cache",
        "host_oom",
        "kv_alloc_failed",
    )
    assert "insufficient memory" in (d.first_error_text or "")
    assert d.engine_figures["context"] == 262144
    assert d.engine_figures["model_buffer"] > 0  # the weights were in before it failed
    assert any("--n_ctx 131072" in line for line in d.advice) or any("context" in line for line in d.advice)


def test_memory_cap_fails_at_the_compute_buffer(tiny_gguf: Path) -> None:
    output, code = _run_load(tiny_gguf, 65536, cap_mib=1500)
    assert code != 0
    d = _diagnose(output, code)
    assert (d.failure_stage, d.failure) == ("kv_cache", "host_oom")
    assert d.engine_figures["kv_buffer"] == 512 << 20  # the KV cache fitted; the compute buffer did not
    assert "compute" in output[output.index(d.first_error_text or "") :]


def test_missing_file(tmp_path: Path) -> None:
    output, code = _run_load(tmp_path / "nope.gguf", 2048)
    d = _diagnose(output, code)
    assert (d.failed, d.failure_stage, d.failure) == (True, "download", "file_missing")
    assert d.backend == "llama-cpp-python"


def test_truncated_gguf(tiny_gguf: Path, tmp_path: Path) -> None:
    data = tiny_gguf.read_bytes()
    half = tmp_path / "half.gguf"
    half.write_bytes(data[: len(data) // 2])
    d = _diagnose(*_run_load(half, 2048))
    assert (d.failed, d.failure_stage, d.failure, d.cause) == (
        True,
        "load_weights",
        "file_missing",  # "corrupted or incomplete": the files family (fetch it again)
        "truncated_file",
    )
    assert "download it again" in d.advice[0]
    header_only = tmp_path / "header.gguf"
    header_only.write_bytes(data[:100])
    d = _diagnose(*_run_load(header_only, 2048))
    assert (d.failure_stage, d.cause) == ("load_weights", "truncated_file")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_server_comes_up_answers_and_is_read_live(tiny_gguf: Path) -> None:
    import httpx

    port = _free_port()
    command = [sys.executable, "-m", "llama_cpp.server", "--model", str(tiny_gguf), "--n_ctx", "2048"]
    command += ["--host", "127.0.0.1", "--port", str(port)]
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace"
    )
    diagnoser = LogDiagnoser(kernel_log=lambda: None)
    lines: list[str] = []
    try:
        assert process.stdout is not None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = process.stdout.readline()
            if not line:
                break
            lines.append(line)
            tag = diagnoser.feed(line)
            if tag.stage == "ready":
                break
        assert diagnoser.result().stage == "ready", "".join(lines[-20:])
        reply = httpx.post(
            f"http://127.0.0.1:{port}/v1/completions",
            json={"prompt": "hello", "max_tokens": 4},
            timeout=60,
        )
        assert reply.status_code == 200
    finally:
        process.terminate()
        rest, _ = process.communicate(timeout=30)
    for line in rest.splitlines(keepends=True):
        lines.append(line)
        diagnoser.feed(line)
    diagnoser.note_exit(process.returncode)
    d = diagnoser.result()
    assert (d.failed, d.failure, d.stage) == (False, "none", "inference")
    assert d.backend == "llama-cpp-python"
    assert d.engine_figures["kv_buffer"] == 16 << 20  # 4 layers x 2048 cells x 512 x 2 (K,V) x f16
    assert d == diagnose_text("".join(lines), exit_code=process.returncode)


@pytest.mark.parametrize(
    ("lines", "engine"),
    [
        # Ollama's first releases logged Go's plain format ("routes.go:145:"), and its runner is Go: a panic
        (["2023/07/07 11:30:34 routes.go:145: Listening on 127.0.0.1:11434"], "ollama"),
        (
            [
                "llama_decode: failed to decode, ret = -3",
                "panic: failed to decode batch: llama_decode failed with code -3",
                "goroutine 23 [running]:",
            ],
            "ollama",
        ),
        # SGLang's scheduler stats as its 2025 releases word them
        (
            [
                "2025-10-20 03:02:22 INFO 31223 [DP3 TP3 EP3 scheduler_metrics_mixin.py:222] Decode batch. "
                "#running-req: 32, #token: 157952, token usage: 0.21"
            ],
            "sglang",
        ),
        (["[2025-05-14 09:31:43] Prefill batch. #new-seq: 2, #new-token: 2, #cached-token: 8027"], "sglang"),
        (
            ["(VllmWorkerProcess pid=802) ERROR 04-23 00:04:19 multiproc_worker_utils.py:240] Traceback"],
            "vllm",
        ),
        (
            [
                "Value error, The model type 'gemma3' does not support float16. Reason: Numerical instability. "
                "Please use bfloat16 or float32 instead."
            ],
            "vllm",
        ),
        (
            ["error loading model: error loading model architecture: unknown model architecture: 'llama4'"],
            "llama.cpp",
        ),
        (['error while handling argument "--flash-attn": expected value for argument'], "llama.cpp"),
        (
            [
                "RuntimeError: Error(s) in loading state_dict for LlamaForCausalLM:",
                "\tsize mismatch for model.embed_tokens.weight: copying a param with shape torch.Size([128256, 4096])",
            ],
            "transformers",
        ),
        # a llama-server reading a model from a folder named for vLLM (round 40): the name inside a path is
        # no mark of vLLM; vLLM's own env vars and a virtualenv named for it are
        (
            [
                "0.00.303.815 I srv    load_model: loading model '/home/me/gemma4-vllm/models/g-q4_0.gguf'",
                "0.00.403.815 I llama_model_loader: loaded meta data with 45 key-value pairs and 658 tensors "
                "from /home/me/gemma4-vllm/models/g-q4_0.gguf (version GGUF V3 (latest))",
            ],
            "llama.cpp",
        ),
        # a GGUF's own tags name vLLM (round 45): a quoted word of the model's metadata is no mark of it
        (
            [
                'llama_model_loader: - kv   8:  general.tags arr[str,2]       = ["vllm", "text-generation"]',
                "load_tensors: offloaded 25/25 layers to GPU",
            ],
            "llama.cpp",
        ),
        (
            [
                "WARNING 05-14 17:28:21 [cpu.py:106] Environment variable VLLM_CPU_KVCACHE_SPACE (GiB) for CPU "
                "backend is not set, using 4 by default."
            ],
            "vllm",
        ),
        # llama-server's slot timings alone
        (
            [
                "slot print_timing: id  0 | task 28 | prompt processing, n_tokens =  15360, progress = 0.56, "
                "t =   9.52 s / 1613.98 tokens per second"
            ],
            "llama.cpp",
        ),
    ],
)
def test_an_engine_is_told_by_its_own_source_words(lines: list[str], engine: str) -> None:
    assert diagnose_lines(lines, kernel_log=lambda: None).backend == engine


def test_vramtuis_transformers_runner_serving_is_the_ready_stage() -> None:
    """QA 11: the runner's own "ready: serving" line was tagged load weights: the app said STARTING for a
    server that was up, until its first request (the lines of a real run of the runner)."""
    lines = [
        "vramtui-runner: transformers 5.25.0, torch 2.13.0+cpu, cuda=False",
        "vramtui-runner: loading tokenizer from /tmp/qa11/tinyqwen",
        "vramtui-runner: loading weights from /tmp/qa11/tinyqwen (dtype=auto)",
        "vramtui-runner: weights loaded: 361600 parameters, 0.69 MiB on cpu in 1.59 s",
        "vramtui-runner: ready: serving '/tmp/qa11/tinyqwen' on http://127.0.0.1:47977 (max length 1024)",
    ]
    diagnosis = diagnose_lines(lines, kernel_log=lambda: None)
    assert diagnosis.backend == "transformers" and diagnosis.stage == "ready" and not diagnosis.failed
