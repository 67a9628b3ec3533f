"""Embedding and reranker encoders (BERT and its kin, served by llama-server --embedding, vLLM's embed
task): no output matrix and no logits. A BERT GGUF has no `output.weight`, which the estimator read as
weights tied to the embedding: an output matrix on the GPU and the logits of every token in its compute
buffer (a printout of bge-small on a V100: weights x1.57, compute x3.65 before; x1.02 and x1.09 after)."""

from __future__ import annotations

from pathlib import Path

import pytest
from gguf_writing import write_gguf

from vramtui.core.estimate.estimator import Settings, estimate
from vramtui.core.estimate.modelinfo import load_model_info
from vramtui.core.units import GIB

VOCAB, HIDDEN, LAYERS, FF = 30522, 128, 2, 512


def _write_bert(path: Path) -> Path:
    """A BERT encoder as llama.cpp's converter writes one: no output.weight."""
    import gguf

    def keys(writer: gguf.GGUFWriter) -> None:
        writer.add_block_count(LAYERS)
        writer.add_context_length(512)
        writer.add_embedding_length(HIDDEN)
        writer.add_feed_forward_length(FF)
        writer.add_head_count(4)
        writer.add_layer_norm_eps(1e-12)
        writer.add_causal_attention(False)
        writer.add_pooling_type(gguf.PoolingType.CLS)

    tensors = {"token_embd.weight": (VOCAB, HIDDEN), "token_types.weight": (2, HIDDEN)}
    tensors["position_embd.weight"] = (512, HIDDEN)
    for il in range(LAYERS):
        for part in ("attn_q", "attn_k", "attn_v", "attn_output"):
            tensors[f"blk.{il}.{part}.weight"] = (HIDDEN, HIDDEN)
        tensors[f"blk.{il}.ffn_up.weight"] = (FF, HIDDEN)
        tensors[f"blk.{il}.ffn_down.weight"] = (HIDDEN, FF)
    return write_gguf(path, "bert", keys, tensors)


@pytest.fixture(scope="module")
def bert_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _write_bert(tmp_path_factory.mktemp("bert") / "bge-like-f16.gguf")


def test_an_encoder_gguf_has_no_output_matrix_and_no_logits(bert_gguf: Path) -> None:
    info = load_model_info(bert_gguf)
    assert info.encoder_only and not info.tied_embeddings
    est = estimate(info, Settings(backend="llama.cpp", context=512, ubatch=512, device_bytes=8 * GIB))
    embedding = VOCAB * HIDDEN * 2
    # the weights on the GPU are the layers (the embedding stays in host RAM): no copy of it as a head
    assert est.bill.get("weights", 0) < embedding / 2
    # no logits: the compute buffer is the encoder's own (far under vocab x 512 tokens x 4 bytes = 60 MiB)
    assert est.bill.get("compute", 0) < VOCAB * 512 * 4 / 8
    # its output buffer holds a pooled embedding per sequence, not a vocabulary's logits
    assert est.output_buffer_bytes == HIDDEN * 4 * est.parallel


def test_a_decoder_without_an_output_matrix_still_ties_its_head(tmp_path: Path) -> None:
    """The tie is kept for a decoder: a GGUF with no output.weight multiplies by its embedding."""
    from vramtui.core.demo.tinygguf import TinyModelSpec, write_tiny_gguf

    info = load_model_info(write_tiny_gguf(tmp_path / "tiny.gguf", TinyModelSpec()))
    assert not info.encoder_only and info.logits_width == info.vocab
