"""Launch profiles: the TOML of the issue, relative paths, one-line errors, with_param."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from vramtui.core.errors import VramtuiError
from vramtui.core.launch.profile import Profile, load_profile, profile_from_dict
from vramtui.core.units import MIB

PROFILES = Path(__file__).resolve().parents[2] / "data" / "profiles"

ISSUE_EXAMPLE = """
backend = "llama-cpp-python"      # llama.cpp | llama-cpp-python | vllm | transformers | ollama
model = "models/tiny.gguf"        # a path, or the backend's model name
[params]
context = 8192
parallel = 1
kv_dtype = "f16"
gpu_layers = 0
[limits]
memory_budget = "1500MiB"
"""


def test_the_issue_example_loads(tmp_path: Path) -> None:
    path = tmp_path / "conf" / "p.toml"
    path.parent.mkdir()
    path.write_text(ISSUE_EXAMPLE)
    profile = load_profile(path)
    assert profile.backend.name == "llama-cpp-python"
    # relative to the profile's folder, not to the current directory
    assert profile.model == str((tmp_path / "conf" / "models" / "tiny.gguf").resolve())
    assert profile.params == {"context": 8192, "parallel": 1, "kv_dtype": "f16", "gpu_layers": 0}
    assert profile.memory_budget == 1500 * MIB
    assert profile.host == "127.0.0.1" and profile.port is None
    assert profile.source == path.resolve()
    assert profile.warnings == ()


def test_hub_and_ollama_names_stay_names(tmp_path: Path) -> None:
    vllm = profile_from_dict({"backend": "vllm", "model": "Qwen/Qwen2.5-7B"}, folder=tmp_path)
    assert vllm.model == "Qwen/Qwen2.5-7B"
    ollama = profile_from_dict({"backend": "ollama", "model": "llama3.1:8b"}, folder=tmp_path)
    assert ollama.model == "llama3.1:8b"
    (tmp_path / "local-model").mkdir()
    local = profile_from_dict({"backend": "transformers", "model": "local-model"}, folder=tmp_path)
    assert local.model == str((tmp_path / "local-model").resolve())


def test_more_keys(tmp_path: Path) -> None:
    shutil.copy(PROFILES / "vllm-full.toml", tmp_path / "v.toml")
    profile = load_profile(tmp_path / "v.toml")
    assert profile.name == "qwen-7b" and profile.label == "qwen-7b"
    assert profile.port == 8001
    assert profile.extra_args == ("--enforce-eager",)
    assert profile.env == {"CUDA_VISIBLE_DEVICES": "0"}
    assert profile.params["cpu_offload"] == "2GiB" and profile.params["flash_attn"] is True


def test_top_level_shared_parameters_and_auto_port() -> None:
    profile = profile_from_dict(
        {"backend": "transformers", "model": "m", "quant": "bnb-4bit", "port": "auto", "ready_timeout": 30}
    )
    assert profile.params == {"quant": "bnb-4bit"}
    assert profile.port == 0 and profile.ready_timeout == 30.0


def test_unknown_top_level_keys_are_errors(tmp_path: Path) -> None:
    # Issue 13 #2: a top-level typo is refused like a [params] one (it was a warning, and launched).
    with pytest.raises(
        VramtuiError, match=r"unknown profile key 'contxt' at the top level: did you mean context\?"
    ):
        profile_from_dict({"backend": "vllm", "model": "m", "contxt": 4})


@pytest.mark.parametrize(
    ("params", "message"),
    [
        (
            {"contxt": 512},
            r"unknown parameter 'contxt' under \[params\] for llama-cpp-python: did you mean context\?",
        ),
        ({"n_gpu_layerz": 9}, r"did you mean gpu_layers\?"),
        # QA 21 F11: llama-cpp-python's own flag, spelt as it spells it (--n_ctx)
        ({"n_ctx": 4096}, r"did you mean context\? \(llama-cpp-python's --n_ctx is context here\)"),
        ({"zzz": 1}, r"unknown parameter 'zzz'.*extra_args"),
        ({"port": 8000}, r"^port belongs at the top level, not under \[params\]$"),
        ({"memory_budget": "1GiB"}, r"memory_budget belongs under \[limits\]"),
    ],
)
def test_unknown_params_are_errors_with_a_suggestion(
    tmp_path: Path, params: dict[str, object], message: str
) -> None:
    path = tmp_path / "typo.toml"
    lines = ['backend = "llama-cpp-python"', 'model = "m.gguf"', "[params]"]
    lines += [f"{key} = {value!r}".replace("'", '"') for key, value in params.items()]
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(VramtuiError, match=message) as caught:
        load_profile(path)
    assert "\n" not in str(caught.value)
    # The same check guards profiles built in code (the wizard's changes).
    good = Profile(backend="llama-cpp-python", model="/m.gguf", params={"context": 512, "threads": 2})
    with pytest.raises(VramtuiError, match=r"under \[params\]|belongs"):
        good.with_param(next(iter(params)), 1)


def test_backend_specific_params_pass_for_their_backend_only() -> None:
    assert Profile(backend="vllm", model="m", params={"served_model_name": "x"}).params
    with pytest.raises(VramtuiError, match="unknown parameter 'served_model_name'"):
        Profile(backend="llama-cpp-python", model="/m.gguf", params={"served_model_name": "x"})


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('model = "m"', "needs backend"),
        ('backend = "vllm"', "needs model"),
        ('backend = "tgi"\nmodel = "m"', "unknown backend"),
        ('backend = "vllm"\nmodel = "m"\nextra_args = "--a b"', "list of arguments"),
        ('backend = "vllm"\nmodel = "m"\nport = 70000', "port must be"),
        ('backend = "vllm"\nmodel = "m"\n[limits]\nmemory_budget = "lots"', "not a memory size"),
        ('backend = "vllm"\nmodel = "m"\n[params]\ncontext = [1]', "parameter context"),
        ("backend = ", "not valid TOML"),
    ],
)
def test_bad_profiles_are_one_line_errors(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(VramtuiError, match=message) as caught:
        load_profile(path)
    assert "\n" not in str(caught.value)


def test_missing_profile_file(tmp_path: Path) -> None:
    with pytest.raises(VramtuiError, match="no such profile"):
        load_profile(tmp_path / "nope.toml")


def test_with_param_is_a_copy_and_none_removes() -> None:
    base = Profile(backend="llama.cpp", model="/m.gguf", params={"context": 8192})
    smaller = base.with_param("context", 4096)
    assert base.params == {"context": 8192} and smaller.params == {"context": 4096}
    assert smaller.with_param("context", None).params == {}
    assert base.with_param("kv_dtype", "q8_0").params == {"context": 8192, "kv_dtype": "q8_0"}
    with pytest.raises(VramtuiError):
        base.with_param("context", [1, 2])


def test_round_trip_through_toml(tmp_path: Path) -> None:
    shutil.copy(PROFILES / "vllm-full.toml", tmp_path / "v.toml")
    original = load_profile(tmp_path / "v.toml").with_changes(memory_budget=1500 * MIB)
    again = load_profile(original.save(tmp_path / "again.toml"))
    for name in ("backend", "model", "params", "memory_budget", "host", "port", "extra_args", "env", "name"):
        assert getattr(again, name) == getattr(original, name), name
    # a budget is spelt in its largest whole unit, as people write it (QA 23 D11: "3GiB" came back "3072MiB")
    assert 'memory_budget = "1500MiB"' in (tmp_path / "again.toml").read_text()
    original.with_changes(memory_budget=3 * 1024 * MIB).save(tmp_path / "three.toml")
    assert 'memory_budget = "3GiB"' in (tmp_path / "three.toml").read_text()


def test_a_bare_name_is_looked_up_in_the_config_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from vramtui.core.launch.profile import profiles_dir

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.chdir(tmp_path)
    folder = profiles_dir()
    assert folder == tmp_path / "config" / "vramtui" / "profiles"
    folder.mkdir(parents=True)
    (folder / "tiny.toml").write_text('backend = "ollama"\nmodel = "llama3.1:8b"\n')
    assert load_profile("tiny").model == "llama3.1:8b"
    with pytest.raises(VramtuiError, match=r"nor .*other\.toml"):
        load_profile("other")


def test_an_odd_budget_survives_the_round_trip(tmp_path: Path) -> None:
    profile = Profile(backend="vllm", model="m", memory_budget=1500 * MIB + 1)
    assert load_profile(profile.save(tmp_path / "p.toml")).memory_budget == 1500 * MIB + 1


def test_vllms_auto_context_stays_a_word_and_is_passed_as_vllm_takes_it() -> None:
    """QA 35 F12: the README's `context = "auto"` under vLLM (`--max-model-len auto`, the longest that fits)
    was refused as "not a whole number"; under llama.cpp, which takes no such word, it still is."""
    from vramtui.core.launch.launcher import build_command

    profile = Profile(backend="vllm", model="Qwen/Qwen3-0.6B", params={"context": "auto"})
    assert profile.params["context"] == "auto"
    argv = build_command(profile).argv
    assert argv[argv.index("--max-model-len") + 1] == "auto"
    with pytest.raises(VramtuiError, match="context must be a whole number"):
        Profile(backend="llama.cpp", model="m.gguf", params={"context": "auto"})


def test_a_misspelled_shared_name_this_engine_has_no_flag_for_is_still_named() -> None:
    """QA 35 F6: `gpu_layer` under vLLM got no "did you mean" (vLLM has no gpu_layers flag, so the engine's
    list left it out) and read "for vllm: (vllm takes ..." with a colon before nothing."""
    with pytest.raises(VramtuiError) as caught:
        Profile(backend="vllm", model="m", params={"gpu_layer": 5})
    assert "for vllm: did you mean gpu_layers?" in str(caught.value)
    with pytest.raises(VramtuiError) as caught:
        Profile(backend="vllm", model="m", params={"zzzq": 5})
    assert "for vllm (vllm takes:" in str(caught.value) and ": (" not in str(caught.value)
