"""Which quantization x context fits, before downloading: a grid of the estimator's own answers.

Rows are quantizations: the GGUF files of the same model found beside it (its folder, its Hugging Face
cache repo), else the usual ones for the engine (its accounting's `typical_quants`). Columns are contexts
per sequence from 4k up to the trained length. Each cell is the estimate at that context with the
sequences asked for (`fits`, `total_bytes`) and the largest concurrency at that context
(`estimator.max_parallel`). Nothing here sizes memory itself: every figure is an estimator call with
`Settings.quant` set to the row's type, or the row's own file loaded.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from vramtui.core.backends import get_backend
from vramtui.core.errors import VramtuiError
from vramtui.core.estimate import quant as q
from vramtui.core.estimate.estimator import (
    MAX_PARALLEL_SEARCH,
    Settings,
    cap_note,
    max_parallel,
    sequence_cap,
    size,
    sizing_memo,
)
from vramtui.core.estimate.modelinfo import ModelInfo, load_model_info

FIRST_CONTEXT = 4096
# With no trained length in the files, the columns stop here (a guess would only add noise).
UNKNOWN_TRAINED_LIMIT = 32768
# The usual GGUF file types people download (what llama.cpp's accounting offers when no file is beside).
TYPICAL_GGUF = ("q2_k", "q3_k_m", "q4_k_m", "q5_k_m", "q6_k", "q8_0", "f16")


@dataclass
class Cell:
    context: int  # tokens per sequence
    fits: bool  # at the sequences asked for (Table.parallel)
    max_parallel: int  # sequences of this context that fit at once (0: not even one)
    total_bytes: int  # the estimate's total at Table.parallel sequences

    def to_dict(self) -> dict[str, Any]:
        return {
            "context": self.context,
            "fits": self.fits,
            "max_parallel": self.max_parallel,
            "total_bytes": self.total_bytes,
        }


@dataclass
class Row:
    quant: str
    # "file": a file on disk; "config": the checkpoint its config.json describes (not on disk);
    # "typical": the model's shape at a usual type (not on disk)
    source: str
    file: str | None
    weights_bytes: int  # every weight, device and host
    cells: list[Cell] = field(default_factory=list)
    loaded_dtype: str | None = None  # the width the engine runs the file's weights in, where not its own
    # The quantization the file's name gives, as written (UD-Q4_K_XL, Q6_K_L): the header's `quant` need not
    # say it (Unsloth's UD-Q4_K_XL is a Q4_K_M file), and it is how the user finds the file (QA 18 F15)
    name: str | None = None

    @property
    def label(self) -> str:
        """The type as the table shows it: "f32→bf16" for an f32 file that vLLM runs in bf16 (QA 16)."""
        shown = self.name or self.quant
        return f"{shown}→{self.loaded_dtype}" if self.loaded_dtype else shown

    def to_dict(self) -> dict[str, Any]:
        return {
            "quant": self.quant,
            "name": self.name,
            "loaded_dtype": self.loaded_dtype,
            "source": self.source,
            "file": self.file,
            "weights_bytes": self.weights_bytes,
            "cells": [cell.to_dict() for cell in self.cells],
        }


@dataclass
class Table:
    contexts: list[int]
    rows: list[Row]
    parallel: int
    elapsed_s: float = 0.0
    notes: list[str] = field(default_factory=list)
    parallel_asked: bool = False  # `parallel` was given; else 1, whatever the engine's default

    def to_dict(self) -> dict[str, Any]:
        return {
            "contexts": list(self.contexts),
            "parallel": self.parallel,
            "parallel_asked": self.parallel_asked,
            "rows": [row.to_dict() for row in self.rows],
            "cells": sum(len(row.cells) for row in self.rows),
            "elapsed_ms": round(self.elapsed_s * 1000, 1),
            "notes": list(self.notes),
        }


def grid_contexts(info: ModelInfo, first: int = FIRST_CONTEXT) -> list[int]:
    """4k, 8k, 16k ... doubling up to the trained length, which ends the list when it is no power of two."""
    limit = info.max_context or UNKNOWN_TRAINED_LIMIT
    if limit < first:
        return [limit]
    contexts = []
    context = first
    while context <= limit:
        contexts.append(context)
        context *= 2
    if contexts[-1] != limit:
        contexts.append(limit)
    return contexts


def _same_model(a: ModelInfo, b: ModelInfo) -> bool:
    """Another quantization of the same network: the same architecture and shape."""
    shape = ("arch", "n_layers", "hidden", "n_heads", "n_kv_heads", "vocab", "n_experts")
    return all(getattr(a, name) == getattr(b, name) for name in shape)


def _candidate_files(model: Path) -> list[Path]:
    """GGUF files beside `model`: its folder, and every snapshot of its Hugging Face cache repo."""
    folders = [model.parent]
    parts = model.resolve().parts if model.exists() else model.parts
    if "snapshots" in parts:  # .../models--org--name/snapshots/<rev>/file.gguf
        index = len(parts) - 1 - parts[::-1].index("snapshots")
        snapshots = Path(*parts[: index + 1])
        folders += sorted(p for p in snapshots.iterdir() if p.is_dir() and p not in folders)
    files: list[Path] = []
    for folder in folders:
        for path in sorted(folder.glob("*.gguf")):
            split = "-of-" in path.stem and "-00001-of-" not in path.stem
            if not split and path.name not in {f.name for f in files}:
                files.append(path)
    return files


def quant_files(model: Path, info: ModelInfo) -> list[tuple[Path, ModelInfo]]:
    """The GGUF files of the same model beside it, one per quantization, the model's own first: one per
    name the files give (Unsloth's UD-Q4_K_XL and a plain Q4_K_M are two, though both headers say
    Q4_K_M), else per header file type."""
    found: list[tuple[Path, ModelInfo]] = [(model, info)]
    seen = {file_label(model, info).lower()}
    for path in _candidate_files(model):
        if path.resolve() == model.resolve():
            continue
        try:
            other = load_model_info(path)
        except Exception:  # an unreadable neighbour (a projector, a partial download) is no row
            continue
        label = file_label(path, other).lower()
        if label not in seen and _same_model(info, other):
            found.append((path, other))
            seen.add(label)
    return found


def file_label(path: Path, info: ModelInfo) -> str:
    """A file's row: the quantization its name gives, as written (UD-Q4_K_XL, Q6_K_L), else its header's."""
    return q.quant_in_name(path, as_written=True) or info.quant or info.dtype


def _row_cells(
    info: ModelInfo, settings: Settings, contexts: list[int], parallel: int, refusals: dict[str, None]
) -> list[Cell]:
    """One row's cells. Concurrency only falls as the context grows, so each cell's search is bounded
    by the cell before it (and a context where not one sequence fits ends the searches). A run the engine
    refuses (more sequences than it runs) fits nowhere, whatever memory holds: its words go to `refusals`."""
    memory = settings.memory
    refused = get_backend(settings.backend).sequence_refusal(settings.parallel, None)
    # no more than the engine runs at once (llama.cpp: 256; vLLM: --max-num-seqs), whatever memory holds
    cap = sequence_cap(settings)
    cells, limit = [], cap or MAX_PARALLEL_SEARCH
    for context in contexts:
        whole = context if memory.context_is_per_sequence else context * parallel
        est = size(info, replace(settings, context=whole, parallel=parallel))
        most = max_parallel(info, replace(settings, context=context, parallel=1), limit=limit) if limit else 0
        most = min(most, cap) if cap else most  # a KV pool's count (vLLM) is not bounded by `limit`
        limit = most
        refusal = est.reason if est.refused else refused
        if refusal:
            refusals[refusal] = None
        cells.append(Cell(context, est.fits and refusal is None, most, est.total_bytes))
    return cells


def _all_weights(info: ModelInfo, settings: Settings) -> tuple[int, str | None]:
    """The row's weights, device and host, and the width the engine runs them in where not the file's."""
    est = size(info, replace(settings, context=FIRST_CONTEXT, parallel=1))
    return est.bill.get("weights") + est.bill.get("weights", "host"), est.loaded_dtype


def _key(quant: str) -> str:
    """A row's quantization as the typical rows name it (a file's "Q4_K_M" is the typical q4_k_m)."""
    try:
        return q.normalize_quant(quant)
    except VramtuiError:
        return quant.lower()


def _rows_to_size(
    info: ModelInfo, settings: Settings, model_path: Path | None
) -> list[tuple[str, str, str | None, ModelInfo, str | None]]:
    """(quant, source, file, info, the --quant to apply) per row."""
    rows: list[tuple[str, str, str | None, ModelInfo, str | None]] = []
    if model_path is not None and info.weights_source == "gguf":
        for path, other in quant_files(model_path, info):
            rows.append((other.quant or other.dtype, "file", str(path), other, None))
    elif model_path is not None and info.weights_source != "params":
        rows.append((info.quant or info.dtype, "file", str(model_path), info, None))
    if len(rows) > 1:
        return rows  # other quantizations are on disk: those are the choice
    own = {_key(row[0]) for row in rows}
    if not rows and info.quant and info.quant_spec is not None and not settings.memory.places_layers:
        # a config.json that declares its quantization (gpt-oss's MXFP4, an FP8 or AWQ release): vLLM and
        # transformers load that checkpoint as published, so it is a row of its own, sized as it stands
        rows.append((info.quant, "config", None, info, None))
        own.add(info.quant)
    typical = list(settings.memory.typical_quants)
    if not settings.memory.places_layers and info.dtype in ("f16", "bf16"):
        typical.insert(0, info.dtype)  # the checkpoint as published comes first
    for name in typical:
        key = q.normalize_quant(name)
        if key not in own:
            rows.append((key, "typical", None, info, key))
            own.add(key)
    return rows


def build_table(
    info: ModelInfo,
    settings: Settings,
    model_path: str | Path | None = None,
    contexts: list[int] | None = None,
) -> Table:
    """The grid for a model: rows of quantizations, columns of contexts (see the module's docstring)."""
    started = time.perf_counter()
    contexts = contexts or grid_contexts(info)
    if any(c <= 0 for c in contexts):
        raise VramtuiError("the grid's contexts must be positive")
    parallel = settings.parallel or 1
    path = Path(model_path).expanduser() if model_path else None
    table = Table(contexts=contexts, rows=[], parallel=parallel, parallel_asked=settings.parallel is not None)
    refusals: dict[str, None] = {}  # what the engine refuses, in its words, once each
    if not info.max_context:
        table.notes.append(
            f"the model does not say its trained length: contexts up to {UNKNOWN_TRAINED_LIMIT:,}"
        )
    with sizing_memo():  # each row's weights are sized once, not once per estimate
        for quant, source, file, row_info, applied in _rows_to_size(info, settings, path):
            row_settings = replace(settings, quant=applied)
            cells = _row_cells(row_info, row_settings, contexts, parallel, refusals)
            weights, loaded = _all_weights(row_info, row_settings)
            name = q.quant_in_name(file, as_written=True) if file and source == "file" else None
            table.rows.append(Row(quant, source, file, weights, cells, loaded, name))
    table.rows.sort(key=lambda row: row.weights_bytes)
    table.notes.extend(refusals)
    cap = sequence_cap(settings)
    if cap and any(cell.max_parallel >= cap for row in table.rows for cell in row.cells):
        table.notes.append(cap_note(settings, cap))
    table.elapsed_s = time.perf_counter() - started
    return table
