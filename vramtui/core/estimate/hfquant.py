"""A Hugging Face checkpoint's `quantization_config`, read into the layout its tensors have on disk.

Each method stores a quantized linear layer (`rows` output features x `cols` input features) as codes plus
scales (and zeros) laid out the way its loader expects; the bytes below are the tensors' own:

- block `fp8` (DeepSeek-V3, Qwen3-*-FP8): an e4m3 code per weight and one float32 `weight_scale_inv` per
  `weight_block_size` block: rows*cols + ceil(rows/b0)*ceil(cols/b1)*4. Without a block size, one float32
  `weight_scale` per tensor (and an `input_scale` per tensor when `activation_scheme` is static).
- `compressed-tensors` (llm-compressor): `weights.num_bits`, `strategy` group / channel / tensor, `type` int /
  float. pack-quantized int4 packs eight codes in an int32 (`weight_packed`), a `weight_scale` in the model
  dtype per group (per row for channel), an int64[2] `weight_shape`, and a packed zero point per group when
  not symmetric; int8 / fp8 store one byte per code.
- GPTQ (AutoGPTQ / GPTQModel): `qweight` int32 rows*cols*bits/8, `qzeros` int32 (cols/g)*rows*bits/8,
  `scales` fp16 (cols/g)*rows*2 and `g_idx` int32 cols*4 (saved whether `desc_act` is on or off).
- AWQ (AutoAWQ GEMM/GEMV): `qweight` and `qzeros` packed the same way, `scales` fp16, no `g_idx`.
- bitsandbytes (transformers' Linear4bit / Linear8bitLt): 4-bit: two codes per byte, one absmax per 64
  weights, float32, or with double quantization one byte per block plus a float32 per 256 blocks; 8-bit:
  an int8 per weight and a float32 `SCB` per row.
- `mxfp4` (gpt-oss): 4-bit codes and one e8m0 scale byte per 32 weights, experts only.

Which layers are quantized: every linear layer but the embeddings and lm_head, less the layers the config
names (`modules_to_not_convert`, `ignored_layers`, `ignore`, `llm_int8_skip_modules`), matched the way each
loader matches them (a substring of the module name; compressed-tensors: the exact name or `re:REGEX`; `*`
as a wildcard). A method not listed here stays unknown: `spec_from_config` returns None.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

FP8_SCALE_BYTES = 4  # weight_scale_inv / weight_scale are float32
BNB_BLOCK = 64  # bitsandbytes' 4-bit blocksize
BNB_NESTED_BLOCK = 256  # double quantization: one float32 per 256 absmax bytes


@dataclass(frozen=True)
class QuantSpec:
    """How one checkpoint stores its quantized linear layers."""

    method: str  # fp8 | compressed-tensors | gptq | awq | bitsandbytes | mxfp4
    bits: int = 8
    group_size: int | None = None  # None: per row (channel); 0: per tensor
    block: tuple[int, int] | None = None  # fp8 weight_block_size
    kind: str = "int"  # int | float (compressed-tensors' type; fp8 is float)
    symmetric: bool = True
    double_quant: bool = False  # bitsandbytes 4-bit
    static_activations: bool = False  # fp8 activation_scheme "static": an input_scale per tensor
    skip: tuple[str, ...] = ()
    skip_style: str = "substring"  # substring | ct (compressed-tensors: exact or re:)
    quantizes_router: bool = False  # the MoE router is an nn.Linear the method converts
    quantizes_lm_head: bool = False
    experts_only: bool = False
    scale_bytes: int = 2  # bytes of a per-group scale in the model dtype (fp16 / bf16)
    name: str = ""  # vramtui's short name (fp8, gptq-g128, nf4-dq, ...)

    def describe(self) -> str:
        parts = [self.method, f"{self.bits}-bit {self.kind}"]
        if self.block:
            parts.append(f"{self.block[0]}x{self.block[1]} blocks")
        elif self.group_size:
            parts.append(f"groups of {self.group_size}")
        elif self.group_size is None:
            parts.append("per channel")
        if self.skip:
            parts.append(f"{len(self.skip)} module pattern(s) kept 16-bit")
        return ", ".join(parts)


def matrix_bytes(spec: QuantSpec, rows: int, cols: int) -> int:
    """Bytes of one quantized `rows x cols` linear weight with its scales, zeros and indices."""
    n = rows * cols
    method = spec.method
    if method == "fp8":
        if spec.block:
            b0, b1 = spec.block
            scales = math.ceil(rows / b0) * math.ceil(cols / b1) * FP8_SCALE_BYTES
        else:
            scales = FP8_SCALE_BYTES * (2 if spec.static_activations else 1)
        return n + scales
    if method == "mxfp4":
        return n // 2 + math.ceil(n / 32)
    if method == "bitsandbytes":
        if spec.bits == 8:
            return n + rows * 4  # int8 codes + float32 SCB per row
        blocks = math.ceil(n / BNB_BLOCK)
        if spec.double_quant:
            return math.ceil(n / 2) + blocks + math.ceil(blocks / BNB_NESTED_BLOCK) * 4
        return math.ceil(n / 2) + blocks * 4
    groups = _groups_per_row(spec, cols)
    codes = math.ceil(n * spec.bits / 8)
    if method in ("gptq", "awq"):
        zeros = math.ceil(groups * rows * spec.bits / 8)
        g_idx = cols * 4 if method == "gptq" else 0
        return codes + zeros + groups * rows * 2 + g_idx
    # compressed-tensors
    if spec.block:
        b0, b1 = spec.block
        return n + math.ceil(rows / b0) * math.ceil(cols / b1) * spec.scale_bytes
    scales = (1 if spec.group_size == 0 else groups * rows) * spec.scale_bytes
    zeros = 0 if spec.symmetric else math.ceil((1 if spec.group_size == 0 else groups * rows) * spec.bits / 8)
    shape = 16 if spec.bits < 8 else 0  # pack-quantized keeps the int64[2] weight_shape
    return codes + scales + zeros + shape


def _groups_per_row(spec: QuantSpec, cols: int) -> int:
    if spec.group_size is None or spec.group_size == 0:
        return 1
    return math.ceil(cols / spec.group_size)


def is_skipped(spec: QuantSpec, module: str) -> bool:
    """Whether the config keeps `module` (a dotted HF module name) unquantized."""
    for pattern in spec.skip:
        if spec.skip_style == "ct":
            if pattern.startswith("re:"):
                if re.match(pattern[3:], module):
                    return True
            elif module == pattern or module.endswith("." + pattern) or pattern.endswith("." + module):
                return True
        elif "*" in pattern:
            if re.search(re.escape(pattern).replace(r"\*", r"[^.]+"), module):
                return True
        elif pattern and pattern in module:
            return True
    return False


# --- quantization_config -> QuantSpec ------------------------------------------------------------------


def _positive(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else default


def _names(qc: dict[str, Any], *keys: str) -> tuple[str, ...]:
    found: list[str] = []
    for key in keys:
        value = qc.get(key)
        if isinstance(value, list):
            found += [str(v) for v in value if isinstance(v, str)]
    return tuple(found)


def _fp8(qc: dict[str, Any]) -> QuantSpec:
    block = qc.get("weight_block_size")
    pair = None
    if isinstance(block, list) and len(block) == 2 and all(isinstance(b, int) and b > 0 for b in block):
        pair = (block[0], block[1])
    return QuantSpec(
        "fp8",
        bits=8,
        kind="float",
        block=pair,
        group_size=0,
        static_activations=str(qc.get("activation_scheme", "dynamic")).lower() == "static",
        skip=_names(qc, "modules_to_not_convert", "ignored_layers"),
        name="fp8",
    )


def _gptq_awq(method: str, qc: dict[str, Any]) -> QuantSpec:
    bits = _positive(qc.get("bits", qc.get("w_bit")), 4)
    group = qc.get("group_size", qc.get("q_group_size", 128))
    group_size = None if group == -1 else _positive(group, 128)
    suffix = f"-g{group_size}" if group_size else "-g-1"
    name = f"{method}{suffix}" if bits == 4 else f"{method}-{bits}bit{suffix}"
    return QuantSpec(
        method,
        bits=bits,
        group_size=group_size,
        symmetric=bool(qc.get("sym", not qc.get("zero_point", True))),
        skip=_names(qc, "modules_to_not_convert"),
        quantizes_lm_head=bool(qc.get("lm_head")),
        name=name,
    )


def _bnb(qc: dict[str, Any]) -> QuantSpec:
    skip = _names(qc, "llm_int8_skip_modules", "modules_to_not_convert")
    if qc.get("load_in_4bit") or qc.get("_load_in_4bit"):
        kind = "fp4" if str(qc.get("bnb_4bit_quant_type", "nf4")).lower() == "fp4" else "nf4"
        double = bool(qc.get("bnb_4bit_use_double_quant"))
        name = f"{kind}-dq" if double and kind == "nf4" else kind
        return QuantSpec(
            "bitsandbytes",
            bits=4,
            kind=kind,
            double_quant=double,
            skip=skip,
            quantizes_router=True,
            name=name,
        )
    return QuantSpec("bitsandbytes", bits=8, group_size=None, skip=skip, quantizes_router=True, name="int8")


def _compressed_tensors(qc: dict[str, Any]) -> QuantSpec | None:
    groups = qc.get("config_groups")
    if not isinstance(groups, dict) or not groups:
        return None
    # the group that targets Linear layers decides; configs with several groups are mostly one scheme
    chosen = None
    for group in groups.values():
        if isinstance(group, dict) and isinstance(group.get("weights"), dict):
            chosen = group["weights"]
            if "Linear" in (group.get("targets") or []):
                break
    if chosen is None:
        return None
    bits = _positive(chosen.get("num_bits"), 8)
    kind = "float" if str(chosen.get("type", "int")).lower() == "float" else "int"
    strategy = str(chosen.get("strategy", "channel")).lower()
    block = chosen.get("block_structure")
    if strategy == "block" and bits == 8 and isinstance(block, list) and len(block) == 2:
        # FP8-block: one scale in the model dtype per block, as block fp8 but 2-byte scales
        return QuantSpec(
            "compressed-tensors",
            bits=8,
            kind=kind,
            block=(int(block[0]), int(block[1])),
            group_size=0,
            skip=_names(qc, "ignore"),
            skip_style="ct",
            quantizes_router=True,
            quantizes_lm_head=True,
            name="fp8" if kind == "float" else "int8",
        )
    if bits not in (4, 8) or strategy in ("block", "tensor_group"):
        return None  # NVFP4 (tensor_group) and other schemes: not laid out here
    group_size = _positive(chosen.get("group_size"), 128) if strategy == "group" else None
    if strategy == "tensor":
        group_size = 0
    if bits == 8:
        name = "fp8" if kind == "float" else "int8"
    else:
        name = f"gptq-g{group_size}" if group_size else "gptq-g-1"
    return QuantSpec(
        "compressed-tensors",
        bits=bits,
        kind=kind,
        group_size=group_size,
        symmetric=bool(chosen.get("symmetric", True)),
        skip=_names(qc, "ignore"),
        skip_style="ct",
        quantizes_router=True,
        quantizes_lm_head=True,  # lm_head is a Linear: quantized unless `ignore` names it
        name=name,
    )


def spec_from_config(qc: Any) -> QuantSpec | None:
    """The layout a `quantization_config` describes; None when there is none or vramtui does not know it."""
    if not isinstance(qc, dict):
        return None
    method = str(qc.get("quant_method", "")).lower()
    if method in ("fp8", "fbgemm_fp8"):
        return _fp8(qc)
    if method in ("gptq", "awq"):
        return _gptq_awq(method, qc)
    if method == "bitsandbytes" or (not method and (qc.get("load_in_4bit") or qc.get("load_in_8bit"))):
        return _bnb(qc)
    if method == "compressed-tensors":
        return _compressed_tensors(qc)
    if method == "mxfp4":
        return QuantSpec(
            "mxfp4",
            bits=4,
            kind="float",
            group_size=32,
            skip=_names(qc, "modules_to_not_convert"),
            experts_only=True,
            name="mxfp4",
        )
    return None


def spec_from_name(name: str) -> QuantSpec | None:
    """The layout of a quantization given by name (`--quant nf4`, `gptq-g32`, `fp8`): what a loader that
    quantizes in flight, or a checkpoint named that way, stores."""
    key = name.lower()
    if key.startswith(("gptq", "awq")):
        method = "gptq" if key.startswith("gptq") else "awq"
        group = re.search(r"g(-?\d+)$", key)
        size = int(group.group(1)) if group else 128
        bits = 8 if "8bit" in key else 4
        return _gptq_awq(method, {"bits": bits, "group_size": size})
    if key in ("nf4", "fp4", "nf4-dq"):
        return _bnb(
            {"load_in_4bit": True, "bnb_4bit_quant_type": key[:3], "bnb_4bit_use_double_quant": "dq" in key}
        )
    if key == "int8":
        return _bnb({"load_in_8bit": True})
    if key == "fp8":  # vLLM's in-flight fp8: per-tensor scale
        return _fp8({})
    if key == "mxfp4":
        return spec_from_config({"quant_method": "mxfp4"})
    return None
