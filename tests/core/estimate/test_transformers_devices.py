"""transformers on several GPUs: accelerate's device map, each card's bill, the tightest card's verdict.

The map is checked against transformers' own `_get_device_map` (accelerate's get_balanced_memory and
infer_auto_device_map) run here on a model built on the meta device, with the same caps."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from vramtui.core.backends.transformers.memory import layer_kv_bytes
from vramtui.core.backends.transformers.placement import module_map
from vramtui.core.errors import VramtuiError
from vramtui.core.estimate.estimator import Settings, estimate
from vramtui.core.estimate.modelinfo import load_model_info
from vramtui.core.estimate.weights import hf_module_bytes, hf_weights_bytes
from vramtui.core.units import GIB

# Qwen2.5-32B's published config.json (the shape that is over on one 48 GiB card)
QWEN25_32B = dict(
    architectures=["Qwen2ForCausalLM"], model_type="qwen2", hidden_size=5120, intermediate_size=27648,
    num_attention_heads=40, num_key_value_heads=8, num_hidden_layers=64, vocab_size=152064,
    max_position_embeddings=32768, tie_word_embeddings=False, torch_dtype="bfloat16",
)  # fmt: skip


def _info(tmp_path: Path, **config: object) -> object:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    return load_model_info(str(path))


def _llama(hidden: int, layers: int, vocab: int, tied: bool) -> dict[str, object]:
    return dict(
        architectures=["LlamaForCausalLM"], model_type="llama", hidden_size=hidden,
        intermediate_size=hidden * 11 // 4, num_attention_heads=hidden // 64, num_key_value_heads=4,
        head_dim=64, num_hidden_layers=layers, vocab_size=vocab, max_position_embeddings=4096,
        tie_word_embeddings=tied, torch_dtype="bfloat16",
    )  # fmt: skip


def _caps_text(caps: dict[object, int]) -> str:
    return ",".join(f"{key}={size}B" for key, size in caps.items())


def _accelerates_map(config: dict[str, object], strategy: str, caps: dict[object, int]) -> dict[str, object]:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    from accelerate import init_empty_weights
    from transformers.integrations.accelerate import _get_device_map

    fields = {k: v for k, v in config.items() if k not in ("architectures", "model_type", "torch_dtype")}
    with init_empty_weights():
        shape = transformers.AutoConfig.for_model(str(config["model_type"]), **fields)
        model = transformers.AutoModelForCausalLM.from_config(shape, dtype=torch.bfloat16)
    found = _get_device_map(model, strategy, dict(caps), None)
    # expand the cleaned map (`model`: 0 when everything went there) to each module vramtui places
    n = int(config["num_hidden_layers"])  # type: ignore[call-overload]
    names = ["model.embed_tokens", *(f"model.layers.{il}" for il in range(n)), "model.norm", "lm_head"]
    out = {}
    for name in names:
        owner = next(
            key
            for key in sorted(found, key=len, reverse=True)
            if name == key or name.startswith(key + ".") or key == ""
        )
        out[name] = found[owner] if found[owner] not in ("cpu", "disk") else None
    return out


@pytest.mark.parametrize("tied", [False, True])
@pytest.mark.parametrize("strategy", ["auto", "balanced_low_0", "sequential"])
@pytest.mark.parametrize(
    "shares",  # each card's cap as a share of the model's bytes, then host RAM's
    [
        (2, 2, 10),
        (0.7, 0.7, 10),
        (0.35, 0.9, 10),
        (0.3, 0.3, 10),
        (0.45, 0.45, 0.45, 10),
        (0.4, 0.4, 0.1),
        (0.6, 10),
    ],
)
def test_the_map_is_accelerates(tmp_path: Path, tied: bool, strategy: str, shares: tuple[float, ...]) -> None:
    _check_map(tmp_path, _llama(1024, 24, 32000, tied), strategy, shares)


# a small Qwen3-MoE: the layers' fused experts are a leaf module of their own
QWEN3_MOE = dict(
    architectures=["Qwen3MoeForCausalLM"], model_type="qwen3_moe", hidden_size=512, intermediate_size=1376,
    moe_intermediate_size=256, num_experts=16, num_experts_per_tok=2, head_dim=64, num_attention_heads=8,
    num_key_value_heads=2, num_hidden_layers=12, vocab_size=20000, max_position_embeddings=4096,
    tie_word_embeddings=False, torch_dtype="bfloat16",
)  # fmt: skip


@pytest.mark.parametrize("strategy", ["auto", "sequential"])
@pytest.mark.parametrize("shares", [(0.7, 0.7, 10), (0.3, 0.5, 10)])
def test_the_map_of_a_moe_is_accelerates(tmp_path: Path, strategy: str, shares: tuple[float, ...]) -> None:
    _check_map(tmp_path, QWEN3_MOE, strategy, shares)


def _check_map(tmp_path: Path, config: dict[str, object], strategy: str, shares: tuple[float, ...]) -> None:
    tied = bool(config["tie_word_embeddings"])
    info = _info(tmp_path, **config)
    total, _peak, _notes = hf_weights_bytes(info, None)
    caps: dict[object, int] = {i: int(share * total) for i, share in enumerate(shares[:-1])}
    caps["cpu"] = int(shares[-1] * total)
    expected = _accelerates_map(config, strategy, caps)
    settings = Settings(
        backend="transformers",
        gpus=tuple(cap for key, cap in caps.items() if key != "cpu"),
        device_map=strategy,
        max_memory=_caps_text(caps),
    )
    where = module_map(settings, hf_module_bytes(info, None, total), tied)
    ours = {
        "model.embed_tokens": where.embedding,
        **{f"model.layers.{il}": device for il, device in enumerate(where.layers)},
        "model.norm": where.norm,
        "lm_head": where.lm_head,
    }
    assert ours == expected


def test_two_cards_take_what_one_cannot(tmp_path: Path) -> None:
    info = _info(tmp_path, **QWEN25_32B)
    one = estimate(info, Settings(backend="transformers", context=8192, device_bytes=48 * GIB))
    assert not one.fits and one.devices == []  # one card keeps today's output
    two = estimate(info, Settings(backend="transformers", context=8192, gpus=(48 * GIB, 48 * GIB)))
    assert two.fits and len(two.devices) == 2
    rows = two.devices
    assert sum(row.layers for row in rows) == info.n_layers and all(row.layers for row in rows)
    # every card holds its own layers' cache: the whole cache, split as the layers are
    per_layer = layer_kv_bytes(info, 8192, 1, "bf16")
    assert sum(row.kv_cache_bytes for row in rows) == sum(per_layer) == one.kv_cache_bytes
    assert rows[0].kv_cache_bytes == sum(per_layer[: rows[0].layers])
    # the weights add up to the one-card figure; the embedding is on the first card, lm_head on the last
    assert sum(row.weights_bytes for row in rows) == one.weights_bytes
    modules = hf_module_bytes(info, None, one.weights_bytes)
    assert rows[0].weights_bytes == modules.embedding + sum(modules.layers[: rows[0].layers])
    # both cards run layers (the MLP's prefill); the last also holds the logits
    assert rows[1].compute_buffer_bytes > rows[0].compute_buffer_bytes > 0
    assert (
        sum(row.compute_buffer_bytes for row in rows) == one.activations_bytes + rows[0].compute_buffer_bytes
    )
    assert any('device_map="auto"' in note for note in two.notes)
    out = two.to_dict()
    assert [row["index"] for row in out["devices"]] == [0, 1] and all(row["fits"] for row in out["devices"])


def test_the_tightest_card_decides_and_max_memory_is_honoured(tmp_path: Path) -> None:
    info = _info(tmp_path, **QWEN25_32B)
    cards = (48 * GIB, 48 * GIB)
    # card 0 capped at 12 GiB: the rest goes to card 1, which is then over
    capped = estimate(
        info, Settings(backend="transformers", context=8192, gpus=cards, max_memory="0=12GiB,1=47GiB")
    )
    first, second = capped.devices
    assert first.weights_bytes <= 12 * GIB and second.weights_bytes > first.weights_bytes
    assert not capped.fits and "device 1 over by" in (capped.reason or "")
    # GPUs max_memory does not name are not used
    only_one = estimate(info, Settings(backend="transformers", gpus=cards, max_memory="1=47GiB,cpu=100GiB"))
    assert only_one.devices[0].weights_bytes == 0 and only_one.devices[0].runtime_bytes == 0
    assert only_one.weights_host_bytes > 0  # what card 1 cannot take goes to host RAM, as allowed


def test_a_spill_to_host_ram_is_not_a_fit_unless_max_memory_allows_it(tmp_path: Path) -> None:
    info = _info(tmp_path, **QWEN25_32B)
    small = (24 * GIB, 24 * GIB)
    spill = estimate(info, Settings(backend="transformers", context=4096, gpus=small))
    assert spill.weights_host_bytes > 0 and not spill.fits
    assert "host RAM" in (spill.reason or "") and "cpu=SIZE" in (spill.reason or "")
    allowed = estimate(
        info,
        Settings(backend="transformers", context=4096, gpus=small, max_memory="0=23GiB,1=23GiB,cpu=64GiB"),
    )
    assert allowed.weights_host_bytes > 0 and any("CPU offload" in note for note in allowed.notes)
    # the offloaded layers run on the first card: their cache is there, with the layer being copied in
    layers_on_cards = sum(row.layers for row in allowed.devices)
    assert layers_on_cards < info.n_layers
    assert sum(row.kv_cache_bytes for row in allowed.devices) == sum(layer_kv_bytes(info, 4096, 1, "bf16"))


def test_a_profile_names_the_device_map(tmp_path: Path) -> None:
    info = _info(tmp_path, **QWEN25_32B)
    params = {"context": 4096, "device_map": "sequential", "max_memory": "0=40GiB,1=40GiB"}
    settings = Settings.from_params(params, backend="transformers", device_bytes="48GiB")
    settings = Settings(**{**settings.__dict__, "gpus": (48 * GIB, 48 * GIB)})
    est = estimate(info, settings)
    # sequential fills card 0 first (up to its cap less the largest module left), "auto" balances
    balanced = estimate(info, Settings(**{**settings.__dict__, "device_map": "auto"}))
    assert est.devices[0].layers > balanced.devices[0].layers
    assert any('device_map="sequential"' in note for note in est.notes)
    on_one = estimate(info, Settings(**{**settings.__dict__, "device_map": "cuda:1", "max_memory": None}))
    assert on_one.devices[0].weights_bytes == 0 and on_one.devices[1].layers == info.n_layers


def test_bad_device_maps_are_one_line_errors(tmp_path: Path) -> None:
    info = _info(tmp_path, **QWEN25_32B)
    cards = (24 * GIB, 24 * GIB)
    for device_map, max_memory, message in (
        ("everywhere", None, "device_map 'everywhere'"),
        (None, "0:10GiB", "not DEVICE=SIZE"),
        (None, "0=lots", "not a size"),
        (None, "3=10GiB", "names GPU 3"),
        ("cuda:5", None, "device_map cuda:5"),
    ):
        settings = Settings(backend="transformers", gpus=cards, device_map=device_map, max_memory=max_memory)
        with pytest.raises(VramtuiError, match=message):
            estimate(info, settings)


def test_a_host_only_cap_keeps_the_cards_as_the_runner_does(tmp_path: Path) -> None:
    # cpu_offload = 4 is `--max-memory cpu=4GiB`: the runner adds every GPU's free memory, so the
    # estimate places on the cards as with no cap, and the host may take what they cannot
    info = _info(tmp_path, **QWEN25_32B)
    cards = (24 * GIB, 24 * GIB)
    host_only = estimate(info, Settings(backend="transformers", gpus=cards, max_memory="cpu=4GiB"))
    no_cap = estimate(info, Settings(backend="transformers", gpus=cards))
    assert [d.layers for d in host_only.devices] == [d.layers for d in no_cap.devices]
    assert sum(d.layers for d in host_only.devices) > 0


def test_the_cli_and_the_pane_parse_the_map_alike(tmp_path: Path) -> None:
    from vramtui.core.estimate.inputs import InputError, parse_settings, split_flags

    typed = split_flags("--device-map Balanced_Low_0 --max-memory 0=10GiB,cpu=32GiB")
    settings = parse_settings({**typed, "backend": "transformers", "card": "24GiB,24GiB"})
    assert (settings.device_map, settings.max_memory) == ("balanced_low_0", "0=10GiB,cpu=32GiB")
    with pytest.raises(InputError, match="--max-memory"):
        parse_settings({"max_memory": "gpu0=10GiB"})
    # another engine has no device map: left out, and a note says so
    info = _info(tmp_path, **QWEN25_32B)
    est = estimate(info, Settings(backend="vllm", device_bytes=80 * GIB, device_map="auto"))
    assert "--device-map: not a vllm setting, left out" in est.notes


def test_bitsandbytes_leaves_each_card_a_tenth_of_its_cap(tmp_path: Path) -> None:
    """transformers' bitsandbytes quantizers (adjust_max_memory) scale every cap by 0.9 before the map."""
    info = _info(tmp_path, **QWEN25_32B)
    cap = 8 * GIB
    settings = Settings(
        backend="transformers", quant="nf4", gpus=(24 * GIB, 24 * GIB), device_map="sequential",
        max_memory=f"0={cap}B,1=20GiB",
    )  # fmt: skip
    est = estimate(info, settings)
    weights, _peak, _notes = hf_weights_bytes(info, "nf4")
    modules = hf_module_bytes(info, "nf4", weights)
    assert modules.bitsandbytes
    first = est.devices[0]
    # card 0 keeps room for the largest module still to place (the lm_head, 16-bit under bitsandbytes)
    assert first.weights_bytes <= 0.9 * cap - modules.lm_head
    one_more = first.weights_bytes + modules.layers[first.layers]
    assert one_more > 0.9 * cap - modules.lm_head  # and takes as many layers as that leaves room for
    plain = estimate(info, Settings(**{**settings.__dict__, "quant": "awq"}))
    assert not hf_module_bytes(info, "awq", plain.weights_bytes).bitsandbytes


def test_one_card_with_max_memory_offloads_as_accelerate_does(tmp_path: Path) -> None:
    info = _info(tmp_path, **QWEN25_32B)
    plain = estimate(info, Settings(backend="transformers", context=4096, device_bytes=48 * GIB))
    assert not plain.fits and plain.devices == []  # no caps given: today's one-card verdict
    capped = Settings(
        backend="transformers", context=4096, device_bytes=48 * GIB, max_memory="0=30GiB,cpu=64GiB"
    )
    est = estimate(info, capped)
    (card,) = est.devices
    modules = hf_module_bytes(info, None, plain.weights_bytes)
    # the card takes layers up to its cap less the largest module left; the rest runs from host RAM
    assert 0 < card.layers < info.n_layers and est.weights_host_bytes > 0
    assert card.weights_bytes - max(modules.layers) <= 30 * GIB
    assert est.fits and any("CPU offload" in note for note in est.notes)
    # the runner takes device_map "auto" itself when max_memory is set: no "several GPUs" note for one card
    assert not any("several GPUs" in note for note in est.notes)
    assert any(
        "several GPUs" in note
        for note in estimate(info, replace(capped, max_memory=None, gpus=(48 * GIB, 48 * GIB))).notes
    )


@pytest.mark.parametrize("config", [_llama(512, 6, 20000, True), _llama(512, 6, 20000, False), QWEN3_MOE])
def test_each_modules_bytes_are_what_transformers_builds(tmp_path: Path, config: dict[str, object]) -> None:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    from accelerate import init_empty_weights
    from transformers.integrations.accelerate import compute_module_sizes

    fields = {k: v for k, v in config.items() if k not in ("architectures", "model_type", "torch_dtype")}
    with init_empty_weights():
        shape = transformers.AutoConfig.for_model(str(config["model_type"]), **fields)
        model = transformers.AutoModelForCausalLM.from_config(shape, dtype=torch.bfloat16)
    sizes, _leaves = compute_module_sizes(model)
    info = _info(tmp_path, **config)
    total, _peak, _notes = hf_weights_bytes(info, None)
    ours = hf_module_bytes(info, None, total)
    assert ours.embedding == sizes["model.embed_tokens"] and ours.norm == sizes["model.norm"]
    assert ours.lm_head == sizes.get("lm_head", 0)  # a tied lm_head is not counted twice
    assert list(ours.layers) == [sizes[f"model.layers.{il}"] for il in range(info.n_layers)]


def test_a_cpu_only_run_is_billed_to_the_host_with_the_process_not_a_cuda_context(tmp_path: Path) -> None:
    """QA (session 13): `estimate --cpu` with transformers printed "total on the GPU" with a 400 MiB CUDA
    context, so `check` on a CPU box compared an estimate on GPU 0 with figures on the host."""
    from vramtui.core.backends.transformers.memory import CPU_PROCESS_BYTES
    from vramtui.core.estimate.estimator import CUDA_CONTEXT_BYTES
    from vramtui.core.memory.parts import HOST

    info = _info(tmp_path, **QWEN25_32B)
    on_cpu = estimate(info, Settings(backend="transformers", context=2048, on_gpu=False))
    on_gpu = estimate(info, Settings(backend="transformers", context=2048))
    assert on_cpu.device == "host" and on_cpu.bill.total(0) == 0
    assert (
        on_cpu.bill.get("runtime", HOST) == CPU_PROCESS_BYTES
        and on_gpu.bill.get("runtime", 0) == CUDA_CONTEXT_BYTES
    )
    assert on_cpu.total_bytes == on_cpu.host_bytes_needed == on_cpu.bill.total(HOST)
    for part in ("weights", "kv_cache", "compute"):
        assert on_cpu.bill.get(part, HOST) == on_gpu.bill.get(part, 0) > 0, part


@pytest.mark.parametrize("backend", ["transformers", "vllm"])
def test_the_engines_dtype_is_the_width_loaded(tmp_path: Path, backend: str) -> None:
    """QA 11: a profile's dtype = "float32" launched --dtype float32 but was billed as the bf16 file."""
    info = _info(tmp_path, **QWEN25_32B)
    base = estimate(info, Settings(backend=backend, context=4096))
    wide = estimate(info, Settings.from_params({"context": 4096, "dtype": "float32"}, backend=backend))
    assert wide.weights_bytes == 2 * base.weights_bytes
    assert wide.kv_bytes_per_token == 2 * base.kv_bytes_per_token  # the cache takes the model's width
    assert any("cast to f32" in note for note in wide.notes)
    same = estimate(info, Settings(backend=backend, context=4096, dtype="float16"))
    assert same.weights_bytes == base.weights_bytes  # 16 bits either way


def test_estimate_takes_dtype_and_refuses_a_type_it_is_not(tmp_path: Path) -> None:
    import subprocess
    import sys

    path = tmp_path / "config.json"
    path.write_text(json.dumps(QWEN25_32B))
    run = [sys.executable, "-m", "vramtui", "estimate", str(path), "--backend", "transformers", "--json"]
    run += ["--gpu-mem", "200GiB"]  # it fits: exit 0
    done = subprocess.run([*run, "--dtype", "float32"], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["weights_bytes"] > 60 * GIB  # 32.8B parameters at 4 bytes
    bad = subprocess.run([*run, "--dtype", "int3"], capture_output=True, text=True, check=False)
    assert bad.returncode == 2 and bad.stderr.strip().count("\n") == 0 and "--dtype" in bad.stderr


def test_the_largest_concurrency_is_not_stopped_at_1024_silently(tmp_path: Path) -> None:
    """QA 11: a tiny model on 24 GiB said "largest concurrency 1024" (the search's end) with 4000 fitting."""
    from vramtui.core.estimate.estimator import MAX_PARALLEL_SEARCH

    tiny = dict(QWEN25_32B, hidden_size=64, intermediate_size=128, num_attention_heads=4,
                num_key_value_heads=1, num_hidden_layers=2, vocab_size=1000)  # fmt: skip
    info = _info(tmp_path, **tiny)
    found = estimate(
        info, Settings(backend="transformers", context=2048, parallel=4000, device_bytes=24 * GIB)
    )
    assert found.fits and found.max_parallel is not None and found.max_parallel > 4000
    assert not found.max_parallel_capped  # transformers has no limit of its own
    said = [note for note in found.notes if "or more fit at once" in note]
    assert bool(said) == (found.max_parallel >= MAX_PARALLEL_SEARCH)
