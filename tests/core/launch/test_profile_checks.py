"""Issue 13 #2-#4 and issue 14's `program`: every mistake in a profile is one line and exit 2, before launch."""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from placeholder_files import EMPTY_GGUF

from vramtui.core.errors import VramtuiError
from vramtui.core.launch.launcher import build_command
from vramtui.core.launch.profile import Profile, load_launch_profile, load_profile, profile_from_dict


def vramtui(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vramtui", *args], capture_output=True, text=True, timeout=60, check=False
    )


def write(folder: Path, body: str, model: str = "m.gguf") -> Path:
    (folder / "m.gguf").write_bytes(EMPTY_GGUF)
    path = folder / "p.toml"
    path.write_text(f'backend = "llama.cpp"\nmodel = "{model}"\n{body}', encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("body", "nearest"),
    [
        ('[limits]\nmemory_budgt = "1GiB"\n', "memory_budget"),
        ("[params]\ncontxt = 512\n", "context"),
        ("contxt = 512\n", "context"),
        ('hots = "127.0.0.1"\n', "host"),
        ("[param]\ncontext = 512\n", "params"),
        ("[limit]\nmemory_budget = 1\n", "limits"),
    ],
)
def test_a_typo_in_any_table_is_refused_naming_the_nearest_key(
    tmp_path: Path, body: str, nearest: str
) -> None:
    path = write(tmp_path, body)
    with pytest.raises(VramtuiError, match=rf"did you mean {nearest}\?"):
        load_profile(path)


def test_the_limits_typo_is_exit_2_on_the_command_line(tmp_path: Path) -> None:
    done = vramtui("check", str(write(tmp_path, '[limits]\nmemory_budgt = "1GiB"\n')))
    assert done.returncode == 2, done
    assert done.stderr.strip().splitlines() == [
        "vramtui: unknown profile key 'memory_budgt' under [limits]: did you mean memory_budget?"
    ]


def test_an_engines_own_flag_as_a_key_names_the_shared_one(tmp_path: Path) -> None:
    """QA 9, 10: `max_model_len = 1024` under [params] of a vLLM profile got no did-you-mean."""
    from vramtui.core.backends import get_backend
    from vramtui.core.launch.profile import check_param_name

    with pytest.raises(
        VramtuiError, match=r"did you mean context\? \(vllm's --max-model-len is context here\)"
    ):
        check_param_name(get_backend("vllm"), "max_model_len")
    with pytest.raises(VramtuiError, match=r"did you mean parallel\?"):
        check_param_name(get_backend("vllm"), "max_num_seqs")


def test_env_stays_free_form(tmp_path: Path) -> None:
    profile = load_profile(write(tmp_path, '[env]\nANYTHING_AT_ALL = "1"\n'))
    assert profile.env == {"ANYTHING_AT_ALL": "1"}


def test_an_env_value_that_is_a_table_is_refused_in_one_line(tmp_path: Path) -> None:
    """QA 9: `A = {b = 1}` under [env] was passed to the engine as the text "{'b': 1}"."""
    with pytest.raises(VramtuiError, match=r"^\[env\] A must be text or a number"):
        load_profile(write(tmp_path, "[env]\nA = {b = 1}\n"))
    assert load_profile(write(tmp_path, "[env]\nN = 4\n")).env == {"N": "4"}


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"context": -5}, r"context must be 0 or more"),
        ({"parallel": 0}, r"parallel must be 1 or more"),
        ({"batch": -1}, r"batch must be 1 or more"),
        ({"ubatch": 0}, r"ubatch must be 1 or more"),
        ({"gpu_layers": -3}, r"gpu_layers must be 0 or more"),
        ({"flash_attn": "sometimes"}, r"not an on/off value"),
        # QA: the key named, the other word it takes said, and the value as TOML spells it
        ({"flash_attn": "maybe"}, r'^flash_attn is not an on/off value: "maybe"'),
        ({"gpu_layers": "most"}, r'^gpu_layers must be a whole number or "all", not "most"$'),
        ({"parallel": True}, r"^parallel must be a whole number, not true$"),
        ({"n_cpu_moe": -2}, r"^n_cpu_moe must be 0 or more, not -2$"),  # QA: refused by the engine only
    ],
)
def test_impossible_values_are_refused_at_load(params: dict[str, object], message: str) -> None:
    with pytest.raises(VramtuiError, match=message):
        profile_from_dict({"backend": "llama.cpp", "model": "m.gguf", "params": params})


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"mem_share": 1.5}, r"mem_share must be a share of the card above 0 and at most 1"),
        ({"mem_share": 0}, r"mem_share must be"),
        ({"context": 0}, r"context must be 1 or more"),  # vLLM has no "0 = the trained length"
        ({"cpu_offload": -2}, r"cpu_offload must be 0 or more"),
    ],
)
def test_impossible_values_for_vllm(params: dict[str, object], message: str) -> None:
    with pytest.raises(VramtuiError, match=message):
        profile_from_dict({"backend": "vllm", "model": "org/model", "params": params})


@pytest.mark.parametrize(
    ("params", "message"),
    [
        # QA 21 F2: each was launched, to fail at load as "other" with generic advice
        ({"max_memory": "cpu=10"}, r"^max_memory: '10' has no unit: 10GiB\?"),
        ({"max_memory": "0=-1GiB"}, r"^max_memory: '-1GiB' is not a size such as 20GiB"),
        ({"max_memory": "0=0GiB"}, r"^max_memory = '0=0GiB': each device's cap must be above 0"),
        ({"max_memory": "gpu0=10GiB"}, r"^max_memory: 'gpu0=10GiB' is not DEVICE=SIZE"),
        (
            {"dtype": "float8"},
            r"^dtype = 'float8': transformers loads at auto, float16, bfloat16, float32 \(8-bit",
        ),
        ({"dtype": "bfloat61"}, r'did you mean "bfloat16"\?$'),
        ({"device_map": "cuda3"}, r"^device_map = 'cuda3': accelerate takes auto, balanced"),
    ],
)
def test_impossible_values_for_transformers(params: dict[str, object], message: str) -> None:
    with pytest.raises(VramtuiError, match=message):
        profile_from_dict({"backend": "transformers", "model": "/m", "params": params})


@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("load_in_4bit", 'quant = "bnb-4bit"'),
        ("load_in_8bit", 'quant = "bnb-8bit"'),
        ("max_length", "context"),
    ],
)
def test_transformers_api_words_name_their_setting(name: str, said: str) -> None:
    """QA 21 F11: load_in_4bit, what an HF user types first, got no hint."""
    with pytest.raises(VramtuiError, match=f"unknown parameter '{name}'.*did you mean {re.escape(said)}\\?"):
        profile_from_dict({"backend": "transformers", "model": "/m", "params": {name: True}})


def test_a_cap_of_one_says_leave_it_out(tmp_path: Path) -> None:
    """QA 21 F13: "set parallel = 1 or less" where 0 is refused too."""
    (tmp_path / "m.gguf").write_bytes(EMPTY_GGUF)
    path = tmp_path / "p.toml"
    path.write_text(
        'backend = "llama-cpp-python"\nmodel = "m.gguf"\n[params]\nparallel = 4\n', encoding="utf-8"
    )
    done = vramtui("check", str(path))
    assert done.returncode == 2 and done.stderr.strip().endswith("set parallel = 1 (or leave it out)"), (
        done.stderr
    )


@pytest.mark.parametrize(
    "params",
    [
        {"max_memory": "0=10GiB,cpu=30GiB"},
        {"dtype": "bfloat16"},
        {"dtype": "auto"},
        {"device_map": "auto"},
        {"device_map": "cuda:1"},
        {"device_map": "cpu"},
        {"device_map": "balanced_low_0"},
    ],
)
def test_values_transformers_takes_are_kept(params: dict[str, object]) -> None:
    profile = profile_from_dict({"backend": "transformers", "model": "/m", "params": params})
    assert profile.params == params


def test_context_zero_is_the_trained_length_for_llama_server() -> None:
    profile = profile_from_dict({"backend": "llama.cpp", "model": "m.gguf", "params": {"context": 0}})
    assert "--ctx-size" in (argv := build_command(profile).argv) and argv[argv.index("--ctx-size") + 1] == "0"


def test_a_wizard_change_to_an_impossible_value_is_refused_too() -> None:
    profile = profile_from_dict({"backend": "llama.cpp", "model": "m.gguf"})
    with pytest.raises(VramtuiError, match="parallel must be 1 or more"):
        profile.with_param("parallel", 0)


def test_context_minus_5_is_exit_2_one_line(tmp_path: Path) -> None:
    done = vramtui("check", str(write(tmp_path, "[params]\ncontext = -5\n")))
    assert done.returncode == 2, done
    assert len(done.stderr.strip().splitlines()) == 1 and "context must be 0 or more" in done.stderr


# --- issue 22 #10, #11: a budget, a KV type and a context no engine can run with ----------------------


@pytest.mark.parametrize(
    ("budget", "said"),
    [
        ('"0"', """memory_budget = '0' is no budget: leave it out to run without one"""),
        ("0", "memory_budget = 0 is no budget: leave it out to run without one"),
        ('"0MiB"', """memory_budget = '0MiB' is no budget"""),
        ("600", "memory_budget: 600 has no unit: 600MiB?"),
        ('"600"', "memory_budget: '600' has no unit: 600MiB?"),
        ("1.5", "memory_budget: 1.5 has no unit: 1.5GiB?"),
        ('"300"', "memory_budget: '300' has no unit: 300MiB or 300GiB?"),  # QA 17 F18
    ],
)
def test_a_budget_without_a_unit_or_of_zero_is_exit_2_one_line(
    tmp_path: Path, budget: str, said: str
) -> None:
    # both were launched: "0" as a 0-byte address-space limit, 600 as 600 bytes (the engine dies unheard)
    path = write(tmp_path, f"[limits]\nmemory_budget = {budget}\n")
    with pytest.raises(VramtuiError, match=re.escape(said)):
        load_profile(path)
    done = vramtui("check", str(path), "--log-dir", str(tmp_path / "runs"))
    assert done.returncode == 2, done
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"vramtui: {said}"), lines
    assert not (tmp_path / "runs").exists()  # nothing was launched


def test_a_budget_with_its_unit_still_loads_and_an_odd_one_round_trips(tmp_path: Path) -> None:
    assert load_profile(write(tmp_path, '[limits]\nmemory_budget = "600MiB"\n')).memory_budget == 600 * 2**20
    odd = load_profile(write(tmp_path, '[limits]\nmemory_budget = "1000001B"\n'))
    assert odd.memory_budget == 1000001
    assert load_profile(odd.save(tmp_path / "again.toml")).memory_budget == 1000001


@pytest.mark.parametrize(
    ("backend", "kv", "said"),
    [
        ("llama.cpp", "q3_k", "llama.cpp does not take kv_dtype='q3_k' (it takes f32, f16, bf16, q8_0"),
        ("llama-cpp-python", "bf16", "llama-cpp-python does not take kv_dtype='bf16'"),
        ("ollama", "q5_0", "ollama does not take kv_dtype='q5_0' (it takes f16, q8_0, q4_0)"),
        ("vllm", "q8_0", "vllm does not take kv_dtype='q8_0' (it takes auto, fp8"),
        ("transformers", "fp8", "transformers does not take kv_dtype='fp8' (it takes f16, bf16, f32)"),
    ],
)
def test_a_kv_type_the_engine_does_not_take_is_refused_at_load(backend: str, kv: str, said: str) -> None:
    # q3_k was launched with llama-server's f16 cache after a "not passed" line, and rc 0
    with pytest.raises(VramtuiError, match=re.escape(said)):
        profile_from_dict({"backend": backend, "model": "m.gguf", "params": {"kv_dtype": kv}})


@pytest.mark.parametrize(
    ("backend", "kv"),
    [("llama.cpp", "q8_0"), ("llama.cpp", "F16"), ("vllm", "f16"), ("vllm", "fp8"), ("ollama", "q4_0")],
)
def test_the_kv_types_each_engine_takes_still_load(backend: str, kv: str) -> None:
    profile = profile_from_dict({"backend": backend, "model": "m.gguf", "params": {"kv_dtype": kv}})
    assert not build_command(profile).notes  # passed to the engine, no "not passed" line


@pytest.mark.parametrize("context", [1000000000000, "1000000000000", 2**31])
def test_a_context_past_what_any_engine_takes_is_refused_at_load(context: object) -> None:
    # 10**12 reached llama-server, which died in std::stoi before a line of its own
    for backend in ("llama.cpp", "vllm"):
        with pytest.raises(
            VramtuiError, match=r"context must be at most 2147483647 \(no engine takes more\)"
        ):
            profile_from_dict({"backend": backend, "model": "m.gguf", "params": {"context": context}})
    assert profile_from_dict({"backend": "llama.cpp", "model": "m.gguf", "params": {"context": 2**31 - 1}})


def test_the_kv_type_and_the_context_are_exit_2_on_the_command_line(tmp_path: Path) -> None:
    for body, said in (
        ('[params]\nkv_dtype = "q3_k"\n', "llama.cpp does not take kv_dtype='q3_k'"),
        ("[params]\ncontext = 1000000000000\n", "context must be at most 2147483647"),
    ):
        done = vramtui("check", str(write(tmp_path, body)), "--log-dir", str(tmp_path / "runs"))
        assert done.returncode == 2, done
        assert len(done.stderr.strip().splitlines()) == 1 and said in done.stderr, done.stderr
        assert not (tmp_path / "runs").exists()


# --- the model file ---------------------------------------------------------------------------------


def test_a_missing_model_file_is_exit_2_before_any_launch(tmp_path: Path) -> None:
    path = write(tmp_path, "", model="nowhere.gguf")
    done = vramtui("check", str(path), "--log-dir", str(tmp_path / "runs"))
    assert done.returncode == 2, done
    assert done.stderr.strip().splitlines() == [f"vramtui: model file not found: {tmp_path / 'nowhere.gguf'}"]
    assert not (tmp_path / "runs").exists()  # nothing was launched, no run log was opened


def test_the_wizard_refuses_it_the_same_way(tmp_path: Path) -> None:
    done = vramtui("wizard", str(write(tmp_path, "", model="nowhere.gguf")))
    assert done.returncode == 2 and "model file not found" in done.stderr, done


@pytest.mark.parametrize(
    ("backend", "model"),
    [("vllm", "Qwen/Qwen2.5-0.5B-Instruct"), ("ollama", "llama3.2:1b")],
)
def test_names_that_are_no_files_pass(tmp_path: Path, backend: str, model: str) -> None:
    # the engine's own program must be on PATH (its [env] PATH here): vllm and ollama, as stand-ins
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("vllm", "ollama"):
        (bin_dir / name).write_text("#!/bin/sh\nexit 0\n")
        (bin_dir / name).chmod(0o755)
    path = tmp_path / "p.toml"
    path.write_text(
        f'backend = "{backend}"\nmodel = "{model}"\n[env]\nPATH = "{bin_dir}"\n', encoding="utf-8"
    )
    assert load_launch_profile(path).model == model


@pytest.mark.parametrize(
    ("backend", "model", "said"),
    [
        (
            "vllm",
            "org/model",
            "vllm not found on PATH: vllm's server is not installed (pip install vllm; with no GPU, its CPU "
            "build: scripts/install_vllm.sh in vramtui's repository); or name it in the profile: "
            'program = "/path/to/vllm"',
        ),
        (
            "ollama",
            "llama3.2:1b",
            "ollama not found on PATH: ollama's server is not installed (https://ollama.com/download; on Linux: "
            'curl -fsSL https://ollama.com/install.sh | sh); or name it in the profile: program = "/path/to/ollama"',
        ),
        (
            "llama.cpp",
            "m.gguf",
            "llama-server not found on PATH: llama.cpp's server is not installed (a release",
        ),
    ],
)
def test_an_engine_that_is_not_installed_is_named_with_how_to_get_it_exit_2(
    tmp_path: Path, backend: str, model: str, said: str
) -> None:
    # Issue 22 #30: a missing vLLM or Ollama got llama-server's advice and exit status 1 after a launch;
    # the README promises a program that is not there is one line and exit 2 before anything is launched.
    (tmp_path / "m.gguf").write_bytes(EMPTY_GGUF)
    (tmp_path / "empty").mkdir()
    path = tmp_path / "p.toml"
    path.write_text(f'backend = "{backend}"\nmodel = "{model}"\n[env]\nPATH = "{tmp_path / "empty"}"\n')
    for argv in (("check", str(path), "--log-dir", str(tmp_path / "runs")), ("wizard", str(path))):
        done = vramtui(*argv)
        assert done.returncode == 2, done
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"vramtui: {said}"), lines
        assert "llama-server" not in lines[0] or backend == "llama.cpp"
    assert not (tmp_path / "runs").exists()


def _hub_cache(root: Path, repo: str) -> Path:
    """A hub cache as huggingface_hub lays it out, with one snapshot of `repo` holding a config.json."""
    snapshot = root / "hub" / f"models--{repo.replace('/', '--')}" / "snapshots" / ("0" * 40)
    snapshot.mkdir(parents=True)
    shape = '{"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4}'
    (snapshot / "config.json").write_text(shape, encoding="utf-8")
    return snapshot


def test_the_transformers_runner_gets_a_model_folder_or_exit_2_before_launch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """QA 11: a missing folder, a hub name and an empty folder were launched and failed in the runner (the
    empty one on its tokenizer, with advice about tokenizer files)."""
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "no-cache"))
    (tmp_path / "empty").mkdir()
    (tmp_path / "file.bin").write_bytes(b"x")
    said = {
        "nosuch": "model folder not found: nosuch (transformers loads a local folder; a hub name must be in "
        "the local Hugging Face cache",
        "qa/tiny": "model folder not found: qa/tiny",
        "./empty": "no config.json in the folder",
        "./file.bin": "model is a file, not a folder",
    }
    for model, message in said.items():
        path = tmp_path / "p.toml"
        path.write_text(f'backend = "transformers"\nmodel = "{model}"\n', encoding="utf-8")
        with pytest.raises(VramtuiError, match=re.escape(message)):
            load_launch_profile(path)
    done = vramtui("check", str(path), "--log-dir", str(tmp_path / "runs"))
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("variable", ["HF_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME"])
def test_a_hub_name_in_the_local_cache_is_its_snapshot_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    """The cache is where huggingface_hub keeps it: HF_HUB_CACHE, HF_HOME/hub, or XDG_CACHE_HOME/huggingface/hub
    (QA 11: a cache under XDG_CACHE_HOME was not found). The run is named after the model, not the hash."""
    for name in ("HF_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)
    root = {"HF_HUB_CACHE": tmp_path, "HF_HOME": tmp_path, "XDG_CACHE_HOME": tmp_path / "huggingface"}[
        variable
    ]
    snapshot = _hub_cache(root, "QA/Tiny")
    monkeypatch.setenv(variable, str(tmp_path / "hub" if variable == "HF_HUB_CACHE" else tmp_path))
    path = tmp_path / "p.toml"
    path.write_text('backend = "transformers"\nmodel = "qa/tiny"\n', encoding="utf-8")
    profile = load_launch_profile(path)
    assert profile.model == str(snapshot) and profile.label == "tiny"
    assert profile.to_dict(tmp_path)["model"] == "qa/tiny"  # saved again as the file spells it


def test_a_path_looking_model_that_is_not_there_is_an_error_for_vllm_too(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text('backend = "vllm"\nmodel = "./models/qwen"\n', encoding="utf-8")
    with pytest.raises(VramtuiError, match="model file not found"):
        load_launch_profile(path)


# --- program ----------------------------------------------------------------------------------------


def test_the_program_key_names_the_binary(tmp_path: Path) -> None:
    binary = tmp_path / "bin" / "llama-server"
    binary.parent.mkdir()
    binary.write_text("#!/bin/sh\nexit 0\n")
    binary.chmod(binary.stat().st_mode | stat.S_IXUSR)
    profile = load_launch_profile(write(tmp_path, f'program = "{binary}"\n'))
    assert build_command(profile).argv[0] == str(binary)
    assert profile.to_dict()["program"] == str(binary)  # and a saved profile keeps it


def test_a_relative_program_is_relative_to_the_profile(tmp_path: Path) -> None:
    binary = tmp_path / "llama-server"
    binary.write_text("#!/bin/sh\nexit 0\n")
    binary.chmod(0o755)
    profile = load_launch_profile(write(tmp_path, 'program = "./llama-server"\n'))
    assert build_command(profile).argv[0] == str(binary)


def test_a_missing_program_is_exit_2(tmp_path: Path) -> None:
    done = vramtui("check", str(write(tmp_path, 'program = "/opt/nowhere/llama-server"\n')))
    assert done.returncode == 2, done
    assert done.stderr.strip().splitlines() == ["vramtui: program not found: /opt/nowhere/llama-server"]


def test_a_program_that_is_not_executable_is_exit_2(tmp_path: Path) -> None:
    binary = tmp_path / "llama-server"
    binary.write_text("not a program")
    os.chmod(binary, 0o644)
    done = vramtui("check", str(write(tmp_path, f'program = "{binary}"\n')))
    assert done.returncode == 2, done
    assert done.stderr.strip().splitlines() == [f"vramtui: program is not an executable file: {binary}"]


def test_a_profile_may_spell_a_context_as_the_cli_does(tmp_path: Path) -> None:
    """QA 13 #17: `context = "32k"` was refused while `--ctx 32k` is taken."""
    from vramtui.core.launch.profile import load_profile

    path = tmp_path / "p.toml"
    path.write_text('backend = "llama.cpp"\nmodel = "m.gguf"\n[params]\ncontext = "32k"\nubatch = "1,024"\n')
    profile = load_profile(path)
    assert profile.params["context"] == 32768 and profile.params["ubatch"] == 1024
    path.write_text('backend = "llama.cpp"\nmodel = "m.gguf"\n[params]\ncontext = "lots"\n')
    with pytest.raises(VramtuiError, match='context must be a whole number, not "lots"'):
        load_profile(path)


def test_settings_the_engine_refuses_are_said_before_check_launches() -> None:
    from vramtui.core.launch.profile import check_runnable

    def refused(backend: str, **params: object) -> str:
        with pytest.raises(VramtuiError) as error:
            check_runnable(Profile(backend=backend, model="/m.gguf", params=params))
        return str(error.value)

    assert "runs at most 256 sequences" in refused("llama-server", parallel=300)
    assert 'set flash_attn = "on"' in refused("llama-server", kv_dtype="q8_0", flash_attn="off")
    assert 'set flash_attn = "on"' in refused("llama-cpp-python", kv_dtype="q8_0")  # its default is off
    # "K/V": only a quantized V needs flash attention (llama-server -ctk q8_0 -ctv f16 -fa off starts)
    assert 'set flash_attn = "on"' in refused("llama-server", kv_dtype="f16/q8_0", flash_attn="off")
    check_runnable(
        Profile(backend="llama-server", model="/m.gguf", params={"kv_dtype": "q8_0/f16", "flash_attn": "off"})
    )
    for fine in ({"parallel": 256}, {"kv_dtype": "q8_0"}, {"kv_dtype": "q8_0", "flash_attn": "on"}):
        check_runnable(Profile(backend="llama-server", model="/m.gguf", params=fine))  # auto is on
    check_runnable(
        Profile(backend="vllm", model="m", params={"parallel": 300})
    )  # its default batch holds 300
    # vLLM's own refusal, asked of the same Backend method the estimate asks
    assert "max_num_batched_tokens (256) must be greater than or equal to max_num_seqs (300)" in refused(
        "vllm", parallel=300, batch=256
    )
    check_runnable(Profile(backend="vllm", model="m", params={"parallel": 256, "batch": 256}))


def test_a_setting_whose_package_is_not_installed_is_refused_with_its_undo(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """QA 11: flash_attn = true without flash-attn, and bnb-4bit without bitsandbytes, launched and failed
    at load (the first read as a network error). The runner is on vramtui's own Python: it is asked."""
    from vramtui.core.launch.profile import runnable_refusal

    missing = {"flash_attn", "bitsandbytes"}
    monkeypatch.setattr("vramtui.core.backends.base._importable", lambda module: module not in missing)

    def refusal(**params: object) -> tuple[str, str, object]:
        found = runnable_refusal(Profile(backend="transformers", model="/m", params=params))
        assert found is not None
        return found.message, found.param, found.value

    message, param, value = refusal(flash_attn=True)
    assert (param, value) == ("flash_attn", False)  # the wizard's first change: transformers' sdpa
    assert "needs the flash-attn package" in message and "set flash_attn = false" in message
    message, param, value = refusal(quant="nf4")  # an alias of bnb-4bit
    assert (param, value) == ("quant", None) and "drop quant" in message and "bitsandbytes" in message
    assert refusal(attn_implementation="flash_attention_2")[1] == "attn_implementation"
    for fine in ({"flash_attn": False}, {"attn_implementation": "sdpa"}, {}):
        assert runnable_refusal(Profile(backend="transformers", model="/m", params=fine)) is None
    # an engine on a Python of its own is not asked (vLLM's flash attention is its own business)
    assert runnable_refusal(Profile(backend="vllm", model="m", params={"quant": "fp8"})) is None
    missing.clear()
    assert runnable_refusal(Profile(backend="transformers", model="/m", params={"flash_attn": True})) is None


def test_the_wizards_first_move_is_llama_cpps_own_named_fix() -> None:
    from vramtui.core.backends import get_backend
    from vramtui.core.backends.base import FailedRun

    fix = get_backend("llama.cpp").named_fix
    assert fix is not None
    run = FailedRun(failure="other", cause="too_many_sequences", stage="kv_cache", figures={}, params={})
    assert fix(run)[:2] == ("parallel", 256)
    run = FailedRun(
        failure="other", cause="v_cache_needs_flash_attn", stage="kv_cache", figures={}, params={}
    )
    assert fix(run)[:2] == ("flash_attn", "on")


def test_vllm_sequences_over_its_default_batch_are_refused_for_the_card_there(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """max_num_seqs over the default max_num_batched_tokens of the card (2048 under 70 GiB, 8192 from 70,
    16384 from 160; 2048 on the CPU build): vLLM refuses it at config time, so `check` says so first."""
    from vramtui.core.launch.profile import runnable_refusal
    from vramtui.core.memory import nvml
    from vramtui.core.units import GIB

    def on(card: int | None, **params: object) -> object:
        monkeypatch.setattr(nvml, "first_gpu_total_bytes", lambda: card)
        return runnable_refusal(Profile(backend="vllm", model="m", params=params))

    refusal = on(24 * GIB, parallel=4096)
    assert refusal is not None and (refusal.param, refusal.value) == ("parallel", 2048)
    assert (
        "max_num_batched_tokens (2048) must be greater than or equal to max_num_seqs (4096)"
        in refusal.message
    )
    assert "batch is unset" in refusal.message
    assert on(80 * GIB, parallel=4096) is None
    assert on(None, parallel=4096) is not None  # the CPU build's default is 2048 too
    assert (
        on(24 * GIB, parallel=4096, context=8192) is None
    )  # a prefill that is not chunked takes the context
    assert on(24 * GIB, parallel=4096, batch=4096) is None


def test_a_vllm_context_past_the_models_own_length_is_refused_before_launch(short_trained_hf: Path) -> None:
    """QA 9: `estimate` said WILL NOT START for --max-model-len 4096 of a model trained on 2048, and
    `check` launched it anyway, to fail at load with "User-specified max_model_len (4096) is greater"."""
    from vramtui.core.launch.profile import runnable_refusal
    from vramtui.core.wizard.wizard import Wizard

    profile = Profile(backend="vllm", model=str(short_trained_hf), params={"context": 4096})
    refusal = runnable_refusal(profile)
    assert refusal is not None and (refusal.param, refusal.value) == ("context", 2048)
    assert "User-specified max_model_len (4096)" in refusal.message
    assert (
        runnable_refusal(Profile(backend="vllm", model=str(short_trained_hf), params={"context": 2048}))
        is None
    )
    allowed = Profile(
        backend="vllm",
        model=str(short_trained_hf),
        params={"context": 4096},
        env={"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"},
    )
    assert runnable_refusal(allowed) is None
    # llama.cpp runs past the trained length (it warns): nothing refused there
    assert (
        runnable_refusal(Profile(backend="llama.cpp", model=str(short_trained_hf), params={"context": 4096}))
        is None
    )

    def never(_profile: Profile) -> None:
        raise AssertionError("a refused profile was launched")

    wizard = Wizard(profile, runner=never, record=False)
    assert wizard.start().outcome == "refused"
    proposal = wizard.propose()
    assert proposal is not None and (proposal.param, proposal.to) == ("context", 2048)


def test_a_refused_setting_the_user_keeps_stops_the_wizard_before_any_launch() -> None:
    from vramtui.core.wizard.wizard import Wizard

    def never(_profile: Profile) -> None:
        raise AssertionError("a refused profile was launched")

    wizard = Wizard(
        Profile(backend="llama-server", model="/m.gguf", params={"parallel": 300}), runner=never, record=False
    )
    assert wizard.start().outcome == "refused"
    proposal = wizard.propose()
    assert proposal is not None and (proposal.param, proposal.from_, proposal.to) == ("parallel", 300, 256)
    wizard.skip(proposal)
    assert wizard.propose() is None
    assert "the engine refuses these settings and parallel stays" in wizard.stop_reason


def test_a_file_that_is_no_gguf_is_refused_before_launch(tmp_path: Path) -> None:
    """An error page saved as model.gguf: one line and exit 2, not a launch the engine can only refuse."""
    path = write(tmp_path, "", model="page.gguf")
    (tmp_path / "page.gguf").write_text("<html><body>404 Not Found</body></html>\n", encoding="utf-8")
    done = vramtui("check", str(path))
    assert done.returncode == 2, done
    assert done.stderr.strip().splitlines() == [
        f"vramtui: {tmp_path / 'page.gguf'}: not a GGUF file (it does not start with the GGUF magic): an error page saved in "
        "place of the model? download it again"
    ]


def _hf_folder(tmp_path: Path, config: str, shards: dict[str, bytes] | None = None, index: str = "") -> Path:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(config)
    for name, data in (shards or {}).items():
        (folder / name).write_bytes(data)
    if index:
        (folder / "model.safetensors.index.json").write_text(index)
    return folder


GOOD = '{"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4}'


@pytest.mark.parametrize(
    ("config", "shards", "index", "words"),
    [
        ('{"model_type": "llama", ', None, "", "malformed JSON at line 1"),
        ("[1, 2]", None, "", "is not a JSON object"),
        (GOOD.replace("2,", '"2",'), None, "", "num_hidden_layers should be a number, not '2'"),
        (GOOD.replace("64", "64.5"), None, "", "hidden_size should be a whole number, not 64.5"),
        # QA 16: the engine's class default (4096) then failed on the first weight, 30 s later
        (GOOD.replace('"hidden_size": 64, ', ""), None, "", "config.json lacks hidden_size"),
        (GOOD.replace('"num_attention_heads": 4', '"num_attention_heads": 0'), None, "", "as 0; it must be"),
        # QA 23 D2: shapes no model has, refused by `estimate`, were launched (a vLLM start of minutes)
        (GOOD.replace('"num_hidden_layers": 2', '"num_hidden_layers": 1e30'), None, "", "past any model's"),
        (
            GOOD.replace("}", ', "num_key_value_heads": 3}'),
            None,
            "",
            "is not a multiple of num_key_value_heads",
        ),
        (
            GOOD,
            {"model.safetensors": b"\x10\x00\x00\x00\x00\x00\x00\x00{not json at all}"},
            "",
            "bad safetensors header",
        ),
        (
            GOOD,
            None,
            '{"weight_map": {"a": "model-00001-of-00002.safetensors"}}',
            "a download that did not finish",
        ),
    ],
)
def test_a_damaged_hugging_face_folder_is_refused_before_launch(
    tmp_path: Path, config: str, shards: dict[str, bytes] | None, index: str, words: str
) -> None:
    """QA: a malformed config.json, a string for a shape, a broken safetensors header or a missing shard
    were launched, and came back 5-30 s later as the engine's own error "at load weights (other)"."""
    folder = _hf_folder(tmp_path, config, shards, index)
    profile_file = tmp_path / "p.toml"
    profile_file.write_text(f'backend = "transformers"\nmodel = "{folder}"\n')
    with pytest.raises(VramtuiError, match=re.escape(words)):
        load_launch_profile(profile_file)


def test_a_sound_hugging_face_folder_passes(tmp_path: Path) -> None:
    folder = _hf_folder(tmp_path, GOOD)
    profile_file = tmp_path / "p.toml"
    profile_file.write_text(f'backend = "transformers"\nmodel = "{folder}"\n')
    assert load_launch_profile(profile_file).model == str(folder)


@pytest.mark.parametrize(
    ("host", "words"), [("not a host!!", "Name or service not known"), ("10.99.99.99", "")]
)
def test_a_host_the_server_cannot_listen_on_is_one_line_before_launch(
    tmp_path: Path, host: str, words: str
) -> None:
    """QA: a host that does not resolve was an internal error (socket.gaierror) from picking the port."""
    folder = _hf_folder(tmp_path, GOOD)
    profile_file = tmp_path / "p.toml"
    profile_file.write_text(f'backend = "transformers"\nmodel = "{folder}"\nhost = "{host}"\n')
    with pytest.raises(VramtuiError, match=rf"host '{re.escape(host)}': .*{words}.*cannot listen there"):
        load_launch_profile(profile_file)


def test_extra_args_must_start_with_a_flag() -> None:
    """QA: extra_args = [1, 2] went to the engine as two stray arguments, refused after the launch."""
    with pytest.raises(VramtuiError, match=r'extra_args must start with a flag such as "--threads", not 1'):
        profile_from_dict({"backend": "llama.cpp", "model": "m.gguf", "extra_args": [1, 2]})
    kept = profile_from_dict({"backend": "llama.cpp", "model": "m.gguf", "extra_args": ["--threads", 4]})
    assert kept.extra_args == ("--threads", "4")


def test_an_empty_model_a_folder_for_a_profile_and_the_backend_list_say_what_they_are(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """QA: an empty .gguf was "not a GGUF file ... an error page?", a folder given as the profile was "no
    such profile", and diagnose's list of backends left out ik_llama.cpp, which it takes."""
    from vramtui.cli import main

    (tmp_path / "m.gguf").write_bytes(b"")
    profile = tmp_path / "p.toml"
    profile.write_text(f'backend = "llama-cpp-python"\nmodel = "{tmp_path / "m.gguf"}"\n')
    with pytest.raises(VramtuiError, match=r"the file is empty \(0 bytes\)"):
        load_launch_profile(profile)
    with pytest.raises(VramtuiError, match=r"is a folder, not a profile"):
        load_profile(tmp_path)
    log = tmp_path / "s.log"
    log.write_text("main: loading model\n")
    assert main(["diagnose", str(log), "--backend", "foo"]) == 2
    assert "ik_llama.cpp" in capsys.readouterr().err


def test_a_vllm_cpu_launch_that_takes_most_of_the_machine_is_said_first(tmp_path: Path) -> None:
    """QA 10: with no KV size set, vLLM's CPU build took 22.5 of 23.5 GiB and nothing said so before."""
    from vramtui.core.launch.launcher import machine_share

    share = machine_share(Profile(backend="vllm", model=str(tmp_path), params={"context": 1024}), None)
    assert len(share) == 1 and share[0].startswith("vLLM's CPU build takes 92% of this machine's memory")
    sized = Profile(backend="vllm", model=str(tmp_path), params={"kv_cache_memory": "1GiB"})
    assert machine_share(sized, None) == []
    by_env = Profile(backend="vllm", model=str(tmp_path), env={"VLLM_CPU_KVCACHE_SPACE": "2"})
    assert machine_share(by_env, None) == []
    assert machine_share(Profile(backend="llama.cpp", model=str(tmp_path)), None) == []


def test_a_setting_the_cpu_build_ignores_is_said_before_a_launch_with_no_gpu(tmp_path: Path) -> None:
    """QA 15: flash_attn = true went to vLLM's CPU build as --attention-backend FLASH_ATTN, which it only
    logs it cannot use; llama.cpp runs flash attention on the CPU, so nothing is said for it."""
    from vramtui.core.launch.launcher import on_cpu_ignored

    vllm = Profile(backend="vllm", model=str(tmp_path), params={"flash_attn": True})
    assert on_cpu_ignored(vllm, None) == [
        "flash_attn = true: vllm's CPU build has no such path and runs without it"
    ]
    assert on_cpu_ignored(Profile(backend="vllm", model=str(tmp_path)), None) == []
    assert (
        on_cpu_ignored(Profile(backend="llama.cpp", model=str(tmp_path), params={"flash_attn": True}), None)
        == []
    )


def _write_tiny_config(folder: Path) -> None:
    """A tiny Qwen2 config.json trained on 2048 tokens (no weights: the estimate reads the shape)."""
    import json

    from placeholder_files import TINY_QWEN2_CONFIG

    (folder / "config.json").write_text(json.dumps(TINY_QWEN2_CONFIG))


def test_a_context_past_the_trained_length_is_said_at_launch_and_in_the_log(tmp_path: Path) -> None:
    """QA 11: transformers ran context = 100000 on a model trained on 2048 with no word; `estimate` said it.
    vLLM refuses such a context before launch (its own refusal), so only the engines that take it say so."""
    from vramtui.core.launch.launcher import past_trained
    from vramtui.core.logs.diagnose import diagnose_text

    _write_tiny_config(tmp_path)
    said = past_trained(Profile(backend="transformers", model=str(tmp_path), params={"context": 100000}))
    assert said is not None and said.startswith("context 100000 is past the model's trained length 2048")
    assert (
        past_trained(Profile(backend="transformers", model=str(tmp_path), params={"context": 2048})) is None
    )
    assert past_trained(Profile(backend="vllm", model=str(tmp_path), params={"context": 100000})) is None
    log = f"vramtui: launch python -m vramtui.runners.transformers_server\nvramtui: {said}\n"
    assert any("past the model's trained length" in warning for warning in diagnose_text(log).warnings)


def test_an_engine_that_caps_each_slot_at_the_trained_length_says_so_not_that_answers_degrade(
    tmp_path: Path,
) -> None:
    """QA 32 D10: `check` warned "its answers degrade past that length" beside llama-server's own "the slot
    context (1024) exceeds the training context of the model (256) - capping"."""
    from vramtui.core.demo.tinygguf import TinyModelSpec, write_tiny_gguf
    from vramtui.core.launch.launcher import past_trained
    from vramtui.core.logs.diagnose import diagnose_text

    model = tmp_path / "short.gguf"
    write_tiny_gguf(model, TinyModelSpec(context_length=256))
    said = past_trained(
        Profile(backend="llama.cpp", model=str(model), params={"context": 1024, "parallel": 1})
    )
    assert said is not None and "caps each slot at 256 tokens" in said and "degrade" not in said
    # four slots of 256 each: nothing is capped, nothing to say
    assert (
        past_trained(Profile(backend="llama.cpp", model=str(model), params={"context": 1024, "parallel": 4}))
        is None
    )
    # the log's warning is the engine's own capping line's, not "the answers degrade"
    log = f"vramtui: launch llama-server --model {model}\nvramtui: {said}\n"
    assert not any("degrade" in warning for warning in diagnose_text(log).warnings)
    # an engine that takes the context as it is still says its answers degrade
    cpp = past_trained(Profile(backend="llama-cpp-python", model=str(model), params={"context": 1024}))
    assert cpp is not None and "degrade" in cpp


def test_a_gpu_cap_on_a_machine_with_no_gpu_is_refused_with_its_undo(monkeypatch: pytest.MonkeyPatch) -> None:
    """QA 11: max_memory = "0=1GiB" with no GPU launched and failed at load ("Cannot access accelerator
    device when none is available"), read as "other"."""
    from vramtui.core.launch.profile import runnable_refusal

    def refusal(text: str) -> tuple[str, object] | None:
        found = runnable_refusal(Profile(backend="transformers", model="/m", params={"max_memory": text}))
        return None if found is None else (found.message, found.value)

    monkeypatch.setattr("vramtui.core.memory.nvml.first_gpu_total_bytes", lambda: None)
    said = refusal("0=1GiB,cpu=8GiB")
    assert said is not None and "caps GPU 0, and this machine has no GPU" in said[0] and said[1] == "cpu=8GiB"
    assert refusal("0=1GiB") == (
        'max_memory = "0=1GiB" caps GPU 0, and this machine has no GPU: drop max_memory, or run it where a GPU is',
        None,
    )
    assert refusal("cpu=8GiB") is None
    monkeypatch.setattr("vramtui.core.memory.nvml.first_gpu_total_bytes", lambda: 24 << 30)
    assert refusal("0=1GiB") is None


def test_a_quantization_transformers_cannot_apply_at_load_is_refused_in_a_profile_and_by_estimate(
    tmp_path: Path,
) -> None:
    """QA 11: quant = "awq" on transformers launched unquantized after a "not passed" line (exit 0), and
    `estimate --quant awq` said "awq (applied)": it quantizes at load with bitsandbytes only."""
    with pytest.raises(VramtuiError, match="transformers does not take quant='awq'"):
        Profile(backend="transformers", model="/m", params={"quant": "awq"})
    for fine in ("bnb-4bit", "nf4", "int8", "bnb-nf4"):
        Profile(backend="transformers", model="/m", params={"quant": fine})
    Profile(backend="vllm", model="m", params={"quant": "awq"})  # vLLM names the checkpoint's method
    _write_tiny_config(tmp_path)
    done = vramtui("estimate", str(tmp_path), "--backend", "transformers", "--quant", "awq")
    assert done.returncode == 2 and done.stderr.startswith("vramtui: --quant awq: transformers does not take")
    table = vramtui("estimate", str(tmp_path), "--backend", "transformers", "--table")
    assert table.returncode in (0, 1) and "awq" in table.stdout  # the table sizes awq checkpoints


def test_a_hub_name_one_letter_off_a_folder_here_is_refused_as_a_typo(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """QA 14: `model = "tinyqwn"` beside tinyqwen/ was launched as a hub download and read as a network
    failure; `models/tinyqwen` with models/ here is a local path, not a hub name."""
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # an empty cache: the name is nowhere
    (tmp_path / "tinyqwen").mkdir()
    (tmp_path / "models").mkdir()
    with pytest.raises(VramtuiError, match=r"did you mean the folder 'tinyqwen' here"):
        profile_from_dict({"backend": "vllm", "model": "tinyqwn"}, folder=tmp_path)
    local = profile_from_dict({"backend": "vllm", "model": "models/tinyqwen"}, folder=tmp_path)
    assert local.model == str(tmp_path / "models" / "tinyqwen")
    # a hub name with no folder near it, and an org/name, stay names for the engine to fetch
    assert profile_from_dict({"backend": "vllm", "model": "gpt2"}, folder=tmp_path).model == "gpt2"
    (tmp_path / "gpt2-x").mkdir()  # a folder the name is only the start of is no typo of it
    assert profile_from_dict({"backend": "vllm", "model": "gpt2"}, folder=tmp_path).model == "gpt2"
    assert (
        profile_from_dict({"backend": "vllm", "model": "Qwen/tinyqwn"}, folder=tmp_path).model
        == "Qwen/tinyqwn"
    )


def test_an_unknown_parameter_lists_what_this_engine_takes() -> None:
    """QA 14: the list offered llama.cpp's gpu_layers, n_cpu_moe and mmproj "for vllm"."""
    with pytest.raises(VramtuiError) as said:
        profile_from_dict({"backend": "vllm", "model": "m", "params": {"max_modle_len": 1024}})
    takes = str(said.value).split("vllm takes: ", 1)[1]
    assert "kv_cache_memory" in takes and "enforce_eager" in takes
    assert not any(name in takes for name in ("gpu_layers", "n_cpu_moe", "mmproj", "override_tensor"))


def test_another_engines_flag_as_a_key_names_the_shared_one() -> None:
    """QA 15: `ctx_size` in a vLLM profile was answered "did you mean ctx_size_draft?", which vLLM lacks."""
    with pytest.raises(VramtuiError) as said:
        profile_from_dict({"backend": "vllm", "model": "m", "params": {"ctx_size": 1024}})
    assert "did you mean context? (llama.cpp's --ctx-size is context here)" in str(said.value)


def test_a_hub_name_the_engine_will_download_is_said_before_launch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """QA 15: `models/tinyqwen` with no models/ folder went to the Hub and read as a DNS failure, unsaid."""
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # an empty cache
    profile = profile_from_dict({"backend": "vllm", "model": "models/tinyqwen"}, folder=tmp_path)
    assert any("will download it from the Hub" in warning for warning in profile.warnings), profile.warnings
    local = tmp_path / "tiny"
    local.mkdir()
    assert not profile_from_dict({"backend": "vllm", "model": "./tiny"}, folder=tmp_path).warnings


def test_the_runs_label_is_the_file_it_runs_after_the_wizard_changed_it(tmp_path: Path) -> None:
    """QA 18 F14: the wizard's runs of a smaller file were logged as `...-m-UD-Q8_K_XL.gguf.log`, the file
    the profile named first. The label (the log's name) is the file that runs; the profile's own file
    keeps its written name."""
    from vramtui.core.launch.profile import load_launch_profile

    for name in ("m-UD-Q8_K_XL.gguf", "m-UD-IQ2_M.gguf"):
        (tmp_path / name).write_bytes(EMPTY_GGUF)
    path = tmp_path / "p.toml"
    path.write_text(
        f'backend = "llama.cpp"\nmodel = "m-UD-Q8_K_XL.gguf"\nprogram = "{sys.executable}"\n',
        encoding="utf-8",
    )
    profile = load_launch_profile(path)
    assert profile.label == "m-UD-Q8_K_XL.gguf"
    smaller = profile.with_changes(model=str(tmp_path / "m-UD-IQ2_M.gguf"))
    assert smaller.label == "m-UD-IQ2_M.gguf"
    assert smaller.to_dict(tmp_path)["model"] == str(tmp_path / "m-UD-IQ2_M.gguf")
