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
- NVFP4 (ModelOpt `quant_algo` NVFP4, compressed-tensors `tensor_group` float4, AutoRound `nv_fp4`): packed
  e2m1 codes (`weight` / `weight_packed` uint8, half a byte each), one e4m3 scale byte per 16 weights, and
  float32 per-tensor scalars (`weight_scale_2` / `weight_global_scale`, and `input_scale` /
  `input_global_scale` when activations are quantized too). MXFP8 (ModelOpt): an e4m3 code per weight and an
  e8m0 scale per 32.
- ModelOpt FP8: e4m3 codes, a float32 `weight_scale` per tensor (per row for `FP8_PER_CHANNEL_PER_TOKEN`, per
  128x128 block for `FP8_PB_WO`) and a float32 `input_scale`; `MIXED_PRECISION` lists each quantized module with
  its own algorithm (the others stay 16-bit). Its `exclude_modules` are globs.
- AutoRound (`auto-round`): GPTQ's packing (`qweight`, `qzeros` int32, `scales` fp16) without `g_idx` (its
  auto_gptq packing leaves it out; the gptqmodel packing keeps it); `extra_config` gives modules their own
  bits (16: not quantized).
- FP-Quant (`fp_quant`): MXFP4 (or NVFP4) codes and scales as above, a float32 global scale for the weight
  and one for the activations, and a forward and a backward Hadamard matrix (`hadamard_group_size` squared,
  bf16) per linear layer.
- `gptq_marlin` / `awq_marlin` / `marlin` are vLLM's kernels for GPTQ and AWQ checkpoints: sized as those.

Which layers are quantized: every linear layer but the embeddings and lm_head, less the layers the config
names (`modules_to_not_convert`, `ignored_layers`, `ignore`, `llm_int8_skip_modules`), matched the way each
loader matches them (a substring of the module name; compressed-tensors: the exact name or `re:REGEX`; `*`
as a wildcard; ModelOpt: a glob). A method not listed here stays unknown: `spec_from_config` returns None.
"""

from __future__ import annotations

import fnmatch
import math
import re
from dataclasses import dataclass, replace
from typing import Any

FP8_SCALE_BYTES = 4  # weight_scale_inv / weight_scale are float32
BNB_BLOCK = 64  # bitsandbytes' 4-bit blocksize
BNB_NESTED_BLOCK = 256  # double quantization: one float32 per 256 absmax bytes


@dataclass(frozen=True)
class QuantSpec:
    """How one checkpoint stores its quantized linear layers."""

    method: str  # fp8 | compressed-tensors | gptq | awq | auto-round | bitsandbytes | nvfp4 | mxfp4 | mxfp8
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
    g_idx: bool = False  # GPTQ's int32 g_idx per input column
    global_scales: int = 0  # float32 scalars per tensor (NVFP4's weight and input global scales)
    transform: int = 0  # FP-Quant: the Hadamard block; two such bf16 matrices per layer
    # per-module layouts (a glob, a module or a prefix of one -> its layout; None: kept 16-bit)
    overrides: tuple[tuple[str, QuantSpec | None], ...] = ()
    only_listed: bool = False  # modules no override names stay 16-bit (ModelOpt MIXED_PRECISION)

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


MICROSCALED = ("nvfp4", "mxfp4", "mxfp8")


def matrix_bytes(spec: QuantSpec, rows: int, cols: int) -> int:
    """Bytes of one quantized `rows x cols` linear weight with its scales, zeros and indices."""
    n = rows * cols
    method = spec.method
    if method == "fp8":
        if spec.block:
            b0, b1 = spec.block
            scales = math.ceil(rows / b0) * math.ceil(cols / b1) * FP8_SCALE_BYTES
        elif spec.group_size is None:  # one float32 per row (output channel)
            scales = rows * FP8_SCALE_BYTES + (FP8_SCALE_BYTES if spec.static_activations else 0)
        else:
            scales = FP8_SCALE_BYTES * (2 if spec.static_activations else 1)
        return n + scales
    if method in MICROSCALED:
        group = spec.group_size or 32
        codes = math.ceil(n * spec.bits / 8)
        hadamard = 2 * spec.transform * spec.transform * 2
        return codes + math.ceil(n / group) * spec.scale_bytes + spec.global_scales * 4 + hadamard
    if method == "bitsandbytes":
        if spec.bits == 8:
            return n + rows * 4  # int8 codes + float32 SCB per row
        blocks = math.ceil(n / BNB_BLOCK)
        if spec.double_quant:
            return math.ceil(n / 2) + blocks + math.ceil(blocks / BNB_NESTED_BLOCK) * 4
        return math.ceil(n / 2) + blocks * 4
    groups = _groups_per_row(spec, cols)
    codes = math.ceil(n * spec.bits / 8)
    if method in ("gptq", "awq", "auto-round"):
        zeros = math.ceil(groups * rows * spec.bits / 8)
        g_idx = cols * 4 if spec.g_idx else 0
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


# A multimodal checkpoint names its text model's modules under language_model; vramtui's names are the text
# model's own (model.layers.N...).
_LANGUAGE_PREFIXES = ("model.language_model.", "language_model.model.", "language_model.")


def _text_name(name: str) -> str:
    for prefix in _LANGUAGE_PREFIXES:
        if name.startswith(prefix):
            return "model." + name[len(prefix) :]
    return name


def _names_module(pattern: str, module: str) -> bool:
    """A glob, the module itself, or a module that contains it (`...mlp.experts` names every expert)."""
    pattern = _text_name(pattern)
    if any(c in pattern for c in "*?["):
        return fnmatch.fnmatchcase(module, pattern) or fnmatch.fnmatchcase(module, pattern + ".*")
    return module == pattern or module.startswith(pattern + ".")


def spec_for_module(spec: QuantSpec, module: str) -> QuantSpec | None:
    """The layout `module` is stored in: the config's own, a per-module one, or None (kept 16-bit)."""
    for pattern, layout in spec.overrides:
        if _names_module(pattern, module):
            return layout
    if spec.only_listed or is_skipped(spec, module):
        return None
    return spec


def is_skipped(spec: QuantSpec, module: str) -> bool:
    """Whether the config keeps `module` (a dotted HF module name) unquantized."""
    for pattern in spec.skip:
        if spec.skip_style == "glob":
            if _names_module(pattern, module):
                return True
        elif spec.skip_style == "ct":
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
        g_idx=method == "gptq",
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
    if bits == 4 and kind == "float":
        return _ct_float4(qc, chosen, strategy, groups)
    if bits not in (4, 8) or strategy in ("block", "tensor_group"):
        return None  # other schemes: not laid out here
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


def _ct_float4(qc: dict[str, Any], weights: dict[str, Any], strategy: str, groups: dict) -> QuantSpec:
    """compressed-tensors' NVFP4 (`tensor_group`, groups of 16, e4m3 scales and a float32 global scale, a
    second one for the activations when they are quantized) and MXFP4 (groups of 32, e8m0 scales)."""
    group = _positive(weights.get("group_size"), 16 if strategy == "tensor_group" else 32)
    activations = any(isinstance(g, dict) and g.get("input_activations") for g in groups.values())
    nvfp4 = strategy == "tensor_group" or group == 16
    return QuantSpec(
        "nvfp4" if nvfp4 else "mxfp4",
        bits=4,
        kind="float",
        group_size=group,
        scale_bytes=1,
        global_scales=(2 if activations else 1) if nvfp4 else 0,
        skip=_names(qc, "ignore"),
        skip_style="ct",
        quantizes_router=True,
        quantizes_lm_head=True,
        name="nvfp4" if nvfp4 else "mxfp4",
    )


def _nvfp4(group: int = 16, activations: bool = True, **fields: Any) -> QuantSpec:
    return QuantSpec(
        "nvfp4",
        bits=4,
        kind="float",
        group_size=group,
        scale_bytes=1,
        global_scales=2 if activations else 1,
        name="nvfp4",
        **fields,
    )


def _modelopt_algo(algo: str, group: Any, skip: tuple[str, ...] = ()) -> QuantSpec | None:
    """One ModelOpt `quant_algo` as its export writes the tensors."""
    algo = algo.upper()
    common: dict[str, Any] = {"skip": skip, "skip_style": "glob"}
    if algo in ("NVFP4", "W4A16_NVFP4", "NVFP4_AWQ"):
        return _nvfp4(_positive(group, 16), activations=algo != "W4A16_NVFP4", **common)
    if algo == "MXFP8":
        return QuantSpec("mxfp8", bits=8, kind="float", group_size=32, scale_bytes=1, name="mxfp8", **common)
    if algo in ("FP8", "FP8_PER_CHANNEL_PER_TOKEN", "FP8_PB_WO"):
        fields: dict[str, Any] = {"group_size": 0, "static_activations": algo == "FP8"}
        if algo == "FP8_PER_CHANNEL_PER_TOKEN":
            fields["group_size"] = None
        if algo == "FP8_PB_WO":
            fields["block"] = (128, 128)
        return QuantSpec("fp8", bits=8, kind="float", name="fp8", **fields, **common)
    return None


def _modelopt(qc: dict[str, Any]) -> QuantSpec | None:
    """ModelOpt's unified checkpoint: config.json's quantization_config or hf_quant_config.json's
    `quantization` (the same keys)."""
    body = qc.get("quantization") if isinstance(qc.get("quantization"), dict) else qc
    algo = str(body.get("quant_algo") or "").upper()
    skip = _names(body, "exclude_modules", "ignore")
    if algo == "MIXED_PRECISION":
        layers = body.get("quantized_layers")
        if not isinstance(layers, dict) or not layers:
            return None
        overrides = []
        for module, cfg in layers.items():
            cfg = cfg if isinstance(cfg, dict) else {}
            layout = _modelopt_algo(str(cfg.get("quant_algo", "")), cfg.get("group_size"))
            if layout is None:
                return None  # an algorithm not laid out here: the whole checkpoint stays unknown
            overrides.append((str(module), layout))
        names = [layout.name for _, layout in overrides if layout]
        main = max(set(names), key=names.count)
        return QuantSpec(
            "modelopt", bits=4 if main == "nvfp4" else 8, kind="float", overrides=tuple(overrides),
            only_listed=True, skip=skip, skip_style="glob", name=main,
        )  # fmt: skip
    return _modelopt_algo(algo, body.get("group_size"), skip)


def _auto_round_layout(qc: dict[str, Any], skip: tuple[str, ...] = ()) -> QuantSpec | None:
    bits = _positive(qc.get("bits"), 4)
    if bits >= 16:
        return None
    data_type = str(qc.get("data_type") or "int").lower()
    group = qc.get("group_size", 128)
    if "nv_fp" in data_type or data_type.startswith("nvfp"):
        return _nvfp4(16, activations=_positive(qc.get("act_bits"), 16) <= 8, skip=skip)
    if "mx_fp" in data_type or data_type.startswith("mxfp"):
        name = "mxfp4" if bits == 4 else "mxfp8"
        return QuantSpec(name, bits=bits, kind="float", group_size=32, scale_bytes=1, skip=skip, name=name)
    if data_type != "int":
        return None
    packing = str(qc.get("packing_format") or qc.get("backend") or "auto_round:auto_gptq").lower()
    group_size = None if group == -1 else _positive(group, 128)
    suffix = f"-g{group_size}" if group_size else "-g-1"
    return QuantSpec(
        "auto-round",
        bits=bits,
        group_size=group_size,
        symmetric=bool(qc.get("sym", True)),
        skip=skip,
        g_idx="gptqmodel" in packing,
        name=f"gptq{suffix}" if bits == 4 else f"gptq-{bits}bit{suffix}",
    )


def _auto_round(qc: dict[str, Any]) -> QuantSpec | None:
    """AutoRound's export: the GPTQ / AWQ packing or NVFP4 / MXFP, and `extra_config`'s modules their own."""
    base = _auto_round_layout(qc)
    if base is None:
        return None
    overrides = []
    extra = qc.get("extra_config")
    for module, cfg in extra.items() if isinstance(extra, dict) else ():
        if isinstance(cfg, dict):
            overrides.append((str(module), _auto_round_layout({**qc, **cfg})))
    return replace(base, overrides=tuple(overrides))


def _fp_quant(qc: dict[str, Any]) -> QuantSpec | None:
    """FP-Quant (vLLM's FPQuantConfig keys): MXFP4 or NVFP4 codes, two float32 global scales and the forward
    and backward Hadamard matrices per layer; a pseudo-quantized checkpoint (16-bit weights) is not laid out."""
    if qc.get("pseudoquantization") or qc.get("store_master_weights"):
        return None
    nvfp4 = "nvfp4" in str(qc.get("forward_dtype", "mxfp4")).lower()
    return QuantSpec(
        "nvfp4" if nvfp4 else "mxfp4",
        bits=4,
        kind="float",
        group_size=16 if nvfp4 else 32,
        scale_bytes=1,
        global_scales=2,
        transform=_positive(qc.get("hadamard_group_size"), 32),
        skip=_names(qc, "modules_to_not_convert"),
        name="nvfp4" if nvfp4 else "mxfp4",
    )


_MARLIN = {"gptq_marlin": "gptq", "marlin": "gptq", "awq_marlin": "awq"}
_MODELOPT = ("modelopt", "modelopt_fp4", "modelopt_fp8", "modelopt_mxfp8", "modelopt_mixed")
_AUTO_ROUND = ("auto-round", "auto_round", "intel/auto-round", "inc")


def spec_from_config(qc: Any) -> QuantSpec | None:
    """The layout a `quantization_config` describes; None when there is none or vramtui does not know it."""
    if not isinstance(qc, dict):
        return None
    method = str(qc.get("quant_method", "")).lower()
    method = _MARLIN.get(method, method)
    if method in ("fp8", "fbgemm_fp8"):
        return _fp8(qc)
    if method in ("gptq", "awq"):
        return _gptq_awq(method, qc)
    if method in _MODELOPT:
        return _modelopt(qc)
    if method in _AUTO_ROUND:
        return _auto_round(qc)
    if method == "fp_quant":
        return _fp_quant(qc)
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
            scale_bytes=1,
            skip=_names(qc, "modules_to_not_convert"),
            experts_only=True,
            name="mxfp4",
        )
    return None


def with_expert_dtype(spec: QuantSpec | None, expert_dtype: Any) -> QuantSpec | None:
    """A config's `expert_dtype` beside its quantization_config (DeepSeek-V4: "fp4", the routed experts
    in FP4 with a ue8m0 scale per 32 weights, as MXFP4 stores them; the rest as the config says)."""
    if spec is None or str(expert_dtype).lower() not in ("fp4", "mxfp4"):
        return spec
    experts = spec_from_config({"quant_method": "mxfp4"})
    assert experts is not None
    return replace(
        spec, overrides=(("*.mlp.experts.*", replace(experts, experts_only=False)), *spec.overrides)
    )


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
    if key in ("nvfp4", "mxfp8"):
        return _modelopt_algo(key, None, ("lm_head",))
    return None
