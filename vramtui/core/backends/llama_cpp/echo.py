"""The settings llama.cpp echoes at start-up, as the wizard checks a change took effect: the model file's
type ("file type = Q4_K - Medium"), the KV cache's types ("K (q8_0): ..., V (q8_0): ..."), a failed mmap.

Sizes are not here: they are the log profile's figures (`log.py`), read by the diagnosis.
"""

from __future__ import annotations

import re

from vramtui.core.errors import VramtuiError
from vramtui.core.estimate import quant as q

_FILE_TYPE = re.compile(r"file type\s*=\s*(\S+)", re.I)
_KV_TYPE = re.compile(r"K \((\w+)\):.*V \((\w+)\):")

# llama.cpp's names of the file types whose first word is not the type itself ("IQ3_S mix - 3.66 bpw" is
# IQ3_M, "all F32", "MXFP4 MoE"); the k-quant mixes print their type first ("Q4_K - Medium").
_PRINTED_FIRST_WORD = {"iq3_m": "iq3_s", "f32": "all", "mxfp4_moe": "mxfp4"}


def read_settings(text: str) -> dict[str, str]:
    """The settings printed: file_type (its first word), kv_type (V's) and kv_type_k, mmap_failed; the
    last of each wins (a restarted server appends to its log)."""
    facts: dict[str, str] = {}
    for line in text.splitlines():
        match = _FILE_TYPE.search(line)
        if match:
            facts["file_type"] = match.group(1).lower()
        kv = _KV_TYPE.search(line)
        if kv:
            facts["kv_type_k"] = kv.group(1).lower()
            facts["kv_type"] = kv.group(2).lower()
        if "mmap failed" in line.lower():
            facts["mmap_failed"] = "1"
    return facts


def file_type_word(quant: str | None) -> str | None:
    """The first word of the file type llama.cpp prints for the quantization a file's name gives:
    Q4_K_M prints "Q4_K - Medium", and a publisher's mix prints the file type it starts from (Unsloth's
    UD-Q4_K_XL: "Q4_K - Medium"). An unknown name is itself."""
    try:
        key = q.normalize_quant(quant) if quant else None
    except VramtuiError:
        return quant
    if key is None:
        return None
    key = q.PUBLISHER_MIXES[key][0] if key in q.PUBLISHER_MIXES else key
    return _PRINTED_FIRST_WORD.get(key, re.sub(r"^(q\d_k)_[sml]$", r"\1", key))
