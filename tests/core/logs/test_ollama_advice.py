"""Ollama's advice in its own terms: its runner gets num_ctx x OLLAMA_NUM_PARALLEL cells, so the setting is
that count over the parallel requests, and its knobs are environment variables spelled NAME=value."""

from __future__ import annotations

import re

from vramtui.core.logs.diagnose import diagnose_text

# Ollama 0.3's runner line as ollama/ollama#1495 printed it (round9's r9-ollama-proxmox-offload-to-cpu-ngl999,
# on a GPU runner here), then the KV cache allocation failing in llama.cpp's words of that time.
RUNNER_4_SLOTS = """\
time=2024-09-20T14:35:02.048+02:00 level=INFO source=memory.go:309 msg="offload to cuda" layers.requested=-1 layers.model=43 layers.offload=43 layers.split="" memory.available="[11.6 GiB]" memory.required.full="10.8 GiB" memory.required.kv="2.6 GiB"
time=2024-09-20T14:35:02.053+02:00 level=INFO source=server.go:395 msg="starting llama server" cmd="/tmp/ollama499157638/runners/cuda_v12/ollama_llama_server --model /root/.ollama/models/blobs/sha256-ff1d1fc78170d787ee1201778e2dd65ea211654ca5fb7d69b5a2e7b123a50373 --ctx-size 8192 --batch-size 512 --embedding --log-disable --n-gpu-layers 999 --parallel 4 --port 36611"
llm_load_tensors: offloaded 43/43 layers to GPU
llm_load_tensors:      CUDA0 buffer size =  7383.44 MiB
llama_new_context_with_model: n_ctx      = 8192
llama_new_context_with_model: n_ubatch   = 512
ggml_backend_cuda_buffer_type_alloc_buffer: allocating 2688.00 MiB on device 0: cudaMalloc failed: out of memory
llama_kv_cache_init: failed to allocate buffer for kv cache
llama_new_context_with_model: llama_kv_cache_init() failed for self-attention cache
time=2024-09-20T14:35:09.121+02:00 level=ERROR source=sched.go:455 msg="error loading llama server" error="llama runner process has terminated: error:failed to create context with model"
"""


def test_the_context_is_the_runners_cells_over_its_parallel_requests() -> None:
    """Issue 22 #4: `--ctx-size 8192 ... --parallel 4` is a context of 2048; 4096 would double the cache."""
    diagnosis = diagnose_text(RUNNER_4_SLOTS)
    assert diagnosis.backend == "ollama" and diagnosis.failure == "cuda_oom"
    assert diagnosis.engine_figures["runner_parallel"] == 4 and diagnosis.engine_figures["context"] == 8192
    first, second = diagnosis.advice[:2]
    assert first.startswith("One request at a time: OLLAMA_NUM_PARALLEL=1 (now 4)")
    assert "8192 cells for a context of 2048" in first
    assert second.startswith("A shorter context: OLLAMA_CONTEXT_LENGTH=1024 (now 2048")
    said = "\n".join(diagnosis.advice)
    assert "OLLAMA_CONTEXT_LENGTH=4096" not in said and "(now 8192)" not in said


def test_every_ollama_knob_is_spelled_name_equals_value() -> None:
    one_slot = RUNNER_4_SLOTS.replace(" --parallel 4", "")
    for log in (RUNNER_4_SLOTS, one_slot):
        said = "\n".join(diagnose_text(log).advice)
        assert set(re.findall(r"OLLAMA_[A-Z_]+(.?)", said)) == {"="}, said  # never `OLLAMA_X 4096`
    # One request already: the context is the runner's own, halved.
    advice = diagnose_text(one_slot).advice
    assert advice[0].startswith("A shorter context: OLLAMA_CONTEXT_LENGTH=4096 (now 8192")
    assert not any("OLLAMA_NUM_PARALLEL" in line for line in advice)
