"""Parameters counted exactly without importing torch: the shape arithmetic agrees with transformers'
meta-device build for the architectures it claims, and the meta count is cached for the others."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from vramtui.core.estimate import modelinfo as mi
from vramtui.core.estimate.modelinfo import count_params_exact, count_params_meta, info_from_config

BASE = dict(
    hidden_size=256,
    intermediate_size=512,
    num_hidden_layers=3,
    num_attention_heads=4,
    num_key_value_heads=2,
    vocab_size=1000,
    max_position_embeddings=2048,
)
MOE = dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=128)
SHAPES: dict[str, dict[str, object]] = {
    "llama": {},
    "mistral": {},
    "qwen2": {},
    "gemma": {"head_dim": 64},
    "granite": {},
    "mixtral": {"num_local_experts": 4, "num_experts_per_tok": 2},
    "qwen3": {"head_dim": 64},
    "qwen3_moe": {**MOE, "head_dim": 64},
    "qwen2_moe": {**MOE, "shared_expert_intermediate_size": 256},
    "gemma2": {"head_dim": 64},
    "gemma3_text": {"head_dim": 64},
    "olmo2": {},
}


@pytest.mark.parametrize("tied", [False, True])
@pytest.mark.parametrize("model_type", sorted(SHAPES))
def test_the_arithmetic_equals_the_meta_device_count(model_type: str, tied: bool) -> None:
    pytest.importorskip("transformers")
    config = {**BASE, **SHAPES[model_type], "model_type": model_type, "tie_word_embeddings": tied}
    info = info_from_config(config, "shape", exact_params=False)
    exact = count_params_exact(config, info)
    assert exact is not None
    assert exact == count_params_meta(config)


def test_a_layout_the_arithmetic_does_not_know_is_left_to_transformers() -> None:
    config = {**BASE, "model_type": "llama", "mlp_bias": True}
    assert count_params_exact(config, info_from_config(config, "x", exact_params=False)) is None
    odd = {**BASE, "model_type": "starcoder2"}
    assert count_params_exact(odd, info_from_config(odd, "x", exact_params=False)) is None


def test_the_note_says_whether_the_count_was_counted_or_computed() -> None:
    config = {**BASE, "model_type": "llama"}
    counted = info_from_config(config, "x")
    assert counted.params_exact and "parameters counted exactly from the config's shapes" in counted.notes
    computed = info_from_config(config, "x", exact_params=False)
    assert any("computed from the config's shapes" in note for note in computed.notes)


def test_the_meta_count_is_cached_per_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("transformers")
    cache = tmp_path / "param_counts.json"
    monkeypatch.setattr(mi, "_params_cache_path", lambda: cache)
    config = {**BASE, "model_type": "starcoder2"}
    first = mi.cached_count_params_meta(config)
    assert first == count_params_meta(config) and first
    assert list(json.loads(cache.read_text()).values()) == [first]
    # the second call reads the cache: a different figure planted there is what comes back
    key = next(iter(json.loads(cache.read_text())))
    cache.write_text(json.dumps({key: first + 1}))
    assert mi.cached_count_params_meta(config) == first + 1


def test_estimating_a_llama_config_imports_no_torch(tmp_path: Path) -> None:
    # Llama-3-8B's published config.json; the exact count needs neither torch nor transformers (what
    # keeps it quick: benchmarks/bench_hf_configs.py prints the time, a timed test would only flake)
    config = {
        **dict(model_type="llama", hidden_size=4096, intermediate_size=14336, num_hidden_layers=32),
        **dict(
            num_attention_heads=32, num_key_value_heads=8, vocab_size=128256, max_position_embeddings=8192
        ),
        **dict(tie_word_embeddings=False, torch_dtype="bfloat16", rope_theta=500000.0),
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    code = (
        "import sys; from vramtui.cli import main; "
        f"main(['estimate', {str(path)!r}, '--json']); "
        "print('torch' in sys.modules, file=sys.stderr)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stderr.split()[-1] == "False"
    assert json.loads(done.stdout)["model"]["n_params"] == 8_030_261_248  # Meta's published count
