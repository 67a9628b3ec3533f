"""The four readings (and the leak and leftover flags) off curves shaped like the real ones."""

from __future__ import annotations

import itertools
import json
import random

import pytest

from vramtui.core.memory.readings import Event, budget_check, compute_readings, safety_line_bytes

MIB = 1024**2
GIB = 1024**3


def curve(*segments: tuple[float, int]) -> tuple[list[float], list[float]]:
    """(level MiB, samples) segments at 1 Hz -> times, bytes."""
    values = [level * MIB for level, count in segments for _ in range(count)]
    return [float(i) for i in range(len(values))], values


def test_load_serve_exit_without_events() -> None:
    times, values = curve(
        (500, 20), (3000, 1), (6000, 1), (8000, 30),
        (9500, 1), (10000, 1), (8000, 20),
        (9000, 2), (8000, 20),
        (10500, 1), (8000, 20),
        (500, 10),
    )  # fmt: skip
    r = compute_readings(times, values)
    assert r.baseline_mib == 500 and r.plateau_mib == 8000 and r.peak_mib == 10500
    assert r.request_peaks_mib == [10000, 9000, 10500]
    assert r.falls_back is True and r.after_mib == 8000
    assert r.rising is False and r.leftover_mib == 0 and not r.leftover
    assert r.peak_t == times[values.index(10500 * MIB)]


def test_floor_climbing_request_after_request_is_a_leak() -> None:
    segments: list[tuple[float, int]] = [(500, 20), (8000, 30)]
    floor = 8000
    for _ in range(4):
        segments += [(floor + 2000, 2)]
        floor += 400
        segments += [(floor, 20)]
    times, values = curve(*segments, (500, 5))
    r = compute_readings(times, values)
    assert r.rising is True and r.falls_back is False
    assert r.floors_mib == [8000, 8400, 8800, 9200, 9600]
    assert r.request_peaks_mib == [10000, 10400, 10800, 11200]
    assert any("leak" in note for note in r.notes)


def test_caching_allocator_holds_after_first_request_but_does_not_climb() -> None:
    """PyTorch keeps what the first request took: no fall back, but no leak either."""
    times, values = curve(
        (400, 10), (6000, 30), (9000, 3), (7500, 20), (9000, 3), (7500, 20), (9000, 3), (7500, 20)
    )
    for events in ((), (Event(10.0, "launch"), Event(12.0, "ready"), Event(40.0, "request_start"))):
        r = compute_readings(times, values, events)
        assert r.plateau_mib == 6000  # the first settled level, though it idles longer at 7500 later
        assert r.falls_back is False and r.after_mib == 7500
        assert r.rising is False


def test_a_later_step_up_without_overshoot_is_still_loading() -> None:
    """vLLM: weights first, a profile run, then the KV cache takes the card: the last level is resident."""
    times, values = curve((300, 10), (14000, 30), (16000, 3), (14000, 5), (21000, 60))
    r = compute_readings(times, values)
    assert r.plateau_mib == 21000 and r.request_peaks_mib == []


def test_leftover_after_exit_with_and_without_events() -> None:
    times, values = curve((300, 10), (8000, 30), (2300, 10))
    r = compute_readings(times, values)
    assert r.leftover and r.leftover_mib == 2000
    assert any("leftover" in note for note in r.notes)
    # a leftover holding most of the card: only the exit event can tell
    times, values = curve((300, 10), (8000, 30), (7000, 10))
    r = compute_readings(times, values, [Event(9.5, "launch"), Event(12.0, "ready"), Event(40.0, "exit")])
    assert r.leftover_mib == 6700 and r.leftover
    r = compute_readings(times, values)
    assert r.leftover_mib is None  # no exit seen: not guessed


def test_events_pin_the_phases_and_each_request() -> None:
    rng = random.Random(7)
    times: list[float] = []
    values: list[float] = []
    t = 0.0

    def run(level: float, seconds: float, jitter: float = 4.0) -> None:
        nonlocal t
        for _ in range(int(seconds * 10)):  # 10 Hz
            times.append(t)
            values.append((level + rng.uniform(-jitter, jitter)) * MIB)
            t += 0.1

    run(300, 3)
    launch = t
    for step in range(20):  # weights stream in over two seconds
        run(300 + (step + 1) * 500, 0.1)
    run(10300, 2)
    ready = t
    run(11000, 5)
    events = [Event(launch, "launch"), Event(ready, "ready")]
    for peak in (800, 1500, 600):
        start = t
        run(11000 + peak, 0.2)  # a 200 ms prefill spike: nvidia-smi -l 1 would miss it
        run(11100, 0.5)
        events += [Event(start, "request_start"), Event(t, "request_end")]
        run(11000, 3)
    run(11000, 1)
    events.append(Event(t, "exit"))
    run(300, 2)
    r = compute_readings(times, values, events, total_bytes=24 * GIB, budget_bytes=20 * GIB)
    assert r.baseline_mib == pytest.approx(300, abs=5)
    assert r.plateau_mib == pytest.approx(11000, abs=5)
    assert r.request_peaks_mib == pytest.approx([11800, 12500, 11600], abs=5)
    assert r.falls_back is True and r.rising is False
    assert r.leftover_mib == pytest.approx(0, abs=10) and not r.leftover
    assert r.over_safety_line is False and r.over_budget is False
    assert r.safety_line_mib == pytest.approx(24 * 1024 * 0.8)
    # the same curve without events finds the same peaks from the shape alone
    shape = compute_readings(times, values)
    assert shape.request_peaks_mib == pytest.approx([11800, 12500, 11600], abs=5)
    assert shape.plateau_mib == pytest.approx(11000, abs=5) and shape.falls_back is True


def test_safety_line_and_budget_helpers() -> None:
    assert safety_line_bytes(24 * GIB) == int(24 * GIB * 0.8)
    check = budget_check(20 * GIB, 24 * GIB, budget_bytes=18 * GIB)
    assert check["over_safety_line"] is True and check["over_budget"] is True
    assert check["headroom_bytes"] == 4 * GIB
    unknown = budget_check(GIB, None)
    assert unknown["safety_line_bytes"] is None and unknown["over_safety_line"] is None
    times, values = curve((100, 5), (20000, 10))
    r = compute_readings(times, values, total_bytes=24 * GIB, budget_bytes=22 * GIB)
    assert r.over_safety_line is True and r.over_budget is False and r.total_mib == 24 * 1024


def test_gaps_empty_and_flat_curves() -> None:
    r = compute_readings([], [])
    assert r.samples == 0 and r.peak_mib is None and "no samples" in r.notes
    r = compute_readings([0, 1, 2, 3], [None, 100 * MIB, None, 300 * MIB])
    assert r.samples == 2 and r.peak_mib == 300
    times, values = curve((5000, 50))
    r = compute_readings(times, values)
    assert r.baseline_mib == 5000 and r.plateau_mib is None and r.falls_back is None
    assert any("no load step" in note for note in r.notes)
    data = r.to_dict()
    json.dumps(data)
    for key in (
        "baseline_mib",
        "plateau_mib",
        "peak_mib",
        "after_mib",
        "falls_back",
        "rising",
        "leftover_mib",
    ):
        assert key in data


def test_a_dip_inside_a_noisy_request_does_not_split_it() -> None:
    times, values = curve(
        (300, 10), (8000, 30),
        (10000, 2), (8500, 1), (10200, 2), (8600, 1), (9900, 2), (8000, 20),  # one bumpy request
        (11000, 3), (8000, 20),
    )  # fmt: skip
    r = compute_readings(times, values)
    assert r.request_peaks_mib == [10200, 11000] and r.falls_back is True


def test_last_request_cut_off_by_the_exit_is_judged_from_the_earlier_ones() -> None:
    """Five requests, each falling back ~4 GiB to a floor a little higher; the process exits right
    at the last peak. "after" is the last settled floor, not the last peak."""
    segments: list[tuple[float, int]] = [(300, 10), (16500, 30)]
    floor = 16500
    for k in range(5):
        segments.append((floor + 4500, 3))
        if k < 4:
            floor += 300
            segments.append((floor, 10))
    times, values = curve(*segments, (300, 10))
    r = compute_readings(times, values)
    assert r.request_peaks_mib == [21000, 21300, 21600, 21900, 22200]
    assert r.after_mib == 17700 and r.after_mib < r.request_peaks_mib[-1]
    assert r.falls_back is False and r.rising is True  # 1.2 GiB over the plateau after four requests
    assert any("ran until the exit" in note and "4 request(s)" in note for note in r.notes)
    # The same with events pinning each request: the last one ends with the exit.
    starts = [float(i) for i, (a, b) in enumerate(itertools.pairwise([0.0, *values])) if b > a + 2000 * MIB]
    events = [Event(10.0, "launch"), Event(11.0, "ready")]
    events += [Event(t, "request_start") for t in starts]
    events += [Event(t + 2, "request_end") for t in starts[:-1]]
    events.append(Event(float(len(values) - 10), "exit"))
    pinned = compute_readings(times, values, events)
    assert pinned.after_mib == 17700 and pinned.falls_back is False
    assert any("ran until the exit" in note for note in pinned.notes)
    # Requests that each fall right back: "yes", though the last one is cut off.
    flat = [(300, 10), (16500, 30)] + [(21000, 3), (16500, 10)] * 3 + [(21000, 3), (300, 10)]
    times, values = curve(*flat)
    r = compute_readings(times, values)
    assert r.falls_back is True and r.after_mib == 16500 and len(r.request_peaks_mib) == 4
    # Only one request, cut off: not known either way, and said.
    times, values = curve((300, 10), (16500, 30), (21000, 3), (300, 10))
    r = compute_readings(times, values)
    assert r.falls_back is None and any("not known" in note for note in r.notes)


def test_an_earlier_runs_events_do_not_pin_a_later_run() -> None:
    """Issue 13: the wizard's second attempt read with the first attempt's events showed the plateau
    at the new process's first sample (35 MiB) while it sat flat at 354 MiB."""
    first = [
        Event(0.0, "launch"),
        Event(5.0, "ready"),
        Event(6.0, "request_start"),
        Event(7.0, "request_end"),
    ]
    second = [Event(20.0, "launch"), Event(30.0, "ready")]
    times, values = curve((35, 3), (200, 4), (354, 40))
    times = [t + 21.0 for t in times]  # the second process's curve, reset at its launch
    r = compute_readings(times, values, [*first, Event(10.0, "exit"), *second])
    assert r.plateau_mib == 354 and r.leftover_mib is None


def test_a_recording_of_a_server_already_up_starts_at_its_plateau() -> None:
    """Issue 22 #3: no launch in the recording. What rises above the first level is smaller than it and
    falls back to it: requests on a loaded model, not a load from an idle card followed by an exit."""
    requests = [(15905, 4), (15405, 15)] * 3
    for start in ([(15405, 20)], [(15905, 2), (15405, 20)]):  # the second starts inside a request
        r = compute_readings(*curve(*start, *requests))
        assert r.baseline_mib is None and r.plateau_mib == 15405
        assert r.request_peaks_mib[-3:] == [15905] * 3 and r.falls_back is True and r.after_mib == 15405
        assert r.leftover_mib is None and any("starts with the model loaded" in n for n in r.notes)
    # A load from idle rises by more than the idle level: still baseline, load, exit, whatever follows.
    r = compute_readings(*curve((300, 20), (8000, 30), (300, 10), (8000, 30), (300, 10)))
    assert r.baseline_mib == 300 and r.plateau_mib == 8000
    # QA 17 F8: host RAM starts high with the rest of the machine; a small load that holds for most of the
    # recording is a load (baseline 878), not requests on a server already up.
    r = compute_readings(*curve((878, 20), (920, 100), (932, 20), (878, 30)))
    assert r.baseline_mib == 878 and r.plateau_mib == 920
    assert not any("starts with the model loaded" in n for n in r.notes)


def test_a_flat_recording_with_no_launch_is_a_running_servers_level_not_a_baseline() -> None:
    """QA 13 #9: `record --pid` of a llama-server already up, two small requests lost in the noise: the
    flat level was called "baseline (before launch)" and the plateau n/a."""
    r = compute_readings(*curve((84, 30)), running=True)  # a process's memory, recorded with --pid
    assert r.baseline_mib is None and r.plateau_mib == 84
    assert any("no load step seen" in note for note in r.notes)
    # with a launch in the recording, a flat curve is still the idle level before a load that never came
    # a whole card's flat curve, no process recorded: as likely the idle level as a loaded server's
    assert compute_readings(*curve((84, 30))).baseline_mib == 84


def test_host_ram_left_after_an_exit_blames_no_card() -> None:
    """QA (session 13): a replay of a host-RAM recording (no GPU) said "a leftover process holds the card"
    for 106 MiB of RAM still in use after a llama-server that was gone."""
    times, values = curve((300, 10), (8000, 30), (2300, 10))
    r = compute_readings(times, values, on_host=True)
    assert r.leftover and not any("card" in note for note in r.notes)
    assert any("host RAM still in use" in note for note in r.notes)


def test_a_process_tree_gone_before_its_exit_was_recorded_is_no_plateau() -> None:
    """QA 26 D11: the demo's first launch as the app sampled it (its tree's RSS every 100 ms, weights loaded
    at 0.59 s, the tree gone at 0.7 s, the exit recorded at 0.84 s) read "plateau 0 B" and "fell back" in
    the pane, `replay` and the wizard alike: the zeros of a gone tree are no level."""
    mib = [7.6, 21.3, 41.7, 52.1, 58.1, 64.8, 103.4, 0.0, 0.0]
    times = [1000.0 + i / 10 for i in range(len(mib))]
    events = [Event(999.99, "launch"), Event(1000.59, "weights_loaded"), Event(1000.84, "exit")]
    readings = compute_readings(times, [m * 2**20 for m in mib], events, on_host=True)
    assert round(readings.peak_mib, 1) == 103.4
    assert readings.plateau_mib is None and readings.falls_back is None
