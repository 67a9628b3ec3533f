"""nvidia-smi query CSV in the shapes users have, and our writer read back by our reader."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from vramtui.core.memory.nvsmi_csv import NvsmiWriter, format_timestamp, parse_timestamp, read_nvsmi_csv
from vramtui.core.memory.sampling import GpuReading, HostReading, ReplaySource, Sample

DATA = Path(__file__).resolve().parents[2] / "data" / "nvsmi"
MIB = 1024**2
LEVELS = [1234] * 5 + [5000, 9800] + [9800] * 6 + [11800, 9800, 9800, 9800] + [1234] * 3


def used_mib(series) -> list[float | None]:
    return [None if v is None else v / MIB for v in series.used]


@pytest.mark.parametrize("name", ["units.csv", "nounits.csv", "noheader.csv"])
def test_single_gpu_with_and_without_units_or_header(name: str) -> None:
    data = read_nvsmi_csv(DATA / name)
    assert data.skipped == 0 and data.rows == len(LEVELS)
    (series,) = data.gpus.values()
    assert used_mib(series) == LEVELS
    assert series.total == 24564 * MIB
    assert series.times[1] - series.times[0] == pytest.approx(1.0)
    if name != "noheader.csv":
        assert series.util[0] == 0 and series.util[6] == 57
    samples = data.samples
    assert len(samples) == len(LEVELS) and samples[6].gpus[0].used_bytes == 9800 * MIB


def test_not_available_fields_are_gaps() -> None:
    data = read_nvsmi_csv(DATA / "na.csv")
    assert data.skipped == 0
    (series,) = data.gpus.values()
    values = used_mib(series)
    assert values[3] is None and values[10] is None and values[6] == 9800
    assert all(u is None for u in series.util)
    assert data.samples[3].gpus[0].used_bytes is None


def test_two_gpus_by_index_with_extra_columns() -> None:
    data = read_nvsmi_csv(DATA / "multi_index.csv")
    assert data.skipped == 0 and data.gpu_keys == ["0", "1"]
    first, second = data.gpus.values()
    assert (first.index, first.name, second.name) == (0, "NVIDIA GeForce RTX 3090", "NVIDIA GeForce RTX 3060")
    assert used_mib(first) == LEVELS and set(used_mib(second)) == {310}
    assert second.total == 12288 * MIB
    assert first.times[1] - first.times[0] == pytest.approx(0.5)  # -lms 500
    samples = data.samples
    assert len(samples) == len(LEVELS)
    assert [g.index for g in samples[0].gpus] == [0, 1]


def test_two_gpus_without_identity_column_cycle_per_timestamp() -> None:
    data = read_nvsmi_csv(DATA / "multi_noid.csv")
    assert len(data.gpus) == 2
    first, second = data.gpus.values()
    assert used_mib(first) == LEVELS and set(used_mib(second)) == {777}
    assert (first.total, second.total) == (24564 * MIB, 16384 * MIB)
    assert len(data.samples) == len(LEVELS)


def test_uuid_column_and_repeated_headers() -> None:
    data = read_nvsmi_csv(DATA / "uuid_repeated_headers.csv")
    assert data.skipped == 0 and len(data.gpus) == 1
    (series,) = data.gpus.values()
    assert series.uuid.startswith("GPU-5d2e6f9a") and used_mib(series) == LEVELS


def test_malformed_rows_are_skipped_and_counted() -> None:
    data = read_nvsmi_csv(DATA / "malformed.csv")
    assert data.skipped == 7
    assert data.rows == len(LEVELS) - 7 + 1
    assert len(data.problems) == 5 and data.problems[0].startswith("line 4:")  # header is line 1
    assert any("not a number" in p for p in data.problems)
    assert any("bad timestamp" in p for p in data.problems)
    (series,) = data.gpus.values()
    bad = {2, 4, 6, 8, 9, 11, 13}  # line numbers - 2 of the broken rows
    assert used_mib(series) == [v for i, v in enumerate(LEVELS) if i not in bad] + [1234]


@pytest.mark.parametrize(
    "text",
    [
        "",
        "\n\n",
        "garbage,row\n1,2\n",
        "timestamp, temperature.gpu\n2024/05/01 12:00:00.000, 45\n",
        "\x00\x01\x02, binary\n",
        "timestamp, memory.used [MiB]\n" + "2024/05/01 12:00:00.000, 1 PiB\n",
    ],
)
def test_hostile_text_never_raises(text: str) -> None:
    data = read_nvsmi_csv(text)
    assert data.rows == 0 and data.samples == []
    assert data.skipped == sum(1 for line in text.splitlines() if line.strip()) - text.count("timestamp")


def test_timestamps() -> None:
    base = parse_timestamp("2024/05/01 12:00:00.123")
    assert parse_timestamp("2024/05/01 12:00:01.623") - base == pytest.approx(1.5)
    assert parse_timestamp("2024/05/02 00:00:00.000") - parse_timestamp("2024/05/01 23:59:59.000") == 1
    assert parse_timestamp("2024-05-01T12:00:00") == pytest.approx(base - 0.123)
    assert parse_timestamp(" 1714564800.5 ") == 1714564800.5
    assert len(format_timestamp(1714564800.25)) == len("2024/05/01 12:00:00.250")
    assert format_timestamp(1714564800.25).endswith(".250")


def test_writer_output_reads_back() -> None:
    out = io.StringIO()
    writer = NvsmiWriter(out, with_gpu=True, with_process=True)
    host = HostReading(8000 * MIB, 64000 * MIB, 0, 0, tree_rss=900 * MIB, tree_pids=(10, 11))
    for k in range(5):
        gpus = (
            GpuReading(0, "NVIDIA GeForce RTX 4090", "GPU-aaa", (1000 + 100 * k) * MIB, 24564 * MIB, 300 * MIB, 9,
                       process_bytes={10: 700 * MIB, 99: 5 * MIB}),
            GpuReading(1, "Tesla, P40", "GPU-bbb", 10 * MIB, 24000 * MIB, None, None),
            GpuReading(1, "MIG 1g", "MIG-ccc", 5 * MIB, 5000 * MIB, mig_index=0),
        )  # fmt: skip
        writer.write(Sample(1714564800.0 + k * 0.1, gpus, host))
    assert writer.rows == 10  # MIG instances are not rows of --query-gpu
    data = read_nvsmi_csv(out.getvalue())
    assert data.skipped == 0 and len(data.gpus) == 2
    first, second = data.gpus.values()
    assert used_mib(first) == [1000, 1100, 1200, 1300, 1400]
    assert second.name == "Tesla  P40" and second.util == [None] * 5
    assert data.host.tree_rss == [900 * MIB] * 5 and data.host.tree_gpu == [700 * MIB] * 5
    assert data.host.ram_total == 64000 * MIB
    assert data.samples[2].gpus[0].reserved_bytes == 300 * MIB
    # the first four columns are exactly the documented nvidia-smi query
    assert out.getvalue().startswith(
        "timestamp, memory.used [MiB], memory.total [MiB], utilization.gpu [%], index"
    )


def test_host_only_recording_and_replay_source(tmp_path: Path) -> None:
    out = io.StringIO()
    writer = NvsmiWriter(out, with_gpu=False, with_process=False)
    for k in range(3):
        writer.write(Sample(100.0 + k, (), HostReading((500 + k) * MIB, 1000 * MIB, MIB, 2 * MIB)))
    path = tmp_path / "host.csv"
    path.write_text(out.getvalue())
    source = ReplaySource(path)
    assert source.status().ok and "3 rows" in source.status().message
    got = []
    while (sample := source.sample()) is not None:
        got.append(sample)
    assert [s.host.ram_used for s in got if s.host] == [500 * MIB, 501 * MIB, 502 * MIB]
    assert all(s.gpus == () for s in got)
    assert ReplaySource(DATA / "malformed.csv").status().message.endswith("7 malformed row(s) skipped")


def test_rows_without_a_header_are_read_as_vramtuis_own_query_and_said_so() -> None:
    data = read_nvsmi_csv("a,b\n1,2\n")
    assert data.rows == 0 and data.skipped == 2
    assert "no header line" in data.problems[0] and "memory.used [MiB]" in data.problems[0]
    with_header = read_nvsmi_csv(
        "timestamp, index, memory.used [MiB]\n2025/01/01 00:00:00.000, 0, 100 MiB, 7\n"
    )
    assert with_header.problems == ["line 2: 4 fields where the header has 3"]


def test_readings_no_memory_gives_are_skipped_and_counted() -> None:
    """QA (session 13): a replay read -500 MiB as its baseline and 30000 MiB of a 24105 MiB total as its
    peak, and dropped a `nan` row without counting it."""
    text = (
        "timestamp, host.ram_used [MiB], host.ram_total [MiB]\n"
        "2026/12/04 21:47:36.554, -500 MiB, 24105 MiB\n"
        "2026/12/04 21:47:37.554, 30000 MiB, 24105 MiB\n"
        "2026/12/04 21:47:38.554, nan MiB, 24105 MiB\n"
        "2026/12/04 21:47:39.554, 1e20 MiB, 24105 MiB\n"
        "2026/12/04 21:47:40.554, 1200 MiB, 24105 MiB\n"
    )
    data = read_nvsmi_csv(text)
    assert data.rows == 1 and data.skipped == 4
    assert any("not a memory reading: '-500 MiB'" in p for p in data.problems)
    assert any("host RAM used (30,000 MiB) is over its total (24,105 MiB)" in p for p in data.problems)
    assert any("'nan MiB'" in p for p in data.problems)


def test_timestamps_of_one_minute_are_remembered_and_bad_ones_still_refused() -> None:
    """The reader remembers each minute's seconds (a recording has a row per tick): a cached minute reads
    every second of it right, and a bad hour, minute or second is refused whether its minute is known or not."""
    first = parse_timestamp("2024/05/01 12:00:00.100")
    assert parse_timestamp("2024/05/01 12:00:59.900") - first == pytest.approx(59.8)
    assert parse_timestamp("2024-05-01T12:00:30Z") - first == pytest.approx(29.9)
    for bad in (
        "2024/05/01 12:00:61.000",
        "2024/05/01 12:00:xx",
        "2024/05/01 12:60:00.000",
        "2024/05/01 24:00:00.0",
    ):
        with pytest.raises(ValueError, match="bad timestamp"):
            parse_timestamp(bad)
    with pytest.raises(ValueError, match="bad timestamp"):
        parse_timestamp("2024/05/01 12-00:00.000")
