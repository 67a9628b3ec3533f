"""Shared fixtures: real tiny GGUF models, made once per test session."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from vramtui.core.demo.tinygguf import TinyModelSpec, write_tiny_gguf

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
BUILD_LLAMA_SERVER = Path(__file__).resolve().parents[1] / "scripts" / "build_llama_server.sh"
INSTALL_VLLM = Path(__file__).resolve().parents[1] / "scripts" / "install_vllm.sh"

# A suite started in the background by a script (`pytest &`) inherits SIGINT ignored, and every child it
# starts would too: the tests that press ctrl-c on a vramtui child need the signal delivered. A caught
# signal is reset to its default in an exec'd child; an ignored one stays ignored.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# Test modules whose fakes other folders' tests reuse (FakeDriver, ReplayedRuns, the TUI helpers):
# importable whichever folder pytest is pointed at.
for _folder in ("", "core/memory", "core/wizard", "core/backends", "tui", "engines"):
    sys.path.insert(0, str(Path(__file__).resolve().parent / _folder))


@pytest.fixture(autouse=True)
def _own_data_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test its own run store (logs and calibration records, core/estimate/calibrate.py): the runs
    one test launches never calibrate another's estimate, nor land in the user's data dir."""
    monkeypatch.setenv("VRAMTUI_DATA_DIR", str(tmp_path_factory.mktemp("vramtui-data")))


@pytest.fixture
def assumed_engine_share(monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine's own host footprint at its backend's figure, not measured on this machine's binary
    (core/launch/footprint.py): tests of the wizard's arithmetic on replayed runs, whose figures must not
    move with the build of llama-cpp-python at hand."""
    from vramtui.core.launch import footprint

    monkeypatch.setattr(
        footprint, "host_footprint", lambda profile, kind="floor": profile.backend.host_baseline_bytes
    )


@pytest.fixture(scope="session")
def tiny_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo-sized model: 4 layers, 512 wide, f16 (about 21 MB)."""
    return write_tiny_gguf(tmp_path_factory.mktemp("models") / "tiny-f16.gguf", TinyModelSpec())


@pytest.fixture(scope="session")
def gqa_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """12 layers, 1024 wide, 4 KV heads, trained on 32768 (133 MiB): a KV cache of 384 MiB at that length,
    large beside its weights, as a real model's is beside a budget."""
    spec = TinyModelSpec(n_layer=12, n_embd=1024, n_head=16, n_head_kv=4, n_ff=1024, context_length=32768)
    return write_tiny_gguf(tmp_path_factory.mktemp("gqa") / "gqa-f16.gguf", spec)


@pytest.fixture(scope="session")
def short_trained_hf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A model folder whose config.json alone says a small Qwen2 trained on 2048 tokens (no weights: what
    reads only the config, the estimate and the refusals before launch, is all it is for)."""
    import json

    folder = tmp_path_factory.mktemp("short-trained")
    config = {
        "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 128,
        "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1, "intermediate_size": 256,
        "vocab_size": 1000, "max_position_embeddings": 2048, "torch_dtype": "bfloat16",
    }  # fmt: skip
    (folder / "config.json").write_text(json.dumps(config))
    return folder


@pytest.fixture(scope="session")
def make_gguf(tmp_path_factory: pytest.TempPathFactory):
    """Build a GGUF of any TinyModelSpec shape, cached per shape for the session."""
    cache: dict[TinyModelSpec, Path] = {}
    folder = tmp_path_factory.mktemp("gguf-shapes")

    def make(**kwargs: object) -> Path:
        spec = TinyModelSpec(**kwargs)  # type: ignore[arg-type]
        if spec not in cache:
            name = f"l{spec.n_layer}-e{spec.n_embd}-h{spec.n_head}-kv{spec.n_head_kv}-{spec.dtype}.gguf"
            cache[spec] = write_tiny_gguf(folder / name, spec)
        return cache[spec]

    return make


@pytest.fixture(scope="session")
def shared_logs() -> Path:
    """The corpus of real logs from public bug reports (../shared/logs)."""
    # Prefer the live ../shared/logs (it grows); the copy in tests/data keeps a lone checkout testable.
    path = SHARED / "logs"
    if (path / "corpus.jsonl").is_file():
        return path
    return Path(__file__).resolve().parent / "data"


def _runs(binary: Path) -> bool:
    try:
        proc = subprocess.run([binary, "--version"], capture_output=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0


def _cached_llama_server() -> Path | None:
    """Where scripts/build_llama_server.sh caches the binary for this version and CPU (it owns the key)."""
    try:
        proc = subprocess.run(
            ["bash", BUILD_LLAMA_SERVER, "--path"], capture_output=True, text=True, timeout=30, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return Path(proc.stdout.strip())


@pytest.fixture(scope="session")
def llama_server_bin() -> Path:
    """A real llama-server: $VRAMTUI_LLAMA_SERVER, else the build script's cached one, else PATH's.

    Skips where there is none; fails under CI, which builds it first (.ci/run)."""
    named = os.environ.get("VRAMTUI_LLAMA_SERVER")
    if named:
        binary = Path(named)
        if not _runs(binary):
            pytest.fail(f"VRAMTUI_LLAMA_SERVER={named} does not run --version")
        return binary
    for candidate in (_cached_llama_server(), shutil.which("llama-server")):
        if candidate and _runs(Path(candidate)):
            return Path(candidate)
    if os.environ.get("CI"):
        pytest.fail("no llama-server under CI: .ci/run builds it with scripts/build_llama_server.sh")
    pytest.skip("no llama-server: run scripts/build_llama_server.sh or set VRAMTUI_LLAMA_SERVER")


def _installed_vllm() -> Path | None:
    """Where scripts/install_vllm.sh keeps the vllm program of this version (it owns the path)."""
    try:
        proc = subprocess.run(
            ["bash", INSTALL_VLLM, "--path"], capture_output=True, text=True, timeout=30, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return None
    program = Path(proc.stdout.strip())
    complete = program.parent.parent / ".vramtui-complete"
    return program if program.is_file() and complete.is_file() else None


@pytest.fixture(scope="session")
def vllm_program() -> Path:
    """A real vLLM (its CPU build, in its own venv): $VRAMTUI_VLLM, else scripts/install_vllm.sh's.

    Skips where there is none; fails under CI, which installs it first (.ci/run)."""
    named = os.environ.get("VRAMTUI_VLLM")
    if named:
        if not Path(named).is_file():
            pytest.fail(f"VRAMTUI_VLLM={named} is not a file")
        return Path(named)
    installed = _installed_vllm()
    if installed is not None:
        return installed
    if os.environ.get("CI"):
        pytest.fail("no vLLM under CI: .ci/run installs it with scripts/install_vllm.sh")
    pytest.skip("no vLLM: run scripts/install_vllm.sh or set VRAMTUI_VLLM")
