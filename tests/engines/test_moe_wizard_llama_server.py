"""The wizard's expert-offload rung (--n-cpu-moe) on a qwen3moe-shaped GGUF and a real llama-server.

This machine has no GPU, and on a CPU-only run every tensor is host memory: llama-server prints the same
`CPU_Mapped model buffer` with and without --n-cpu-moe (checked below, for real), so no host budget can
show the rung working. The card is therefore a stand-in: NVML's answer (the card's total memory) is
given, and a launch that would not fit that card's memory is refused as llama.cpp refuses it, with the
lines CUDA prints, sized from the GGUF's own tensor table. A launch that fits runs for real on this CPU
(the real llama-server, the real --n-cpu-moe flag, the real answer and its measured tokens per second).
"""

from __future__ import annotations

import os
import re
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from vramtui.core.demo.tinygguf import TinyMoESpec, write_tiny_moe_gguf
from vramtui.core.launch.launcher import run_check
from vramtui.core.launch.profile import Profile
from vramtui.core.units import MIB
from vramtui.core.wizard.budget import needed_bytes
from vramtui.core.wizard.wizard import Wizard

pytestmark = pytest.mark.engine

CONTEXT = 1024
# Experts hold most of the bytes, as in the real ones (Qwen3-30B-A3B: ~95%): 12 MiB per layer in f16.
SPEC = TinyMoESpec(n_expert=32, n_ff_exp=256)
# llama.cpp's lines when the weights do not fit the card (ggml-org/llama.cpp#20431, sizes replaced).
CUDA_WEIGHTS_OOM = """\
load_tensors: loading model tensors, this can take a while... (mmap = true)
ggml_backend_cuda_buffer_type_alloc_buffer: allocating {mib:.2f} MiB on device 0: cudaMalloc failed: out of memory
alloc_tensor_range: failed to allocate CUDA0 buffer of size {size}
llama_model_load: error loading model: unable to allocate CUDA0 buffer
llama_model_load_from_file_impl: failed to load model
"""
# ... and when the KV cache does not (the lines test_wizard.py replays, from a CUDA run).
CUDA_KV_OOM = """\
load_tensors:        CUDA0 model buffer size = {weights_mib:.2f} MiB
llama_context: n_ctx                 = {n_ctx}
ggml_backend_cuda_buffer_type_alloc_buffer: allocating {mib:.2f} MiB on device 0: cudaMalloc failed: out of memory
alloc_tensor_range: failed to allocate CUDA0 buffer of size {size}
llama_init_from_model: failed to initialize the context: failed to allocate buffer for kv cache
"""
_EXPERT = re.compile(r"^blk\.(\d+)\.ffn_(gate|up|down)_exps\.")


@pytest.fixture(scope="module")
def moe_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("moe-quants")
    for dtype in ("f16", "q8_0"):
        write_tiny_moe_gguf(folder / f"tiny-moe-{dtype}.gguf", replace(SPEC, dtype=dtype))
    return folder


@pytest.fixture
def on_path(llama_server_bin: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PATH", f"{llama_server_bin.parent}{os.pathsep}{os.environ['PATH']}")
    return llama_server_bin


def card_weights(model: Path, n_cpu_moe: int) -> int:
    """What llama.cpp puts on the card with every layer there: every tensor but the token embedding
    (the input layer stays on the host) and the experts of the first `n_cpu_moe` layers."""
    import gguf

    total = 0
    for tensor in gguf.GGUFReader(str(model)).tensors:
        expert = _EXPERT.match(tensor.name)
        if tensor.name.startswith("token_embd.") or (expert and int(expert.group(1)) < n_cpu_moe):
            continue
        total += int(tensor.n_bytes)
    return total


class StandInCard:
    """A card with `room` bytes for llama.cpp's buffers: the weights are allocated first, then the KV
    cache (`kv` bytes) and the compute buffers (`compute`); the first that does not fit fails as CUDA
    fails. A launch that fits runs for real (on this CPU)."""

    def __init__(self, room: int, kv: int, compute: int, folder: Path) -> None:
        self.room, self.kv, self.compute = room, kv, compute
        self.folder = folder
        self.launched: list[Profile] = []

    def __call__(self, profile: Profile) -> Any:
        self.launched.append(profile)
        weights = card_weights(Path(profile.model), int(profile.params.get("n_cpu_moe", 0) or 0))  # type: ignore[call-overload]
        if weights + self.kv + self.compute <= self.room:
            return run_check(profile, ready_timeout_s=120)
        log = self.folder / f"card-{len(self.launched)}.log"
        stage = "load_weights" if weights > self.room else "kv_cache"
        if stage == "load_weights":
            log.write_text(CUDA_WEIGHTS_OOM.format(mib=weights / MIB, size=weights))
        else:
            text = CUDA_KV_OOM.format(
                weights_mib=weights / MIB, n_ctx=CONTEXT, mib=self.kv / MIB, size=self.kv
            )
            log.write_text(text)
        return SimpleNamespace(
            ready=False, stage=stage, failure_stage=stage, failure="cuda_oom",
            diagnosis=None, smoke=None, log_file=str(log),
        )  # fmt: skip


def test_on_the_cpu_the_experts_stay_where_they_were(on_path: Path, moe_folder: Path) -> None:
    """--n-cpu-moe on a CPU-only run changes no buffer: the model buffer line is the same."""
    model = moe_folder / "tiny-moe-f16.gguf"
    printed = []
    for params in ({}, {"n_cpu_moe": 3}, {"cpu_moe": True}):
        profile = Profile(
            backend="llama.cpp", model=str(model), params={"context": CONTEXT, **params}, port=0
        )
        result = run_check(profile, ready_timeout_s=120)
        assert result.ready and result.smoke is not None and result.smoke.ok
        text = Path(result.log_file).read_text()
        if params:
            assert "tensor overrides to CPU" in text  # llama.cpp saw the rule
        printed.append(re.findall(r"(\S+) model buffer size =\s+([\d.]+) MiB", text))
    assert printed[0] == printed[1] == printed[2] and len(printed[0]) == 1
    assert printed[0][0][0] == "CPU_Mapped"


def test_the_wizard_moves_experts_before_a_lower_quant(
    on_path: Path, moe_folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = moe_folder / "tiny-moe-f16.gguf"
    per_layer = card_weights(model, 0) - card_weights(model, 1)
    assert per_layer == 3 * SPEC.n_expert * SPEC.n_ff_exp * SPEC.n_embd * 2  # one layer's experts, f16
    kv = CONTEXT * SPEC.n_layer * 2 * SPEC.n_head_kv * SPEC.head_dim * 2  # f16 K and V, every layer
    compute = 5 * MIB  # about what llama-server printed for this shape on this CPU (4-5 MiB)
    # A card whose room holds everything but 2.5 layers' experts.
    room = card_weights(model, 0) + kv + compute - 5 * per_layer // 2
    profile = Profile(backend="llama.cpp", model=str(model), params={"context": CONTEXT}, port=0)
    card = [1 << 40]
    monkeypatch.setattr("vramtui.core.wizard.budget._first_gpu_bytes", lambda: card[0])
    probe = Wizard(profile, record=False)
    probe.model.raw(profile)  # the estimator's runtime share of a card (CUDA context ...)
    card[0] = probe.model.overhead + room

    runs = StandInCard(room, kv, compute, tmp_path)
    wizard = Wizard(profile, record_path=tmp_path / "moe.jsonl", auto=True, runner=runs)
    first = wizard.start().observation
    assert first is not None and first.failure_stage == "load_weights" and first.failure == "cuda_oom"
    proposal = wizard.propose()
    assert proposal is not None and proposal.param == "n_cpu_moe" and proposal.knob == "--n-cpu-moe"
    chosen = int(proposal.to)  # type: ignore[call-overload]
    # the solver's answer under the wizard's budget: the smallest count whose bill fits with the margin
    at = {n: wizard.model.predict(profile.with_param("n_cpu_moe", n)) for n in (chosen - 1, chosen)}
    assert wizard.model.fits(at[chosen]) and not wizard.model.fits(at[chosen - 1])  # type: ignore[arg-type]
    assert 3 <= chosen < SPEC.n_layer
    assert proposal.predicted_mib is not None
    assert abs(proposal.predicted_mib * MIB - needed_bytes(at[chosen])) < MIB  # type: ignore[arg-type]
    result = wizard.run(max_steps=4)
    assert result.success, result.reason
    assert 1 <= result.relaunches <= 2
    step = result.steps[1]
    assert step.proposal is not None and (step.proposal.param, step.proposal.to) == ("n_cpu_moe", chosen)
    assert f"the experts of the first {chosen} layers" in proposal.why and "per token" in proposal.why
    assert "slower generation" in proposal.why
    # the file stayed the f16 one: no quality given up
    assert result.final_profile.model == str(model) and result.final_profile.params["n_cpu_moe"] == chosen
    launched = runs.launched[-1]
    assert launched.params["n_cpu_moe"] == chosen
    obs = step.observation
    assert obs is not None and obs.works and obs.tokens_per_s
    assert any(
        "tensor overrides to CPU" in line for line in Path(obs.log_file or "").read_text().splitlines()
    )
    assert any(n.startswith("generation measured at") for n in step.notes)
    entry = step.to_dict()
    assert entry["tokens_per_s"] == obs.tokens_per_s and entry["tokens_per_s_before"] is None


def test_under_a_host_budget_the_rung_frees_nothing(moe_folder: Path) -> None:
    """A CPU run's budget counts the host: experts moved "to the CPU" stay in it, and the wizard's
    arithmetic says so (the rung is never the one that fits, nor one that frees memory)."""
    model = moe_folder / "tiny-moe-f16.gguf"
    profile = Profile(
        backend="llama.cpp", model=str(model), params={"context": CONTEXT}, memory_budget=64 * MIB, port=0
    )
    wizard = Wizard(profile, record=False)
    assert wizard.model.host
    kept, moved = (wizard.model.predict(profile.with_param("n_cpu_moe", n)) for n in (0, SPEC.n_layer))
    assert kept is not None and moved is not None and needed_bytes(kept) == needed_bytes(moved)


def test_when_the_cache_has_no_room_experts_go_before_the_context(
    moe_folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The weights fit, the KV cache does not, and no smaller KV type makes room: the experts go to the
    CPU before the context is cut (what the user asked for stays); turned down, the context comes next."""
    model = moe_folder / "tiny-moe-f16.gguf"
    context = 16384
    kv = context * SPEC.n_layer * 2 * SPEC.n_head_kv * SPEC.head_dim * 2
    compute = 5 * MIB
    room = card_weights(model, 0) + kv // 2 + compute  # half the cache short
    # four slots given (not -np auto's one unified cache): each attends over 4096 cells, so the compute
    # buffer stays near the stand-in's 5 MiB and only the cache is short
    params = {"context": context, "parallel": 4}
    profile = Profile(backend="llama.cpp", model=str(model), params=params, port=0)
    card = [1 << 40]
    monkeypatch.setattr("vramtui.core.wizard.budget._first_gpu_bytes", lambda: card[0])
    probe = Wizard(profile, record=False)
    probe.model.raw(profile)
    card[0] = probe.model.overhead + room
    wizard = Wizard(profile, record=False, runner=StandInCard(room, kv, compute, tmp_path))
    first = wizard.start().observation
    assert first is not None and first.failure_stage == "kv_cache"
    smallest_kv = wizard.model.predict(profile.with_param("kv_dtype", "q4_0"))
    assert smallest_kv is not None and not wizard.model.fits(smallest_kv)  # the weights take the room
    experts = wizard.propose()
    assert experts is not None and experts.param == "n_cpu_moe", experts
    bill = wizard.model.predict(profile.with_param("n_cpu_moe", experts.to))
    assert bill is not None and wizard.model.fits(bill)
    assert bill.get("kv_cache", 0) == kv  # the whole context kept
    wizard.skip(experts)
    shorter = wizard.propose()
    assert shorter is not None and shorter.param == "context"
