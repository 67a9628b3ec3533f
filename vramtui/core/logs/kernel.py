"""The host kernel's word on an out-of-memory kill: its OOM-killer lines, and when each was written."""

from __future__ import annotations

import re
import subprocess
import time


def read_kernel_oom_lines(timeout_s: float = 2.0) -> str | None:
    """The kernel's OOM-killer lines from `dmesg` or the journal, when this user may read them."""
    commands = (["dmesg", "-T"], ["dmesg"], ["journalctl", "-k", "-n", "2000", "--no-pager", "-q"])
    for command in commands:
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, check=False)
        except (OSError, subprocess.SubprocessError):
            continue
        if done.returncode != 0:
            continue
        hits = [
            line
            for line in done.stdout.splitlines()
            if re.search(r"out of memory: kill|killed process|oom-kill|oom_reaper", line, re.IGNORECASE)
        ]
        return "\n".join(hits[-5:]) if hits else ""
    return None


# A kill this long before the log's last line, or this long after it, may be the server's (the log
# stops when the process dies; a saved file's time is its last write).
_KILL_BEFORE_S = 600.0
_KILL_AFTER_S = 120.0
# dmesg -T's times drift from the wall clock (they count from boot, and a suspend stops that count): a
# kill up to a minute before the log's first line may still be its own
_STAMP_SLACK_S = 60.0
_DMESG_T_RE = re.compile(r"^\[(\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4})\]")  # dmesg -T
_JOURNAL_TIME_RE = re.compile(r"^(\w{3} +\d+ \d\d:\d\d:\d\d) ")  # journalctl -k
_DMESG_RE = re.compile(r"^\[\s*(\d+\.\d+)\]")  # dmesg: seconds since boot


def kernel_line_time(line: str) -> float | None:
    """When a kernel log line was written (seconds since the epoch, local time), if it says."""
    try:
        if match := _DMESG_T_RE.match(line):
            return time.mktime(time.strptime(" ".join(match.group(1).split()), "%a %b %d %H:%M:%S %Y"))
        if match := _JOURNAL_TIME_RE.match(line):
            year = time.localtime().tm_year
            when = time.mktime(
                time.strptime(f"{' '.join(match.group(1).split())} {year}", "%b %d %H:%M:%S %Y")
            )
            return when if when <= time.time() + 86400 else when - 365 * 86400  # last year's December
        if match := _DMESG_RE.match(line):
            import psutil  # type: ignore[import-untyped]

            return psutil.boot_time() + float(match.group(1))
    except (ValueError, OverflowError, OSError):
        return None
    return None


# A date and time a log line carries ("2023-10-13 12:34:56", "time=2025-04-01T08:18:00.513+10:00",
# "[2026-04-11 14:34:09,123]"): with a year, so it places the log on the calendar.
_LOG_STAMP_RE = re.compile(
    r"\b(20\d\d-[01]\d-[0-3]\d[T ][0-2]\d:[0-5]\d:[0-5]\d)(?:[.,]\d+)?(Z|[+-][0-2]\d:?\d\d)?"
)


def log_stamp_time(text: str, first: bool = False) -> float | None:
    """When a log's last dated line (`first`: its first) was written (seconds since the epoch), from the
    log's own stamps; a stamp without a zone is this machine's local time. None when no line carries a
    date."""
    from datetime import datetime

    found = _LOG_STAMP_RE.search(text) if first else None
    stamps = [found.groups()] if found is not None else _LOG_STAMP_RE.findall(text)
    if not stamps:
        return None
    stamp, zone = stamps[0] if first else stamps[-1]
    zone = zone or ""  # a search leaves an absent group None, findall ""
    zone = zone.replace("Z", "+00:00")
    if zone and ":" not in zone:
        zone = f"{zone[:3]}:{zone[3:]}"
    try:
        return datetime.fromisoformat(stamp.replace(" ", "T") + zone).timestamp()
    except ValueError:
        return None


def kills_near(
    kernel_text: str, log_time: float | None, log_start: float | None = None
) -> tuple[list[str], list[str]]:
    """The kernel's OOM-kill lines that may be this log's process (by time), and the others.

    With no time for the log (text from a pipe), none can be matched: all are "others". A kill before
    the log's first dated line (`log_start`) was of a process before this one (QA 20 D6: a live log 8 s
    old was "confirmed" by a kill 8 minutes before its launch).
    """
    earliest = log_time - _KILL_BEFORE_S if log_time is not None else None
    if earliest is not None and log_start is not None:
        earliest = max(earliest, log_start - _STAMP_SLACK_S)
    near: list[str] = []
    others: list[str] = []
    for line in kernel_text.splitlines():
        when = kernel_line_time(line)
        if (
            log_time is not None
            and earliest is not None
            and when is not None
            and earliest <= when <= log_time + _KILL_AFTER_S
        ):
            near.append(line)
        else:
            others.append(line)
    return near, others


def kill_times(lines: list[str]) -> str:
    times = [
        time.strftime("%b %d %H:%M:%S", time.localtime(when))
        for line in lines
        if (when := kernel_line_time(line))
    ]
    return ", ".join(dict.fromkeys(times)) or "times it does not print"
