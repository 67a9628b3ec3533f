"""Write small random-weight GGUF models that llama.cpp really loads and runs.

No machine of ours reaches a model hub, so the demo and the tests make their own models: a Llama-shaped
network with a byte-level SentencePiece vocabulary (259 tokens), written with the `gguf` package.
The answers are random text; the memory accounting, the log lines and the failures are llama.cpp's own.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

# Token types as llama.cpp's SPM vocabulary expects them.
_NORMAL, _UNKNOWN, _CONTROL, _BYTE = 1, 2, 3, 6

CHAT_TEMPLATE = (
    "{% for message in messages %}<s>{{ message['role'] }}\n{{ message['content'] }}</s>\n{% endfor %}"
    "{% if add_generation_prompt %}<s>assistant\n{% endif %}"
)


@dataclass(frozen=True)
class TinyModelSpec:
    """The shape of a generated model. Defaults give a ~5 MiB f16 model that answers in milliseconds."""

    n_layer: int = 4
    n_embd: int = 512
    n_head: int = 8
    n_head_kv: int = 8
    n_ff: int = 1024
    context_length: int = 262144
    dtype: str = "f16"  # f32 | f16 | q8_0 | q4_0 (q types need n_embd and n_ff multiples of 32)
    seed: int = 0
    name: str = "vramtui-tiny"

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head

    @property
    def n_vocab(self) -> int:
        return 3 + 256


def _vocab() -> tuple[list[bytes], list[float], list[int]]:
    tokens = [b"<unk>", b"<s>", b"</s>"]
    types = [_UNKNOWN, _CONTROL, _CONTROL]
    for byte in range(256):
        tokens.append(f"<0x{byte:02X}>".encode())
        types.append(_BYTE)
    scores = [0.0] * len(tokens)
    return tokens, scores, types


def _add_metadata(writer: Any, spec: TinyModelSpec, file_type: Any) -> None:
    """The Llama header: shapes, rope, the byte-level vocabulary and the chat template."""
    writer.add_name(spec.name)
    writer.add_context_length(spec.context_length)
    writer.add_embedding_length(spec.n_embd)
    writer.add_block_count(spec.n_layer)
    writer.add_feed_forward_length(spec.n_ff)
    writer.add_head_count(spec.n_head)
    writer.add_head_count_kv(spec.n_head_kv)
    writer.add_rope_dimension_count(spec.head_dim)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_freq_base(10000.0)
    writer.add_vocab_size(spec.n_vocab)
    writer.add_file_type(file_type)
    writer.add_tokenizer_model("llama")
    tokens, scores, types = _vocab()
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_unk_token_id(0)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_add_bos_token(True)
    writer.add_chat_template(CHAT_TEMPLATE)


def write_tiny_gguf(path: str | os.PathLike[str], spec: TinyModelSpec | None = None) -> Path:
    """Write a random-weight Llama GGUF to `path` (atomically) and return the path."""
    import gguf  # light, but only needed here

    spec = spec or TinyModelSpec()
    if spec.n_embd % spec.n_head or spec.n_head % spec.n_head_kv:
        raise ValueError("n_embd must divide by n_head, and n_head by n_head_kv")
    qtype = {
        "f32": gguf.GGMLQuantizationType.F32,
        "f16": gguf.GGMLQuantizationType.F16,
        "q8_0": gguf.GGMLQuantizationType.Q8_0,
        "q4_0": gguf.GGMLQuantizationType.Q4_0,
    }[spec.dtype]
    file_type = {
        "f32": gguf.LlamaFileType.ALL_F32,
        "f16": gguf.LlamaFileType.MOSTLY_F16,
        "q8_0": gguf.LlamaFileType.MOSTLY_Q8_0,
        "q4_0": gguf.LlamaFileType.MOSTLY_Q4_0,
    }[spec.dtype]
    rng = np.random.default_rng(spec.seed)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")

    writer = gguf.GGUFWriter(str(tmp), "llama")
    _add_metadata(writer, spec, file_type)

    def weight(name: str, shape: tuple[int, ...], quantize: bool = True) -> None:
        # numpy shape is (rows, cols) = GGUF's (ne1, ne0) reversed
        data = (rng.standard_normal(shape) * 0.02).astype(np.float32)
        if quantize and qtype in (gguf.GGMLQuantizationType.Q8_0, gguf.GGMLQuantizationType.Q4_0):
            writer.add_tensor(name, gguf.quants.quantize(data, qtype), raw_dtype=qtype)
        elif quantize and qtype == gguf.GGMLQuantizationType.F16:
            writer.add_tensor(name, data.astype(np.float16))
        else:
            writer.add_tensor(name, data)

    def norm(name: str) -> None:
        writer.add_tensor(name, np.ones(spec.n_embd, dtype=np.float32))

    kv_dim = spec.head_dim * spec.n_head_kv
    weight("token_embd.weight", (spec.n_vocab, spec.n_embd))
    for i in range(spec.n_layer):
        norm(f"blk.{i}.attn_norm.weight")
        weight(f"blk.{i}.attn_q.weight", (spec.n_embd, spec.n_embd))
        weight(f"blk.{i}.attn_k.weight", (kv_dim, spec.n_embd))
        weight(f"blk.{i}.attn_v.weight", (kv_dim, spec.n_embd))
        weight(f"blk.{i}.attn_output.weight", (spec.n_embd, spec.n_embd))
        norm(f"blk.{i}.ffn_norm.weight")
        weight(f"blk.{i}.ffn_gate.weight", (spec.n_ff, spec.n_embd))
        weight(f"blk.{i}.ffn_up.weight", (spec.n_ff, spec.n_embd))
        weight(f"blk.{i}.ffn_down.weight", (spec.n_embd, spec.n_ff))
    norm("output_norm.weight")
    weight("output.weight", (spec.n_vocab, spec.n_embd))

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    os.replace(tmp, path)
    return path
