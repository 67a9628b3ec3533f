"""QA 36: advice that named the wrong first move (a mixture of experts told to drop whole layers; a card the
weights fill told to shorten the context)."""

from __future__ import annotations

from vramtui.core.logs.diagnose import diagnose_text

_MOE_WEIGHTS = """\
build: 6890 (a1b2c3d4) with cc (Ubuntu 13.3.0-6ubuntu2~24.04) 13.3.0 for x86_64-linux-gnu
main: loading model
llama_model_load_from_file_impl: using device CUDA0 (NVIDIA GeForce RTX 3060) (0000:01:00.0) - 11800 MiB free
print_info: file type   = Q4_K - Medium
print_info: arch             = {arch}
print_info: n_layer          = 48
print_info: n_expert         = {experts}
print_info: n_expert_used    = 8
load_tensors: offloaded 49/49 layers to GPU
ggml_backend_cuda_buffer_type_alloc_buffer: allocating 17528.53 MiB on device 0: cudaMalloc failed: out of memory
llama_model_load: error loading model: unable to allocate CUDA0 buffer
"""


def _advice(text: str, backend: str | None = None) -> list[str]:
    return diagnose_text(text, backend=backend, kernel_log=lambda: None).advice


def test_a_mixture_of_experts_that_does_not_load_is_told_to_move_its_experts_first() -> None:
    moe = _advice(_MOE_WEIGHTS.format(arch="qwen3moe", experts=128))
    assert "--n-cpu-moe N" in moe[0] and "--cpu-moe" in moe[0], moe
    assert "--n-gpu-layers N" in moe[1]
    dense = _advice(_MOE_WEIGHTS.format(arch="qwen3", experts=0))
    assert "--n-gpu-layers N" in dense[0] and not any("--n-cpu-moe" in line for line in dense), dense
    # an engine without the flag (llama-cpp-python) keeps its own words for whole layers
    python = _advice(_MOE_WEIGHTS.format(arch="qwen3moe", experts=128), backend="llama-cpp-python")
    assert python[0].startswith("The weights do not fit: put fewer layers"), python


_VLLM_PROFILE_OOM = """\
(EngineCore_DP0 pid=4711) INFO 12-07 10:01:10 [core.py:77] Initializing a V1 LLM engine (v0.11.0) with config: model='Qwen/Qwen3-8B', max_seq_len=32768
(EngineCore_DP0 pid=4711) INFO 12-07 10:01:21 [gpu_model_runner.py:2602] Starting to load model Qwen/Qwen3-8B...
(EngineCore_DP0 pid=4711) INFO 12-07 10:01:27 [gpu_model_runner.py:2653] Model loading took {weights} GiB and 5.31 seconds
(EngineCore_DP0 pid=4711) ERROR 12-07 10:01:41 [core.py:708] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.16 GiB. GPU 0 has a total capacity of 15.57 GiB of which 812.44 MiB is free.
"""


def test_weights_that_fill_the_card_are_said_before_any_context_advice() -> None:
    full = _advice(_VLLM_PROFILE_OOM.format(weights="15.2683"))
    assert full[0].startswith("The weights alone take 15.27 of the card's 15.57 GiB"), full
    assert "--cpu-offload-gb" in full[0] and "--tensor-parallel-size" in full[0]
    assert not any("--max-model-len" in line for line in full), full  # a shorter context makes no room
    room = _advice(_VLLM_PROFILE_OOM.format(weights="7.63"))
    assert "--max-model-len" in room[0] and not any("weights alone" in line for line in room), room
