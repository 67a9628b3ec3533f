"""ik_llama.cpp's own ggml tensor types: the GGUF type ids mainline's ggml (and the gguf package) do not know.

From ikawrakow/ik_llama.cpp at commit 8337e4cd3861406fc04e0854b1409cd1b027fbc9 (2026-08-15):
the ids from `ggml/include/ggml.h` (enum ggml_type), the block sizes and per-row metadata from
`ggml/src/ggml.c` (type_traits: blck_size, type_size, row_meta_size), the bytes per block as
`gguf-py/gguf/constants.py` (GGML_QUANT_SIZES) resolves each `sizeof(block_...)` (checked against
`ggml/src/ggml-common.h` for the two it lacks: mxfp4_r8, q8_k_r16). A row of n elements takes
`row_meta + n / block * type_size` bytes (ggml_row_size): the _KS, _KT, _KL, _BN and some _R4 types
keep a scale per row before their blocks.

Every id here is one mainline's ggml leaves unused, so a GGUF type id means one thing whichever engine
wrote the file. Left out: I2_S (36), whose size ggml computes by a special case (n / 4 + 32 bytes per
tensor), and ik's Q1_0_G128 (41), which mainline's gguf package reads as its own Q1_0 with the same
128-element, 18-byte block.
"""

from __future__ import annotations

# (name, GGUF type id, elements per block, bytes per block, bytes of metadata per row)
IK_GGML_TYPES: tuple[tuple[str, int, int, int, int], ...] = (
    ("q4_0_4_4", 31, 32, 18, 0),
    ("q4_0_4_8", 32, 32, 18, 0),
    ("q4_0_8_8", 33, 32, 18, 0),
    ("q8_0_x4", 97, 32, 34, 0),
    ("q8_1_x4", 98, 32, 36, 0),
    ("q8_2_x4", 99, 32, 36, 0),
    ("q6_0", 133, 32, 26, 0),
    ("iq1_bn", 134, 64, 13, 2),
    ("iq2_bn", 135, 64, 16, 4),
    ("q8_k64", 136, 64, 68, 0),
    ("iq2_k", 137, 256, 76, 0),
    ("iq3_k", 138, 256, 110, 0),
    ("iq4_k", 139, 256, 144, 0),
    ("iq5_k", 140, 256, 176, 0),
    ("iq6_k", 141, 256, 212, 0),
    ("iq4_ks", 144, 256, 136, 4),
    ("iq2_ks", 145, 256, 70, 2),
    ("iq4_kss", 146, 256, 128, 4),
    ("q8_k16", 147, 64, 64, 20),
    ("q8_k32", 148, 256, 292, 0),
    ("q8_kr8", 149, 256, 292, 0),
    ("q8_k128", 150, 128, 140, 0),
    ("q8_kv", 151, 32, 32, 8),
    ("iq5_ks", 152, 256, 168, 4),
    ("iq2_kt", 153, 256, 68, 4),
    ("iq3_kt", 154, 256, 100, 4),
    ("iq4_kt", 155, 256, 128, 4),
    ("iq3_ks", 156, 256, 102, 2),
    ("iq2_kl", 157, 256, 86, 2),
    ("iq1_kt", 158, 256, 56, 4),
    ("q4_0_r8", 202, 32, 18, 0),
    ("q5_0_r4", 206, 32, 22, 0),
    ("q8_0_r8", 208, 32, 34, 0),
    ("q2_k_r4", 210, 256, 84, 0),
    ("q3_k_r4", 211, 256, 110, 0),
    ("q4_k_r4", 212, 256, 144, 0),
    ("q5_k_r4", 213, 256, 176, 0),
    ("q6_k_r4", 214, 256, 210, 0),
    ("iq2_xxs_r4", 216, 256, 66, 0),
    ("iq2_xs_r4", 217, 256, 74, 0),
    ("iq3_xxs_r4", 218, 256, 98, 0),
    ("iq1_s_r4", 219, 32, 6, 2),
    ("iq4_nl_r4", 220, 32, 18, 0),
    ("iq3_s_r4", 221, 256, 110, 0),
    ("iq2_s_r4", 222, 256, 82, 0),
    ("iq4_xs_r8", 223, 256, 136, 0),
    ("iq1_m_r4", 229, 32, 7, 2),
    ("bf16_r16", 230, 1, 2, 0),
    ("q6_0_r4", 233, 32, 26, 0),
    ("iq2_bn_r4", 335, 64, 16, 4),
    ("iq2_k_r4", 337, 256, 76, 0),
    ("iq3_k_r4", 338, 256, 110, 0),
    ("iq4_k_r4", 339, 256, 144, 0),
    ("iq5_k_r4", 340, 256, 176, 0),
    ("iq4_ks_r4", 344, 256, 136, 4),
    ("iq5_ks_r4", 352, 256, 168, 4),
    ("mxfp4_r8", 353, 32, 17, 0),
    ("q8_k_r16", 397, 256, 258, 0),
    ("q8_kv_r8", 398, 32, 32, 4),
    ("q8_k_r8", 399, 256, 258, 0),
)
