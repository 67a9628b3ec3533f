"""Issue 13 #8 and issue 14: budget failures, compute buffers, a GPU full before loading, own stops.

The logs are real: vramtui's own runs under a memory budget (tests/data/logs), and public issues (URL
beside each excerpt).
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from vramtui.core.logs.diagnose import Diagnosis, diagnose_file, diagnose_text

LOGS = Path(__file__).resolve().parents[2] / "data" / "logs"
CONTAINER = "raise the container's memory limit"


def test_memory_error_importing_the_engine_under_a_small_budget_is_host_oom() -> None:
    # `vramtui check` of a transformers profile with memory_budget = "600MiB" (RLIMIT_AS): the
    # MemoryError is raised inside `import torch`.
    diagnosis = diagnose_file(LOGS / "transformers-budget-600-import.log")
    assert diagnosis.failure == "host_oom"
    assert diagnosis.cause == "budget_import"
    assert "too small to even import the engine" in diagnosis.summary
    # where: before the model, not the "best guess load_weights" beside "before any weights were read" (QA 26 D6)
    assert diagnosis.summary.startswith("Failed at start-up, before the model was read:"), diagnosis.summary
    advice = " ".join(diagnosis.advice)
    assert "600 MiB" in advice and "memory_budget" in advice
    assert CONTAINER not in advice and "nf4" not in advice and "bnb" not in advice.lower()


def test_the_same_memory_error_without_a_budget_header_is_no_budget_verdict() -> None:
    text = (LOGS / "transformers-budget-600-import.log").read_text()
    without = "\n".join(line for line in text.splitlines() if "memory budget" not in line)
    diagnosis = diagnose_text(without)
    assert diagnosis.cause != "budget_import"
    assert "memory_budget" not in " ".join(diagnosis.advice)


def test_openblas_failing_to_map_its_buffers_under_a_budget_is_the_import_the_budget_broke() -> None:
    """QA 37 F6: `vramtui check` of a transformers profile under a 500 MiB budget (a real run here): the only
    line is OpenBLAS's "Memory allocation still failed after 10 retries", as torch was imported. It read
    "not a memory problem"; 300 and 700 MiB read as the budget's. Without the budget it is host RAM."""
    text = (LOGS / "transformers-budget-500-openblas.log").read_text()
    diagnosis = diagnose_text(text)
    assert (diagnosis.failure, diagnosis.cause) == ("host_oom", "budget_import"), diagnosis.summary
    assert diagnosis.first_error_line == 4 and "500 MiB" in " ".join(diagnosis.advice)
    without = "\n".join(line for line in text.splitlines() if "memory budget" not in line)
    assert diagnose_text(without).failure == "host_oom"


def test_an_import_the_budget_broke_half_way_is_the_budgets() -> None:
    """QA 29: `vramtui check` of vLLM's CPU build under memory_budget = "1GiB": numpy's import broke part-way
    ("cannot import name 'Any' from partially initialized module 'typing'", then "numpy._core.multiarray
    failed to import") and it read "an error at load weights", "read the first error line". Without the
    budget's header it is no budget verdict; a package that is not installed is never the budget's."""
    text = (LOGS / "vllm-budget-1024-broken-import.log").read_text()
    diagnosis = diagnose_text(text)
    assert (diagnosis.failure, diagnosis.cause) == ("host_oom", "budget_import"), diagnosis.summary
    assert diagnosis.summary.startswith("Failed at start-up, before the model was read:")
    assert diagnosis.first_error_line == 36 and "1024 MiB" in " ".join(diagnosis.advice)
    without = "\n".join(line for line in text.splitlines() if "memory budget" not in line)
    assert diagnose_text(without).cause != "budget_import"
    missing = text.replace(
        "ImportError: cannot import name 'Any' from partially initialized module 'typing'",
        "ModuleNotFoundError: No module named 'cv2'",
    )
    assert diagnose_text(missing).cause != "budget_import"


def test_a_memory_error_starting_the_engines_own_process_is_the_budgets() -> None:
    """QA 29: the same 1 GiB budget, another run: vLLM's API server ran out pickling its config to start
    the engine core (multiprocessing's spawn), before any weight. It read "Failed at load_weights: a host-RAM
    allocation failed", "use a smaller quantization" (the wizard then tried cpu_offload)."""
    text = (LOGS / "vllm-budget-1024-spawn-memoryerror.log").read_text()
    diagnosis = diagnose_text(text)
    assert (diagnosis.failure, diagnosis.cause) == ("host_oom", "budget_start"), diagnosis.summary
    assert diagnosis.summary.startswith("Failed at start-up, before the model was read:")
    assert "quantization" not in " ".join(diagnosis.advice)
    without = "\n".join(line for line in text.splitlines() if "memory budget" not in line)
    assert diagnose_text(without).cause != "budget_start"


def test_a_loader_thread_the_budget_has_no_room_for_is_the_budgets_doing() -> None:
    # QA 11: the real transformers runner under 850 MiB (RLIMIT_AS): transformers 5's weight loader could not
    # start its pool ("RuntimeError: can't start new thread"). It was "other ... not a memory problem".
    diagnosis = diagnose_file(LOGS / "transformers-budget-850-loader-threads.log")
    assert (diagnosis.failure, diagnosis.cause, diagnosis.failure_stage) == (
        "host_oom",
        "loader_threads",
        "load_weights",
    )
    advice = " ".join(diagnosis.advice)
    assert "850 MiB" in advice and "`memory_budget`" in advice and "HF_DEACTIVATE_ASYNC_LOAD" in advice
    text = (LOGS / "transformers-budget-850-loader-threads.log").read_text()
    without = diagnose_text("\n".join(line for line in text.splitlines() if "memory budget" not in line))
    assert (without.failure, without.cause) == ("other", "loader_threads")  # no budget: a limit on threads
    assert "ulimit -u" in " ".join(without.advice)


def test_a_library_the_budget_leaves_no_room_to_map_is_the_budgets_doing() -> None:
    # Issue 22 #13: the real transformers runner under 300 MiB (RLIMIT_AS): the dynamic loader cannot map
    # libtorch while `import torch` runs. It was "other exception ... not a memory problem"; it is the
    # same verdict as the MemoryError at 600 MiB.
    diagnosis = diagnose_file(LOGS / "transformers-budget-300-import-map.log")
    assert (diagnosis.failure, diagnosis.cause) == ("host_oom", "budget_import")
    assert "libtorch_cpu.so: failed to map segment" in (diagnosis.first_error_text or "")
    advice = " ".join(diagnosis.advice)
    assert "too small to even import transformers" in advice and "`memory_budget`" in advice
    assert "bnb" not in advice.lower() and CONTAINER not in advice


def test_a_library_that_cannot_be_mapped_without_a_budget_is_a_host_allocation() -> None:
    text = (LOGS / "transformers-budget-300-import-map.log").read_text()
    without = "\n".join(line for line in text.splitlines() if "memory budget" not in line)
    diagnosis = diagnose_text(without)
    # host memory, while importing the engine (QA 29 Q9), and not the budget's
    assert (diagnosis.failure, diagnosis.cause) == ("host_oom", "host_import"), diagnosis.summary
    assert "memory_budget" not in " ".join(diagnosis.advice)


def test_a_budget_too_small_for_llama_server_to_start_is_the_budgets_doing() -> None:
    # Issue 22 #10: `vramtui check` of a real llama-server under memory_budget = "60MiB": std::thread cannot
    # map a stack (EAGAIN) before the model loads. It was "other ... Read the first error line", and the
    # wizard said "not a memory problem".
    diagnosis = diagnose_file(LOGS / "llama-server-budget-60-start.log")
    assert (diagnosis.failure, diagnosis.cause) == ("host_oom", "budget_start")
    assert "the memory budget is too small for the engine to start" in diagnosis.summary
    # QA 17 F13: "Failed at load_weights" beside advice that says it died before reading any weights
    assert diagnosis.summary.startswith("Failed at start-up, before the model was read")
    assert "Resource temporarily unavailable" in (diagnosis.first_error_text or "")
    advice = " ".join(diagnosis.advice)
    assert "60 MiB is too small for llama.cpp to start" in advice and "`memory_budget`" in advice
    assert "--ctx-size" not in advice and CONTAINER not in advice  # no engine setting helps
    assert "a few hundred MiB of address space" in advice  # no measure of the engine in this log
    # where vramtui measured what the engine needs to come up, its advice names that figure (QA 24 F10)
    lines = (LOGS / "llama-server-budget-60-start.log").read_text().splitlines(keepends=True)
    measured = "vramtui: the engine itself needs 147 MiB of it to come up (measured)\n"
    said = " ".join(diagnose_text("".join([lines[0], measured, *lines[1:]])).advice)
    assert "well above the 147 MiB the engine itself needs to come up (measured by vramtui" in said, said


# Real llama-server runs under a host budget that failed after the weights, in words that are not ggml's
# failed malloc: each is the budget's host memory at the cache's stage, with the budget in its advice.
#   700 MiB, a Q4_0 file, -c 512: libgomp could not start a thread after the cache (QA: "not a memory
#     problem"); the buffers took the room, so a smaller context is advised first.
#   200 MiB, -c 4096: ggml_init's context memory refused, GGML_ASSERT(ctx->mem_buffer != NULL) (QA: `check`
#     flipped between host OOM and "other ... read the first error line" from run to run).
BUDGET_FAILURES_AFTER_THE_WEIGHTS = {
    "llama-server-budget-700-omp-threads.log": (
        "thread_no_room",
        "libgomp: Thread creation failed",
        ("--ctx-size 256 (now 512)", "`memory_budget`"),
    ),
    "llama-server-budget-200-ggml-init-assert.log": (
        "host_alloc",
        "mem_buffer != NULL",
        ("`memory_budget`",),
    ),
}


@pytest.mark.parametrize("log", list(BUDGET_FAILURES_AFTER_THE_WEIGHTS))
def test_a_budget_failure_after_the_weights_is_host_memory_at_the_cache(log: str) -> None:
    cause, said, advised = BUDGET_FAILURES_AFTER_THE_WEIGHTS[log]
    diagnosis = diagnose_file(LOGS / log)
    assert (diagnosis.failure, diagnosis.cause, diagnosis.failure_stage) == ("host_oom", cause, "kv_cache")
    assert said in (diagnosis.first_error_text or "")
    advice = " ".join(diagnosis.advice)
    assert all(words in advice for words in advised), advice


def test_weights_that_cannot_be_mapped_are_a_weights_failure_with_a_smaller_file_as_the_move() -> None:
    """QA: a real llama-server under 700 MiB could not mmap its 786 MiB f16 file; `check` said "stage
    reached: kv cache" (server's "load_model: failed to load model" tagged as its slots' stage) and the
    advice said to lower --ctx-size, which sizes nothing while the weights load."""
    from vramtui.core.logs.diagnose import LogDiagnoser

    log = LOGS / "llama-server-budget-700-mmap-weights.log"
    diagnosis = diagnose_file(log)
    assert (diagnosis.failure, diagnosis.failure_stage, diagnosis.stage) == (
        "host_oom",
        "load_weights",
        "load_weights",
    )
    advice = " ".join(diagnosis.advice)
    assert "smaller quantization" in advice and "--ctx-size" not in advice
    streamed = LogDiagnoser(backend="llama.cpp")
    stages = {streamed.feed(line).stage for line in log.read_text().splitlines()}
    assert "kv_cache" not in stages


def test_the_same_thread_failure_without_a_budget_names_the_thread_limit() -> None:
    text = (LOGS / "llama-server-budget-60-start.log").read_text()
    without = "\n".join(line for line in text.splitlines() if "memory budget" not in line)
    diagnosis = diagnose_text(without)
    assert (diagnosis.failure, diagnosis.cause) == ("other", "thread_start")
    assert "could not start a thread" in diagnosis.summary
    assert "ulimit -u" in " ".join(diagnosis.advice) and "memory_budget" not in " ".join(diagnosis.advice)


def test_a_crash_before_the_engine_printed_a_line_under_a_budget_is_the_budgets_doing() -> None:
    # Under a 10 MiB budget the real llama-server dies of SIGSEGV before a line of its own: the run log is
    # vramtui's header and the launcher's line for the signal.
    header = (
        "vramtui: launch llama-server --model /m.gguf --port 8080\n"
        "vramtui: memory budget 10 MiB, enforced on the host (address-space limit)\n"
    )
    crash = "vramtui: the server was killed by SIGSEGV (signal 11) 0 s after launch, before it was ready\n"
    diagnosis = diagnose_text(header + crash)
    assert (diagnosis.failure, diagnosis.cause) == ("host_oom", "budget_start")
    assert "10 MiB is too small" in " ".join(diagnosis.advice)
    # after the engine's own lines a crash is a crash, budget or not
    started = "0.00.016.027 I cmn  common_param: common_params_print_info: build 1 (0c1e570)\n"
    assert diagnose_text(header + started + crash).cause == "crash"
    # with no budget, before a line of the engine's own: it died at once, said as the start-up's (QA 19 F5);
    # the same crash line in an excerpt with no launch line is a crash
    assert diagnose_text(header.splitlines()[0] + "\n" + crash).cause == "died_at_start"
    assert diagnose_text(crash).cause == "crash"


@pytest.mark.parametrize("feed", ["text", "file"])
def test_a_program_that_died_at_once_is_quoted_by_its_own_last_words(tmp_path: Path, feed: str) -> None:
    """QA 20 D3: diagnose's first error was vramtui's exit line; the program's own line says why."""
    stamp = "2026-12-06T09:30:40.731 "
    launch = f"{stamp}vramtui: launch ./exit3.sh --model m.gguf --port 8080\n{stamp}vramtui: server PID 7\n"
    said = f"{stamp}fake server: cannot open config /etc/fake.conf\n"
    exited = f"{stamp}vramtui: the server exited with status 3\n"

    def diagnosed(text: str) -> Diagnosis:
        if feed == "text":
            return diagnose_text(text, kernel_log=lambda: None)
        log = tmp_path / "run.log"
        log.write_text(text)
        return diagnose_file(log, kernel_log=lambda: None)

    diagnosis = diagnosed(launch + said + exited)
    assert diagnosis.cause == "died_at_start"
    assert diagnosis.first_error_line == 3 and diagnosis.first_error_text == said.strip()
    assert diagnosis.evidence[1] == "line 4: " + exited.strip()
    # a line that reads like an error among many is still found; 40 lines of chatter are no one's words
    chatter = "".join(f"{stamp}step {n} done\n" for n in range(40))
    assert diagnosed(launch + chatter + said + exited).first_error_line == 43
    plain = diagnosed(launch + chatter + exited)
    assert plain.cause == "died_at_start" and plain.first_error_line == 43
    assert "exited with status 3" in (plain.first_error_text or "")
    # bytes a program dumped before its last line are no words of its own (QA 23 D5: vramtui's exit line
    # was quoted where the program's own last line, after 20 kB of binary, said why)
    dumped = random.Random(0).randbytes(20000).decode("utf-8", "replace")
    garbage = "".join(f"{stamp}{line}\n" for line in dumped.splitlines() if line.strip())
    last = f"{stamp}zzz lorem ipsum\n"
    words = diagnosed(launch + garbage + last + exited)
    assert words.cause == "died_at_start" and words.first_error_text == last.strip(), words.first_error_text


def test_a_budget_failure_names_the_profiles_memory_budget_not_the_container() -> None:
    # The real KV-cache failure under RLIMIT_AS, headed as vramtui heads its run logs.
    log = (LOGS / "llama-cpp-python-rlimit-kv.log").read_text()
    headed = "vramtui: memory budget 1500 MiB, enforced on the host (address-space limit)\n" + log
    diagnosis = diagnose_text(headed)
    assert diagnosis.failure == "host_oom" and diagnosis.failure_stage == "kv_cache"
    advice = " ".join(diagnosis.advice)
    assert "`memory_budget`" in advice and "1500 MiB" in advice
    # The budget may have come from `check`/`wizard --budget`, with no memory_budget in the file (QA 32 D7).
    assert "`--budget`" in advice
    assert CONTAINER not in advice
    plain = diagnose_text(log)  # no header: the limit is the machine's
    assert CONTAINER in " ".join(plain.advice)


def test_compute_buffer_failure_is_kv_cache_with_its_own_advice_first() -> None:
    diagnosis = diagnose_file(LOGS / "llama-cpp-python-rlimit-compute.log")
    assert diagnosis.failure_stage == "kv_cache"
    assert diagnosis.cause == "compute_alloc_failed"
    first, second, third = diagnosis.advice[:3]
    assert "flash attention" in first.lower() and "--flash_attn true" in first
    assert "--n_ubatch" in second
    assert "--n_ctx" in third


def test_no_advice_asks_for_a_context_or_micro_batch_it_has_already() -> None:
    """QA: "lower --n_ctx 512 (now 512)". The same real run, its n_ctx and n_ubatch lines set to 256."""
    text = (LOGS / "llama-cpp-python-rlimit-compute.log").read_text()
    small = text.replace("n_ctx                 = 65536", "n_ctx                 = 256").replace(
        "n_ubatch              = 512", "n_ubatch              = 256"
    )
    assert small.count("= 256") == 2
    said = " ".join(diagnose_text(small).advice)
    assert "--n_ctx" not in said and "--n_ubatch" not in said and "flash attention" in said.lower()
    assert "--n_ctx 32768 (now 65536)" in " ".join(
        diagnose_file(LOGS / "llama-cpp-python-rlimit-compute.log").advice
    )
    # flash attention on and a micro-batch of 256 already: the context is the first line, not "Then ..."
    only_context = text.replace("n_ubatch              = 512", "n_ubatch              = 256").replace(
        "flash_attn            = disabled", "flash_attn            = enabled"
    )
    assert diagnose_text(only_context).advice[0] == "A shorter context: --n_ctx 32768 (now 65536)."


def test_kv_cache_failure_keeps_the_kv_cache_advice() -> None:
    diagnosis = diagnose_file(LOGS / "llama-cpp-python-rlimit-kv.log")
    assert diagnosis.failure_stage == "kv_cache"
    assert diagnosis.cause != "compute_alloc_failed"
    assert "--n_ctx" in diagnosis.advice[0]


# The cudaMalloc and ggml_gallocr_reserve_n lines are quoted in a comment of
# https://github.com/ollama/ollama/issues/9782 (qwen3:8b on a 4 GB RTX 3050 Ti); the lines around them
# are llama.cpp's, in the order the real CPU run of llama-cpp-python-rlimit-compute.log prints them.
GPU_COMPUTE = """\
llama_context: n_ctx         = 8192
ggml_backend_cuda_buffer_type_alloc_buffer: allocating 799.60 MiB on device 0: cudaMalloc failed: out of memory
ggml_gallocr_reserve_n: failed to allocate CUDA0 buffer of size 838447104
graph_reserve: failed to allocate compute buffers
llama_init_from_model: failed to initialize the context: failed to allocate compute pp buffers
"""


def test_gpu_compute_buffer_failure_is_the_compute_buffer_on_llama_server() -> None:
    diagnosis = diagnose_text(GPU_COMPUTE, backend="llama.cpp")
    assert (diagnosis.failure, diagnosis.failure_stage) == ("cuda_oom", "kv_cache")
    assert diagnosis.cause == "compute_alloc_failed"
    # the excerpt does not say whether flash attention was on (llama-server's default `auto` has it on
    # where it runs): the smaller micro-batch first, flash attention as a condition (QA 32 D6)
    assert "--ubatch-size" in diagnosis.advice[0]
    assert (
        diagnosis.advice[1].startswith("If flash attention is off")
        and "--flash-attn on" in diagnosis.advice[1]
    )
    shown_off = diagnose_text("llama_context: flash_attn    = disabled\n" + GPU_COMPUTE, backend="llama.cpp")
    assert shown_off.advice[0].startswith("Turn on flash attention: --flash-attn on")


# https://github.com/ggml-org/llama.cpp/issues/3199 (the reply in #3221: "failing during initialization
# while enumerating the devices, before any allocations are actually made")
GPU_FULL_AT_INIT = """\
Log start
main: build = 1233 (98311c4)
main: seed  = 1694805687

CUDA error 2 at /data/llama.cpp/ggml-cuda.cu:5509: out of memory
current device: 0
"""


def test_out_of_memory_enumerating_devices_means_the_gpu_was_already_full() -> None:
    diagnosis = diagnose_text(GPU_FULL_AT_INIT)
    assert diagnosis.failure == "cuda_oom"
    assert diagnosis.cause == "gpu_full_at_start"
    advice = " ".join(diagnosis.advice)
    assert "nvidia-smi" in advice and "CUDA_VISIBLE_DEVICES" in advice
    assert "shorter prompts" not in advice


def test_out_of_memory_in_a_device_memory_query_means_the_gpu_was_already_full() -> None:
    # ggml's CUDA error report as Ollama's journal prints it, from https://github.com/ollama/ollama/issues/6637
    # (unseen round 6), where the error was "CUDA-capable device(s) is/are busy": here the same report
    # with "out of memory", the error the same call returns when the GPU is full.
    text = (
        "Sep 04 13:22:14 FORGE ollama[1461072]: CUDA error: out of memory\n"
        "Sep 04 13:22:14 FORGE ollama[1461072]:   current device: 0, in function "
        "ggml_backend_cuda_get_device_memory at /go/src/github.com/ollama/ollama/llm/llama.cpp/ggml/src/ggml-cuda.cu:3040\n"
        "Sep 04 13:22:14 FORGE ollama[1461072]:   cudaMemGetInfo(free, total)\n"
    )
    diagnosis = diagnose_text(text)
    assert diagnosis.cause == "gpu_full_at_start"
    assert "shorter prompts" not in " ".join(diagnosis.advice)


def test_an_ordinary_cuda_oom_during_a_request_is_not_a_full_gpu() -> None:
    # https://github.com/ollama/ollama/issues/3431: the pool allocator, mid-request.
    text = (
        "CUDA error: out of memory\n"
        "  current device: 0, in function alloc at C:\\a\\ollama\\ollama\\llm\\llama.cpp\\ggml-cuda.cu:532\n"
        "  cuMemSetAccess(pool_addr + pool_size, reserve_size, &access, 1)\n"
    )
    assert diagnose_text(text).cause != "gpu_full_at_start"


def test_a_server_vramtui_stopped_is_not_an_oom_kill() -> None:
    # A real `vramtui check` log: the launcher writes its stop line before SIGTERM.
    path = LOGS / "llama-cpp-python-stopped-by-vramtui.log"
    assert "vramtui: stopping the server" in path.read_text()
    for exit_code in (-9, 137, -15):
        diagnosis = diagnose_file(path, exit_code=exit_code)
        assert not diagnosis.failed and diagnosis.failure == "none", exit_code
        assert diagnosis.stopped_by_vramtui
        assert "vramtui stopped the server" in diagnosis.summary


def test_a_kill_line_after_vramtuis_stop_is_the_stop() -> None:
    text = (LOGS / "llama-cpp-python-stopped-by-vramtui.log").read_text() + "Killed\n"
    diagnosis = diagnose_text(text, exit_code=137)
    assert diagnosis.failure != "host_oom_killed" and not diagnosis.failed


def test_a_kill_without_vramtuis_stop_line_is_still_a_kill() -> None:
    text = (LOGS / "llama-cpp-python-stopped-by-vramtui.log").read_text()
    without = "\n".join(line for line in text.splitlines() if "vramtui: stopping" not in line)
    diagnosis = diagnose_text(without, exit_code=137)
    assert diagnosis.failure == "host_oom_killed"


def test_sixteen_slots_under_a_budget_name_the_slots_and_no_wider_cache() -> None:
    """QA 12: llama-server with 16 slots and a q4_0 cache under 250 MiB: the advice offered q8_0 ("half its
    bytes", twice the q4_0 cache) and never the slots, whose 20 HTTP threads' stacks took the room."""
    diagnosis = diagnose_file(LOGS / "llama-server-budget-250-np16-q4-kv.log")
    assert (diagnosis.failure, diagnosis.failure_stage) == ("host_oom", "kv_cache")
    advice = " ".join(diagnosis.advice)
    assert "q8_0" not in advice
    assert "20 HTTP threads" in advice and "--parallel 2" in advice


def test_the_graph_allocators_own_tables_refused_under_a_budget_is_host_oom() -> None:
    """QA 12: the same server at 4096 tokens died on GGML_ASSERT(galloc->node_allocs != NULL) (a calloc in
    ggml-alloc.c): it read "the run failed ... read the first error line", and the wizard stopped on
    "not a memory problem"."""
    diagnosis = diagnose_file(LOGS / "llama-server-budget-250-np16-galloc-assert.log")
    assert (diagnosis.failure, diagnosis.cause) == ("host_oom", "host_alloc")
    assert "galloc->node_allocs" in (diagnosis.first_error_text or "")
    assert "`memory_budget`" in " ".join(diagnosis.advice)
    # QA 12: a shorter context that leaves each of 16 slots 128 tokens is said to be too few
    assert "128 tokens for each of the 16 slots, too few" in diagnosis.advice[0]
    assert "fewer slots (--parallel) first" in diagnosis.advice[0]


def test_weights_host_ram_could_not_hold_get_transformers_settings() -> None:
    """QA 11: the real transformers runner under 1200 MiB could not mmap the weights: the advice was
    llama.cpp's "a smaller quantization (a smaller file)", which names nothing a transformers user sets."""
    diagnosis = diagnose_file(LOGS / "transformers-budget-1200-mmap-weights.log")
    assert (diagnosis.failure, diagnosis.failure_stage) == ("host_oom", "load_weights")
    advice = " ".join(diagnosis.advice)
    assert "a smaller file" not in advice
    assert 'dtype = "bfloat16"' in advice and "1200 MiB" in advice
    # under vramtui's address-space budget a disk offload is mapped all the same: not offered (QA 13)
    assert 'device_map = "auto"' not in advice
    # QA 21 F3: loaded at bfloat16 already (the profile's dtype), the same failure is not told to load at
    # 16 bits: the float32 file is mapped whole whatever the dtype
    bf16 = diagnose_file(LOGS / "transformers-budget-1000-bf16-mmap-weights.log")
    assert (bf16.failure, bf16.failure_stage) == ("host_oom", "load_weights")
    said = " ".join(bf16.advice)
    assert 'dtype = "bfloat16"' not in said and "loaded at 16 bits already" in said
    assert 'quant = "bnb-4bit"' in said and "1000 MiB" in said


@pytest.mark.parametrize(
    "name",
    ["transformers-budget-600-import-null-return.log", "transformers-budget-600-import-null-getattr.log"],
)
def test_a_c_function_failing_without_an_exception_under_the_budget_is_the_budgets_doing(name: str) -> None:
    # The real runner under 600 MiB (RLIMIT_AS) sometimes dies importing the engine with CPython's
    # "SystemError: error return without exception set" (or "... returned NULL without setting an exception")
    # instead of a MemoryError: the wizard test flaked on it in CI, read as "other".
    diagnosis = diagnose_file(LOGS / name)
    assert (diagnosis.failure, diagnosis.cause) == ("host_oom", "budget_import")
    assert "SystemError" in (diagnosis.first_error_text or "")
    text = (LOGS / name).read_text()
    without = diagnose_text("\n".join(line for line in text.splitlines() if "memory budget" not in line))
    assert without.cause == "null_return" and "memory_budget" not in " ".join(without.advice)


def test_a_failure_whose_traceback_began_before_vramtuis_stop_is_the_failure() -> None:
    """QA 21 F4: a saved request ran out of host memory; vramtui stopped the server as the empty answer
    came back, and its stop line landed inside the runner's traceback (real run log). The error line after
    the stop read "no failure; vramtui stopped the server itself"."""
    log = LOGS / "transformers-budget-1100-request-oom-stop-midtrace.log"
    lines = log.read_text().splitlines()
    stop = next(n for n, line in enumerate(lines, 1) if "vramtui: stopping the server" in line)
    diagnosis = diagnose_file(log, kernel_log=lambda: None)
    assert (diagnosis.failure, diagnosis.failure_stage) == ("host_oom", "inference"), diagnosis.summary
    assert diagnosis.first_error_line is not None and diagnosis.first_error_line > stop
    # an error whose report began after the stop is still the stop's doing
    began = next(n for n, line in enumerate(lines, 1) if line.endswith("Traceback (most recent call last):"))
    assert began < stop
    report = ["Traceback (most recent call last):", '  File "x.py", line 1', "RuntimeError: boom"]
    after = [*lines[: began - 1], lines[stop - 1], *report]
    assert not diagnose_text("\n".join(after), kernel_log=lambda: None).failed


def test_an_answer_that_came_back_empty_is_explained_by_the_logs_failure() -> None:
    """QA 21 F4: the empty answer read "the chat template probably does not match the model" beside a log
    that shows the request's out-of-memory error."""
    from vramtui.core.launch.launcher import _told_by_log
    from vramtui.core.launch.smoke import SmokeResult

    diagnosis = diagnose_file(
        LOGS / "transformers-budget-1100-request-oom-stop-midtrace.log", kernel_log=lambda: None
    )
    empty = SmokeResult(
        False, 200, "answered 200 with empty text: the chat template probably does not match", kind="empty"
    )
    told = _told_by_log(empty, diagnosis)
    assert told is not None and "chat template" not in told.meaning
    assert told.meaning.startswith("answered 200 with empty text, and the server's log says why: a host-RAM")
    assert f"(line {diagnosis.first_error_line})" in told.meaning
    # a log with no failure while serving leaves the guess as it was
    healthy = diagnose_text("main: server is listening on http://127.0.0.1:8080\n", kernel_log=lambda: None)
    assert _told_by_log(empty, healthy) is empty


def test_the_budgets_context_advice_takes_off_what_the_engine_itself_needs() -> None:
    """QA 23 D4, QA 24 F1: diagnose's context advice under a host budget disagreed with the wizard's (8192
    where 16384 runs; 131072 where 8192 runs, for a context left to the engine). A run log now says what the
    engine itself needs of the budget (measured by vramtui: 147 MiB here), and the compute buffer llama.cpp's
    fit projected shrinks with the context (its KQ mask). Both logs are real runs of vramtui's check; a log
    without the measured line takes the backend's figure (240 MiB): the safe side."""
    both = (
        ("llama-server-budget-400-np4-kv.log", 16384, 16384),  # context 262144 in 4 slots, 400 MiB
        ("llama-server-budget-300-default-ctx-kv.log", 8192, 4096),  # the context left to the engine, 300 MiB
    )
    line = "vramtui: the engine itself needs 147 MiB of it to come up (measured)"
    for name, measured_fit, assumed_fit in both:
        log = (LOGS / name).read_text()
        lines = [text for text in log.splitlines(keepends=True) if "the engine itself needs" not in text]
        assumed = diagnose_text("".join(lines), kernel_log=lambda: None)
        with_floor = "".join([*lines[:3], f"2026-12-06T14:16:22.329 {line}\n", *lines[3:]])
        measured = diagnose_text(with_floor, kernel_log=lambda: None)
        assert measured.engine_figures["engine_floor"] == 147 * 2**20
        for diagnosis, fit in ((measured, measured_fit), (assumed, assumed_fit)):
            said = diagnosis.advice[0]
            assert said.startswith(f"Host RAM could not hold the KV cache: lower --ctx-size {fit} "), (
                name,
                said,
            )


def test_numpys_array_memory_error_under_a_budget_is_host_memory_at_the_kv_cache() -> None:
    """QA 26 D2: a real llama-cpp-python run under a 250 MiB budget died in numpy's `_ArrayMemoryError` (a
    MemoryError subclass) after its KV cache; it read as "the server exited with status 1". Its traceback
    runs from `llama_cpp/server/__main__.py ... in <module>`: the program `python -m` ran, not an import."""
    diagnosis = diagnose_file(LOGS / "llama-cpp-python-budget-250-numpy-array-memory.log")
    assert diagnosis.failure == "host_oom" and diagnosis.failure_stage == "kv_cache"
    assert "_ArrayMemoryError: Unable to allocate" in (diagnosis.first_error_text or "")
    assert diagnosis.cause != "budget_import"  # it had imported, loaded its weights and built its cache
    assert any("`memory_budget`" in line and "250 MiB" in line for line in diagnosis.advice)


def test_a_server_that_never_answered_under_its_budget_is_the_budgets_doing() -> None:
    """QA 26 D3, QA 27 N2: llama-cpp-python under a 200 MiB budget (context 256) loaded its model and
    listened, then answered every readiness probe with HTTP 500 (its handler failing to read the request);
    without the budget it answers at once. It read "failed at inference (other)", then "not a memory
    problem". The real run's log: its first 500s, then vramtui's lines when it gave up (the repeats cut)."""
    diagnosis = diagnose_file(LOGS / "llama-cpp-python-budget-200-http-500.log")
    assert diagnosis.failure_stage == "ready" and diagnosis.stage == "ready"  # it served nothing
    assert diagnosis.failure == "host_oom" and diagnosis.cause == "budget_no_serve"
    # the exception under uvicorn's "Exception in ASGI application", not that wrapper's line
    assert "JSONDecodeError: Expecting value" in (diagnosis.first_error_text or "")
    assert any("`memory_budget`" in line for line in diagnosis.advice)
    assert not any("context" in warning for warning in diagnosis.warnings)  # no request-only warnings
    plain = diagnose_text(
        "\n".join(
            line
            for line in (LOGS / "llama-cpp-python-budget-200-http-500.log").read_text().splitlines()
            if "memory budget" not in line
        )
    )
    assert plain.failure == "other"  # without the budget's header, nothing says memory


def test_host_ram_running_out_while_the_engine_imports_itself_is_no_quantization_problem() -> None:
    """QA 29 Q9: vLLM's CPU build started by hand under `ulimit -v 1048576` (no vramtui budget): a
    MemoryError compiling one of vLLM's own modules, before any model line. It read "best guess load_weights"
    and "use a smaller quantization". The same error under vramtui's budget is the budget's."""
    text = (
        Path(__file__).resolve().parents[2] / "data" / "vllm" / "import-memory-error-ulimit.log"
    ).read_text()
    diagnosis = diagnose_text(text)
    assert (diagnosis.failure, diagnosis.cause) == ("host_oom", "host_import"), diagnosis.summary
    assert diagnosis.summary.startswith("Failed at start-up, before the model was read:"), diagnosis.summary
    advice = " ".join(diagnosis.advice)
    assert "quantization does not help" in advice and "ulimit -v" in advice
    assert "memory_budget" not in advice and "use a smaller quantization" not in advice
    budgeted = "vramtui: memory budget 1024 MiB, enforced on the host (address-space limit)\n" + text
    assert diagnose_text(budgeted).cause == "budget_import"
    # a MemoryError raised once the model was being read is not the import's
    loading = text.replace(
        "W1206 19:24:00.363000", "INFO 12-06 19:24:00 Loading weights took 1.00 seconds\nW1206"
    )
    assert diagnose_text(loading).cause != "host_import"


def test_a_thread_abort_right_after_listening_failed_coming_up_with_the_batch_advised() -> None:
    """QA 35 F9: a real llama-server under 500 MiB at -c 2048 aborted (std::system_error, EAGAIN) right after
    "listening on", before its health check passed and before any request: it read "Failed at inference"
    and advised only a shorter context, where the wizard's smaller batch (2048 -> 256) made it answer."""
    diagnosis = diagnose_file(LOGS / "llama-server-budget-500-ctx2048-thread-abort-after-listening.log")
    assert (diagnosis.failure, diagnosis.cause) == ("host_oom", "thread_no_room"), diagnosis.summary
    assert (diagnosis.failure_stage, diagnosis.stage) == ("ready", "ready"), diagnosis.summary
    advice = " ".join(diagnosis.advice)
    assert "a smaller batch (--batch-size" in advice and "--ctx-size 1024 (now 2048)" in advice, advice
