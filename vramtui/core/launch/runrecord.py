"""The record the launcher keeps of every run it starts, for calibration (core/estimate/calibrate.py).

Written when a ModelServer stops, into the run store beside the run logs: the device (the GPU the run's
processes held memory on, else "cpu"), the engine and its build, the model, the settings, the buffers the
engine printed, the estimate at those settings (without calibration), and the sampled peak. A record
that cannot be made or written is skipped: keeping it must never take a run down.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vramtui.core.estimate.calibrate import CPU_DEVICE, RECORD_VERSION, save_record
from vramtui.core.logs.stages import furthest
from vramtui.core.memory.parts import HOST, bill_from_figures

if TYPE_CHECKING:
    from vramtui.core.launch.launcher import ModelServer
    from vramtui.core.launch.profile import Profile


def engine_build(profile: Profile, argv: list[str]) -> tuple[str | None, str | None]:
    """(identity, label) of the engine build a run used: its binary by path, size and modification
    time, with the version of the Python package a `python -m MODULE` launch runs."""
    from vramtui.core.launch.footprint import binary_of

    binary = binary_of(profile)
    if binary is None:
        return None, None
    try:
        stat = binary.stat()
    except OSError:
        return None, None
    identity = f"{binary}:{stat.st_size}:{stat.st_mtime_ns}"
    label = binary.name
    if "-m" in argv[:-1]:
        module = argv[argv.index("-m") + 1].split(".")[0]
        version = _package_version(module)
        if version:
            identity += f":{module}=={version}"
            label = f"{module} {version}"
    read = (
        profile.backend.engine_build_of
    )  # a program in a Python of its own (vLLM's venv): its minor version
    minor = read(binary) if read is not None else None
    if minor is not None and label == binary.name:
        identity += f":0.{minor}"
        label = f"{binary.name} 0.{minor}"  # QA 29 Q14: "vllm build ab051b58", a hash of its launcher only
    versions = [(name, _package_version(name)) for name in profile.backend.version_packages]
    found = [f"{name} {version}" for name, version in versions if version]
    if found:
        identity += "".join(f":{name}=={version}" for name, version in versions if version)
        label = ", ".join(found)
    digest = hashlib.sha1(identity.encode()).hexdigest()[:8]
    return identity, f"{label} build {digest}"


def _package_version(module: str) -> str | None:
    from importlib import metadata

    with contextlib.suppress(Exception):
        for dist in _distributions().get(module, []):
            return metadata.version(dist)
    return None


@functools.cache
def _distributions() -> Mapping[str, list[str]]:
    """Top-level module -> its distributions, read once: the scan of every installed package takes about
    60 ms here, and a run record asks it for the runner and each of its engine's version packages."""
    from importlib import metadata

    return metadata.packages_distributions()


def _printed_bill(figures: dict[str, int], on_gpu: bool) -> dict[str, dict[str, int]]:
    """The printed bill by place. A run with no GPU has one place: a figure printed with no device (the
    transformers runner's "weights loaded ... on cpu") is the host's, not device 0's (QA 11: no runtime
    residual was ever measured, so transformers never calibrated)."""
    places = bill_from_figures(figures).by_place()
    if on_gpu:
        return places
    merged: dict[str, int] = {}
    for parts in places.values():
        for part, value in parts.items():
            merged[part] = merged.get(part, 0) + value
    return {HOST: merged} if merged else {}


def _gpu_of(server: ModelServer) -> dict[str, Any] | None:
    """The GPU the run's processes held memory on (the first), from its own samples."""
    pids = set(server._last_pids) | ({server.pid} if server.pid else set())
    for sample in reversed(server.samples):
        for gpu in getattr(sample, "gpus", ()) or ():
            if any(pid in pids and used for pid, used in gpu.process_bytes.items()):
                return {"name": gpu.name, "total_bytes": gpu.total_bytes, "index": gpu.index}
    return None


def _estimate_at(profile: Profile, on_gpu: bool) -> dict[str, int] | None:
    """The estimator's bill at the run's settings, uncalibrated (what a compute ratio compares with)."""
    from vramtui.core.backends.base import sizing_params
    from vramtui.core.estimate.estimator import Settings, size
    from vramtui.core.estimate.modelinfo import load_model_info
    from vramtui.core.launch.footprint import engine_build as build_of

    try:
        info = load_model_info(profile.model)
        params = sizing_params(profile.backend, profile.params, profile.env)
        settings = replace(
            Settings.from_params(params, backend=profile.backend.name),
            on_gpu=on_gpu,
            engine_build=build_of(profile),
        )
        est = size(info, settings)
    except Exception:  # a model the estimator cannot read still has a runtime residual worth keeping
        return None
    place = 0 if on_gpu else HOST
    return {
        "compute_buffer_bytes": est.bill.get("compute", place),
        "runtime_bytes": est.bill.get("runtime", place),
        "total_bytes": est.bill.total(place),
    }


def _jsonable(params: dict[str, Any]) -> dict[str, Any]:
    return {
        k: v if isinstance(v, str | int | float | bool) or v is None else str(v) for k, v in params.items()
    }


def run_record(server: ModelServer) -> dict[str, Any] | None:
    """The record of a finished run (None: it never started)."""
    if server.proc is None or server.log_file is None:
        return None
    diagnosis = server.diagnosis()
    figures = {k: int(v) for k, v in (getattr(diagnosis, "engine_figures", None) or {}).items()}
    gpu = _gpu_of(server) if server.peak_gpu_bytes else None
    place = "0" if gpu else HOST
    identity, label = engine_build(server.profile, server.command)
    model = Path(server.profile.model).expanduser()
    return {
        "version": RECORD_VERSION,
        "time": time.time(),
        "log": str(server.log_file),
        "ready": server.ready,
        # how far it got, by the launcher and the log as `run` and `diagnose` say it (QA 38 F12: a server
        # killed after ready read "ready" here and "inference" there), and where it failed
        "stage": furthest(server.stage, getattr(diagnosis, "stage", None)),
        "failure_stage": getattr(diagnosis, "failure_stage", None)
        if getattr(diagnosis, "failed", False)
        else None,
        "failure": _failure(diagnosis, server.request),
        # the smallest request's answer (QA 7: an endpoint that answered HTTP 200 with no completion was
        # recorded as ready, failure none): its kind, "answered" when it was a completion
        "request": None if server.request is None else server.request.kind,
        "device": gpu or {"name": CPU_DEVICE, "total_bytes": None},
        "place": place,
        "engine": {"backend": server.profile.backend.name, "build": identity, "label": label},
        "model": {"path": str(model), "size_bytes": model.stat().st_size if model.is_file() else None},
        "settings": _jsonable(dict(server.profile.params)),
        "printed": {"figures": figures, "bill": _printed_bill(figures, on_gpu=gpu is not None)},
        "peak": {
            "bytes": server.peak_gpu_bytes if gpu else server.peak_bytes,
            "gpu_bytes": server.peak_gpu_bytes,
            "host_bytes": server.peak_bytes,
        },
        "estimate": _estimate_at(server.profile, on_gpu=gpu is not None),
    }


def _failure(diagnosis: Any, request: Any) -> str | None:
    """The log's failure, else the smallest request's as `check` names it (smoke_bad_response ...)."""
    failure = getattr(diagnosis, "failure", None)
    if failure in (None, "none") and request is not None and not request.ok:
        return request.failure
    return failure


def keep_run(server: ModelServer) -> Path | None:
    """Write the run's record beside its log, in the log's folder (the run store, unless the run was
    launched elsewhere: QA, the footprint probe's nine runs of a tiny model in a temporary folder landed
    in the store and calibrated the user's next estimate); None when there is none."""
    try:
        record = run_record(server)
        if record is None or server.log_file is None:
            return None
        return save_record(record, server.log_file.stem, folder=server.log_file.parent)
    except Exception:  # the record is a by-product: a run is never lost to it
        return None
