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
    # 0: the byte-level SentencePiece vocabulary (259 tokens); more: a byte-level BPE vocabulary of that
    # many tokens with its merges, as Qwen's (151,936) and Llama 3's (128,256) files carry: what makes a
    # real GGUF's header large (see bpe_vocab).
    vocab_size: int = 0

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head

    @property
    def n_vocab(self) -> int:
        return self.vocab_size or 3 + 256


def _vocab() -> tuple[list[bytes], list[float], list[int]]:
    tokens = [b"<unk>", b"<s>", b"</s>"]
    types = [_UNKNOWN, _CONTROL, _CONTROL]
    for byte in range(256):
        tokens.append(f"<0x{byte:02X}>".encode())
        types.append(_BYTE)
    scores = [0.0] * len(tokens)
    return tokens, scores, types


def bpe_vocab(size: int) -> tuple[list[str], list[str], list[int]]:
    """A GPT-2-style byte-level BPE vocabulary of `size` tokens: the 256 byte symbols, then each new token
    the merge of two earlier ones (its merge rule listed, as convert_hf_to_gguf.py writes them), the last
    three control tokens. (tokens, merges, token types)."""
    symbols = [chr(c) for c in range(0x21, 0x7F)] + [chr(c) for c in range(0xA1, 0x100) if c != 0xAD]
    symbols += [chr(0x100 + i) for i in range(256 - len(symbols))]  # the bytes GPT-2 maps past U+0100
    tokens, seen, merges = list(symbols), set(symbols), []
    left = 0
    while len(tokens) < size - 3:
        for right in range(min(len(tokens), 4096)):
            if len(tokens) >= size - 3:
                break
            merged = tokens[left] + tokens[right]
            if merged not in seen:
                seen.add(merged)
                tokens.append(merged)
                merges.append(f"{tokens[left]} {tokens[right]}")
        left += 1
    tokens += ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    return tokens, merges, [_NORMAL] * (len(tokens) - 3) + [_CONTROL] * 3


def _add_vocab(writer: Any, spec: TinyModelSpec | None = None) -> None:
    """The vocabulary (the byte-level SentencePiece one, or a BPE one of spec.vocab_size tokens) and the
    chat template every tiny model is served with."""
    if spec is not None and spec.vocab_size:
        tokens, merges, types = bpe_vocab(spec.vocab_size)
        writer.add_tokenizer_model("gpt2")
        writer.add_token_list(tokens)
        writer.add_token_types(types)
        writer.add_token_merges(merges)
        writer.add_bos_token_id(len(tokens) - 3)
        writer.add_eos_token_id(len(tokens) - 1)
        writer.add_chat_template(CHAT_TEMPLATE)
        return
    writer.add_tokenizer_model("llama")
    tokens_spm, scores, types = _vocab()
    writer.add_token_list(tokens_spm)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_unk_token_id(0)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_add_bos_token(True)
    writer.add_chat_template(CHAT_TEMPLATE)


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
    _add_vocab(writer, spec)


def _types(dtype: str) -> tuple[Any, Any]:
    """(the tensor type, the file type) for a dtype name."""
    import gguf

    qtype = {
        "f32": gguf.GGMLQuantizationType.F32,
        "f16": gguf.GGMLQuantizationType.F16,
        "q8_0": gguf.GGMLQuantizationType.Q8_0,
        "q4_0": gguf.GGMLQuantizationType.Q4_0,
    }[dtype]
    file_type = {
        "f32": gguf.LlamaFileType.ALL_F32,
        "f16": gguf.LlamaFileType.MOSTLY_F16,
        "q8_0": gguf.LlamaFileType.MOSTLY_Q8_0,
        "q4_0": gguf.LlamaFileType.MOSTLY_Q4_0,
    }[dtype]
    return qtype, file_type


def _weight_writer(writer: Any, qtype: Any, rng: np.random.Generator) -> Any:
    """add(name, numpy shape, quantize=True): random weights in the file's type (norms stay f32)."""
    import gguf

    def weight(name: str, shape: tuple[int, ...], quantize: bool = True) -> None:
        # numpy shape is (rows, cols) = GGUF's (ne1, ne0) reversed
        data = (rng.standard_normal(shape) * 0.02).astype(np.float32)
        if quantize and qtype in (gguf.GGMLQuantizationType.Q8_0, gguf.GGMLQuantizationType.Q4_0):
            writer.add_tensor(name, gguf.quants.quantize(data, qtype), raw_dtype=qtype)
        elif quantize and qtype == gguf.GGMLQuantizationType.F16:
            writer.add_tensor(name, data.astype(np.float16))
        else:
            writer.add_tensor(name, data)

    return weight


def _finish(writer: Any, tmp: Path, path: Path) -> Path:
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    os.replace(tmp, path)
    return path


def write_tiny_gguf(path: str | os.PathLike[str], spec: TinyModelSpec | None = None) -> Path:
    """Write a random-weight Llama GGUF to `path` (atomically) and return the path."""
    import gguf  # light, but only needed here

    spec = spec or TinyModelSpec()
    if spec.n_embd % spec.n_head or spec.n_head % spec.n_head_kv:
        raise ValueError("n_embd must divide by n_head, and n_head by n_head_kv")
    qtype, file_type = _types(spec.dtype)
    rng = np.random.default_rng(spec.seed)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")

    writer = gguf.GGUFWriter(str(tmp), "llama")
    _add_metadata(writer, spec, file_type)
    weight = _weight_writer(writer, qtype, rng)

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
    return _finish(writer, tmp, path)


@dataclass(frozen=True)
class TinyMoESpec:
    """A qwen3moe-shaped mixture of experts as convert_hf_to_gguf.py lays it out: 3-D expert tensors
    (ffn_{gate,up,down}_exps), a router (ffn_gate_inp), per-head q/k norms; the demo's byte vocabulary,
    so llama.cpp serves it. The experts hold most of the bytes, as in the real ones."""

    n_layer: int = 6
    n_embd: int = 256
    n_head: int = 4
    n_head_kv: int = 2
    head_dim: int = 64
    n_expert: int = 8
    n_expert_used: int = 2
    n_ff_exp: int = 128
    context_length: int = 4096
    dtype: str = "f16"  # f32 | f16 | q8_0 | q4_0 (q types need n_embd, n_ff_exp, head_dim multiples of 32)
    seed: int = 0
    name: str = "vramtui-tiny-moe"

    @property
    def n_vocab(self) -> int:
        return 3 + 256


def _add_moe_metadata(writer: Any, spec: TinyMoESpec, file_type: Any) -> None:
    writer.add_name(spec.name)
    writer.add_context_length(spec.context_length)
    writer.add_embedding_length(spec.n_embd)
    writer.add_block_count(spec.n_layer)
    writer.add_feed_forward_length(spec.n_ff_exp * 6)
    writer.add_head_count(spec.n_head)
    writer.add_head_count_kv(spec.n_head_kv)
    writer.add_key_length(spec.head_dim)
    writer.add_value_length(spec.head_dim)
    writer.add_rope_dimension_count(spec.head_dim)
    writer.add_rope_freq_base(10000.0)
    writer.add_expert_count(spec.n_expert)
    writer.add_expert_used_count(spec.n_expert_used)
    writer.add_expert_feed_forward_length(spec.n_ff_exp)
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_vocab_size(spec.n_vocab)
    writer.add_file_type(file_type)
    _add_vocab(writer)


def write_tiny_moe_gguf(path: str | os.PathLike[str], spec: TinyMoESpec | None = None) -> Path:
    """Write a random-weight qwen3moe GGUF to `path` (atomically) and return the path."""
    import gguf

    spec = spec or TinyMoESpec()
    qtype, file_type = _types(spec.dtype)
    rng = np.random.default_rng(spec.seed)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    writer = gguf.GGUFWriter(str(tmp), "qwen3moe")
    _add_moe_metadata(writer, spec, file_type)
    weight = _weight_writer(writer, qtype, rng)

    def norm(name: str, width: int) -> None:
        writer.add_tensor(name, np.ones(width, dtype=np.float32))

    embd, heads, kv_heads, dim = spec.n_embd, spec.n_head, spec.n_head_kv, spec.head_dim
    experts, ff = spec.n_expert, spec.n_ff_exp
    weight("token_embd.weight", (spec.n_vocab, embd))
    for i in range(spec.n_layer):
        norm(f"blk.{i}.attn_norm.weight", embd)
        weight(f"blk.{i}.attn_q.weight", (heads * dim, embd))
        weight(f"blk.{i}.attn_k.weight", (kv_heads * dim, embd))
        weight(f"blk.{i}.attn_v.weight", (kv_heads * dim, embd))
        norm(f"blk.{i}.attn_q_norm.weight", dim)
        norm(f"blk.{i}.attn_k_norm.weight", dim)
        weight(f"blk.{i}.attn_output.weight", (embd, heads * dim))
        norm(f"blk.{i}.ffn_norm.weight", embd)
        weight(f"blk.{i}.ffn_gate_inp.weight", (experts, embd), quantize=False)  # the router stays f32
        weight(f"blk.{i}.ffn_gate_exps.weight", (experts, ff, embd))
        weight(f"blk.{i}.ffn_up_exps.weight", (experts, ff, embd))
        weight(f"blk.{i}.ffn_down_exps.weight", (experts, embd, ff))
    norm("output_norm.weight", embd)
    weight("output.weight", (spec.n_vocab, embd))
    return _finish(writer, tmp, path)
