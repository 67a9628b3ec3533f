"""Cases a QA pass found: llama.cpp context-buffer failures, the first traceback's exception line,
sub-step advice (CUDA-graph capture, transformers loading), quantization that was asked for but not
applied, wrong formats per backend, a stage with no line behind it, and a context fitted to a budget."""

from __future__ import annotations

from vramtui.core.logs.diagnose import Diagnosis, diagnose_lines, diagnose_text


def no_kernel_log() -> None:
    return None


def _diagnose(text: str, **kwargs: object) -> Diagnosis:
    return diagnose_text(text, kernel_log=no_kernel_log, **kwargs)  # type: ignore[arg-type]


# -- 1. llama.cpp KV-cache and compute-buffer allocation failures --------------------------------------
LLAMA_CONTEXT_HEAD = (
    "llama_model_loader: loaded meta data with 29 key-value pairs and 292 tensors from /m/q8.gguf\n"
    "load_tensors: offloaded 33/33 layers to GPU\n"
    "load_tensors:        CUDA0 model buffer size =  7605.33 MiB\n"
    "llama_init_from_model: n_ctx         = 131072\n"
    "llama_init_from_model: flash_attn    = 0\n"
)


def test_kv_cache_allocation_failure_alone_is_a_gpu_oom_at_kv_cache() -> None:
    diagnosis = _diagnose("llama_kv_cache_init: failed to allocate buffer for kv cache\n")
    assert (diagnosis.failure, diagnosis.failure_stage) == ("cuda_oom", "kv_cache")
    assert diagnosis.first_error_line == 1


def test_kv_and_compute_failures_after_gpu_buffers_are_gpu_oom() -> None:
    for line in (
        "llama_kv_cache_init: failed to allocate buffer for kv cache",
        "llama_kv_cache_unified: failed to allocate buffer for kv cache",
        "llama_new_context_with_model: failed to allocate compute buffers",
        "graph_reserve: failed to allocate compute buffers",
    ):
        text = LLAMA_CONTEXT_HEAD + line + "\nllama_init_from_model: failed to initialize the context\n"
        diagnosis = _diagnose(text)
        assert (diagnosis.failure, diagnosis.failure_stage) == ("cuda_oom", "kv_cache"), line
        assert diagnosis.first_error_line == 6, line
        # The context the log printed is read (llama_init_from_model's wording), so the advice halves it.
        assert diagnosis.engine_figures["context"] == 131072
        # A KV-cache failure leads with the context; a compute buffer's own advice (issue 14) puts flash
        # attention and the micro-batch first, the context third.
        at = 0 if "kv cache" in line else 2
        assert "--ctx-size 65536 (now 131072)" in diagnosis.advice[at], line
        if at:
            assert "--flash-attn on" in diagnosis.advice[0] and "--ubatch-size" in diagnosis.advice[1]


def test_a_cpu_buffer_failure_before_the_kv_line_is_host_out_of_memory() -> None:
    # Issue 13: ggml's CPU buffer failing is host memory running out (host_oom); the next line says it was the
    # KV cache's
    text = (
        "llama_kv_cache_init: kv_size = 1048576, offload = 1, type_k = 'f16', type_v = 'f16'\n"
        "ggml_backend_cpu_buffer_type_alloc_buffer: failed to allocate buffer of size 137438953504\n"
        "llama_kv_cache_init: failed to allocate buffer for kv cache\n"
    )
    diagnosis = _diagnose(text)
    assert (diagnosis.failure, diagnosis.cause) == ("host_oom", "kv_alloc_failed")
    assert diagnosis.first_error_line == 2


# -- 6. a quantized V cache needs flash attention ----------------------------------------------------
def test_llama_kv_quantization_advice_names_flash_attention_per_backend() -> None:
    for backend, words in (
        ("llama.cpp", ("--cache-type-k q8_0", "--cache-type-v q8_0", "--flash-attn on")),
        ("llama-cpp-python", ("--type_k 8", "--type_v 8", "--flash_attn true")),
        ("ollama", ("OLLAMA_KV_CACHE_TYPE=q8_0", "OLLAMA_FLASH_ATTENTION=1")),
    ):
        diagnosis = _diagnose(
            # The KV cache's own failure: the compute buffer's advice does not quantize the KV cache.
            LLAMA_CONTEXT_HEAD + "llama_kv_cache_init: failed to allocate buffer for kv cache\n",
            backend=backend,
        )
        kv = [line for line in diagnosis.advice if "KV cache" in line and "Quantize" in line]
        assert len(kv) == 1, (backend, diagnosis.advice)
        for word in words:
            assert word in kv[0], (backend, kv[0])


# -- 2. an unfamiliar exception: its own line, not the traceback header --------------------------------
TRACEBACK = (
    "2026-11-30T05:48:26.550 vramtui-runner: loading tokenizer from /models/tiny\n"
    "2026-11-30T05:48:28.884 Traceback (most recent call last):\n"
    '2026-11-30T05:48:28.885   File "/srv/run.py", line 94, in load\n'
    "2026-11-30T05:48:28.885     self.tokenizer = transformers.AutoTokenizer.from_pretrained(path)\n"
    '2026-11-30T05:48:28.890   File "/venv/transformers/tokenization_utils_tokenizers.py", line 422, in __init__\n'
    "2026-11-30T05:48:28.890     raise ValueError(\n"
    "2026-11-30T05:48:28.890 {exception}\n"
    "2026-11-30T05:48:28.890 vramtui-runner: error: loading failed\n"
)


def test_an_unfamiliar_exception_is_reported_at_its_own_line() -> None:
    diagnosis = _diagnose(
        TRACEBACK.format(exception="ValueError: the frobnicator refused this checkpoint"),
        backend="transformers",
    )
    assert diagnosis.failed and diagnosis.failure == "other"
    assert diagnosis.first_error_line == 7
    assert "ValueError: the frobnicator refused" in (diagnosis.first_error_text or "")
    assert "ValueError: the frobnicator refused" in diagnosis.evidence[0]


def test_chained_unfamiliar_exceptions_report_the_first_tracebacks_exception() -> None:
    text = (
        "Traceback (most recent call last):\n"
        '  File "/srv/a.py", line 3, in <module>\n'
        "    load()\n"
        "KeyError: 'model_type'\n"
        "\n"
        "During handling of the above exception, another exception occurred:\n"
        "\n"
        "Traceback (most recent call last):\n"
        '  File "/srv/a.py", line 5, in <module>\n'
        "    raise RuntimeError('giving up')\n"
        "RuntimeError: giving up\n"
    )
    diagnosis = _diagnose(text)
    assert diagnosis.first_error_line == 4
    assert diagnosis.first_error_text == "KeyError: 'model_type'"


_CHAIN = (
    "vramtui-runner: loading weights from /m (dtype=auto, attn_implementation=flash_attention_2)\n"
    "Traceback (most recent call last):\n"
    '  File "/site-packages/httpx/_transports/default.py", line 95, in map_httpcore_exceptions\n'
    "    yield\n"
    "httpx.ConnectError: [Errno -2] Name or service not known\n"
    "\n"
    "{link}\n"
    "\n"
    "Traceback (most recent call last):\n"
    '  File "/site-packages/transformers/modeling_utils.py", line 1558, in _flash_attn_import_error\n'
    "    raise ImportError(\n"
    "ImportError: FlashAttention2 has been toggled on, but it cannot be used due to the following error: "
    "the package for FlashAttention2 doesn't seem to be installed.\n"
)


def test_the_exception_raised_while_handling_a_failed_fallback_is_the_failure() -> None:
    # QA 11: offline, transformers 5 first asks the Hub for a flash-attn kernel (a network error), then
    # raises the ImportError that stopped the load: not a network failure
    link = "During handling of the above exception, another exception occurred:"
    diagnosis = _diagnose(_CHAIN.format(link=link), backend="transformers")
    assert diagnosis.cause == "flash_attn_missing"
    assert (diagnosis.failure_stage, diagnosis.first_error_line) == ("load_weights", 12)
    assert "flash_attn = false" in diagnosis.advice[0]
    assert not diagnosis.warnings  # the failure itself is not also listed as a quiet one


def test_a_direct_cause_keeps_the_earlier_exception_as_the_failure() -> None:
    link = "The above exception was the direct cause of the following exception:"
    diagnosis = _diagnose(_CHAIN.format(link=link), backend="transformers")
    assert (diagnosis.failure, diagnosis.first_error_line) == ("network", 5)


def test_a_tokenizer_error_gets_tokenizer_file_advice() -> None:
    exception = (
        "ValueError: Couldn't instantiate the backend tokenizer from one of: (1) a `tokenizers` library "
        "serialization file, (2) a slow tokenizer instance to convert or (3) an equivalent slow tokenizer "
        "class to instantiate and convert. You need to have sentencepiece installed to convert a slow "
        "tokenizer to a fast one."
    )
    diagnosis = _diagnose(TRACEBACK.format(exception=exception))
    assert diagnosis.first_error_line == 7
    assert diagnosis.cause == "tokenizer_files"
    assert "tokenizer.json" in diagnosis.advice[0]
    missing = _diagnose(
        "OSError: Can't load tokenizer for 'org/model'. If you were trying to load it from "
        "'https://huggingface.co/models', make sure you don't have a local directory with the same name.\n"
    )
    assert (missing.failure, missing.cause) == ("file_missing", "tokenizer_files")
    assert "tokenizer.json" in missing.advice[0]


# -- 3. vLLM: out of memory while capturing CUDA graphs ----------------------------------------------
VLLM_GRAPH = (
    "INFO 06-01 12:00:10 [gpu_model_runner.py:1595] Model loading took 14.9889 GiB and 6.1 seconds\n"
    "INFO 06-01 12:00:20 [kv_cache_utils.py:634] GPU KV cache size: 29,264 tokens\n"
    "{capture}\n"
    "ERROR 06-01 12:00:27 [core.py:515] EngineCore failed to start.\n"
    "ERROR 06-01 12:00:27 [core.py:515] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
    "64.00 MiB. GPU 0 has a total capacity of 23.55 GiB of which 30.25 MiB is free.\n"
)


def test_oom_during_cuda_graph_capture_ranks_memory_share_and_eager_first() -> None:
    for capture in (
        "Capturing CUDA graph shapes:  43%|████▎     | 29/67 [00:05<00:07,  5.10it/s]",
        "Capturing CUDA graphs (mixed prefill-decode, PIECEWISE):  40%|████      | 27/67 [00:04<00:06]",
        "INFO 06-01 12:00:21 [model_runner.py:1011] Capturing cudagraphs for decoding. This may lead to "
        "unexpected consequences if the model is not static.",
    ):
        diagnosis = _diagnose(VLLM_GRAPH.format(capture=capture))
        assert (diagnosis.failure, diagnosis.failure_stage) == ("cuda_oom", "kv_cache"), capture
        assert diagnosis.cause == "cuda_graph_capture", capture
        assert "--gpu-memory-utilization" in diagnosis.advice[0]
        assert "--enforce-eager" in diagnosis.advice[1]
        # The KV-budget knobs free nothing here.
        assert not any("--max-model-len" in line or "fp8" in line for line in diagnosis.advice)
        assert not diagnosis.warnings  # the capture mark is no quiet failure


def test_oom_after_graph_capture_finished_keeps_the_kv_cache_advice() -> None:
    finished = (
        "Capturing CUDA graph shapes: 100%|██████████| 67/67 [00:09<00:00,  7.10it/s]\n"
        "INFO 06-01 12:00:26 [gpu_model_runner.py:2020] Graph capturing finished in 9 secs, took 0.56 GiB"
    )
    diagnosis = _diagnose(VLLM_GRAPH.format(capture=finished))
    assert diagnosis.failure == "cuda_oom"
    assert diagnosis.cause != "cuda_graph_capture"
    assert "--max-model-len" in diagnosis.advice[0]


# -- 8. a stage nobody printed ---------------------------------------------------------------------
def test_a_bare_killed_says_the_stage_is_unknown() -> None:
    diagnosis = _diagnose("Killed\n")
    assert diagnosis.failure == "host_oom_killed"
    assert diagnosis.stage_inferred is True
    assert diagnosis.failure_stage == "load_weights"  # the best guess, marked inferred
    assert "stage unknown" in diagnosis.summary
    assert "Failed at" not in diagnosis.summary
    seen = _diagnose("llama_model_loader: loaded meta data with 29 key-value pairs\nKilled\n")
    assert seen.stage_inferred is False
    assert seen.summary.startswith("Failed at load_weights")
    assert not any("while loading" in line for line in diagnosis.advice)
    assert any("while loading" in line for line in seen.advice)


# -- 4. transformers: a load-stage OOM gets transformers' own API ------------------------------------
TF_LOAD_OOM = (
    "{head}"
    "Loading checkpoint shards:  50%|█████     | 2/4 [00:06<00:06,  3.05s/it]\n"
    "Traceback (most recent call last):\n"
    '  File "/home/u/run.py", line 8, in <module>\n'
    '    model = AutoModelForCausalLM.from_pretrained(name, torch_dtype=torch.float16, device_map="cuda")\n'
    '  File "/venv/accelerate/utils/modeling.py", line 330, in set_module_tensor_to_device\n'
    "    new_value = value.to(device)\n"
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.96 GiB. GPU 0 has a total capacity "
    "of 23.64 GiB of which 1.02 GiB is free.\n"
)


def test_transformers_load_oom_without_quantization_advises_bitsandbytes_config_first() -> None:
    diagnosis = _diagnose(TF_LOAD_OOM.format(head=""))
    assert (diagnosis.backend, diagnosis.failure, diagnosis.failure_stage) == (
        "transformers",
        "cuda_oom",
        "load_weights",
    )
    first, second = diagnosis.advice[:2]
    assert "quantization_config=BitsAndBytesConfig(load_in_4bit=True)" in first
    assert "--quantization bnb-4bit" in first and "runner" in first  # says whose flag that is
    assert 'device_map="auto"' in second and "max_memory" in second


def test_transformers_load_oom_already_quantized_advises_placement_first() -> None:
    head = "`low_cpu_mem_usage` was None, now default to True since model is quantized.\n"
    diagnosis = _diagnose(TF_LOAD_OOM.format(head=head))
    assert diagnosis.failure == "cuda_oom"
    assert 'device_map="auto"' in diagnosis.advice[0]
    assert not any("BitsAndBytesConfig(load_in_4bit=True)" in line for line in diagnosis.advice)


# -- 5. a quantization asked for but never applied ---------------------------------------------------
DEPRECATION = (
    "The `load_in_4bit` and `load_in_8bit` arguments are deprecated and will be removed in the future "
    "versions. Please, pass a `BitsAndBytesConfig` object in `quantization_config` argument instead.\n"
)
LOADED = "Loading checkpoint shards: 100%|██████████| 4/4 [00:10<00:00,  2.61s/it]\n"


def _unconfirmed(diagnosis: Diagnosis) -> list[str]:
    return [line for line in diagnosis.warnings if "no line of the log confirms it" in line]


def test_a_deprecation_notice_of_the_request_is_no_confirmation() -> None:
    assert _unconfirmed(_diagnose(DEPRECATION + LOADED, requested_quant="bnb-4bit"))
    # Without --quant the notice itself shows bitsandbytes was asked for.
    assert _unconfirmed(_diagnose(DEPRECATION + LOADED))


def test_a_quantization_on_an_echoed_command_line_counts_as_requested() -> None:
    for command, wanted in (
        (
            "$ python serve.py --model meta-llama/Meta-Llama-3-8B --load-in-4bit\n",
            "'bnb-4bit'",
        ),
        (
            "2026-11-30T05:48:23.423 vramtui: launch python -m vramtui.runners.transformers_server --model /m "
            "--quantization bnb-8bit\n",
            "'bnb-8bit'",
        ),
    ):
        warnings = _unconfirmed(_diagnose(command + LOADED))
        assert len(warnings) == 1 and wanted in warnings[0], command
    # A line that shows the quantized layers confirms the request.
    confirmed = "bitsandbytes: replaced 224 Linear layers with Linear4bit\n"
    assert not _unconfirmed(_diagnose("$ python serve.py --load-in-4bit\n" + LOADED + confirmed))
    assert not _unconfirmed(_diagnose(LOADED))  # nothing asked, nothing to warn about


# -- 7. a model file in a format the backend does not read -------------------------------------------
def test_safetensors_awq_given_to_llama_server_is_a_format_mismatch() -> None:
    text = (
        "$ llama-server -m /models/Qwen2.5-7B-Instruct-AWQ/model.safetensors -c 8192\n"
        "gguf_init_from_file_impl: invalid magic characters: '\\x28\\x4e\\x00\\x00', expected 'GGUF'\n"
        "llama_model_load: error loading model: llama_model_loader: failed to load model from "
        "/models/Qwen2.5-7B-Instruct-AWQ/model.safetensors\n"
        "llama_model_load_from_file_impl: failed to load model\n"
    )
    diagnosis = _diagnose(text)
    assert (diagnosis.failure, diagnosis.cause, diagnosis.failure_stage) == (
        "unsupported_quant",
        "wrong_format",
        "load_weights",
    )
    assert diagnosis.first_error_line == 2
    assert "vLLM or TGI" in diagnosis.advice[0] and "GGUF" in diagnosis.advice[0]


def test_a_bad_magic_in_a_gguf_file_stays_a_broken_download() -> None:
    text = (
        "gguf_init_from_file: invalid magic number 4f44213c\n"
        "error loading model: llama_model_loader: failed to load model from /models/7b/llama-2-7b.Q4_0.gguf\n"
    )
    diagnosis = _diagnose(text)
    assert (diagnosis.failure, diagnosis.cause) == ("other", "bad_magic")


def test_a_gguf_given_to_vllm_is_a_format_mismatch() -> None:
    text = (
        "INFO 03-12 10:01:05 [api_server.py:981] vLLM API server version 0.8.1\n"
        "INFO 03-12 10:01:05 [api_server.py:982] args: Namespace(model='/models/llama-3-8b.Q4_K_M.gguf')\n"
        "Traceback (most recent call last):\n"
        '  File "/usr/lib/python3/dist-packages/vllm/transformers_utils/config.py", line 245, in get_config\n'
        "ValueError: Unrecognized model in /models/llama-3-8b.Q4_K_M.gguf. Should have a `model_type` key "
        "in its config.json\n"
    )
    diagnosis = _diagnose(text)
    assert diagnosis.backend == "vllm"
    assert (diagnosis.failure, diagnosis.cause) == ("unsupported_quant", "wrong_format")
    # The exception right under a frame with no code line is still the first error.
    assert diagnosis.first_error_line == 5
    assert "llama.cpp" in diagnosis.advice[0] and "Ollama" in diagnosis.advice[0]
    # The same exception for a model folder is an unknown architecture, as before.
    folder = _diagnose(text.replace("llama-3-8b.Q4_K_M.gguf", "my-model"))
    assert folder.failure == "unknown_arch"


# -- 9. the context advice fitted to a host budget the run log names ------------------------------------
# The demo's first launch (llama-cpp-python, a 4-layer 512-wide model, 8 heads, 1500 MiB address space).
BUDGET_RUN = (
    "2026-11-30T05:56:16.146 vramtui: launch python -m llama_cpp.server --model demo.gguf --n_ctx 262144\n"
    "2026-11-30T05:56:16.154 vramtui: memory budget 1500 MiB, enforced on the host (address-space limit)\n"
    "2026-11-30T05:56:17.819 print_info: n_head                = 8\n"
    "2026-11-30T05:56:17.819 print_info: n_head_kv             = 8\n"
    "2026-11-30T05:56:17.850 load_tensors:   CPU_Mapped model buffer size =    20.52 MiB\n"
    "2026-11-30T05:56:17.850 llama_context: n_ctx                 = 262144\n"
    "2026-11-30T05:56:17.850 llama_context: n_ubatch              = 512\n"
    "2026-11-30T05:56:17.850 llama_context: flash_attn            = {flash}\n"
    "2026-11-30T05:56:17.851 llama_context:        CPU  output buffer size =     0.00 MiB\n"
    "2026-11-30T05:56:17.947 ggml_aligned_malloc: insufficient memory (attempted to allocate 2048.00 MB)\n"
    "2026-11-30T05:56:17.947 ggml_backend_cpu_buffer_type_alloc_buffer: failed to allocate buffer of size 2147483648\n"
    "2026-11-30T05:56:17.947 llama_init_from_model: failed to initialize the context: failed to allocate buffer for kv cache\n"
)


def test_context_advice_fits_the_host_budget_instead_of_halving() -> None:
    diagnosis = _diagnose(BUDGET_RUN.format(flash="disabled"))
    assert (diagnosis.failure, diagnosis.failure_stage) == ("host_oom", "kv_cache")
    assert diagnosis.engine_figures["attention_heads"] == 8
    assert diagnosis.engine_figures["ubatch_tokens"] == 512
    # KV 8 KiB/token (2048 MiB at 262144) + attention scores 512 x 8 x 4 B = 24 KiB/token in ~1480 MiB:
    # 32768 (what `vramtui wizard` measures for the demo), not 131072 (half, which fails too).
    first = diagnosis.advice[0]
    assert "--n_ctx 32768 (now 262144" in first
    assert "estimate" in first and "vramtui wizard" in first
    # With flash attention the compute buffer hardly grows: only the KV cache is fitted.
    flash = _diagnose(BUDGET_RUN.format(flash="enabled"))
    assert "--n_ctx 131072 (now 262144" in flash.advice[0]


def test_a_failed_compute_buffer_after_a_printed_kv_buffer_is_fitted_too() -> None:
    text = BUDGET_RUN.format(flash="disabled").split("2026-11-30T05:56:17.947")[0] + (
        "llama_kv_cache:        CPU KV buffer size =   256.00 MiB\n"
        "ggml_backend_cpu_buffer_type_alloc_buffer: failed to allocate buffer of size 4294967296\n"
        "graph_reserve: failed to allocate compute buffers\n"
    )
    text = text.replace("262144", "32768")
    diagnosis = _diagnose(text)
    assert diagnosis.failure == "host_oom"
    # KV 8 KiB/token + compute 128 KiB/token (4096 MiB at 32768) in ~1480 MiB: 8192.
    assert diagnosis.cause == "compute_alloc_failed"
    assert "--flash_attn true" in diagnosis.advice[0]
    assert "--n_ctx 8192 (now 32768" in diagnosis.advice[2]


def test_without_a_budget_the_context_advice_halves() -> None:
    text = BUDGET_RUN.format(flash="disabled").replace(
        "2026-11-30T05:56:16.154 vramtui: memory budget 1500 MiB, enforced on the host (address-space limit)\n",
        "",
    )
    diagnosis = _diagnose(text)
    assert "131072 (now 262144)" in diagnosis.advice[0]
    assert "estimate" not in diagnosis.advice[0]


# The transformers runner's own lines (vramtui/runners/transformers_server.py): its echo of the
# from_pretrained arguments is the request; the size it loaded settles whether it was applied.
RUNNER_BNB = (
    "2026-11-30T05:48:23.423 vramtui: launch python -m vramtui.runners.transformers_server --model /m "
    "--quantization bnb-4bit\n"
    "2026-11-30T05:48:26.550 vramtui-runner: loading weights from /m (device_map=auto, "
    "quantization_config=bnb-4bit)\n"
    "2026-11-30T05:48:36.550 vramtui-runner: weights loaded: {parameters} parameters, {mib} MiB on cuda:0 in 10.00 s\n"
)


def test_the_runners_loaded_size_settles_a_bitsandbytes_request() -> None:
    # 16-bit: 2 bytes per parameter, whatever the echoed arguments say.
    unquantized = _diagnose(RUNNER_BNB.format(parameters=8030261248, mib="15316.00"))
    assert unquantized.engine_figures["model_parameters"] == 8030261248
    assert [line for line in unquantized.warnings if "2.00 bytes per parameter" in line]
    # 4-bit: bitsandbytes packs two weights a byte (numel counts bytes): about 1 byte per counted parameter.
    quantized = _diagnose(RUNNER_BNB.format(parameters=4540600320, mib="5312.40"))
    assert not [line for line in quantized.warnings if "quantization" in line]
    # Without the size line the echo alone confirms nothing.
    echo_only = RUNNER_BNB.split("2026-11-30T05:48:36.550")[0]
    assert _unconfirmed(_diagnose(echo_only))


def test_a_failed_load_reached_no_further_than_the_load_whatever_the_front_end_answered() -> None:
    """Issue 22 #9: Ollama's front end is up from the start and answers 500 while its runner never
    loaded: that is no "reached inference", and no "runs but slow" for a model that never ran."""
    lines = [
        'time=2025-06-05T17:54:30.100Z level=INFO source=server.go:438 msg="starting llama server" cmd="ollama runner"',
        "load_tensors: offloaded 20/33 layers to GPU",
        "load_tensors:        CUDA0 model buffer size =  2900.00 MiB",
        "load_tensors:   CPU_Mapped model buffer size =  1900.00 MiB",
        'time=2025-06-05T17:54:37.891Z level=ERROR source=sched.go:489 msg="error loading llama server"'
        ' error="llama runner process has terminated: cudaMalloc failed: out of memory"',
        '[GIN] 2025/06/05 - 17:54:37 | 500 |  7.8s |  127.0.0.1 | POST     "/api/chat"',
    ]
    diagnosis = diagnose_lines(lines, kernel_log=lambda: None)
    assert diagnosis.failed and diagnosis.failure == "cuda_oom"
    assert diagnosis.stage == diagnosis.failure_stage == "load_weights"
    assert not any(warning.startswith("runs but slow") for warning in diagnosis.warnings)


def test_an_oom_kill_of_another_process_is_no_confirmation() -> None:
    """Issue 22 #39: the kernel killed a browser when the log ended: that is not this server's kill, and
    its line is no evidence for it."""
    import time

    from vramtui.core.logs.diagnose import LogDiagnoser

    stamp = time.strftime("%a %b %d %H:%M:%S %Y")
    kernel = f"[{stamp}] Out of memory: Killed process 4242 (chrome) total-vm:9000000kB, anon-rss:800000kB"
    diagnoser = LogDiagnoser("llama.cpp", kernel_log=lambda: kernel)
    for line in ("llama_model_loader: loaded meta data with 30 key-value pairs", "Killed"):
        diagnoser.feed(line)
    diagnoser.log_time = time.time()
    diagnosis = diagnoser.result()
    assert diagnosis.failure == "host_oom_killed"
    assert not any("chrome" in line for line in diagnosis.evidence)
    assert any("chrome" in line and "not one of this engine's" in line for line in diagnosis.advice)
    ours = kernel.replace("(chrome)", "(llama-server)")
    diagnoser = LogDiagnoser("llama.cpp", kernel_log=lambda: ours)
    for line in ("llama_model_loader: loaded meta data with 30 key-value pairs", "Killed"):
        diagnoser.feed(line)
    diagnoser.log_time = time.time()
    confirmed = diagnoser.result()
    assert any("llama-server" in line for line in confirmed.evidence)
    assert "kernel's out-of-memory killer" in confirmed.summary


def test_no_room_for_one_layer_is_a_quiet_cpu_fallback_not_an_oom() -> None:
    """Issue 21 (g): Ollama with 0 B of VRAM to spare loads the model in host RAM and serves: a quiet CPU
    fallback, not an out-of-memory."""
    lines = [
        'time=2025-01-01T10:00:00.001Z level=INFO source=memory.go:356 msg="insufficient VRAM to load any model layers"',
        'time=2025-01-01T10:00:00.002Z level=INFO source=server.go:376 msg="starting llama server" cmd="ollama runner"',
        'time=2025-01-01T10:00:05.000Z level=INFO source=server.go:601 msg="llama runner started in 5.00 seconds"',
        '[GIN] 2025/01/01 - 10:00:06 | 200 |  6.0s |       127.0.0.1 | POST     "/api/chat"',
    ]
    diagnosis = diagnose_lines(lines, kernel_log=lambda: None)
    assert not diagnosis.failed and diagnosis.stage == "inference"
    assert any("host RAM" in warning for warning in diagnosis.warnings)


def test_layers_on_the_cpu_are_no_fallback_when_none_were_asked_for_the_gpu() -> None:
    """`--n_gpu_layers 0` in the launch line asks for the CPU: layers and KV cache there are no news (the
    count 0 had read as a GPU asked for); a count above 0 does make them a quiet CPU fallback."""

    def warned(layers: str) -> list[str]:
        lines = [
            f"2026-12-02T01:00:00.000 vramtui: launch python -m llama_cpp.server --model t.gguf --n_gpu_layers {layers}",
            "load_tensors: layer   0 assigned to device CPU, is_swa = 0",
            "llama_kv_cache: layer   0: dev = CPU",
            "INFO:     Uvicorn running on http://127.0.0.1:8000 (Press CTRL+C to quit)",
        ]
        return diagnose_lines(lines, backend="llama-cpp-python", kernel_log=lambda: None).warnings

    assert not any("CPU" in warning for warning in warned("0")), warned("0")
    assert any("assigned to the CPU" in warning for warning in warned("99"))


def test_a_run_with_every_buffer_in_host_ram_is_said_to_run_on_no_gpu() -> None:
    """Issue 21 (g): a log whose weights, KV cache and compute buffers are all the CPU backend's, and whose
    layers all went to the CPU, ran on no GPU; a pinned host buffer (CUDA_Host) proves a GPU backend, and
    `-ngl 0` asks for the CPU: neither is warned. Real Ollama runner lines, joined from two logs of the
    corpus: ollama/ollama#10833 (layers, CPU_Mapped weights, `dev = CPU`) and a docker compose log (the
    CPU KV and compute buffers)."""
    base = [
        "load_tensors: layer  64 assigned to device CPU, is_swa = 0",
        "load_tensors:   CPU_Mapped model buffer size = 19259.71 MiB",
        "llama_context: constructing llama_context",
        "llama_context: n_ctx         = 4096",
        "llama_kv_cache_unified: layer   0: dev = CPU",
        "llama_kv_cache_unified:        CPU KV buffer size =  1024.00 MiB",
        "llama_context:        CPU compute buffer size =   560.01 MiB",
    ]

    def warned(lines: list[str]) -> list[str]:
        return [
            w for w in diagnose_lines(lines, kernel_log=lambda: None).warnings if "nothing runs on a GPU" in w
        ]

    assert warned(base)
    assert not warned([*base, "llama_context:  CUDA_Host compute buffer size =    72.01 MiB"])
    assert not warned(["main: launch llama-server -m m.gguf -ngl 0", *base])
    assert not warned([*base, "load_tensors: layer   1 assigned to device CUDA0, is_swa = 0"])
    # vramtui's own launch under a budget enforced on the host: it found no GPU, the CPU is the plan
    budget = "2026-12-02T05:21:29.041 vramtui: memory budget 1500 MiB, enforced on the host"
    assert not warned([budget, *base])
    # layers alone, with no buffer line, say it too (Ollama's debug layer assignment)
    assert warned([f"load_tensors: layer {n:3d} assigned to device CPU" for n in range(6, 12)])


def test_mlock_failing_is_a_warning_not_the_failure() -> None:
    """llama.cpp's `failed to mlock ... Cannot allocate memory` is a warning: the load goes on (the KV
    cache is made on the next line). Real lines from h2oai/h2ogpt#812's llama-cpp-python run."""
    d = diagnose_lines(
        [
            "llama_model_load_internal: total VRAM used: 8106 MB",
            "warning: failed to mlock 139264000-byte buffer (after previously locking 0 bytes): Cannot allocate memory",
            "Try increasing RLIMIT_MLOCK ('ulimit -l' as root).",
            "llama_new_context_with_model: kv self size  = 1024.00 MB",
        ],
        kernel_log=lambda: None,
    )
    assert not d.failed, d.first_error_text
    assert any("mlock" in warning for warning in d.warnings)
    # the same words without mlock's are still a host allocation that failed
    d = diagnose_lines(["OSError: [Errno 12] Cannot allocate memory"], kernel_log=lambda: None)
    assert d.failed and d.cause == "host_alloc"


def test_vllm_without_any_cuda_graph_is_warned_except_on_its_cpu_build() -> None:
    """V1's dispatcher with no keys replays no graph: every step eager (LMCache/LMCache#1413's TP8 log)."""
    line = (
        "(VllmWorker TP5 pid=7748) WARNING 08-21 21:08:22 [cudagraph_dispatcher.py:101] cudagraph dispatching "
        "keys are not initialized. No cudagraph will be used."
    )
    up = "(APIServer pid=7343) INFO:     Application startup complete."
    assert any("no CUDA graph" in w for w in diagnose_lines([up, line], kernel_log=lambda: None).warnings)
    cpu = "(EngineCore pid=1) INFO 08-21 21:08:20 [cpu_worker.py:80] OMP threads binding"
    assert not any(
        "no CUDA graph" in w for w in diagnose_lines([cpu, up, line], kernel_log=lambda: None).warnings
    )


def test_the_line_that_says_what_failed_is_the_first_error_before_a_cut_traceback() -> None:
    """Issue 21 (f): the first error is the line that states the failure, not the `Traceback` header
    under it when the traceback is cut before its exception. TGI's launcher says it at its ERROR level
    (huggingface/text-generation-inference#2388); llama.cpp says which backend would not start
    (netease-youdao/QAnything#309)."""
    tgi = diagnose_lines(
        [
            "2024-08-09T12:44:39.179449Z  INFO text_generation_launcher: GPU does not support FP8, using Marlin FP8 kernel",
            "2024-08-09T12:44:39.213012Z ERROR text_generation_launcher: Error when initializing model",
            "Traceback (most recent call last):",
            '  File "/opt/conda/bin/text-generation-server", line 8, in <module>',
            "    sys.exit(app())",
        ],
        kernel_log=lambda: None,
    )
    assert tgi.failed and tgi.first_error_line == 2
    metal = diagnose_lines(
        [
            "llama_new_context_with_model: failed to initialize Metal backend",
            "[2024-05-01 08:06:44 +0800] [2194] [ERROR] Experienced exception while trying to serve",
            "Traceback (most recent call last):",
            '  File "/x/sanic/mixins/startup.py", line 958, in serve_single',
        ],
        kernel_log=lambda: None,
    )
    assert metal.failed and metal.first_error_line == 1 and metal.failure_stage == "kv_cache"
    assert metal.cause == "backend_init_failed"


def test_a_context_that_filled_up_and_shifted_is_a_quiet_failure() -> None:
    """llama-server drops a slot's oldest tokens when its context fills (SLT_WRN "slot context shift" in
    tools/server; on in every Ollama run), and transformers warns once when generate() passes the trained
    length (its stopping criteria): the run goes on, the answer quietly loses what was cut."""
    shifted = diagnose_lines(
        [
            "main: server is listening on http://127.0.0.1:8080 - starting the main loop",
            "slot   operator(): id  0 | task 37335 | new prompt, n_ctx_slot = 4096, n_keep = 4, task.n_tokens = 2277",
            "slot   operator(): id  0 | task 37335 | slot context shift, n_keep = 4, n_left = 4091, n_discard = 2045",
        ],
        kernel_log=lambda: None,
    )
    assert not shifted.failed and any("context shift" in w for w in shifted.warnings)
    past = diagnose_lines(
        [
            "Loading checkpoint shards: 100%|██████████| 2/2 [00:03<00:00,  1.52s/it]",
            "This is a friendly reminder - the current text generation call will exceed the model's predefined "
            "maximum length (2048). Depending on the model, you may observe exceptions, performance degradation, "
            "or nothing at all.",
        ],
        kernel_log=lambda: None,
    )
    assert not past.failed and any("trained length" in w for w in past.warnings)


def test_logs_that_stop_while_capturing_graphs_or_waiting_for_shards_are_incomplete() -> None:
    """A log that ends inside vLLM V1's graph capture (its DEBUG "Capturing a cudagraph" lines;
    vllm-project/vllm-ascend#2416) or TGI's "Waiting for shard to be ready" (text-generation-inference#869)
    proves how far the run got and stops there: incomplete at that stage, never "no failure"."""
    capture = diagnose_lines(
        [
            "vllm     | (Worker_TP1_EP1 pid=43) DEBUG 09-13 16:16:38 [compilation/cuda_graph.py:134] Capturing a "
            "cudagraph on (PIECEWISE,BatchDescriptor(num_tokens=2, uniform_decode=False))",
        ],
        kernel_log=lambda: None,
    )
    assert capture.incomplete and capture.stage == "kv_cache"
    shards = diagnose_lines(
        [
            "2023-08-17T15:28:43.904106Z  INFO shard-manager: text_generation_launcher: Waiting for shard to be "
            f"ready... rank={rank}"
            for rank in range(4)
        ],
        kernel_log=lambda: None,
    )
    assert shards.incomplete and shards.stage == "load_weights"


def test_a_kernels_index_assert_is_a_failure_with_the_context_as_its_way_out() -> None:
    """A device-side assert of an index past its table (vllm-project/vllm#17924: max-model-len forced past
    the trained 4096) is a failure, not a healthy log; the advice names the engine's context flag."""
    line = (
        "/workspace/my-vllm/lib64/python3.12/site-packages/torch/_inductor/runtime/compile_tasks.py:45: <module>: "
        "block: [337,0,0], thread: [112,0,0] Assertion `index out of bounds: 0 <= tl.broadcast_to(tmp10, "
        "[XBLOCK]) < 4096` failed."
    )
    d = diagnose_lines([line], backend="vllm", kernel_log=lambda: None)
    assert d.failed and d.cause == "device_assert" and d.failure_stage == "inference"
    assert any("--max-model-len" in advice for advice in d.advice)


def test_a_device_oom_in_the_warmup_is_not_undone_by_the_server_coming_up() -> None:
    """llama-server's warm-up decodes one empty batch; when that runs out of GPU memory (Metal's command
    buffer here: a blog post's M1 Pro run at -c 64000, in the corpus as
    r9-llamacpp-metal-m1pro-ctx64000-warmup-oom-continues) the server still says "model loaded", and every
    request will fail the same way: the failure stays, at the start-up. An error before the warm-up that
    the server recovered from is still cleared."""
    head = [
        "llama_init_from_model:      Metal compute buffer size =  5165.00 MiB",
        "common_init_from_params: warming up the model with an empty run - please wait ... (--no-warmup to disable)",
        "ggml_metal_graph_compute: command buffer 1 failed with status 5",
        "error: Insufficient Memory (00000008:kIOGPUCommandBufferCallbackErrorOutOfMemory)",
        "llama_graph_compute: ggml_backend_sched_graph_compute_async failed with error -1",
        "llama_decode: failed to decode, ret = -3",
        "srv          init: initializing slots, n_slots = 1",
        "main: model loaded",
    ]
    d = diagnose_lines(head, kernel_log=lambda: None)
    assert d.failed and (d.failure, d.failure_stage) == ("cuda_oom", "kv_cache"), d.summary
    before_warmup = [head[0], *head[2:6], head[1], *head[6:]]
    assert not diagnose_lines(before_warmup, kernel_log=lambda: None).failed


def test_systemds_oom_kill_and_a_path_taken_for_a_repo_id_in_their_own_words() -> None:
    """Issue 21 (c) and (h), in the words the issue quotes: systemd's "A process of this unit has been
    killed by the OOM killer" while the server serves is a host OOM kill at inference (it read "no
    failure"), and "Invalid repository ID or local directory specified" is a missing file, at download."""
    killed = diagnose_lines(
        [
            "main: server is listening on http://127.0.0.1:8080 - starting the main loop",
            "srv  log_server_r: request: POST /v1/chat/completions 127.0.0.1 200",
            "Mar 02 10:00:00 box systemd[1]: llama.service: A process of this unit has been killed by the OOM killer.",
        ],
        kernel_log=lambda: None,
    )
    assert (killed.failure, killed.failure_stage) == ("host_oom_killed", "inference")
    path = diagnose_lines(
        ["OSError: Invalid repository ID or local directory specified: '/models/qwen3-8b'."],
        kernel_log=lambda: None,
    )
    assert (path.failure, path.failure_stage) == ("file_missing", "download")


def test_a_bare_exception_is_told_by_the_frame_it_was_raised_in() -> None:
    """A `KeyError: 'gr00t_n1_5'` says nothing alone; raised in transformers' configuration_auto.py it is a
    model type this transformers does not know (InternRobotics/InternManip#12). A bare AssertionError
    raised in vLLM's weight_loader (issue 21 i: a pre-quantized checkpoint's shape assert; lines in vLLM's
    worker format, the assert is linear.py's own) is a shape mismatch. The same exceptions elsewhere stay
    plain exceptions."""
    config = [
        "Traceback (most recent call last):",
        '  File "/home/u/.venv/lib/python3.10/site-packages/transformers/models/auto/configuration_auto.py", '
        "line 1131, in from_pretrained",
        '    config_class = CONFIG_MAPPING[config_dict["model_type"]]',
        '  File "/home/u/.venv/lib/python3.10/site-packages/transformers/models/auto/configuration_auto.py", '
        "line 833, in __getitem__",
        "    raise KeyError(key)",
        "KeyError: 'gr00t_n1_5'",
    ]
    d = diagnose_lines(config, kernel_log=lambda: None)
    assert (d.failure, d.failure_stage, d.first_error_line) == ("unknown_arch", "load_weights", 6)
    prefix = "(VllmWorker rank=0 pid=1) ERROR 06-30 13:08:37 [multiproc_executor.py:470] "
    loader = [
        prefix + '  File "/usr/local/lib/python3.12/dist-packages/vllm/model_executor/layers/linear.py", '
        "line 1201, in weight_loader",
        prefix + "    assert param_data.shape == loaded_weight.shape",
        prefix + "AssertionError",
    ]
    d = diagnose_lines(loader, kernel_log=lambda: None)
    assert (d.failure, d.cause) == ("shape_mismatch", "loader_shape_assert")
    elsewhere = [line.replace("in weight_loader", "in forward") for line in loader]
    assert diagnose_lines(elsewhere, kernel_log=lambda: None).failure == "other"
    assert diagnose_lines(config[-1:], kernel_log=lambda: None).failure == "other"


def test_a_request_the_server_failed_and_a_kernel_without_the_tensor_type_are_failures() -> None:
    """llama-server's handler catching an exception while serving (a 500: ggml-org/llama.cpp#20761) and
    ggml's CUDA get-rows kernel with no path for q6_K after a request (ggml-org/llama.cpp#13211) had read
    as healthy logs."""
    served = [
        "main: server is listening on http://0.0.0.0:5107 - starting the main loop",
        "srv  update_slots: all slots are idle",
        "slot launch_slot_: id  0 | task 0 | processing task",
    ]
    caught = diagnose_lines(
        [
            *served,
            'srv    operator(): got exception: {"error":{"code":500,"message":"Failed to parse input at pos 12: '
            '</tool_call>","type":"server_error"}}',
            "srv  log_server_r: done request: POST /v1/messages 127.0.0.1 500",
        ],
        kernel_log=lambda: None,
    )
    assert (caught.failure, caught.failure_stage, caught.cause) == ("other", "inference", "request_error")
    kernel = diagnose_lines(
        [
            *served,
            "D:\\a\\llama.cpp\\llama.cpp\\ggml\\src\\ggml-cuda\\getrows.cu:195: ggml_cuda_get_rows_switch_src0_type: "
            "unsupported src0 type: q6_K",
        ],
        kernel_log=lambda: None,
    )
    assert (kernel.failure, kernel.failure_stage) == ("unsupported_quant", "inference")


def test_the_cut_traceback_right_after_a_stage_less_oom_says_where_it_was() -> None:
    """vllm-project/vllm-ascend#19: the worker's NPU out-of-memory, then the engine's traceback, cut
    before its exception, in vLLM's engine construction (from_engine_args): a start-up's, not a request's."""
    d = diagnose_lines(
        [
            "(VllmWorkerProcess pid=20493) ERROR 03-05 07:15:39 multiproc_worker_utils.py:240] RuntimeError: NPU out "
            "of memory. Tried to allocate 22.00 MiB (NPU 6; 60.97 GiB total capacity; 10.24 GiB already allocated)",
            "ERROR 03-05 07:15:39 engine.py:387] Traceback (most recent call last):",
            'ERROR 03-05 07:15:39 engine.py:387]   File "/usr/local/python3.10/lib/python3.10/site-packages/vllm/'
            'engine/multiprocessing/engine.py", line 378, in run_mp_engine',
            "ERROR 03-05 07:15:39 engine.py:387]     engine = MQLLMEngine.from_engine_args(engine_args=engine_args,",
            'ERROR 03-05 07:15:39 engine.py:387]   File "/usr/local/python3.10/lib/python3.10/site-packages/vllm/'
            'engine/multiprocessing/engine.py", line 121, in from_engine_args',
            "ERROR 03-05 07:15:39 engine.py:387]     return cls(ipc_path=ipc_path,",
        ],
        kernel_log=lambda: None,
    )
    assert (d.failure, d.failure_stage) == ("cuda_oom", "load_weights")


def test_settings_an_engine_quietly_changes_are_warned() -> None:
    """Runs that work but not as asked, from round 11's training part: Ollama capping num_ctx to the
    trained length (open-webui/open-webui#26457), TGI's router with no fast tokenizer checking no length
    (a blog post's TGI 2.x log, in the corpus as r11-tgi-ok-quiet-swallow7b-no-fast-tokenizer), SGLang
    turning its overlap scheduler off (r11-sglang-ok-quiet-lfm2-bench-overlap-disabled). accelerate's
    "offloaded to the disk and cpu" is its warning, not the failure it is when it refuses the device_map."""

    def said(line: str) -> list[str]:
        d = diagnose_lines([line], kernel_log=lambda: None)
        assert not d.failed, d.summary
        return d.warnings

    assert any(
        "num_ctx" in w
        for w in said(
            "Jun 29 00:03:19 trixie ollama[3307952]: time=2026-06-29T00:03:19.987Z level=WARN "
            'source=server.go:114 msg="requested context size too large for model" num_ctx=8192 n_ctx_train=2048'
        )
    )
    assert any(
        "fast tokenizer" in w
        for w in said(
            "2024-05-31T05:54:02.822199Z  WARN text_generation_router: router/src/main.rs:292: Rust input "
            "length validation and truncation is disabled"
        )
    )
    assert any(
        "overlap scheduler" in w
        for w in said(
            "WARNING:sglang.srt.server_args:Disabling overlap schedule since mamba no_buffer is not compatible "
            "with overlap schedule, try to use --disable-radix-cache if overlap schedule is necessary"
        )
    )
    assert said("Some parameters are on the meta device because they were offloaded to the disk and cpu.")
    refused = diagnose_lines(
        [
            "ValueError: The current `device_map` had weights offloaded to the disk. Please provide an "
            "`offload_folder` for them."
        ],
        kernel_log=lambda: None,
    )
    assert refused.failed and refused.cause == "disk_offload"


def test_a_kernel_that_failed_while_computing_a_batch_is_placed_at_inference() -> None:
    """ggml-org/llama.cpp#25721: `ggml_cuda_compute_forward: MUL_MAT_ID failed` then `CUDA error: unknown
    error` on the first request: a graph was computing (a decode), not the load. A stated out-of-memory on
    the next line still decides the class."""
    d = diagnose_lines(
        [
            "3.14.071.004 E ggml_cuda_compute_forward: MUL_MAT_ID failed",
            "3.14.071.012 E CUDA error: unknown error",
        ],
        kernel_log=lambda: None,
    )
    assert (d.failure, d.failure_stage, d.cause) == ("other", "inference", "kernel_failed")
    oom = diagnose_lines(
        ["ggml_cuda_compute_forward: MUL_MAT failed", "CUDA error: out of memory"], kernel_log=lambda: None
    )
    assert oom.failure == "cuda_oom"


def test_an_oom_after_the_weights_is_placed_by_the_engines_own_start_up_words() -> None:
    """Ollama's runner panicking in reserveWorstCaseGraph (its Go frames; ollama/ollama#10553) and an old
    Metal build adding its KV buffer past the working set (h2oai/h2ogpt#1311) ran out of memory after the
    weights: kv_cache, not the load and not a request."""
    ollama = diagnose_lines(
        [
            "github.com/ollama/ollama/runner/ollamarunner.(*Server).reserveWorstCaseGraph(0xc00054e000)",
            "\tC:/a/ollama/ollama/runner/ollamarunner/runner.go:821 +0xac5",
            'time=2025-06-05T17:54:37.669-05:00 level=ERROR source=server.go:457 msg="llama runner terminated" '
            'error="exit status 2"',
            'time=2025-06-05T17:54:37.891-05:00 level=ERROR source=sched.go:489 msg="error loading llama server" '
            'error="llama runner process has terminated: cudaMalloc failed: out of memory"',
        ],
        kernel_log=lambda: None,
    )
    assert (ollama.failure, ollama.failure_stage) == ("cuda_oom", "kv_cache")
    metal = diagnose_lines(
        [
            "ggml_metal_add_buffer: allocated 'kv              ' buffer, size =   512.03 MiB, ( 4458.33 /  4096.00)"
            "ggml_metal_add_buffer: warning: current allocated size is greater than the recommended max working "
            "set size",
            "ggml_metal_get_buffer: error: buffer is nil",
        ],
        kernel_log=lambda: None,
    )
    assert (metal.failure, metal.failure_stage) == ("cuda_oom", "kv_cache")


# This machine's real kernel lines of a kill of another engine (a vLLM worker in a test's cgroup).
_OTHER_KILL = (
    "[Wed Dec  2 05:59:01 2026] Memory cgroup out of memory: Killed process 30681 (VLLM::Worker) "
    "total-vm:4340252kB, anon-rss:1597340kB, file-rss:142080kB, shmem-rss:0kB, UID:0 pgtables:4228kB"
)


def test_a_log_that_names_the_oom_killer_needs_no_kernel_log_of_this_machine() -> None:
    """QA: a journald excerpt whose own systemd line says the unit was killed by the OOM killer was
    worded "nothing here says by whom", and sent the user to this machine's kernel log, which showed
    kills at other times (the server ran elsewhere). The log's word is enough."""
    d = diagnose_lines(
        [
            "Dec 02 05:10:01 gpubox llama-server[2211]: main: loading model",
            "Dec 02 05:10:20 gpubox systemd[1]: llama-server.service: A process of this unit has been killed "
            "by the OOM killer.",
        ],
        kernel_log=lambda: _OTHER_KILL,
    )
    assert d.failure == "host_oom_killed" and "the log says so" in d.summary
    assert not any("kernel" in line.lower() for line in (*d.advice, *d.evidence)), (d.advice, d.evidence)


def test_a_log_with_no_time_shows_no_kernel_kill_of_another_process() -> None:
    """QA: `echo "main: loading model" | vramtui diagnose -` listed this machine's kill of a VLLM::Worker
    as evidence: a log with no time can only be matched by its engine's process names."""
    d = diagnose_lines(["main: loading model"], kernel_log=lambda: _OTHER_KILL)
    assert d.incomplete and not any("kernel" in line for line in d.evidence), d.evidence


def test_no_advice_asks_for_flash_attention_the_log_shows_on() -> None:
    """QA: a KV-cache OOM whose log says `flash_attn = enabled` (or `-fa auto` "set to enabled") was told
    to turn flash attention on, twice. The lines are llama-server's own wording."""
    head = [
        "load_tensors: offloaded 49/49 layers to GPU",
        "llama_context: n_ctx         = 32768",
    ]
    tail = [
        "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 6144.00 MiB on device 0: cudaMalloc failed: out of memory",
        "llama_init_from_model: failed to initialize the context: failed to allocate buffer for kv cache",
    ]
    for flash in (
        ["llama_context: flash_attn    = enabled"],
        ["llama_context: flash_attn    = auto", "llama_context: Flash Attention was auto, set to enabled"],
    ):
        d = diagnose_lines([*head, *flash, *tail], kernel_log=lambda: None)
        assert d.failure == "cuda_oom"
        assert not any("--flash-attn on" in line for line in d.advice), d.advice
        assert any("--cache-type-k q8_0" in line for line in d.advice)
    off = diagnose_lines([*head, "llama_context: flash_attn    = disabled", *tail], kernel_log=lambda: None)
    assert any("Turn on flash attention" in line for line in off.advice)


def test_a_transformers_request_out_of_memory_names_the_context_and_the_profile_keys() -> None:
    """QA 11: the advice said "Fewer sequences at once: --batch-size" (the runner's flag, bare) and did not
    name the context, which caps the prompts the runner takes."""
    log = (
        "vramtui-runner: weights loaded: 7615616512 parameters, 14525.62 MiB on cuda:0 in 9.84 s\n"
        "vramtui-runner: ready: serving '/models/m' on http://127.0.0.1:8000 (max length 32768)\n"
        "Traceback (most recent call last):\n"
        '  File "/site-packages/transformers/generation/utils.py", line 2634, in generate\n'
        "    result = self._sample(\n"
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 6.00 GiB. GPU 0 has a total capacity "
        "of 23.55 GiB of which 3.12 GiB is free.\n"
    )
    diagnosis = _diagnose(log, backend="transformers")
    assert (diagnosis.failure, diagnosis.failure_stage) == ("cuda_oom", "inference")
    advice = " ".join(diagnosis.advice)
    assert (
        "--max-length (context in the profile)" in advice
        and "--batch-size (parallel in the profile)" in advice
    )
