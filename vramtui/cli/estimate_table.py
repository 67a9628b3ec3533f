"""`vramtui estimate MODEL --table`: which quantization x context fits (core/estimate/grid.py), as text."""

from __future__ import annotations

from typing import Any

from vramtui.core.units import format_bytes

CELL_WIDTH = 6


def context_label(tokens: int) -> str:
    """4096 -> '4k', 131072 -> '128k', 40960 -> '40k'; a count that is no whole k stays as it is."""
    if tokens % (1 << 20) == 0:
        return f"{tokens >> 20}M"
    if tokens % 1024 == 0:
        return f"{tokens // 1024}k"
    return str(tokens)


def cell_text(cell: Any, parallel: int) -> str:
    """The concurrency that fits; '--' when not one sequence; a trailing '!' when the sequences asked
    for do not fit though one does."""
    if cell.max_parallel <= 0:
        return "--"
    return f"{cell.max_parallel}" + ("" if cell.fits else "!")


def _why_none_fits(est: Any) -> str | None:
    """What keeps the run as asked from fitting whatever its type and context: the estimate's reason, or
    its note on what will not fit (vLLM's CUDA graphs outside the budget)."""
    if est.reason:
        return str(est.reason)
    return next((str(note) for note in est.notes if "would not fit" in note or "will not" in note), None)


def render_table(table: Any, est: Any, calibration_line: str | None = None) -> str:
    """The grid at 80 columns: quant, where it comes from, its weights, then one column per context."""
    width = max([len("quant"), *(len(row.label) for row in table.rows)]) + 2
    usable = f"{format_bytes(est.usable_bytes)} usable of {format_bytes(est.device_bytes)}"
    where = "host RAM" if est.device == "host" else "the GPU"
    if table.parallel_asked:
        asked = f"{table.parallel} sequence{'s' if table.parallel != 1 else ''} asked for"
    else:  # not the engine's default slots: a cell says what fits, whatever the default
        asked = "--parallel not given"
    lines = [
        f"grid      sequences of each context that fit at once in {where}; -- not even one",
        f"          {usable}, {est.backend}, {asked}",
    ]
    flagged = [not cell.fits and cell.max_parallel > 0 for row in table.rows for cell in row.cells]
    if any(flagged):
        lines.append("          ! one sequence fits, the run as asked does not fit or start")
    why = _why_none_fits(est) if flagged and all(flagged) else None
    if why:  # QA 6: every cell marked, and the reason only in plain `estimate`
        lines.append(f"          every cell: {why}")
    lines += [
        "",
    ]
    header = f"  {'quant':<{width}}{'source':<9}{'weights':>11}"
    header += "".join(f"{context_label(c):>{CELL_WIDTH}}" for c in table.contexts)
    lines.append(header)
    for row in table.rows:
        line = f"  {row.label:<{width}}{row.source:<9}{format_bytes(row.weights_bytes):>11}"
        line += "".join(f"{cell_text(cell, table.parallel):>{CELL_WIDTH}}" for cell in row.cells)
        lines.append(line)
    lines.append("")
    files = [row for row in table.rows if row.source == "file"]
    if files and any(row.source == "typical" for row in table.rows):
        lines.append("note      typical rows are this model's shape at that type: not on disk")
    for note in table.notes:
        lines.append(f"note      {note}")
    if calibration_line:
        lines.append(f"calibration {calibration_line}")
    cells = sum(len(row.cells) for row in table.rows)
    lines.append(
        f"computed  {len(table.rows)} rows x {len(table.contexts)} contexts ({cells} cells) in "
        f"{table.elapsed_s * 1000:.0f} ms"
    )
    return "\n".join(lines)


def run_table(args: Any, info: Any, settings: Any, est: Any, calibration: Any = None) -> int:
    """Print the grid (or add it to the JSON); exit 0 when some cell fits, 1 when none does."""
    from vramtui.cli.estimate import render
    from vramtui.core.estimate.grid import build_table

    table = build_table(info, settings, args.model)
    assumed = [note for note in est.notes if note.startswith("no GPU found: sized for")]
    if assumed:  # the grid's cells are for that assumed card too
        table.notes.insert(0, assumed[0])
    from vramtui.cli.common import settle

    status = settle(0 if any(cell.fits for row in table.rows for cell in row.cells) else 1)
    if args.json:
        from vramtui.cli.common import print_json
        from vramtui.cli.estimate import json_out

        out = json_out(args, info, est, None, calibration)
        out["table"] = table.to_dict()
        print_json(out)
    else:
        print(render(info, est).splitlines()[0])
        line = calibration.describe() if calibration is not None else None
        print(render_table(table, est, line))
    return status
