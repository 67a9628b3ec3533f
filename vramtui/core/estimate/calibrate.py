"""Calibration from earlier runs: what the runs vramtui launched on this machine measured.

The launcher keeps a record of every run it starts (core/launch/runrecord.py writes it into the run store,
`<data dir>/runs/*.run.json`, beside the run logs): the device, the engine and its build, the model, the
settings, the buffers the engine printed (`bill_from_figures`), the estimate at those settings, and the
sampled peak. From the records of the same engine build on the same device two residual terms follow,
neither of which the engines print:

- the runtime overhead: the sampled peak minus every buffer the engine printed there (on a GPU the CUDA
  context and the library workspaces; on the CPU the process's own code, threads and allocator);
- the compute-buffer ratio: the compute buffer the engine printed over the one the estimator sized.

`Calibration.apply` puts them into an estimate's bill at the place the breakdown lives (device 0, or the
host for a CPU-only run), so every solver and the grid see them. No record, no change.
"""

from __future__ import annotations

import json
import os
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vramtui.core.memory.parts import HOST

RECORD_VERSION = 1
RECORD_SUFFIX = ".run.json"
CPU_DEVICE = "cpu"
# A compute ratio past these is a record of another shape of run (or a parse gone wrong), not a correction.
RATIO_BOUNDS = (0.25, 4.0)


def data_dir() -> Path:
    """vramtui's data folder: $VRAMTUI_DATA_DIR, else the platform's user data dir."""
    named = os.environ.get("VRAMTUI_DATA_DIR")
    if named:
        return Path(named).expanduser()
    import platformdirs

    return Path(platformdirs.user_data_dir("vramtui"))


def runs_dir() -> Path:
    """Where run logs and their records are kept."""
    return data_dir() / "runs"


def save_record(record: dict[str, Any], stem: str, folder: Path | None = None) -> Path | None:
    """Write one run's record (atomically); None when the store cannot be written (never an error)."""
    target = (folder or runs_dir()) / f"{stem}{RECORD_SUFFIX}"
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        temporary = target.with_name(target.name + ".tmp")
        temporary.write_text(json.dumps(record, indent=1, default=str), encoding="utf-8")
        temporary.replace(target)
    except OSError:
        return None
    return target


def _valid(record: Any) -> str | None:
    """Why a parsed file is no run record (None: it is one)."""
    if not isinstance(record, dict):
        return "not a JSON object"
    if record.get("version") != RECORD_VERSION:
        return f"version {record.get('version')!r}, not {RECORD_VERSION}"
    for key in ("device", "engine", "printed", "peak"):
        if not isinstance(record.get(key), dict):
            return f"no {key!r} object"
    return None


def load_records(folder: Path | None = None) -> tuple[list[dict[str, Any]], list[str]]:
    """Every run record in the store, oldest first, and a note per file that is not one (ignored)."""
    folder = folder or runs_dir()
    records: list[dict[str, Any]] = []
    notes: list[str] = []
    try:
        files = sorted(folder.glob(f"*{RECORD_SUFFIX}"))
    except OSError:
        return [], []
    for path in files:
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as error:
            notes.append(f"ignored {path.name}: unreadable run record ({type(error).__name__})")
            continue
        why = _valid(record)
        if why:
            notes.append(f"ignored {path.name}: not a run record ({why})")
            continue
        records.append(record)
    records.sort(key=lambda r: float(r.get("time") or 0))
    return records, notes


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def runtime_residual(record: dict[str, Any]) -> int | None:
    """Sampled peak minus every buffer the engine printed at the run's place (None: not measurable)."""
    place = str(record.get("place") or (HOST if record["device"].get("name") == CPU_DEVICE else "0"))
    peak = _number(record["peak"].get("bytes"))
    printed = record["printed"].get("bill", {}).get(place)
    if not record.get("ready") or not peak or not isinstance(printed, dict):
        return None
    values = [_number(v) for v in printed.values()]
    if not values or any(v is None for v in values):
        return None
    residual = int(peak - sum(v for v in values if v is not None))
    # A peak under the printed buffers says the sample could not see them whole (a mapped model file's
    # pages not yet resident, a short run sampled before it touched them): it measures no runtime at all.
    return residual if residual >= 0 else None


def compute_ratio(record: dict[str, Any]) -> float | None:
    """Printed compute buffer over the estimated one, at the run's place (None: not both there)."""
    place = str(record.get("place") or "0")
    printed = _number(record["printed"].get("bill", {}).get(place, {}).get("compute_buffer_bytes"))
    estimated = record.get("estimate")
    sized = _number(estimated.get("compute_buffer_bytes")) if isinstance(estimated, dict) else None
    if not record.get("ready") or not printed or not sized:
        return None
    ratio = printed / sized
    return ratio if RATIO_BOUNDS[0] <= ratio <= RATIO_BOUNDS[1] else None


@dataclass
class Calibration:
    """The residual terms measured on earlier runs of one engine build on one device."""

    device: str
    backend: str
    build: str | None  # the build's identity (binary path, size, time; a package's version)
    runs: int  # records the terms come from
    runtime_bytes: int | None = None  # the median runtime residual (None: no run measured it)
    compute_ratio: float | None = None  # the median printed / estimated compute buffer
    label: str | None = None  # the build as people read it: "llama-server build 1a2b3c4d"
    notes: list[str] = field(default_factory=list)

    @property
    def place(self) -> int | str:
        return HOST if self.device == CPU_DEVICE else 0

    def apply(self, est: Any) -> None:
        """The terms into an estimate's bill at its place, and the totals and verdict that follow."""
        if est.place != self.place:
            return  # a CPU record says nothing of a GPU run, nor the other way round
        slot = est.bill.places.setdefault(est.place, {})
        delta = 0
        if self.runtime_bytes is not None:
            new = self.runtime_bytes
            delta += new - slot.get("runtime", 0)
            slot["runtime"] = new
            est.overhead_bytes = new
        if self.compute_ratio is not None and slot.get("compute"):
            new = round(slot["compute"] * self.compute_ratio)
            delta += new - slot["compute"]
            est.activations_bytes += new - slot["compute"]
            est.compute_buffer_bytes = round(est.compute_buffer_bytes * self.compute_ratio)
            slot["compute"] = new
        est.total_bytes += delta
        if est.device == "host":
            est.host_bytes_needed += delta
        if est.reason is None and est.load_peak_fits is not False:
            est.fits = est.total_bytes <= est.usable_bytes

    def describe(self) -> str:
        from vramtui.core.units import format_bytes

        build = f", {self.label}" if self.label else ""
        terms = []
        if self.runtime_bytes is not None:
            terms.append(f"runtime {format_bytes(self.runtime_bytes)} measured")
        if self.compute_ratio is not None:
            terms.append(f"compute buffers x{self.compute_ratio:.3f}")
        what = f": {', '.join(terms)}" if terms else ""
        return f"calibrated from {self.runs} run{'s' if self.runs != 1 else ''} on {self.device} ({self.backend}{build}){what}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "runs": self.runs,
            "device": self.device,
            "engine": {"backend": self.backend, "build": self.build, "label": self.label},
            "terms": {"runtime_bytes": self.runtime_bytes, "compute_ratio": self.compute_ratio},
            "notes": list(self.notes),
        }


_OFF = {"off", "false", "0", "disabled", "no"}


def flash_bucket(value: Any) -> str:
    """Flash attention as a run was asked for it: "off", else "on" (on, or unset/auto, which llama.cpp
    resolves to on wherever it can). A compute buffer with it off holds the context x micro-batch scores:
    a ratio learned on one side is no correction on the other (QA: x0.926 from flash-attention runs moved
    a -fa off estimate away from the engine's figure)."""
    return "off" if str(value).strip().lower() in _OFF else "on"


def derive(
    records: Iterable[dict[str, Any]], device: str, backend: str, flash: Any = None
) -> Calibration | None:
    """The terms from the records of `backend` on `device`, of the build its latest run used; the compute
    ratio from the runs whose flash attention was asked for as `flash` is."""
    mine = [r for r in records if r["device"].get("name") == device and r["engine"].get("backend") == backend]
    if not mine:
        return None
    build = mine[-1]["engine"].get("build")
    same = [r for r in mine if r["engine"].get("build") == build]
    residuals = [v for v in map(runtime_residual, same) if v is not None]
    alike = [
        r for r in same if flash_bucket((r.get("settings") or {}).get("flash_attn")) == flash_bucket(flash)
    ]
    ratios = [v for v in map(compute_ratio, alike) if v is not None]
    used = sum(1 for r in same if runtime_residual(r) is not None or compute_ratio(r) is not None)
    if not used:
        return None
    return Calibration(
        device=device,
        backend=backend,
        build=build,
        runs=used,
        runtime_bytes=int(statistics.median(residuals)) if residuals else None,
        compute_ratio=round(statistics.median(ratios), 4) if ratios else None,
        label=mine[-1]["engine"].get("label"),
    )


def device_now(on_gpu: bool) -> str | None:
    """The device an estimate is for on this machine: 'cpu', or the first GPU NVML sees (None: none)."""
    if not on_gpu:
        return CPU_DEVICE
    from vramtui.core.memory.sampling import NvmlSource

    source = NvmlSource()
    try:
        sample = source.sample()
        gpus = [g for g in getattr(sample, "gpus", ()) or () if g.error is None]
        return gpus[0].name if gpus else None
    except Exception:  # no NVML, no driver: nothing to calibrate against
        return None
    finally:
        source.close()


NOT_CALIBRATED = (
    "not calibrated by earlier {backend} runs: the engine's memory follows its own profiling run and share, "
    "which the estimate models directly; what the runs on record measured is not added as a correction"
)


def calibration_for(settings: Any, folder: Path | None = None) -> tuple[Calibration | None, list[str]]:
    """The calibration for an estimate with these settings on this machine, and notes on the store."""
    records, notes = load_records(folder)
    if settings.memory.kv_from_budget:
        # vLLM sizes its KV cache from its own profiling run: there is no residual to add; said where
        # earlier runs of it are on record, which a user expects to count (QA 14)
        if any(r["engine"].get("backend") == settings.backend for r in records):
            notes = [*notes, NOT_CALIBRATED.format(backend=settings.backend)]
        return None, notes
    if not records:
        return None, notes
    device = device_now(settings.on_gpu)
    if device is None:
        return None, notes
    found = derive(records, device, settings.backend, settings.flash_attn)
    if found is not None:
        found.notes = notes
    return found, notes


_NOW: dict[tuple[Any, ...], tuple[Calibration | None, list[str]]] = {}


def calibration_now(settings: Any) -> tuple[Calibration | None, list[str]]:
    """`calibration_for`, kept until the store changes (a new record changes its folder's mtime): the
    estimator pane asks on every keystroke, and reading the store and NVML each time would lag it."""
    folder = runs_dir()
    try:
        stamp = folder.stat().st_mtime_ns
    except OSError:
        stamp = None
    key = (
        str(folder),
        stamp,
        settings.backend,
        settings.on_gpu,
        settings.memory.kv_from_budget,
        flash_bucket(settings.flash_attn),
    )
    if key not in _NOW:
        _NOW.clear()
        _NOW[key] = calibration_for(settings)
    return _NOW[key]
