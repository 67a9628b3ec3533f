"""Write small random-weight Hugging Face checkpoints that vLLM and transformers really load and serve.

No machine of ours reaches a model hub, so the tests make their own: a config.json, one safetensors file
and a byte-level BPE tokenizer (tokenizer.json written as data: 256 byte symbols and three specials, no
merges, so any text round-trips) with a chat template. Dense (Qwen2, Llama) and MoE (Qwen3-MoE) shapes.
The answers are random text; the memory figures, the log lines and the failures are the engine's own.
Needs numpy and safetensors only (no torch, no transformers, no tokenizers).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

CHAT_TEMPLATE = (
    "{% for message in messages %}<s>{{ message['role'] }}\n{{ message['content'] }}</s>\n{% endfor %}"
    "{% if add_generation_prompt %}<s>assistant\n{% endif %}"
)
SPECIALS = ("<unk>", "<s>", "</s>")
_NUMPY_DTYPES = {"float32": np.float32, "float16": np.float16}


@dataclass(frozen=True)
class TinyHFSpec:
    """The shape of a generated checkpoint. The defaults: a 2-layer Qwen2, 256 wide (about 2 MiB)."""

    arch: str = "qwen2"  # qwen2 | llama | qwen3_moe
    n_layer: int = 2
    hidden: int = 256
    n_head: int = 4
    n_head_kv: int = 2
    intermediate: int = 512
    max_position: int = 4096
    dtype: str = "float32"  # as stored: float32 | float16
    n_expert: int = 4  # qwen3_moe only
    n_expert_used: int = 2
    expert_intermediate: int = 128
    seed: int = 0

    @property
    def head_dim(self) -> int:
        return self.hidden // self.n_head

    @property
    def vocab(self) -> int:
        return len(SPECIALS) + 256


_ARCH = {
    "qwen2": ("Qwen2ForCausalLM", "qwen2"),
    "llama": ("LlamaForCausalLM", "llama"),
    "qwen3_moe": ("Qwen3MoeForCausalLM", "qwen3_moe"),
}


def config_of(spec: TinyHFSpec) -> dict[str, object]:
    """The config.json the checkpoint is loaded with."""
    if spec.arch not in _ARCH:
        raise ValueError(f"unknown tiny architecture {spec.arch!r} (known: {', '.join(_ARCH)})")
    architecture, model_type = _ARCH[spec.arch]
    config: dict[str, object] = {
        "architectures": [architecture],
        "model_type": model_type,
        "vocab_size": spec.vocab,
        "hidden_size": spec.hidden,
        "intermediate_size": spec.intermediate,
        "num_hidden_layers": spec.n_layer,
        "num_attention_heads": spec.n_head,
        "num_key_value_heads": spec.n_head_kv,
        "head_dim": spec.head_dim,
        "max_position_embeddings": spec.max_position,
        "rms_norm_eps": 1e-6,
        "rope_theta": 10000.0,
        "hidden_act": "silu",
        "tie_word_embeddings": False,
        "torch_dtype": spec.dtype,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "pad_token_id": 0,
    }
    if spec.arch == "qwen3_moe":
        config.update(
            num_experts=spec.n_expert,
            num_experts_per_tok=spec.n_expert_used,
            moe_intermediate_size=spec.expert_intermediate,
            decoder_sparse_step=1,
            mlp_only_layers=[],
            norm_topk_prob=True,
            attention_bias=False,
        )
    return config


def tensor_shapes(spec: TinyHFSpec) -> dict[str, tuple[int, ...]]:
    """Every tensor of the checkpoint and its shape, named as the architecture's own loader names them."""
    h, d, v = spec.hidden, spec.head_dim, spec.vocab
    shapes: dict[str, tuple[int, ...]] = {"model.embed_tokens.weight": (v, h), "model.norm.weight": (h,)}
    for layer in range(spec.n_layer):
        p = f"model.layers.{layer}."
        shapes[p + "input_layernorm.weight"] = (h,)
        shapes[p + "post_attention_layernorm.weight"] = (h,)
        shapes[p + "self_attn.q_proj.weight"] = (spec.n_head * d, h)
        shapes[p + "self_attn.k_proj.weight"] = (spec.n_head_kv * d, h)
        shapes[p + "self_attn.v_proj.weight"] = (spec.n_head_kv * d, h)
        shapes[p + "self_attn.o_proj.weight"] = (h, spec.n_head * d)
        if spec.arch == "qwen2":  # Qwen2 has biases on q, k and v
            shapes[p + "self_attn.q_proj.bias"] = (spec.n_head * d,)
            shapes[p + "self_attn.k_proj.bias"] = (spec.n_head_kv * d,)
            shapes[p + "self_attn.v_proj.bias"] = (spec.n_head_kv * d,)
        if spec.arch == "qwen3_moe":
            shapes[p + "self_attn.q_norm.weight"] = (d,)
            shapes[p + "self_attn.k_norm.weight"] = (d,)
            shapes[p + "mlp.gate.weight"] = (spec.n_expert, h)
            for expert in range(spec.n_expert):
                e = f"{p}mlp.experts.{expert}."
                shapes[e + "gate_proj.weight"] = (spec.expert_intermediate, h)
                shapes[e + "up_proj.weight"] = (spec.expert_intermediate, h)
                shapes[e + "down_proj.weight"] = (h, spec.expert_intermediate)
        else:
            shapes[p + "mlp.gate_proj.weight"] = (spec.intermediate, h)
            shapes[p + "mlp.up_proj.weight"] = (spec.intermediate, h)
            shapes[p + "mlp.down_proj.weight"] = (h, spec.intermediate)
    shapes["lm_head.weight"] = (v, h)
    return shapes


def _byte_symbols() -> list[str]:
    """GPT-2's byte-level alphabet: each byte as the printable character its pre-tokenizer maps it to."""
    printable = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), ord("ÿ") + 1),
    ]
    table, extra = {}, 0
    for byte in range(256):
        if byte in printable:
            table[byte] = chr(byte)
        else:
            table[byte] = chr(256 + extra)
            extra += 1
    return [table[byte] for byte in range(256)]


def tokenizer_json() -> dict[str, object]:
    """tokenizer.json of a byte-level BPE with no merges (what `tokenizers` saves for one)."""
    vocab = {token: index for index, token in enumerate(SPECIALS)}
    for symbol in sorted(_byte_symbols()):
        vocab[symbol] = len(vocab)
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            {
                "id": i,
                "content": token,
                "single_word": False,
                "lstrip": False,
                "rstrip": False,
                "normalized": False,
                "special": True,
            }
            for i, token in enumerate(SPECIALS)
        ],
        "normalizer": None,
        "pre_tokenizer": byte_level,
        "post_processor": None,
        "decoder": byte_level,
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": "<unk>",
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": False,
            "vocab": vocab,
            "merges": [],
        },
    }


def _tokenizer_config(spec: TinyHFSpec) -> dict[str, object]:
    return {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": "<s>",
        "eos_token": "</s>",
        "unk_token": "<unk>",
        "pad_token": "<unk>",
        "model_max_length": spec.max_position,
        "chat_template": CHAT_TEMPLATE,
        "clean_up_tokenization_spaces": False,
    }


def write_tiny_hf(folder: str | os.PathLike[str], spec: TinyHFSpec | None = None) -> Path:
    """Write the checkpoint into `folder` (made if missing) and return the folder."""
    from safetensors.numpy import save_file

    spec = spec or TinyHFSpec()
    if spec.dtype not in _NUMPY_DTYPES:
        raise ValueError(f"tiny checkpoints are stored as float32 or float16, not {spec.dtype!r}")
    target = Path(folder)
    target.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(spec.seed)
    dtype = _NUMPY_DTYPES[spec.dtype]
    tensors = {}
    for name, shape in tensor_shapes(spec).items():
        if name.endswith("norm.weight"):
            tensors[name] = np.ones(shape, dtype=dtype)
        else:
            tensors[name] = (rng.standard_normal(shape) * 0.02).astype(dtype)
    save_file(tensors, str(target / "model.safetensors"), metadata={"format": "pt"})
    _write_json(target / "config.json", config_of(spec))
    _write_json(target / "tokenizer.json", tokenizer_json())
    _write_json(target / "tokenizer_config.json", _tokenizer_config(spec))
    _write_json(target / "generation_config.json", {"bos_token_id": 1, "eos_token_id": 2})
    return target


def _write_json(path: Path, data: dict[str, object]) -> None:
    path.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
