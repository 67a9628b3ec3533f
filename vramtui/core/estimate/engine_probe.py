"""Ask llama.cpp itself: a dry run that sizes every buffer without allocating it.

llama.cpp's model parameter `no_alloc` ("only load metadata and simulate memory allocations", what its
`--fit` uses) loads the tensor table without reading weights and reserves the compute graph without
allocating; with it the log still prints the KV cache size and the compute buffers per device, and
`llama_model_size` gives the weights. It needs `load_mode = 0` (with mmap it asserts), and an assert in C
kills the whole process, so the probe runs in a child process and reports JSON on stdout.

Where llama-cpp-python is missing, `probe_llama_cpp` returns None and callers keep the arithmetic.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vramtui.core.memory.parts import HOST, MemoryBill, bill_from_figures
from vramtui.core.units import MIB

_PROBE = r"""
import json, sys
import llama_cpp as L
args = json.loads(sys.argv[1])
L.llama_backend_init()
mp = L.llama_model_default_params()
mp.no_alloc = True
mp.load_mode = 0
mp.n_gpu_layers = args["gpu_layers"]
model = L.llama_model_load_from_file(args["path"].encode(), mp)
if not model:
    print(json.dumps({"error": "llama.cpp could not load the model"})); sys.exit(0)
cp = L.llama_context_default_params()
cp.n_ctx = args["context"]; cp.n_batch = args["batch"]; cp.n_ubatch = args["ubatch"]
cp.n_seq_max = args["parallel"]; cp.flash_attn_type = args["flash"]
cp.type_k = args["kv_type"]; cp.type_v = args["kv_type"]
ctx = L.llama_init_from_model(model, cp)
print(json.dumps({"model_bytes": int(L.llama_model_size(model)), "context_ok": bool(ctx)}))
sys.stdout.flush()
"""

# The KV cache's "size =" lines, summed: an iSWA model prints one per cache, and the log diagnosis's
# figures keep the last cache's only.
# "size =   64.00 MiB (  2048 cells,   4 layers,  4/4 seqs)": cells per stream, then n_seq_max/n_stream
_KV_SIZE = re.compile(
    r"llama_kv_cache(?:_iswa)?: size =\s*([\d.]+) MiB \(\s*(\d+) cells(?:,\s*\d+ layers,\s*\d+/(\d+) seqs)?"
)
_COMPUTE = "compute_buffer."


@dataclass
class EngineFigures:
    """What llama.cpp says it would allocate (bytes; MiB-rounded where they come from its log)."""

    model_bytes: int  # llama_model_size(): every tensor the model holds
    kv_bytes: int
    kv_cells: int
    compute_bytes: dict[str, int] = field(default_factory=dict)  # per buffer type: CPU, CUDA0, CUDA_Host
    output_bytes: int = 0
    context_ok: bool = True
    log_tail: list[str] = field(default_factory=list)
    # The buffers as printed, by place and part (the log diagnosis's figures, `parts.bill_from_figures`).
    bill: MemoryBill = field(default_factory=MemoryBill)

    @property
    def compute_total(self) -> int:
        return sum(self.compute_bytes.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "model_bytes": self.model_bytes,
            "kv_bytes": self.kv_bytes,
            "kv_cells": self.kv_cells,
            "compute_bytes": dict(self.compute_bytes),
            "output_bytes": self.output_bytes,
            "context_ok": self.context_ok,
        }


def llama_cpp_available() -> bool:
    try:
        import importlib.util

        return importlib.util.find_spec("llama_cpp") is not None
    except (ImportError, ValueError):
        return False


def _ggml_type(kv_dtype: str) -> int:
    import gguf

    key = {"fp16": "F16", "f16": "F16", "bf16": "BF16", "f32": "F32"}.get(kv_dtype.lower(), kv_dtype.upper())
    return int(gguf.GGMLQuantizationType[key].value)


def probe_bill(stderr: str) -> tuple[MemoryBill, dict[str, int]]:
    """The buffers llama.cpp printed, read by the log diagnosis's figure rules: (the bill by place and
    part, compute bytes per buffer type)."""
    from vramtui.core.logs.diagnose import diagnose_text

    figures = diagnose_text(stderr).engine_figures
    compute = {key[len(_COMPUTE) :]: int(value) for key, value in figures.items() if key.startswith(_COMPUTE)}
    return bill_from_figures(figures), compute


def parse_probe_log(stderr: str) -> tuple[int, int, dict[str, int], int]:
    """(KV bytes, KV cells, compute bytes per buffer type, output bytes) from llama.cpp's log lines."""
    kv_bytes = kv_cells = 0
    for match in _KV_SIZE.finditer(stderr):  # iSWA models print one line per cache
        kv_bytes += round(float(match.group(1)) * MIB)
        # a stream per slot holds its own cells: the cache is their sum (QA 38 F9: "2,048 cells" for 8,192)
        kv_cells = max(kv_cells, int(match.group(2)) * int(match.group(3) or 1))
    bill, compute = probe_bill(stderr)
    output = bill.get("output") + bill.get("output", HOST)
    return kv_bytes, kv_cells, compute, output


def probe_llama_cpp(
    path: str | Path,
    *,
    context: int,
    ubatch: int = 512,
    batch: int = 2048,
    parallel: int = 1,
    flash_attn: bool | None = None,
    kv_dtype: str = "f16",
    gpu_layers: int | None = None,
    timeout_s: float = 120.0,
) -> EngineFigures | None:
    """llama.cpp's own sizing of a GGUF under these settings, or None when it cannot be asked."""
    if not llama_cpp_available():
        return None
    args = {
        "path": str(path),
        "context": int(context),
        "batch": int(max(batch, ubatch)),
        "ubatch": int(ubatch),
        "parallel": int(parallel),
        "flash": -1 if flash_attn is None else int(bool(flash_attn)),
        "kv_type": _ggml_type(kv_dtype),
        "gpu_layers": 999 if gpu_layers is None else int(gpu_layers),
    }
    try:
        result = subprocess.run(
            [sys.executable, "-c", _PROBE, json.dumps(args)],
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
    if result.returncode != 0 or not lines:
        return None
    answer = json.loads(lines[-1])
    if "error" in answer:
        return None
    kv_bytes, kv_cells, compute, output = parse_probe_log(result.stderr)
    return EngineFigures(
        bill=probe_bill(result.stderr)[0],
        model_bytes=int(answer["model_bytes"]),
        kv_bytes=kv_bytes,
        kv_cells=kv_cells,
        compute_bytes=compute,
        output_bytes=output,
        context_ok=bool(answer.get("context_ok")),
        log_tail=result.stderr.splitlines()[-20:],
    )
