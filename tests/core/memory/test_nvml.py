"""The NVML path through a pynvml-shaped module: real pynvml structs, error classes and codes.

There is no GPU here, so the fake plays the driver: same function names and signatures as
nvidia-ml-py, return values built from pynvml's own ctypes structs, errors raised as
`pynvml.NVMLError(code)` (which pynvml maps to its NVMLError_* subclasses).
"""

from __future__ import annotations

import sys
import types
from dataclasses import dataclass, field

import pynvml as real
import pytest

from vramtui.core.memory.nvml import NOT_AVAILABLE_ULL, NvmlApi, cuda_order_warning, cuda_visible_map
from vramtui.core.memory.sampling import HostReading, NvmlSource, Sample

MIB = 1024**2
GIB = 1024**3


def nvml_error(code: int) -> real.NVMLError:
    return real.NVMLError(code)


@dataclass
class FakeGpu:
    name: str = "NVIDIA GeForce RTX 4090"
    uuid: str = "GPU-aaaaaaaa-0000-0000-0000-000000000000"
    total: int = 24 * GIB
    used: int = 2 * GIB  # v2 "used": without the driver-reserved part
    reserved: int = 300 * MIB
    util: int | None = 7  # None: NOT_SUPPORTED
    compute: list[tuple[int, int | None]] = field(default_factory=list)
    graphics: list[tuple[int, int | None]] = field(default_factory=list)
    lost: bool = False
    process_error: int | None = None
    mig_enabled: bool | None = None  # None: GPU without MIG (NOT_SUPPORTED)
    mig_slots: dict[int, FakeGpu] = field(default_factory=dict)
    mig_max: int = 7


class FakeDriver:
    """State the fake module reads; tests change it between samples."""

    def __init__(
        self,
        gpus: list[FakeGpu],
        init_error: int | None = None,
        memory_v2: bool = True,
        process_versions: tuple[str, ...] = ("_v3", "_v2", ""),
        driver_symbols: tuple[str, ...] = ("_v3", "_v2", ""),
        sentinel_raw: bool = False,
        handle_errors: dict[int, int] | None = None,
    ) -> None:
        self.gpus = gpus
        self.handle_errors = handle_errors or {}  # index -> NVML error code when asked for its handle
        self.init_error = init_error
        self.memory_v2 = memory_v2
        self.process_versions = process_versions  # functions this nvidia-ml-py defines
        self.driver_symbols = driver_symbols  # functions this driver's libnvidia-ml exports
        self.sentinel_raw = sentinel_raw  # an old pynvml passes the N/A sentinel through
        self.calls: dict[str, int] = {}

    def module(self) -> types.ModuleType:
        mod = types.ModuleType("fake_pynvml")
        d = self

        def count(name: str) -> None:
            d.calls[name] = d.calls.get(name, 0) + 1

        def check(handle: FakeGpu) -> None:
            if handle.lost:
                raise nvml_error(real.NVML_ERROR_GPU_IS_LOST)

        def nvmlInit() -> None:
            count("nvmlInit")
            if d.init_error is not None:
                raise nvml_error(d.init_error)

        def nvmlShutdown() -> None:
            count("nvmlShutdown")

        def nvmlSystemGetDriverVersion() -> str:
            return "550.54.15"

        def nvmlDeviceGetCount() -> int:
            return len(d.gpus)

        def nvmlDeviceGetHandleByIndex(index: int) -> FakeGpu:
            if index >= len(d.gpus):
                raise nvml_error(real.NVML_ERROR_INVALID_ARGUMENT)
            if index in d.handle_errors:
                raise nvml_error(d.handle_errors[index])
            return d.gpus[index]

        def nvmlDeviceGetName(handle: FakeGpu) -> str:
            check(handle)
            return handle.name

        def nvmlDeviceGetUUID(handle: FakeGpu) -> str:
            check(handle)
            return handle.uuid

        def nvmlDeviceGetMemoryInfo(handle: FakeGpu, version: int | None = None) -> object:
            count("memory_v2" if version else "memory_v1")
            check(handle)
            if version:
                if not d.memory_v2:
                    raise nvml_error(real.NVML_ERROR_FUNCTION_NOT_FOUND)
                info = real.c_nvmlMemory_v2_t()
                info.version = version
                info.total, info.reserved, info.used = handle.total, handle.reserved, handle.used
                info.free = handle.total - handle.used - handle.reserved
                return info
            info1 = real.c_nvmlMemory_t()
            info1.total, info1.used = handle.total, handle.used + handle.reserved  # v1 includes reserved
            info1.free = handle.total - info1.used
            return info1

        def nvmlDeviceGetUtilizationRates(handle: FakeGpu) -> object:
            check(handle)
            if handle.util is None:
                raise nvml_error(real.NVML_ERROR_NOT_SUPPORTED)
            return real.c_nvmlUtilization_t(gpu=handle.util, memory=3)

        def process_function(kind: str, suffix: str):
            def get(handle: FakeGpu) -> list[object]:
                count(f"{kind}{suffix}")
                check(handle)
                if suffix not in d.driver_symbols:
                    raise nvml_error(real.NVML_ERROR_FUNCTION_NOT_FOUND)
                if handle.process_error is not None:
                    raise nvml_error(handle.process_error)
                rows = handle.compute if kind == "compute" else handle.graphics
                out = []
                for pid, used in rows:
                    raw = NOT_AVAILABLE_ULL if used is None else used
                    obj = real.nvmlStructToFriendlyObject(
                        real.c_nvmlProcessInfo_v2_t(
                            pid=pid, usedGpuMemory=raw, gpuInstanceId=0, computeInstanceId=0
                        )
                    )
                    if obj.usedGpuMemory == NOT_AVAILABLE_ULL and not d.sentinel_raw:
                        obj.usedGpuMemory = None  # what nvidia-ml-py's wrappers do
                    out.append(obj)
                return out

            return get

        for kind, base in (
            ("compute", "nvmlDeviceGetComputeRunningProcesses"),
            ("graphics", "nvmlDeviceGetGraphicsRunningProcesses"),
        ):
            for suffix in d.process_versions:
                setattr(mod, base + suffix, process_function(kind, suffix))

        def nvmlDeviceGetMigMode(handle: FakeGpu) -> list[int]:
            if handle.mig_enabled is None:
                raise nvml_error(real.NVML_ERROR_NOT_SUPPORTED)
            mode = real.NVML_DEVICE_MIG_ENABLE if handle.mig_enabled else real.NVML_DEVICE_MIG_DISABLE
            return [mode, mode]

        def nvmlDeviceGetMaxMigDeviceCount(handle: FakeGpu) -> int:
            return handle.mig_max

        def nvmlDeviceGetMigDeviceHandleByIndex(handle: FakeGpu, index: int) -> FakeGpu:
            if index not in handle.mig_slots:
                raise nvml_error(real.NVML_ERROR_NOT_FOUND)
            return handle.mig_slots[index]

        for fn in (
            nvmlInit,
            nvmlShutdown,
            nvmlSystemGetDriverVersion,
            nvmlDeviceGetCount,
            nvmlDeviceGetHandleByIndex,
            nvmlDeviceGetName,
            nvmlDeviceGetUUID,
            nvmlDeviceGetMemoryInfo,
            nvmlDeviceGetUtilizationRates,
            nvmlDeviceGetMigMode,
            nvmlDeviceGetMaxMigDeviceCount,
            nvmlDeviceGetMigDeviceHandleByIndex,
        ):
            setattr(mod, fn.__name__, fn)
        mod.nvmlMemory_v2 = real.nvmlMemory_v2
        mod.NVML_DEVICE_MIG_ENABLE = real.NVML_DEVICE_MIG_ENABLE
        mod.NVMLError = real.NVMLError
        return mod


def two_gpus() -> list[FakeGpu]:
    return [
        FakeGpu(compute=[(4242, 9 * GIB), (5000, 512 * MIB)], graphics=[(777, 200 * MIB), (4242, 9 * GIB)]),
        FakeGpu(name="NVIDIA RTX A6000", uuid="GPU-bbbbbbbb-1111", total=48 * GIB, used=GIB, util=0),
    ]


def test_two_gpus_v2_memory_processes_and_status() -> None:
    driver = FakeDriver(two_gpus())
    source = NvmlSource(driver.module(), cuda_visible_devices=None)
    sample = source.sample()
    assert sample is not None and len(sample.gpus) == 2
    first, second = sample.gpus
    assert (first.index, first.name, first.uuid) == (
        0,
        "NVIDIA GeForce RTX 4090",
        "GPU-aaaaaaaa-0000-0000-0000-000000000000",
    )
    assert first.used_bytes == 2 * GIB and first.reserved_bytes == 300 * MIB and first.total_bytes == 24 * GIB
    assert first.free_bytes == 24 * GIB - 2 * GIB - 300 * MIB
    assert first.util_percent == 7
    # pid 4242 is both a compute and a graphics process: its memory is counted once
    assert first.process_bytes == {4242: 9 * GIB, 5000: 512 * MIB, 777: 200 * MIB}
    assert second.used_bytes == GIB and second.util_percent == 0 and second.process_bytes == {}
    assert (first.cuda_index, second.cuda_index) == (0, 1)
    status = source.status()
    assert status.ok
    assert (
        "2 GPUs" in status.message and "driver 550.54.15" in status.message and "RTX A6000" in status.message
    )
    # different GPU models and no CUDA_DEVICE_ORDER: the ordinals may not match, and we say so
    assert (
        "CUDA_DEVICE_ORDER" in status.message
        or __import__("os").environ.get("CUDA_DEVICE_ORDER") == "PCI_BUS_ID"
    )
    assert driver.calls["compute_v3"] == 2 and "compute_v2" not in driver.calls  # one per GPU


def test_old_driver_without_memory_v2_falls_back_to_v1_once() -> None:
    driver = FakeDriver([FakeGpu()], memory_v2=False)
    source = NvmlSource(driver.module())
    for _ in range(3):
        gpu = source.sample().gpus[0]  # type: ignore[union-attr]
        assert gpu.used_bytes == 2 * GIB + 300 * MIB  # v1's used includes the reserved memory
        assert gpu.reserved_bytes is None
    assert driver.calls["memory_v2"] == 1  # probed once, remembered
    assert driver.calls["memory_v1"] == 3


def test_process_list_versioned_fallbacks() -> None:
    gpu = FakeGpu(compute=[(11, 100 * MIB)])
    # an older nvidia-ml-py that has no _v3 function at all
    driver = FakeDriver([gpu], process_versions=("_v2", ""))
    assert NvmlSource(driver.module()).sample().gpus[0].process_bytes == {11: 100 * MIB}  # type: ignore[union-attr]
    # a new nvidia-ml-py on an old driver: the _v3 symbol is missing in libnvidia-ml
    driver = FakeDriver([FakeGpu(compute=[(11, 100 * MIB)])], driver_symbols=("_v2", ""))
    source = NvmlSource(driver.module())
    for _ in range(2):
        assert source.sample().gpus[0].process_bytes == {11: 100 * MIB}  # type: ignore[union-attr]
    assert driver.calls["compute_v3"] == 1 and driver.calls["compute_v2"] == 2  # probed once
    # only the unversioned function, and the driver lacks it too: pynvml raises NVMLLibraryMismatchError
    module = FakeDriver(
        [FakeGpu(compute=[(11, 100 * MIB)])], process_versions=("",), driver_symbols=()
    ).module()
    plain = module.nvmlDeviceGetComputeRunningProcesses

    def mismatched(handle: object) -> object:
        try:
            return plain(handle)
        except real.NVMLError_FunctionNotFound:
            raise real.NVMLLibraryMismatchError("Unversioned function called ...") from None

    module.nvmlDeviceGetComputeRunningProcesses = mismatched
    reading = NvmlSource(module).sample().gpus[0]  # type: ignore[union-attr]
    assert reading.used_bytes == 2 * GIB  # memory still read
    assert reading.process_bytes == {} and reading.processes_note


@pytest.mark.parametrize("sentinel_raw", [False, True])
def test_not_available_sentinels_become_none(sentinel_raw: bool) -> None:
    gpu = FakeGpu(compute=[(21, None), (22, 64 * MIB)], util=None)
    source = NvmlSource(FakeDriver([gpu], sentinel_raw=sentinel_raw).module())
    reading = source.sample().gpus[0]  # type: ignore[union-attr]
    assert reading.process_bytes == {22: 64 * MIB}
    assert reading.unknown_pids == (21,)
    assert reading.util_percent is None
    only_unknown = FakeGpu(compute=[(21, None)])
    reading = NvmlSource(FakeDriver([only_unknown], sentinel_raw=sentinel_raw).module()).sample().gpus[0]  # type: ignore[union-attr]
    assert reading.process_bytes == {} and reading.unknown_pids == (21,)
    assert "WDDM" in (reading.processes_note or "")


def test_no_permission_on_process_list_keeps_memory() -> None:
    gpu = FakeGpu(compute=[(1, GIB)], process_error=real.NVML_ERROR_NO_PERMISSION)
    source = NvmlSource(FakeDriver([gpu]).module())
    reading = source.sample().gpus[0]  # type: ignore[union-attr]
    assert reading.used_bytes == 2 * GIB and reading.error is None
    assert reading.process_bytes == {}
    assert "no permission" in (reading.processes_note or "")
    status = source.status()
    assert status.ok and "no permission" in status.message


def test_gpu_lost_mid_run_other_gpus_keep_working() -> None:
    gpus = two_gpus()
    driver = FakeDriver(gpus)
    source = NvmlSource(driver.module())
    assert all(g.error is None for g in source.sample().gpus)  # type: ignore[union-attr]
    gpus[0].lost = True  # falls off the bus
    gpus[1].used = 5 * GIB
    for _ in range(3):
        sample = source.sample()
        assert sample is not None
        lost, alive = sample.gpus
        assert lost.error and "lost" in lost.error and lost.used_bytes is None and lost.process_bytes == {}
        assert alive.error is None and alive.used_bytes == 5 * GIB
    # both GPUs in the first pass; the lost one is asked once more, then left alone
    assert driver.calls["memory_v2"] == 2 + 2 + 1 + 1
    status = source.status()
    assert status.ok and "GPU 0" in status.message and "lost" in status.message
    assert sample.gpu_used_bytes() == 5 * GIB


def test_a_gpu_we_may_not_open_is_shown_and_the_rest_read() -> None:
    """Containers restricted by cgroups: NVML counts every GPU but refuses a handle to some."""
    source = NvmlSource(FakeDriver(two_gpus(), handle_errors={0: real.NVML_ERROR_NO_PERMISSION}).module())
    hidden, visible = source.sample().gpus  # type: ignore[union-attr]
    assert hidden.error == "no permission to read this GPU" and hidden.used_bytes is None
    assert visible.used_bytes == GIB and visible.error is None
    status = source.status()
    assert status.ok and "GPU 0" in status.message and "no permission" in status.message


@pytest.mark.parametrize(
    ("code", "words"),
    [
        (real.NVML_ERROR_LIBRARY_NOT_FOUND, "no NVIDIA driver"),
        (real.NVML_ERROR_DRIVER_NOT_LOADED, "driver is not loaded"),
        (real.NVML_ERROR_NO_PERMISSION, "no permission"),
        (real.NVML_ERROR_LIB_RM_VERSION_MISMATCH, "reboot"),
        (real.NVML_ERROR_UNKNOWN, "Unknown Error"),
    ],
)
def test_init_failures_are_states_with_a_reason(code: int, words: str) -> None:
    source = NvmlSource(FakeDriver(two_gpus(), init_error=code).module())
    status = source.status()
    assert not status.ok
    assert status.message.startswith("NVML not available: ") and words in status.message
    sample = source.sample()
    assert sample is not None and sample.gpus == ()
    source.close()


def test_real_pynvml_without_a_driver_says_why() -> None:
    """The normal state on this machine: nvidia-ml-py installed, no libnvidia-ml.so.1."""
    try:
        real.nvmlInit()
    except real.NVMLError_LibraryNotFound:
        pass
    except real.NVMLError:
        pass
    else:
        real.nvmlShutdown()
        pytest.skip("this machine has a working NVML")
    source = NvmlSource()
    status = source.status()
    assert not status.ok and status.message.startswith("NVML not available:")
    assert source.sample().gpus == ()  # type: ignore[union-attr]


def test_nvidia_ml_py_not_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml now raises ImportError
    api = NvmlApi()
    assert api.start() is False
    assert "nvidia-ml-py is not installed" in api.reason


def test_mig_instances_are_read_and_parent_counts_once() -> None:
    instance_a = FakeGpu(
        name="NVIDIA A100 MIG 3g.40gb",
        uuid="MIG-1111",
        total=40 * GIB,
        used=10 * GIB,
        util=None,
        compute=[(31, 9 * GIB)],
    )
    instance_b = FakeGpu(name="NVIDIA A100 MIG 3g.40gb", uuid="MIG-2222", total=40 * GIB, used=GIB, util=None)
    parent = FakeGpu(
        name="NVIDIA A100-SXM4-80GB",
        uuid="GPU-cccc",
        total=80 * GIB,
        used=11 * GIB,
        util=None,
        mig_enabled=True,
        mig_slots={0: instance_a, 2: instance_b},
        process_error=real.NVML_ERROR_NOT_SUPPORTED,
    )
    source = NvmlSource(FakeDriver([parent]).module(), cuda_visible_devices="MIG-2222")
    sample = source.sample()
    assert sample is not None
    assert [(g.index, g.mig_index) for g in sample.gpus] == [(0, None), (0, 0), (0, 2)]
    whole, a, b = sample.gpus
    assert whole.process_bytes == {} and whole.util_percent is None
    assert a.process_bytes == {31: 9 * GIB} and a.used_bytes == 10 * GIB and a.util_percent is None
    assert sample.gpu_used_bytes() == 11 * GIB  # the instances are inside the parent's figure
    assert (whole.cuda_index, a.cuda_index, b.cuda_index) == (None, None, 0)
    assert "MIG" in source.status().message
    assert b.label == "GPU 0 MIG 2 NVIDIA A100 MIG 3g.40gb"


def test_cuda_visible_devices_mapping() -> None:
    devices = [(0, "GPU-aaaa-0", None), (1, "GPU-bbbb-1", None), (2, "GPU-cccc-2", None)]
    assert cuda_visible_map(devices, None) == {(0, None): 0, (1, None): 1, (2, None): 2}
    assert cuda_visible_map(devices, "2,0") == {(2, None): 0, (0, None): 1}
    assert cuda_visible_map(devices, "GPU-bbbb") == {(1, None): 0}  # a unique UUID prefix names a GPU
    assert cuda_visible_map(devices, "0,7,1") == {(0, None): 0}  # CUDA stops at the first invalid entry
    assert cuda_visible_map(devices, "") == {}
    assert cuda_visible_map(devices, "GPU-") == {}  # ambiguous prefix
    assert cuda_visible_map(devices, "1,1") == {(1, None): 0}
    source = NvmlSource(FakeDriver(two_gpus()).module(), cuda_visible_devices="1")
    first, second = source.sample().gpus  # type: ignore[union-attr]
    assert first.cuda_index is None and second.cuda_index == 0
    assert cuda_order_warning(["A", "B"], {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}) is None
    assert cuda_order_warning(["A", "A"], {}) is None
    assert cuda_order_warning(["A", "B"], {}) is not None


def test_tree_gpu_bytes_sums_the_tree_pids_over_gpus() -> None:
    sample = NvmlSource(FakeDriver(two_gpus()).module()).sample()
    assert sample is not None
    host = HostReading(ram_used=1, ram_total=2, swap_used=0, swap_total=0, tree_rss=5, tree_pids=(4242, 777))
    with_host = Sample(sample.t, sample.gpus, host)
    assert with_host.tree_gpu_bytes() == 9 * GIB + 200 * MIB
    assert with_host.tree_gpu_bytes([5000]) == 512 * MIB
    assert with_host.tree_gpu_bytes([99999]) == 0
    assert Sample(0.0, (), host).tree_gpu_bytes() is None  # no GPU figures at all: unknown, not zero


def test_every_gpu_total_for_the_estimator_default() -> None:
    """`vramtui estimate` with no --gpu-mem sizes every GPU NVML sees; none without NVML."""
    from vramtui.core.memory.nvml import gpu_total_bytes

    assert gpu_total_bytes(FakeDriver(two_gpus()).module()) == (24 * GIB, 48 * GIB)
    assert gpu_total_bytes(FakeDriver([], init_error=real.NVML_ERROR_LIBRARY_NOT_FOUND).module()) == ()
