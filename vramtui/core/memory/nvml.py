"""The thin NVML layer: every call to `pynvml` goes through here, and nothing here raises.

Shaped after the mature monitors (nvitop splits its NVML API layer from its UI the same way):
versioned functions are probed once and the working one remembered; NVML's "not available" sentinel
becomes None; an error on one GPU (GPU_IS_LOST, NO_PERMISSION ...) marks that GPU and leaves the
others reporting; a missing library or driver is a state with a human reason, never an exception.

The module is injectable (`NvmlApi(module=fake)`) so tests drive the same code with data in NVML's
real shapes and real `pynvml.NVMLError_*` classes.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

# NVML's "not available" values (nvml.h: NVML_VALUE_NOT_AVAILABLE), seen e.g. for per-process memory
# under WDDM / WSL2. pynvml maps some of them to None itself, but not in every version or call.
NOT_AVAILABLE_ULL = 2**64 - 1
NOT_AVAILABLE_UINT = 2**32 - 1

# Error codes from nvml.h (stable across releases); named here so this module works with any pynvml.
ERROR_NOT_SUPPORTED = 3
ERROR_NO_PERMISSION = 4
ERROR_NOT_FOUND = 6
ERROR_DRIVER_NOT_LOADED = 9
ERROR_LIBRARY_NOT_FOUND = 12
ERROR_FUNCTION_NOT_FOUND = 13
ERROR_GPU_IS_LOST = 15
ERROR_RESET_REQUIRED = 16
ERROR_LIB_RM_VERSION_MISMATCH = 18
ERROR_ARGUMENT_VERSION_MISMATCH = 25
ERROR_UNKNOWN = 999

# Errors after which a GPU will not answer again until it is reset: stop asking it.
_FATAL_DEVICE_ERRORS = {ERROR_GPU_IS_LOST, ERROR_RESET_REQUIRED}

_INIT_REASONS = {
    ERROR_LIBRARY_NOT_FOUND: "no NVIDIA driver (libnvidia-ml.so.1 not found)",
    ERROR_DRIVER_NOT_LOADED: "the NVIDIA driver is not loaded (nvidia-smi fails too; check `lsmod | grep nvidia`)",
    ERROR_NO_PERMISSION: "no permission to open the GPU devices (/dev/nvidia*)",
    ERROR_LIB_RM_VERSION_MISMATCH: "the NVML library and the loaded driver differ (reboot after a driver update)",
    ERROR_GPU_IS_LOST: "a GPU has fallen off the bus (GPU is lost)",
}

_DEVICE_REASONS = {
    ERROR_GPU_IS_LOST: "GPU is lost (fell off the bus; the machine needs a GPU reset or reboot)",
    ERROR_RESET_REQUIRED: "GPU requires a reset",
    ERROR_NO_PERMISSION: "no permission to read this GPU",
    ERROR_NOT_SUPPORTED: "not supported on this GPU",
}


def error_code(error: BaseException) -> int | None:
    """The NVML error code of a pynvml exception (`.value`), None for anything else."""
    value = getattr(error, "value", None)
    return value if isinstance(value, int) else None


def describe_init_error(error: BaseException) -> str:
    """Why NVML could not start, in one line for the user."""
    code = error_code(error)
    if code in _INIT_REASONS:
        return f"NVML not available: {_INIT_REASONS[code]}"
    return f"NVML not available: {error}"


def describe_device_error(error: BaseException) -> str:
    code = error_code(error)
    return _DEVICE_REASONS.get(code, str(error) or type(error).__name__) if code is not None else str(error)


def _number(value: Any, sentinel: int = NOT_AVAILABLE_ULL) -> int | None:
    """An NVML integer, or None for N/A (None, the sentinel, or a ctypes value holding it)."""
    value = getattr(value, "value", value)
    if value is None or isinstance(value, bool):
        return None
    try:
        number = int(value)
    except (TypeError, ValueError):
        return None
    if number in (sentinel, NOT_AVAILABLE_ULL, NOT_AVAILABLE_UINT) or number < 0:
        return None
    return number


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


@dataclass(frozen=True, slots=True)
class GpuProcess:
    pid: int  # a host PID, even when we run in a container (NVML reports the host namespace)
    used_bytes: int | None  # None: NVML does not know (WDDM / WSL2 sentinel)
    kind: str  # "compute" or "graphics"


@dataclass(frozen=True, slots=True)
class DeviceSnapshot:
    """One GPU (or MIG instance) as NVML saw it in one pass. None means N/A."""

    index: int  # NVML index (PCI bus order); a MIG instance carries its parent's index
    name: str
    uuid: str
    used_bytes: int | None = None
    total_bytes: int | None = None
    free_bytes: int | None = None
    reserved_bytes: int | None = None  # only from the v2 memory call
    util_percent: int | None = None
    processes: tuple[GpuProcess, ...] = ()
    processes_note: str | None = None  # why the process list is empty or partial
    mig_index: int | None = None  # set on a MIG instance
    mig_enabled: bool = False  # set on a parent GPU in MIG mode
    error: str | None = None  # this GPU answered nothing: why


@dataclass(slots=True)
class _Device:
    index: int
    handle: Any
    name: str
    uuid: str
    mig_index: int | None = None
    mig_enabled: bool = False
    error: str | None = None
    lost: bool = False


@dataclass(slots=True)
class _Probe:
    """Which versioned function works, decided on first use and remembered."""

    memory_v2: bool | None = None
    process_functions: dict[str, str | None] = field(default_factory=dict)


class NvmlApi:
    """NVML for one process: init once, enumerate devices, read them, shut down. Never raises."""

    def __init__(self, module: ModuleType | Any | None = None) -> None:
        self._module_arg = module
        self.nvml: Any = None
        self.ok = False
        self.reason = "NVML not started"
        self.driver_version: str | None = None
        self.devices: list[_Device] = []
        self._probe = _Probe()
        self._lock = threading.Lock()
        self._started = False

    # ---- lifecycle -------------------------------------------------------------------------------
    def start(self) -> bool:
        """Load and init NVML and list the GPUs; False (with `.reason`) when NVML is not there."""
        with self._lock:
            if self._started:
                return self.ok
            self._started = True
            nvml = self._module_arg
            if nvml is None:
                try:
                    import pynvml as nvml  # nvidia-ml-py
                except ImportError:
                    self.reason = (
                        "NVML not available: nvidia-ml-py is not installed (pip install nvidia-ml-py)"
                    )
                    return False
            self.nvml = nvml
            try:
                nvml.nvmlInit()
            except Exception as error:  # NVMLError_* and OSError from odd installs alike
                self.reason = describe_init_error(error)
                return False
            try:
                self.driver_version = _text(nvml.nvmlSystemGetDriverVersion())
            except Exception:
                self.driver_version = None
            try:
                count = int(nvml.nvmlDeviceGetCount())
            except Exception as error:
                self.reason = describe_init_error(error)
                self._shutdown_quietly()
                return False
            self.devices = self._expand_mig([self._open_device(i) for i in range(count)])
            self.ok = True
            self.reason = self._summary()
            return True

    def shutdown(self) -> None:
        with self._lock:
            if self.ok:
                self._shutdown_quietly()
            self.ok = False
            self.devices = []
            self._started = False

    def _shutdown_quietly(self) -> None:
        try:
            self.nvml.nvmlShutdown()
        except Exception:
            pass

    def _summary(self) -> str:
        if not self.devices:
            return "NVML running but it sees no GPU"
        names = sorted({d.name for d in self.devices if d.mig_index is None and not d.error})
        parents = [d for d in self.devices if d.mig_index is None]
        text = f"NVML: {len(parents)} GPU{'s' if len(parents) != 1 else ''}"
        if names:
            text += f" ({', '.join(names)})"
        if self.driver_version:
            text += f", driver {self.driver_version}"
        migs = sum(1 for d in self.devices if d.mig_index is not None)
        if migs:
            text += f", {migs} MIG instance{'s' if migs != 1 else ''}"
        return text

    # ---- enumeration -----------------------------------------------------------------------------
    def _open_device(self, index: int) -> _Device:
        nvml = self.nvml
        try:
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
        except Exception as error:
            code = error_code(error)
            return _Device(
                index, None, "", "", error=describe_device_error(error), lost=code in _FATAL_DEVICE_ERRORS
            )
        name = self._call_text("nvmlDeviceGetName", handle) or f"GPU {index}"
        uuid = self._call_text("nvmlDeviceGetUUID", handle) or ""
        device = _Device(index, handle, name, uuid)
        device.mig_enabled = self._mig_enabled(handle)
        return device

    def _mig_enabled(self, handle: Any) -> bool:
        fn = getattr(self.nvml, "nvmlDeviceGetMigMode", None)
        if fn is None:
            return False
        try:
            current = fn(handle)[0]
        except Exception:  # NOT_SUPPORTED on every GPU without MIG
            return False
        return _number(current) == getattr(self.nvml, "NVML_DEVICE_MIG_ENABLE", 1)

    def mig_instances(self, parent: _Device) -> list[_Device]:
        """The MIG instances of a parent in MIG mode (slots without an instance are skipped)."""
        nvml = self.nvml
        try:
            count = int(nvml.nvmlDeviceGetMaxMigDeviceCount(parent.handle))
        except Exception:
            return []
        instances: list[_Device] = []
        for slot in range(count):
            try:
                handle = nvml.nvmlDeviceGetMigDeviceHandleByIndex(parent.handle, slot)
            except Exception:  # NOT_FOUND: no instance in this slot
                continue
            name = self._call_text("nvmlDeviceGetName", handle) or f"{parent.name} MIG {slot}"
            uuid = self._call_text("nvmlDeviceGetUUID", handle) or ""
            instances.append(_Device(parent.index, handle, name, uuid, mig_index=slot))
        return instances

    def _expand_mig(self, parents: list[_Device]) -> list[_Device]:
        """Each GPU followed by its MIG instances when it is in MIG mode."""
        devices: list[_Device] = []
        for parent in parents:
            devices.append(parent)
            if parent.mig_enabled and not parent.error:
                devices.extend(self.mig_instances(parent))
        return devices

    def _call_text(self, name: str, handle: Any) -> str | None:
        fn = getattr(self.nvml, name, None)
        if fn is None:
            return None
        try:
            return _text(fn(handle))
        except Exception:
            return None

    # ---- readings --------------------------------------------------------------------------------
    def snapshot(self) -> list[DeviceSnapshot]:
        """Read every device once; a device that fails is returned with `.error`, the rest as usual."""
        with self._lock:
            if not self.ok:
                return []
            return [self._snapshot_device(device) for device in self.devices]

    def _snapshot_device(self, device: _Device) -> DeviceSnapshot:
        base = DeviceSnapshot(
            index=device.index,
            name=device.name,
            uuid=device.uuid,
            mig_index=device.mig_index,
            mig_enabled=device.mig_enabled,
        )
        if device.lost or device.handle is None:
            return _replace(base, error=device.error or "GPU not readable")
        try:
            memory = self._memory(device.handle)
        except Exception as error:
            return self._device_failed(device, base, error)
        util: int | None = None
        try:
            rates = self.nvml.nvmlDeviceGetUtilizationRates(device.handle)
            util = _number(getattr(rates, "gpu", None), NOT_AVAILABLE_UINT)
        except Exception as error:
            if error_code(error) in _FATAL_DEVICE_ERRORS:
                return self._device_failed(device, base, error)
            util = None  # NOT_SUPPORTED on MIG instances and some boards: N/A
        processes, note = self._processes(device)
        if device.mig_enabled and not processes and note is None:
            note = "MIG mode: processes are listed per MIG instance"
        total, free, used, reserved = memory
        return _replace(
            base,
            used_bytes=used,
            total_bytes=total,
            free_bytes=free,
            reserved_bytes=reserved,
            util_percent=util,
            processes=tuple(processes),
            processes_note=note,
        )

    def _device_failed(self, device: _Device, base: DeviceSnapshot, error: BaseException) -> DeviceSnapshot:
        device.error = describe_device_error(error)
        if error_code(error) in _FATAL_DEVICE_ERRORS:
            device.lost = True
        return _replace(base, error=device.error)

    def _memory(self, handle: Any) -> tuple[int | None, int | None, int | None, int | None]:
        """(total, free, used, reserved): the v2 call where the driver has it (its `used` excludes the
        driver-reserved memory, v1's includes it), else v1 with reserved unknown."""
        nvml = self.nvml
        version = getattr(nvml, "nvmlMemory_v2", None)
        if version is not None and self._probe.memory_v2 is not False:
            try:
                info = nvml.nvmlDeviceGetMemoryInfo(handle, version=version)
                self._probe.memory_v2 = True
                return (
                    _number(info.total),
                    _number(info.free),
                    _number(info.used),
                    _number(getattr(info, "reserved", None)),
                )
            except Exception as error:
                if error_code(error) not in (
                    ERROR_FUNCTION_NOT_FOUND,
                    ERROR_ARGUMENT_VERSION_MISMATCH,
                    ERROR_NOT_SUPPORTED,  # some vGPU / older boards answer only v1
                ):
                    raise
                self._probe.memory_v2 = False  # an older driver: v1 from now on
        info = nvml.nvmlDeviceGetMemoryInfo(handle)
        return _number(info.total), _number(info.free), _number(info.used), None

    def _processes(self, device: _Device) -> tuple[list[GpuProcess], str | None]:
        found: dict[int, GpuProcess] = {}
        notes: list[str] = []
        for kind in ("compute", "graphics"):
            try:
                rows = self._process_rows(kind, device.handle)
            except Exception as error:
                code = error_code(error)
                if code == ERROR_NO_PERMISSION:
                    notes.append("no permission to list GPU processes (run as their user or root)")
                elif code == ERROR_NOT_SUPPORTED:
                    if kind == "compute":
                        notes.append("process list not supported here")
                elif code in _FATAL_DEVICE_ERRORS:
                    notes.append(describe_device_error(error))
                else:
                    notes.append(f"process list unavailable: {error}")
                continue
            for row in rows:
                pid = _number(getattr(row, "pid", None), NOT_AVAILABLE_UINT)
                if pid is None:
                    continue
                used = _number(getattr(row, "usedGpuMemory", None))
                previous = found.get(pid)
                if previous is not None and previous.used_bytes is not None:
                    # A process can be both compute and graphics: NVML reports the same memory twice.
                    used = max(previous.used_bytes, used or 0)
                found[pid] = GpuProcess(pid, used, previous.kind if previous else kind)
        if found and all(p.used_bytes is None for p in found.values()):
            notes.append("per-process memory not available from this driver (WDDM / WSL2)")
        return list(found.values()), ("; ".join(dict.fromkeys(notes)) or None)

    def _process_rows(self, kind: str, handle: Any) -> list[Any]:
        """The process list through the newest versioned function this pynvml + driver both have."""
        base = (
            "nvmlDeviceGetComputeRunningProcesses"
            if kind == "compute"
            else "nvmlDeviceGetGraphicsRunningProcesses"
        )
        chosen = self._probe.process_functions.get(kind)
        candidates = [chosen] if chosen else [f"{base}_v3", f"{base}_v2", base]
        last_error: BaseException | None = None
        for name in candidates:
            fn = getattr(self.nvml, name, None)
            if fn is None:
                continue
            try:
                rows = fn(handle)
            except Exception as error:
                # The symbol is missing in this driver (FUNCTION_NOT_FOUND), or pynvml's unversioned
                # wrapper says the versions do not match (NVMLLibraryMismatchError): try the older one.
                if (
                    error_code(error) == ERROR_FUNCTION_NOT_FOUND
                    or type(error).__name__ == "NVMLLibraryMismatchError"
                ):
                    last_error = error
                    continue
                self._probe.process_functions[kind] = name
                raise
            self._probe.process_functions[kind] = name
            return list(rows or [])
        if last_error is not None:
            raise last_error
        return []


def _replace(snapshot: DeviceSnapshot, **changes: Any) -> DeviceSnapshot:
    from dataclasses import replace

    return replace(snapshot, **changes)


# ---- CUDA_VISIBLE_DEVICES ------------------------------------------------------------------------


def cuda_visible_map(
    devices: list[tuple[int, str, int | None]], env_value: str | None
) -> dict[tuple[int, int | None], int]:
    """Which CUDA ordinal each NVML device gets inside the model server.

    `devices`: (nvml_index, uuid, mig_index) per device. `env_value`: CUDA_VISIBLE_DEVICES (None:
    unset when None). Returns {(nvml_index, mig_index): cuda_ordinal} for visible devices.
    CUDA's rules: entries are indices or (prefixes of) GPU-/MIG- UUIDs; the list stops at the first
    entry that does not name a device; an empty value hides every GPU. NVML numbers GPUs in PCI bus
    order: ordinals match only with CUDA_DEVICE_ORDER=PCI_BUS_ID or identical GPUs (see
    `cuda_order_warning`).
    """
    parents = [d for d in devices if d[2] is None]
    if env_value is None:
        return {(index, None): ordinal for ordinal, (index, _uuid, _mig) in enumerate(sorted(parents))}
    mapping: dict[tuple[int, int | None], int] = {}
    for entry in env_value.split(","):
        entry = entry.strip()
        key: tuple[int, int | None] | None = None
        if entry.isdigit():
            wanted = int(entry)
            key = next(((i, None) for i, _u, _m in parents if i == wanted), None)
        elif entry.upper().startswith(("GPU-", "MIG-")):
            matches = [(i, m) for i, u, m in devices if u and u.lower().startswith(entry.lower())]
            key = matches[0] if len(matches) == 1 else None
        if key is None or key in mapping:
            break  # CUDA ignores everything from the first invalid entry on
        mapping[key] = len(mapping)
    return mapping


def cuda_order_warning(names: list[str], env: dict[str, str] | None = None) -> str | None:
    """A warning when CUDA's ordinals may differ from NVML's (different GPUs, default fastest-first)."""
    env = dict(os.environ) if env is None else env
    if len(set(names)) > 1 and env.get("CUDA_DEVICE_ORDER", "FASTEST_FIRST") != "PCI_BUS_ID":
        return "GPUs differ and CUDA_DEVICE_ORDER is not PCI_BUS_ID: CUDA's device numbers may not match nvidia-smi's"
    return None


def first_gpu_total_bytes() -> int | None:
    """Total memory of the first GPU NVML sees (None without NVML: the normal state on CPU machines)."""
    api = NvmlApi()
    try:
        if not api.start():
            return None
        for device in api.snapshot():
            if device.total_bytes:
                return int(device.total_bytes)
        return None
    finally:
        api.shutdown()


def gpu_total_bytes(module: ModuleType | Any | None = None) -> tuple[int, ...]:
    """Total memory of every GPU NVML sees, in its order (MIG instances in place of their parent);
    empty without NVML (the normal state on CPU machines)."""
    api = NvmlApi(module)
    try:
        if not api.start():
            return ()
        return tuple(int(d.total_bytes) for d in api.snapshot() if d.total_bytes and not d.mig_enabled)
    finally:
        api.shutdown()
