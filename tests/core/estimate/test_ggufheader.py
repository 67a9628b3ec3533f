"""The GGUF header as the estimate reads it: the same keys and tensor table as the gguf package's reader,
the tokenizer arrays kept as their length, each file read once, damage said in one line."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from vramtui.core.demo.tinygguf import TinyModelSpec, write_tiny_gguf
from vramtui.core.errors import VramtuiError
from vramtui.core.estimate.estimator import Settings, estimate
from vramtui.core.estimate.ggufheader import LONG_ARRAY, LongArray, read_header
from vramtui.core.estimate.modelinfo import load_model_info

SMALL = dict(n_embd=64, n_head=8, n_head_kv=2, n_ff=128, context_length=32768)


@pytest.fixture(scope="module")
def bpe_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A model with a BPE vocabulary past LONG_ARRAY (its tokens, merges and types are skipped)."""
    return write_tiny_gguf(
        tmp_path_factory.mktemp("bpe") / "bpe.gguf", TinyModelSpec(**SMALL, vocab_size=5000)
    )


@pytest.fixture(scope="module")
def qwen_vocab_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Qwen's vocabulary size, 151,936 tokens and their merges, on a tiny network."""
    path = tmp_path_factory.mktemp("qwen") / "qwen-vocab.gguf"
    return write_tiny_gguf(path, TinyModelSpec(**SMALL, vocab_size=151_936))


def test_the_header_matches_the_gguf_packages_reader(bpe_gguf: Path) -> None:
    import gguf

    reference = gguf.GGUFReader(str(bpe_gguf), "r")
    header = read_header(bpe_gguf)
    for key, field in reference.fields.items():
        if key.startswith("GGUF."):
            continue  # the reader's own entries for the file's counts
        ours = header.get(key)
        if len(field.data) > LONG_ARRAY:
            assert isinstance(ours, LongArray) and len(ours) == len(field.data), key
        else:
            assert (
                ours == pytest.approx(field.contents())
                if isinstance(ours, float)
                else ours == field.contents()
            ), key
    assert [(t.name, t.type_name, t.n_elements, t.n_bytes, t.data_offset) for t in header.tensors] == [
        (t.name, t.tensor_type.name.lower(), int(t.n_elements), int(t.n_bytes), int(t.data_offset))
        for t in reference.tensors
    ]


def test_a_real_size_vocabulary_is_read_by_its_length_once(qwen_vocab_gguf: Path) -> None:
    """Issue 22 #8: parsing 151,936 tokens and their merges took 6-9 s (25 s for --table)."""
    started = time.perf_counter()
    info = load_model_info(qwen_vocab_gguf)
    first = time.perf_counter() - started
    assert info.vocab == 151_936 and info.weights_source == "gguf"
    header = read_header(qwen_vocab_gguf)
    assert header.get("tokenizer.ggml.tokens") == LongArray(8, 151_936)
    assert len(header.get("tokenizer.ggml.merges")) == 151_936 - 259
    assert first < 3.0, f"{first:.2f} s to read the header"
    assert read_header(qwen_vocab_gguf) is header  # read once: memoized by path, mtime and size
    started = time.perf_counter()
    est = estimate(load_model_info(qwen_vocab_gguf), Settings(context=8192, device_bytes=24 << 30))
    assert est.fits and time.perf_counter() - started < 1.0
    os.utime(qwen_vocab_gguf, ns=(time.time_ns(), time.time_ns() + 10**9))
    assert read_header(qwen_vocab_gguf) is not header  # a file changed since is read again


def test_every_cut_of_a_header_is_one_user_error(bpe_gguf: Path, tmp_path: Path) -> None:
    data = bpe_gguf.read_bytes()
    data_start = read_header(bpe_gguf).data_start
    cut = tmp_path / "cut.gguf"
    parts = set()
    for size in [*range(0, 64), *range(64, data_start, max(1, data_start // 200)), data_start + 100]:
        cut.write_bytes(data[:size])
        with pytest.raises(VramtuiError, match=r"not a GGUF|truncated|damaged|the file is empty") as caught:
            load_model_info(cut)
        said = str(caught.value)
        # where it stops, in words, never struct's "unpack_from requires a buffer ..." (QA 23 D7)
        assert "unpack_from" not in said and "buffer" not in said, said
        if 24 <= size < data_start:
            assert "inside its " in said, said
            parts.add(said.split("inside its ")[1].split(":")[0].split(")")[0])
    assert parts >= {"key/value metadata", "tensor table"}, parts
    cut.write_bytes(data[:8] + b"\xff" * 16 + data[24:])  # counts no file could hold
    with pytest.raises(VramtuiError, match="does not fit in the file"):
        read_header(cut)
    # a version this reader does not know is not called truncated (QA 23 D7: "GGUF version 99 ...")
    cut.write_bytes(data[:4] + (99).to_bytes(4, "little") + data[8:])
    with pytest.raises(VramtuiError, match=r"GGUF version 99, which vramtui does not read") as caught:
        read_header(cut)
    assert "truncated" not in str(caught.value)
