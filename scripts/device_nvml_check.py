"""One short check of the real NVML path on a machine with an NVIDIA GPU (run once when one is lent).

    python scripts/device_nvml_check.py            # prints one JSON object, exit 0 when all checks hold

Allocates about 2 GiB with torch, samples through NvmlSource (device used, per-process bytes of this
pid, process tree), frees it, samples again; meanwhile a 10 Hz Sampler feeds a PeakHistory so the
allocation shows as a peak. Needs torch (CUDA build), nvidia-ml-py and psutil; vramtui is imported
from this checkout.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

MIB = 1024**2
SIZE = 2 * 1024**3


def main() -> int:
    report: dict[str, object] = {"pid": os.getpid(), "checks": {}}
    checks: dict[str, bool] = report["checks"]  # type: ignore[assignment]
    try:
        import torch

        from vramtui.core.memory.history import PeakHistory
        from vramtui.core.memory.sampling import HostSource, NvmlSource, Sampler, measure_process_tree
    except ImportError as error:
        print(json.dumps({"error": f"missing module: {error}"}))
        return 2

    nvml = NvmlSource()
    status = nvml.status()
    report["status"] = {"ok": status.ok, "message": status.message}
    if not status.ok:
        print(json.dumps(report, indent=2))
        return 1
    report["cuda_available"] = torch.cuda.is_available()
    device = torch.device("cuda:0")
    torch.zeros(1, device=device)  # create the CUDA context first: it has its own few hundred MiB
    torch.cuda.synchronize()
    time.sleep(0.5)

    def reading(label: str) -> dict[str, object]:
        sample = nvml.sample()
        assert sample is not None
        gpus = [
            {
                "index": g.index,
                "mig_index": g.mig_index,
                "cuda_index": g.cuda_index,
                "name": g.name,
                "uuid": g.uuid,
                "used_mib": None if g.used_bytes is None else round(g.used_bytes / MIB, 1),
                "reserved_mib": None if g.reserved_bytes is None else round(g.reserved_bytes / MIB, 1),
                "total_mib": None if g.total_bytes is None else round(g.total_bytes / MIB, 1),
                "util_percent": g.util_percent,
                "this_pid_mib": None
                if os.getpid() not in g.process_bytes
                else round(g.process_bytes[os.getpid()] / MIB, 1),
                "processes": len(g.process_bytes) + len(g.unknown_pids),
                "unknown_pids": list(g.unknown_pids),
                "processes_note": g.processes_note,
                "error": g.error,
            }
            for g in sample.gpus
        ]
        tree = measure_process_tree(os.getpid(), nvml)
        return {
            "label": label,
            "gpus": gpus,
            "tree_rss_mib": None if tree.rss_bytes is None else round(tree.rss_bytes / MIB, 1),
            "tree_gpu_mib": None if tree.gpu_bytes is None else round(tree.gpu_bytes / MIB, 1),
        }

    history = PeakHistory(capacity=512, factor=4)
    ours = os.getpid()

    def on_sample(sample) -> None:  # GPU bytes NVML charges to this process, 10 times a second
        value = sum(g.process_bytes.get(ours, 0) for g in sample.gpus)
        history.add(sample.t, value)

    sampler = Sampler([nvml, HostSource(ours)], interval_s=0.1, on_sample=on_sample)
    before = reading("context only")
    sampler.start()
    time.sleep(0.5)
    block = torch.empty(SIZE, dtype=torch.uint8, device=device)
    block.fill_(1)
    torch.cuda.synchronize()
    time.sleep(1.0)
    during = reading("2 GiB allocated")
    del block
    torch.cuda.empty_cache()
    torch.cuda.synchronize()
    time.sleep(1.0)
    after = reading("freed")
    sampler.stop()
    report["readings"] = [before, during, after]
    report["probe"] = {
        "memory_v2": nvml.api._probe.memory_v2,
        "process_functions": nvml.api._probe.process_functions,
        "driver": nvml.api.driver_version,
    }
    report["sampler"] = {"samples": sampler.count, "errors": sampler.errors}
    report["history_peak_mib"] = None if history.peak is None else round(history.peak / MIB, 1)
    report["history_last_mib"] = None if history.last is None else round(history.last / MIB, 1)
    # The device torch used: CUDA ordinal 0 (a MIG instance when CUDA_VISIBLE_DEVICES names one).
    g0 = next((g for g in during["gpus"] if g["cuda_index"] == 0), during["gpus"][0])  # type: ignore[index]

    def same(readings: dict[str, object]) -> dict[str, object]:
        return next(
            g for g in readings["gpus"] if (g["index"], g["mig_index"]) == (g0["index"], g0["mig_index"])
        )  # type: ignore[attr-defined, index]

    b0, a0 = same(before), same(after)
    rise = (g0["used_mib"] or 0) - (b0["used_mib"] or 0)
    fall = (g0["used_mib"] or 0) - (a0["used_mib"] or 0)
    checks["device_used_rises_about_2GiB"] = 1900 <= rise <= 2300
    checks["device_used_falls_back_after_free"] = 1900 <= fall <= 2300
    if g0["this_pid_mib"] is not None:
        checks["this_pid_rises_about_2GiB"] = 1900 <= g0["this_pid_mib"] - (b0["this_pid_mib"] or 0) <= 2300
        checks["history_holds_the_peak"] = (report["history_peak_mib"] or 0) >= (g0["this_pid_mib"] or 0) - 1
    checks["tree_gpu_bytes_known"] = during["tree_gpu_mib"] is not None
    report["ok"] = all(checks.values())
    print(json.dumps(report, indent=2))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
