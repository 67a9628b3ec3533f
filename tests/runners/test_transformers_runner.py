"""The transformers runner for real, on the CPU, with a tiny random Llama built from a config.

The tokenizer is a byte-level BPE with no merges, built offline with `tokenizers` and saved as a
PreTrainedTokenizerFast: any text round-trips, nothing is downloaded.
"""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path

import httpx
import pytest

from vramtui.core.launch import procs
from vramtui.core.launch.launcher import ModelServer, run_check
from vramtui.core.launch.profile import Profile
from vramtui.core.launch.smoke import smoke_request
from vramtui.core.logs.diagnose import diagnose_file
from vramtui.runners.transformers_server import parse_max_memory

CHAT_TEMPLATE = (
    "{% for m in messages %}<s>{{ m['role'] }}\n{{ m['content'] }}</s>\n{% endfor %}"
    "{% if add_generation_prompt %}<s>assistant\n{% endif %}"
)

needs_transformers = pytest.mark.skipif(
    importlib.util.find_spec("transformers") is None or importlib.util.find_spec("torch") is None,
    reason="transformers and torch are not installed",
)


@pytest.fixture(scope="module")
def tiny_hf_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    folder = tmp_path_factory.mktemp("hf") / "tiny-llama"
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for symbol in sorted(pre_tokenizers.ByteLevel.alphabet()):
        vocab[symbol] = len(vocab)
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, bos_token="<s>", eos_token="</s>", unk_token="<unk>", pad_token="<unk>"
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(folder)
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(vocab),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
    )
    LlamaForCausalLM(config).save_pretrained(folder)
    return folder


def test_parse_max_memory() -> None:
    assert parse_max_memory("0=10GiB, cpu=30GiB") == {0: "10GiB", "cpu": "30GiB"}
    with pytest.raises(ValueError, match="DEVICE=SIZE"):
        parse_max_memory("10GiB")


@pytest.mark.engine
@needs_transformers
def test_runner_comes_up_and_answers_through_run_check(tiny_hf_model: Path, tmp_path: Path) -> None:
    profile = Profile(
        backend="transformers",
        model=str(tiny_hf_model),
        port=0,
        params={"context": 256, "parallel": 2, "dtype": "float32", "threads": 1},
        ready_timeout=120,
    )
    lines: list[str] = []
    started: list[int] = []
    result = run_check(
        profile, log_dir=tmp_path, on_line=lines.append, on_start=lambda s: started.append(s.pid or 0)
    )
    assert result.ready and result.ok, result.to_dict()
    assert result.stage == "inference"
    assert result.smoke is not None and result.smoke.status == 200 and result.smoke.completion_tokens
    # the decode rate only where the answer came over several chunks (tests/core/launch/test_smoke.py): the
    # streamer holds a random model's symbols back, so its answer may come in one piece, and no rate is made up
    assert result.ttft_s is not None
    # Stage lines as real servers print them, in order
    stages = [line for line in lines if line.startswith("vramtui-runner: ")]
    order = ["loading tokenizer", "loading weights", "weights loaded", "ready: serving"]
    positions = [next(i for i, line in enumerate(stages) if key in line) for key in order]
    assert positions == sorted(positions)
    assert result.peak_mib is not None and result.peak_mib > 50  # torch alone is that much
    assert result.released is True
    assert not procs.group_members(started[0])
    # QA 11: its record names the build (transformers and torch) and bills the weights to the host, so a
    # rerun is calibrated by it (the runtime measured), as every engine's is
    import json

    from vramtui.core.estimate.calibrate import CPU_DEVICE, derive, load_records

    record = json.loads(Path(result.log_file or "").with_suffix(".run.json").read_text())
    assert "transformers==" in record["engine"]["build"] and "torch==" in record["engine"]["build"]
    assert set(record["printed"]["bill"]) == {"host"}
    found = derive(load_records(tmp_path)[0], CPU_DEVICE, "transformers")
    assert found is not None and found.runtime_bytes is not None and found.runtime_bytes > 50 * 2**20


@pytest.mark.engine
@needs_transformers
def test_runner_names_context_and_model_mismatches(tiny_hf_model: Path, tmp_path: Path) -> None:
    profile = Profile(
        backend="transformers",
        model=str(tiny_hf_model),
        port=0,
        params={"context": 64, "served_model_name": "tiny", "threads": 1},
        ready_timeout=120,
    )
    with ModelServer(profile, log_dir=tmp_path) as server:
        assert server.wait_ready(120), server.lines[-5:]
        assert server.plan.model_name == "tiny"
        good = smoke_request(server.base_url, "tiny")
        assert good.ok and good.status == 200
        wrong = smoke_request(server.base_url, str(tiny_hf_model / "other"))
        assert not wrong.ok and wrong.status == 404 and wrong.kind == "model_not_found"
        assert wrong.models == ["tiny"] and "tiny" in wrong.meaning
        too_long = smoke_request(server.base_url, "tiny", max_tokens=100)
        assert too_long.status == 400 and "maximum context length is 64 tokens" in too_long.meaning
        # a generation that raises answers the client with its error and the server stays up (QA 32 D15:
        # "Remote end closed connection without response")
        failed = smoke_request(server.base_url, "tiny", max_tokens=-1)
        assert failed.status == 500 and "max_new_tokens" in failed.meaning, failed.meaning
        chat = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": -1}
        plain = httpx.post(f"{server.base_url}/v1/chat/completions", json=chat, timeout=60)  # not streamed
        assert plain.status_code == 500 and "max_new_tokens" in plain.json()["error"]["message"]
        assert smoke_request(server.base_url, "tiny").ok
        # the runner logs the reason before it answers; vramtui's reader may not have taken the line yet,
        # and a line read after vramtui's own "stopping the server" line is read as the stop's noise
        deadline = time.monotonic() + 10
        while not any("request refused with HTTP 400" in line.text for line in server.lines):
            assert time.monotonic() < deadline, server.lines[-5:]
            time.sleep(0.05)
        pid = server.pid
        log_file = Path(server.log_file or "")
    assert server.released is True and pid is not None and not procs.group_members(pid)
    # the refusal's reason is in the log, so diagnose reads the run as a context limit, not a bare 400
    found = diagnose_file(log_file, backend="transformers")
    assert (found.failure_stage, found.failure) == ("inference", "context_too_long"), found.first_error_text
    assert "maximum context length is 64 tokens" in (found.first_error_text or "")


@pytest.mark.engine
@needs_transformers
@pytest.mark.skipif(importlib.util.find_spec("bitsandbytes") is not None, reason="bitsandbytes is installed")
def test_bnb_without_bitsandbytes_fails_with_the_library_error(tiny_hf_model: Path, tmp_path: Path) -> None:
    profile = Profile(
        backend="transformers", model=str(tiny_hf_model), port=0, params={"quant": "bnb-4bit", "threads": 1}
    )
    result = run_check(profile, log_dir=tmp_path, ready_timeout_s=120)
    assert not result.ready and result.exit_code == 1
    assert result.failure not in (None, "ready_timeout")
    assert result.failure_stage == "load_weights"
    log = Path(result.log_file or "").read_text()
    assert "bitsandbytes" in log.lower() and "vramtui-runner: error: loading failed" in log
    # QA 5: the advice was "Upgrade transformers"; it is the module that is missing
    advice = " ".join(result.diagnosis.advice)
    assert "pip install -U bitsandbytes" in advice and "Upgrade transformers" not in advice


@pytest.mark.engine
@needs_transformers
@pytest.mark.parametrize("budget_mib", [300, 600, 800])  # 800: OpenBLAS spun under it (QA 5)
def test_a_budget_too_small_to_import_the_engine_stops_the_wizard(
    tiny_hf_model: Path, tmp_path: Path, budget_mib: int
) -> None:
    # Issue 22 #13: under these budgets the real runner dies importing torch (300 MiB: the loader cannot
    # map libtorch; 600 MiB: a MemoryError). The wizard proposed bnb-4bit and then blamed "not applied";
    # like the diagnosis, it stops and says to raise the budget, as it does for llama-server's budget_start.
    from vramtui.core.units import MIB
    from vramtui.core.wizard.wizard import Wizard

    profile = Profile(
        backend="transformers",
        model=str(tiny_hf_model),
        port=0,
        params={"context": 256, "threads": 1},
        memory_budget=budget_mib * MIB,
    )
    result = Wizard(profile, auto=True, record_path=tmp_path / "w.jsonl").run(max_steps=2)
    assert not result.success and result.relaunches == 0
    assert [step.outcome for step in result.steps] == ["first_run"]
    assert result.steps[0].observation is not None and result.steps[0].observation.failure == "host_oom"
    assert (
        "memory budget is too small to even import the engine" in result.reason
        and "not a memory problem" not in result.reason
    )
    assert any("`memory_budget`" in line for line in result.advice), result.advice
    assert not any("bnb" in line.lower() for line in result.advice)


def test_a_host_only_cap_keeps_every_gpu_in_the_device_map() -> None:
    from vramtui.runners.transformers_server import with_every_gpu

    # vramtui's cpu_offload = 8 becomes --max-memory cpu=8GiB: accelerate would read the GPUs as 0 bytes
    caps = with_every_gpu(parse_max_memory("cpu=8GiB"), [20 * 2**30, 10 * 2**30 + 5])
    assert caps == {0: "20480MiB", 1: "10240MiB", "cpu": "8GiB"}
    assert with_every_gpu(parse_max_memory("0=10GiB,cpu=8GiB"), [20 * 2**30]) == {0: "10GiB", "cpu": "8GiB"}
    assert with_every_gpu({"cpu": "8GiB"}, []) == {"cpu": "8GiB"}  # no GPU: the host is all there is
