"""Peak-preserving history: property-style checks over random curves with short spikes."""

from __future__ import annotations

import bisect
import itertools
import random

import pytest

from vramtui.core.memory.history import SAMPLES_24H_AT_10HZ, PeakHistory


def random_curve(rng: random.Random, n: int, dt: float = 0.1) -> tuple[list[float], list[float]]:
    """A noisy plateau with occasional one-sample spikes and slow drifts, at a jittery rate."""
    times, values = [], []
    t, level = 1000.0, 8000.0
    for _ in range(n):
        t += dt * rng.uniform(0.8, 1.2)
        level += rng.uniform(-5, 5)
        value = level + rng.uniform(-20, 20)
        if rng.random() < 0.002:
            value += rng.uniform(500, 5000)  # a prefill spike one sample long
        times.append(t)
        values.append(value)
    return times, values


def true_range(times: list[float], values: list[float], t0: float, t1: float) -> tuple[float, float]:
    lo = bisect.bisect_left(times, t0)
    hi = bisect.bisect_right(times, t1)
    window = values[lo:hi]
    return min(window), max(window)


@pytest.mark.parametrize("seed", range(6))
def test_every_bucket_holds_the_true_min_and_max_of_what_it_covers(seed: int) -> None:
    rng = random.Random(seed)
    capacity, factor = rng.choice([(32, 2), (64, 4), (100, 8)])
    n = rng.randint(2_000, 20_000)
    times, values = random_curve(rng, n)
    history = PeakHistory(capacity=capacity, factor=factor, min_samples=n)  # never drops: exact checks
    history.extend(times, values)
    assert history.peak == max(values) and history.peak_t == times[values.index(max(values))]
    for width in (1, 3, 17, capacity, 500):
        for span in (None, 5.0, 60.0, (times[-1] - times[0]) / 3):
            buckets = history.buckets(width, span)
            assert 1 <= len(buckets) <= width
            assert all(a.t_end < b.t for a, b in itertools.pairwise(buckets))
            for bucket in buckets:
                assert (bucket.min, bucket.max) == true_range(times, values, bucket.t, bucket.t_end)
                assert bucket.last == values[bisect.bisect_right(times, bucket.t_end) - 1]
            assert buckets[-1].t_end == times[-1] and buckets[-1].last == values[-1]
            if span is None:
                assert max(b.max for b in buckets) == max(values)
                assert min(b.min for b in buckets) == min(values)
                assert buckets[0].t == times[0]
            else:
                # the window's own max is never hidden (a coarse edge bucket may reach a little before it)
                inside = [v for t, v in zip(times, values, strict=True) if t >= times[-1] - span]
                assert max(b.max for b in buckets) >= max(inside)
                first_inside = times[bisect.bisect_left(times, times[-1] - span)]
                assert buckets[0].t <= first_inside  # the whole window is covered


@pytest.mark.parametrize("seed", range(5))
def test_a_single_short_spike_shows_at_every_zoom(seed: int) -> None:
    rng = random.Random(100 + seed)
    n = 30_000
    times = [i * 0.1 for i in range(n)]
    values = [4000.0 + rng.uniform(-10, 10) for _ in range(n)]
    where = rng.randrange(n)
    values[where] = 9000.0  # one 100 ms spike in 50 minutes
    history = PeakHistory(capacity=128, factor=4, min_samples=n)
    history.extend(times, values)
    for width in (1, 2, 10, 60, 128):
        buckets = history.buckets(width)
        holding = [b for b in buckets if b.t <= times[where] <= b.t_end]
        assert len(holding) == 1 and holding[0].max == 9000.0
        assert sum(1 for b in buckets if b.max == 9000.0) == 1


def test_bounded_memory_beyond_capacity_keeps_the_global_peak() -> None:
    history = PeakHistory(capacity=16, factor=2, min_samples=16 * 8)  # coarsest level: 128 samples
    assert history.levels == 4 and history.span_samples == 128
    history.add(0.0, 1e6)  # an early peak that will age out of every level
    for i in range(1, 5000):
        history.add(float(i), float(i % 7))
    assert history.peak == 1e6 and history.peak_t == 0.0
    buckets = history.buckets(16)
    assert len(buckets) <= 16
    assert buckets[0].t > 0.0  # the oldest samples were dropped ...
    assert max(b.max for b in buckets) == 6.0  # ... and what remains is exact
    memory = history.memory_bytes()
    history.extend([float(i) for i in range(5000, 20000)], [1.0] * 15000)
    assert history.memory_bytes() == memory  # fixed size


def test_defaults_hold_24_hours_at_10_hz_in_under_a_megabyte() -> None:
    history = PeakHistory()
    assert history.span_samples >= SAMPLES_24H_AT_10HZ
    assert history.memory_bytes() < 1024**2


def test_gaps_empty_and_recent_window() -> None:
    history = PeakHistory(capacity=8, factor=2, min_samples=64)
    assert history.buckets(10) == [] and history.peak is None
    history.add(0.0, None)  # N/A is a gap
    assert history.count == 0
    for i in range(40):
        history.add(float(i), 100.0 if i != 35 else 999.0)
    recent = history.buckets(4, span_s=6.0)
    assert max(b.max for b in recent) == 999.0 and recent[-1].t_end == 39.0
    assert history.max_since(30.0) == 999.0
    assert history.buckets(0) == []
    with pytest.raises(ValueError):
        PeakHistory(capacity=1)
