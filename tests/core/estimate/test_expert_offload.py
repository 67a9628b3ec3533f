"""Expert offload (issue 15): --cpu-moe, --n-cpu-moe N and -ot PATTERN=DEVICE place the expert tensors of a
real (tiny, qwen3moe-shaped) GGUF in host RAM, byte for byte as its tensor table says, and the solver finds
the fewest layers to offload."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from vramtui.cli import main
from vramtui.core.demo.tinygguf import TinyMoESpec, write_tiny_moe_gguf
from vramtui.core.errors import VramtuiError
from vramtui.core.estimate.estimator import Settings, estimate
from vramtui.core.estimate.modelinfo import load_model_info
from vramtui.core.memory.parts import HOST
from vramtui.core.units import GIB, MIB, format_bytes

SPEC = TinyMoESpec()  # 6 layers, 256 wide, 8 experts (2 active) of 128, f16
LAYERS, EMBD, EXPERTS, USED, FF_EXP = (
    SPEC.n_layer,
    SPEC.n_embd,
    SPEC.n_expert,
    SPEC.n_expert_used,
    SPEC.n_ff_exp,
)


@pytest.fixture(scope="module")
def moe_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A qwen3moe GGUF as convert_hf_to_gguf.py lays it out (3-D expert tensors, q/k norms, a router)."""
    return write_tiny_moe_gguf(tmp_path_factory.mktemp("moe") / "tiny-qwen3moe-f16.gguf", SPEC)


def tensor_bytes(path: Path, pattern: str) -> int:
    """What the file itself says: the bytes of the tensors whose name matches."""
    import gguf

    reader = gguf.GGUFReader(str(path))
    return sum(int(t.n_bytes) for t in reader.tensors if re.search(pattern, t.name))


def test_the_moe_gguf_reads_as_a_mixture_of_experts(moe_gguf: Path) -> None:
    info = load_model_info(moe_gguf)
    assert info.is_moe and info.n_experts == EXPERTS and info.n_experts_used == USED
    assert info.layer_tensors is not None and len(info.layer_tensors) == LAYERS * 12


def test_n_cpu_moe_moves_the_first_layers_experts_to_the_host(moe_gguf: Path) -> None:
    info = load_model_info(moe_gguf)
    base = estimate(info, Settings())
    assert base.expert_host_bytes == 0
    two = estimate(info, Settings(n_cpu_moe=2, mmap=False))  # read: the host holds exactly its tensors
    moved = tensor_bytes(moe_gguf, r"^blk\.[01]\.ffn_(gate|up|down)_exps")
    assert moved == 2 * 3 * EXPERTS * FF_EXP * EMBD * 2  # f16
    assert two.expert_host_bytes == moved
    assert two.weights_bytes == base.weights_bytes - moved
    assert two.weights_host_bytes == base.weights_host_bytes + moved
    assert two.bill.get("weights", HOST) == base.bill.get("weights", HOST) + moved
    assert two.kv_cache_bytes == base.kv_cache_bytes  # the KV cache stays with its layers
    assert any("in host RAM by the override rules" in note for note in two.notes)


def test_cpu_moe_and_override_tensor_place_what_their_patterns_match(moe_gguf: Path) -> None:
    info = load_model_info(moe_gguf)
    base = estimate(info, Settings())
    every = estimate(info, Settings(cpu_moe=True))
    assert every.expert_host_bytes == tensor_bytes(moe_gguf, r"_exps\.")
    assert every.weights_bytes == base.weights_bytes - every.expert_host_bytes
    one = estimate(info, Settings(override_tensor=(r"blk\.1\.ffn_up_exps=CPU",)))
    assert one.expert_host_bytes == tensor_bytes(moe_gguf, r"^blk\.1\.ffn_up_exps")
    # the first rule that matches wins, as in llama.cpp: a CUDA0 rule ahead of --cpu-moe keeps layer 5's
    kept = estimate(info, Settings(cpu_moe=True, override_tensor=(r"blk\.5\.=CUDA0",)))
    assert kept.expert_host_bytes == every.expert_host_bytes - tensor_bytes(moe_gguf, r"^blk\.5\.ffn_.*_exps")
    with pytest.raises(VramtuiError, match="PATTERN=DEVICE"):
        Settings(override_tensor=("exps",))
    with pytest.raises(VramtuiError, match="not a regular expression"):
        Settings(override_tensor=("blk.(=CPU",))
    # llama-server refuses a buffer type no backend registers ("unknown buffer type"): so does the estimate
    with pytest.raises(VramtuiError, match=r"'Banana' is not a llama\.cpp buffer type"):
        Settings(override_tensor=("exps=Banana",))
    for device in (
        "CUDA1",
        "CUDA_Host",
        "Vulkan0",
        "ROCm2",
        "Metal",
        "SYCL0",
        "CPU_REPACK",
        "RPC[10.0.0.2:50052]",
    ):
        three = Settings(override_tensor=(f"exps={device}",), gpus=(24 * GIB,) * 3)
        assert three.override_tensor == (f"exps={device}",)
    with pytest.raises(VramtuiError, match=r"llama\.cpp spells it CPU"):  # its names are case-sensitive
        Settings(override_tensor=("exps=cpu",))
    # a GPU past the cards given: llama-server has no such buffer type and refuses to start
    with pytest.raises(VramtuiError, match=r"CUDA1 is GPU 1, and the estimate has 1 GPU"):
        Settings(override_tensor=("exps=CUDA1",))


def test_the_solver_finds_the_fewest_layers_whose_experts_must_leave(moe_gguf: Path) -> None:
    info = load_model_info(moe_gguf)
    full = estimate(info, Settings(device_bytes=1 << 40))
    per_layer = tensor_bytes(moe_gguf, r"^blk\.0\.ffn_(gate|up|down)_exps")
    # a card whose usable share holds everything but 2.5 layers' experts
    card = int((full.total_bytes - 2.5 * per_layer) / 0.8)
    est = estimate(info, Settings(device_bytes=card))
    assert not est.fits and est.n_cpu_moe_fit == 3
    assert estimate(info, Settings(device_bytes=card, n_cpu_moe=3)).fits
    assert not estimate(info, Settings(device_bytes=card, n_cpu_moe=2)).fits
    assert any(note.startswith("with --n-cpu-moe 3 it fits") for note in est.notes)
    assert est.to_dict()["n_cpu_moe_fit"] == 3
    # a dense model has no experts to move
    assert estimate(replace(info, is_moe=False), Settings(device_bytes=card)).n_cpu_moe_fit is None


def test_the_solvers_note_counts_only_the_experts_the_flag_moves(moe_gguf: Path) -> None:
    """QA 36 F9: beside an -ot rule that already keeps the last layers' experts on the host, the note said
    the first N layers' experts were all the host's experts (12.40 GiB for two layers of 0.73)."""
    info = load_model_info(moe_gguf)
    per_layer = tensor_bytes(moe_gguf, r"^blk\.0\.ffn_(gate|up|down)_exps")
    rule = (r"blk\.[2-9]\.ffn_.*_exps\.=CPU",)  # layers 2 and on (the fixture's last ones)
    kept = estimate(info, Settings(device_bytes=1 << 40, override_tensor=rule))
    card = int((kept.total_bytes - 0.5 * per_layer) / 0.8)
    est = estimate(info, Settings(device_bytes=card, override_tensor=rule))
    assert not est.fits and est.n_cpu_moe_fit == 1
    note = next(note for note in est.notes if note.startswith("with --n-cpu-moe 1 it fits"))
    assert format_bytes(per_layer) in note and "beside those the tensor overrides" in note, note


def test_the_cli_takes_llama_cpp_spellings(moe_gguf: Path, capsys: pytest.CaptureFixture[str]) -> None:
    main(["estimate", str(moe_gguf), "--n-cpu-moe", "2", "--json"])
    two = json.loads(capsys.readouterr().out)
    main(
        [
            "estimate",
            str(moe_gguf),
            "-ot",
            r"blk\.0\.ffn_.*_exps=CPU",
            "--override-tensor",
            r"blk\.1\.ffn_.*_exps=CPU",
            "--json",
        ]
    )
    same = json.loads(capsys.readouterr().out)
    assert two["expert_host_bytes"] == same["expert_host_bytes"] > 0
    assert two["bill"]["host"]["weights_bytes"] == same["bill"]["host"]["weights_bytes"]
    main(["estimate", str(moe_gguf), "--cpu-moe"])
    out = capsys.readouterr().out
    assert "of them in host RAM" in out and f"{EXPERTS} experts" in out
    assert main(["estimate", str(moe_gguf), "--n-cpu-moe", "-1"]) == 2
    assert "--n-cpu-moe" in capsys.readouterr().err
    assert main(["estimate", str(moe_gguf), "-ot", "exps"]) == 2
    assert "PATTERN=DEVICE" in capsys.readouterr().err
    assert main(["estimate", str(moe_gguf), "-ot", "exps=Banana"]) == 2
    assert "not a llama.cpp buffer type" in capsys.readouterr().err


def test_profile_params_carry_the_offload(moe_gguf: Path) -> None:
    settings = Settings.from_params({"n_cpu_moe": 2, "override_tensor": [r"blk\.5\.=CPU"], "cpu_moe": "off"})
    assert settings.n_cpu_moe == 2 and settings.override_tensor == (r"blk\.5\.=CPU",) and not settings.cpu_moe
    est = estimate(load_model_info(moe_gguf), settings)
    assert est.expert_host_bytes > tensor_bytes(moe_gguf, r"^blk\.[01]\.ffn_.*_exps") > 1 * MIB


def test_an_override_that_matches_nothing_says_it_moves_nothing(moe_gguf: Path) -> None:
    info = load_model_info(moe_gguf)
    est = estimate(
        info, Settings(override_tensor=("nomatch_xyz=CPU", r"blk\.1\.ffn_up_exps=CPU", "token_embd=CPU"))
    )
    said = [note for note in est.notes if "no layer tensor of this model matches it" in note]
    assert said == ["-ot nomatch_xyz=...: no layer tensor of this model matches it, so it moves nothing"]


def test_expert_flags_that_do_less_than_they_say_are_noted(moe_gguf: Path, tiny_gguf: Path) -> None:
    dense = estimate(load_model_info(tiny_gguf), Settings(n_cpu_moe=10))
    assert "--n-cpu-moe 10: this model has no experts, so it moves nothing" in dense.notes
    info = load_model_info(moe_gguf)
    past = estimate(info, Settings(n_cpu_moe=info.n_layers + 50))
    assert any(
        note.startswith(f"--n-cpu-moe {info.n_layers + 50} is past the model's") for note in past.notes
    )
    assert past.expert_host_bytes == estimate(info, Settings(cpu_moe=True)).expert_host_bytes
