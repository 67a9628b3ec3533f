"""Bits per weight of every quantization users meet, and llama-quantize's per-tensor type choices.

GGUF block types are exact (block size and bytes per block from the `gguf` package, which mirrors
ggml). The mixed GGUF file types (Q4_K_M, Q5_K_M, ...) are not one type: llama-quantize picks a type per
tensor (`llama_tensor_get_type`), so `gguf_tensor_type` reproduces its main rules; `FILE_TYPE_BPW` holds the
averages measured on a Llama 8B for when only a parameter count is known. Hugging Face quantizations
(bitsandbytes, GPTQ, AWQ, fp8) quantize the linear layers only; embeddings, lm_head and norms stay 16-bit.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from vramtui.core.errors import VramtuiError


@cache
def _ggml_sizes() -> dict[str, tuple[int, int]]:
    """ggml type name (lower case) -> (elements per block, bytes per block): mainline's (the gguf
    package's), then the types an engine's own GGUFs add (ik_llama.cpp's IQ4_K, IQ4_KS, ..._R4)."""
    import gguf

    from vramtui.core.backends import engine_ggml_types

    found = {qtype.name.lower(): sizes for qtype, sizes in gguf.GGML_QUANT_SIZES.items()}
    for name, _type_id, block, type_size, _row_meta in engine_ggml_types():
        found.setdefault(name, (block, type_size))
    return found


@cache
def _row_meta() -> dict[str, int]:
    """Bytes a row of these types keeps before its blocks (ik_llama.cpp's per-row scales)."""
    from vramtui.core.backends import engine_ggml_types

    return {name: row_meta for name, _type_id, _block, _size, row_meta in engine_ggml_types() if row_meta}


def ggml_type_names() -> tuple[str, ...]:
    return tuple(_ggml_sizes())


def ggml_row_bytes(type_name: str, n_elements: int) -> int:
    """Bytes ggml needs for one row of `n_elements` of a block type, as ggml_row_size computes it."""
    sizes = _ggml_sizes().get(type_name.lower())
    if sizes is None:
        raise VramtuiError(f"unknown ggml type {type_name!r}")
    block, type_size = sizes
    # ggml rounds down (rows are always whole blocks in real models); round up so odd test shapes stay safe
    return _row_meta().get(type_name.lower(), 0) + -(-n_elements // block) * type_size


def ggml_bits_per_weight(type_name: str) -> float:
    block, type_size = _ggml_sizes()[type_name.lower()]
    return type_size * 8 / block


# Averages of the mixed file types over a whole model (measured on Llama 3 8B GGUFs): used only when a
# parameter count is all we have. With the architecture known, `gguf_tensor_type` is used instead.
FILE_TYPE_BPW: dict[str, float] = {
    "q2_k": 3.35,
    "q2_k_s": 3.20,
    "q3_k_s": 3.64,
    "q3_k_m": 4.00,
    "q3_k_l": 4.27,
    "q4_k_s": 4.67,
    "q4_k_m": 4.89,
    "q5_k_s": 5.57,
    "q5_k_m": 5.70,
    "iq3_m": 3.76,
    "iq2_m": 2.93,
    # computed with `gguf_tensor_type` on Llama 3 8B's shapes, not measured on files; a publisher's mix
    # with wider embeddings (PUBLISHER_MIXES; the others average as the file type they start from)
    "iq3_xs": 3.48,
    "q8_k_xl": 9.48,
    "q2_k_l": 3.67,
    "q4_k_l": 5.28,
    "q5_k_l": 6.03,
    "q6_k_l": 6.82,
    # gpt-oss-20b's published GGUF (MXFP4 experts, Q8_0 elsewhere): 11.27 GiB for 20.9B parameters
    "mxfp4_moe": 4.63,
}

# General-purpose formats: bits per weight of the quantized (linear-layer) weights.
#   nf4/fp4: 4-bit codes + one fp32 absmax per 64 weights = 4.5; double quantization stores the absmax in
#   8 bits with an fp32 per 256 blocks: 4 + 8/64 + 32/(64*256) = 4.127.
#   GPTQ/AWQ at group size g: 4-bit codes + fp16 scale and 4-bit zero per group = 4 + 20/g (4.156 at 128).
_HF_BPW: dict[str, float] = {
    "f32": 32.0,
    "fp32": 32.0,
    "f16": 16.0,
    "fp16": 16.0,
    "bf16": 16.0,
    "fp8": 8.0,
    "int8": 8.0,
    "nf4": 4.5,
    "fp4": 4.5,
    "nf4-dq": 4 + 8 / 64 + 32 / (64 * 256),
    # an e2m1 code and an e4m3 scale per 16 (NVFP4); an e4m3 code and an e8m0 scale per 32 (MXFP8)
    "nvfp4": 4 + 8 / 16,
    "mxfp8": 8 + 8 / 32,
}

ALIASES: dict[str, str] = {
    "float16": "f16",
    "half": "f16",
    "float32": "f32",
    "float": "f32",
    "bfloat16": "bf16",
    "fp8_e4m3": "fp8",
    "fp8_e5m2": "fp8",
    "float8": "fp8",
    "compressed-tensors": "fp8",
    "w8a8": "int8",
    "bnb-8bit": "int8",
    "bnb8": "int8",
    "llm_int8": "int8",
    "bnb-4bit": "nf4",
    "bnb4": "nf4",
    # the transformers profile's spellings of bitsandbytes at load, taken here too
    "bnb-nf4": "nf4",
    "4bit": "nf4",
    "8bit": "int8",
    "nf4_dq": "nf4-dq",
    "nf4-double-quant": "nf4-dq",
    # vLLM's `--quantization bitsandbytes` on a 16-bit checkpoint: its loader quantizes in flight to 4-bit
    # NF4 with double quantization (the 8-bit path needs a checkpoint saved in 8 bits)
    "bitsandbytes": "nf4-dq",
    "auto": "f16",
}


# A file type in a GGUF's name, with Unsloth's "UD-" before it: Qwen3.6-35B-A3B-UD-Q4_K_XL and
# Qwen3.6-35B-A3B-Q6_K_L are the same model's files.
QUANT_TAG = re.compile(
    r"(?i)(?<![a-z0-9])((?:ud[-_])?(?:f32|bf16|f16|fp16|q\d(?:_k)?(?:_[a-z0-9]+)?|iq\d_[a-z]+|tq\d_\d))(?![a-z0-9])"
)


def quant_in_name(path: str | Path, as_written: bool = False) -> str | None:
    """The file type a GGUF's name gives ("...-UD-Q4_K_XL.gguf": ud-q4_k_xl; `as_written`: UD-Q4_K_XL), or
    None. What the publisher named the file, which a header's file type need not say (Unsloth's UD-Q4_K_XL
    says Q4_K_M)."""
    match = QUANT_TAG.search(Path(path).stem)
    if not match:
        return None
    return match.group(1) if as_written else match.group(1).lower().replace("fp16", "f16")


def normalize_quant(name: str) -> str:
    """Canonical lower-case name: 'Q4_K_M' -> 'q4_k_m', 'fp16' -> 'f16', 'awq' stays 'awq'."""
    key = str(name).strip().lower().replace(" ", "")
    key = ALIASES.get(key, key)
    if key.startswith(("gptq", "awq")):
        return key
    if key.startswith(("ud-", "ud_")):  # Unsloth's dynamic mixes: UD-Q4_K_XL, UD-IQ2_M
        key = key[3:] if f"ud-{key[3:]}" not in PUBLISHER_MIXES else f"ud-{key[3:]}"
    if (
        key in _HF_BPW
        or key in FILE_TYPE_BPW
        or key in _ggml_sizes()
        or key in PUBLISHER_MIXES
        or key in _FILE_TYPE_BASE
    ):
        return key
    known = "q4_0, q4_k_m, q5_k_m, q6_k, q8_0, iq4_xs, mxfp4, f16, bf16, fp8, int8, nf4, nf4-dq, awq, gptq"
    raise VramtuiError(f"unknown quantization {name!r} (known: {known}, ...)")


def group_size_of(name: str, default: int = 128) -> int:
    """'gptq-g32' / 'awq_g64' -> 32 / 64; plain 'gptq' -> 128."""
    for sep in ("-g", "_g", ":g"):
        if sep in name:
            try:
                return max(1, int(name.rsplit(sep, 1)[1]))
            except ValueError:
                break
    return default


def bits_per_weight(name: str, group_size: int | None = None) -> float:
    """Average bits per weight of the quantized tensors of `name`."""
    key = normalize_quant(name)
    if key.startswith(("gptq", "awq")):
        group = group_size or group_size_of(key)
        bits = 8 if "8bit" in key or key.endswith("-8") else 4
        return bits + 20 / group
    if key in _HF_BPW:
        return _HF_BPW[key]
    if key in FILE_TYPE_BPW:
        return FILE_TYPE_BPW[key]
    if key in PUBLISHER_MIXES:
        return bits_per_weight(PUBLISHER_MIXES[key][0])
    return ggml_bits_per_weight(key)


def is_gguf_only(name: str) -> bool:
    """A GGUF file type or block type (Q4_K_M, IQ2_M, UD-Q4_K_XL): what llama.cpp's files hold, no method an
    engine applies while loading (16-bit names, MXFP4 and the Hugging Face methods are not)."""
    try:
        key = normalize_quant(name)
    except VramtuiError:
        return False
    if key in _HF_BPW or key in ("mxfp4", "mxfp4_moe") or key.startswith(("gptq", "awq")):
        return False
    return key in _FILE_TYPE_BASE or key in PUBLISHER_MIXES or key in FILE_TYPE_BPW or key in _ggml_sizes()


def is_hf_quant(name: str) -> bool:
    """Quantizations that leave embeddings, lm_head and norms in 16-bit (bnb, GPTQ, AWQ, fp8, int8)."""
    key = normalize_quant(name)
    return key in ("fp8", "int8", "nf4", "fp4", "nf4-dq", "nvfp4", "mxfp8") or key.startswith(("gptq", "awq"))


def kv_pair(kv_dtype: str) -> tuple[str, str]:
    """(K type, V type) of a KV cache type: one for both, or "K/V" apart (llama.cpp's `-ctk q4_0` alone)."""
    k_type, _, v_type = str(kv_dtype).strip().lower().partition("/")
    return k_type.strip(), (v_type or k_type).strip()


# KV cache element sizes (bytes per element). ggml block types: q8_0 is 34 bytes per 32, q4_0 18 per 32.
def kv_bytes_per_element(kv_dtype: str) -> float:
    """Bytes per cached element; a "K/V" pair of types averages the two (K and V rows of one width)."""
    k_type, v_type = kv_pair(kv_dtype)
    if k_type != v_type:
        return (kv_bytes_per_element(k_type) + kv_bytes_per_element(v_type)) / 2
    key = k_type
    key = {"fp16": "f16", "float16": "f16", "bfloat16": "bf16", "auto": "f16", "fp32": "f32"}.get(key, key)
    if key.startswith("fp8") or key == "int8":
        return 1.0
    sizes = _ggml_sizes().get(key)
    if sizes is None or key in ("q8_1", "q8_k") or (key.startswith("i") and key not in ("iq4_nl",)):
        raise VramtuiError(f"unknown KV cache type {kv_dtype!r} (use f16, bf16, fp8, q8_0 or q4_0)")
    block, type_size = sizes
    return type_size / block


def kv_row_bytes(kv_dtype: str, n_elements: int) -> int:
    """Bytes of one cache row (one token, one layer, K or V) as ggml sizes it."""
    key = str(kv_dtype).strip().lower()
    if key.startswith("fp8") or key in ("int8",):
        return n_elements
    key = {"fp16": "f16", "float16": "f16", "bfloat16": "bf16", "auto": "f16", "fp32": "f32"}.get(key, key)
    kv_bytes_per_element(key)  # validates
    return ggml_row_bytes(key, n_elements)


# --- llama-quantize's per-tensor choices (llama_tensor_get_type, main rules) -------------------------------

# file type -> the type of its big matrices (llama_ftype_get_default_type)
_FILE_TYPE_BASE: dict[str, str] = {
    "f32": "f32",
    "f16": "f16",
    "bf16": "bf16",
    "q8_0": "q8_0",
    "q4_0": "q4_0",
    "q4_1": "q4_1",
    "q5_0": "q5_0",
    "q5_1": "q5_1",
    "q6_k": "q6_k",
    "q2_k": "q2_k",
    "q2_k_s": "q2_k",
    "q3_k_s": "q3_k",
    "q3_k_m": "q3_k",
    "q3_k_l": "q3_k",
    "q4_k_s": "q4_k",
    "q4_k_m": "q4_k",
    "q5_k_s": "q5_k",
    "q5_k_m": "q5_k",
    "iq4_xs": "iq4_xs",
    "iq4_nl": "iq4_nl",
    "iq1_s": "iq1_s",
    "iq1_m": "iq1_m",
    "iq2_xxs": "iq2_xxs",
    "iq2_xs": "iq2_xs",
    "iq2_s": "iq2_xs",
    "iq2_m": "iq2_s",
    "iq3_xxs": "iq3_xxs",
    "iq3_xs": "iq3_s",
    "iq3_s": "iq3_s",
    "iq3_m": "iq3_s",
    "tq1_0": "tq1_0",
    "tq2_0": "tq2_0",
    # MXFP4 for the routed experts (below); the other matrices Q8_0, as gpt-oss's published GGUFs hold them
    "mxfp4_moe": "q8_0",
}

# The 1-2 bit file types, which llama-quantize mixes by their own rules.
_IQ_LOW = ("iq2_xxs", "iq2_xs", "iq1_s", "iq2_s", "iq2_m", "iq1_m")

# Publishers' mixes named after a file type: the llama-quantize file type they start from, and the type of
# their embeddings and output when it differs from that file type's rules. Unsloth's dynamic "UD-Qn_K_XL"
# files read Qn_K_M in their headers (Q8_0 for Q8_K_XL, whose embeddings are BF16); their embeddings vary
# by model (Q4_K in Qwen3's UD-Q4_K_XL, Q8_0 in Qwen3.6's), so they keep the file type's rule. bartowski's
# "_L" files (and his Q3_K_XL) use Q8_0 for the embed and output weights. The GGUF itself gives exact sizes.
PUBLISHER_MIXES: dict[str, tuple[str, str | None]] = {
    "q2_k_xl": ("q2_k", None),
    "q3_k_xl": ("q3_k_m", None),
    "q4_k_xl": ("q4_k_m", None),
    "q5_k_xl": ("q5_k_m", None),
    "q6_k_xl": ("q6_k", None),
    "q8_k_xl": ("q8_0", "bf16"),
    "q2_k_l": ("q2_k", "q8_0"),
    "q4_k_l": ("q4_k_m", "q8_0"),
    "q5_k_l": ("q5_k_m", "q8_0"),
    "q6_k_l": ("q6_k", "q8_0"),
    # Unsloth's UD- files of the low-bit types: llama-quantize's mix for that type, their recipe on top
    **{f"ud-{base}": (base, None) for base in ("iq1_s", "iq1_m", "iq2_xxs", "iq2_xs", "iq2_s", "iq2_m")},
    **{
        f"ud-{base}": (base, None)
        for base in ("iq3_xxs", "iq3_xs", "iq3_s", "iq3_m", "iq4_xs", "iq4_nl", "tq1_0")
    },
}


def mix_notes(quant: str) -> list[str]:
    """What an estimate from a dynamic mix's name leaves out."""
    key = normalize_quant(quant)
    if key not in PUBLISHER_MIXES or PUBLISHER_MIXES[key][1] is not None:
        return []
    base = PUBLISHER_MIXES[key][0].upper()
    return [
        f"{key.upper()}: a dynamic recipe that varies by model, sized as {base} (such files run a few percent "
        "larger); the .gguf itself gives exact sizes"
    ]


# Quantizations that apply to the routed experts only (gpt-oss's MXFP4: attention, router, embeddings and
# lm_head stay 16-bit, as its quantization_config's modules_to_not_convert says).
EXPERTS_ONLY = ("mxfp4",)


def _use_more_bits(layer: int, n_layers: int) -> bool:
    # llama.cpp: i_layer < n/8 || i_layer >= 7n/8 || (i_layer - n/8) % 3 == 2
    return layer < n_layers // 8 or layer >= 7 * n_layers // 8 or (layer - n_layers // 8) % 3 == 2


@dataclass(frozen=True)
class TensorRole:
    """What a tensor is, in llama-quantize's terms."""

    kind: str  # token_embd | output | attn_q | attn_k | attn_v | attn_qkv | attn_output | ffn_up | ffn_gate
    # | ffn_down | ffn_*_exps | norm | bias
    layer: int = -1


@dataclass(frozen=True)
class QuantShape:
    """The model's numbers llama-quantize's rules look at."""

    n_layers: int
    n_gqa: int = 1  # attention heads per KV head
    n_expert: int = 0

    @property
    def is_70b(self) -> bool:
        # llama.cpp types an 80-layer Llama or Qwen2 as 70B, and widens its attn_v
        return self.n_layers == 80


def gguf_tensor_type(
    file_type: str, role: TensorRole, n_layers: int, tied: bool = False, n_gqa: int = 1, n_expert: int = 0
) -> str:
    """The ggml type llama-quantize gives a tensor for a given file type (its main rules)."""
    ftype = normalize_quant(file_type)
    # llama-quantize never quantizes the MoE router (ffn_gate_inp), which convert_hf_to_gguf writes as f32,
    # nor a recurrent layer's conv kernel and its 1-D vectors
    if role.kind in ("norm", "bias", "ffn_gate_inp", "ssm_conv1d", "ssm_misc"):
        return "f32"
    ftype, wide = PUBLISHER_MIXES.get(ftype, (ftype, None))
    base = _FILE_TYPE_BASE.get(ftype, ftype if ftype in _ggml_sizes() else "q4_k")
    if ftype in ("f32", "f16", "bf16"):
        return base
    if wide and (role.kind == "output" or role.kind == "token_embd"):
        return wide
    if ftype == "mxfp4_moe":
        return "mxfp4" if role.kind.endswith("_exps") else "q8_0"
    if role.kind == "output" or (tied and role.kind == "token_embd"):
        if ftype in _IQ_LOW or ftype == "iq3_xxs":
            return "q5_k"
        return "q8_0" if base == "q8_0" else "q6_k"
    if role.kind == "token_embd":
        return _token_embd_type(ftype, base)
    shape = QuantShape(n_layers, max(1, n_gqa), n_expert)
    if ftype in _IQ_LOW:
        return _iq_low_type(ftype, base, role, shape)
    if role.kind in ("attn_v", "attn_qkv", "attn_k", "attn_q"):
        return _attention_type(ftype, base, role, shape)
    if role.kind.startswith("ffn_down"):
        return _ffn_down_type(ftype, base, role, shape)
    if role.kind == "attn_output":
        return _attn_output_type(ftype, base, shape)
    if role.kind.startswith(("ffn_gate", "ffn_up")) and ftype == "iq3_xs":
        n = shape.n_layers
        return "iq3_xxs" if n // 8 <= role.layer < 7 * n // 8 else base
    return base


def _token_embd_type(ftype: str, base: str) -> str:
    if ftype in ("iq2_xxs", "iq2_xs", "iq1_s", "iq1_m"):
        return "q2_k"
    if ftype in ("iq2_s", "iq2_m", "iq3_xxs"):
        return "iq3_s"
    if ftype in ("tq1_0", "tq2_0"):
        return "q4_k"
    return base


def _iq_low_type(ftype: str, base: str, role: TensorRole, shape: QuantShape) -> str:
    """The 1-2 bit mixes: attn_v and the first eighth of ffn_down wider, attn_output by the experts."""
    wider = "iq3_s" if ftype in ("iq2_s", "iq2_m") else "q2_k"
    if role.kind in ("attn_v", "attn_qkv"):
        return "q4_k" if shape.n_gqa >= 4 or shape.n_expert >= 4 else wider
    if role.kind == "attn_k" and shape.n_expert == 8:
        return "q4_k"
    if role.kind.startswith("ffn_down"):
        return wider if role.layer < shape.n_layers // 8 else base
    if role.kind == "attn_output":
        if shape.n_expert == 8:
            return "q5_k"
        return {"iq1_s": "iq2_xxs", "iq1_m": "iq2_xxs", "iq2_s": "iq3_s", "iq2_m": "iq3_s"}.get(ftype, base)
    return base


def _attention_type(ftype: str, base: str, role: TensorRole, shape: QuantShape) -> str:
    """attn_v's rules, which a fused attn_qkv follows too (llama.cpp's attention-V category since its
    tensor categories, as the quantizer the tests run does); attn_k's and attn_q's."""
    if role.kind not in ("attn_v", "attn_qkv"):
        if shape.n_expert == 8 and role.kind == "attn_k":
            return "q8_0"  # the 8-expert model's attn_k is small: Q8_0 costs little
        return {"iq3_xs": "iq3_xxs", "iq3_xxs": "iq2_s"}.get(ftype, base)
    if shape.n_expert == 8:
        return "q8_0"
    wide_gqa = shape.n_gqa >= 4
    new = base
    if ftype == "q2_k":
        new = "q4_k" if wide_gqa else "q3_k"
    elif (ftype in ("q2_k_s", "iq3_xs", "iq3_s", "iq3_xxs") and wide_gqa) or ftype == "iq3_m":
        new = "q4_k"
    elif ftype == "q3_k_m":
        new = "q5_k" if role.layer < 2 else "q4_k"
    elif ftype == "q3_k_l" or (ftype in ("iq4_nl", "iq4_xs") and wide_gqa):
        new = "q5_k"
    elif ftype in ("q4_k_m", "q5_k_m") and _use_more_bits(role.layer, shape.n_layers):
        new = "q6_k"
    elif ftype == "q4_k_s" and role.layer < 4:
        new = "q5_k"
    if shape.is_70b and new in ("q3_k", "q4_k"):
        new = "q5_k"
    return new


def _ffn_down_type(ftype: str, base: str, role: TensorRole, shape: QuantShape) -> str:
    i, n = role.layer, shape.n_layers
    if ftype == "q2_k":
        return "q3_k"
    if ftype == "q2_k_s":
        return "q4_k" if i < n // 8 else base
    if ftype == "q3_k_m":
        return "q5_k" if i < n // 16 else "q4_k"
    if ftype == "iq3_m" and (i < n // 8 or (shape.n_expert == 8 and _use_more_bits(i, n))):
        return "q4_k"
    if ftype == "q3_k_l":
        return "q5_k"
    if ftype in ("q4_k_m", "q5_k_m") and _use_more_bits(i, n):
        return "q6_k"
    if ftype == "q4_k_s" and i < n // 8:
        return "q5_k"
    if ftype in ("q4_0", "q5_0") and i < n // 8:  # with an imatrix, as published files are made
        return "q4_1" if ftype == "q4_0" else "q5_1"
    return base


def _attn_output_type(ftype: str, base: str, shape: QuantShape) -> str:
    if shape.n_expert == 8:
        eight = (
            "q2_k",
            "iq3_xs",
            "iq3_xxs",
            "q3_k_s",
            "q3_k_m",
            "iq4_nl",
            "q4_k_s",
            "q4_k_m",
            "iq3_s",
            "iq3_m",
        )
        return "q5_k" if ftype in (*eight, "iq4_xs") else base
    return {"q2_k": "q3_k", "iq3_xxs": "iq3_s", "q3_k_m": "q4_k", "q3_k_l": "q5_k", "iq3_m": "q4_k"}.get(
        ftype, base
    )


def load_peak_note(quant: str) -> str:
    return (
        f"{quant} applied while loading: the weights pass through 16-bit first, so the load-time peak is "
        "close to the 16-bit size; a pre-quantized checkpoint avoids it"
    )
