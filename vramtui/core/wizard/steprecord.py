"""The wizard's record: one JSON line per event, appended, flushed and fsynced as it happens.

A session file holds a `session` line (the starting profile), for every step a `step_start` line
(written before the relaunch, so a crash mid-step still shows what was being tried) and a `step`
line (its outcome and figures), and an `end` line. Nothing is rewritten: if vramtui or the machine
dies, every step already taken is on disk. Finished (or interrupted) sessions reopen with
`open_session`, and export as Markdown or CSV.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vramtui.core.errors import VramtuiError

# The columns of a step, in the order the exports show them (tokens_per_s_before: the run this step
# changed, so a step's speed cost reads beside its own figure).
STEP_FIELDS: tuple[str, ...] = (
    "step",
    "param",
    "from",
    "to",
    "why",
    "outcome",
    "stage",
    "failure",
    "resident_mib",
    "peak_mib",
    "load_time_s",
    "ttft_s",
    "tokens_per_s",
    "tokens_per_s_before",
    # what the step predicted, and how the run bore it out (the log's confirmation, the engine's printed
    # figure beside the prediction): QA 22, the exports had lost both
    "predicted_mib",
    "verification",
    "log_file",
)


def wizard_dir() -> Path:
    """Where session records live: beside the run logs ($VRAMTUI_DATA_DIR/wizard, else the user data dir's)."""
    from vramtui.core.estimate.calibrate import data_dir

    return data_dir() / "wizard"


def new_record_path(label: str = "session") -> Path:
    safe = "".join(c if c.isalnum() or c in "-_." else "-" for c in label)[:60] or "session"
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    return wizard_dir() / f"{stamp}-{safe}-{os.getpid()}.jsonl"


class StepRecorder:
    """Append-only JSONL writer; every line is flushed and fsynced before `append` returns."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # O_APPEND: each line lands at the end even if another writer had the file open.
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        except OSError as error:
            raise VramtuiError(
                f"cannot write the wizard record {self.path}: {error.strerror or error}"
            ) from None
        self._file = os.fdopen(fd, "a", encoding="utf-8")

    def append(self, kind: str, **data: Any) -> dict[str, Any]:
        entry = {"type": kind, "time": round(time.time(), 3), **data}
        if self._file.closed:  # the end line is written (a quit mid-step): a record ends there
            return entry
        line = json.dumps(entry, default=str, ensure_ascii=False)
        try:
            self._file.write(line + "\n")
            self._file.flush()
            os.fsync(self._file.fileno())
        except OSError as error:  # a full disk: stop, keeping what was written (QA: exit 3)
            with contextlib.suppress(OSError):
                self._file.close()
            raise VramtuiError(
                f"cannot write the wizard record {self.path}: {error.strerror or error} (the steps before "
                "this one are in it)"
            ) from None
        return entry

    @property
    def closed(self) -> bool:
        return self._file.closed

    def close(self) -> None:
        if not self._file.closed:
            self._file.close()

    def __enter__(self) -> StepRecorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass
class Session:
    """A session read back from its record."""

    path: Path
    header: dict[str, Any] = field(default_factory=dict)
    steps: list[dict[str, Any]] = field(default_factory=list)
    end: dict[str, Any] | None = None
    # Steps that started but never finished (vramtui died mid-step).
    interrupted: list[dict[str, Any]] = field(default_factory=list)
    # Proposals the user turned down: nothing was launched for them.
    skipped: list[dict[str, Any]] = field(default_factory=list)
    # The stress check run on the final profile after the session ended (`--stress N`), if one was.
    stress: dict[str, Any] | None = None

    @property
    def finished(self) -> bool:
        return self.end is not None

    @property
    def success(self) -> bool:
        return bool(self.end and self.end.get("success"))

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "profile": self.header.get("profile"),
            "finished": self.finished,
            "success": self.success,
            "steps": self.steps,
            "interrupted": self.interrupted,
            "skipped": self.skipped,
            "end": self.end,
            "stress": self.stress,
        }


def open_session(path: str | Path) -> Session:
    """Read a record back. A torn last line (the machine died mid-write) is skipped, not fatal."""
    file = Path(path).expanduser()
    if not file.is_file():
        raise VramtuiError(f"no such wizard record: {path}")
    session = Session(path=file)
    started: dict[int, dict[str, Any]] = {}
    with file.open(encoding="utf-8", errors="replace") as handle:
        for raw in handle:
            raw = raw.strip()
            if not raw:
                continue
            try:
                entry = json.loads(raw)
            except json.JSONDecodeError:
                continue
            if not isinstance(entry, dict):
                continue
            kind = entry.get("type")
            if kind == "session":
                session.header = entry
            elif kind == "step_start":
                started[int(entry.get("step", -1))] = entry
            elif kind == "process" and int(entry.get("step", -1)) in started:
                # the launch of a step in progress: an interrupted step still names its log
                started[int(entry.get("step", -1))]["log_file"] = entry.get("log_file")
            elif kind == "step":
                started.pop(int(entry.get("step", -1)), None)
                session.steps.append(entry)
            elif kind == "skip":
                session.skipped.append(dict(entry, outcome="skipped"))
            elif kind == "end":
                session.end = entry
            elif kind == "stress":
                session.stress = entry
    if not session.header and not session.steps:
        raise VramtuiError(f"{file}: not a vramtui wizard record")
    session.interrupted = [dict(entry, outcome="interrupted") for _, entry in sorted(started.items())]
    return session


def append_stress(path: str | Path, stress: dict[str, Any]) -> None:
    """The stress check's result after the record's end line (QA 31 W5: a stress check that failed left a
    record that read only "success")."""
    entry = {"type": "stress", "time": round(time.time(), 3), **stress}
    try:
        with Path(path).expanduser().open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(entry, default=str, ensure_ascii=False) + "\n")
    except OSError as error:
        raise VramtuiError(f"cannot add the stress check to {path}: {error.strerror or error}") from None


def list_sessions(folder: str | Path | None = None) -> list[Path]:
    """Records in the wizard folder, newest first."""
    base = Path(folder) if folder else wizard_dir()
    if not base.is_dir():
        return []
    return sorted(base.glob("*.jsonl"), key=lambda p: p.stat().st_mtime, reverse=True)


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, list | tuple):  # a step's verification notes
        return "; ".join(_cell(item) for item in value)
    if isinstance(value, float):
        return f"{value:.1f}" if abs(value) >= 10 else f"{value:.3g}"
    return str(value)


def _rows(session: Session) -> list[dict[str, Any]]:
    # A skip is recorded with the number the next step would take: it reads before that step.
    ordered = sorted(
        [*session.steps, *session.skipped],
        key=lambda row: (int(row.get("step") or 0), row.get("outcome") != "skipped"),
    )
    return [*ordered, *session.interrupted]


def to_csv(session: Session) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(STEP_FIELDS), extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in _rows(session):
        writer.writerow({name: _csv_value(row.get(name)) for name in STEP_FIELDS})
    return out.getvalue()


def _csv_value(value: Any) -> Any:
    return "; ".join(str(item) for item in value) if isinstance(value, list | tuple) else value


# The Markdown report's column titles: it is read by people (the CSV keeps the field names for scripts).
MARKDOWN_TITLES: dict[str, str] = {
    "step": "step",
    "param": "change",
    "from": "from",
    "to": "to",
    "why": "why",
    "outcome": "outcome",
    "stage": "stage",
    "failure": "failure",
    "resident_mib": "resident MiB",
    "peak_mib": "peak MiB",
    "load_time_s": "load s",
    "ttft_s": "first token s",
    "tokens_per_s": "tokens/s",
    "tokens_per_s_before": "tokens/s before",
    "predicted_mib": "predicted MiB",
    "verification": "verified",
    "log_file": "log",
}

# How a record's value reads to a person: (field, value) -> text; the caller's words for its codes.
CellWords = Callable[[str, Any], str]


def _params_text(params: dict[str, Any], say: CellWords | None) -> str:
    if not params:
        return "the engine defaults"
    if say is None:
        return json.dumps(params, sort_keys=True)
    return ", ".join(f"{name} = {say('to', value)}" for name, value in sorted(params.items()))


def to_markdown(session: Session, say: CellWords | None = None) -> str:
    """The session as a Markdown report; `say` reads each code as words (outcomes, stages, failures,
    on/off), as the screen does. Without it the cells keep the record's codes."""
    profile = session.header.get("profile") or {}
    title = profile.get("name") or Path(str(profile.get("model", "session"))).name
    lines = [f"# vramtui wizard: {title}", ""]
    lines.append(f"- backend: {profile.get('backend', '?')}")
    lines.append(f"- model: {profile.get('model', '?')}")
    start = session.header.get("params") or profile.get("params") or {}
    lines.append(f"- starting parameters: {_params_text(start, say)}")
    if session.end:
        verdict = "works" if session.end.get("success") else "not working yet"
        reason = str(session.end.get("reason", ""))
        lines.append(f"- result: {verdict}; {say('why', reason) if say else reason}".rstrip("; "))
        lines.append(f"- final parameters: {_params_text(session.end.get('final_params') or {}, say)}")
        if session.stress:
            lines.append(f"- stress check: {session.stress.get('verdict', '?')}")
    else:
        lines.append("- result: the session did not finish (vramtui stopped mid-way)")
    titles = [MARKDOWN_TITLES[name] for name in STEP_FIELDS] if say else list(STEP_FIELDS)
    lines += ["", "| " + " | ".join(titles) + " |", "|" + "---|" * len(STEP_FIELDS)]
    for row in _rows(session):
        cells = [_markdown_cell(row, name, say) for name in STEP_FIELDS]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _markdown_cell(row: dict[str, Any], name: str, say: CellWords | None) -> str:
    value = row.get(name)
    if say is not None and value is None and name in ("from", "to") and row.get("param"):
        return "default"  # a setting left to the engine, as the screen says it (QA 23 D11: an empty cell)
    if say is None or value is None or isinstance(value, float | list | tuple):
        text = _cell(value)
    elif name == "outcome":  # in words, as the CLI and the screen tell it apart (the CSV keeps the code)
        from vramtui.core.wizard.verify import outcome_shade

        text = say(name, outcome_shade(str(value), row.get("verification")))
    else:
        text = say(name, value)
    return text.replace("|", "\\|").replace("\n", " ")
