"""A running server's command line as a profile, and its command rebuilt with one change through the
Backend's own translation: every word no flag reads kept, and the instructions for where it runs."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from placeholder_files import EMPTY_GGUF

from vramtui.core.attach.cmdline import read_command
from vramtui.core.attach.restart import Running, attached_profile, changed_command
from vramtui.core.attach.target import Target
from vramtui.core.errors import VramtuiError


def _running(argv: list[str], kind: str = "pid", name: str | None = None, **kw: object) -> Running:
    target = Target(
        f"{kind}:{name}" if name else "123", kind, pid=123, url="http://127.0.0.1:9000", name=name
    )
    return Running(target, 123, "http://127.0.0.1:9000", read_command(argv), **kw)  # type: ignore[arg-type]


# As people start it (short flags, a switch, flags vramtui has no parameter for).
LLAMA = shlex.split(
    "/opt/llama/bin/llama-server -m models/qwen-q4_k_m.gguf -c 16384 -np 2 -fa on -ngl 99 "
    "--metrics --jinja --port 9000 --host 0.0.0.0 -t 8"
)


def test_the_profile_keeps_every_word_and_the_model_resolves_from_its_directory(tmp_path: Path) -> None:
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "qwen-q4_k_m.gguf").write_bytes(EMPTY_GGUF)
    profile = attached_profile(_running(LLAMA, cwd=str(tmp_path)))
    assert profile.backend.name == "llama.cpp"
    assert profile.model == str(tmp_path / "models" / "qwen-q4_k_m.gguf")
    assert profile.params == {
        "context": 16384,
        "parallel": 2,
        "flash_attn": True,
        "gpu_layers": 99,
        "threads": 8,
    }
    assert profile.extra_args == ("--metrics", "--jinja")
    assert (profile.host, profile.port, profile.program) == ("0.0.0.0", 9000, "/opt/llama/bin/llama-server")


def test_the_changed_command_is_the_backend_translation_with_one_change(tmp_path: Path) -> None:
    running = _running(LLAMA, cwd=str(tmp_path))
    before = attached_profile(running)
    change = changed_command(running, before, before.with_param("context", 8192))
    again = read_command(change.argv)
    assert again.params == {**read_command(LLAMA).params, "context": 8192}
    assert again.unread == ["--metrics", "--jinja"] and again.port == 9000 and again.host == "0.0.0.0"
    assert change.changes == {"context": (16384, 8192)}
    assert change.env == {}  # vramtui's own log verbosity is not part of the user's command
    assert change.argv[change.argv.index("--ctx-size") + 1] == "8192"


def test_a_server_started_without_a_host_keeps_its_own_listen_address() -> None:
    """QA 37 F9: vLLM started with no --host listens on every interface; the restart command added vramtui's
    --host 127.0.0.1, a second change that made it local-only. One given is kept as it was."""
    argv = shlex.split("/opt/vllm/bin/vllm serve /m/tiny --port 9000 --kv-cache-memory-bytes 1G")
    running = _running(argv)
    before = attached_profile(running)
    change = changed_command(running, before, before.with_param("kv_cache_memory", "256MiB"))
    assert "--host" not in change.argv and read_command(change.argv).port == 9000, change.argv
    assert list(change.changes) == ["kv_cache_memory"]  # the one change it names
    given = _running([*argv, "--host", "0.0.0.0"])
    kept = changed_command(
        given, attached_profile(given), attached_profile(given).with_param("context", 1024)
    )
    assert read_command(kept.argv).host == "0.0.0.0"


def test_a_kv_cache_type_is_the_engines_pair_of_flags() -> None:
    running = _running(LLAMA)
    before = attached_profile(running)
    change = changed_command(running, before, before.with_param("kv_dtype", "q8_0"))
    args = change.argv
    assert args[args.index("--cache-type-k") + 1] == args[args.index("--cache-type-v") + 1] == "q8_0"


def test_llama_cpp_python_takes_ggml_type_numbers() -> None:
    argv = ["/usr/bin/python3", "-m", "llama_cpp.server", "--model", "/m/tiny.gguf", "--n_ctx", "4096"]
    running = _running(argv)
    before = attached_profile(running)
    assert before.program == "/usr/bin/python3" and before.params == {"context": 4096}
    change = changed_command(running, before, before.with_param("kv_dtype", "q8_0"))
    assert change.argv[:3] == ["/usr/bin/python3", "-m", "llama_cpp.server"]
    assert change.argv[change.argv.index("--type_k") + 1] == "8"


def test_docker_and_systemd_get_their_own_instructions() -> None:
    docker = _running(LLAMA, kind="docker", name="llm")
    before = attached_profile(docker)
    how = changed_command(docker, before, before.with_param("context", 8192)).how
    assert how[0].startswith("recreate the container llm with its command: --model models/qwen-q4_k_m.gguf ")
    assert "--ctx-size 8192" in how[0] and "/opt/llama" not in how[0]  # the image's own program runs it
    unit = _running(LLAMA, kind="systemd", name="llama.service")
    how = changed_command(unit, before, before.with_param("context", 8192)).how
    assert how[0].startswith("systemctl edit --full llama.service: ExecStart=/opt/llama/bin/llama-server")
    assert how[-1] == "then systemctl restart llama.service"


def test_ollama_is_told_through_its_environment() -> None:
    running = _running(["/usr/local/bin/ollama", "serve"], env={"OLLAMA_CONTEXT_LENGTH": "8192"})
    running.model_hint = "llama3.2:1b"
    before = attached_profile(running)
    assert before.model == "llama3.2:1b" and before.params == {"context": 8192}
    change = changed_command(running, before, before.with_param("context", 4096))
    assert change.env == {"OLLAMA_CONTEXT_LENGTH": "4096"}
    assert change.how[0].startswith("restart the server with OLLAMA_CONTEXT_LENGTH=4096 in its environment")
    layers = changed_command(running, before, before.with_param("gpu_layers", 20))
    assert layers.how[-1] == "send num_gpu=20 with each request (or PARAMETER num_gpu 20 in the Modelfile)"


def test_a_command_that_is_no_engine_cannot_be_rebuilt() -> None:
    with pytest.raises(VramtuiError, match="no engine vramtui knows"):
        attached_profile(_running(["python3", "-m", "http.server", "9000"]))


def _v_types(argv: list[str]) -> list[str]:
    """Every V cache type an argv sets, in order, in either of llama-server's spellings."""
    return [argv[i + 1] for i, word in enumerate(argv) if word in ("-ctv", "--cache-type-v")]


@pytest.mark.parametrize("kv_dtype", ["q4_0", "f16"])
def test_every_rebuilt_flag_replaces_the_servers_own_in_either_spelling(kv_dtype: str) -> None:
    # Issue 22 #1: started with `-c 65536 -ctk f16 -ctv f16`, the server's own `-ctv f16` came after the
    # rebuilt `--cache-type-v q4_0`, and llama-server takes the last value: V stayed f16.
    argv = shlex.split("/opt/llama/bin/llama-server -m /m/q.gguf -c 65536 -ctk f16 -ctv f16 --port 9000")
    running = _running(argv)
    before = attached_profile(running)
    assert before.params == {"context": 65536, "kv_dtype": "f16"} and before.extra_args == ()
    for after in (before.with_param("kv_dtype", kv_dtype), before.with_param("context", 512)):
        change = changed_command(running, before, after)
        wanted = str(after.params["kv_dtype"])
        assert _v_types(change.argv) == [wanted], change.shell
        assert read_command(change.argv).params == after.params and not read_command(change.argv).unread


def test_pass_through_words_that_set_a_rebuilt_flag_are_dropped() -> None:
    # A profile whose pass-through words set the same knobs again (a reading that missed a spelling):
    # the rebuild's own flags win, never the stale words after them.
    running = _running(LLAMA)
    before = attached_profile(running)
    stale = before.with_changes(extra_args=("--metrics", "-ctv", "f16", "--ctx-size=4096", "--jinja"))
    change = changed_command(running, stale, stale.with_param("kv_dtype", "q4_0"))
    assert _v_types(change.argv) == ["q4_0"]
    sizes = [w for w in change.argv if w in ("-c", "--ctx-size") or w.startswith("--ctx-size=")]
    assert sizes == ["--ctx-size"] and change.argv[change.argv.index("--ctx-size") + 1] == "16384"
    assert read_command(change.argv).unread == ["--metrics", "--jinja"]


def test_k_and_v_types_that_differ_read_as_the_larger_and_say_so() -> None:
    argv = shlex.split("/opt/llama/bin/llama-server -m /m/q.gguf --cache-type-k q8_0 --cache-type-v f16")
    command = read_command(argv)
    assert command.params == {"kv_dtype": "f16"} and not command.unread
    assert any("--cache-type-k q8_0, --cache-type-v f16 differ" in p for p in command.problems)


def test_a_console_script_under_its_interpreter_is_relaunched_as_the_script(tmp_path: Path) -> None:
    """QA 30 S14: vLLM started as `vllm serve` shows as `python .../bin/vllm serve ...`; its profile took the
    interpreter as the program, and the changed command read `python serve MODEL` (a file named serve)."""
    argv = shlex.split(
        "/opt/venv/bin/python /opt/venv/bin/vllm serve /models/tiny --port 9000 --kv-cache-memory-bytes 256M"
    )
    running = _running(argv, cwd=str(tmp_path))
    profile = attached_profile(running)
    assert profile.backend.name == "vllm" and profile.program == "/opt/venv/bin/vllm"
    changed = changed_command(running, profile, profile.with_param("kv_cache_memory", "128MiB"))
    assert changed.argv[:3] == ["/opt/venv/bin/vllm", "serve", "/models/tiny"], changed.argv
    # a Python module server (llama-cpp-python's `python -m llama_cpp.server`) keeps its interpreter
    module = shlex.split("/usr/bin/python3 -m llama_cpp.server --model /m.gguf --port 9001")
    assert attached_profile(_running(module, cwd=str(tmp_path))).program == "/usr/bin/python3"
