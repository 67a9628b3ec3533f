"""The bill of a run vramtui launched, reconciled: the estimate as it stood at launch (calibrated by earlier
runs, as `vramtui estimate` is), the buffers the engine printed, and the memory measured per device.

The estimate is made in a thread when the server starts, so it never delays the launch, and before this
run's own record joins the calibration store (a run must not calibrate the estimate it is checked against).
"""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Any

from vramtui.core.memory.parts import MemoryBill, bill_from_figures
from vramtui.core.memory.reconcile import Reconciliation, measured_peaks, reconcile


class LaunchEstimate:
    """The estimator's bill for a model and its settings (the shared parameter names of a profile, or of
    a command line read back), made in the background; `result()` waits for it."""

    def __init__(
        self,
        model: str,
        params: dict[str, Any],
        backend: str,
        on_gpu: bool,
        device_bytes: int | None,
        engine_build: int | None = None,
        host_budget: int | None = None,
    ) -> None:
        self.bill: MemoryBill | None = None
        self.note = ""
        self.engine_build = engine_build  # the build the run's engine is (vLLM's minor version), if known
        # a host budget (the launcher's address-space cap) the run is sized under, as `estimate
        # --memory-budget` sizes it (QA 33 V8: check's column read 1.6 GiB of runtime where estimate said 1.9)
        self.host_budget = host_budget
        args = (model, params, backend, on_gpu, device_bytes)
        self._thread = threading.Thread(target=self._make, args=args, name="vramtui-estimate", daemon=True)
        self._thread.start()

    def _make(
        self, model: str, params: dict[str, Any], backend: str, on_gpu: bool, device_bytes: int | None
    ) -> None:
        from vramtui.core.backends import get_backend
        from vramtui.core.estimate.calibrate import calibration_for
        from vramtui.core.estimate.estimator import Settings, estimate
        from vramtui.core.estimate.modelinfo import load_model_info

        try:
            info = load_model_info(model)
            if not on_gpu and device_bytes is None:
                # a CPU run's "card" is this machine's RAM, as `estimate --cpu` sizes it (QA 15: the bill
                # sized vLLM's share of a 24 GiB card, 21.5 GiB of KV where the engine printed 21.06)
                from vramtui.core.estimate.inputs import cpu_run_card

                device_bytes = cpu_run_card()
            settings = Settings.from_params(params, backend=backend, device_bytes=device_bytes)
            settings = replace(settings, on_gpu=on_gpu, engine_build=self.engine_build)
            if not on_gpu and self.host_budget and device_bytes and get_backend(backend).cpu_share_words:
                # its cache is a share of the whole machine, the budget caps each process's address space
                settings = replace(settings, device_bytes=self.host_budget, share_of_bytes=device_bytes)
            calibration, notes = calibration_for(settings)
            settings.calibration = calibration
            self.bill = estimate(info, settings).bill
            uncalibrated = "uncalibrated (no earlier run here matches this engine, device and settings)"
            why = next((note for note in notes if note.startswith("not calibrated")), uncalibrated)
            self.note = calibration.describe() if calibration is not None else why
        except Exception as error:  # an estimate that cannot be made must never take the run down
            self.note = f"no estimate: {error}"

    def result(self, timeout_s: float = 30.0) -> tuple[MemoryBill | None, str]:
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            return None, "no estimate: the estimator took too long"
        return self.bill, self.note


def run_bill(
    launched: LaunchEstimate | None,
    figures: dict[str, Any],
    samples: list[Any],
    pids: Any = None,
    failed: bool = False,
) -> Reconciliation | None:
    """The estimate, the printout and the measurement of one run side by side (None: nothing to set)."""
    measured = measured_peaks(samples, pids)
    estimate_bill, note = launched.result() if launched is not None else (None, "no estimate")
    printed = bill_from_figures(figures)
    if not any(isinstance(place, int) for place in measured):
        printed = printed.on_host()  # nothing on a card: what it printed sits in host RAM
    if estimate_bill is None and not printed.places and not measured:
        return None
    return reconcile(estimate_bill, printed, measured, note, failed=failed)
