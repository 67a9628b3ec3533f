"""The app, driven with App.run_test and Pilot, fed by the real engines."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from placeholder_files import EMPTY_GGUF
from test_tui_support import bring_up_curve_mib, screen_text, wait_for, write_nvsmi_csv
from textual.pilot import Pilot

from vramtui.core.errors import VramtuiError
from vramtui.core.logs.stages import STAGES
from vramtui.core.memory.history import PeakHistory
from vramtui.tui import themes
from vramtui.tui.app import PANE_ORDER, VramtuiApp
from vramtui.tui.panes.estimator import EstimatorPane
from vramtui.tui.panes.memory import MemoryPane
from vramtui.tui.widgets.graph import BLOCKS, MemoryGraph
from vramtui.tui.words import failure_words, stage_words


@pytest.fixture
def curve_csv(tmp_path: Path) -> Path:
    return write_nvsmi_csv(tmp_path / "curve.csv", bring_up_curve_mib())


def quiet_app(**kwargs: object) -> VramtuiApp:
    """The app without live sampling (deterministic) and without writing the user's config."""
    kwargs.setdefault("live_sampling", False)
    kwargs.setdefault("remember", False)
    return VramtuiApp(**kwargs)  # type: ignore[arg-type]


# ---- the fixed-scale graph -------------------------------------------------------------------------


async def test_graph_scale_is_fixed_and_keeps_a_one_sample_peak() -> None:
    """A 1% wobble stays a 1% wobble (not full height, as Sparkline draws it); a single 100 ms spike
    among 20,000 samples still reaches its true height when squeezed into 40 columns."""
    total = 24 * 1024**3
    history = PeakHistory()
    for i in range(20_000):
        value = total * (0.50 + 0.005 * (i % 2))  # 50% ± 0.5%
        if i == 12_345:
            value = total * 0.95
        history.add(i * 0.1, value)

    app = quiet_app()
    async with app.run_test(size=(120, 40)) as pilot:
        graph = app.query_one(MemoryGraph)
        graph.configure(lambda n: [b.max for b in history.buckets(n)], total)
        graph.styles.width = 40
        graph.styles.height = 10
        await pilot.pause()
        rows = [graph.render_line(y).text for y in range(graph.size.height)]
    height = len(rows)
    assert height == 10
    columns = list(zip(*[row[: graph.size.width] for row in rows], strict=True))
    filled = [sum(1 for cell in column if cell == BLOCKS[8]) for column in columns]
    # every column holds about half the height: never the full height for a 1% wobble
    assert all(4 <= count <= 5 for count in filled[:-1] if count < 9), filled
    # the spike's column reaches the 95% row: the top row has a block in exactly one region
    top_cells = [i for i, cell in enumerate(rows[0]) if cell in BLOCKS[1:]]
    assert top_cells, rows[0]
    # the 80% safety line is drawn as a threshold row with its label
    assert any("80%" in row and "╌" in row for row in rows)


async def test_columns_with_no_sample_are_blank_not_the_lowest_bar() -> None:
    """Issue 22 defect 37: an empty history was drawn as a row of ▁ (the lowest bar, as if memory
    were almost 0). Where no sample is, nothing is drawn; a sample of 0 still shows as the floor."""
    total = 24 * 1024**3
    history = PeakHistory()
    for i in range(50):
        history.add(i * 0.1, total * 0.5)
    app = quiet_app()
    async with app.run_test(size=(120, 40)) as pilot:
        graph = app.query_one(MemoryGraph)
        graph.styles.width = 40
        graph.styles.height = 6
        graph.configure(lambda n: [], total)  # nothing sampled yet
        await pilot.pause()
        empty = [graph.render_line(y).text for y in range(graph.size.height)]
        # only the labels and the 80% line: no bar, not even the lowest
        assert not any(cell in BLOCKS[1:] for row in empty for cell in row), empty
        assert empty[-1].strip() == ""

        # 10 columns of history, drawn at the right; the 30 columns before them are blank
        graph.configure(lambda n: [b.max for b in history.buckets(min(n, 10))], total)
        await pilot.pause()
        rows = [graph.render_line(y).text for y in range(graph.size.height)]
        bottom = rows[-1]
        assert bottom[:30].strip() == "" and all(cell == BLOCKS[8] for cell in bottom[30:40]), bottom

        graph.configure(lambda n: [0.0] * n, total)  # a sample of 0 is a sample: the floor shows
        await pilot.pause()
        assert set(graph.render_line(graph.size.height - 1).text[:40]) == {BLOCKS[1]}


async def replayed(app: VramtuiApp, pilot: Pilot, samples: int) -> str:
    """The screen's text once a replay's `samples` are in the memory pane, painted."""
    memory = app.query_one(MemoryPane)
    await wait_for(pilot, lambda: memory.state.count == samples)
    memory.repaint(force=True)
    await pilot.pause()
    return screen_text(app)


async def test_memory_pane_shows_a_replayed_nvidia_smi_curve(curve_csv: Path) -> None:
    app = quiet_app(replay_csv=str(curve_csv))
    async with app.run_test(size=(200, 50)) as pilot:
        text = await replayed(app, pilot, 1200)
        # the estimator's card memory is pre-filled from the GPU the curve came from (24564 MiB)
        await wait_for(pilot, lambda: app.query_one(EstimatorPane).value("card") == "23.99GiB")
    assert "GPU0 RTX 4090" in text
    assert "14.1 GiB / 24.0 GiB" in text  # the last sample, on the card's own total
    assert "plateau 14.1 GiB" in text
    assert "fell back yes" in text
    assert "max ever 21.3 GiB" in text  # the 200 ms spike is kept
    from vramtui.core.memory.sampling import ReplaySource

    assert ReplaySource(curve_csv).status().message in text  # the replay's own account of what it read


async def test_no_gpu_is_said_in_the_app_and_the_host_curve_still_shows() -> None:
    """NVML is missing on this machine, which is the normal state: the pane says why. (On a machine
    with a GPU the same test sees the GPU's line instead.)"""
    from vramtui.core.memory.sampling import NvmlSource

    nvml = NvmlSource()
    status = nvml.status()
    nvml.close()
    app = quiet_app(live_sampling=True, sample_interval_s=0.05)
    async with app.run_test(size=(200, 50)) as pilot:
        memory = app.query_one(MemoryPane)
        await wait_for(pilot, lambda: memory.state.count >= 3)
        memory.repaint(force=True)
        await pilot.pause()
        text = screen_text(app)
    assert "host RAM" in text
    if status.ok:
        assert "GPU0" in text and "No GPU data" not in text
    else:
        assert memory.gpu_status == status.message
        assert "No GPU data: NVML" in text  # the reason, in words, in the pane
        assert "Showing host memory" in text


async def test_pause_freezes_the_graph_while_sampling_goes_on() -> None:
    app = quiet_app(live_sampling=True, sample_interval_s=0.05)
    async with app.run_test(size=(120, 40)) as pilot:
        memory = app.query_one(MemoryPane)
        await wait_for(pilot, lambda: memory.state.count >= 2)
        await pilot.press("p")
        assert memory.paused and "graph paused" in screen_text(app)
        painted, count = memory._painted_version, memory.state.count
        await wait_for(pilot, lambda: memory.state.count >= count + 10)
        await pilot.pause(0.6)  # past a repaint tick
        assert memory._painted_version == painted  # the picture stayed
        await pilot.press("p")
        await wait_for(pilot, lambda: memory._painted_version > painted)  # and catches up at once


# ---- layout, keys, palette, themes -----------------------------------------------------------------


async def test_layout_is_four_panes_when_wide_and_one_pane_with_tabs_at_80x24() -> None:
    app = quiet_app()
    async with app.run_test(size=(80, 24)) as pilot:
        assert app.narrow
        shown = [name for name in PANE_ORDER if app.pane(name).display and app.pane(name).region.area]
        assert shown == ["memory"]
        assert "1 Memory" in screen_text(app) and "4 Wizard" in screen_text(app)
        await pilot.press("3")
        shown = [name for name in PANE_ORDER if app.pane(name).region.area]
        assert shown == ["estimator"]
        await pilot.resize_terminal(200, 50)
        await pilot.pause()
        assert not app.narrow
        assert all(app.pane(name).region.area for name in PANE_ORDER)
        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        assert [name for name in PANE_ORDER if app.pane(name).region.area] == ["estimator"]


async def test_palette_lists_every_bound_action_and_runs_one() -> None:
    app = quiet_app()
    async with app.run_test(size=(120, 40)) as pilot:
        titles = {command.title for command in app.get_system_commands(app.screen)}
        listed = {action for action, _title, _help in app.ACTIONS}
        for binding in app.BINDINGS:
            assert binding.action in listed or binding.action.startswith("show_pane"), binding.action
        assert {f"Theme: {name}" for name in app.theme_names} <= titles
        # QA 6: "Close the keys" is offered only while the panel of keys is open
        assert "Close the keys" not in titles
        # QA 7: no model, no wizard step: "Stop the model" and its kin did nothing when chosen
        assert not {"Stop the model", "Relaunch the model", "Wizard: export steps"} & titles
        await pilot.press("question_mark")
        await pilot.pause()
        assert "Close the keys" in {command.title for command in app.get_system_commands(app.screen)}
        await pilot.press("escape")
        await pilot.pause()
        await pilot.press("ctrl+p")
        await pilot.pause()
        await pilot.press(*"pause")
        await pilot.pause(0.3)
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.query_one(MemoryPane).paused)
        await pilot.press("p")
        assert not app.query_one(MemoryPane).paused


async def test_themes_compile_switch_with_t_and_are_remembered(isolated_dirs: Path) -> None:
    compiled = themes.load_themes()
    assert {"vramtui-dark", "vramtui-light", "vramtui-high-contrast"} <= set(compiled)
    for theme in compiled.values():
        for stage in STAGES:
            assert themes.stage_variable(stage) in theme.variables
    assert compiled["vramtui-light"].dark is False

    app = VramtuiApp(live_sampling=False)  # remembers, into the tmp config dir
    async with app.run_test(size=(100, 30)) as pilot:
        assert app.theme == "vramtui-dark"
        await pilot.press("t")
        await pilot.pause()
        assert app.theme != "vramtui-dark"
        chosen = app.theme
    config = tomllib.loads((isolated_dirs / "config" / "config.toml").read_text())
    assert config["theme"] == chosen
    again = VramtuiApp(live_sampling=False)
    assert again.theme == chosen
    with pytest.raises(VramtuiError, match="unknown theme 'nope'"):
        VramtuiApp(theme="nope")


def test_a_broken_theme_file_is_one_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "bad"\n[colors]\nprimary = "not-a-colour"\n')
    with pytest.raises(VramtuiError, match="is not a colour"):
        themes.load_theme_file(bad)
    bad.write_text("name = [")
    with pytest.raises(VramtuiError, match="cannot read theme"):
        themes.load_theme_file(bad)


# ---- estimator -------------------------------------------------------------------------------------


async def test_estimator_updates_as_you_type_and_marks_a_bad_field_in_place() -> None:
    from vramtui.core.estimate.estimator import Settings, estimate
    from vramtui.core.estimate.modelinfo import info_from_flags

    app = quiet_app()
    async with app.run_test(size=(200, 50)) as pilot:
        pane = app.query_one(EstimatorPane)
        for field, text in (("params", "8B"), ("layers", "32"), ("kv_heads", "8"), ("head_dim", "128")):
            app.query_one(f"#est-{field}").focus()
            await pilot.press(*text)
        expected = estimate(
            info_from_flags(params=8_000_000_000, layers=32, kv_heads=8, head_dim=128),
            Settings(backend="llama.cpp", device_bytes=24 * 1024**3),  # empty fields: the engine's defaults
        )
        # the last keystroke's estimate is the core's answer for the whole form
        await wait_for(
            pilot, lambda: pane.estimate is not None and pane.estimate.total_bytes == expected.total_bytes
        )
        assert "FITS" in screen_text(app)

        # a context the card cannot hold turns the verdict, as you type
        app.query_one("#est-context").focus()
        await pilot.press(*"409600000")
        await wait_for(pilot, lambda: pane.estimate is not None and not pane.estimate.fits)
        assert "DOES NOT FIT" in screen_text(app)

        await pilot.press("x")
        await wait_for(pilot, lambda: "context" in pane.errors)
        assert pane.query_one("#est-context").has_class("-bad")
        assert "✖ '409600000x'" in screen_text(app)  # said by the field itself
        assert "is not a whole number" in pane.errors["context"]
        await pilot.press("escape", "1")  # out of the field, then keys are commands again
        assert app.active_pane == "memory"
        assert pane.query_one("#est-context").has_class("-bad")  # still marked after leaving it


async def test_estimator_reads_a_real_gguf(tiny_gguf: Path) -> None:
    from vramtui.core.estimate.estimator import Settings, estimate
    from vramtui.core.estimate.modelinfo import load_model_info

    app = quiet_app()
    async with app.run_test(size=(200, 50)) as pilot:
        pane = app.query_one(EstimatorPane)
        pane.set_value("model", str(tiny_gguf))
        await wait_for(pilot, lambda: pane.estimate is not None)
        expected = estimate(load_model_info(tiny_gguf), Settings())  # the engine's defaults, as the CLI's
        assert pane.estimate.weights_bytes == expected.weights_bytes
        pane.set_value("model", str(tiny_gguf) + ".missing")
        await wait_for(pilot, lambda: "model" in pane.errors)
        assert pane.estimate is None


async def test_estimator_shows_a_hybrids_recurrent_state_row() -> None:
    """Qwen3.5-9B's published text config on transformers: the legend and the details name the state its 24
    Gated DeltaNet layers keep per sequence (tests/data/configs)."""
    from textual.widgets import Select

    config = Path(__file__).resolve().parents[1] / "data" / "configs" / "Qwen--Qwen3.5-9B.text_config.json"
    app = quiet_app()
    async with app.run_test(size=(200, 60)) as pilot:
        pane = app.query_one(EstimatorPane)
        pane.query_one("#est-backend", Select).value = "transformers"
        pane.set_value("card", "80GiB")
        pane.set_value("model", str(config))
        # the count builds the model on PyTorch's meta device: a first import of torch and transformers in
        # this process (the test's own data dir holds no cached count) takes 20 s and more here
        await wait_for(
            pilot, lambda: pane.estimate is not None and pane.estimate.bill.get("recurrent_state") > 0, 120
        )
        await pilot.pause()
        text = str(pane.query_one("#est-result").render())
    state = pane.estimate.bill.get("recurrent_state")
    assert "recurrent state" in text and "/sequence" in text
    assert state == 24 * (3 * (2 * 16 * 128 + 32 * 128) * 2 + 32 * 128 * 128 * 4)  # one sequence, SSM in f32


# ---- log -------------------------------------------------------------------------------------------


def corpus_cases(shared_logs: Path, ids: tuple[str, ...]) -> list[dict[str, str]]:
    import json

    rows = [
        json.loads(line) for line in (shared_logs / "corpus.jsonl").read_text().splitlines() if line.strip()
    ]
    by_id = {row["id"]: row for row in rows}
    return [by_id[case] for case in ids if case in by_id]


@pytest.mark.parametrize("case_id", ["llama.cpp-1", "vllm-6", "transformers-10", "ollama-10"])
async def test_log_pane_diagnoses_a_corpus_log_and_jumps_to_its_first_error(
    shared_logs: Path, tmp_path: Path, case_id: str
) -> None:
    from vramtui.core.logs.diagnose import diagnose_file
    from vramtui.tui.panes.log import LogPane

    cases = corpus_cases(shared_logs, (case_id,))
    if not cases:
        pytest.skip(f"{case_id} is not in this corpus")
    case = cases[0]
    log = tmp_path / f"{case_id}.log"
    log.write_text(case["log"] + "\n", encoding="utf-8")
    expected = diagnose_file(log)
    assert expected.failed and expected.first_error_line  # the corpus case is a failure with a cause

    app = quiet_app(log_file=str(log))
    async with app.run_test(size=(200, 50)) as pilot:
        pane = app.query_one(LogPane)
        await wait_for(pilot, lambda: pane.finished)
        assert len(pane.view.lines) == len(case["log"].splitlines())
        assert pane.diagnosis.failure == expected.failure == case["failure"]
        assert pane.diagnosis.failure_stage == expected.failure_stage
        header = screen_text(app)
        # In words, not codes (issue 13 defect 11): the table the screen reads them through.
        words = f"FAILED at {stage_words(expected.failure_stage)}: {failure_words(expected.failure)}"
        assert words in header
        assert "_" not in expected.failure or expected.failure not in header
        assert f"first error, line {expected.first_error_line}" in header
        assert "✖ " + expected.failure_stage.replace("_", " ") in header  # the failing stage is highlighted
        await pilot.press("e")
        await pilot.pause()
        assert pane.view.marked == expected.first_error_line - 1
        marked_text = pane.view.lines[pane.view.marked].text
        assert marked_text[:40] in screen_text(app)  # scrolled into view


async def test_log_text_is_shown_as_text_never_as_markup_or_escape_codes(tmp_path: Path) -> None:
    from vramtui.tui.panes.log import LogPane

    log = tmp_path / "hostile.log"
    log.write_bytes(
        b"llama_model_loader: loaded meta data [bold red]not markup[/] and [link=file:///etc]x[/link]\n"
        b"\x1b[31mred text\x1b[0m then a bell\x07 and a title \x1b]0;pwned\x07 end\n"
        b"invalid utf-8 \xff\xfe here\n"
    )
    app = quiet_app(log_file=str(log))
    async with app.run_test(size=(200, 50)) as pilot:
        pane = app.query_one(LogPane)
        await wait_for(pilot, lambda: pane.finished)
        text = screen_text(app)
        strips = [pane.view.render_line(y) for y in range(3)]
    assert "[bold red]not markup[/]" in text
    assert "[link=file:///etc]x[/link]" in text
    assert "red text then a bell and a title  end" in text
    rendered = "".join(segment.text for strip in strips for segment in strip)
    assert "\x1b" not in rendered and "\x07" not in rendered
    assert "invalid utf-8" in text


async def test_a_log_file_is_followed_as_it_grows(tmp_path: Path) -> None:
    from vramtui.tui.panes.log import LogPane

    log = tmp_path / "live.log"
    log.write_text("llama_model_loader: loaded meta data with 22 key-value pairs\n")
    app = quiet_app(log_file=str(log))
    async with app.run_test(size=(200, 50)) as pilot:
        pane = app.query_one(LogPane)
        await wait_for(pilot, lambda: len(pane.view.lines) == 1)
        with log.open("a") as handle:
            handle.write("llama_kv_cache_init:      CUDA0 KV buffer size =   379.23 MiB\n")
            handle.write(
                "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 2048.00 MiB on device 0: cudaMalloc failed: out of memory\n"
            )
        await wait_for(pilot, lambda: len(pane.view.lines) == 3 and pane.diagnosis.failed)
        assert pane.diagnosis.failure == "cuda_oom"
        assert "cudaMalloc failed" in screen_text(app)


async def test_search_marks_each_match_in_turn(tmp_path: Path) -> None:
    from vramtui.tui.panes.log import LogPane

    log = tmp_path / "server.log"
    lines = [f"line {i}: load_tensors: layer {i} assigned to device CPU" for i in range(500)]
    lines[123] = "llama_kv_cache: needle in the haystack"
    lines[400] = "another NEEDLE here"
    log.write_text("\n".join(lines) + "\n")
    app = quiet_app(log_file=str(log))
    async with app.run_test(size=(200, 50)) as pilot:
        pane = app.query_one(LogPane)
        await wait_for(pilot, lambda: pane.finished)
        await pilot.press("2", "slash", *"needle")
        await wait_for(pilot, lambda: pane.view.marked == 123)
        await pilot.press("enter")
        await wait_for(pilot, lambda: pane.view.marked == 400)
        assert "another NEEDLE here" in screen_text(app)
        await pilot.press("enter")
        await wait_for(pilot, lambda: pane.view.marked == 123)  # wraps around
        await pilot.press("escape")
        assert pane.view.search_text == ""


async def test_a_100k_line_log_arrives_in_batches_and_the_app_stays_responsive(tmp_path: Path) -> None:
    """100,000 lines: tagged in the feed's thread, delivered in few batches, keys answered meanwhile."""
    from vramtui.tui.panes.log import LogPane

    log = tmp_path / "big.log"
    block = [
        "load_tensors: offloading 32 repeating layers to GPU",
        "llama_kv_cache_unified:      CUDA0 KV buffer size =  1024.00 MiB",
        "slot update_slots: id  0 | task 12 | prompt processing progress, n_past = 2048",
        "srv  log_server_r: request: POST /v1/chat/completions 127.0.0.1 200",
    ]
    with log.open("w") as handle:
        for i in range(25_000):
            handle.write("\n".join(block) + f" #{i}\n")
    app = quiet_app(log_file=str(log))
    async with app.run_test(size=(120, 40)) as pilot:
        pane = app.query_one(LogPane)
        await pilot.press("3")  # a key while the log streams in
        assert app.active_pane == "estimator"
        await wait_for(pilot, lambda: pane.finished, timeout_s=120)
        assert len(pane.view.lines) == 100_000
        await pilot.press("2", "end")  # digits switch panes from the estimator too (issue 22 defect 5)
        await pilot.pause()
        assert "#24999" in screen_text(app)  # follows the tail
        batches = pane.batches_received
    assert 0 < batches < 2_000, batches  # coalesced: not one message per line


# ---- the commands that open the app ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--theme", "nope"], "unknown theme 'nope' (available: "),
        (["--log", "no-such.log"], "log file not found: no-such.log"),
        (["--replay", "no-such.csv"], "replay CSV not found: no-such.csv"),
        (["run", "no-such.toml"], "no-such.toml"),
    ],
)
def test_bad_input_to_the_app_commands_is_one_line_before_the_screen_opens(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from vramtui.cli import main

    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("vramtui: ") and message in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_the_app_refuses_what_the_cli_refuses_before_the_screen_opens(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A binary file given as a log is refused by `vramtui --log` with the line `vramtui diagnose`
    gives; a profile whose values cannot make a command line is refused by `vramtui run` (exit 2, one
    line), not shown as the log pane's first line."""
    from vramtui.cli import main

    binary = tmp_path / "bin.log"
    binary.write_bytes(bytes(range(256)) * 64)
    assert main(["diagnose", str(binary)]) == 2
    refused = capsys.readouterr().err
    assert refused == f"vramtui: {binary} looks like binary data, not a text log\n"
    assert main(["--log", str(binary)]) == 2
    assert capsys.readouterr().err == refused
    # a compressed or UTF-16 log: diagnose reads it, the pane (plain text by offsets) says how to open it
    import gzip

    packed = tmp_path / "server.log.gz"
    packed.write_bytes(
        gzip.compress(b"llama_model_load: error loading model: unknown model architecture: 'x'\n")
    )
    assert main(["--log", str(packed)]) == 2
    err = capsys.readouterr().err
    # the plain copy is named beside it, never the file itself or a live server.log (QA: `> server.log`)
    assert err.count("\n") == 1 and f"`zcat {packed} > {packed}.txt`" in err and "is gzip-compressed" in err
    wide = tmp_path / "windows.log"
    wide.write_bytes("main: model loaded\n".encode("utf-16"))
    assert main(["--log", str(wide)]) == 2
    assert f"`iconv -f UTF-16 -t UTF-8 {wide} > {wide}.txt`" in capsys.readouterr().err

    profile = tmp_path / "types.toml"
    profile.write_text(
        'backend = "llama-cpp-python"\nmodel = "m.gguf"\n[params]\ncontext = "lots"\n', encoding="utf-8"
    )
    assert main(["run", str(profile)]) == 2
    err = capsys.readouterr().err
    assert err == 'vramtui: context must be a whole number, not "lots" (8192 or 32k)\n'
    # a setting the engine refuses: `run` says it before the screen opens, as `check` does (QA: launched)
    model = tmp_path / "m.gguf"
    model.write_bytes(EMPTY_GGUF)
    profile.write_text(f'backend = "llama-cpp-python"\nmodel = "{model}"\n[params]\nparallel = 3\n')
    assert main(["run", str(profile)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "runs at most 1 sequence at once, not 3" in err


async def test_stage_colours_come_from_the_theme_variables(tmp_path: Path) -> None:
    from textual.color import Color

    from vramtui.tui.panes.log import LogPane

    log = tmp_path / "stages.log"
    log.write_text("llama_kv_cache_init:      CUDA0 KV buffer size =   379.23 MiB\n")
    app = quiet_app(log_file=str(log))
    async with app.run_test(size=(200, 50)) as pilot:
        pane = app.query_one(LogPane)
        await wait_for(pilot, lambda: pane.finished)
        seen = {}
        for name in ("vramtui-dark", "vramtui-high-contrast"):
            app.theme = name
            await pilot.pause()
            line = pane.view.lines[0]
            assert line.stage == "kv_cache"
            tag = next(seg for seg in pane.view.render_line(0) if seg.text == "KV")
            expected = Color.parse(app.available_themes[name].variables["stage-kv-cache"]).rich_color
            assert tag.style.color == expected
            seen[name] = tag.style.color
    assert seen["vramtui-dark"] != seen["vramtui-high-contrast"]


async def test_a_log_that_streamed_in_while_its_pane_was_hidden_shows_its_tail(tmp_path: Path) -> None:
    from vramtui.tui.panes.log import LogPane

    app = quiet_app()
    async with app.run_test(size=(80, 24)) as pilot:
        assert app.active_pane == "memory"  # the log pane is hidden on a small terminal
        pane = app.query_one(LogPane)
        feed = pane.open_stream("server")
        for number in range(300):
            feed.push(f"srv  log_server_r: request {number}")
        feed.end(0)
        await wait_for(pilot, lambda: pane.finished)
        await pilot.press("2")
        await pilot.pause()
        text = screen_text(app)
    assert "request 299" in text and "request 0\n" not in text


async def test_a_launch_still_coming_up_is_starting_not_no_failure() -> None:
    """QA 7: a program still starting read 'NO FAILURE reached no stage yet'; once it is up, no failure."""
    from vramtui.tui.panes.log import LogPane

    app = quiet_app()
    async with app.run_test(size=(120, 30)) as pilot:
        pane = app.query_one(LogPane)
        feed = pane.open_stream("server")
        feed.push("0.00.302.419 I log_info: verbosity = 3 (adjust with the `-lv N` CLI arg)")
        feed.push("0.00.303.810 I srv  llama_server: loading model")
        feed.push("0.01.303.810 I llama_kv_cache:        CPU KV buffer size =    16.00 MiB")
        await pilot.press("2")
        await wait_for(pilot, lambda: "STARTING" in screen_text(app))
        # QA 8: a launch that reached a stage read "NOT READY ... or stopped without a message" while it ran
        assert "NO FAILURE" not in screen_text(app) and "NOT READY" not in screen_text(app)
        feed.push("0.05.303.810 I main: server is listening on http://127.0.0.1:8080")
        await wait_for(pilot, lambda: "NO FAILURE" in screen_text(app))
        feed.end(None)


async def test_estimator_grid_view_at_80x24(tiny_gguf: Path) -> None:
    """The grid view shows `estimate --table`'s grid for the model in the form, inside 80 columns."""
    from vramtui.core.estimate.estimator import Settings
    from vramtui.core.estimate.grid import build_table
    from vramtui.core.estimate.modelinfo import load_model_info

    app = quiet_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("3")
        pane = app.query_one(EstimatorPane)
        pane.set_value("model", str(tiny_gguf))
        await wait_for(pilot, lambda: pane.estimate is not None)
        assert pane.table is None  # the breakdown first
        pane.query_one("#est-view").value = "grid"
        await wait_for(pilot, lambda: pane.table is not None)
        expected = build_table(load_model_info(tiny_gguf), Settings())
        assert [[c.max_parallel for c in row.cells] for row in pane.table.rows] == [
            [c.max_parallel for c in row.cells] for row in expected.rows
        ]
        shown = str(pane.query_one("#est-result").render())
        assert "quant" in shown and "q4_k_m" in shown
        assert all(len(line) <= 80 for line in shown.splitlines())


async def test_the_headers_first_error_says_what_the_line_says_not_its_time_stamps(tmp_path: Path) -> None:
    """QA 5: at 80 columns a vramtui run log's first error read "2026-12-05T03:02:42.791 …": its time stamp
    and llama.cpp's own took the room; the header says what the line says."""
    from vramtui.tui.panes.log import LogPane

    log = tmp_path / "run.log"
    log.write_text(
        "2026-12-05T03:02:42.700 0.00.001.000 I llama_model_loader: loaded meta data with 25 key-value pairs\n"
        "2026-12-05T03:02:42.791 0.00.017.565 E ggml_aligned_malloc: insufficient memory (attempted to "
        "allocate 2048.00 MB)\n",
        encoding="utf-8",
    )
    app = quiet_app(log_file=str(log))
    async with app.run_test(size=(80, 24)) as pilot:
        pane = app.query_one(LogPane)
        await wait_for(pilot, lambda: pane.finished)
        header = screen_text(app)
        said = header.split("(key e):", 1)[-1]
        assert said.strip().startswith("ggml_aligned_malloc"), header


async def test_a_port_held_marks_no_stage_failed_in_the_strip(tmp_path: Path) -> None:
    """QA 15: the header said "FAILED at start-up" while its strip marked "✖ load weights"."""
    from vramtui.tui.panes.log import LogPane

    source = Path(__file__).resolve().parents[1] / "data" / "vllm" / "port-in-use.log"
    log = tmp_path / "port.log"
    log.write_text(
        "\n".join(line for line in source.read_text().splitlines() if not line.startswith("# ")) + "\n"
    )
    app = quiet_app(log_file=str(log))
    async with app.run_test(size=(200, 50)) as pilot:
        pane = app.query_one(LogPane)
        await wait_for(pilot, lambda: pane.finished)
        header = screen_text(app)
        assert "FAILED at start-up, before the model was read" in header
        strip = header.split("FAILED")[0]
        assert "✖ load weights" not in header
        # no stage passed or failed: the start-up step failed before them (QA 32 D5: "✔ load weights")
        assert "✖ start-up ›" in strip and "✔" not in strip and strip.count("✖") == 1


async def test_a_replayed_process_series_says_no_process_count_it_does_not_have(tmp_path: Path) -> None:
    """QA 24 F11: a `record --pid` recording keeps the tree's RSS, not its PIDs; the model process row read
    "0 processes" beside its 73 MiB."""
    header = (
        "timestamp, host.ram_used [MiB], host.ram_total [MiB], host.swap_used [MiB], process.tree_rss [MiB], "
        "process.tree_gpu [MiB], process.pids\n"
    )
    rows = "".join(
        f"2026/12/05 05:24:{10 + i:02d}.000, 622 MiB, 24105 MiB, 0 MiB, 73 MiB, [N/A], 1\n" for i in range(30)
    )
    (tmp_path / "rec.csv").write_text(header + rows)
    app = quiet_app(replay_csv=str(tmp_path / "rec.csv"))
    async with app.run_test(size=(200, 50)) as pilot:
        text = await replayed(app, pilot, 30)
    assert "model process" in text and "73.0 MiB" in text, text
    assert "0 processes" not in text
