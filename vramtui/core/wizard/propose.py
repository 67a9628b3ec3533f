"""The guided downgrade: launch, diagnose, propose ONE change, relaunch, verify, record — until it runs.

The loop joins the other engines: the launcher runs the profile (an injected callable, by default
`launcher.run_check`), the log diagnosis says where it stopped, the estimator — corrected by the
buffer sizes the engine printed and by what earlier runs proved about the budget — picks the value
that should fit with the margin, and the ladders (`vramtui.core.wizard.ladders`) say which parameter comes
next. Every step is verified before the next: did it get further, did the log confirm the change
(n_ctx, the KV type, the file type), did the memory move as predicted? A change that did not take
effect stops the loop with that finding instead of walking further down the ladder.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import itertools
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vramtui.core.backends import Backend, get_backend, kv_dtype_name, switch
from vramtui.core.errors import VramtuiError
from vramtui.core.launch.profile import Profile
from vramtui.core.logs.stages import STAGES
from vramtui.core.units import MIB
from vramtui.core.wizard.ladders import (
    GGUF_QUANT_ORDER,
    KV_DTYPE_ORDER,
    MEMORY_FAILURES,
    NOT_MEMORY,
    QUANT_ORDER,
    Rung,
    ladder_for,
    quantized_v_needs_flash_attn,
)
from vramtui.core.wizard.steprecord import StepRecorder, new_record_path

# What the engine process itself takes from a host budget before any model buffer (measured here:
# llama-cpp-python's server holds 290-380 MiB of address space besides its buffers: Python, numpy,
# uvicorn, thread stacks and malloc arenas; llama-server far less).
HOST_BASELINE_BYTES: dict[str, int] = {
    "llama-cpp-python": 352 * MIB,
    "llama.cpp": 96 * MIB,
    "ollama": 128 * MIB,
}
DEFAULT_MARGIN = 0.9  # a proposal must fit in 90% of what is left for buffers

Runner = Callable[[Profile], Any]


# --- what one run showed ---------------------------------------------------------------------------


_FIGURE_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("model_buffer", re.compile(r"model buffer size\s*=\s*([\d.]+)\s*MiB", re.I)),
    ("kv_buffer", re.compile(r"KV buffer size\s*=\s*([\d.]+)\s*MiB", re.I)),
    ("compute_buffer", re.compile(r"^(?!.*~).*compute buffer size\s*=\s*([\d.]+)\s*MiB", re.I)),
)
_ATTEMPT = re.compile(r"failed to allocate (?:CPU |CUDA\d* |\w+ )?buffer of size (\d+)", re.I)
_ATTEMPT_MB = re.compile(r"attempted to allocate\s+([\d.]+)\s*MB", re.I)
_N_CTX = re.compile(r"llama_context:\s*n_ctx\s*=\s*(\d+)")
_FILE_TYPE = re.compile(r"file type\s*=\s*(\S+)", re.I)
_FLASH = re.compile(r"llama_context:\s*flash_attn\s*=\s*(\w+)")
_KV_TYPE = re.compile(r"K \((\w+)\):.*V \((\w+)\):")


def read_log_facts(text: str) -> tuple[dict[str, int], dict[str, str]]:
    """Byte figures and settings llama.cpp printed: what verification compares between runs.

    Figures: model_buffer, kv_buffer, compute_buffer (summed over devices), failed_alloc (the
    allocation that did not fit). Facts: n_ctx, file_type, flash_attn, kv_type.
    """
    figures: dict[str, int] = {}
    facts: dict[str, str] = {}
    for line in text.splitlines():
        if "buffer size" in line:
            for name, pattern in _FIGURE_PATTERNS:
                match = pattern.search(line)
                if match:
                    figures[name] = figures.get(name, 0) + int(float(match.group(1)) * MIB)
        if "allocate" in line:
            exact = _ATTEMPT.search(line)
            if exact:
                figures["failed_alloc"] = int(exact.group(1))
            elif "failed_alloc" not in figures:
                approx = _ATTEMPT_MB.search(line)
                if approx:
                    figures["failed_alloc"] = int(float(approx.group(1)) * MIB)
        for key, pattern in (("n_ctx", _N_CTX), ("file_type", _FILE_TYPE), ("flash_attn", _FLASH)):
            match = pattern.search(line)
            if match:
                facts[key] = match.group(1).lower()
        kv = _KV_TYPE.search(line)
        if kv:
            facts["kv_type"] = kv.group(2).lower()
        if "mmap failed" in line.lower():
            facts["mmap_failed"] = "1"
    return figures, facts


@dataclass
class Observation:
    """One run, as the wizard reasons about it."""

    ready: bool
    smoke_ok: bool | None
    stage: str | None
    failure_stage: str | None
    failure: str | None
    first_error: str | None = None
    figures: dict[str, int] = field(default_factory=dict)
    facts: dict[str, str] = field(default_factory=dict)
    engine: dict[str, int] = field(default_factory=dict)  # the diagnosis' engine_figures, as they are
    replay_ok: bool | None = None  # the saved (long) request, when one was replayed
    unsupported: list[str] = field(default_factory=list)  # parameters the launcher could not pass on
    replay_meaning: str = ""
    advice: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    peak_mib: float | None = None
    resident_mib: float | None = None
    load_time_s: float | None = None
    ttft_s: float | None = None
    tokens_per_s: float | None = None
    log_file: str | None = None
    command: list[str] = field(default_factory=list)
    message: str = ""

    @property
    def works(self) -> bool:
        """Up, answering the smallest request, and the saved failing request too when one was replayed."""
        return self.ready and bool(self.smoke_ok) and self.replay_ok is not False

    @property
    def reached(self) -> int:
        """How far it got, as a number: the failing stage's index, or past `ready` when it answered."""
        if self.works:
            return len(STAGES) + 1
        if self.ready:
            return STAGES.index("ready")
        stage = self.failure_stage or self.stage
        return STAGES.index(stage) if stage in STAGES else -1

    @property
    def signature(self) -> tuple[object, ...]:
        """Where and how it failed, with every size the engine printed: equal means nothing changed."""
        return (
            self.failure_stage,
            self.failure,
            tuple(sorted(self.figures.items())),
            tuple(sorted(self.engine.items())),
        )

    @property
    def has_sizes(self) -> bool:
        return bool(self.figures or self.engine)

    def allocated_bytes(self) -> int:
        """What the engine had allocated (printed) plus the allocation that failed."""
        return sum(
            self.figures.get(k, 0) for k in ("model_buffer", "kv_buffer", "compute_buffer", "failed_alloc")
        )


# Our figure name -> the diagnosis' engine_figures key (bytes).
_ENGINE_FIGURE_NAMES = {
    "model_buffer": "model_buffer",
    "weights_loaded": "weights_loaded",  # vLLM's "Loading model weights took X GiB"
    "kv_buffer": "kv_buffer",
    "compute_buffer": "compute_buffer",
    "failed_alloc": "oom_requested",
}


def observe(check: Any) -> Observation:
    """Turn a CheckResult (or anything shaped like one) into an Observation, reading its log file."""
    diagnosis = getattr(check, "diagnosis", None)
    smoke = getattr(check, "smoke", None)
    replayed = getattr(check, "replay", None)
    figures: dict[str, int] = {}
    facts: dict[str, str] = {}
    log_file = getattr(check, "log_file", None)
    if log_file and Path(log_file).is_file():
        # Startup logs are small; a runaway one is read from its tail, where the failure is.
        with open(log_file, "rb") as handle:
            handle.seek(0, 2)
            size = handle.tell()
            handle.seek(max(0, size - 8 * MIB))
            figures, facts = read_log_facts(handle.read().decode("utf-8", "replace"))
    # The diagnosis' figures fill what the log file could not give (a run without a log file).
    engine = getattr(diagnosis, "engine_figures", None) or {}
    for name, theirs in _ENGINE_FIGURE_NAMES.items():
        value = engine.get(theirs)
        if isinstance(value, int | float) and value > 0 and name not in figures:
            figures[name] = int(value)
    failure = getattr(check, "failure", None)
    if failure in ("none", ""):
        failure = None
    return Observation(
        ready=bool(getattr(check, "ready", False)),
        smoke_ok=None if smoke is None else bool(getattr(smoke, "ok", False)),
        replay_ok=None if replayed is None else bool(getattr(replayed, "ok", False)),
        replay_meaning=str(getattr(replayed, "meaning", "") or ""),
        unsupported=[str(p) for p in getattr(check, "unsupported", None) or []],
        stage=getattr(check, "stage", None),
        failure_stage=getattr(check, "failure_stage", None),
        failure=failure,
        first_error=getattr(diagnosis, "first_error_text", None),
        figures=figures,
        facts=facts,
        engine={
            k: int(v) for k, v in engine.items() if isinstance(v, int | float) and not isinstance(v, bool)
        },
        advice=list(getattr(diagnosis, "advice", None) or []),
        warnings=list(getattr(diagnosis, "warnings", None) or [])
        + list(getattr(check, "warnings", None) or []),
        peak_mib=getattr(check, "peak_mib", None),
        resident_mib=getattr(check, "resident_mib", None),
        load_time_s=getattr(check, "load_time_s", None),
        ttft_s=getattr(check, "ttft_s", None),
        tokens_per_s=getattr(check, "tokens_per_s", None),
        log_file=log_file,
        command=list(getattr(check, "command", None) or []),
        message=str(getattr(check, "message", "") or ""),
    )


# --- predicting a footprint ------------------------------------------------------------------------


@dataclass(frozen=True)
class Footprint:
    """Bytes a configuration needs from the budget, by part (the engine's own overhead apart)."""

    weights: int
    kv: int
    compute: int
    extra: int = 0  # the engine's own per-context arrays (llama-cpp-python's logits/ids)

    @property
    def total(self) -> int:
        return self.weights + self.kv + self.compute + self.extra

    def describe(self) -> str:
        parts = [
            ("weights", self.weights),
            ("KV", self.kv),
            ("compute", self.compute),
            ("arrays", self.extra),
        ]
        return ", ".join(f"{name} {value / MIB:.0f}" for name, value in parts if value) + " MiB"


def _int_param(profile: Profile, backend: Backend, name: str, fallback: int) -> int:
    value = profile.params.get(name, backend.defaults.get(name, fallback))
    try:
        return int(value)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return fallback


def current_value(profile: Profile, param: str) -> object:
    """The value a parameter has in a run of this profile: the profile's, else the engine's default."""
    backend = get_backend(profile.backend)
    if param == "model":
        return profile.model
    if param in profile.params:
        return profile.params[param]
    if param == "flash_attn":
        return False
    if param == "gpu_layers":
        return 0 if backend.name == "llama-cpp-python" else "all"
    return backend.defaults.get(param)


class MemoryModel:
    """The estimator, corrected by what earlier runs measured.

    Each part (weights, KV, compute) is scaled by measured/estimated from the last run that printed it;
    the room the engine process leaves for buffers is learned from failures (what it had plus what it
    could not get is more than the room) and successes (what it held fitted).
    """

    def __init__(
        self, profile: Profile, margin: float = DEFAULT_MARGIN, device_bytes: int | None = None
    ) -> None:
        self.backend = get_backend(profile.backend)
        self.margin = margin
        self.host = self.host_budget(profile)
        # The budget: the profile's, else (a GPU run) the card's own memory.
        self.budget = profile.memory_budget or (None if self.host else device_bytes or _first_gpu_bytes())
        self.overhead = 512 * MIB  # the engine's own share of a GPU (CUDA context...): the estimator's figure
        self.factors: dict[str, float] = {}
        self.room_upper: int | None = None  # room for buffers is below this (a failure proved it)
        self.room_lower: int | None = None  # room is at least this (a success proved it)
        self._info_cache: dict[str, Any] = {}
        self.available = True
        self.why_unavailable = ""

    # The estimator is imported lazily: the wizard still proposes (by halving) when it is missing.
    def info(self, model: str) -> Any | None:
        if model not in self._info_cache:
            try:
                try:
                    from vramtui.core.estimate.estimator import load_model_info
                except ImportError:
                    from vramtui.core.estimate.modelinfo import load_model_info

                self._info_cache[model] = load_model_info(model)
            except Exception as error:
                self._info_cache[model] = None
                self.why_unavailable = f"no estimate for {Path(model).name}: {error}"
        return self._info_cache[model]

    def raw(self, profile: Profile) -> Footprint | None:
        info = self.info(profile.model)
        if info is None:
            return None
        try:
            from vramtui.core.estimate.estimator import Settings, estimate
        except ImportError as error:
            self.why_unavailable = f"estimator not available: {error}"
            return None
        backend = self.backend
        context = _int_param(profile, backend, "context", int(getattr(info, "max_context", None) or 4096))
        gpu_layers = current_value(profile, "gpu_layers")
        wanted: dict[str, object] = {
            "backend": backend.accounting if backend.accounting != "llama.cpp" else "llama.cpp",
            "context": context,
            "parallel": _int_param(profile, backend, "parallel", 1),
            "batch": _int_param(profile, backend, "batch", 512),
            "ubatch": _int_param(profile, backend, "ubatch", 512),
            "kv_dtype": kv_dtype_name(current_value(profile, "kv_dtype") or "f16"),
            "flash_attn": switch(current_value(profile, "flash_attn") or False) is True,
            "gpu_layers": None if str(gpu_layers) in ("all", "-1", "None") else int(gpu_layers),  # type: ignore[call-overload]
            "quant": profile.params.get("quant"),
        }
        if self.budget:
            wanted["device_bytes"] = self.budget
        if self.host_budget(profile):
            wanted["on_gpu"] = False  # a CPU run: no CUDA context, weights in host RAM
        accepted = inspect.signature(Settings).parameters
        try:
            result = estimate(info, Settings(**{k: v for k, v in wanted.items() if k in accepted}))
        except Exception as error:
            self.why_unavailable = f"estimator failed: {error}"
            return None
        weights = int(getattr(result, "weights_bytes", 0) or 0)
        overhead = getattr(result, "overhead_bytes", None)
        if isinstance(overhead, int) and overhead > 0:
            self.overhead = overhead
        if self.host_budget(profile):
            weights += int(getattr(result, "weights_host_bytes", 0) or 0)
        extra = 0
        if backend.name == "llama-cpp-python":
            # Its server keeps logits for every position (logits_all) plus the token ids, per context.
            vocab = int(getattr(info, "vocab", 0) or 0)
            extra = context * (vocab * 4 + 4)
        return Footprint(
            weights=weights,
            kv=int(getattr(result, "kv_cache_bytes", 0) or 0),
            compute=int(getattr(result, "activations_bytes", 0) or 0),
            extra=extra,
        )

    def host_budget(self, profile: Profile) -> bool:
        """A budget on the host process (everything counts) rather than a GPU's (only what sits there)."""
        # As the launcher decides: no GPU to watch, or no layer on it, and the cap is the address space.
        gpu_layers = str(current_value(profile, "gpu_layers"))
        return gpu_layers == "0" or _first_gpu_bytes() is None

    def predict(self, profile: Profile) -> Footprint | None:
        raw = self.raw(profile)
        if raw is None:
            return None
        key = f"compute:{switch(current_value(profile, 'flash_attn') or False) is True}"
        weights_factor = self.factors.get(f"weights:{profile.model}", 1.0)
        return Footprint(
            weights=int(raw.weights * weights_factor),
            kv=int(raw.kv * self.factors.get("kv", 1.0)),
            compute=int(raw.compute * self.factors.get(key, 1.0)),
            extra=raw.extra,
        )

    def baseline(self) -> int:
        if not self.host:
            return self.overhead
        return HOST_BASELINE_BYTES.get(self.backend.name, 256 * MIB)

    def room(self) -> int | None:
        """Bytes left for the model's buffers under the budget, as far as we know."""
        if not self.budget:
            return None
        room = self.budget - self.baseline()
        if self.room_upper is not None:
            room = min(room, self.room_upper)
        if self.room_lower is not None:
            room = max(room, self.room_lower)
        return room

    def fits(self, footprint: Footprint) -> bool | None:
        room = self.room()
        if room is None:
            return None
        return footprint.total <= room * self.margin

    def learn(self, profile: Profile, obs: Observation) -> None:
        """Fold one run's measurements into the corrections."""
        raw = self.raw(profile)
        figures = obs.figures
        if raw is not None:
            pairs = (
                (f"weights:{profile.model}", "model_buffer", raw.weights),
                ("kv", "kv_buffer", raw.kv),
                (
                    f"compute:{switch(current_value(profile, 'flash_attn') or False) is True}",
                    "compute_buffer",
                    raw.compute,
                ),
            )
            for key, figure, estimated in pairs:
                measured = figures.get(figure)
                if measured and estimated > MIB:
                    self.factors[key] = min(2.0, max(0.5, measured / estimated))
        extra = raw.extra if raw is not None else 0
        if obs.works:
            held = sum(figures.get(k, 0) for k in ("model_buffer", "kv_buffer", "compute_buffer")) + extra
            self.room_lower = max(self.room_lower or 0, held)
        elif obs.failure in MEMORY_FAILURES or "oom" in str(obs.failure):
            attempted = obs.allocated_bytes()
            if "failed_alloc" not in figures and raw is not None and obs.failure_stage == "load_weights":
                attempted = max(attempted, raw.weights)  # an mmap that failed prints no size
            if attempted:
                self.room_upper = attempted if self.room_upper is None else min(self.room_upper, attempted)


# --- proposals and steps -----------------------------------------------------------------------------


@dataclass
class Proposal:
    param: str
    from_: object
    to: object
    why: str
    rung: str = ""
    knob: str | None = None
    predicted_mib: float | None = None
    advice_only: bool = False
    # Set when this step only prepares the next (flash attention before a quantized V cache).
    then: tuple[str, object] | None = None

    def edited(self, value: object) -> Proposal:
        return dataclasses.replace(self, to=value, why=self.why + f" (edited by the user to {value})")

    def to_dict(self) -> dict[str, Any]:
        return {
            "param": self.param,
            "from": self.from_,
            "to": self.to,
            "why": self.why,
            "rung": self.rung,
            "knob": self.knob,
            "predicted_mib": None if self.predicted_mib is None else round(self.predicted_mib, 1),
            "advice_only": self.advice_only,
        }

    def describe(self) -> str:
        knob = f" ({self.knob})" if self.knob else ""
        return f"{self.param}{knob}: {self.from_} → {self.to} — {self.why}"


@dataclass
class Step:
    index: int
    proposal: Proposal | None
    outcome: str  # first_run | works | progress | no_progress | not_applied | worse | error
    observation: Observation | None
    notes: list[str] = field(default_factory=list)
    profile_params: dict[str, object] = field(default_factory=dict)
    model: str = ""

    @property
    def counts_as_progress(self) -> bool:
        return self.outcome in ("works", "progress")

    def to_dict(self) -> dict[str, Any]:
        obs = self.observation
        proposal = self.proposal
        data: dict[str, Any] = {
            "step": self.index,
            "param": proposal.param if proposal else None,
            "from": proposal.from_ if proposal else None,
            "to": proposal.to if proposal else None,
            "why": proposal.why if proposal else "first launch of the profile as given",
            "outcome": self.outcome,
            "stage": (obs.stage if obs else None),
            "failure_stage": obs.failure_stage if obs else None,
            "failure": obs.failure if obs else None,
            "first_error": obs.first_error if obs else None,
            "ready": obs.ready if obs else False,
            "smoke_ok": obs.smoke_ok if obs else None,
            "resident_mib": obs.resident_mib if obs else None,
            "peak_mib": obs.peak_mib if obs else None,
            "load_time_s": obs.load_time_s if obs else None,
            "ttft_s": obs.ttft_s if obs else None,
            "tokens_per_s": obs.tokens_per_s if obs else None,
            "log_file": obs.log_file if obs else None,
            "predicted_mib": proposal.predicted_mib if proposal else None,
            "engine_figures_mib": {k: round(v / MIB, 2) for k, v in (obs.figures if obs else {}).items()},
            "verification": self.notes,
            "params": self.profile_params,
            "model": self.model,
        }
        return data


@dataclass
class WizardResult:
    success: bool
    steps: list[Step]
    final_profile: Profile
    reason: str = ""
    advice: list[str] = field(default_factory=list)
    pending: Proposal | None = None  # proposed but not applied (declined, or no terminal to ask)
    record_path: Path | None = None

    @property
    def relaunches(self) -> int:
        """Launches after the first one."""
        return sum(1 for step in self.steps if step.index > 0 and step.observation is not None)

    def to_dict(self) -> dict[str, Any]:
        first = next((s for s in self.steps if s.index == 0), None)
        final = self.final_profile
        return {
            "success": self.success,
            "reason": self.reason,
            "first_run": first.to_dict() if first else None,
            "steps": [s.to_dict() for s in self.steps if s.index > 0],
            "relaunches": self.relaunches,
            "final_params": dict(final.params),
            "final_model": final.model,
            "final_profile": final.to_dict(),
            "advice": self.advice,
            "pending": self.pending.to_dict() if self.pending else None,
            "record": str(self.record_path) if self.record_path else None,
        }


def _nice_below(current: int, floor: int = 512) -> list[int]:
    """Round context sizes below `current`, largest first: powers of two and 1.5× powers of two."""
    values = set()
    power = 256
    while power < current:
        values.update((power, power * 3 // 2))
        power *= 2
    return sorted((v for v in values if floor <= v < current), reverse=True)


_QUANT_TAG = re.compile(
    r"(?i)(?<![a-z0-9])(f32|bf16|f16|fp16|q\d(?:_k)?(?:_[a-z0-9]+)?|iq\d_[a-z]+)(?![a-z0-9])"
)


def sibling_files(model: str) -> list[tuple[str, str]]:
    """Other quantizations of the same GGUF next to it: [(quant, path)], largest quant first."""
    path = Path(model)
    match = _QUANT_TAG.search(path.stem)
    if not match or not path.parent.is_dir():
        return []
    prefix, suffix = path.stem[: match.start()], path.stem[match.end() :]
    found: list[tuple[str, str]] = []
    for other in path.parent.glob("*.gguf"):
        if other.resolve() == path.resolve():
            continue
        m = _QUANT_TAG.search(other.stem)
        if not m or other.stem[: m.start()] != prefix or other.stem[m.end() :] != suffix:
            continue
        quant = m.group(1).lower().replace("fp16", "f16")
        if quant in GGUF_QUANT_ORDER:
            found.append((quant, str(other)))
    return sorted(found, key=lambda item: GGUF_QUANT_ORDER.index(item[0]))


def _quant_of(model: str) -> str | None:
    match = _QUANT_TAG.search(Path(model).stem)
    return match.group(1).lower().replace("fp16", "f16") if match else None


class Wizard:
    """One change at a time until the profile runs. `runner(profile)` returns a CheckResult-shaped object."""

    def __init__(
        self,
        profile: Profile,
        record_path: str | Path | None = None,
        auto: bool = False,
        runner: Runner | None = None,
        margin: float = DEFAULT_MARGIN,
        on_step: Callable[[Step], None] | None = None,
        on_start: Callable[[Any], None] | None = None,
        ladders: dict[str, tuple[Rung, ...]] | None = None,
        record: bool = True,
        device_bytes: int | None = None,
        replay: dict[str, object] | None = None,
    ) -> None:
        self.profile = profile
        self.start_profile = profile
        self.auto = auto
        self.backend = get_backend(profile.backend)
        self.model = MemoryModel(profile, margin, device_bytes)
        self.on_step = on_step
        self.on_start = on_start
        self.ladders = ladders
        self.steps: list[Step] = []
        self.last: Observation | None = None
        self.record_path: Path | None = None
        self.recorder: StepRecorder | None = None
        self.advice: list[str] = []
        self.stop_reason = ""
        self.failing_stage: str | None = None
        self.skipped: list[Proposal] = []  # proposals the user turned down: their settings stay as they are
        self._runner = runner
        self._ended = False  # the record's end line is written
        # A saved chat request (the long one that failed at inference): every run replays it.
        self.replay = replay
        if record:
            self.record_path = Path(record_path) if record_path else new_record_path(profile.label)
            self.recorder = StepRecorder(self.record_path)
            self.recorder.append(
                "session",
                profile=profile.to_dict(),
                params=dict(profile.params),
                auto=auto,
                margin=margin,
            )

    # --- running --------------------------------------------------------------------------------------

    def _run(self, profile: Profile) -> Observation:
        if self._runner is not None:
            check = self._runner(profile)
        else:
            from vramtui.core.launch.launcher import run_check

            check = run_check(profile, on_start=self._started, replay=self.replay)
        return observe(check)

    def _started(self, server: Any) -> None:
        if self.recorder is not None:
            self.recorder.append("process", step=len(self.steps), pid=getattr(server, "pid", None))
        if self.on_start is not None:
            self.on_start(server)

    def _record(self, step: Step) -> None:
        self.steps.append(step)
        if self.recorder is not None:
            self.recorder.append("step", **step.to_dict())
        if self.on_step is not None:
            self.on_step(step)

    def start(self) -> Step:
        """The first launch, as the profile is: step 0."""
        if self.steps:
            return self.steps[0]
        if self.recorder is not None:
            self.recorder.append("step_start", step=0, param=None, why="first launch")
        try:
            obs = self._run(self.profile)
        except VramtuiError as error:
            step = Step(0, None, "error", None, [str(error)], dict(self.profile.params), self.profile.model)
            self._record(step)
            self.stop_reason = str(error)
            return step
        self.model.learn(self.profile, obs)
        self.last = obs
        step = Step(0, None, "works" if obs.works else "first_run", obs, [], dict(self.profile.params))
        step.model = self.profile.model
        self._record(step)
        return step

    # --- proposing ------------------------------------------------------------------------------------

    @property
    def skipped_params(self) -> set[str]:
        """Settings the user asked to leave alone (a step that prepares another skips that one too)."""
        params = {proposal.param for proposal in self.skipped}
        params.update(proposal.then[0] for proposal in self.skipped if proposal.then is not None)
        return params

    def skip(self, proposal: Proposal) -> None:
        """The user turns this proposal down: it is recorded as skipped, nothing is launched, and
        `propose` offers the next rung that changes another setting."""
        self.skipped.append(proposal)
        if self.recorder is not None and not self.recorder.closed:
            self.recorder.append("skip", step=len(self.steps), **proposal.to_dict())

    def propose(self) -> Proposal | None:
        """The next single change, or None (it works, or no memory setting can help: see `advice`)."""
        if self.last is None:
            self.start()
        obs = self.last
        if obs is None or obs.works:
            return None
        if self.steps and self.steps[-1].outcome == "not_applied":
            # Going further down the ladder would stack changes on a setting that is not reaching the
            # engine: stop here and say so.
            notes = self.steps[-1].notes
            self.stop_reason = notes[0] if notes else "the last change did not take effect"
            return None
        stage = self._failing_stage(obs)
        if stage is None:
            return None
        rungs = list(self.ladders.get(stage, ())) if self.ladders else ladder_for(stage, self.backend)
        skipped = self.skipped_params
        if skipped:
            rungs = [r for r in rungs if r.move == "advice" or r.param not in skipped]
        if stage == "inference":
            return self._inference_proposal(rungs, obs)
        options: list[tuple[Rung, Proposal, Footprint | None]] = []
        # When the cache does not fit because the weights take the room, a smaller file helps too:
        # after its own rungs, the kv_cache ladder looks at the weights' rungs (one change still).
        fallback = (
            ladder_for("load_weights", self.backend) if stage == "kv_cache" and not self.ladders else []
        )
        seen = {(r.param, r.move) for r in rungs}
        fallback = [r for r in fallback if (r.param, r.move) not in seen and r.param not in skipped]
        for rung in [*rungs, *fallback]:
            if rung.move == "advice":
                continue
            proposal, footprint = self._best_value(rung, obs)
            if proposal is None:
                continue
            if footprint is not None and self.model.fits(footprint):
                return proposal
            options.append((rung, proposal, footprint))
        if options:
            now = self.model.predict(self.profile)
            # Changes the arithmetic says free nothing are no step at all.
            predicted = [
                o for o in options if o[2] is not None and (now is None or o[2].total < 0.98 * now.total)
            ]
            if predicted:
                # Nothing fits in one step: take the change that frees most, then look again.
                _, proposal, footprint = min(predicted, key=lambda o: o[2].total)  # type: ignore[union-attr]
                proposal.why += " — not enough alone; the next step continues"
                return proposal
            unpredicted = [o for o in options if o[2] is None]
            if unpredicted:
                return unpredicted[0][1]
        self.advice = [f"{r.label}: {r.cost}" for r in rungs if r.move == "advice"] or self.advice
        self.stop_reason = (
            f"no setting left on the {stage} ladder that this backend can change and that frees memory"
            + (f" (skipped: {', '.join(sorted(skipped))})" if skipped else "")
        )
        return None

    def _inference_proposal(self, rungs: list[Rung], obs: Observation) -> Proposal | None:
        """A request failed on a running server: the start-up arithmetic does not see a request's peak,
        so each rung halves its value, and the saved request (when given) tells whether it now passes."""
        for rung in rungs:
            if rung.move == "advice":
                continue
            current = current_value(self.profile, rung.param)
            candidates = self._candidates(rung, current)
            if not candidates:
                continue
            value = _cautious(rung.param, current, candidates)
            why = (
                f"the server runs but a request failed at inference ({obs.failure}"
                + (f": {obs.replay_meaning}" if obs.replay_meaning else "")
                + f"); halving {rung.param} lowers the memory each step of a request takes; cost: {rung.cost}"
            )
            return Proposal(rung.param, current, value, why, rung.label, rung.knob(self.backend))
        self.advice = [f"{r.label}: {r.cost}" for r in rungs if r.move == "advice"]
        self.stop_reason = "no setting left on the inference ladder that this backend can change"
        return None

    def _failing_stage(self, obs: Observation) -> str | None:
        if obs.ready and obs.smoke_ok and obs.replay_ok is False:
            failure = str(obs.failure or "")
            if "context_too_long" in failure:
                self.advice = [
                    "the saved request is longer than the context: raise context and free the memory "
                    "elsewhere (KV cache type, concurrency), or shorten the input",
                    *obs.advice,
                ]
                self.stop_reason = "the saved request does not fit the context: lowering memory will not help"
                return None
            # It starts and answers a short request, but the long one fails: the inference ladder.
            return "inference"
        if obs.ready and obs.smoke_ok is False:
            if obs.failure in MEMORY_FAILURES or "oom" in str(obs.failure):
                return "inference"
            self.advice = [obs.message or "the server is up but the smallest request failed", *obs.advice]
            self.stop_reason = "the server came up but did not answer; not a memory problem"
            return None
        failure = obs.failure or ""
        memory = failure in MEMORY_FAILURES or "oom" in failure
        if not memory:
            hint = NOT_MEMORY.get(failure, NOT_MEMORY["other"])
            self.advice = [hint, *obs.advice]
            self.stop_reason = f"{failure or 'unknown'} failure: not a memory problem, no memory ladder helps"
            return None
        stage = obs.failure_stage or obs.stage
        if stage not in ("load_weights", "kv_cache", "inference"):
            stage = _stage_from_facts(obs)
        self.failing_stage = stage
        return stage

    def _footprint_with(self, changes: dict[str, object]) -> tuple[Profile, Footprint | None]:
        profile = self.profile
        for param, value in changes.items():
            profile = (
                profile.with_changes(model=str(value))
                if param == "model"
                else profile.with_param(param, value)
            )
        return profile, self.model.predict(profile)

    def _best_value(self, rung: Rung, obs: Observation) -> tuple[Proposal | None, Footprint | None]:
        """The least drastic value of this rung that should fit (else its most drastic)."""
        param = rung.param
        current = current_value(self.profile, param)
        candidates = self._candidates(rung, current)
        if not candidates:
            return None, None
        knob = rung.knob(self.backend)
        before = self.model.predict(self.profile)
        best: tuple[object, Footprint | None, dict[str, object]] | None = None
        for value in candidates:
            changes: dict[str, object] = {param: value}
            if (
                param == "kv_dtype"
                and quantized_v_needs_flash_attn(self.backend, value)
                and switch(current_value(self.profile, "flash_attn") or False) is not True
            ):
                changes["flash_attn"] = True
            _, footprint = self._footprint_with(changes)
            fits = self.model.fits(footprint) if footprint is not None else None
            if fits is None:
                # No arithmetic (no estimate, or no budget known): a cautious step, and the why says so.
                cautious = _cautious(param, current, candidates)
                best = (cautious, None, {**changes, param: cautious})
                break
            best = (value, footprint, changes)
            if fits:
                break
        assert best is not None
        value, footprint, changes = best
        room = self.model.room()
        why = self._why(rung, obs, current, value, before, footprint, room)
        if "flash_attn" in changes and param == "kv_dtype":
            # llama.cpp refuses a quantized V cache without flash attention: that comes first, alone.
            flash_knob = self.backend.knob("flash_attn")
            why = (
                f"llama.cpp needs flash attention for a quantized V cache; turning it on first, "
                f"then the KV cache type goes {current} → {value}. " + why
            )
            return (
                Proposal(
                    "flash_attn",
                    current_value(self.profile, "flash_attn"),
                    True,
                    why,
                    "flash attention on (needed for a quantized KV cache)",
                    flash_knob,
                    footprint.total / MIB if footprint else None,
                    then=(param, value),
                ),
                footprint,
            )
        return (
            Proposal(
                param, current, value, why, rung.label, knob, footprint.total / MIB if footprint else None
            ),
            footprint,
        )

    def _candidates(self, rung: Rung, current: object) -> list[object]:
        param = rung.param
        backend = self.backend
        if param == "context":
            try:
                now = int(current)  # type: ignore[call-overload]
            except (TypeError, ValueError):
                return []
            return list(_nice_below(now))
        if param in ("parallel", "batch", "ubatch"):
            try:
                now = int(current)  # type: ignore[call-overload]
            except (TypeError, ValueError):
                return []
            if param == "ubatch":  # powers of two: what llama.cpp's kernels are tuned for
                return [v for v in (256, 128, 64, 32) if v < now]
            return sorted({max(1, now * k // 8) for k in range(7, 0, -1)} - {now}, reverse=True)
        if param == "kv_dtype":
            order = KV_DTYPE_ORDER.get(backend.accounting, ())
            name = kv_dtype_name(current or "f16")
            if name not in order:
                return []
            return [t for t in order[order.index(name) + 1 :] if t in backend.kv_dtypes]
        if param == "flash_attn":
            return [] if switch(current or False) is True else [True]
        if param == "mem_share":
            share = float(current or 0.9)  # type: ignore[arg-type]
            return [v for v in (0.92, 0.95) if v > share]
        if param == "gpu_layers":
            if str(current) in ("0", "None"):
                return []
            info = self.model.info(self.profile.model)
            n_layers = int(getattr(info, "n_layers", 0) or 0)
            now = n_layers if str(current) in ("all", "-1", "999") else int(current)  # type: ignore[call-overload]
            return list(range(now - 1, -1, -1))
        if param == "quant":
            order = QUANT_ORDER.get(backend.accounting)
            if not order or backend.knob("quant") is None:
                return []
            now = current if current in order else None
            return list(order[order.index(now) + 1 :])
        if param == "model":
            mine = _quant_of(self.profile.model)
            if mine not in GGUF_QUANT_ORDER:
                return []
            rank = GGUF_QUANT_ORDER.index(mine)
            return [
                path
                for quant, path in sibling_files(self.profile.model)
                if GGUF_QUANT_ORDER.index(quant) > rank
            ]
        return []

    def _why(
        self,
        rung: Rung,
        obs: Observation,
        current: object,
        value: object,
        before: Footprint | None,
        after: Footprint | None,
        room: int | None,
    ) -> str:
        parts: list[str] = []
        where = self.failing_stage or obs.failure_stage or obs.stage or "start-up"
        attempt = obs.figures.get("failed_alloc")
        if attempt:
            parts.append(f"it failed at {where}: the engine could not allocate {attempt / MIB:.0f} MiB")
        elif obs.first_error:
            parts.append(f"it failed at {where}: {obs.first_error.strip()[:160]}")
        else:
            parts.append(f"it failed at {where} ({obs.failure})")
        if after is not None and room is not None:
            fits = after.total <= room * self.model.margin
            verdict = "fits" if fits else "still does not fit"
            shown = Path(str(value)).name if rung.param == "model" else value
            budget = (self.model.budget or 0) / MIB
            if before is not None:
                parts.append(f"as it is it needs about {before.total / MIB:.0f} MiB")
            parts.append(
                f"~{room / MIB:.0f} MiB of the {budget:.0f} MiB budget are left for buffers; with "
                f"{rung.param} = {shown} it needs about {after.total / MIB:.0f} MiB ({after.describe()}) — "
                f"{verdict} with the {round((1 - self.model.margin) * 100)}% margin"
            )
        elif after is None:
            parts.append(f"no estimate ({self.model.why_unavailable or 'no budget known'}): a cautious step")
        if rung.cost:
            parts.append(f"cost: {rung.cost}")
        return "; ".join(parts)

    # --- applying and verifying ----------------------------------------------------------------------

    def apply(self, proposal: Proposal) -> Step:
        """Relaunch with this one change, verify it, record it."""
        index = len(self.steps)
        if proposal.advice_only:
            step = Step(
                index,
                proposal,
                "advice",
                None,
                ["advice only: nothing to relaunch"],
                dict(self.profile.params),
            )
            self._record(step)
            return step
        if proposal.param == "model":
            candidate = self.profile.with_changes(model=str(proposal.to))
        else:
            candidate = self.profile.with_param(proposal.param, proposal.to)
        if self.recorder is not None:
            self.recorder.append(
                "step_start",
                step=index,
                param=proposal.param,
                **{"from": proposal.from_, "to": proposal.to},
                why=proposal.why,
            )
        if proposal.then is None:
            # The user may have edited the value: predict for what is really launched.
            footprint = self.model.predict(candidate)
            proposal.predicted_mib = footprint.total / MIB if footprint is not None else None
        previous = self.last
        before_profile = self.profile
        try:
            obs = self._run(candidate)
        except VramtuiError as error:
            step = Step(index, proposal, "error", None, [str(error)], dict(candidate.params), candidate.model)
            self._record(step)
            self.stop_reason = str(error)
            return step
        outcome, notes = self.verify(proposal, previous, obs, before_profile, candidate)
        if outcome != "not_applied":
            self.profile = candidate
            self.model.learn(candidate, obs)
            self.last = obs
        step = Step(index, proposal, outcome, obs, notes, dict(candidate.params), candidate.model)
        self._record(step)
        return step

    def verify(
        self,
        proposal: Proposal,
        before: Observation | None,
        after: Observation,
        before_profile: Profile,
        after_profile: Profile,
    ) -> tuple[str, list[str]]:
        """Did the change take effect, did it get further, did the memory move as predicted, does it answer?"""
        notes: list[str] = []
        applied, reason = self._took_effect(proposal, before, after, before_profile, after_profile)
        if not applied:
            notes.append(f"the change did not take effect: {reason}")
            return "not_applied", notes
        if reason:
            notes.append(reason)
        if proposal.param == "model":
            expected = _quant_of(str(proposal.to))
            seen = after.facts.get("file_type")
            if seen and expected:
                notes.append(f"quantization confirmed in the log: file type {seen}")
        if before is not None and before.peak_mib and after.peak_mib:
            notes.append(f"peak memory {before.peak_mib:.0f} → {after.peak_mib:.0f} MiB")
        predicted = proposal.predicted_mib
        measured = after.allocated_bytes() / MIB
        if predicted is not None and measured:
            notes.append(
                f"predicted ~{predicted:.0f} MiB for the buffers; the engine printed {measured:.0f} MiB"
            )
        if after.works:
            notes.append("it runs: the smallest chat request answered")
            if after.replay_ok:
                notes.append("the saved failing request now passes")
            if after.warnings:
                notes.append("warnings: " + "; ".join(after.warnings[:3]))
            return "works", notes
        if after.ready and after.smoke_ok is False:
            notes.append("the server came up but the smallest chat request failed")
        if after.ready and after.smoke_ok and after.replay_ok is False:
            notes.append(f"the saved request still fails: {after.replay_meaning or after.failure}")
        if before is None:
            return "progress", notes
        if proposal.then is not None:
            # A prerequisite (flash attention before a quantized V cache): it frees nothing by itself.
            notes.append(f"prepares the next step: {proposal.then[0]} → {proposal.then[1]}")
            return "progress", notes
        if after.reached > before.reached:
            notes.append(f"got further: now fails at {after.failure_stage or after.stage}")
            return "progress", notes
        if after.reached < before.reached:
            notes.append(f"got less far than before: fails at {after.failure_stage or after.stage}")
            return "worse", notes
        if after.allocated_bytes() < before.allocated_bytes():
            notes.append(
                f"same stage, but it asks for less: {after.allocated_bytes() / MIB:.0f} MiB "
                f"instead of {before.allocated_bytes() / MIB:.0f} MiB"
            )
            return "progress", notes
        notes.append("fails at the same place asking for no less memory")
        return "no_progress", notes

    def _took_effect(
        self,
        proposal: Proposal,
        before: Observation | None,
        after: Observation,
        before_profile: Profile,
        after_profile: Profile,
    ) -> tuple[bool, str]:
        facts = after.facts
        param, value = proposal.param, proposal.to
        if param in after.unsupported:
            said = next(
                (w for w in after.warnings if param in w), f"{self.backend.name} has no {param} setting"
            )
            return False, f"the launcher could not pass {param} on: {said}"
        # First what the engine said about the setting itself.
        if param == "context" and "n_ctx" in facts:
            if int(facts["n_ctx"]) != int(value):  # type: ignore[call-overload]
                overridden = _overridden_by_extra(after_profile, self.backend, param)
                return False, (
                    f"asked for context {value}, the log shows n_ctx = {facts['n_ctx']}"
                    + (f" ({overridden})" if overridden else " (a setting elsewhere overrides it)")
                )
            return True, f"the log confirms n_ctx = {facts['n_ctx']}"
        if param == "kv_dtype" and "kv_type" in facts:
            if facts["kv_type"] != kv_dtype_name(value):
                return False, f"asked for a {value} KV cache, the log shows {facts['kv_type']}"
            return True, f"the log confirms a {facts['kv_type']} KV cache"
        if param == "flash_attn" and "flash_attn" in facts:
            wanted = "enabled" if switch(value) is True else "disabled"
            if facts["flash_attn"] not in (wanted, "auto"):
                return False, f"asked for flash attention {wanted}, the log shows {facts['flash_attn']}"
            return True, f"the log confirms flash_attn = {facts['flash_attn']}"
        if param == "model" and "file_type" in facts:
            expected = _quant_of(str(value))
            if expected and facts["file_type"] != expected:
                return (
                    False,
                    f"switched to a {expected} file but the log shows file type {facts['file_type']}",
                )
            if before is not None and before.facts.get("file_type") == facts["file_type"]:
                return False, f"the log shows the same file type ({facts['file_type']}) as before"
        if param == "quant":
            unconfirmed = [w for w in after.warnings if "quantiz" in w.lower() and "confirm" in w.lower()]
            if unconfirmed:
                return False, f"asked for {value} quantization; the log never confirmed it ({unconfirmed[0]})"
        # Then the curve: an identical failure with identical figures means nothing changed.
        if before is None or after.works:
            return True, ""
        predicted_before = self.model.predict(before_profile)
        predicted_after = self.model.predict(after_profile)
        expected_move = (
            predicted_before is not None
            and predicted_after is not None
            and abs(predicted_before.total - predicted_after.total) > 0.05 * max(predicted_before.total, 1)
        )
        same_failure = after.signature == before.signature and after.reached == before.reached
        if same_failure and not after.has_sizes:
            # No sizes printed (a run stopped at the budget from outside): the sampled curve decides.
            peaks = (before.peak_mib, after.peak_mib)
            same_failure = all(peaks) and abs(peaks[0] - peaks[1]) <= 0.02 * max(peaks)  # type: ignore[operator,type-var]
            if not all(peaks):
                return True, "could not verify the change: no sizes in the log and no memory curve"
        if same_failure and (expected_move or predicted_after is None):
            peak_note = ""
            if before.peak_mib and after.peak_mib:
                peak_note = f"; peak {before.peak_mib:.0f} → {after.peak_mib:.0f} MiB"
            overridden = _overridden_by_extra(after_profile, self.backend, param)
            cause = overridden or "the setting is ignored, unsupported or overridden"
            return False, (
                f"the same failure with the same allocation sizes after changing {param}{peak_note}: {cause}"
            )
        return True, ""

    # --- the loop ------------------------------------------------------------------------------------

    def run(
        self,
        max_steps: int = 8,
        confirm: Callable[[Proposal], Proposal | None] | None = None,
    ) -> WizardResult:
        """Launch, then propose/apply until it runs, `max_steps` changes were made, or nothing is left.

        `confirm(proposal)` returns the proposal to apply (possibly edited) or None to stop; with
        `auto` every proposal is applied.
        """
        pending: Proposal | None = None
        try:
            first = self.start()
            if first.outcome == "error":
                return self._finish(False, None)
            changes = 0
            stalls = 0
            while self.last is not None and not self.last.works:
                if changes >= max_steps:
                    self.stop_reason = f"stopped after {max_steps} changes"
                    break
                proposal = self.propose()
                if proposal is None:
                    break
                if not self.auto:
                    decided = confirm(proposal) if confirm is not None else None
                    if decided is None:
                        pending = proposal
                        self.stop_reason = (
                            "proposed but not applied (declined, or no terminal to ask: --auto applies it)"
                        )
                        break
                    proposal = decided
                step = self.apply(proposal)
                changes += 1
                if step.outcome == "error":
                    break
                if step.outcome == "not_applied":
                    self.stop_reason = step.notes[0] if step.notes else "the change did not take effect"
                    self.advice = [
                        f"check how {self.backend.name} receives {proposal.param}: extra_args or env in the "
                        "profile, a config file, or a build that ignores it",
                    ]
                    break
                stalls = stalls + 1 if step.outcome in ("no_progress", "worse") else 0
                if stalls >= 2:
                    self.stop_reason = "two changes in a row did not help"
                    break
            success = self.last is not None and self.last.works
            if success:
                self.stop_reason = "it runs and answers the smallest chat request"
            return self._finish(success, pending)
        finally:
            if self.recorder is not None and not self.recorder.closed and not self._ended:
                self.recorder.append(
                    "end", success=False, reason="interrupted", final_params=dict(self.profile.params)
                )
                self.recorder.close()

    def finish(self) -> WizardResult:
        """End a session driven step by step (start/propose/apply): write the record's end line."""
        if self._ended:
            return WizardResult(
                bool(self.last and self.last.works), list(self.steps), self.profile, self.stop_reason,
                list(self.advice), None, self.record_path,
            )  # fmt: skip
        success = self.last is not None and self.last.works
        if success:
            self.stop_reason = "it runs and answers the smallest chat request"
        return self._finish(success, None)

    def _finish(self, success: bool, pending: Proposal | None) -> WizardResult:
        result = WizardResult(
            success=success,
            steps=list(self.steps),
            final_profile=self.profile,
            reason=self.stop_reason,
            advice=list(self.advice),
            pending=pending,
            record_path=self.record_path,
        )
        if self.recorder is not None:
            self.recorder.append(
                "end",
                success=success,
                reason=self.stop_reason,
                final_params=dict(self.profile.params),
                final_model=self.profile.model,
                final_profile=self.profile.to_dict(),
                advice=self.advice,
                pending=pending.to_dict() if pending else None,
            )
            self.recorder.close()
            self._ended = True
        return result


def _cautious(param: str, current: object, candidates: list[object]) -> object:
    """Without arithmetic: half the context, batch or concurrency (the nearest value), else the next down."""
    if param in ("context", "batch", "ubatch", "parallel"):
        try:
            half = int(current) // 2  # type: ignore[call-overload]
        except (TypeError, ValueError):
            return candidates[0]
        return next((c for c in candidates if int(c) <= half), candidates[-1])  # type: ignore[call-overload]
    return candidates[0]


@functools.cache
def _first_gpu_bytes() -> int | None:
    """Total memory of the first GPU NVML sees (None without NVML: the normal state on CPU machines)."""
    try:
        from vramtui.core.memory.nvml import NvmlApi
    except ImportError:
        return None
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


def _stage_from_facts(obs: Observation) -> str:
    """The failing stage from llama.cpp's own words when the diagnosis named none."""
    if obs.facts.get("mmap_failed") or ("kv_buffer" not in obs.figures and "model_buffer" not in obs.figures):
        return "load_weights"
    return "kv_cache"


def _overridden_by_extra(profile: Profile, backend: Backend, param: str) -> str:
    """Say so when the profile's extra_args or env set the same knob again (they come last and win)."""
    flag = backend.flag(param)
    if flag and flag in profile.extra_args:
        position = profile.extra_args.index(flag)
        value = profile.extra_args[position + 1] if position + 1 < len(profile.extra_args) else ""
        return f"extra_args in the profile pass {flag} {value} after it and win"
    env_name = backend.env.get(param)
    if env_name and env_name in profile.env:
        return f"the profile's env sets {env_name}={profile.env[env_name]}"
    return ""


# --- the stress check ------------------------------------------------------------------------------


@dataclass
class StressResult:
    """N requests of the longest expected input, the memory floor after each, and whether it climbs."""

    requests: int
    answered: int
    input_tokens: int
    floors_mib: list[float]
    peak_mib: float
    rising: bool
    verdict: str
    failures: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.answered == self.requests and not self.rising

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "requests": self.requests,
            "answered": self.answered,
            "input_tokens": self.input_tokens,
            "floors_mib": [round(v, 1) for v in self.floors_mib],
            "peak_mib": round(self.peak_mib, 1),
            "rising": self.rising,
            "verdict": self.verdict,
            "failures": self.failures,
        }


def rising_floor(floors: list[float], tolerance_mib: float = 8.0) -> bool:
    """A floor that climbs: the memory left after each request keeps growing (a leak or a cache that
    never gives back), by more than `tolerance_mib` over the run and never falling back."""
    if len(floors) < 3:
        return False
    steps = [b - a for a, b in itertools.pairwise(floors)]
    return floors[-1] - floors[0] > tolerance_mib and all(step > -1.0 for step in steps)


def stress_check(
    profile: Profile,
    requests: int = 5,
    input_tokens: int | None = None,
    max_tokens: int = 8,
    timeout_s: float = 300.0,
) -> StressResult:
    """Launch `profile`, send `requests` chat requests of `input_tokens` tokens one after another while
    the launcher samples the process tree, and flag a rising floor. The server is stopped at the end."""
    import httpx

    from vramtui.core.launch import procs
    from vramtui.core.launch.launcher import ModelServer

    context = int(
        profile.params.get("context") or get_backend(profile.backend).defaults.get("context") or 2048
    )  # type: ignore[call-overload]
    # The longest input that leaves room for the answer and the chat template's own tokens.
    tokens = input_tokens if input_tokens is not None else max(16, context - max_tokens - 64)
    floors: list[float] = []
    failures: list[str] = []
    answered = 0
    peak = 0
    with ModelServer(profile) as server:  # entering starts it; leaving stops it, always
        if not server.wait_ready(profile.ready_timeout or 120):
            raise VramtuiError("the stress check could not start the server: run the wizard first")
        # The demo's byte-level vocabulary makes one token per character; real tokenizers give fewer.
        body = {
            "model": server.plan.model_name,
            "messages": [{"role": "user", "content": ("a " * tokens)[: max(1, tokens)]}],
            "max_tokens": max_tokens,
        }
        with httpx.Client(timeout=timeout_s) as client:
            for number in range(requests):
                try:
                    reply = client.post(f"{server.base_url}/v1/chat/completions", json=body)
                    if reply.status_code == 200:
                        answered += 1
                    else:
                        failures.append(f"request {number + 1}: HTTP {reply.status_code} {reply.text[:120]}")
                except httpx.HTTPError as error:
                    failures.append(f"request {number + 1}: {type(error).__name__}: {error}")
                    if not server.running:
                        break
                if server.pid is not None:
                    floors.append(procs.tree_rss(server.pid) / MIB)
                peak = max(peak, server.peak_bytes)
    rising = rising_floor(floors)
    if failures:
        verdict = f"{len(failures)} of {requests} requests failed: {failures[0]}"
    elif rising:
        verdict = (
            f"the memory floor climbs: {floors[0]:.0f} → {floors[-1]:.0f} MiB over {len(floors)} requests"
        )
    else:
        verdict = f"{answered} requests of {tokens} tokens answered; the floor stays level"
    return StressResult(requests, answered, tokens, floors, peak / MIB, rising, verdict, failures)
