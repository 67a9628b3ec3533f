"""A server's command line read back through its Backend's own flags."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from placeholder_files import EMPTY_GGUF

from vramtui.core.attach.cmdline import find_backend, process_command, read_command
from vramtui.core.backends import BACKENDS, LLAMA_CPP, LLAMA_CPP_PYTHON, VLLM


def test_llama_server_long_and_short_flags() -> None:
    argv = ["/opt/llama/bin/llama-server", "-m", "/m/q.gguf", "-c", "8192", "-np", "4", "--port", "8081"]
    argv += ["-fa", "on", "--cache-type-k", "q8_0", "--cache-type-v", "q8_0", "-ngl", "99", "--threads=6"]
    command = read_command(argv)
    assert command.backend is LLAMA_CPP
    assert command.model == "/m/q.gguf"
    assert command.port == 8081
    assert command.params == {
        "context": 8192,
        "parallel": 4,
        "flash_attn": True,
        "kv_dtype": "q8_0",
        "gpu_layers": 99,
    }
    assert command.extra == {"threads": 6}


def test_llama_cpp_python_kv_type_numbers_become_names() -> None:
    argv = [sys.executable, "-m", "llama_cpp.server", "--model", "/m/t.gguf", "--n_ctx", "1024"]
    argv += ["--type_k", "8", "--type_v", "8", "--n_gpu_layers", "-1", "--flash_attn", "false"]
    command = read_command(argv)
    assert command.backend is LLAMA_CPP_PYTHON
    assert command.params == {"context": 1024, "kv_dtype": "q8_0", "gpu_layers": "all", "flash_attn": False}


def test_vllm_serve_positional_model_and_switch() -> None:
    argv = ["/venv/bin/vllm", "serve", "Qwen/Qwen2.5-0.5B", "--max-model-len", "8192"]
    argv += ["--gpu-memory-utilization", "0.85", "--enforce-eager", "--kv-cache-dtype", "fp8"]
    command = read_command(argv)
    assert command.backend is VLLM
    assert command.model == "Qwen/Qwen2.5-0.5B"
    assert command.params == {"context": 8192, "mem_share": 0.85, "kv_dtype": "fp8"}
    assert command.extra == {"enforce_eager": True}


def test_every_backends_flags_read_back_what_its_translator_writes() -> None:
    # Generic: for each launchable backend, the translation of a context of 3072 reads back as 3072.
    for backend in BACKENDS.values():
        if backend.launch is None or backend.flag("context") is None:
            continue
        argv = backend.launch.argv_prefix() + list(backend.translate("context", 3072).args)
        if backend.own_flags:  # a program another engine shares (llama-server): told by its own flags
            assert find_backend(argv)[0] is not backend
            argv.append(backend.own_flags[0])
        assert find_backend(argv)[0] is backend
        assert read_command(argv).params == {"context": 3072}, backend.name


def test_an_unknown_program_says_so() -> None:
    command = read_command(["/usr/bin/python3", "-m", "http.server", "8000"])
    assert command.backend is None
    assert command.params == {}
    assert command.problems


def test_a_relative_model_path_is_the_servers_own(tmp_path: Path) -> None:
    # `llama-server -m tiny.gguf` started in its model folder: the estimate must find the file there, not in
    # the folder vramtui runs from (the attached app said "no such file or folder")
    (tmp_path / "tiny.gguf").write_bytes(EMPTY_GGUF)
    (tmp_path / "Qwen").mkdir()
    argv = ["/opt/llama/bin/llama-server", "-m", "tiny.gguf", "--port", "8081"]
    assert read_command(argv, str(tmp_path)).model == str(tmp_path / "tiny.gguf")
    assert read_command(argv).model == "tiny.gguf"  # no directory known: as written
    vllm = ["/usr/local/bin/vllm", "serve", "Qwen/Qwen3-8B", "--port", "8000"]
    assert read_command(vllm, str(tmp_path)).model == "Qwen/Qwen3-8B"  # a hub id, not a path there


def test_a_running_process_is_read_with_its_working_directory(tmp_path: Path) -> None:
    server = tmp_path / "llama-server"  # a stand-in that holds the command line while it sleeps
    server.write_text(f"#!{sys.executable}\nimport time\ntime.sleep(30)\n")  # seen as python + its path
    server.chmod(0o755)
    (tmp_path / "tiny.gguf").write_bytes(EMPTY_GGUF)
    proc = subprocess.Popen([str(server), "-m", "tiny.gguf", "-c", "2048"], cwd=tmp_path)
    try:
        deadline = time.monotonic() + 5
        command = None
        while time.monotonic() < deadline:
            command = process_command(proc.pid)
            if command is not None and command.backend is LLAMA_CPP:
                break
            time.sleep(0.05)
        assert command is not None and command.backend is LLAMA_CPP
        assert command.model == str(tmp_path / "tiny.gguf") and command.params["context"] == 2048
    finally:
        proc.kill()
        proc.wait(5)


def test_vllm_kv_cache_bytes_read_back_as_a_size(tiny_gguf: Path) -> None:
    """QA 5: `ps` on a vLLM that vramtui launched with --kv-cache-memory-bytes 2369781760 said "no estimate:
    kv_cache_memory needs a unit": the flag takes bytes, read back as the number (a restart passes it on as
    it was) and sized as bytes."""
    from vramtui.core.attach.servers import Server, estimated_bill

    command = read_command(["vllm", "serve", str(tiny_gguf), "--kv-cache-memory-bytes", "2369781760"])
    assert command.params["kv_cache_memory"] == 2369781760
    server = Server(
        pid=1, engine="vllm", pids=[1], command=command, model=str(tiny_gguf), params=command.params
    )
    bill = estimated_bill(server, 24 << 30)
    assert bill is not None and not server.notes, server.notes


def test_an_attached_vllms_kv_bytes_become_a_size_its_profile_takes(tiny_gguf: Path) -> None:
    """QA 9: `attach` on a vLLM started with --kv-cache-memory-bytes 268435456 said "no estimate:
    kv_cache_memory needs a unit": the attached profile now holds it as a size, as `ps` does."""
    from vramtui.core.attach.cmdline import as_sizes
    from vramtui.core.backends.base import size_bytes

    command = read_command(["vllm", "serve", str(tiny_gguf), "--kv-cache-memory-bytes", "268435456"])
    params = as_sizes(command.params)
    assert size_bytes("kv_cache_memory", params["kv_cache_memory"]) == 256 << 20
    assert command.params["kv_cache_memory"] == 268435456  # the command as read is left as it was
    # QA 39 F10: said as the profile and `check` write it, not "268435456B"
    assert params["kv_cache_memory"] == "256MiB"
    odd = as_sizes({"kv_cache_memory": 1000})
    assert odd["kv_cache_memory"] == "1000B" and size_bytes("kv_cache_memory", odd["kv_cache_memory"]) == 1000


def test_an_attached_vllm_with_its_kv_cache_set_is_assumed_no_share(tiny_gguf: Path) -> None:
    """QA 10: `attach` listed the default memory share beside --kv-cache-memory-bytes, which it sizes nothing."""
    from vramtui.core.attach.watch import _assumed

    sized = read_command(["vllm", "serve", str(tiny_gguf), "--kv-cache-memory-bytes", "268435456"])
    assert "mem_share" not in _assumed(sized)
    assert "mem_share" in _assumed(read_command(["vllm", "serve", str(tiny_gguf)]))
    assert "gpu_layers" not in _assumed(sized)  # vLLM places no layers: no llama.cpp word for it
