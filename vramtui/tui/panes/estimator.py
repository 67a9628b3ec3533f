"""The estimator pane: a form whose breakdown bar and verdict update as you type.

The arithmetic is `core.estimator.estimate`; model files are read by `core.modelinfo.load_model_info`
in a thread (a config.json without weights may import transformers to count parameters).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Grid, Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.timer import Timer
from textual.widget import Widget
from textual.widgets import Input, Label, Select, Static

from vramtui.core.backends import BACKENDS as ENGINES
from vramtui.core.errors import VramtuiError
from vramtui.core.estimate.inputs import BARE_FLAGS, FLAG_FIELDS, FLAGS
from vramtui.core.memory.parts import HOST, PARTS, Part, part_label
from vramtui.core.units import GIB, format_bytes
from vramtui.tui.palette import theme_style
from vramtui.tui.panes.base import Pane

# Every engine the estimator sizes, as `estimate --backend` names them (llama-cpp-python's server has its
# own defaults: one sequence, a 2048 context, flash attention off).
BACKENDS = tuple(ENGINES)
# auto: the backend's own choice (its default KV type; llama.cpp turns flash attention on where the GPU
# supports it), as the CLI's defaults.
AUTO = "auto"
KV_DTYPES = (AUTO, "f16", "bf16", "fp8", "q8_0", "q4_0")
FLASH_ATTN = (AUTO, "on", "off")
# "cpu": what the engine allocates on a CPU-only run (no CUDA context or workspaces), as the demo runs.
RUNS_ON = ("gpu", "cpu")
# "grid": which quantization x context fits (core/estimate/grid.py), as `vramtui estimate --table`.
VIEWS = ("breakdown", "grid")
DEFAULT_CARD = "24GiB"
# Fields the form cannot do without (the others, context and parallel too, are the backend's own when
# empty: the same defaults as `vramtui estimate`).
REQUIRED = ("card",)

# The theme variable that colours each memory part (core/memory/parts.py), in the order they stack.
PART_COLOURS: dict[Part, str] = {
    "weights": "stage-load-weights",
    "kv_cache": "stage-kv-cache",
    "recurrent_state": "stage-kv-cache",
    "compute": "stage-inference",
    "output": "stage-inference",
    "runtime": "stage-download",
    "cuda_graphs": "stage-download",
    "margin": "log-gutter",
}


def _flags_of(params: dict[str, Any]) -> str:
    """A profile's extras as the form's "extras" field spells them (`--mmproj F --n-cpu-moe 4`)."""
    import shlex

    words: list[str] = []
    named = {**params, "cpu_offload_gb": params.get("cpu_offload")}
    for name in FLAG_FIELDS:
        value = named.get(name)
        if value in (None, "", False, 0):  # unset, off, or the engine's own default
            continue
        if name in BARE_FLAGS:  # switches: the bare flag when on (QA 10: "--enforce-eager True")
            if str(value).strip().lower() in ("1", "true", "on", "yes"):
                words.append(FLAGS[name])
            continue
        for one in (
            value if isinstance(value, list | tuple) and name in ("lora", "override_tensor") else [value]
        ):
            text = ",".join(map(str, one)) if isinstance(one, list | tuple) else str(one)
            words += [FLAGS[name], shlex.quote(text)]
    return " ".join(words)


@dataclass(frozen=True)
class FieldSpec:
    name: str
    label: str
    placeholder: str
    value: str = ""


FIELDS = (
    FieldSpec("model", "model", "path: .gguf, HF folder, config.json — or the numbers below"),
    FieldSpec("params", "params", "e.g. 8B"),
    FieldSpec("layers", "layers", "e.g. 32"),
    FieldSpec("kv_heads", "KV heads", "e.g. 8"),
    FieldSpec("head_dim", "head dim", "e.g. 128"),
    FieldSpec("quant", "quant", "q4_k_m, q8_0, nf4…"),  # whole at 80 columns
    FieldSpec("context", "context", "engine default (tokens)"),
    FieldSpec("parallel", "parallel", "engine default"),
    FieldSpec("gpu_layers", "GPU layers", "all"),
    FieldSpec("card", "card mem", "e.g. 24GiB", DEFAULT_CARD),
    # What rides along and where tensors go, as the engine's own flags (core/estimate/inputs.split_flags)
    FieldSpec("extras", "extras", "--mmproj F --model-draft F --lora F --cache-ram MiB --n-cpu-moe N …"),
)


class InfoLoaded(Message):
    def __init__(self, path: str, info: Any, error: str | None) -> None:
        super().__init__()
        self.path = path
        self.info = info
        self.error = error


def _select_field(name: str, label: str, options: tuple[str, ...]) -> Vertical:
    # AUTO reads "default", as the wizard words an unset setting (QA: "flash attn auto" beside the
    # wizard's "off" for llama-cpp-python, whose default is off)
    select: Select[str] = Select(
        [("default" if option == AUTO else option, option) for option in options],
        value=options[0],
        allow_blank=False,
        id=f"est-{name}",
        compact=True,
    )
    return Vertical(Horizontal(Label(label), select, classes="field-row"), classes=f"field -{name}")


# What the room field holds, after where the run is sized
_ROOM_LABELS = {"gpu": "card mem", "cpu": "host room"}

# The settings of the form that an engine may not take: its engine's knob, else why it is greyed out.
_OPTIONAL_SETTINGS = ("gpu_layers", "flash_attn", "kv_dtype", "parallel")


def settings_not_taken(backend: Any, on_cpu: bool) -> dict[str, str]:
    """The form's settings `backend` has no knob for, or that its CPU build ignores, each with why: they
    are greyed out and left out of the estimate (QA: GPU layers and flash attention offered for vLLM)."""
    greyed: dict[str, str] = {}
    for param in _OPTIONAL_SETTINGS:
        if param == "gpu_layers" and not backend.offloads_layers:
            greyed[param] = f"{backend.name} places no layers by count: all go where it runs"
        elif backend.knob(param) is None:
            greyed[param] = f"{backend.name} has no such setting"
        elif on_cpu and param in backend.cpu_ignored:
            greyed[param] = f"{backend.name}'s CPU build ignores it"
    return greyed


def _pane_settings(values: dict[str, Any], on_gpu: bool, card: str, budget_card: str | None) -> Any:
    """The estimate's settings from the form: a CPU run on the default card sizes this machine's RAM, as
    `estimate --cpu` does; a budget's room, as the profile left it, has the wizard's line (QA 36 F3)."""
    from vramtui.core.estimate.inputs import cpu_run_card, settings_from

    if not on_gpu and card in (DEFAULT_CARD, _ram_text()):
        values = {**values, "card": cpu_run_card()}
    return replace(settings_from(values, on_gpu=on_gpu), room_is_budget=card == budget_card)


class EstimatorPane(Pane):
    PANE_TITLE = "Estimator"
    PANE_KEY = "3"

    DEFAULT_CSS = """
    EstimatorPane #est-form {
        grid-size: 2;
        grid-gutter: 0 2;
        grid-rows: auto;
        height: auto;
    }
    EstimatorPane .field { height: auto; }
    EstimatorPane .field-row { height: 1; }
    EstimatorPane .field Label { width: 11; color: $text-muted; }
    EstimatorPane Input {
        height: 1; border: none; padding: 0 1; width: 1fr;
        background: $boost;
    }
    EstimatorPane Input:focus { background: $primary 25%; }
    EstimatorPane Input.-bad { background: $error 30%; }
    EstimatorPane .field-error { color: $error; height: auto; display: none; padding-left: 11; }
    EstimatorPane .field-error.-shown { display: block; }
    EstimatorPane .field.-model { column-span: 2; }
    EstimatorPane .field.-extras { column-span: 2; }
    EstimatorPane Select { height: 1; width: 1fr; }
    EstimatorPane SelectCurrent { height: 1; border: none; padding: 0 1; background: $boost; }
    EstimatorPane #est-result { height: auto; margin-top: 1; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "leave_form", "Leave the form", show=False),
        Binding("enter", "enter_form", "Edit", show=False),
    ]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._debounce: Timer | None = None
        self._info: Any = None
        self._info_path: str | None = None
        self._info_error: str | None = None
        self.estimate: Any = None
        self.table: Any = None  # the quant x context grid, in the "grid" view
        self.calibration: Any = None  # earlier runs here (core/estimate/calibrate.py), shown when applied
        self.errors: dict[str, str] = {}
        self.card_from_gpu: str | None = None
        self.card_from_budget: str | None = None  # the room a profile's memory budget leaves, as typed in
        self.gpu_present = False  # set when the sampler finds a GPU

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            with Grid(id="est-form"):
                for spec in FIELDS:
                    with Vertical(classes=f"field -{spec.name}"):
                        with Horizontal(classes="field-row"):
                            yield Label(spec.label, id=f"est-{spec.name}-label")
                            yield Input(
                                value=spec.value,
                                placeholder=spec.placeholder,
                                id=f"est-{spec.name}",
                                compact=True,
                            )
                        yield Static(classes="field-error", id=f"est-{spec.name}-error")
                    if spec.name == "head_dim":
                        yield _select_field("backend", "backend", BACKENDS)
                    if spec.name == "parallel":
                        yield _select_field("kv_dtype", "KV dtype", KV_DTYPES)
                        yield _select_field("flash_attn", "flash attn", FLASH_ATTN)
                    if spec.name == "card":
                        yield _select_field("runs_on", "runs on", RUNS_ON)
                        yield _select_field("view", "view", VIEWS)
            yield Static(id="est-result")

    def on_mount(self) -> None:
        super().on_mount()
        self.border_subtitle = "Enter: into the fields · Esc: back to the keys"
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self.show_result())
        self.recompute()

    # -- input ------------------------------------------------------------------------------------

    def focus_target(self) -> Widget | None:
        """`3` shows the pane, not a field: a field would take the next digit (the model path, its
        text selected on focus, replaced by the `4` that follows). Tab, Enter or a click go in."""
        return self.query_one(VerticalScroll)

    def action_leave_form(self) -> None:
        """Escape: out of the field, so single-key commands (q, e, 1-4 ...) work again."""
        self.query_one(VerticalScroll).focus()

    def action_enter_form(self) -> None:
        """Enter on the pane (not in a field): into the first field."""
        if self.app.focused is self.query_one(VerticalScroll):
            self.query_one(f"#est-{FIELDS[0].name}", Input).focus()

    def set_card_memory(self, total_bytes: int) -> None:
        """Pre-fill the card's memory from the GPU the sampler found (unless the user typed one)."""
        self.gpu_present = True
        card = self.query_one("#est-card", Input)
        if card.value in ("", DEFAULT_CARD) and self.card_from_gpu is None:
            self.card_from_gpu = f"{total_bytes / GIB:.2f}GiB"
            card.value = self.card_from_gpu

    def prefill_from_profile(self, profile: Any, assumed: dict[str, object] | None = None) -> None:
        """The launched profile's model and settings, so the arithmetic sits beside the real run;
        a memory budget stands for the card it emulates. `assumed`: what an attached server runs with
        where its command line says nothing (its slots from /props), else the field is empty: the
        engine's default."""
        from pathlib import Path

        accounting = getattr(getattr(profile, "backend", None), "accounting", None)
        if accounting is None:
            return
        model = str(getattr(profile, "model", "") or "")
        if model and Path(model).exists():
            self.set_value("model", model)
        name = getattr(profile.backend, "name", accounting)
        self.query_one("#est-backend", Select).value = name if name in BACKENDS else accounting
        params = dict(getattr(profile, "params", {}) or {})
        for name in ("context", "parallel"):
            value = params.get(name, (assumed or {}).get(name))
            self.set_value(name, str(value) if isinstance(value, int) else "")
        gpu_layers = params.get("gpu_layers")
        if isinstance(gpu_layers, int):
            self.set_value("gpu_layers", str(gpu_layers))
        flash = params.get("flash_attn")
        flash = {True: "on", False: "off"}.get(flash, str(flash).lower()) if flash is not None else None
        self.query_one("#est-flash_attn", Select).value = flash if flash in FLASH_ATTN else AUTO
        kv_dtype = params.get("kv_dtype")
        self.query_one("#est-kv_dtype", Select).value = kv_dtype if kv_dtype in KV_DTYPES else AUTO
        extras = _flags_of(params)
        if extras:
            self.set_value("extras", extras)
        budget = getattr(profile, "memory_budget", None)
        on_cpu = gpu_layers == 0 or not self.gpu_present
        if budget:
            # a host budget caps the engine's address space: its own share first, as the wizard and `ps
            # --fits` take it (QA 12: the pane said 21,504 tokens fit beside a wizard that needed 8192)
            room = budget - (_engine_share(profile) if on_cpu else 0)
            self.card_from_budget = f"{max(room, 2**20) / 2**20:.0f}MiB"
            self.set_value("card", self.card_from_budget)
        self.query_one("#est-runs_on", Select).value = "cpu" if on_cpu else "gpu"

    def value(self, name: str) -> str:
        widget = self.query_one(f"#est-{name}")
        if isinstance(widget, Select):
            return str(widget.value)
        return widget.value.strip()  # type: ignore[attr-defined]

    def set_value(self, name: str, value: str) -> None:
        widget = self.query_one(f"#est-{name}")
        widget.value = value  # type: ignore[attr-defined]

    @on(Select.Changed, "#est-runs_on")
    def _runs_on_changed(self, event: Select.Changed) -> None:
        """The default card follows where it runs: this machine's RAM on the CPU (QA 14: "card mem 24GiB"
        beside "runs on cpu", while the estimate sized the RAM), the 24 GiB card back on the GPU."""
        ram = _ram_text()
        # a CPU run's room is host RAM or a budget's share of it: no card (QA 24 F4, QA 25: "card mem")
        self.query_one("#est-card-label", Label).update(_ROOM_LABELS[str(event.value)])
        card = self.value("card")
        if event.value == "cpu" and card == DEFAULT_CARD:
            self.set_value("card", ram)
        elif event.value == "gpu" and card == ram:
            self.set_value("card", DEFAULT_CARD)

    @on(Select.Changed, "#est-backend")
    @on(Select.Changed, "#est-runs_on")
    def _grey_settings_not_taken(self) -> None:
        greyed = settings_not_taken(ENGINES[self.value("backend")], self.value("runs_on") == "cpu")
        for name in _OPTIONAL_SETTINGS:
            widget = self.query_one(f"#est-{name}")
            widget.disabled = name in greyed
            widget.tooltip = greyed.get(name)

    @on(Input.Changed)
    @on(Select.Changed)
    def _changed(self, event: Message) -> None:
        if self._debounce is not None:
            self._debounce.stop()
        self._debounce = self.set_timer(0.15, self.recompute)

    # -- arithmetic -------------------------------------------------------------------------------

    def recompute(self) -> None:
        """Validate every field in place, then estimate (model files are read in a thread)."""
        from vramtui.core.estimate.calibrate import calibration_now
        from vramtui.core.estimate.estimator import estimate

        self.errors = {}
        path = self.value("model")
        if path and path != self._info_path:
            self._info_path, self._info, self._info_error = path, None, None
            self._load_info(path)
        if not path:
            self._info_path, self._info, self._info_error = None, None, None
        values = self._parsed()
        info = self._model_info(path, values)
        self._show_errors()
        if info is None or self.errors:
            self.estimate = None
            self.show_result()
            return
        try:
            settings = self._settings(values)
            # earlier runs' measured terms on this machine, as `vramtui estimate` applies them
            self.calibration, _ = calibration_now(settings)
            settings.calibration = self.calibration
            self.estimate = estimate(info, settings)
            self.table = self._grid(info, settings, path)
        except VramtuiError as error:
            self.estimate = self.table = None
            self.errors["_"] = str(error)
        self.show_result()

    def _grid(self, info: Any, settings: Any, path: str) -> Any:
        if self.value("view") != "grid":
            return None
        from vramtui.core.estimate.grid import build_table

        return build_table(info, settings, path or None)

    def _parsed(self) -> dict[str, Any]:
        """Every field through the estimator's one input parser (core/estimate/inputs.py), as the CLI."""
        from vramtui.core.estimate.inputs import parse_inputs

        texts = {spec.name: self.value(spec.name) for spec in FIELDS if spec.name != "model"}
        kv_dtype = self.value("kv_dtype")
        texts.update(
            backend=self.value("backend"),
            kv_dtype="" if kv_dtype == AUTO else kv_dtype,  # the backend's own, as the CLI's default
            flash_attn=self.value("flash_attn"),
        )
        for name in _OPTIONAL_SETTINGS:  # a greyed-out setting is the engine's own: as if left empty
            if self.query_one(f"#est-{name}").disabled:
                texts[name] = AUTO if name == "flash_attn" else ""
        from vramtui.core.estimate.inputs import InputError, split_flags

        try:
            texts.update(split_flags(texts.pop("extras", "")))
        except InputError as error:
            self.errors["extras"] = error.problem
        values, problems = parse_inputs(texts)
        for name, problem in problems.items():  # a bad value typed in the extras is marked there
            self.errors["extras" if name in FLAG_FIELDS else name] = problem
        for name in REQUIRED:
            if not texts[name] and name not in self.errors:
                self.errors[name] = "required"
        return values

    def _settings(self, values: dict[str, Any]) -> Any:
        on_gpu, card = self.value("runs_on") == "gpu", self.value("card")
        return _pane_settings(values, on_gpu, card, self.card_from_budget)

    def _model_info(self, path: str, values: dict[str, Any]) -> Any:
        from vramtui.core.estimate.inputs import model_overrides
        from vramtui.core.estimate.modelinfo import apply_overrides, info_from_flags

        if path:
            if self._info_error:
                self.errors["model"] = self._info_error
            if self._info is None:
                return None
            try:  # the numbers typed override the file's, as `vramtui estimate FILE --params ...` does
                return apply_overrides(self._info, **model_overrides(values))
            except VramtuiError as error:
                self.errors["params"] = str(error)
                return None
        if values.get("params") is None:
            if not self.errors:
                self.errors["_"] = "give a model path, or at least the parameter count"
            return None
        try:
            return info_from_flags(**model_overrides(values))
        except VramtuiError as error:
            self.errors["params"] = str(error)
            return None

    @work(thread=True, exclusive=True, group="model-info", exit_on_error=False)
    def _load_info(self, path: str) -> None:
        from vramtui.core.estimate.modelinfo import load_model_info

        try:
            info, error = load_model_info(path), None
        except VramtuiError as problem:
            info, error = None, str(problem)
        except Exception as problem:  # a broken file is a message by the field, never a crash
            info, error = None, f"cannot read it: {type(problem).__name__}: {problem}"
        self.post_message(InfoLoaded(path, info, error))

    @on(InfoLoaded)
    def _info_loaded(self, message: InfoLoaded) -> None:
        if message.path != self.value("model"):
            return  # the user typed on
        self._info, self._info_error = message.info, message.error
        self.recompute()

    # -- output -----------------------------------------------------------------------------------

    def _show_errors(self) -> None:
        for spec in FIELDS:
            message = self.errors.get(spec.name)
            error = self.query_one(f"#est-{spec.name}-error", Static)
            error.update(Text(f"✖ {message}") if message else "")
            error.set_class(bool(message), "-shown")
            self.query_one(f"#est-{spec.name}", Input).set_class(bool(message), "-bad")

    def _bar(self, text: Text, est: Any) -> list[tuple[str, int]]:
        """The bill as one bar of the pane's width, the usable line marked; the parts shown."""
        app = self.app
        width = max(10, self.size.width - 4)
        device = float(est.device_bytes or 1)
        scale = max(device, float(est.total_bytes))
        usable_col = round(est.usable_bytes / scale * width)
        place = None if est.devices else est.place  # several GPUs: every device together, then a row each
        shown = [(part, est.bill.get(part, place)) for part in PARTS]
        shown = [(part, value) for part, value in shown if value or part in ("weights", "kv_cache")]
        cells = [(round(value / scale * width), PART_COLOURS[part]) for part, value in shown]
        column = 0
        for count, variable in cells:
            for _ in range(count):
                if column >= width:
                    break
                char = "┃" if column == usable_col else "█"
                text.append(char, style=theme_style(app, variable))
                column += 1
        while column < width:
            char = "┃" if column == usable_col else "░"
            text.append(char, style=theme_style(app, "graph-safety" if char == "┃" else "graph-empty"))
            column += 1
        return shown

    def show_result(self) -> None:
        result = self.query_one("#est-result", Static)
        app = self.app
        text = Text()
        if self.estimate is None:
            if self.value("model") and self._info is None and not self._info_error:
                text.append("reading the model's files…", style="dim")
            elif "_" in self.errors:
                text.append(self.errors["_"], style=theme_style(app, "log-warning"))
            elif self.errors:
                text.append(
                    "fix the fields marked ✖ to see the estimate", style=theme_style(app, "log-warning")
                )
            result.update(text)
            return
        est = self.estimate
        if self.table is not None:
            from vramtui.cli.estimate_table import render_table

            line = self.calibration.describe() if self.calibration is not None else None
            result.update(Text(render_table(self.table, est, line)))  # the pane scrolls when it is taller
            return
        shown = self._bar(text, est)
        text.append("\n")
        for part, value in shown:
            text.append("■ ", style=theme_style(app, PART_COLOURS[part]))
            # on a CPU run the runtime is the engine process's own, not a CUDA context (QA 5)
            text.append(f"{part_label(part, est.place)} {format_bytes(value, 2)}  ")
        text.append("\n")
        # The run as sized: what an empty field stood for (the engine's default, as the CLI takes it).
        sequences = f"{est.parallel} sequence{'s' if est.parallel != 1 else ''}"
        text.append(f"{est.backend}: context {est.context:,}, {sequences}, KV {est.kv_dtype}\n", style="dim")
        if est.fits:
            text.append(" FITS ✔ ", style=theme_style(app, "verdict-fits", bold=True, reverse=True))
        else:
            word = " WILL NOT START ✖ " if est.refused else " DOES NOT FIT ✖ "  # a refusal is not memory
            text.append(word, style=theme_style(app, "verdict-fails", bold=True, reverse=True))
            if est.reason:  # QA 17 F12: what fails first, not a total that reads as a fit
                text.append(f" {est.reason}\n")
        text.append(_needs_line(est))
        for row in est.devices:  # several GPUs: the tightest one decides the verdict above
            mark = "✔" if row.fits else "✖"
            text.append(
                f"\n  GPU {row.index} {mark} {format_bytes(row.total_bytes, 2)} of {format_bytes(row.usable_bytes, 2)}"
                f" ({row.layers} layers; weights {format_bytes(row.weights_bytes, 1)}, KV "
                f"{format_bytes(row.kv_cache_bytes, 1)})",
                style="" if row.fits else theme_style(app, "log-warning"),
            )
        for entry in getattr(est, "extras", None) or []:  # what rides along, as the CLI prints it
            from vramtui.core.estimate.extras import describe

            text.append(f"\n  + {entry['label']}: {describe(entry)}")
        details = _details(est)
        if details:
            text.append("\n" + " · ".join(details), style="dim")
        if not self.gpu_present and self.value("card") == DEFAULT_CARD and self.value("runs_on") == "gpu":
            text.append(
                f"\n• no GPU found: sized for a {DEFAULT_CARD.replace('GiB', ' GiB')} card", style="dim"
            )
        for note in list(getattr(est, "notes", []) or []):
            text.append(f"\n• {note}", style="dim")
        if self.calibration is not None:
            text.append(f"\n• {self.calibration.describe()} (as vramtui estimate does)", style="dim")
        result.update(text)


def _needs_line(est: Any) -> str:
    """What the run needs of what is usable: a CPU run's room is host RAM (or a budget's), not a card, and
    the share is said (QA 24 F4: one budget read three ways on one screen)."""
    room = "card" if est.device == "gpu" else "host room"
    share = _share(est)
    return (
        f" needs {format_bytes(est.total_bytes, 2)} of {format_bytes(est.usable_bytes, 2)} usable "
        f"({share}% of the {format_bytes(est.device_bytes, 2)} {room})"
    )


def _share(est: Any) -> int:
    """The share of the room the verdict counts as usable (the 80% line)."""
    return round(100 * est.usable_bytes / est.device_bytes) if getattr(est, "device_bytes", 0) else 100


def _details(est: Any) -> list[str]:
    """The solvers' answers and the per-token and per-sequence figures, in one dim line."""
    details: list[str] = []
    if getattr(est, "max_context", None):
        # under the verdict's line (80%); the wizard's steps keep their own 10% margin and halve
        # (QA 25: "max context 20,480" beside the wizard's 16384, unexplained)
        details.append(f"max context {est.max_context:,} under the {_share(est)}% line")
    if getattr(est, "max_parallel", None):
        tokens = getattr(est, "max_parallel_tokens", None)  # as `estimate` says it (QA 6: no length given)
        each = f" of {tokens:,} tokens" if tokens else ""
        details.append(f"max parallel {est.max_parallel}{each}")
    if getattr(est, "gpu_layers_fit", None) is not None and not est.fits:
        details.append(f"GPU layers that fit {est.gpu_layers_fit}")
    if getattr(est, "weights_host_bytes", 0):
        details.append(f"weights on the host {format_bytes(est.weights_host_bytes, 1)}")
    # beside a GPU, what host RAM holds; on a CPU run the bill above is host RAM already (QA: it read
    # "host RAM for the rest" with the whole total)
    if getattr(est, "host_bytes_needed", None) and getattr(est, "device", None) != "host":
        details.append(f"host RAM besides the GPU {format_bytes(est.host_bytes_needed, 1)}")
    if getattr(est, "kv_bytes_per_token", None):
        details.append(f"KV {format_bytes(est.kv_bytes_per_token, 1)}/token")
    state = est.bill.get("recurrent_state") + est.bill.get("recurrent_state", HOST)
    if state:  # a hybrid's Mamba / linear-attention state: per sequence, whatever the context
        details.append(f"recurrent state {format_bytes(state // max(1, est.parallel), 1)}/sequence")
    return details


def _engine_share(profile: Any) -> int:
    """The engine's own address space under a host budget, as `estimate --memory-budget` takes it off:
    measured (cached once per binary), else its backend's figure; never measured here, on the UI thread."""
    from vramtui.core.launch.footprint import engine_share, measured_already

    return engine_share(profile, measure=measured_already(profile))


def _ram_text() -> str:
    """This machine's RAM as the card field shows it for a CPU run (sized exactly all the same)."""
    from vramtui.core.estimate.inputs import cpu_run_card

    return f"{cpu_run_card() / 2**30:.1f}GiB"
