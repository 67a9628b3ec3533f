"""Model readers: GGUF headers, HF folders (config.json, safetensors headers, index, quantization_config),
bare configs (meta-device parameter count), discovery on disk, and bad files."""

from __future__ import annotations

import json
import struct
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from vramtui.core.errors import VramtuiError
from vramtui.core.estimate import discover
from vramtui.core.estimate.modelinfo import (
    count_params_arithmetic,
    info_from_config,
    load_model_info,
    quant_from_config,
)

TINY_LLAMA = {
    "model_type": "llama",
    "hidden_size": 64,
    "intermediate_size": 176,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 100,
    "max_position_embeddings": 2048,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}


def llama_tensors(cfg: dict, dtype: type = np.float16) -> dict[str, np.ndarray]:
    h, ff, v = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    kv = cfg["num_key_value_heads"] * h // cfg["num_attention_heads"]
    out = {"model.embed_tokens.weight": np.zeros((v, h), dtype), "model.norm.weight": np.zeros(h, dtype)}
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        out |= {
            p + "self_attn.q_proj.weight": np.zeros((h, h), dtype),
            p + "self_attn.k_proj.weight": np.zeros((kv, h), dtype),
            p + "self_attn.v_proj.weight": np.zeros((kv, h), dtype),
            p + "self_attn.o_proj.weight": np.zeros((h, h), dtype),
            p + "mlp.gate_proj.weight": np.zeros((ff, h), dtype),
            p + "mlp.up_proj.weight": np.zeros((ff, h), dtype),
            p + "mlp.down_proj.weight": np.zeros((h, ff), dtype),
            p + "input_layernorm.weight": np.zeros(h, dtype),
            p + "post_attention_layernorm.weight": np.zeros(h, dtype),
        }
    if not cfg.get("tie_word_embeddings"):
        out["lm_head.weight"] = np.zeros((v, h), dtype)
    return out


@pytest.fixture
def hf_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "tiny-llama"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(TINY_LLAMA))
    save_file(llama_tensors(TINY_LLAMA), str(folder / "model.safetensors"))
    return folder


# --- GGUF ---------------------------------------------------------------------------------------------------


def test_gguf_reader_gives_exact_bytes_and_shape(make_gguf) -> None:
    import gguf

    path = make_gguf(n_layer=3, n_embd=256, n_head=4, n_head_kv=2, dtype="q8_0")
    info = load_model_info(path)
    reader = gguf.GGUFReader(str(path))
    assert info.weights_bytes == sum(int(t.n_bytes) for t in reader.tensors)
    assert info.n_params == sum(int(t.n_elements) for t in reader.tensors)
    layer0 = sum(int(t.n_bytes) for t in reader.tensors if t.name.startswith("blk.0."))
    assert info.layer_bytes is not None and info.layer_bytes[0] == layer0 and len(info.layer_bytes) == 3
    assert (info.arch, info.n_layers, info.hidden, info.n_heads, info.n_kv_heads) == ("llama", 3, 256, 4, 2)
    assert info.head_dim_k == info.head_dim_v == 64
    assert info.vocab == 259 and info.max_context == 262144
    assert info.file_type == "q8_0" and not info.tied_embeddings
    assert info.output_bytes is not None and info.output_bytes == info.token_embd_bytes


def test_gguf_truncated_and_foreign_files_are_user_errors(tmp_path: Path, tiny_gguf: Path) -> None:
    truncated = tmp_path / "cut.gguf"
    truncated.write_bytes(tiny_gguf.read_bytes()[: tiny_gguf.stat().st_size // 2])
    with pytest.raises(VramtuiError, match="truncated"):
        load_model_info(truncated)
    header_only = tmp_path / "header.gguf"
    header_only.write_bytes(tiny_gguf.read_bytes()[:200])
    with pytest.raises(VramtuiError):
        load_model_info(header_only)
    foreign = tmp_path / "model.gguf"
    foreign.write_bytes(b"PK\x03\x04 this is a zip file")
    with pytest.raises(VramtuiError, match="not a GGUF"):
        load_model_info(foreign)


# --- Hugging Face folders and configs ------------------------------------------------------------------------


def test_hf_folder_weights_from_safetensors_headers(hf_folder: Path) -> None:
    info = load_model_info(hf_folder)
    tensors = llama_tensors(TINY_LLAMA)
    assert info.weights_source == "safetensors"
    assert info.weights_bytes == sum(t.nbytes for t in tensors.values())
    assert info.n_params == sum(t.size for t in tensors.values())
    assert info.weights_by_dtype == {"F16": info.weights_bytes}
    assert info.dtype == "f16"
    # the shape arithmetic agrees with what is stored (lm_head included, untied)
    assert count_params_arithmetic(info) == info.n_params


def test_sharded_index_with_and_without_shards(tmp_path: Path) -> None:
    folder = tmp_path / "sharded"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(TINY_LLAMA))
    tensors = llama_tensors(TINY_LLAMA)
    names = sorted(tensors)
    half = len(names) // 2
    parts = {
        "model-00001-of-00002.safetensors": names[:half],
        "model-00002-of-00002.safetensors": names[half:],
    }
    for file, keys in parts.items():
        save_file({k: tensors[k] for k in keys}, str(folder / file))
    weight_map = {k: file for file, keys in parts.items() for k in keys}
    total = sum(t.nbytes for t in tensors.values())
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    info = load_model_info(folder)
    assert info.weights_source == "safetensors" and info.weights_bytes == total
    # before the download finishes: the index's total_size stands in
    (folder / "model-00002-of-00002.safetensors").unlink()
    info = load_model_info(folder)
    assert info.weights_source == "index" and info.weights_bytes == total


def test_lying_safetensors_header_is_a_user_error(hf_folder: Path) -> None:
    path = hf_folder / "model.safetensors"
    data = path.read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    name = next(k for k in header if k != "__metadata__")
    header[name]["shape"] = [v * 10 for v in header[name]["shape"]]  # claims 100x the bytes it has
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + data[8 + n :])
    with pytest.raises(VramtuiError, match="safetensors"):
        load_model_info(hf_folder)


def test_malformed_and_missing_config(tmp_path: Path) -> None:
    bad = tmp_path / "config.json"
    bad.write_text('{"model_type": "llama", "hidden_size": ')
    with pytest.raises(VramtuiError, match="malformed JSON"):
        load_model_info(bad)
    bad.write_text(json.dumps({"model_type": "llama", "hidden_size": "wide", "num_hidden_layers": 2}))
    with pytest.raises(VramtuiError):
        load_model_info(bad)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(VramtuiError, match=r"no config\.json"):
        load_model_info(empty)
    with pytest.raises(VramtuiError, match="no such file"):
        load_model_info(tmp_path / "missing" / "config.json")
    # QA 19 F7: vLLM refuses it while validating (pydantic's "Input should be a valid list"); said before a
    # launch, naming the file
    bad.write_text(json.dumps({**TINY_LLAMA, "architectures": "LlamaForCausalLM"}))
    with pytest.raises(VramtuiError, match=r"config\.json: architectures should be a list of class names"):
        load_model_info(bad)


def test_bare_config_counts_parameters_on_the_meta_device(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    path = tmp_path / "config.json"
    path.write_text(json.dumps(TINY_LLAMA))
    info = load_model_info(path)
    assert info.params_exact
    assert info.n_params == sum(t.size for t in llama_tensors(TINY_LLAMA).values())
    tied = info_from_config({**TINY_LLAMA, "tie_word_embeddings": True}, "tied")
    # lm_head counted once when tied, twice when not
    assert info.n_params - tied.n_params == 100 * 64
    # an architecture transformers cannot build falls back to arithmetic
    odd = info_from_config({**TINY_LLAMA, "model_type": "internlm2", "bias": False}, "internlm2")
    assert not odd.params_exact and odd.n_params == count_params_arithmetic(odd)
    assert odd.fused_qkv


@pytest.mark.parametrize(
    ("qc", "expected"),
    [
        ({"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4"}, "nf4"),
        (
            {"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_use_double_quant": True},
            "nf4-dq",
        ),
        ({"quant_method": "bitsandbytes", "load_in_8bit": True}, "int8"),
        ({"quant_method": "gptq", "bits": 4, "group_size": 128}, "gptq-g128"),
        ({"quant_method": "awq", "bits": 4, "group_size": 64}, "awq-g64"),
        ({"quant_method": "fp8", "activation_scheme": "dynamic"}, "fp8"),
        (
            {
                "quant_method": "compressed-tensors",
                "config_groups": {"g": {"weights": {"num_bits": 8, "type": "float"}}},
            },
            "fp8",
        ),
        (
            {
                "quant_method": "compressed-tensors",
                "config_groups": {"g": {"weights": {"num_bits": 8, "type": "int"}}},
            },
            "int8",
        ),
    ],
)
def test_quantization_config(qc: dict, expected: str) -> None:
    assert quant_from_config(qc) == expected


def test_multimodal_text_config_swa_mla_and_moe() -> None:
    gemma3 = {
        "model_type": "gemma3",
        "text_config": {
            "model_type": "gemma3_text",
            "hidden_size": 2560,
            "intermediate_size": 10240,
            "num_hidden_layers": 34,
            "num_attention_heads": 8,
            "num_key_value_heads": 4,
            "head_dim": 256,
            "sliding_window": 1024,
            "vocab_size": 262208,
        },
        "vision_config": {"hidden_size": 1152},
    }
    info = info_from_config(gemma3, "gemma3", exact_params=False)
    assert (info.n_layers, info.head_dim_k, info.n_kv_heads) == (34, 256, 4)
    assert info.tied_embeddings  # Gemma ties by default
    assert info.sliding_window == 1024 and info.swa_layers == 34 - 34 // 6
    gemma2 = {
        **gemma3["text_config"],
        "model_type": "gemma2",
        "num_hidden_layers": 42,
        "sliding_window": 4096,
    }
    assert info_from_config(gemma2, "g2", exact_params=False).swa_layers == 21
    deepseek = {
        "model_type": "deepseek_v3",
        "hidden_size": 7168,
        "num_hidden_layers": 61,
        "num_attention_heads": 128,
        "num_key_value_heads": 128,
        "kv_lora_rank": 512,
        "qk_rope_head_dim": 64,
        "qk_nope_head_dim": 128,
        "v_head_dim": 128,
        "q_lora_rank": 1536,
        "n_routed_experts": 256,
        "n_shared_experts": 1,
        "num_experts_per_tok": 8,
        "moe_intermediate_size": 2048,
        "intermediate_size": 18432,
        "first_k_dense_replace": 3,
        "vocab_size": 129280,
    }
    ds = info_from_config(deepseek, "ds", exact_params=False)
    assert ds.kv_lora_rank == 512 and ds.is_moe and ds.n_experts == 256
    # DeepSeek V3 is 671B parameters with every expert counted (plus the 14B MTP module not built here)
    assert 650e9 < ds.n_params < 680e9


def test_load_by_name_is_a_user_error_when_unknown(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OLLAMA_MODELS", str(tmp_path / "ollama"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    with pytest.raises(VramtuiError, match="not a file"):
        load_model_info("no-such-model:7b")


# --- discovery ------------------------------------------------------------------------------------------------


def test_discovery_hf_cache_ollama_store_and_gguf_folders(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tiny_gguf: Path, hf_folder: Path
) -> None:
    hub = tmp_path / "hub"
    snapshot = hub / "models--acme--tiny-llama" / "snapshots" / "abc123"
    snapshot.mkdir(parents=True)
    for file in hf_folder.iterdir():
        (snapshot / file.name).symlink_to(file)
    store = tmp_path / "ollama"
    digest = "sha256-" + "ab" * 32
    (store / "blobs").mkdir(parents=True)
    (store / "blobs" / digest).symlink_to(tiny_gguf)
    manifest = store / "manifests" / "registry.ollama.ai" / "library" / "tiny" / "latest"
    manifest.parent.mkdir(parents=True)
    layers = [
        {"mediaType": "application/vnd.ollama.image.template", "digest": "sha256:" + "cd" * 32},
        {"mediaType": "application/vnd.ollama.image.model", "digest": digest.replace("-", ":")},
    ]
    manifest.write_text(json.dumps({"schemaVersion": 2, "layers": layers}))
    monkeypatch.setenv("HF_HUB_CACHE", str(hub))
    monkeypatch.setenv("OLLAMA_MODELS", str(store))
    found = discover.discover_models([tiny_gguf.parent])
    kinds = {(m.kind, m.name) for m in found}
    assert ("hf", "acme/tiny-llama") in kinds
    assert ("ollama", "tiny:latest") in kinds
    assert ("gguf", tiny_gguf.name) in kinds
    # names resolve to files the readers load
    assert load_model_info("tiny").weights_source == "gguf"
    assert load_model_info("tiny:latest").n_layers == 4
    assert load_model_info("acme/tiny-llama").weights_source == "safetensors"


def test_split_gguf_is_read_across_its_files(tmp_path: Path) -> None:
    import gguf

    writer = gguf.GGUFWriter(str(tmp_path / "big.gguf"), "llama", split_max_tensors=3)
    writer.add_block_count(2)
    writer.add_embedding_length(32)
    writer.add_head_count(4)
    writer.add_head_count_kv(2)
    names = ["token_embd.weight", "output.weight", "output_norm.weight"]
    names += [f"blk.{i}.{t}.weight" for i in range(2) for t in ("attn_q", "attn_k", "ffn_up")]
    for name in names:
        writer.add_tensor(name, np.zeros((4, 32) if "norm" not in name else (32,), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    parts = sorted(tmp_path.glob("big-*-of-*.gguf"))
    assert len(parts) == 3
    for part in (parts[0], parts[2]):  # any part names the whole model
        info = load_model_info(part)
        assert info.weights_bytes == 8 * 4 * 32 * 4 + 32 * 4
        assert info.layer_bytes == (3 * 4 * 32 * 4, 3 * 4 * 32 * 4)
        assert (info.n_layers, info.n_kv_heads) == (2, 2)
    parts[1].unlink()
    with pytest.raises(VramtuiError, match="missing"):
        load_model_info(parts[0])


def _host_spans(parts: list[Path], host: set[str]) -> int:
    """What llama.cpp maps for the host, read straight from the files: per part, from its first host
    tensor's data to its last one's end (llama_model_loader::get_mapping_range)."""
    import gguf

    total = 0
    for part in parts:
        ranges = [
            (int(t.data_offset), int(t.data_offset) + int(t.n_bytes))
            for t in gguf.GGUFReader(part).tensors
            if t.name in host
        ]
        if ranges:
            total += max(end for _start, end in ranges) - min(start for start, _end in ranges)
    return total


def test_the_mapped_host_span_follows_the_files_own_tensor_order(tmp_path: Path) -> None:
    """With every layer on the GPU but `-ot ffn_up=CPU`, the host's mapping runs from the embedding (first in
    a convert_hf_to_gguf file) to the last layer's ffn_up, taking in the GPU tensors between; a file split
    in parts maps each part apart, so its spans add up to less."""
    import gguf

    from vramtui.core.demo.tinygguf import TinyModelSpec, write_tiny_gguf
    from vramtui.core.estimate.estimator import Settings, estimate

    whole = write_tiny_gguf(tmp_path / "one" / "tiny.gguf", TinyModelSpec())
    settings = Settings(
        device_bytes=24 * 2**30, context=512, on_gpu=True, mmap=True, override_tensor=("ffn_up=CPU",)
    )
    host = {"token_embd.weight"} | {f"blk.{i}.ffn_up.weight" for i in range(4)}
    est = estimate(load_model_info(whole), settings)
    assert est.weights_host_bytes == _host_spans([whole], host)
    assert any("tensors the GPU holds" in note and "--no-mmap" in note for note in est.notes), est.notes
    # the same tensors in three parts: each part's span alone
    reader = gguf.GGUFReader(whole)
    (tmp_path / "split").mkdir()
    writer = gguf.GGUFWriter(str(tmp_path / "split" / "tiny.gguf"), "llama", split_max_tensors=14)
    for field in reader.fields.values():
        if field.name.startswith(("llama.", "general.file_type", "tokenizer.")):
            writer.add_key_value(
                field.name,
                field.contents(),
                field.types[0],
                field.types[-1] if len(field.types) > 1 else None,
            )
    for tensor in reader.tensors:
        writer.add_tensor(tensor.name, np.array(tensor.data), raw_dtype=tensor.tensor_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    parts = sorted((tmp_path / "split").glob("tiny-*-of-*.gguf"))
    assert len(parts) == 3
    split = estimate(load_model_info(parts[0]), settings)
    assert split.weights_host_bytes == _host_spans(parts, host) < est.weights_host_bytes
    # without mmap the host holds its own tensors only
    own = estimate(load_model_info(parts[0]), replace(settings, mmap=False))
    assert own.weights_host_bytes < split.weights_host_bytes


def test_a_model_type_the_installed_transformers_does_not_know_is_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """QA 4: a config.json whose model_type this transformers does not know was sized from its shapes with
    no word that from_pretrained will refuse it; a config that brings its own code (auto_map) is not."""
    pytest.importorskip("transformers")
    from vramtui.core.estimate import modelinfo

    monkeypatch.setattr(modelinfo, "_params_cache_path", lambda: tmp_path / "param_counts.json")
    config = {
        "architectures": ["FrobnicatorForCausalLM"], "model_type": "frobnicator", "hidden_size": 256,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "intermediate_size": 512, "vocab_size": 1000, "max_position_embeddings": 2048,
    }  # fmt: skip
    (tmp_path / "config.json").write_text(json.dumps(config))
    notes = modelinfo.load_model_info(tmp_path / "config.json").notes
    assert any("model_type 'frobnicator' is not one transformers" in note for note in notes), notes
    (tmp_path / "config.json").write_text(json.dumps({**config, "auto_map": {"AutoConfig": "x.FrobConfig"}}))
    notes = modelinfo.load_model_info(tmp_path / "config.json").notes
    assert not any("is not one transformers" in note for note in notes), notes
    (tmp_path / "config.json").write_text(json.dumps({**config, "model_type": "llama"}))
    assert not any("is not one" in note for note in modelinfo.load_model_info(tmp_path / "config.json").notes)


def test_a_bad_value_or_a_damaged_file_is_said_with_the_path_as_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """QA 19 F13: `config.json: num_hidden_layers should be a number` named no folder, and a damaged GGUF
    was named by its absolute path where a truncated one was named as typed."""
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({**TINY_LLAMA, "num_hidden_layers": "32"}))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(VramtuiError, match=r"^m/config\.json: num_hidden_layers should be a number"):
        load_model_info("m")
    (tmp_path / "bad.gguf").write_bytes(b"GGUF" + b"\xff" * 60)
    with pytest.raises(VramtuiError, match=r"^bad\.gguf: "):
        load_model_info("bad.gguf")
