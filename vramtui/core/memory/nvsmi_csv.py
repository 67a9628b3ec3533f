"""Read and write the CSV of `nvidia-smi --query-gpu=... --format=csv [-l 1 | -lms N]`.

Reading takes what users actually have: values with units ("1234 MiB", "5 %") or `nounits`, `[N/A]`
and `[Not Supported]` fields, several GPUs interleaved (told apart by an index / uuid / pci.bus_id
column, or without one by their order among rows sharing a timestamp), extra columns in any order,
headers repeated when runs were appended, no header at all (`noheader`), UTF-16 (Windows PowerShell's
`>`; decoded as `diagnose` decodes a log, core/logs/encoded.py). A row that cannot be read
is skipped and counted, never a traceback. A recording too long to hold is summarised as it is read,
every peak and floor kept (`nvsmi_fold`).

Writing (`vramtui record`) starts with nvidia-smi's own columns, so tools that read
`timestamp, memory.used, memory.total, utilization.gpu` read it, and adds GPU identity, host RAM
and, with a watched process, its tree's RSS and GPU bytes.
"""

from __future__ import annotations

import calendar
import heapq
import io
import re
import time
from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from operator import itemgetter
from pathlib import Path
from typing import TextIO

from vramtui.core.errors import VramtuiError
from vramtui.core.memory.nvsmi_fold import CHECK_EVERY, KEEP_POINTS, FoldState, maybe_fold
from vramtui.core.memory.sampling import GpuReading, HostReading, Sample
from vramtui.core.units import MIB

_UNIT_BYTES = {"b": 1, "kib": 1024, "mib": MIB, "gib": 1024**3, "kb": 1024, "mb": MIB, "gb": 1024**3}

# The columns nvidia-smi prints when asked without a header (`--format=csv,noheader`) for the
# documented query; any other headerless shape is unreadable.
DEFAULT_COLUMNS = ("timestamp", "memory.used [MiB]", "memory.total [MiB]", "utilization.gpu [%]")

_HEADER_FIELD = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*(\s*\[[^\]]*\])?$")
_NAME_UNIT = re.compile(r"^\s*([^\[]+?)\s*(?:\[([^\]]*)\])?\s*$")
_IDENTITY_COLUMNS = ("index", "uuid", "pci.bus_id", "gpu_uuid", "gpu_bus_id")
_MEMORY_COLUMNS = {
    "memory.used": "used",
    "memory.total": "total",
    "memory.reserved": "reserved",
    "memory.free": "free",
}
_HOST_COLUMNS = {
    "host.ram_used": "ram_used",
    "host.ram_total": "ram_total",
    "host.swap_used": "swap_used",
    "host.swap_total": "swap_total",
    "process.tree_rss": "tree_rss",
    "process.tree_gpu": "tree_gpu",
}


# vramtui's own columns it writes for people, not for a series (the process tree's PIDs)
_OWN_UNREAD = frozenset({"process.pids"})


# QA 19 F10: a --query-compute-apps file read "the header names no memory column" for every row
_PER_PROCESS_WORDS = (
    "this is nvidia-smi's per-process query (--query-compute-apps: pid, used_gpu_memory); replay reads "
    "per-GPU rows: record with `nvidia-smi --query-gpu=timestamp,index,memory.used,memory.total "
    "--format=csv -l 1`, or `vramtui record --pid PID` for the model's process beside its GPUs"
)


class _Malformed(ValueError):
    pass


def _is_na(text: str) -> bool:
    t = text.strip().lower()
    return not t or t.startswith("[") or t in ("n/a", "not supported", "unknown error")


# No device or host has more memory than this: a reading past it is a broken row, not a figure.
MAX_READING_BYTES = 64 * 1024**4


def _bytes(number: float, text: str) -> float:
    """A memory reading in bytes, refused when no memory reads so (negative, NaN, past 64 TiB)."""
    if not 0 <= number <= MAX_READING_BYTES:  # NaN fails both
        raise _Malformed(f"not a memory reading: {text!r}")
    return number


def _parse_amount(text: str, unit: str | None) -> float | None:
    """'1234 MiB' / '1234' (with the header's unit) -> bytes; '5 %' -> 5; N/A -> None."""
    t = text.strip()
    # Fast paths for the shapes nvidia-smi writes a million times: "1234 MiB", "57 %", "1234".
    try:
        if t.endswith(" MiB"):
            return _bytes(float(t[:-4]) * MIB, t)
        if t.endswith(" %"):
            return float(t[:-2])
        number = float(t)
    except ValueError:
        if _is_na(t):
            return None
        parts = t.split()
        try:
            number = float(parts[0])
        except (ValueError, IndexError):
            raise _Malformed(f"not a number: {t!r}") from None
        value_unit = parts[1] if len(parts) > 1 else unit
    else:
        if number != number or number in (float("inf"), float("-inf")):
            raise _Malformed(f"not a number: {t!r}")
        value_unit = unit
    if value_unit is None or value_unit == "%":
        return number
    factor = _UNIT_BYTES.get(value_unit.lower())
    if factor is None:
        raise _Malformed(f"unknown unit {value_unit!r}")
    return _bytes(number * factor, t)


_day_cache: dict[str, int] = {}
_minute_cache: dict[str, int] = {}  # 'YYYY/MM/DD HH:MM:' -> its seconds: a recording has a row per tick


def parse_timestamp(text: str) -> float:
    """'2024/05/01 12:00:00.123' (nvidia-smi, local time) -> seconds, read as if UTC.

    Only differences between timestamps matter to the readings; `format_timestamp` writes them back
    in the same shape. Epoch seconds and ISO 8601 are accepted too.
    """
    t = text.strip()
    if len(t) >= 19 and t[4] in "/-" and t[7] in "/-" and t[10] in " T":
        minute = _minute_cache.get(t[:17])
        if minute is None:
            minute = _minute(t)
        try:
            seconds = float(t[17:].rstrip("Z"))
        except ValueError:
            raise _Malformed(f"bad timestamp {t!r}") from None
        if seconds >= 61:
            raise _Malformed(f"bad timestamp {t!r}")
        return minute + seconds
    try:
        return float(t)
    except ValueError:
        raise _Malformed(f"bad timestamp {t!r}") from None


def _minute(t: str) -> int:
    """The seconds of a timestamp's date, hour and minute (its first 17 characters), remembered."""
    date = t[:10]
    day = _day_cache.get(date)
    if day is None:
        try:
            day = calendar.timegm((int(t[0:4]), int(t[5:7]), int(t[8:10]), 0, 0, 0, 0, 0, 0))
        except ValueError:
            raise _Malformed(f"bad timestamp {t!r}") from None
        if len(_day_cache) > 10000:
            _day_cache.clear()
        _day_cache[date] = day
    try:
        hours, minutes = int(t[11:13]), int(t[14:16])
    except ValueError:
        raise _Malformed(f"bad timestamp {t!r}") from None
    if t[13] != ":" or t[16] != ":" or hours > 23 or minutes > 59:
        raise _Malformed(f"bad timestamp {t!r}")
    if len(_minute_cache) > 10000:
        _minute_cache.clear()
    minute = _minute_cache[t[:17]] = day + hours * 3600 + minutes * 60
    return minute


def format_timestamp(t: float) -> str:
    """nvidia-smi's shape, in local time: '2024/05/01 12:00:00.123'."""
    whole = int(t)
    return time.strftime("%Y/%m/%d %H:%M:%S", time.localtime(whole)) + f".{int((t - whole) * 1000):03d}"


@dataclass(slots=True)
class GpuSeries:
    """One GPU's curve from the file; memory in bytes, None where the file said N/A."""

    key: str
    index: int
    name: str = ""
    uuid: str = ""
    times: list[float] = field(default_factory=list)
    used: list[float | None] = field(default_factory=list)
    util: list[float | None] = field(default_factory=list)
    reserved: list[float | None] = field(default_factory=list)
    total: float | None = None
    # per point: its tick (a change of timestamp: a fold keeps ticks whole) and its row among those read
    ticks: array[int] = field(default_factory=lambda: array("q"))
    rows: array[int] = field(default_factory=lambda: array("q"))
    backwards: int = 0  # steps back in time, counted as read (a summary keeps only some of them)
    dropped: dict[str, int] = field(default_factory=dict)  # figures a summary left out, per column

    @property
    def label(self) -> str:
        return f"GPU {self.index}" + (f" {self.name}" if self.name else "")

    def read(self, column: str = "used") -> int:
        """The figures (not N/A) of a column in the file, whether a summary kept them or not."""
        return _count(getattr(self, column)) + self.dropped.get(column, 0)


@dataclass(slots=True)
class HostSeries:
    times: list[float] = field(default_factory=list)
    ram_used: list[float | None] = field(default_factory=list)
    ram_total: float | None = None
    swap_used: list[float | None] = field(default_factory=list)
    swap_total: float | None = None
    tree_rss: list[float | None] = field(default_factory=list)
    tree_gpu: list[float | None] = field(default_factory=list)
    ticks: array[int] = field(default_factory=lambda: array("q"))
    rows: array[int] = field(default_factory=lambda: array("q"))
    dropped: dict[str, int] = field(default_factory=dict)

    def read(self, column: str) -> int:
        """The figures (not N/A) of a column in the file, whether a summary kept them or not."""
        return _count(getattr(self, column)) + self.dropped.get(column, 0)


def _count(values: list[float | None]) -> int:
    return len(values) - values.count(None)


@dataclass(slots=True)
class NvsmiData:
    gpus: dict[str, GpuSeries] = field(default_factory=dict)
    host: HostSeries = field(default_factory=HostSeries)
    rows: int = 0
    skipped: int = 0
    problems: list[str] = field(default_factory=list)  # the first few skipped rows: "line 12: why"
    unread_columns: list[str] = field(default_factory=list)  # vramtui's own namespaces, names not known
    fold: FoldState = field(default_factory=FoldState)
    _samples: list[Sample] | None = None

    @property
    def gpu_keys(self) -> list[str]:
        return list(self.gpus)

    @property
    def summarised(self) -> bool:
        """Too long to hold: only the ticks that carry each stretch's extremes were kept (`nvsmi_fold`)."""
        return self.fold.folded

    @property
    def ticks_kept(self) -> int:
        """Ticks (timestamps) held, of `fold.ticks` read."""
        kept = {tick for series in self.gpus.values() for tick in series.ticks}
        return len(kept.union(self.host.ticks))

    @property
    def samples(self) -> list[Sample]:
        """One Sample per tick (every GPU once), built on first use."""
        if self._samples is None:
            self._samples = list(iter_samples(self))
        return self._samples


# A row's figures, as `_Columns.pick` gives them
_FIGURES = (
    "used", "total", "reserved", "util", "ram_used", "ram_total", "swap_used", "swap_total", "tree_rss", "tree_gpu"
)  # fmt: skip
_Figures = tuple[float | None, ...]


class _Columns:
    def __init__(self, names: list[str]) -> None:
        self.count = len(names)
        self.timestamp: int | None = None
        self.identity: tuple[int, str] | None = None
        self.index: int | None = None
        self.uuid: int | None = None
        self.name: int | None = None
        self.util: tuple[int, str | None] | None = None
        self.memory: list[tuple[int, str, str | None]] = []
        self.host: list[tuple[int, str, str | None]] = []
        # a column in vramtui's own namespaces that it does not know: a damaged header (QA 17 F17: the
        # process series was dropped without a word)
        self.unknown_own: list[str] = []
        self.used_gpu_memory = False  # a per-process query's column
        # per column, the figures its texts read as: a recording repeats a few thousand texts millions
        # of times ("24564 MiB"), and a look-up is several times cheaper than reading one
        self.caches: list[dict[str, float | None]] = [{} for _name in names]
        identities: dict[str, int] = {}
        for position, raw in enumerate(names):
            match = _NAME_UNIT.match(raw)
            name = (match.group(1) if match else raw).strip().lower()
            unit = match.group(2).strip() if match and match.group(2) else None
            if name == "timestamp":
                self.timestamp = position
            elif name in _IDENTITY_COLUMNS:
                identities.setdefault(name, position)
                if name == "index":
                    self.index = position
                elif name in ("uuid", "gpu_uuid"):
                    self.uuid = position
            elif name in ("name", "gpu_name"):
                self.name = position
            elif name == "utilization.gpu":
                self.util = (position, unit)
            elif name in _MEMORY_COLUMNS:
                self.memory.append((position, _MEMORY_COLUMNS[name], unit or "MiB"))
            elif name in _HOST_COLUMNS:
                self.host.append((position, _HOST_COLUMNS[name], unit or "MiB"))
            elif name.startswith(("host.", "process.")) and name not in _OWN_UNREAD:
                self.unknown_own.append(raw.strip())
            elif name == "used_gpu_memory":
                self.used_gpu_memory = True
        for name in _IDENTITY_COLUMNS:
            if name in identities:
                self.identity = (identities[name], name)
                break
        self.usable = bool(self.memory or self.host)
        self._figures()

    def _figures(self) -> None:
        """What a row's figures are read from, in the order a malformed one is reported (memory, host,
        utilisation), and `pick`: a row's figures (`_FIGURES`) from them, None where the header has none."""
        read = self.memory + self.host
        self.amounts = [(i, self.caches[i], unit) for i, _kind, unit in read]
        where = {kind: k for k, (_i, kind, _unit) in enumerate(read)}  # a repeated column: the last one
        if self.util is not None:
            where["util"] = len(self.amounts)
            self.amounts.append((self.util[0], self.caches[self.util[0]], "%"))
        self.pick = itemgetter(*(where.get(kind, -1) for kind in _FIGURES))  # -1: the None after them
        # a use over its own total is checked where the header has both
        self.within_gpu = "used" in where and "total" in where
        self.within_host = "ram_used" in where and "ram_total" in where

    @property
    def per_process(self) -> bool:
        """nvidia-smi's per-process query (--query-compute-apps: pid, used_gpu_memory), not a GPU's."""
        return not self.usable and self.used_gpu_memory


# --query-gpu's names, and --query-compute-apps' own (QA 35 F15: its header read as "no header line", or
# as a bad timestamp)
_PLAIN_FIELD_NAMES = {
    *("timestamp", "index", "name", "uuid", "pstate", "count", "serial", "driver_version"),
    *("pid", "process_name", "used_gpu_memory", "used_memory", "gpu_uuid", "gpu_name", "gpu_bus_id"),
}


def _is_header(fields: list[str]) -> bool:
    """Every field is a bare field name (with an optional [unit]) and one of them is nvidia-smi's."""
    names = [f.strip() for f in fields]
    if not all(_HEADER_FIELD.match(name) for name in names if name):
        return False
    bare = [name.split("[")[0].strip().lower() for name in names]
    return any("." in name or name in _PLAIN_FIELD_NAMES for name in bare)


def _iter_lines(source: str | Path | TextIO | Iterable[str]) -> Iterator[str]:
    if isinstance(source, Path):
        from vramtui.core.logs.encoded import decoded

        try:
            # UTF-16 (Windows PowerShell's `nvidia-smi ... > file.csv`) is read as its text, by the decoder
            # `diagnose` reads such logs with (QA 39 F7: "bad timestamp '\x00t\x00i...'")
            with (
                source.open("rb") as raw,
                io.TextIOWrapper(decoded(raw)[0], encoding="utf-8", errors="replace", newline="") as handle,
            ):
                yield from handle
        except OSError as error:
            raise VramtuiError(f"cannot read {source}: {error.strerror or error}") from None
    elif isinstance(source, str):
        yield from io.StringIO(source)
    else:
        yield from source


def _count_problem(fields: int, expected: int, headless: bool) -> str:
    if headless:
        return (
            f"{fields} fields and no header line: without one, vramtui's own query ({', '.join(DEFAULT_COLUMNS)}) "
            "is assumed; record with --format=csv (not noheader) or with `vramtui record`"
        )
    return f"{fields} fields where the header has {expected}"


def read_nvsmi_csv(
    source: str | Path | TextIO | Iterable[str],
    max_problems: int = 5,
    keep: int = KEEP_POINTS,
    stop_after: int | None = None,
) -> NvsmiData:
    """Parse nvidia-smi query CSV (a Path, the text itself, or lines). Never raises on bad rows.

    `keep`: the points a series may hold before the recording is summarised as it is read (`nvsmi_fold`);
    `stop_after`: stop once that many rows were read (a check that the file has any)."""
    reader = _Reader(NvsmiData(fold=FoldState(keep=keep)), max_problems)
    for number, line in enumerate(_iter_lines(source), start=1):
        text = line.strip().lstrip("\ufeff")
        if not text or text[0] == "#":
            continue
        fields = text.split(",")
        if not text[0].isdigit() and _is_header(fields):  # rows start with a timestamp or a number
            reader.header(fields, source)
        elif reader.row(number, fields) and reader.data.rows == stop_after:
            break
    data = reader.data
    maybe_fold(data, data.fold, reader.tick)  # the rows since the last look: held stays within `keep`
    data.fold.ticks = reader.tick + 1
    return data


class _Reader:
    """What reading a file remembers from row to row."""

    def __init__(self, data: NvsmiData, max_problems: int) -> None:
        self.data = data
        self.max_problems = max_problems
        self.columns: _Columns | None = None
        self.headless = False  # no header line: vramtui's own query's columns are assumed
        self.group_t: float | None = None
        self.group_position = 0
        self.last_t: float | None = None
        self.tick = -1  # ticks (changes of timestamp) read, less one
        self.last_host_t: float | None = None

    def header(self, fields: list[str], source: object) -> None:
        columns = self.columns = _Columns(fields)
        if columns.per_process:
            raise VramtuiError(
                f"{source}: {_PER_PROCESS_WORDS}" if isinstance(source, Path) else _PER_PROCESS_WORDS
            )
        self.data.unread_columns.extend(columns.unknown_own)

    def row(self, number: int, fields: list[str]) -> bool:
        """Read one row; False: it was malformed (skipped and counted)."""
        columns = self.columns
        if columns is None:
            columns = self.columns = _Columns(list(DEFAULT_COLUMNS))
            self.headless = True
        data = self.data
        try:
            if not columns.usable:
                raise _Malformed("the header names no memory column")
            if len(fields) != columns.count:
                raise _Malformed(_count_problem(len(fields), columns.count, self.headless))
            row = _parse_row(fields, columns, data.rows)
        except _Malformed as error:
            data.skipped += 1
            if len(data.problems) < self.max_problems:
                data.problems.append(f"line {number}: {error}")
            return False
        self._add(columns, row)
        if data.rows % CHECK_EVERY == 0:
            maybe_fold(data, data.fold, self.tick)
        return True

    def _add(self, columns: _Columns, row: _Parsed) -> None:
        t, key, index, name, uuid, figures = row
        used, total, reserved, util, ram_used, ram_total, swap_used, swap_total, tree_rss, tree_gpu = figures
        data = self.data
        sequence = data.rows
        data.rows += 1
        if t != self.last_t:
            self.tick += 1
            self.last_t = t
        if columns.memory:
            if key is None:
                # No identity column: GPUs are told apart by their order among rows sharing a timestamp.
                self.group_position = self.group_position + 1 if t == self.group_t else 0
                self.group_t = t
                key, index = f"#{self.group_position}", self.group_position
            series = data.gpus.get(key)
            if series is None:
                series = data.gpus[key] = GpuSeries(
                    key, index if index is not None else len(data.gpus), name, uuid
                )
            if series.times and t < series.times[-1]:
                series.backwards += 1
            series.times.append(t)
            series.used.append(used)
            series.util.append(util)
            series.reserved.append(reserved)
            series.ticks.append(self.tick)
            series.rows.append(sequence)
            if total is not None:
                series.total = total
        if columns.host and t != self.last_host_t:  # one host reading per tick, not per GPU row
            self.last_host_t = t
            host = data.host
            host.times.append(t)
            host.ram_used.append(ram_used)
            host.swap_used.append(swap_used)
            host.tree_rss.append(tree_rss)
            host.tree_gpu.append(tree_gpu)
            host.ticks.append(self.tick)
            host.rows.append(sequence)
            if ram_total is not None:
                host.ram_total = ram_total
            if swap_total is not None:
                host.swap_total = swap_total


_Parsed = tuple[float, str | None, int | None, str, str, _Figures]


def _parse_row(fields: list[str], columns: _Columns, sequence: int) -> _Parsed:
    # No clock in the file: assume `-l 1`.
    t = parse_timestamp(fields[columns.timestamp]) if columns.timestamp is not None else float(sequence)
    values = [
        cache[text] if (text := fields[i]) in cache else _amount(cache, text, unit)
        for i, cache, unit in columns.amounts
    ]
    values.append(None)
    figures: _Figures = columns.pick(values)
    key: str | None = None
    index: int | None = None
    if columns.identity is not None:
        key = fields[columns.identity[0]].strip()
        if _is_na(key):
            key = None
    if columns.index is not None:
        text = fields[columns.index].strip()
        if text.isdigit():
            index = int(text)
    name = fields[columns.name].strip() if columns.name is not None else ""
    uuid = fields[columns.uuid].strip() if columns.uuid is not None else ""
    if columns.within_gpu:
        _within(figures[0], figures[1], "GPU memory")
    if columns.within_host:
        _within(figures[4], figures[5], "host RAM")
    return t, key, index, name, uuid, figures


_CACHE_LIMIT = 8192  # texts remembered per column: bounded, whatever the file


def _amount(cache: dict[str, float | None], text: str, unit: str | None) -> float | None:
    """`_parse_amount` of one column's text, remembered (a malformed text is not: it raises each time)."""
    value = _parse_amount(text, unit)
    if len(cache) >= _CACHE_LIMIT:
        cache.clear()  # a curve that drifts for days: its recent texts are the ones that come back
    cache[text] = value
    return value


def _within(used: float | None, total: float | None, what: str) -> None:
    """A row whose use is over its own total (a few percent of rounding aside) is a broken reading."""
    if used is not None and total and used > total * 1.02:
        raise _Malformed(f"{what} used ({used / MIB:,.0f} MiB) is over its total ({total / MIB:,.0f} MiB)")


def _whole(value: float | None) -> int | None:
    return None if value is None else int(value)


def _order(data: NvsmiData) -> Iterator[tuple[str | None, int, int]]:
    """(GPU key or None, position in that GPU's series or -1, position in the host's or -1) per point,
    in the file's order (a row's GPU reading before its host reading)."""
    streams = [_points(series.rows, 0, key) for key, series in data.gpus.items()]
    streams.append(_points(data.host.rows, 1, None))
    for _row, kind, key, position in heapq.merge(*streams):
        yield (key, position, -1) if kind == 0 else (None, -1, position)


def _points(rows: array[int], kind: int, key: str | None) -> Iterator[tuple[int, int, str | None, int]]:
    for position, row in enumerate(rows):
        yield row, kind, key, position


def iter_samples(data: NvsmiData) -> Iterator[Sample]:
    """One Sample per tick (every GPU once), built as they are asked for."""
    tick_t: float | None = None
    tick_gpus: list[GpuReading] = []
    tick_keys: set[str] = set()
    tick_host: HostReading | None = None
    host = data.host

    for key, gpu_position, host_position in _order(data):
        if gpu_position >= 0 and key is not None:
            series = data.gpus[key]
            t = series.times[gpu_position]
        else:
            t = host.times[host_position] if host_position >= 0 else (tick_t or 0.0)
        new_tick = tick_t is None or (key is not None and key in tick_keys) or (key is None and t != tick_t)
        if new_tick:
            if tick_t is not None:
                yield Sample(tick_t, tuple(tick_gpus), tick_host)
            tick_t, tick_gpus, tick_keys, tick_host = t, [], set(), None
        if gpu_position >= 0 and key is not None:
            tick_keys.add(key)
            util = series.util[gpu_position]
            tick_gpus.append(
                GpuReading(
                    index=series.index,
                    name=series.name,
                    uuid=series.uuid,
                    used_bytes=_whole(series.used[gpu_position]),
                    total_bytes=_whole(series.total),
                    reserved_bytes=_whole(series.reserved[gpu_position]),
                    util_percent=None if util is None else int(util),
                )
            )
        if host_position >= 0 and tick_host is None:
            rss = host.tree_rss[host_position]
            tick_host = HostReading(
                ram_used=_whole(host.ram_used[host_position]) or 0,
                ram_total=_whole(host.ram_total) or 0,
                swap_used=_whole(host.swap_used[host_position]) or 0,
                swap_total=_whole(host.swap_total) or 0,
                tree_rss=_whole(rss),
            )
    if tick_t is not None:
        yield Sample(tick_t, tuple(tick_gpus), tick_host)


# ---- writing ------------------------------------------------------------------------------------

GPU_HEADER = (
    "timestamp",
    "memory.used [MiB]",
    "memory.total [MiB]",
    "utilization.gpu [%]",
    "index",
    "name",
    "uuid",
    "memory.reserved [MiB]",
)
HOST_HEADER = ("host.ram_used [MiB]", "host.ram_total [MiB]", "host.swap_used [MiB]")
PROCESS_HEADER = ("process.tree_rss [MiB]", "process.tree_gpu [MiB]", "process.pids")


def _mib(value: int | float | None) -> str:
    return "[N/A]" if value is None else f"{round(value / MIB)} MiB"


class NvsmiWriter:
    """Writes samples as nvidia-smi query CSV: one row per GPU per sample (one per sample without a
    GPU), flushed per row so an interrupted recording keeps every row it wrote."""

    def __init__(self, out: TextIO, with_gpu: bool, with_process: bool) -> None:
        self.out = out
        self.with_gpu = with_gpu
        self.with_process = with_process
        self.rows = 0
        header = (GPU_HEADER if with_gpu else ("timestamp",)) + HOST_HEADER
        if with_process:
            header += PROCESS_HEADER
        self._write(", ".join(header))

    def _write(self, line: str) -> None:
        self.out.write(line + "\n")
        self.out.flush()

    def write(self, sample: Sample) -> int:
        """Write one sample; returns the rows written."""
        host = sample.host
        tail = [
            _mib(host.ram_used if host else None),
            _mib(host.ram_total if host else None),
            _mib(host.swap_used if host else None),
        ]
        if self.with_process:
            alive = bool(host and host.tree_pids)
            tail += [
                _mib(host.tree_rss if host and alive else None),
                _mib(sample.tree_gpu_bytes() if alive else None),
                str(len(host.tree_pids) if host else 0),
            ]
        stamp = format_timestamp(sample.t)
        written = 0
        if self.with_gpu:
            for gpu in sample.gpus:
                if gpu.mig_index is not None:
                    continue  # nvidia-smi --query-gpu lists physical GPUs
                util = "[N/A]" if gpu.util_percent is None else f"{gpu.util_percent} %"
                name = gpu.name.replace(",", " ") or "[N/A]"
                head = [stamp, _mib(gpu.used_bytes), _mib(gpu.total_bytes), util, str(gpu.index), name]
                head += [gpu.uuid or "[N/A]", _mib(gpu.reserved_bytes)]
                self._write(", ".join(head + tail))
                written += 1
        else:
            self._write(", ".join([stamp, *tail]))
            written = 1
        self.rows += written
        return written
