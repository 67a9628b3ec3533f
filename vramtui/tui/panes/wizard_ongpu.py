"""The wizard pane's on-GPU goal: offered when the log's diagnosis says "runs but slow" (layers or
experts on the host CPU), planned from that log (core/wizard/ongpu.py) with the profile's model file
when the app has one, and applied by the CLI's `--goal on-gpu --auto` (relaunch, verify, record)."""

from __future__ import annotations

from typing import Any

from vramtui.core.errors import VramtuiError


def on_gpu_lines(diagnosis: Any, profile: Any = None, profile_path: str | None = None) -> list[str]:
    """The plan in lines for the pane; a log that cannot be planned says why in one line."""
    from vramtui.core.wizard.ongpu import plan_from_figures, plan_on_gpu, settings_from_figures

    figures = getattr(diagnosis, "engine_figures", None) or {}
    backend = getattr(diagnosis, "backend", None) or "llama.cpp"
    try:
        model = getattr(profile, "model", None)
        if model:
            from vramtui.core.estimate.modelinfo import load_model_info

            plan = plan_on_gpu(load_model_info(model), settings_from_figures(figures, backend))
        else:
            plan = plan_from_figures(figures, backend)
    except VramtuiError as error:
        return [f"On-GPU goal: cannot plan from this log: {error}"]
    lines = ["On-GPU goal (the fastest setup that keeps every layer on the GPU):", *plan.lines()]
    if plan.chosen is not None or plan.fits_as_is:
        where = profile_path or "PROFILE"
        lines.append(f"apply, relaunch and verify it: vramtui wizard {where} --goal on-gpu --auto")
    return [line for line in lines if line]
