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


def kills_near(kernel_text: str, log_time: float | None) -> tuple[list[str], list[str]]:
    """The kernel's OOM-kill lines that may be this log's process (by time), and the others.

    With no time for the log (text from a pipe), none can be matched: all are "others".
    """
    near: list[str] = []
    others: list[str] = []
    for line in kernel_text.splitlines():
        when = kernel_line_time(line)
        if (
            log_time is not None
            and when is not None
            and log_time - _KILL_BEFORE_S <= when <= log_time + _KILL_AFTER_S
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
