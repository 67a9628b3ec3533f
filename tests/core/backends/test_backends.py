"""Each backend's command line, checked against the flags the real program accepts.

Where the program is installed here, its own parser reads our argv (llama-cpp-python's server, the
transformers runner). Where it is not, the accepted flags were read from its source and are recorded
below with where they came from:

- llama.cpp `llama-server`: common/arg.cpp of the llama.cpp vendored in llama-cpp-python 0.3.36
  (llama.cpp commit 0c1e570): -c/--ctx-size, -np/--parallel, -b/--batch-size, -ub/--ubatch-size,
  -ctk/--cache-type-k, -ctv/--cache-type-v, -ngl/--gpu-layers/--n-gpu-layers (a number, "auto" or
  "all"), -fa/--flash-attn [on|off|auto], -m/--model, --host, --port, -a/--alias, -t/--threads,
  -fit/--fit [on|off]; tools/server/README.md: GET /health is 503 while loading, 200 when ready.
- vLLM `vllm serve MODEL`: vllm/engine/arg_utils.py (vllm-project/vllm main): --max-model-len,
  --max-num-seqs, --max-num-batched-tokens, --kv-cache-dtype (auto, fp8, fp8_e4m3, fp8_e5m2 ...),
  --gpu-memory-utilization, --quantization/-q, --cpu-offload-gb, --dtype, --served-model-name,
  --enforce-eager, --tensor-parallel-size; --host/--port from the OpenAI server's arguments.
- Ollama `ollama serve`: envconfig/config.go (ollama/ollama): OLLAMA_HOST, OLLAMA_CONTEXT_LENGTH,
  OLLAMA_NUM_PARALLEL, OLLAMA_KV_CACHE_TYPE ("default: f16"), OLLAMA_FLASH_ATTENTION; api/types.go
  Runner options (per request): num_ctx, num_batch, num_gpu.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
from pathlib import Path

import pytest

from vramtui.core.backends import BACKENDS, GGML_TYPES, get_backend
from vramtui.core.errors import VramtuiError
from vramtui.core.launch.launcher import build_command
from vramtui.core.launch.profile import Profile, check_param_value, load_profile

PROFILES = Path(__file__).resolve().parents[2] / "data" / "profiles"

LLAMA_SERVER_FLAGS = {
    "-c", "--ctx-size", "-np", "--parallel", "-b", "--batch-size", "-ub", "--ubatch-size",
    "-ctk", "--cache-type-k", "-ctv", "--cache-type-v", "-ngl", "--gpu-layers", "--n-gpu-layers",
    "-fa", "--flash-attn", "-m", "--model", "--host", "--port", "-a", "--alias", "-t", "--threads",
    "-fit", "--fit", "--mmap", "--no-mmap",
}  # fmt: skip
VLLM_HELP = Path(__file__).resolve().parents[2] / "data" / "vllm" / "help.txt"


def _vllm_help_flags() -> set[str]:
    """Every flag spelling of `vllm serve --help=all` (vLLM 0.32's own printout, tests/data/vllm)."""
    flags: set[str] = set()
    for line in VLLM_HELP.read_text().splitlines():
        option = re.match(r"^  (-[^ ].*?)(?:\s{2,}|$)", line)
        if option:
            flags.update(re.findall(r"(?<![\w-])(--?[A-Za-z0-9][\w.-]*)", option.group(1)))
    return flags


VLLM_FLAGS = _vllm_help_flags()
VLLM_KV_CACHE_DTYPES = {"auto", "fp8", "fp8_e4m3", "fp8_e5m2"}
OLLAMA_ENV = {
    "OLLAMA_HOST",
    "OLLAMA_CONTEXT_LENGTH",
    "OLLAMA_NUM_PARALLEL",
    "OLLAMA_KV_CACHE_TYPE",
    "OLLAMA_FLASH_ATTENTION",
}
OLLAMA_REQUEST_OPTIONS = {"num_ctx", "num_batch", "num_gpu"}


def _flags(argv: list[str]) -> list[str]:
    return [a for a in argv if a.startswith("-")]


def _value_after(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def test_every_backend_has_a_launch_and_a_port() -> None:
    ports = {name: b.launch.default_port for name, b in BACKENDS.items() if b.launch}
    assert ports == {
        "llama.cpp": 8080,
        "llama-cpp-python": 8000,
        "vllm": 8000,
        "transformers": 8000,
        "ollama": 11434,
        "ik_llama.cpp": 8080,  # its llama-server: mainline's default port
    }
    for backend in BACKENDS.values():
        assert backend.launch is not None and backend.launch.health_paths and backend.launch.ready_patterns


def test_llama_server_command_uses_only_real_flags() -> None:
    plan = build_command(load_profile(PROFILES / "llama-server.toml"))
    assert plan.argv[0] == "llama-server"
    assert set(_flags(plan.argv)) <= LLAMA_SERVER_FLAGS
    assert _value_after(plan.argv, "--ctx-size") == "32768"
    assert _value_after(plan.argv, "--parallel") == "4"
    assert _value_after(plan.argv, "--cache-type-k") == _value_after(plan.argv, "--cache-type-v") == "q8_0"
    assert _value_after(plan.argv, "--n-gpu-layers") == "999"  # "all", in a spelling every build takes
    assert _value_after(plan.argv, "--flash-attn") == "auto"
    assert _value_after(plan.argv, "--threads") == "8"
    assert plan.unsupported == ["quant"]  # the GGUF file is the quantization
    assert "pick another file" in plan.notes[0]
    assert plan.health_paths == ("/health",) and plan.port == 8080


def test_vllm_command_uses_only_real_flags_and_says_what_it_lacks() -> None:
    plan = build_command(load_profile(PROFILES / "vllm-full.toml"))
    assert plan.argv[:3] == ["vllm", "serve", "Qwen/Qwen2.5-7B-Instruct"]  # a hub name stays a name
    assert set(_flags(plan.argv)) <= VLLM_FLAGS
    assert _value_after(plan.argv, "--max-model-len") == "16384"
    assert _value_after(plan.argv, "--max-num-seqs") == "8"
    assert _value_after(plan.argv, "--max-num-batched-tokens") == "4096"
    assert _value_after(plan.argv, "--kv-cache-dtype") in VLLM_KV_CACHE_DTYPES
    assert _value_after(plan.argv, "--gpu-memory-utilization") == "0.85"
    assert _value_after(plan.argv, "--quantization") == "awq"
    assert _value_after(plan.argv, "--cpu-offload-gb") == "2"
    assert _value_after(plan.argv, "--dtype") == "bfloat16"
    assert plan.argv[-1] == "--enforce-eager"  # extra_args come last, as given
    assert _value_after(plan.argv, "--attention-backend") == "FLASH_ATTN"  # VLLM_ATTENTION_BACKEND is gone
    assert plan.env == {}
    assert plan.unsupported == ["gpu_layers"]
    assert "cpu_offload" in plan.notes[0]


def test_vllm_refuses_a_llama_cpp_kv_type_at_load_instead_of_passing_it() -> None:
    # issue 22 #11: refused when the profile is read (exit 2), not launched with the default after a note
    with pytest.raises(VramtuiError, match=r"vllm does not take kv_dtype='q4_0' \(it takes auto, fp8"):
        Profile(backend="vllm", model="m", params={"kv_dtype": "q4_0"})
    # f16 is vLLM's "auto" (the model's dtype)
    assert "auto" in build_command(Profile(backend="vllm", model="m", params={"kv_dtype": "f16"})).argv


def test_ollama_takes_environment_and_request_options() -> None:
    plan = build_command(load_profile(PROFILES / "ollama.toml"))
    assert plan.argv == ["ollama", "serve"]  # the model is named per request
    assert set(plan.env) <= OLLAMA_ENV
    assert plan.env == {
        "OLLAMA_HOST": "127.0.0.1:11500",
        "OLLAMA_CONTEXT_LENGTH": "8192",
        "OLLAMA_NUM_PARALLEL": "2",
        "OLLAMA_KV_CACHE_TYPE": "q8_0",
        "OLLAMA_FLASH_ATTENTION": "1",
    }
    assert plan.request_options == {"num_gpu": 20, "num_batch": 256}
    assert set(plan.request_options) <= OLLAMA_REQUEST_OPTIONS
    assert plan.unsupported == ["mem_share"]
    assert plan.model_name == "llama3.1:8b"
    assert plan.command_line().startswith("OLLAMA_HOST=127.0.0.1:11500 ")


@pytest.mark.skipif(shutil.which("ollama") is None, reason="ollama not installed")
def test_ollama_binary_has_serve() -> None:  # pragma: no cover - only where Ollama is installed
    import subprocess

    out = subprocess.run(
        ["ollama", "serve", "--help"], capture_output=True, text=True, timeout=30, check=False
    )
    for name in OLLAMA_ENV:
        assert name in out.stdout + out.stderr


def test_llama_cpp_python_argv_parses_with_its_own_parser(tmp_path: Path) -> None:
    pytest.importorskip("llama_cpp")
    from llama_cpp.server.cli import add_args_from_model, parse_model_from_args
    from llama_cpp.server.settings import ModelSettings, ServerSettings, Settings

    profile = Profile(
        backend="llama-cpp-python",
        model=str(tmp_path / "m.gguf"),
        params={"context": 4096, "batch": 256, "ubatch": 128, "kv_dtype": "q8_0", "gpu_layers": "all",
                "flash_attn": True, "parallel": 1, "threads": 2, "model_alias": "tiny"},
        port=8123,
    )  # fmt: skip
    plan = build_command(profile)
    assert plan.argv[:3] == [sys.executable, "-m", "llama_cpp.server"]
    assert plan.unsupported == []  # parallel = 1 is what its server always does
    parser = argparse.ArgumentParser()
    add_args_from_model(parser, Settings)
    args = parser.parse_args(plan.argv[3:])  # exits (SystemExit) on any flag it does not know
    model = parse_model_from_args(ModelSettings, args)
    server = parse_model_from_args(ServerSettings, args)
    assert (model.n_ctx, model.n_batch, model.n_ubatch, model.n_gpu_layers) == (4096, 256, 128, -1)
    assert model.type_k == model.type_v == GGML_TYPES["q8_0"] == 8
    assert model.flash_attn is True and model.n_threads == 2 and model.model_alias == "tiny"
    assert (server.host, server.port) == ("127.0.0.1", 8123)
    assert plan.model_name == "tiny"
    # parallel > 1 is something it cannot do: said, not dropped
    assert build_command(profile.with_param("parallel", 4)).unsupported == ["parallel"]


def test_transformers_argv_parses_with_the_runner_parser(tmp_path: Path) -> None:
    from vramtui.runners.transformers_server import parse_args, parse_max_memory

    (tmp_path / "hf-tiny").mkdir()
    shutil.copy(PROFILES / "transformers-bnb.toml", tmp_path / "p.toml")
    plan = build_command(load_profile(tmp_path / "p.toml"))
    assert plan.argv[:3] == [sys.executable, "-m", "vramtui.runners.transformers_server"]
    args = parse_args(plan.argv[3:])
    assert args.model == str((tmp_path / "hf-tiny").resolve())
    assert (args.max_length, args.batch_size, args.quantization) == (4096, 2, "bnb-4bit")
    assert (args.attn_implementation, args.dtype, args.device_map) == ("sdpa", "bfloat16", "auto")
    assert parse_max_memory(args.max_memory) == {"cpu": "8GiB"}
    assert plan.unsupported == ["kv_dtype"]
    assert "model's dtype" in plan.notes[0]


def test_values_cannot_inject_commands() -> None:
    evil = "x; rm -rf / #"
    profile = Profile(
        backend="llama.cpp", model=f"/m/{evil}.gguf", params={"alias": evil}, extra_args=("$(reboot)",)
    )
    plan = build_command(profile)
    assert f"/m/{evil}.gguf" in plan.argv and evil in plan.argv and "$(reboot)" in plan.argv
    # The shown command line quotes them: pasted into a shell, they stay single words.
    import shlex

    shown = shlex.split(plan.command_line())  # the environment first (LLAMA_ARG_LOG_VERBOSITY=4), then argv
    assert shown[: len(plan.env)] == [f"{k}={v}" for k, v in plan.env.items()]
    assert shown[len(plan.env) :] == plan.argv


def test_unknown_parameter_is_refused_and_backend_extras_pass() -> None:
    with pytest.raises(VramtuiError, match="did you mean context"):
        Profile(backend="llama.cpp", model="/m.gguf", params={"contxt": 4096})
    plan = build_command(Profile(backend="llama.cpp", model="/m.gguf", params={"threads": 3}))
    assert plan.argv[-2:] == ["--threads", "3"] and plan.unsupported == []


def test_bad_values_are_one_line_errors() -> None:
    with pytest.raises(VramtuiError, match="whole number"):
        build_command(Profile(backend="llama.cpp", model="/m.gguf", params={"context": "lots"}))
    with pytest.raises(VramtuiError, match="on/off"):
        build_command(Profile(backend="llama.cpp", model="/m.gguf", params={"flash_attn": "maybe"}))
    # a device no llama.cpp backend registers: refused when the profile is read, never launched
    with pytest.raises(VramtuiError, match=r"PATTERN=DEVICE with a llama\.cpp device"):
        check_param_value(get_backend("llama.cpp"), "override_tensor", ["exps=CPU", "blk\\.0\\.=Banana"])
    check_param_value(get_backend("llama.cpp"), "override_tensor", ["exps=CPU", "blk\\.0\\.=CUDA1"])


def test_get_backend_aliases() -> None:
    assert get_backend("llama-server").name == "llama.cpp"
    assert get_backend("LLAMA_CPP.SERVER").name == "llama-cpp-python"
    with pytest.raises(VramtuiError, match="unknown backend"):
        get_backend("tensorrt")
    # a near miss names the backend it is near (QA: "llama-cpp" got the list alone); a far one does not guess
    with pytest.raises(VramtuiError, match=r"unknown backend 'llama-cpp'; did you mean 'llama\.cpp'\?"):
        get_backend("llama-cpp")
    with pytest.raises(VramtuiError) as far:
        get_backend("tensorrt")
    assert "did you mean" not in str(far.value)


def test_a_setting_that_takes_two_flags_is_named_by_both() -> None:
    """QA (session 13): the wizard's KV move read `kv_dtype (--cache-type-k): f16 -> q4_0` while it
    launched both -ctk and -ctv; copying the label changed half of it."""
    from vramtui.core.backends import get_backend

    assert get_backend("llama.cpp").knob_words("kv_dtype") == "--cache-type-k and --cache-type-v"
    assert get_backend("llama.cpp").knob_words("context") == "--ctx-size"
    assert get_backend("vllm").knob_words("kv_dtype") == "--kv-cache-dtype"
    assert get_backend("llama.cpp").knob_words("no_such_setting") is None


def test_vllms_cpu_kv_space_in_the_environment_sizes_the_estimate() -> None:
    """QA 9: a profile with VLLM_CPU_KVCACHE_SPACE = 1 in [env] was billed 22 GiB of KV (the share of the
    machine) where vLLM printed "Explicitly set (1.0/23.54) GiB for KV cache"."""
    from vramtui.core.backends import get_backend
    from vramtui.core.backends.base import sizing_params

    vllm = get_backend("vllm")
    assert (
        sizing_params(vllm, {"context": 1024}, {"VLLM_CPU_KVCACHE_SPACE": "1"})["kv_cache_memory"] == "1GiB"
    )
    assert "kv_cache_memory" not in sizing_params(vllm, {}, {"VLLM_CPU_KVCACHE_SPACE": "0"})  # 0: the share
    given = {"kv_cache_memory": "2GiB"}  # the flag the profile sets rules over the environment
    assert sizing_params(vllm, given, {"VLLM_CPU_KVCACHE_SPACE": "1"}) == given
    assert sizing_params(get_backend("llama.cpp"), {}, {"VLLM_CPU_KVCACHE_SPACE": "1"}) == {}
