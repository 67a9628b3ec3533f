"""The quantization table: real bits per weight, KV element sizes, llama-quantize's per-tensor choices."""

from __future__ import annotations

import pytest

from vramtui.core.errors import VramtuiError
from vramtui.core.estimate import quant as q


@pytest.mark.parametrize(
    ("name", "bits"),
    [
        ("q4_0", 4.5),
        ("Q4_K", 4.5),
        ("q5_k", 5.5),
        ("q6_k", 6.5625),
        ("q8_0", 8.5),
        ("iq4_xs", 4.25),
        ("f16", 16),
        ("fp16", 16),
        ("bf16", 16),
        ("f32", 32),
        ("fp8", 8),
        ("int8", 8),
        ("nf4", 4.5),
        ("q4_k_m", 4.89),
        ("q5_k_m", 5.70),
    ],
)
def test_bits_per_weight(name: str, bits: float) -> None:
    assert q.bits_per_weight(name) == pytest.approx(bits)


def test_nf4_double_quant_and_group_quant_overheads() -> None:
    # absmax in 8 bits plus one fp32 per 256 blocks of 64
    assert q.bits_per_weight("nf4-dq") == pytest.approx(4.127, abs=0.001)
    # 4-bit codes + fp16 scale + 4-bit zero per group of 128
    assert q.bits_per_weight("gptq") == pytest.approx(4.156, abs=0.001)
    assert q.bits_per_weight("awq-g64") == pytest.approx(4 + 20 / 64)
    assert q.bits_per_weight("gptq", group_size=32) > q.bits_per_weight("gptq")


def test_kv_element_sizes_follow_ggml_blocks() -> None:
    assert q.kv_bytes_per_element("f16") == 2
    assert q.kv_bytes_per_element("q8_0") == 34 / 32
    assert q.kv_bytes_per_element("q4_0") == 18 / 32
    assert q.kv_bytes_per_element("fp8") == 1
    assert q.kv_row_bytes("q8_0", 1024) == 1088
    with pytest.raises(VramtuiError):
        q.kv_bytes_per_element("q9_z")


@pytest.mark.parametrize("bad", ["q9_z", "int3", "", "awesome"])
def test_unknown_quant_is_a_user_error(bad: str) -> None:
    with pytest.raises(VramtuiError):
        q.normalize_quant(bad)


def test_q4_k_m_gives_half_the_layers_more_bits() -> None:
    n = 32
    more = [i for i in range(n) if q.gguf_tensor_type("q4_k_m", q.TensorRole("ffn_down", i), n) == "q6_k"]
    # first and last eighth, and every third layer in between (llama.cpp's use_more_bits)
    assert more[:4] == [0, 1, 2, 3] and more[-4:] == [28, 29, 30, 31]
    assert len(more) == 16
    assert q.gguf_tensor_type("q4_k_m", q.TensorRole("attn_q", 5), n) == "q4_k"
    assert q.gguf_tensor_type("q4_k_m", q.TensorRole("output"), n) == "q6_k"
    assert q.gguf_tensor_type("q8_0", q.TensorRole("output"), n) == "q8_0"
    assert q.gguf_tensor_type("q4_0", q.TensorRole("token_embd"), n, tied=True) == "q6_k"
    assert q.gguf_tensor_type("q4_0", q.TensorRole("norm", 3), n) == "f32"


def test_hf_quantizations_are_told_apart_from_gguf_types() -> None:
    assert q.is_hf_quant("nf4") and q.is_hf_quant("gptq-g128") and q.is_hf_quant("fp8")
    assert not q.is_hf_quant("q4_k_m") and not q.is_hf_quant("bf16")


def test_llama_quantize_falls_back_where_a_row_does_not_split_into_the_types_blocks() -> None:
    # llama-quant.cpp: 1152 columns (gemma-3-1b) take no 256-element block: Q6_K -> Q8_0, Q4_K -> Q5_0,
    # the i-quants -> IQ4_NL; 2048 columns keep their type
    from vramtui.core.estimate.modelinfo import TensorGroup
    from vramtui.core.estimate.weights import stored_type

    odd, even = TensorGroup("output", -1, 262144, 1152), TensorGroup("output", -1, 262144, 2048)
    assert [stored_type(odd, t) for t in ("q6_k", "q4_k", "iq2_xxs", "q8_0")] == [
        "q8_0",
        "q5_0",
        "iq4_nl",
        "q8_0",
    ]
    assert stored_type(even, "q6_k") == "q6_k"


def test_every_quant_spelling_a_transformers_profile_takes_is_one_the_estimate_takes() -> None:
    # `quant = "bnb-nf4"` ran, while `estimate --quant bnb-nf4` said "unknown quantization"
    from vramtui.core.backends.transformers import _BNB

    for spelling, canonical in _BNB.items():
        expected = "nf4" if canonical == "bnb-4bit" else "int8"
        assert q.normalize_quant(spelling) == expected, spelling


@pytest.mark.parametrize(
    ("spelled", "key"),
    [("UD-Q4_K_XL", "q4_k_xl"), ("ud_q8_k_xl", "q8_k_xl"), ("UD-IQ2_M", "ud-iq2_m"), ("Q6_K_L", "q6_k_l")],
)
def test_publishers_mixes_are_named_as_their_files_are(spelled: str, key: str) -> None:
    assert q.normalize_quant(spelled) == key


def test_a_publishers_mix_is_its_file_type_with_the_embeddings_it_keeps() -> None:
    n = 32
    # Unsloth's UD-Q8_K_XL: BF16 embeddings over Q8_0; bartowski's _L: Q8_0 embed and output weights
    assert q.gguf_tensor_type("q8_k_xl", q.TensorRole("token_embd"), n) == "bf16"
    assert q.gguf_tensor_type("q8_k_xl", q.TensorRole("attn_q", 3), n) == "q8_0"
    assert q.gguf_tensor_type("q6_k_l", q.TensorRole("output"), n) == "q8_0"
    assert q.gguf_tensor_type("q4_k_l", q.TensorRole("token_embd"), n) == "q8_0"
    # a UD-Q4_K_XL's embeddings vary by model, so it keeps Q4_K_M's rules, layer by layer
    for layer in range(n):
        role = q.TensorRole("ffn_down", layer)
        assert q.gguf_tensor_type("q4_k_xl", role, n) == q.gguf_tensor_type("q4_k_m", role, n)
    assert q.gguf_tensor_type("q4_k_xl", q.TensorRole("token_embd"), n) == "q4_k"


def test_every_named_mix_has_an_average_for_a_bare_parameter_count() -> None:
    for name in q.PUBLISHER_MIXES:
        base = q.PUBLISHER_MIXES[name][0]
        assert q.bits_per_weight(name) >= q.bits_per_weight(base) - 0.01, name


def test_an_unsloth_low_bit_file_is_its_type_with_a_note_that_the_recipe_varies() -> None:
    """QA 18: UD-IQ2_M was sized as IQ2_M with the "UD-" dropped and no word of the approximation."""
    assert q.bits_per_weight("UD-IQ2_M") == q.bits_per_weight("IQ2_M")
    assert q.gguf_tensor_type("ud-iq2_m", q.TensorRole("token_embd"), 32) == "iq3_s"  # IQ2_M's rule
    assert "UD-IQ2_M: a dynamic recipe" in q.mix_notes("UD-IQ2_M")[0]
    assert q.mix_notes("IQ2_M") == [] and q.mix_notes("Q6_K_L") == []
