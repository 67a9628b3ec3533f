"""The embedded demo: a tiny model vramtui makes itself, and a profile whose first launch fails for real.

The model is generated once with `vramtui.core.demo.tinygguf` and cached in the user's cache dir. The profile
serves it with llama-cpp-python on the CPU, asks for the model's full 262,144-token context, and caps the
server's address space at 1400 MiB — a small card. llama.cpp then fails with its own words
(`ggml_aligned_malloc: insufficient memory (attempted to allocate 2048.00 MB)`, `failed to allocate
buffer for kv cache`) at the KV-cache stage, and the wizard brings it up (measured here: 32,768 tokens
fit, in one relaunch). The budget leaves the engine's own measured share (about 230 MiB, llama-cpp-python
0.3.36) and room for 32,768 tokens of f16 cache, but not for the whole context at a 4-bit cache: the
one change is the context (at 1500 MiB it was flash attention, then q4_0, two relaunches).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from vramtui.core.demo.tinygguf import TinyModelSpec, write_tiny_gguf
from vramtui.core.errors import VramtuiError
from vramtui.core.launch.profile import Profile
from vramtui.core.units import MIB

DEMO_SPEC = TinyModelSpec(n_layer=4, n_embd=512, n_head=8, n_head_kv=8, n_ff=1024, context_length=262144)
DEMO_CONTEXT = 262144
DEMO_BUDGET = 1400 * MIB
# Bump when the spec or the writer changes, so an old cached file is not reused.
DEMO_VERSION = 1


def demo_cache_dir() -> Path:
    import platformdirs

    return Path(platformdirs.user_cache_dir("vramtui")) / "demo"


def demo_model_path(cache_dir: str | Path | None = None) -> Path:
    """The demo GGUF, generated on first use and reused after (written atomically)."""
    folder = Path(cache_dir) if cache_dir is not None else demo_cache_dir()
    path = folder / f"vramtui-demo-v{DEMO_VERSION}-f16.gguf"
    if path.is_file() and _looks_complete(path):
        return path
    try:
        return write_tiny_gguf(path, DEMO_SPEC)
    except OSError as error:
        raise VramtuiError(f"cannot write the demo model to {folder}: {error.strerror or error}") from None


def _looks_complete(path: Path) -> bool:
    # A GGUF starts with its magic; an interrupted write never reaches the final name (os.replace).
    try:
        with path.open("rb") as handle:
            return handle.read(4) == b"GGUF" and path.stat().st_size > 1 * MIB
    except OSError:
        return False


def demo_profile(cache_dir: str | Path | None = None) -> Profile:
    """llama-cpp-python, the full context the model advertises, a 1400 MiB budget: fails at kv_cache."""
    return Profile(
        backend="llama-cpp-python",
        model=str(demo_model_path(cache_dir)),
        params={"context": DEMO_CONTEXT},
        memory_budget=DEMO_BUDGET,
        port=0,  # a free port at each launch
        name="vramtui-demo",
        ready_timeout=120,
    )


def run_demo(
    max_steps: int = 6,
    record_path: str | Path | None = None,
    cache_dir: str | Path | None = None,
    on_step: Callable[..., None] | None = None,
    runner: Callable[..., object] | None = None,
):  # -> WizardResult (imported lazily: the demo module stays light for the CLI's --help)
    """Run the wizard on the demo profile with every proposal applied."""
    from vramtui.core.wizard.wizard import Wizard

    wizard = Wizard(
        demo_profile(cache_dir), record_path=record_path, auto=True, on_step=on_step, runner=runner
    )
    return wizard.run(max_steps=max_steps)
