"""What the estimate assumed about the run, said in its notes: the context it sized when none was given
and the model does not say its trained length, and how llama-server's slots share the cache (QA: two
bare-flag estimates matched llama-server but did not say which layout applied).

The slot layouts are checked against real llama-server runs (tests/data/llama-server/*.verbose.log),
whose `n_ctx_slot` line says what one request gets."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from vramtui.cli import main
from vramtui.core.demo.tinygguf import TinyModelSpec, write_tiny_gguf
from vramtui.core.estimate.estimator import Settings, estimate
from vramtui.core.estimate.modelinfo import info_from_flags, load_model_info
from vramtui.core.launch.launcher import build_command
from vramtui.core.launch.profile import Profile
from vramtui.core.logs.diagnose import diagnose_file
from vramtui.core.memory.parts import HOST, bill_from_figures

LOGS = Path(__file__).resolve().parents[2] / "data" / "llama-server"
FLAGS = info_from_flags(params=8e9, layers=32, kv_heads=8, head_dim=128, hidden=4096)
GPU = 24 * 2**30


def _slot_tokens(log: str) -> tuple[int, int, bool]:
    """(slots, tokens one slot gets, unified) as the real llama-server printed them."""
    text = (LOGS / log).read_text()
    found = re.search(r"n_slots = (\d+), n_ctx_slot = (\d+), kv_unified = '(\w+)'", text)
    assert found, log
    return int(found[1]), int(found[2]), found[3] == "true"


def _notes(info, **settings) -> list[str]:
    return estimate(info, Settings(device_bytes=GPU, **settings)).notes


@pytest.mark.parametrize(
    ("log", "settings"),
    [
        ("healthy.verbose.log", {"context": 2048}),  # -c 2048, -np auto
        ("parallel-not-unified.verbose.log", {"context": 4096, "parallel": 2}),  # -c 4096 -np 2
        ("parallel-kv-unified.verbose.log", {"context": 4096, "parallel": 2, "kv_unified": True}),  # and -kvu
    ],
)
def test_the_slot_note_says_what_one_request_gets_as_llama_server_printed(
    tmp_path: Path, log: str, settings: dict
) -> None:
    model = write_tiny_gguf(tmp_path / "l4.gguf", TinyModelSpec(n_layer=4, n_embd=512, n_head=8, n_head_kv=8))
    slots, tokens, unified = _slot_tokens(log)
    notes = [n for n in _notes(load_model_info(model), backend="llama.cpp", **settings) if "slots" in n]
    assert len(notes) == 1, notes
    assert notes[0].startswith(f"{slots} slots ")
    assert f"{tokens:,} tokens" in notes[0]
    assert ("one request may use all of it" in notes[0]) is unified


@pytest.mark.parametrize(
    ("log", "unified"),
    [("parallel-not-unified.verbose.log", None), ("parallel-kv-unified.verbose.log", True)],
)
def test_two_slots_cache_and_compute_as_the_real_server_printed_with_and_without_kvu(
    tmp_path: Path, log: str, unified: bool | None
) -> None:
    # -c 4096 -np 2 on the CPU: 32 MiB of cache either way; one stream's KQ mask over all 4096 cells with
    # -kvu (13.01 MiB of compute printed) against two of 2048 without (11.01 MiB)
    model = write_tiny_gguf(tmp_path / "l4.gguf", TinyModelSpec(n_layer=4, n_embd=512, n_head=8, n_head_kv=8))
    settings = Settings(backend="llama.cpp", context=4096, parallel=2, kv_unified=unified, on_gpu=False)
    bill = estimate(load_model_info(model), settings).bill
    printed = bill_from_figures(diagnose_file(LOGS / log).engine_figures)
    assert bill.get("kv_cache", HOST) == printed.get("kv_cache", HOST)
    assert bill.get("compute", HOST) == pytest.approx(printed.get("compute", HOST), rel=0.1)


def test_ollama_slots_each_hold_the_context_given_per_sequence() -> None:
    notes = _notes(FLAGS, backend="ollama", context=8192, parallel=2)
    assert (
        "2 slots of 8,192 tokens each (OLLAMA_NUM_PARALLEL 2): one request gets no more than its slot"
        in notes
    )


def test_one_sequence_and_an_engine_without_slots_say_nothing_of_slots() -> None:
    assert not [n for n in _notes(FLAGS, backend="llama.cpp", context=4096, parallel=1) if "slots" in n]
    assert not [n for n in _notes(FLAGS, backend="vllm", context=4096, parallel=8) if "slots" in n]
    # llama-cpp-python's server runs one at a time: it refuses two, and that is the verdict's to say
    assert not [
        n for n in _notes(FLAGS, backend="llama-cpp-python", context=4096, parallel=2) if "slots" in n
    ]


@pytest.mark.parametrize("backend", ["llama.cpp", "vllm", "transformers"])
def test_a_context_left_out_of_bare_flags_is_said_to_be_assumed(backend: str) -> None:
    assumed = [n for n in _notes(FLAGS, backend=backend) if n.startswith("context not given")]
    assert assumed == [
        "context not given, and the flags do not say the model's trained length: sized at 4,096 tokens "
        "(--ctx to set it)"
    ]
    assert not [n for n in _notes(FLAGS, backend=backend, context=8192) if n.startswith("context not given")]


@pytest.mark.parametrize("backend", ["ollama", "llama-cpp-python"])
def test_an_engine_with_its_own_default_context_assumes_nothing(backend: str) -> None:
    # Ollama's default follows the card, llama-cpp-python's is 2048: the engine's own numbers
    assert not [n for n in _notes(FLAGS, backend=backend) if n.startswith("context not given")]


def test_ollamas_concurrency_answer_says_it_is_for_every_layer_when_it_placed_fewer() -> None:
    # Ollama placed 23 of 33 layers to fit this run, so FITS stands beside a concurrency of 0 that is for
    # every layer on the GPU (QA: the two read as a contradiction)
    est = estimate(FLAGS, Settings(backend="ollama", device_bytes=GPU, parallel=2))
    assert est.fits and est.gpu_layers is not None and est.gpu_layers < est.n_layers + 1
    assert est.max_parallel == 0 and est.max_parallel_all_layers
    given = estimate(FLAGS, Settings(backend="ollama", device_bytes=GPU, parallel=2, gpu_layers=20))
    assert not given.max_parallel_all_layers  # layers given: the answer is for them
    assert given.max_parallel >= 1


GPT_OSS = Path(__file__).resolve().parents[2] / "data" / "configs" / "openai--gpt-oss-20b.config.json"


def test_swa_full_keeps_every_cell_in_the_sliding_window_layers(capsys: pytest.CaptureFixture[str]) -> None:
    """--swa-full (and wrappers that set it: LM Studio printed `using full-size SWA cache`, 144 MiB in both
    of gpt-oss-120b's caches at 4096 cells): every layer holds the whole context, not the window."""
    info = load_model_info(str(GPT_OSS))  # 24 layers, half of them sliding (window 128), 8 KV heads of 64
    windowed = estimate(info, Settings(backend="llama.cpp", context=8192, device_bytes=GPU)).bill
    full = estimate(info, Settings(backend="llama.cpp", context=8192, swa_full=True, device_bytes=GPU)).bill
    per_layer = 8192 * 8 * 64 * 2 * 2  # cells x KV heads x head size x (K, V) x f16
    assert full.get("kv_cache", 0) == 24 * per_layer
    # 12 full layers, and 12 of the window for llama-server's 4 slots and a micro-batch: 128 x 4 + 512 cells
    assert windowed.get("kv_cache", 0) == 12 * per_layer + 12 * per_layer * 1024 // 8192
    # the flag as llama-server spells it, and as a profile launches it
    main(["estimate", str(GPT_OSS), "--ctx", "8192", "--swa-full", "--gpu-mem", "80GiB", "--json"])
    assert json.loads(capsys.readouterr().out)["kv_cache_bytes"] == 24 * per_layer
    profile = Profile(backend="llama.cpp", model="m.gguf", params={"swa_full": True}, port=0)
    assert "--swa-full" in build_command(profile).argv
