"""`estimate --table`: every cell is the estimator's own answer at that row's file or type and that context."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from vramtui.cli import main
from vramtui.core.demo.tinygguf import TinyModelSpec, write_tiny_gguf
from vramtui.core.estimate.estimator import Settings, max_parallel, size
from vramtui.core.estimate.grid import build_table, grid_contexts
from vramtui.core.estimate.modelinfo import load_model_info
from vramtui.core.units import MIB

SHAPE = dict(n_layer=2, n_embd=256, n_ff=512, context_length=32768, name="grid-tiny")


@pytest.fixture(scope="module")
def quant_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One model in three file types side by side, plus a different model and a stray file."""
    folder = tmp_path_factory.mktemp("quants")
    for dtype in ("f16", "f32", "q8_0"):
        write_tiny_gguf(folder / f"grid-tiny-{dtype}.gguf", TinyModelSpec(**SHAPE, dtype=dtype))
    write_tiny_gguf(folder / "other-model-f16.gguf", TinyModelSpec(n_layer=3, n_embd=128, n_ff=256))
    (folder / "broken.gguf").write_bytes(b"GGUF not really")
    return folder


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict]:
    code = main(["estimate", *argv, "--table", "--json"])
    return code, json.loads(capsys.readouterr().out)


def _check_cells(row: dict, info, settings: Settings, parallel: int) -> None:
    for cell in row["cells"]:
        context = cell["context"]
        est = size(info, replace(settings, context=context * parallel, parallel=parallel))
        assert (cell["fits"], cell["total_bytes"]) == (est.fits, est.total_bytes)
        assert cell["max_parallel"] == max_parallel(info, replace(settings, context=context, parallel=1))


def test_files_beside_the_model_are_the_rows(capsys: pytest.CaptureFixture[str], quant_folder: Path) -> None:
    model = quant_folder / "grid-tiny-f16.gguf"
    code, data = _json(capsys, str(model), "--gpu-mem", "600MiB", "--parallel", "2")
    table = data["table"]
    assert {row["quant"] for row in table["rows"]} == {"f16", "f32", "q8_0"}  # not the other model
    assert all(row["source"] == "file" for row in table["rows"])
    assert table["contexts"] == [4096, 8192, 16384, 32768]
    weights = [row["weights_bytes"] for row in table["rows"]]
    assert weights == sorted(weights)
    settings = Settings(device_bytes=600 * MIB)
    for row in table["rows"]:
        info = load_model_info(row["file"])
        assert row["file"].endswith(f"-{row['quant']}.gguf")
        _check_cells(row, info, settings, parallel=2)
    cells = [cell for row in table["rows"] for cell in row["cells"]]
    assert any(c["fits"] for c in cells) and not all(c["fits"] for c in cells)  # the card decides
    assert code == 0
    assert "weights_bytes" in data and "calibration" in data  # the estimate's keys stay


def test_a_lone_file_gets_the_typical_types(
    capsys: pytest.CaptureFixture[str], quant_folder: Path, tmp_path: Path
) -> None:
    lone = tmp_path / "lone-f16.gguf"
    shutil.copy(quant_folder / "grid-tiny-f16.gguf", lone)
    _code, data = _json(capsys, str(lone), "--gpu-mem", "600MiB")
    rows = {row["quant"]: row for row in data["table"]["rows"]}
    assert rows["f16"]["source"] == "file"
    assert {"q4_k_m", "q8_0", "q2_k"} <= {q for q, row in rows.items() if row["source"] == "typical"}
    info = load_model_info(lone)
    for quant, row in rows.items():
        settings = Settings(device_bytes=600 * MIB, quant=None if row["source"] == "file" else quant)
        _check_cells(row, info, settings, parallel=1)


def test_hf_engines_offer_their_own_types(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 2048,
        "intermediate_size": 8192, "num_hidden_layers": 16, "num_attention_heads": 32,
        "num_key_value_heads": 8, "vocab_size": 128256, "max_position_embeddings": 40960,
        "torch_dtype": "bfloat16",
    }  # fmt: skip
    (tmp_path / "config.json").write_text(json.dumps(config))
    for backend in ("vllm", "transformers"):
        _code, data = _json(capsys, str(tmp_path / "config.json"), "--backend", backend, "--no-meta")
        quants = [row["quant"] for row in data["table"]["rows"]]
        assert "bf16" in quants and "nf4" in quants and not any(q.startswith("q") for q in quants)
        assert data["table"]["contexts"] == [4096, 8192, 16384, 32768, 40960]  # up to the trained length


def test_text_grid_fits_80_columns_and_says_its_time(
    capsys: pytest.CaptureFixture[str], quant_folder: Path
) -> None:
    main(["estimate", str(quant_folder / "grid-tiny-q8_0.gguf"), "--table", "--gpu-mem", "600MiB"])
    out = capsys.readouterr().out
    lines = out.splitlines()
    grid = [line for line in lines if line.startswith("  ") and not line.startswith("   ")]
    assert grid[0].split()[:3] == ["quant", "source", "weights"] and "32k" in grid[0]
    assert all(len(line) <= 80 for line in lines[1:]), [line for line in lines if len(line) > 80]
    assert any(line.startswith("computed  3 rows x 4 contexts") for line in lines)


def test_contexts_double_up_to_the_trained_length() -> None:
    from vramtui.core.estimate.modelinfo import ModelInfo

    assert grid_contexts(ModelInfo("x", max_context=131072)) == [4096 << i for i in range(6)]
    assert grid_contexts(ModelInfo("x", max_context=40960))[-1] == 40960
    assert grid_contexts(ModelInfo("x", max_context=2048)) == [2048]
    assert grid_contexts(ModelInfo("x"))[-1] == 32768  # unknown: up to 32k, and the table says so


def test_grid_is_fast_for_an_8b_model() -> None:
    from vramtui.core.estimate.modelinfo import info_from_config

    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
        "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
        "num_key_value_heads": 8, "vocab_size": 128256, "max_position_embeddings": 131072,
    }  # fmt: skip
    info = info_from_config(config, "llama-3-8b", exact_params=False)
    build_table(info, Settings())  # imports and caches warm
    table = build_table(info, Settings())
    assert len(table.rows) == 7 and len(table.contexts) == 6
    assert table.elapsed_s < 2.0, table.elapsed_s  # 0.12 s here; 0.36 s without the sizing memo


def test_a_quantized_config_is_a_row_of_its_own_for_the_engines_that_load_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # gpt-oss-20b as published: MXFP4 experts, the rest BF16 (13.76 GB of safetensors); vLLM loads that
    config = Path(__file__).parents[2] / "data" / "configs" / "openai--gpt-oss-20b.config.json"
    for backend in ("vllm", "transformers"):
        _code, data = _json(capsys, str(config), "--backend", backend, "--gpu-mem", "24GiB")
        rows = {row["quant"]: row for row in data["table"]["rows"]}
        assert rows["mxfp4"]["source"] == "config" and rows["mxfp4"]["file"] is None
        info = load_model_info(config)
        settings = Settings(backend=backend, device_bytes=24 * 2**30)
        _check_cells(rows["mxfp4"], info, settings, parallel=1)
        assert rows["mxfp4"]["weights_bytes"] < rows["bf16"]["weights_bytes"]
    # llama.cpp runs a GGUF, a conversion: its rows stay the GGUF types
    _code, data = _json(capsys, str(config), "--gpu-mem", "24GiB")
    assert all(row["source"] == "typical" for row in data["table"]["rows"])


def test_the_header_says_whether_sequences_were_asked_for_and_the_legend_only_where_a_cell_has_it(
    capsys: pytest.CaptureFixture[str], quant_folder: Path
) -> None:
    """QA: the grid said "1 sequence asked for" where nothing was asked (the single estimate uses the
    engine's default slots), and printed the "!" legend for vLLM, where no cell can carry it."""
    model = str(quant_folder / "grid-tiny-q8_0.gguf")
    main(["estimate", model, "--table", "--gpu-mem", "600MiB"])
    out = capsys.readouterr().out
    assert "--parallel not given" in out and "asked for" not in out
    code, data = _json(capsys, model, "--gpu-mem", "600MiB")
    assert code == 0
    assert data["table"]["parallel_asked"] is False and data["table"]["parallel"] == 1
    # many sequences on a small card: some cells hold fewer than asked for, and the legend says what ! is
    main(["estimate", model, "--table", "--gpu-mem", "600MiB", "--parallel", "64"])
    out = capsys.readouterr().out
    marked = [line for line in out.splitlines() if line.startswith("  q") and "!" in line]
    assert (
        "64 sequences asked for" in out and marked and "! one sequence fits, the run as asked does not" in out
    )
    # vLLM's --max-num-seqs is a ceiling: a cell fits at one request of its context, so no "!"
    config = Path(__file__).parents[2] / "data" / "configs" / "Qwen--Qwen2.5-0.5B-Instruct.config.json"
    main(["estimate", str(config), "--backend", "vllm", "--table", "--gpu-mem", "8GiB", "--parallel", "64"])
    out = capsys.readouterr().out
    assert "64 sequences asked for" in out and "!" not in out


def test_more_sequences_than_the_engine_runs_fit_nowhere_and_say_why(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """QA: `--table --parallel 300` under llama.cpp showed 256 cells with no mark and exit 0, while the
    estimate says llama.cpp refuses to start; the plain estimate called that refusal "DOES NOT FIT" and
    offered a --gpu-layers count that 'fits'."""
    config = Path(__file__).parents[2] / "data" / "configs" / "Qwen--Qwen2.5-0.5B-Instruct.config.json"
    argv = ["estimate", str(config), "--gpu-mem", "24GiB", "--parallel", "300"]
    assert main([*argv, "--table"]) == 1
    out = capsys.readouterr().out
    rows = [line.split() for line in out.splitlines() if line.startswith("  q") and "typical" in line]
    cells = [row[4:] for row in rows]  # quant, source, weights (N MiB), then a cell per context
    assert cells and all(cell.endswith("!") for row in cells for cell in row)
    assert "note      llama.cpp runs at most 256 sequences at once, not 300" in out
    assert main([*argv, "--ctx", "4096"]) == 1
    out = capsys.readouterr().out
    assert "verdict   WILL NOT START: llama.cpp runs at most 256" in out and "--gpu-layers" not in out
    assert main(["estimate", str(config), "--gpu-mem", "24GiB", "--parallel", "256", "--table"]) == 0


def test_each_file_is_a_row_named_as_its_name_says(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """QA 18 F15: rows showed the header's file type, so a user had to map q4_k_m back to UD-Q4_K_XL.gguf,
    and two files whose headers say the same type (Unsloth's UD-Q8_K_XL and a plain Q8_0) were one row.
    Each file is its own row now, shown (and named in --json's `name`) as its file name gives it."""
    for name in ("grid-tiny-F16", "grid-tiny-Q8_0", "grid-tiny-UD-Q8_K_XL"):
        dtype = "f16" if name.endswith("F16") else "q8_0"  # both q8_0 files' headers say Q8_0
        write_tiny_gguf(tmp_path / f"{name}.gguf", TinyModelSpec(**SHAPE, dtype=dtype))
    model = tmp_path / "grid-tiny-F16.gguf"
    _code, data = _json(capsys, str(model), "--gpu-mem", "600MiB")
    rows = data["table"]["rows"]
    assert sorted(row["name"] for row in rows) == ["F16", "Q8_0", "UD-Q8_K_XL"]
    assert sorted(row["quant"] for row in rows) == ["f16", "q8_0", "q8_0"]  # the headers' types, as before
    main(["estimate", str(model), "--gpu-mem", "600MiB", "--table"])
    shown = capsys.readouterr().out
    assert "  UD-Q8_K_XL " in shown and "  Q8_0 " in shown, shown
