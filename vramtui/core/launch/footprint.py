"""An engine's own idle host footprint, measured once per binary and cached.

Under a host memory budget (an address-space limit), what the server process holds before any model
buffer decides whether a step fits: llama-server holds about 200 MiB RSS and 240 MiB of address space
at idle (0.5.0-dev), not the 96 MiB once assumed. The figure moves with the build, so it is measured
on the binary at hand: the server is started on a tiny model it writes itself, at context 2048, and its
resident and virtual sizes are read once it is ready. The result is cached per binary (path, size,
modification time) in the user cache dir; a binary that cannot be measured gets the backend's figure.

The address space a free process maps is not what it needs: glibc reserves malloc arenas it does without
under a limit (llama-server maps 259-323 MiB at idle on a 2-core box, and comes up under 250 MiB: QA, the
wizard stopped a run that fit). So the budget's figure is the floor: the least limit from which up the
engine comes up on the tiny model, found by stepping the limit down from its free size until it fails.
Not by bisection: whether it comes up is not monotonic in the limit (measured on llama-server 0.5.0-dev:
up at 144-160 MiB, down at 176-192 MiB, where an arena's 64 MiB reservation still fits and starves what
follows, up again from 208 MiB), and a budget must hold at every size above the figure. Budgets now
launch with one malloc arena (core/launch/procs.py), as the floor is measured: llama-server 0.3.36 on the
tiny model comes up from 131 MiB so, against 256 MiB with glibc's arena per thread.

llama-cpp-python's server is measured the same way, on vramtui's own Python: its cache key adds the
package's file, which an upgrade changes while the interpreter stays the same file.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from vramtui.core.launch.profile import Profile

_MEASURE_TIMEOUT_S = 20.0
_FLOOR_STEP = 16 << 20  # the limit steps down by this much per launch
_FLOOR_LAUNCHES = 16  # at most this many launches (each well under a second on a tiny model)
# 2: the floor joined the measurement; 3: measured with one malloc arena, as budgets now launch (procs)
_CACHE_VERSION = "3"


@dataclass(frozen=True)
class Footprint:
    rss_bytes: int
    address_space_bytes: int  # mapped at idle with no limit
    binary: str
    floor_bytes: int = 0  # the least address-space limit it comes up under (0: not found)


def cache_file() -> Path:
    import platformdirs

    return Path(platformdirs.user_cache_dir("vramtui")) / "footprint.json"


def binary_of(profile: Profile) -> Path | None:
    """The program a launch of `profile` runs, resolved to a file (None: not found)."""
    launch = profile.backend.launch
    if launch is None:
        return None
    program = profile.program or launch.argv_prefix()[0]  # vramtui's own Python for a runner of its own
    found = shutil.which(program, path=profile.env.get("PATH") or os.environ.get("PATH"))
    return Path(found).resolve() if found else None


def engine_build(profile: Profile) -> int | None:
    """The engine build a launch of `profile` runs, as its backend's memory accounting keys on it
    (vLLM's minor version); None where the backend does not tell builds apart or the program is not
    found."""
    read = profile.backend.engine_build_of
    binary = binary_of(profile) if read is not None else None
    return read(binary) if read is not None and binary is not None else None


def _key(binary: Path, profile: Profile) -> str:
    stat = binary.stat()
    return f"v{_CACHE_VERSION}:{binary}:{stat.st_size}:{stat.st_mtime_ns}{_runner_stamp(binary, profile)}"


def _runner_stamp(binary: Path, profile: Profile) -> str:
    """For a runner on vramtui's own Python, its package's file too: the interpreter stays the same
    file when llama-cpp-python is upgraded, and the footprint moves with the package."""
    import importlib.util
    import sys

    module = profile.backend.launch.runner_module if profile.backend.launch else None
    if module is None or binary != Path(sys.executable).resolve():
        return ""
    try:
        spec = importlib.util.find_spec(module.split(".")[0])  # the top package: not imported
        origin = Path(spec.origin) if spec is not None and spec.origin else None
        stat = origin.stat() if origin is not None else None
    except (ImportError, ValueError, OSError):
        return ""
    return f":{origin}:{stat.st_size}:{stat.st_mtime_ns}" if stat is not None else ""


def _read_cache() -> dict[str, dict[str, int]]:
    try:
        data = json.loads(cache_file().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write_cache(data: dict[str, dict[str, int]]) -> None:
    target = cache_file()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        temporary = target.with_suffix(".tmp")
        temporary.write_text(json.dumps(data, indent=1), encoding="utf-8")
        temporary.replace(target)
    except OSError:
        pass  # a cache we cannot write only costs a measurement next time


def engine_share(profile: Profile, measure: bool = True) -> int:
    """What an estimate under the profile's host budget takes off the budget for the engine itself: its
    footprint (measured when `measure`, else its backend's figure), or 0 where its CPU estimate bills the
    engine's own processes as its runtime row (vLLM: QA 20 D1, taken off twice). The CLI's --memory-budget
    and the estimator pane both ask here."""
    if profile.backend.cpu_bill_holds_engine:
        return 0
    return host_footprint(profile) if measure else int(profile.backend.host_baseline_bytes)


def measured_already(profile: Profile) -> bool:
    """False when `host_footprint(profile)` would start the engine to measure it (seconds): callers on
    a UI thread run it in a worker and say so."""
    if not profile.backend.measures_footprint or profile.memory_budget is None:
        return True
    return binary_of(profile) is None or _cached(profile) is not None


def measured_floor(profile: Profile) -> int | None:
    """The least address-space limit the engine came up under, where it was measured already (never
    measured here: a launch's log says it when known, so that a saved log sizes a budget as the wizard
    does, QA 23 D4); None when not measured, or when its CPU bill holds the engine itself."""
    if not profile.backend.measures_footprint or profile.backend.cpu_bill_holds_engine:
        return None
    floor = (_cached(profile) or {}).get("floor")
    return int(floor) if floor else None


def _cached(profile: Profile) -> dict[str, int] | None:
    """The measurement cached for the binary a launch of `profile` runs; None when none is (or no binary)."""
    binary = binary_of(profile)
    return _read_cache().get(_key(binary, profile)) if binary is not None else None


def host_footprint(profile: Profile, kind: str = "floor") -> int:
    """The address space the engine needs to come up (what a host budget limits), in bytes; `kind="rss"`:
    its resident memory instead (what an attached server's budget is judged by); "address_space": what
    it maps at idle with no limit."""
    fallback = profile.backend.host_baseline_bytes
    if not profile.backend.measures_footprint or profile.memory_budget is None:
        return fallback
    binary = binary_of(profile)
    if binary is None:
        return fallback
    cache = _read_cache()
    key = _key(binary, profile)
    if key not in cache:
        measured = measure(profile, binary)
        # A failed measurement is remembered too (0): once per binary, not once per wizard step.
        cache[key] = (
            {
                "rss": measured.rss_bytes,
                "address_space": measured.address_space_bytes,
                "floor": measured.floor_bytes or measured.address_space_bytes,
            }
            if measured
            else {}
        )
        _write_cache(cache)
    measured_bytes = cache[key].get(kind, 0)
    return int(measured_bytes) if measured_bytes else fallback


def measure(profile: Profile, binary: Path) -> Footprint | None:
    """Start `binary` on a tiny model, read its idle RSS and address space once it is ready, stop it; then
    find the least address-space limit it still comes up under."""
    from vramtui.core.demo.tinygguf import TinyModelSpec, write_tiny_gguf

    with tempfile.TemporaryDirectory(prefix="vramtui-footprint-") as folder:
        model = write_tiny_gguf(Path(folder) / "tiny.gguf", TinyModelSpec(n_layer=2, n_embd=64, n_ff=128))
        probe = Profile(
            backend=profile.backend,
            model=str(model),
            params={"context": 2048, "parallel": 1},
            port=0,
            program=str(binary),
            env=dict(profile.env),
        )
        free = _idle_sizes(probe, Path(folder))
        if free is None:
            return None
        rss, address_space = free
        floor = _floor(probe, Path(folder), low=rss, high=address_space)
        return Footprint(rss, address_space, str(binary), floor)


def _idle_sizes(probe: Profile, folder: Path, limit: int | None = None) -> tuple[int, int] | None:
    """(RSS, address space) of the probe once ready, under an address-space `limit` (None: no limit);
    None when it did not come up."""
    import psutil

    from vramtui.core.launch.launcher import LaunchError, ModelServer

    server = ModelServer(probe.with_changes(memory_budget=limit), log_dir=folder / "runs")
    try:
        server.start()
        if not server.wait_ready(_MEASURE_TIMEOUT_S) or server.pid is None:
            return None
        process = psutil.Process(server.pid)
        rss = address_space = 0
        for _ in range(5):  # idle threads map their stacks and arenas a moment after ready: the most
            memory = process.memory_info()
            rss, address_space = max(rss, memory.rss), max(address_space, memory.vms)
            time.sleep(0.1)
        return int(rss), int(address_space)
    except (LaunchError, psutil.Error, OSError):
        return None
    finally:
        server.stop(grace_s=2.0, release_timeout_s=5.0)


def _floor(probe: Profile, folder: Path, low: int, high: int) -> int:
    """The least limit, in steps down from `high` (the free size: it came up mapping that much), above
    which the probe came up at every step: the step before its first failure. Never below `low` (its
    resident size)."""
    floor = high
    for _ in range(_FLOOR_LAUNCHES):
        trial = floor - _FLOOR_STEP
        if trial <= low or _idle_sizes(probe, folder, limit=trial) is None:
            break
        floor = trial
    return floor
