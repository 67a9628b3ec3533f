"""The on-GPU goal, applied: the one change plan_on_gpu chose, relaunched, verified and recorded.

After the first launch (the run that was "runs but slow", or any run given a card size), the profile
gets the plan's one change (with every layer on the GPU where the profile had fewer), the server is
launched again (run_check), and the relaunch is judged on three things: the change reached the engine
(the log echoes the new n_ctx or KV type: verify.took_effect), every layer is on the device now (the
log's `offloaded N/N layers`, and no "runs but slow" warning), and the tokens per second measured
before and after. Both launches are steps of a wizard record (steprecord.py), so `vramtui wizard
RECORD.jsonl` and its Markdown/CSV exports show them like any other session.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vramtui.core.backends.base import is_all
from vramtui.core.launch.profile import Profile
from vramtui.core.wizard.budget import MemoryModel
from vramtui.core.wizard.observe import Observation, observe
from vramtui.core.wizard.ongpu import GOAL, SLOW, OnGpuPlan
from vramtui.core.wizard.proposal import Proposal
from vramtui.core.wizard.steprecord import StepRecorder, new_record_path
from vramtui.core.wizard.verify import took_effect
from vramtui.core.wizard.wizard import Step

Runner = Callable[[Profile], Any]  # a profile -> a CheckResult (run_check)


def all_layers_on_device(
    figures: Mapping[str, float], warnings: list[str] | tuple[str, ...] = ()
) -> bool | None:
    """Every layer on the device: the log's `offloaded N/N layers` (Ollama: layers.offload = layers.model)
    and no "runs but slow" warning (experts or weights in host buffers). None: the log does not say
    (a build without a GPU backend prints no offload line)."""
    on_gpu, total = figures.get("layers_offloaded"), figures.get("layers_total")
    if not total:
        return None
    if on_gpu is None or on_gpu < total:
        return False
    return not any(str(warning).startswith(SLOW) for warning in warnings)


def on_gpu_change(plan: OnGpuPlan, profile: Profile) -> dict[str, object]:
    """The parameters the plan changes: its chosen one (and what must come with it), and every layer on
    the GPU where the profile kept fewer. Empty: nothing to apply."""
    changes: dict[str, object] = {}
    if plan.chosen is not None:
        changes[plan.chosen.param] = plan.chosen.to
        changes.update(plan.chosen.also)
    layers = profile.params.get("gpu_layers")
    if layers is not None and not is_all(layers) and profile.backend.offloads_layers:
        changes["gpu_layers"] = "all"
    return changes


@dataclass
class OnGpuOutcome:
    plan: OnGpuPlan
    changes: dict[str, object]
    before: Observation
    after: Observation | None = None
    applied: bool = False  # the change reached the engine (the relaunched log shows it)
    all_on_device: bool | None = None  # the relaunch, as its log shows it
    notes: list[str] = field(default_factory=list)
    record_path: Path | None = None
    profile: Profile | None = None  # the profile with the change

    nothing_to_change: bool = False  # every layer fits as the profile stands: reached without a relaunch

    @property
    def success(self) -> bool:
        if self.nothing_to_change:
            return self.before.works
        return bool(self.after and self.after.works and self.applied and self.all_on_device is not False)

    def to_dict(self) -> dict[str, Any]:
        after = self.after
        return {
            "goal": GOAL,
            "applied_changes": dict(self.changes),
            "success": self.success,
            "change_took_effect": self.applied,
            "all_layers_on_device": self.all_on_device,
            "tokens_per_s_before": self.before.tokens_per_s,
            "tokens_per_s_after": after.tokens_per_s if after else None,
            "layers_before": _layers(self.before),
            "layers_after": _layers(after) if after else None,
            "verification": list(self.notes),
            "record": str(self.record_path) if self.record_path else None,
            "final_params": dict(self.profile.params) if self.profile else None,
        }


def _layers(obs: Observation) -> str | None:
    on_gpu, total = obs.engine.get("layers_offloaded"), obs.engine.get("layers_total")
    return f"{on_gpu}/{total}" if total is not None and on_gpu is not None else None


def _proposal(plan: OnGpuPlan, changes: dict[str, object], profile: Profile) -> Proposal:
    param = plan.chosen.param if plan.chosen else "gpu_layers"
    why = plan.chosen.describe() if plan.chosen else plan.reason
    return Proposal(param, profile.params.get(param), changes[param], f"{GOAL}: {why}", rung=GOAL)


def _judge(
    outcome: OnGpuOutcome, proposal: Proposal, before_profile: Profile, after_profile: Profile
) -> None:
    before, after = outcome.before, outcome.after
    assert after is not None
    applied, reason = took_effect(
        MemoryModel(after_profile), proposal, before, after, before_profile, after_profile
    )
    outcome.applied = applied
    outcome.notes.append(reason if applied else f"the change did not take effect: {reason}")
    outcome.all_on_device = all_layers_on_device(after.engine, after.warnings)
    layers = _layers(after)
    outcome.notes.append(
        {
            True: f"every layer on the GPU now (offloaded {layers})",
            False: f"still not every layer on the GPU (offloaded {layers or '?'}, or weights in host buffers)",
            None: "the log does not say where the layers are (this build prints no offload line: no GPU backend)",
        }[outcome.all_on_device]
    )
    if before.tokens_per_s and after.tokens_per_s:
        outcome.notes.append(f"tokens per second {before.tokens_per_s:.1f} → {after.tokens_per_s:.1f}")
    elif not after.works:
        outcome.notes.append(f"the relaunch does not run: {after.failure or after.message or 'no answer'}")


def apply_on_gpu(
    profile: Profile,
    plan: OnGpuPlan,
    first: Any,
    runner: Runner | None = None,
    record_path: str | Path | None = None,
) -> OnGpuOutcome:
    """Apply the plan's change to `profile`, relaunch, verify, record; `first` is the first launch's
    CheckResult. Nothing to apply: the outcome says so, and no relaunch happens."""
    before = observe(first)
    changes = on_gpu_change(plan, profile)
    outcome = OnGpuOutcome(plan, changes, before)
    path = Path(record_path) if record_path else new_record_path(profile.label)
    outcome.record_path = path
    with StepRecorder(path) as recorder:
        recorder.append(
            "session", profile=profile.to_dict(), params=dict(profile.params), auto=True, goal=GOAL
        )
        recorder.append(
            "step", **Step(0, None, "first_run", before, [], dict(profile.params), profile.model).to_dict()
        )
        if not changes:
            # QA 39 F12: every layer fits and the profile asks for them all already: nothing to change is
            # the answer, not a failure (it read exit 1 beside "put them all on the GPU")
            outcome.nothing_to_change = plan.fits_as_is
            said = (
                "nothing to change: the profile already asks for every layer on the GPU"
                if plan.fits_as_is
                else ""
            )
            outcome.notes.append(said or plan.reason or "nothing to change")
            recorder.append(
                "end", success=outcome.success, reason=outcome.notes[-1], final_params=dict(profile.params)
            )
            return outcome
        changed = profile.with_changes(params={**profile.params, **changes})
        outcome.profile = changed
        proposal = _proposal(plan, changes, profile)
        recorder.append("step_start", step=1, param=proposal.param, why=proposal.why)
        if runner is None:
            from vramtui.core.launch.launcher import run_check

            runner = run_check
        outcome.after = observe(runner(changed))
        _judge(outcome, proposal, profile, changed)
        result = "works" if outcome.success else ("not_applied" if not outcome.applied else "no_progress")
        step = Step(
            1, proposal, result, outcome.after, list(outcome.notes), dict(changed.params), changed.model
        )
        recorder.append("step", **step.to_dict())
        reason = "every layer on the GPU and it answers" if outcome.success else outcome.notes[-1]
        if outcome.success and outcome.all_on_device is None:
            reason = "it answers with the change; the log does not say where the layers are"
        recorder.append("end", success=outcome.success, reason=reason, final_params=dict(changed.params))
    return outcome


__all__ = ["OnGpuOutcome", "all_layers_on_device", "apply_on_gpu", "on_gpu_change"]
