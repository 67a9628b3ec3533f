"""`vramtui ps --fits`: the estimator against what is free on each card now, not the card's total."""

from __future__ import annotations

from pathlib import Path

from vramtui.core.attach.servers import GpuShare, Snapshot
from vramtui.core.estimate.calibrate import save_record
from vramtui.core.estimate.estimator import Settings, estimate
from vramtui.core.estimate.fitnow import fits_now
from vramtui.core.estimate.modelinfo import load_model_info

GIB = 1 << 30
MIB = 1 << 20
GPT_OSS = Path(__file__).resolve().parents[2] / "data" / "configs" / "openai--gpt-oss-20b.config.json"


def _now(*free_and_total: tuple[int, int]) -> Snapshot:
    gpus = [
        GpuShare(index, "NVIDIA H100 80GB HBM3", total, total - free, free)
        for index, (free, total) in enumerate(free_and_total)
    ]
    return Snapshot([], gpus, 128 * GIB, 100 * GIB)


def test_vllm_gets_the_share_of_the_card_that_is_free_now() -> None:
    info = load_model_info(str(GPT_OSS))
    settings = Settings.from_params({"context": 8192}, backend="vllm", device_bytes=80 * GIB)
    # another server holds 50 GiB of the 80: vLLM's default 0.92 would refuse to start
    (answer,) = fits_now(info, settings, _now((30 * GIB, 80 * GIB)))
    assert answer.share == 0.36  # (30 GiB - 512 MiB) / 80 GiB = 0.3687, rounded down
    whole = estimate(info, settings)
    assert answer.fits and answer.needs_bytes <= 30 * GIB < whole.total_bytes
    # with 12 GiB free, the weights alone (about 13 GiB of MXFP4 experts and bf16 rest) do not fit
    (short,) = fits_now(info, settings, _now((12 * GIB, 80 * GIB)))
    assert not short.fits


def test_the_card_with_room_comes_first_whatever_its_size() -> None:
    info = load_model_info(str(GPT_OSS))
    settings = Settings.from_params({"context": 8192}, backend="llama.cpp", device_bytes=24 * GIB)
    big_but_full, small_but_free = (2 * GIB, 80 * GIB), (20 * GIB, 24 * GIB)
    first, second = fits_now(info, settings, _now(big_but_full, small_but_free))
    assert first.place.startswith("GPU 1") and first.fits
    assert second.place.startswith("GPU 0") and not second.fits


def test_without_a_gpu_it_answers_for_the_host_memory_available() -> None:
    info = load_model_info(str(GPT_OSS))
    settings = Settings.from_params({"context": 8192}, backend="llama.cpp", device_bytes=24 * GIB)
    (answer,) = fits_now(info, settings, Snapshot([], [], 32 * GIB, 8 * GIB))
    assert answer.place == "host (no GPU here)" and answer.free_bytes == 8 * GIB and not answer.fits


def test_vllms_cpu_build_gets_the_share_of_the_machine_that_is_free_now() -> None:
    """QA 10: `ps --fits MODEL --backend vllm` said FITS (its default 0.92 of a 23.5 GiB machine with 21.5
    GiB free); vLLM refused: "Available memory on node 0 (21.5/23.54 GiB) on startup is less than desired
    CPU memory utilization (0.92, 21.66 GiB)". The share now fits in what is free, with the processes
    beside the worker, and both forms of `--fits` say the same."""
    config = (
        Path(__file__).resolve().parents[2] / "data" / "configs" / "Qwen--Qwen2.5-0.5B-Instruct.config.json"
    )
    info = load_model_info(str(config))
    settings = Settings.from_params({"context": 2048}, backend="vllm")
    total, free = int(23.54 * GIB), int(21.5 * GIB)
    (answer,) = fits_now(info, settings, Snapshot([], [], total, free))
    assert answer.fits and answer.share is not None and answer.share * total <= free
    assert answer.needs_bytes <= free  # the API server and the engine core fit beside the share
    assert "of host RAM" in answer.describe()
    # a KV cache set outright: vLLM checks no share, the cache is what it is
    sized = Settings.from_params({"context": 2048, "kv_cache_memory": "1GiB"}, backend="vllm")
    (outright,) = fits_now(info, sized, Snapshot([], [], total, free))
    assert outright.fits and outright.share is None


def test_vllms_cpu_build_under_a_budget_is_sized_as_estimate_sizes_it() -> None:
    """QA 29 Q5: under a 2 GiB memory_budget, `ps --fits` said "2.0 GiB left ... does not fit at context
    1,024 (needs 2.2 GiB); the largest context that fits: 4,096". The budget caps each process's address
    space, and the KV cache is a share of the whole machine: no context helps, the cache size set outright
    does, and the size it names then fits."""
    config = (
        Path(__file__).resolve().parents[2] / "data" / "configs" / "Qwen--Qwen2.5-0.5B-Instruct.config.json"
    )
    info = load_model_info(str(config))
    now = Snapshot([], [], int(23.54 * GIB), int(21.5 * GIB))
    settings = Settings.from_params({"context": 1024}, backend="vllm")
    (share,) = fits_now(info, settings, now, budget=4 * GIB)
    assert not share.fits and share.max_context is None and share.max_parallel is None
    assert share.room_words == "left in the profile's memory_budget of 4.0 GiB"
    (note,) = [note for note in share.notes if "kv_cache_memory = " in note]
    size = note.split('kv_cache_memory = "')[1].split('"')[0]
    assert size.endswith("M") and 100 < int(size[:-1]) < 2048, note
    sized = Settings.from_params({"context": 1024, "kv_cache_memory": f"{size}iB"}, backend="vllm")
    (outright,) = fits_now(info, sized, now, budget=4 * GIB)
    assert outright.fits and outright.needs_bytes <= 4 * GIB
    # the runtime row is the worker's address space under the budget, as the estimate bills it
    assert outright.runtime_bytes > GIB


def test_a_model_that_squeezes_into_the_free_memory_is_told_why_it_does_not_fit() -> None:
    """Needs less than is free, yet "does not fit": the answer names the line it is over, in figures."""
    info = load_model_info(str(GPT_OSS))
    settings = Settings.from_params({"context": 8192}, backend="llama.cpp", device_bytes=24 * GIB)
    needs = estimate(info, settings).total_bytes
    free = int(needs * 1.05)  # room for the bill, not for the margin kept over it
    (answer,) = fits_now(info, settings, _now((free, 24 * GIB)))
    assert not answer.fits and answer.needs_bytes <= free
    assert answer.usable_bytes is not None and answer.usable_bytes < answer.needs_bytes
    said = answer.describe()
    assert f"{round(100 * answer.usable_bytes / free)}% line of what is free" in said, said
    assert answer.to_dict()["usable_mib"] == round(answer.usable_bytes / (1 << 20), 1)
    # a model that fits is not told about the line
    (roomy,) = fits_now(info, settings, _now((2 * needs, 24 * GIB)))
    assert roomy.fits and "line" not in roomy.describe().split("\n")[0]


def test_a_host_budget_leaves_the_engine_its_own_share_as_check_does() -> None:
    """QA (session 13): `ps --fits` said FITS within a 1.46 GiB memory_budget where `check` of the same
    profile failed: the engine itself holds part of a host budget before any buffer (its idle footprint),
    which check and the wizard take off and ps did not."""
    info = load_model_info(str(GPT_OSS))
    settings = Settings.from_params({"context": 8192}, backend="llama.cpp", device_bytes=24 * GIB)
    now = Snapshot([], [], 64 * GIB, 60 * GIB)
    (whole,) = fits_now(info, settings, now, budget=20 * GIB)
    (less,) = fits_now(info, settings, now, budget=20 * GIB, engine_bytes=GIB // 2)
    assert whole.free_bytes == 20 * GIB and less.free_bytes == 20 * GIB - GIB // 2
    assert "after the engine's own 512 MiB" in less.room_words
    # the budget bounds the room: said as such, not as the machine's "almost nothing is free" (QA 12)
    assert less.describe().startswith(
        "host (no GPU here): 19.5 GiB left in the profile's memory_budget of 20.0 GiB"
    )
    (small,) = fits_now(info, settings, now, budget=200 * MIB, engine_bytes=150 * MIB)
    assert "almost nothing is free here" not in small.notes
    # a machine with less free than the budget: the machine bounds it, and the budget is a note
    (tight,) = fits_now(info, settings, Snapshot([], [], 64 * GIB, 4 * GIB), budget=20 * GIB)
    assert tight.room_words == "free now" and "within the profile's memory_budget" in tight.notes[-1]


def test_the_host_answer_counts_the_engine_process_measured_by_earlier_runs(tiny_gguf: Path) -> None:
    """QA: `ps --fits` said "needs 8.1 MiB" where `estimate --cpu` said 22.1 (14.3 MiB of the process
    measured by earlier runs): it now reads the same calibration, and says when there is none to read."""
    info = load_model_info(str(tiny_gguf))
    settings = Settings.from_params({"context": 2048}, backend="llama.cpp", device_bytes=24 * GIB)
    host = Snapshot([], [], 32 * GIB, 8 * GIB)
    (bare,) = fits_now(info, settings, host, calibrate=True)  # an empty store: nothing measured yet
    assert bare.runtime_bytes == 0 and any("process's own memory is not in" in n for n in bare.notes)
    runtime = 14 * (1 << 20)
    record = {
        "version": 1, "ready": True, "place": "host", "time": 1,
        "device": {"name": "cpu"}, "engine": {"backend": "llama.cpp", "build": "b"},
        "printed": {"bill": {"host": {"weights_bytes": 100 << 20}}}, "peak": {"bytes": (100 << 20) + runtime},
    }  # fmt: skip
    assert save_record(record, "earlier")
    (measured,) = fits_now(info, settings, host, calibrate=True)
    assert measured.runtime_bytes == runtime
    assert measured.needs_bytes == bare.needs_bytes + runtime
    assert any(note.startswith("calibrated from 1 run") for note in measured.notes)
    (plain,) = fits_now(info, settings, host)  # --no-calibrate: the estimate as computed
    assert plain.needs_bytes == bare.needs_bytes


def test_the_sequences_at_once_say_their_length_and_the_flags_that_give_it() -> None:
    """QA 25 P2: "the largest context that fits: 262,144, 9 at once" for llama.cpp, whose -np splits -c: a
    user who typed -c 262144 -np 9 got 29k tokens a slot. The answer says each sequence's length and, where
    the slots share one context, the flags that give each that many; vLLM's context is per request."""
    info = load_model_info(str(GPT_OSS))
    settings = Settings.from_params({"context": 8192}, backend="llama.cpp", device_bytes=24 * GIB)
    (answer,) = fits_now(info, settings, _now((20 * GIB, 24 * GIB)))
    n = answer.max_parallel
    assert answer.fits and n and n > 1 and answer.parallel_tokens == 8192
    assert answer.parallel_flags == f"--ctx-size {8192 * n} --parallel {n}: the slots share --ctx-size"
    assert f"{n} sequences of 8,192 tokens at once (--ctx-size {8192 * n} --parallel {n}" in answer.describe()
    vllm = Settings.from_params({"context": 8192}, backend="vllm", device_bytes=80 * GIB)
    (request,) = fits_now(info, vllm, _now((70 * GIB, 80 * GIB)))
    assert request.parallel_flags is None and request.to_dict()["parallel_tokens"] == 8192
