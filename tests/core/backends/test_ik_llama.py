"""ik_llama.cpp as a llama.cpp-family engine (issue 23): its MLA cache per -mla, its attention capped by
-amb, its flags read back from a command line, its log diagnosed as llama.cpp's.

The figures are ik_llama.cpp's source (src/llama.cpp llama_kv_cache_init, src/graphs/build_deepseek2.cpp at
8337e4cd) on DeepSeek-R1's published shape, and one printed line of a training printout
(ikawrakow/ik_llama.cpp#657: `-mla 3 -fa -c 16384`: "KV self size = 1098.00 MiB, c^KV (f16): 1098.00 MiB")."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from placeholder_files import EMPTY_GGUF

from vramtui.core.attach.cmdline import read_command
from vramtui.core.backends import get_backend
from vramtui.core.estimate.estimator import Settings, estimate
from vramtui.core.estimate.modelinfo import ModelInfo, count_params_arithmetic
from vramtui.core.logs.diagnose import diagnose_text
from vramtui.core.units import GIB, MIB

CELLS, LAYERS = 16384, 61
LATENT, RANK = 512 + 64, 512  # c^KV and the rope part; the compressed KV alone


def deepseek_r1() -> ModelInfo:
    info = ModelInfo(
        source="DeepSeek-R1 config.json",
        arch="deepseek2",
        n_layers=LAYERS,
        hidden=7168,
        n_heads=128,
        n_kv_heads=128,
        head_dim_k=192,
        head_dim_v=128,
        vocab=129280,
        intermediate=18432,
        max_context=163840,
    )
    info.kv_lora_rank, info.qk_rope_head_dim, info.qk_nope_head_dim, info.q_lora_rank = 512, 64, 128, 1536
    info.is_moe, info.n_experts, info.n_experts_used, info.moe_intermediate = True, 256, 8, 2048
    info.n_shared_experts, info.n_dense_layers = 1, 3
    info.n_params = count_params_arithmetic(info)
    info.params_exact = True
    return info


def _run(backend: str, **knobs: object) -> object:
    settings = Settings(
        backend=backend,
        context=CELLS,
        parallel=1,
        batch=4096,
        ubatch=4096,
        quant="q2_k",
        device_bytes=400 * GIB,
        **knobs,  # type: ignore[arg-type]
    )
    return estimate(deepseek_r1(), settings)


@pytest.mark.parametrize(
    ("mla", "flash", "per_token"),
    [
        (3, True, LATENT),  # the latent alone (the printout's 1098 MiB)
        (2, True, LATENT),
        (2, False, LATENT),
        (1, True, LATENT),  # flash attention reads V from the latent: no transposed copy
        (1, False, LATENT + RANK),  # the latent and its transpose (kv^T)
        (0, True, 128 * (192 + 128)),  # per-head K and V, as for a model without MLA
    ],
)
def test_the_mla_cache_is_sized_per_mode(mla: int, flash: bool, per_token: int) -> None:
    est = _run("ik_llama.cpp", mla=mla, flash_attn=flash)
    assert est.kv_cache_bytes == CELLS * per_token * 2 * LAYERS  # type: ignore[attr-defined]


def test_the_latent_cache_is_what_the_printout_printed_and_mainline_keeps_k_and_v() -> None:
    assert _run("ik_llama.cpp", mla=3, flash_attn=True).kv_cache_bytes == 1098 * MIB  # type: ignore[attr-defined]
    assert _run("ik_llama.cpp", flash_attn=True).kv_cache_bytes == 1098 * MIB  # type: ignore[attr-defined]  # -mla 3 by default
    # mainline kept a copy of the latent as V until its V-less cache (#19067, b7820); the latent alone since
    older = _run("llama.cpp", flash_attn=True, engine_build=7000).kv_cache_bytes  # type: ignore[attr-defined]
    assert older == CELLS * (LATENT + RANK) * 2 * LAYERS
    assert _run("llama.cpp", flash_attn=True).kv_cache_bytes == CELLS * LATENT * 2 * LAYERS  # type: ignore[attr-defined]


def test_amb_caps_the_attention_work_of_an_mla_prompt() -> None:
    """-mla 3 with flash attention decompresses the latent for a prompt, a share of the heads at a time:
    at 16384 cells the f32 K/V of all 128 heads is 2048 MiB; -amb 1024 halves the heads (1024 MiB), -amb
    128 takes 8 of them. The MoE layer's experts (2376 MiB at this micro-batch) then set the peak."""
    uncapped = _run("ik_llama.cpp", mla=3, flash_attn=True, attn_max_batch=0).compute_buffer_bytes  # type: ignore[attr-defined]
    half = _run("ik_llama.cpp", mla=3, flash_attn=True, attn_max_batch=1024).compute_buffer_bytes  # type: ignore[attr-defined]
    small = _run("ik_llama.cpp", mla=3, flash_attn=True, attn_max_batch=128).compute_buffer_bytes  # type: ignore[attr-defined]
    heads_f32 = 128 * (128 + 128) * CELLS * 4
    casts = CELLS * (128 + 128 + 64) * 2  # V, K without rope and the rope part, f16, per head
    assert uncapped - half == heads_f32 // 2 + 64 * casts
    assert small < half < uncapped


def test_a_command_line_with_ik_flags_is_read_as_ik_llama() -> None:
    argv = ["/opt/ik/llama-server", "-m", "m.gguf", "-mla", "2", "-amb", "512", "-rtr", "-c", "8192"]
    command = read_command(argv)
    assert command.backend is not None and command.backend.name == "ik_llama.cpp"
    assert command.params["context"] == 8192
    assert command.extra == {"mla": 2, "attn_max_batch": 512, "run_time_repack": True}
    settings = Settings.from_params({**command.extra, **command.params}, backend=command.backend.name)
    assert (settings.mla, settings.attn_max_batch, settings.mmap) == (2, 512, False)  # -rtr: no mmap
    plain = read_command(["/opt/bin/llama-server", "-m", "m.gguf", "-c", "8192"])
    assert plain.backend is not None and plain.backend.name == "llama.cpp"


def test_its_log_is_diagnosed_as_llama_cpp() -> None:
    log = (
        "llama_new_context_with_model: n_ctx      = 16384\n"
        "llama_new_context_with_model: mla_attn   = 3\n"
        "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 3768.02 MiB on device 0: cudaMalloc failed: "
        "out of memory\n"
    )
    diagnosis = diagnose_text(log, backend="ik_llama.cpp")
    assert diagnosis.backend == "llama.cpp"
    assert diagnosis.failed and diagnosis.failure == "cuda_oom"
    assert get_backend("ik_llama").name == "ik_llama.cpp"


def test_estimate_takes_its_flags() -> None:
    args = ["--layers", "61", "--params", "671B", "--ctx", "16384", "--backend", "ik_llama.cpp"]
    common = [sys.executable, "-m", "vramtui", "estimate", *args, "--gpu-mem", "80GiB", "--json"]
    out = subprocess.run([*common, "-mla", "0", "-amb", "512"], capture_output=True, text=True, timeout=120)
    assert out.returncode in (0, 1), out.stderr
    assert json.loads(out.stdout)["backend"] == "ik_llama.cpp"
    bad = subprocess.run([*common, "-mla", "7"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "MLA mode" in bad.stderr and "Traceback" not in bad.stderr


def test_its_knobs_under_another_engine_are_left_out_and_said() -> None:
    given = _run("llama.cpp", mla=2, attn_max_batch=512, flash_attn=True)
    plain = _run("llama.cpp", flash_attn=True)
    assert given.notes[0] == "-mla, -amb: not a llama.cpp setting, left out"  # type: ignore[attr-defined]
    assert given.kv_cache_bytes == plain.kv_cache_bytes  # type: ignore[attr-defined]
    own = _run("ik_llama.cpp", mla=2, attn_max_batch=512, flash_attn=True)
    assert not any("left out" in note for note in own.notes)  # type: ignore[attr-defined]


def test_the_estimator_panes_extras_field_takes_its_flags() -> None:
    from vramtui.core.estimate.inputs import parse_settings, split_flags

    texts = split_flags("-mla 2 --attention-max-batch 512 -ot exps=CPU")
    settings = parse_settings({**texts, "backend": "ik_llama.cpp"})
    assert (settings.mla, settings.attn_max_batch, settings.override_tensor) == (2, 512, ("exps=CPU",))


def test_a_profile_launches_its_llama_server_with_its_own_flags(tmp_path: Path) -> None:
    from vramtui.core.launch.launcher import build_command
    from vramtui.core.launch.profile import profile_from_dict

    model = tmp_path / "m.gguf"
    model.write_bytes(EMPTY_GGUF)
    params = {"context": 8192, "mla": 2, "attn_max_batch": 512, "run_time_repack": True, "mmap": False}
    plan = build_command(
        profile_from_dict({"backend": "ik_llama.cpp", "model": str(model), "params": params})
    )
    argv = plan.argv
    assert argv[0] == "llama-server" and not plan.unsupported
    assert argv[argv.index("-mla") + 1] == "2" and argv[argv.index("-amb") + 1] == "512"
    assert "-rtr" in argv and "--no-mmap" in argv and "--load-mode" not in argv  # ik has no --load-mode
    assert read_command(argv).backend.name == "ik_llama.cpp"  # type: ignore[union-attr]


def test_the_wizards_memory_model_sizes_a_profiles_mla(tmp_path: Path) -> None:
    from vramtui.core.launch.profile import profile_from_dict
    from vramtui.core.wizard.budget import MemoryModel

    config = {
        "architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3", "hidden_size": 7168,
        "intermediate_size": 18432, "moe_intermediate_size": 2048, "num_hidden_layers": LAYERS,
        "num_attention_heads": 128, "num_key_value_heads": 128, "n_routed_experts": 256, "n_shared_experts": 1,
        "num_experts_per_tok": 8, "first_k_dense_replace": 3, "kv_lora_rank": 512, "q_lora_rank": 1536,
        "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128, "vocab_size": 129280,
        "max_position_embeddings": 163840, "torch_dtype": "bfloat16",
    }  # fmt: skip
    (tmp_path / "config.json").write_text(json.dumps(config))
    kv = {}
    for mla in (3, 1):
        params = {"context": CELLS, "flash_attn": False, "mla": mla, "quant": "q4_k_m"}
        profile = profile_from_dict(
            {"backend": "ik_llama.cpp", "model": str(tmp_path / "config.json"), "params": params}
        )
        model = MemoryModel(profile, device_bytes=400 * GIB)
        bill = model.raw(profile)
        assert bill is not None, model.why_unavailable
        kv[mla] = bill.get("kv_cache", model.place)
    assert kv == {3: CELLS * LATENT * 2 * LAYERS, 1: CELLS * (LATENT + RANK) * 2 * LAYERS}


def test_the_latent_note_is_said_only_where_the_cache_holds_the_latent() -> None:
    """QA: with -mla 0 the cache is sized per head, and the note still said "the cache holds a latent"."""
    latent = "MLA: the cache holds a latent per token, not per-head K/V"
    assert latent in _run("ik_llama.cpp", mla=3, flash_attn=True).notes  # type: ignore[attr-defined]
    assert latent not in _run("ik_llama.cpp", mla=0, flash_attn=True).notes  # type: ignore[attr-defined]
