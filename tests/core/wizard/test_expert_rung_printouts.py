"""The expert-offload rung's arithmetic on a real GPU printout: Qwen3-30B-A3B Q4_K_M on an RTX 4080 SUPER
with 15035 MiB free (ggml-org/llama.cpp#13729; its heads from ollama/ollama#10458: test_ongpu.py reads
both from tests/data/logs/offloaded.jsonl). The 17 GB file is not here: the model's tensors are rebuilt
from the buffers that run printed, and NVML's answer is the card's free memory it printed."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from test_ongpu import _figures, _qwen3_moe_heads

from vramtui.core.backends import get_backend
from vramtui.core.estimate.estimator import Settings, estimate
from vramtui.core.launch.profile import Profile
from vramtui.core.units import MIB
from vramtui.core.wizard.ongpu import info_from_figures, plan_from_figures
from vramtui.core.wizard.wizard import Wizard

FREE = 15035 * MIB  # "using device CUDA0 (NVIDIA GeForce RTX 4080 SUPER) - 15035 MiB free"
# llama.cpp's lines when the weights do not fit (ggml-org/llama.cpp#20431), at this model's size.
CUDA_WEIGHTS_OOM = (
    "ggml_backend_cuda_buffer_type_alloc_buffer: allocating {mib:.2f} MiB on device 0: cudaMalloc failed: "
    "out of memory\nalloc_tensor_range: failed to allocate CUDA0 buffer of size {size}\n"
    "llama_model_load: error loading model: unable to allocate CUDA0 buffer\n"
)


def test_every_layer_on_the_4080_super_moves_the_experts_of_the_fewest_layers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    figures = _figures("gpu-1-qwen3-30b-a3b-4080s-30of49")
    info = info_from_figures(figures, _qwen3_moe_heads())
    monkeypatch.setattr("vramtui.core.wizard.budget._first_gpu_bytes", lambda: FREE)
    # every layer on the card, as `-ngl 99` asks: the model buffer llama.cpp would allocate
    whole = estimate(info, Settings(context=4096, parallel=1, device_bytes=FREE)).weights_bytes
    assert whole > FREE
    log = tmp_path / "oom.log"
    log.write_text(CUDA_WEIGHTS_OOM.format(mib=whole / MIB, size=whole))

    def run(profile: Profile) -> Any:
        return SimpleNamespace(
            ready=False, stage="load_weights", failure_stage="load_weights", failure="cuda_oom",
            diagnosis=None, smoke=None, log_file=str(log),
        )  # fmt: skip

    profile = Profile(
        backend="llama.cpp", model="Qwen3-30B-A3B-Q4_K_M.gguf", params={"context": 4096, "parallel": 1}
    )
    wizard = Wizard(profile, record=False, runner=run, device_bytes=FREE)
    wizard.model._info_cache[profile.model] = info  # the shape from the printout, not from a file
    first = wizard.start().observation
    assert first is not None and first.figures["failed_alloc"] == whole
    proposal = wizard.propose()
    assert proposal is not None and proposal.param == "n_cpu_moe"
    chosen = int(proposal.to)  # type: ignore[call-overload]
    at = {n: wizard.model.predict(profile.with_param("n_cpu_moe", n)) for n in (chosen - 1, chosen)}
    assert wizard.model.fits(at[chosen]) and not wizard.model.fits(at[chosen - 1])  # type: ignore[arg-type]
    # what moves: the expert tensors of the first `chosen` layers, as rebuilt from the printed buffers
    experts = sum(
        size
        for name, size in info.layer_tensors or ()
        if re.match(rf"blk\.({'|'.join(map(str, range(chosen)))})\.ffn_(gate|up|down)_exps", name)
    )
    moved = re.search(r"the experts of the first (\d+) layers \((\d+) MiB\)", proposal.why)
    assert moved is not None and int(moved.group(1)) == chosen
    assert abs(int(moved.group(2)) - experts / MIB) <= 1
    per_token = re.search(r"each token reads about ([\d.]+) MiB", proposal.why)
    assert per_token is not None and float(per_token.group(1)) == pytest.approx(
        experts * 8 / 128 / MIB, abs=0.1
    )
    # the on-GPU plan keeps llama-server's own fit margin free (1024 MiB), the wizard 10% of what is
    # left (1.5 GiB here): the wizard moves at least as many layers' experts
    plan = plan_from_figures(figures, given=_qwen3_moe_heads())
    assert plan.n_cpu_moe is not None and 0 < plan.n_cpu_moe <= chosen < info.n_layers
    # on the ladder, before any quality is given up
    order = [rung.param for rung in get_backend("llama.cpp").rungs("load_weights")]
    assert order.index("n_cpu_moe") < order.index("model")
