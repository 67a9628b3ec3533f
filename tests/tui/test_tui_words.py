"""Issue 22 defect 26: no internal code on screen. A real launch that fails at once (its port is held
by another socket), then `n`: the status line, the log header and the wizard pane say it in words."""

from __future__ import annotations

import socket
from pathlib import Path

from placeholder_files import EMPTY_GGUF
from test_tui_support import screen_text, wait_for
from textual.widgets import Static

from vramtui.core.logs.stages import STAGES
from vramtui.tui.app import VramtuiApp
from vramtui.tui.panes.wizard import WizardPane
from vramtui.tui.words import CAUSE_WORDS, FAILURE_WORDS, FIGURE_WORDS, OUTCOME_WORDS

CODES = sorted(
    code for code in {*FAILURE_WORDS, *CAUSE_WORDS, *OUTCOME_WORDS, *FIGURE_WORDS, *STAGES} if "_" in code
)


def drawn(app: VramtuiApp, *widgets: object) -> str:
    """The screen's cells these widgets cover (the log's own lines may quote codes: not those)."""
    rows = screen_text(app).splitlines()
    parts = []
    for widget in widgets:
        region = widget.region  # type: ignore[attr-defined]
        parts += [row[region.x : region.right] for row in rows[region.y : region.bottom]]
    return "\n".join(parts)


async def test_a_launch_that_fails_and_its_wizard_speak_in_words(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        (tmp_path / "m.gguf").write_bytes(EMPTY_GGUF)
        profile = tmp_path / "busy.toml"
        profile.write_text(
            f'backend = "llama-cpp-python"\nmodel = "m.gguf"\nport = {busy.getsockname()[1]}\n'
        )
        app = VramtuiApp(profile_path=str(profile), live_sampling=False, remember=False)
        async with app.run_test(size=(200, 50)) as pilot:
            await wait_for(pilot, lambda: app.session is not None and app.session.state == "failed")
            await pilot.press("n")
            wizard = app.query_one(WizardPane)
            await wait_for(pilot, lambda: wizard.driver is not None and wizard.driver.finished)
            await pilot.pause(0.2)
            said = drawn(app, app.query_one("#diagnosis", Static), wizard, app.query_one("#status", Static))
    assert "port already in use" in said, said
    assert [code for code in CODES if code in said] == [], said
    assert " at ?" not in said


def test_the_markdown_report_reads_in_words_and_the_csv_keeps_the_codes(tmp_path) -> None:
    """QA (session 12): the Markdown export showed the record's codes (`kv_cache`, `host_oom`,
    `first_run`, {"context": 32768}); it is read by people, so it says what the screen says. The CSV,
    read by scripts, keeps the codes and the field names."""
    from vramtui.core.wizard.steprecord import StepRecorder, open_session, to_csv, to_markdown
    from vramtui.tui.words import record_words

    path = tmp_path / "rec.jsonl"
    with StepRecorder(path) as recorder:
        recorder.append("session", profile={"backend": "llama.cpp", "model": "m.gguf", "params": {}})
        recorder.append("step", step=0, outcome="first_run", stage="kv_cache", failure="host_oom")
        recorder.append(
            "step", step=1, param="flash_attn", **{"from": False, "to": True}, outcome="works", stage="ready"
        )
        # a setting left to the engine reads "default", as the screen says it (QA 23 D11: an empty cell)
        recorder.append("step", step=2, param="parallel", **{"from": None, "to": 1}, outcome="works")
        recorder.append("end", success=True, reason="it runs", final_params={"context": 32768})
    session = open_session(path)
    text = to_markdown(session, record_words("llama.cpp"))
    third = next(line for line in text.splitlines() if line.startswith("| 2 |"))
    assert "| default | 1 |" in third, third
    assert "| step | change | from | to |" in text and "| tokens/s | tokens/s before |" in text
    first = next(line for line in text.splitlines() if line.startswith("| 0 |"))
    assert "failed (first launch)" in first and "kv cache" in first and "host out of memory" in first
    second = next(line for line in text.splitlines() if line.startswith("| 1 |"))
    assert "flash attn (--flash-attn)" in second and "| off | on |" in second and "WORKS" in second
    assert (
        "- final parameters: context = 32768" in text and "- starting parameters: the engine defaults" in text
    )
    assert "host_oom" not in text and "first_run" not in text
    rows = to_csv(session).splitlines()
    assert rows[0].startswith("step,param,from,to") and "host_oom" in rows[1] and "first_run" in rows[1]
    assert "host_oom" in to_markdown(session)  # without words (the core's default) the codes stay


def test_every_figure_an_engine_reads_has_words() -> None:
    """QA (session 12): `diagnose` listed the engine's figures by their JSON keys (`kv_cache_tokens: 1e+06`).
    Each figure a log rule sets reads as words; a new rule without words fails here, not on a user's screen."""
    from vramtui.core.backends import engine_logs
    from vramtui.core.logs.ruletypes import CACHE_PART_MARK, DRAFT_MARK
    from vramtui.core.logs.shape import SHAPE_FIGURES
    from vramtui.tui.words import FIGURE_WORDS, figure_words

    keys = {rule.key for engine in engine_logs() for _, rules in engine.figures for rule in rules}
    shown = (
        keys - SHAPE_FIGURES - {CACHE_PART_MARK, DRAFT_MARK} - {k for k in keys if k.startswith("fit_break")}
    )
    assert shown and not shown - set(FIGURE_WORDS), sorted(shown - set(FIGURE_WORDS))
    assert figure_words("draft_kv_buffer") == "draft model: KV cache"


def test_a_cause_with_no_short_words_reads_as_the_diagnosis_says_it() -> None:
    """QA 35 F13: check's headline printed "(budget_import)" where the diagnosis has a sentence for it."""
    from vramtui.core.logs.advice import CAUSE_WORDS as SAID
    from vramtui.tui.words import in_words

    said = in_words("failed at start-up, before the model was read (budget_import): MemoryError")
    assert "budget_import" not in said and f"({SAID['budget_import']})" in said
    assert (
        in_words("failed at stage kv_cache (host_oom): x")
        == "failed at stage kv cache (host out of memory): x"
    )
