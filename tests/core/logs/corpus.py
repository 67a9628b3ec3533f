"""The labelled corpus of real logs, and its one split by source thread: training and held-out.

Every case of every corpus file is one log from a public issue (or made here by a test), labelled by
someone who had not read the rules. The split is made once, by the thread the log came from (two logs of
one thread always fall on the same side), from a hash of the thread's name: about 30% of the threads are
held out. Rules are written against the training part only; the held-out part is scored, never read
case by case (`benchmarks/bench_diagnose_corpus.py` prints its figures, and its misses only with
--show-heldout, after the rules are frozen).
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from pathlib import Path

LOGS = Path(__file__).resolve().parents[2] / "data" / "logs"
DATA = LOGS.parent
# Every labelled file, in the order its rounds were gathered (rounds 9 and 10 were gathered after the split;
# rounds 11 to 20 after the rules of 2026-12-02, each scored before any rule was written from it).
FILES = (
    DATA / "corpus.jsonl",
    LOGS / "unseen.jsonl",
    LOGS / "extra.jsonl",
    LOGS / "round9.jsonl",
    LOGS / "round10.jsonl",
    LOGS / "round11.jsonl",
    LOGS / "round12.jsonl",
    LOGS / "round13.jsonl",
    LOGS / "round14.jsonl",
    LOGS / "round15.jsonl",
    LOGS / "round16.jsonl",
    LOGS / "round17.jsonl",
    LOGS / "round18.jsonl",
    LOGS / "round19.jsonl",
    LOGS / "round20.jsonl",
    LOGS / "round21.jsonl",
    LOGS / "round22.jsonl",
    LOGS / "round23.jsonl",
    LOGS / "round24.jsonl",
    LOGS / "round25.jsonl",
    LOGS / "round26.jsonl",
    LOGS / "round27.jsonl",
    LOGS / "round28.jsonl",
    LOGS / "round29.jsonl",
    LOGS / "round30.jsonl",
    LOGS / "round31.jsonl",
    LOGS / "round32.jsonl",
    LOGS / "round33.jsonl",
    LOGS / "round34.jsonl",
    LOGS / "round35.jsonl",
    LOGS / "round36.jsonl",
    LOGS / "round37.jsonl",
    LOGS / "round38.jsonl",
    LOGS / "round39.jsonl",
    LOGS / "round40.jsonl",
    LOGS / "round41.jsonl",
    LOGS / "round42.jsonl",
    LOGS / "round43.jsonl",
    LOGS / "round44.jsonl",
    LOGS / "round45.jsonl",
    LOGS / "round46.jsonl",
    LOGS / "round47.jsonl",
    LOGS / "round48.jsonl",
    LOGS / "round49.jsonl",
    LOGS / "round50.jsonl",
    LOGS / "round51.jsonl",
    LOGS / "round52.jsonl",
    LOGS / "round53.jsonl",
    LOGS / "round54.jsonl",
    LOGS / "round55.jsonl",
    LOGS / "round56.jsonl",
    LOGS / "round57.jsonl",
    LOGS / "round58.jsonl",
    LOGS / "round59.jsonl",
    LOGS / "round60.jsonl",
    LOGS / "round61.jsonl",
    LOGS / "round62.jsonl",
    LOGS / "round63.jsonl",
    LOGS / "round64.jsonl",
    LOGS / "round65.jsonl",
    LOGS / "round66.jsonl",
    LOGS / "round67.jsonl",
    LOGS / "round68.jsonl",
    LOGS / "round69.jsonl",
    LOGS / "round70.jsonl",
    LOGS / "round71.jsonl",
    LOGS / "round72.jsonl",
    LOGS / "round73.jsonl",
    LOGS / "round74.jsonl",
    LOGS / "round75.jsonl",
    LOGS / "round76.jsonl",
    LOGS / "round77.jsonl",
    LOGS / "round78.jsonl",
    LOGS / "round79.jsonl",
    LOGS / "round80.jsonl",
    LOGS / "round81.jsonl",
    LOGS / "round82.jsonl",
    LOGS / "round83.jsonl",
    LOGS / "round84.jsonl",
    LOGS / "round85.jsonl",
    LOGS / "round86.jsonl",
    LOGS / "made-here.jsonl",
)
HELD_OUT_SHARE = 0.30
_GITHUB_URL = re.compile(r"github\.com/([\w.-]+/[\w.-]+)/(?:issues|pull|discussions)/(\d+)", re.I)
_THREAD = re.compile(r"^([\w.-]+/[\w.-]+)#(\d+)")


def thread_of(source: str) -> str:
    """The thread a source names ("owner/repo#N"), however it is written; else the source itself."""
    text = source.strip()
    found = _GITHUB_URL.search(text) or _THREAD.search(text)
    if found:
        return f"{found.group(1).lower()}#{found.group(2)}"
    return text.lower()


def held_out(source: str) -> bool:
    """Is this thread in the held-out part? (A fixed hash: the split never moves.) Logs made here are
    always training: whoever writes the rules has seen them."""
    if source.startswith("made here"):
        return False
    digest = hashlib.sha256(thread_of(source).encode()).digest()
    return int.from_bytes(digest[:4], "big") / 2**32 < HELD_OUT_SHARE


def cases(files: tuple[Path, ...] = FILES) -> list[dict]:
    """Every labelled case, each with its `file` and `split` ("train" | "heldout") added."""
    found: list[dict] = []
    for path in files:
        if not path.is_file():
            continue
        for row in path.read_text(encoding="utf-8").splitlines():
            if row.strip():
                case = json.loads(row)
                if "stage" not in case or "log" not in case:
                    continue
                case["file"] = path.name
                case["split"] = "heldout" if held_out(case.get("source", case["id"])) else "train"
                found.append(case)
    return found


@functools.cache
def training_log(case_id: str) -> str:
    """The log of one training case: rules are written from the training part only, so a held-out id fails."""
    (case,) = [case for case in cases() if case["id"] == case_id]
    assert case["split"] == "train", f"{case_id} is held out: no rule is written from it"
    return str(case["log"])


def training() -> list[dict]:
    return [case for case in cases() if case["split"] == "train"]


def heldout() -> list[dict]:
    return [case for case in cases() if case["split"] == "heldout"]


# -- scoring ---------------------------------------------------------------------------------------------

MEMORY_FAILURES = frozenset({"cuda_oom", "host_oom", "host_oom_killed", "kv_cache_too_small"})


def family_of(backend: str) -> str:
    """The engine a case is scored under: llama-cpp-python prints llama.cpp's log, so it is llama.cpp's."""
    names = [name.strip() for name in backend.split("|")]
    return "llama.cpp" if any(name in ("llama.cpp", "llama-cpp-python") for name in names) else names[0]


def predicted(diagnosis) -> tuple[str, str]:
    """(stage, class) as a case labels them: ("ok", "none") for a run with no failure."""
    if getattr(diagnosis, "incomplete", False):
        return diagnosis.stage or "download", "incomplete"
    if not diagnosis.failed:
        return "ok", "none"
    return diagnosis.failure_stage or "?", diagnosis.failure


def judge_case(case: dict, diagnosis) -> dict[str, bool | None]:
    """Each measure for one case: True/False, or None where the measure does not apply to it.

    "incomplete" (no error, and the log stops before the server is up) claims no failure: it is right for
    a case labelled incomplete, and for a healthy run whose excerpt stops before its ready line (most
    pasted logs of healthy runs are such excerpts). A verdict of "no failure" on a log labelled
    incomplete is wrong: that is the `diagnose ... && deploy` that must not pass.
    """
    stage, failure = predicted(diagnosis)
    if failure == "incomplete" and case["failure"] == "none":
        stage, failure = "ok", "none"
    lines = case.get("first_error_lines")
    quiet = case["stage"] == "ok" and bool(case.get("quiet"))
    return {
        "stage": stage == case["stage"],
        "class": failure == case["failure"],
        "memory": (stage == case["stage"] and failure == case["failure"])
        if case["failure"] in MEMORY_FAILURES
        else None,
        "first_error": (diagnosis.first_error_line in lines) if lines else None,
        "quiet": (failure == "none" and bool(diagnosis.warnings)) if quiet else None,
        # a healthy run with nothing wrong that is warned about anyway (the quiet rules' false alarms)
        "calm": (not diagnosis.warnings) if case["stage"] == "ok" and not quiet else None,
        # the engine the log is read as: its advice names that engine's flags
        "engine": family_of(diagnosis.backend or "?") == family_of(case["backend"]),
        "all": stage == case["stage"]
        and failure == case["failure"]
        and (not lines or diagnosis.first_error_line in lines),
    }


MEASURES = ("stage", "class", "memory", "first_error", "quiet", "calm", "engine", "all")


def score(rows: list[tuple[dict, dict[str, bool | None]]]) -> dict[str, tuple[int, int]]:
    """measure -> (right, counted) over judged cases."""
    totals: dict[str, tuple[int, int]] = {}
    for measure in MEASURES:
        marks = [marks[measure] for _, marks in rows if marks[measure] is not None]
        totals[measure] = (sum(1 for mark in marks if mark), len(marks))
    return totals
