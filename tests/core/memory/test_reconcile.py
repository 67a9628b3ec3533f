"""The bill reconciled: estimate, printout and measurement per term and device, and the term that was off.

The printed side is a real llama.cpp printout (ggml-org/llama.cpp#13661, four CUDA devices, in
tests/data/printouts/devices.jsonl) read by the log engine as any log is.
"""

from __future__ import annotations

import json
from pathlib import Path

from vramtui.core.logs.diagnose import diagnose_text
from vramtui.core.memory.parts import HOST, MemoryBill, bill_from_figures
from vramtui.core.memory.reconcile import UNPRINTED, measured_peaks, reconcile
from vramtui.core.memory.sampling import GpuReading, HostReading, Sample

MIB = 1 << 20
PRINTOUTS = Path(__file__).resolve().parents[2] / "data" / "printouts" / "devices.jsonl"


def _printed() -> MemoryBill:
    row = next(json.loads(line) for line in PRINTOUTS.open() if "13661" in line)
    diagnosis = diagnose_text(row["log"], backend="llama.cpp")
    return bill_from_figures(diagnosis.engine_figures)


def _estimate_like(printed: MemoryBill, compute_share: float = 1.0, runtime: int = 300 * MIB) -> MemoryBill:
    estimate = MemoryBill()
    for place, parts in printed.places.items():
        for part, nbytes in parts.items():
            estimate.add(place, part, round(nbytes * (compute_share if part == "compute" else 1.0)))
        estimate.add(place, "runtime", runtime)
    return estimate


def test_a_compute_buffer_the_estimate_halved_is_named_with_its_device() -> None:
    printed = _printed()
    assert printed.get("compute", 0) > 1900 * MIB  # "CUDA0 compute buffer size = 1958.63 MiB"
    result = reconcile(_estimate_like(printed, compute_share=0.5), printed, {})
    off = result.off
    assert off is not None and off.part == "compute" and off.miss < 0
    assert "compute buffers on GPU" in result.verdict() and "short by" in result.verdict()
    assert result.to_dict()["off"]["term"] == "compute_buffer_bytes"


def test_an_estimate_that_matches_every_printed_term_is_said_to_hold() -> None:
    printed = _printed()
    result = reconcile(_estimate_like(printed), printed, {})
    assert result.off is None
    assert result.verdict().startswith("the estimate held within 10%")


def test_what_a_card_holds_above_the_printed_terms_is_set_against_the_runtime() -> None:
    printed = _printed()
    on_card0 = sum(printed.places[0].values())
    # NVML charged 2 GiB more than llama.cpp printed on GPU 0: the estimate's 300 MiB runtime was short
    result = reconcile(_estimate_like(printed), printed, {0: on_card0 + 2048 * MIB})
    off = result.off
    assert off is not None and off.part == UNPRINTED and off.place == 0
    assert off.actual == 2048 * MIB and off.estimate == 300 * MIB
    assert result.to_dict()["places"]["0"]["measured_bytes"] == on_card0 + 2048 * MIB
    table = "\n".join(result.lines())
    assert "GPU 0" in table and "not printed: runtime" in table


def test_without_a_printout_each_estimated_term_is_listed() -> None:
    estimate = MemoryBill()
    estimate.add(HOST, "weights", 100 * MIB)
    estimate.add(HOST, "kv_cache", 20 * MIB)
    result = reconcile(estimate, None, {HOST: 150 * MIB})
    assert [term.part for term in result.terms] == ["weights", "kv_cache"]
    assert result.off is None and result.verdict().startswith("nothing to compare")


def test_the_runtime_in_host_ram_is_the_process_not_a_cuda_context() -> None:
    """QA: a CPU run's bill said "runtime (CUDA context)"."""
    estimate = MemoryBill()
    estimate.add(HOST, "runtime", 15 * MIB)
    estimate.add(0, "runtime", 300 * MIB)
    table = "\n".join(reconcile(estimate, None, {}).lines())
    assert "runtime (the process)" in table and table.count("CUDA context") == 1
    assert estimate.describe(HOST) == "runtime (the process) 15.00 MiB"


def _sample(t: float, tree: tuple[int, ...], rss: int, on_gpu: dict[int, int], cuda_index: int = 0) -> Sample:
    gpu = GpuReading(
        1, "NVIDIA RTX A6000", "GPU-1", None, 48 << 30, process_bytes=on_gpu, cuda_index=cuda_index
    )
    return Sample(t, (gpu,), HostReading(0, 1, 0, 0, tree_rss=rss, tree_pids=tree))


def test_measured_peaks_are_per_cuda_device_and_only_the_trees_processes() -> None:
    samples = [
        _sample(0, (10, 11), 500 * MIB, {11: 3000 * MIB, 99: 9000 * MIB}),
        _sample(1, (10, 11), 400 * MIB, {11: 5000 * MIB, 99: 9000 * MIB}),
        _sample(2, (10,), 450 * MIB, {99: 9000 * MIB}),
    ]
    # NVML's GPU 1 is CUDA device 0 under CUDA_VISIBLE_DEVICES=1: engines print CUDA0
    assert measured_peaks(samples) == {HOST: 500 * MIB, 0: 5000 * MIB}


def test_a_start_that_failed_never_held_its_later_buffers() -> None:
    """A run that failed at its KV cache printed only its weights: the KV cache and compute buffers it never
    allocated are shown beside the estimate, not blamed on the rest (QA 14: "estimated 2.2 GiB, actual
    1.1 MiB (over by 2.2 GiB)")."""
    mib = 1 << 20
    estimate = MemoryBill()
    for part, size in (("weights", 21), ("kv_cache", 2048), ("compute", 180), ("runtime", 12)):
        estimate.add(HOST, part, size * mib)  # type: ignore[arg-type]
    printed = MemoryBill()
    printed.add(HOST, "weights", 21 * mib)
    measured = {HOST: 34 * mib}
    failed = reconcile(estimate, printed, measured, failed=True)
    assert failed.off is None, failed.verdict()
    shown = {term.part: (term.estimate, term.actual) for term in failed.terms}
    assert shown["kv_cache"] == (2048 * mib, None) and shown["compute"] == (180 * mib, None)
    assert shown[UNPRINTED] == (12 * mib, 13 * mib)  # the runtime against what it held beyond the weights
    assert "not compared" in failed.notes[0]


def test_a_failed_start_that_printed_a_buffer_it_never_held_compares_no_rest() -> None:
    """QA: vLLM printed its 21.1 GiB KV cache, then could not allocate it; the host held 1.6 GiB, so the
    rest read "actual 0 B" and the verdict "over by 560 MiB", under the line saying it failed first."""
    gib = 1 << 30
    estimate, printed = MemoryBill(), MemoryBill()
    for part, size in (("weights", 0.01), ("kv_cache", 21.5), ("runtime", 0.55)):
        estimate.add(HOST, part, int(size * gib))  # type: ignore[arg-type]
    printed.add(HOST, "kv_cache", int(21.1 * gib))  # type: ignore[arg-type]
    found = reconcile(estimate, printed, {HOST: int(1.6 * gib)}, failed=True)
    assert found.off is None, found.verdict()
    rest = next(term for term in found.terms if term.part == UNPRINTED)
    assert rest.actual is None  # shown, not compared


def test_the_rest_says_which_terms_it_holds_and_an_unprinted_kv_cache_is_said() -> None:
    """QA 5: transformers prints no KV cache; its full-context dynamic cache joined "the rest (runtime, not
    printed)", and "runtime over by 6 GiB" read as the runtime's error."""
    estimate = MemoryBill()
    estimate.add(HOST, "weights", 100 * MIB)
    estimate.add(HOST, "kv_cache", 4096 * MIB)
    estimate.add(HOST, "compute", 1536 * MIB)
    estimate.add(HOST, "runtime", 300 * MIB)
    printed = MemoryBill()
    printed.add(HOST, "weights", 100 * MIB)
    result = reconcile(estimate, printed, {HOST: 500 * MIB})
    # QA 11: a full-context dynamic cache the smallest request did not fill is a ceiling, not a miss: no
    # "off ... over by" on every healthy transformers run
    assert result.off is None and result.verdict().startswith("the estimate held within")
    assert any("printed no KV cache" in note for note in result.notes)
    assert "not printed: KV cache, compute, runtime" in "\n".join(result.lines())
    # a rest above even that ceiling is still off
    over = reconcile(estimate, printed, {HOST: 9000 * MIB}).off
    assert over is not None and over.part == UNPRINTED
    assert over.label == "not printed: KV cache, compute, runtime on the host"


def test_the_rest_a_place_holds_is_the_process_too_where_the_estimate_bills_none() -> None:
    """QA 26 D8: llama-cpp-python's first CPU estimate bills no process of its own; the 35 MiB its Python
    held above the printed buffers read "not printed: output on the host ... short by 33 MiB", blaming the
    2 MiB logits buffer."""
    estimate = MemoryBill()
    for part, mib in (("weights", 20), ("kv_cache", 16), ("compute", 42), ("output", 2)):
        estimate.add(HOST, part, mib * MIB)
    printed = MemoryBill()
    for part, mib in (("weights", 20), ("kv_cache", 16), ("compute", 43)):
        printed.add(HOST, part, mib * MIB)
    off = reconcile(estimate, printed, {HOST: 115 * MIB}).off
    assert off is not None and off.part == UNPRINTED
    assert off.label == "not printed: output, runtime on the host"
