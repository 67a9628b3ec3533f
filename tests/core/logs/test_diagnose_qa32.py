"""QA 32's failed starts, read from the real logs the QA made here with llama-server 0.3.36: a folder given as
the model (D2, D8; its path rewritten to the test's own folder), a prompt over the only slot (D9)."""

from __future__ import annotations

from pathlib import Path

from vramtui.core.logs.diagnose import diagnose_text

LOGS = Path(__file__).resolve().parents[2] / "data" / "logs"
MADE_AT = "/tmp/qa32/adir"  # the folder the log was made with


def _log_naming(path: Path | str) -> str:
    return (LOGS / "llama-server-model-folder.log").read_text().replace(MADE_AT, str(path))


def test_a_folder_given_as_the_model_is_a_wrong_path_not_a_corrupt_file(tmp_path: Path) -> None:
    folder = tmp_path / "models"
    folder.mkdir()
    diagnosis = diagnose_text(_log_naming(folder))
    assert (diagnosis.failure, diagnosis.cause) == ("file_missing", "model_folder")
    assert "is a folder" in diagnosis.summary and "before the model was read" in diagnosis.summary
    advice = " ".join(diagnosis.advice)
    assert f"-m {folder}/MODEL.gguf" in advice
    assert "download it again" not in advice


def test_a_path_that_is_no_folder_here_stays_a_file_that_does_not_read(tmp_path: Path) -> None:
    # a log from another machine, or a file that is not a GGUF: the path is no folder on this one
    plain = tmp_path / "model.gguf"
    plain.write_bytes(b"not a gguf")
    for path in (plain, tmp_path / "elsewhere"):
        diagnosis = diagnose_text(_log_naming(path))
        assert diagnosis.cause == "truncated_file", path
        assert "download it again" in " ".join(diagnosis.advice)


def test_the_settings_print_is_not_where_the_weights_began(tmp_path: Path) -> None:
    # 2026's `common_params_print_info` prints the settings before any model (QA 32 D8): the stage began at
    # `load_model: loading model`, the line the evidence quotes
    diagnosis = diagnose_text(_log_naming(tmp_path / "elsewhere"))
    began = [line for line in diagnosis.evidence if "began" in line]
    assert began and "loading model" in began[0] and "common_params_print_info" not in began[0]


def test_a_request_over_its_only_slot_is_not_told_to_use_fewer_slots() -> None:
    # the real llama-server 0.3.36 with --parallel 1 and a 3204-token prompt (QA 32 D9): "fewer slots give
    # one request more of it" beside the log's own "n_slots = 1"
    text = (LOGS / "llama-server-prompt-over-one-slot.log").read_text()
    assert "n_slots = 1" in text
    diagnosis = diagnose_text(text)
    assert diagnosis.cause == "prompt_over_slot" and diagnosis.engine_figures.get("server_slots") == 1
    advice = " ".join(diagnosis.advice)
    assert "shorter input" in advice and "fewer slots" not in advice
    four = diagnose_text(text.replace("n_slots = 1", "n_slots = 4"))
    assert "fewer slots" in " ".join(four.advice)


def test_a_value_the_engine_refused_names_the_flag_and_keeps_it() -> None:
    # llama-server 0.3.36 --cache-type-k q9_9: "error while handling argument" is a known flag's bad value
    # (QA 32 D12: advised "Remove or respell the flag"); an unknown flag keeps that advice
    value = diagnose_text((LOGS / "llama-server-bad-cache-type-value.log").read_text())
    assert value.cause == "bad_argument"
    assert (
        value.advice[0].startswith("--cache-type-k takes no such value") and "respell" not in value.advice[0]
    )
    unknown = diagnose_text((LOGS / "llama-server-unknown-flag.log").read_text())
    assert unknown.cause == "bad_argument" and unknown.advice[0].startswith("Remove or respell the flag")
    # vLLM's argparse says the same of a choice it does not offer
    vllm = "vllm serve: error: argument --kv-cache-dtype: invalid choice: 'q9' (choose from 'auto', 'fp8')\n"
    assert diagnose_text(vllm, backend="vllm").advice[0].startswith("--kv-cache-dtype takes no such value")


def test_eager_attention_running_out_of_host_memory_names_sdpa() -> None:
    # vramtui's transformers runner with --attn-implementation eager under `ulimit -v`, a ~4000-token chat
    # request: eager_attention_forward's score matrix (246 MiB) could not be allocated (QA 32 D15)
    text = (LOGS / "transformers-eager-attention-host-oom.log").read_text()
    diagnosis = diagnose_text(text)
    assert (diagnosis.failure_stage, diagnosis.failure) == ("inference", "host_oom")
    assert "--attn-implementation sdpa" in diagnosis.advice[0]
    sdpa = diagnose_text(text.replace("eager_attention_forward", "sdpa_attention_forward"))
    assert not any("sdpa" in line for line in sdpa.advice)
