"""Issue 14: every flag the llama-server backend emits is one today's llama-server accepts.

The flags come from the real binary's `--help` when one is at hand ($VRAMTUI_LLAMA_SERVER, or the
project's build under ~/.cache/vramtui/llama-server/*/bin/), else from tests/data/llama-server/help.txt:
the `--help` of 0.5.0-dev (commit 0c1e570, the llama.cpp llama-cpp-python 0.3.36 vendors). With a binary,
its own parser also reads each command line we build.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from vramtui.core.backends import get_backend
from vramtui.core.launch.launcher import build_command
from vramtui.core.launch.profile import Profile

SAVED_HELP = Path(__file__).resolve().parents[2] / "data" / "llama-server" / "help.txt"
_FLAG = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)")


def find_binary() -> Path | None:
    named = os.environ.get("VRAMTUI_LLAMA_SERVER")
    if named and Path(named).is_file():
        return Path(named)
    builds = sorted(Path.home().glob(".cache/vramtui/llama-server/*/bin/llama-server"))
    return builds[-1] if builds else None


BINARY = find_binary()


def help_text() -> str:
    if BINARY is not None:
        done = subprocess.run(
            [str(BINARY), "--help"], capture_output=True, text=True, timeout=30, check=False
        )
        return done.stdout + done.stderr
    return SAVED_HELP.read_text(encoding="utf-8")


def accepted_flags(text: str) -> set[str]:
    """The flags the help names: every `-x, --long` spelling at the head of an option line."""
    flags: set[str] = set()
    for line in text.splitlines():
        if not line.startswith("-"):
            continue
        for token in line.split():
            if _FLAG.fullmatch(token.rstrip(",")):
                flags.add(token.rstrip(","))
            elif token[:1].islower():  # the description has begun ("size of the prompt context")
                break
    return flags


FLAGS = accepted_flags(help_text())

# Every parameter and every state a profile can give llama-server.
PROFILES: list[dict[str, object]] = [
    {"context": 0, "parallel": "auto", "batch": 512, "ubatch": 128, "kv_dtype": "q8_0", "gpu_layers": "all"},
    {"context": 4096, "parallel": 1, "gpu_layers": 0, "flash_attn": True, "threads": 2, "alias": "m"},
    {"flash_attn": False, "mmap": False, "fit": False},
    {"flash_attn": "auto", "mmap": True, "fit": True, "kv_dtype": "q4_0"},
    {"cpu_moe": True, "override_tensor": ["blk\\.1\\.ffn_.*_exps=CPU", "token_embd=CPU"]},
    {"n_cpu_moe": 20, "cpu_moe": False},
]


def test_expert_offload_becomes_llama_servers_own_flags() -> None:
    def argv(**params: object) -> list[str]:
        return build_command(Profile(backend="llama.cpp", model="/m.gguf", params=params, port=8080)).argv

    assert "--cpu-moe" in argv(cpu_moe=True) and "--cpu-moe" not in argv(cpu_moe=False)
    assert argv(n_cpu_moe=20)[-2:] == ["--n-cpu-moe", "20"]
    tail = argv(override_tensor=["a=CPU", "b=CUDA0"])[-4:]
    assert tail == ["--override-tensor", "a=CPU", "--override-tensor", "b=CUDA0"]
    plan = build_command(Profile(backend="vllm", model="m", params={"n_cpu_moe": 2}, port=8000))
    assert plan.unsupported == ["n_cpu_moe"]  # said, never dropped


def _flags(argv: list[str]) -> set[str]:
    return {a for a in argv[1:] if a.startswith("-") and not a.lstrip("-").isdigit()}


def test_the_help_lists_the_flags_it_should() -> None:
    assert {"--ctx-size", "--flash-attn", "--fit", "--load-mode", "--parallel", "--n-gpu-layers"} <= FLAGS
    assert "--mmap" not in FLAGS  # the spelling vramtui used to emit: this llama-server refuses it


@pytest.mark.parametrize("params", PROFILES)
def test_every_emitted_flag_is_in_the_help(params: dict[str, object]) -> None:
    argv = build_command(Profile(backend="llama.cpp", model="/m.gguf", params=params, port=8080)).argv
    assert _flags(argv) <= FLAGS, sorted(_flags(argv) - FLAGS)


def test_mmap_and_flash_attention_spellings() -> None:
    def argv(**params: object) -> list[str]:
        return build_command(Profile(backend="llama.cpp", model="/m.gguf", params=params, port=8080)).argv

    assert argv(mmap=False)[-2:] == ["--load-mode", "none"]
    assert "--load-mode" not in argv(mmap=True) and "--mmap" not in argv(mmap=True)  # mmap is the default
    flash = argv(flash_attn=True)
    assert flash[flash.index("--flash-attn") + 1] == "on"  # never a bare --flash-attn
    assert argv(fit=False)[-2:] == ["--fit", "off"]


@pytest.mark.usefixtures("llama_server_bin")  # skipped without a binary, a failure under CI
@pytest.mark.parametrize("params", PROFILES)
def test_the_real_parser_takes_each_command_line(tmp_path: Path, params: dict[str, object]) -> None:
    missing = tmp_path / "none.gguf"  # the parser runs first; then loading the absent file fails at once
    profile = Profile(backend="llama.cpp", model=str(missing), params=params, port=1, program=str(BINARY))
    argv = build_command(profile).argv
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    said = done.stdout + done.stderr
    assert "invalid argument" not in said and "error while handling argument" not in said, said
    assert "failed to open GGUF file" in said or "failed to load model" in said, said


def test_defaults_are_todays_llama_server() -> None:
    server = get_backend("llama-server")
    assert server.default("context") == 0 and server.context_zero_is_trained
    assert server.default("parallel") == 4  # -np -1: 4 slots, one unified KV cache
    assert server.default("flash_attn") == "auto" and server.flash_attn_effective(None)
    assert server.default("fit") == "on"
    text = help_text()  # and the binary says so itself
    assert "0 = loaded from model" in text and "-1 = auto" in text and "default: 'auto'" in text
