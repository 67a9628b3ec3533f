"""`vramtui record`: write the memory curve as nvidia-smi query CSV, at 10 Hz by default."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import stat
import sys
import time
from types import FrameType
from typing import TYPE_CHECKING, TextIO

from vramtui.core.errors import VramtuiError

if TYPE_CHECKING:
    from vramtui.core.memory.prometheus import PrometheusSource
    from vramtui.core.memory.sampling import HostSource, Source

HELP = (
    "record GPU memory (NVML, or a remote box's DCGM exporter with --source), host RAM and optionally "
    "one process tree as nvidia-smi CSV (every row flushed: Ctrl-C keeps all of it)"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--out",
        metavar="FILE",
        help="write the CSV here (default: standard output); a recording already there is kept unless --force",
    )
    parser.add_argument(
        "--force", action="store_true", help="with --out: replace a recording that is there already"
    )
    parser.add_argument(
        "--interval-ms",
        metavar="N",
        type=int,
        default=100,
        help="sampling interval in milliseconds (default 100: a sub-second prefill spike shows)",
    )
    parser.add_argument(
        "--pid",
        metavar="PID",
        type=int,
        help="also record this process and its children: host RSS and the GPU memory NVML charges to them",
    )
    parser.add_argument(
        "--duration", metavar="S", type=float, help="stop after S seconds (default: until Ctrl-C)"
    )
    parser.add_argument(
        "--source",
        metavar="URL",
        help="read GPU memory from a Prometheus text endpoint instead of NVML: a DCGM exporter "
        "(http://box:9400/metrics) or a Prometheus server's /federate for a fleet",
    )


def _say(message: str) -> None:
    print(f"vramtui record: {message}", file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    from vramtui.core.memory.sampling import HostSource, NvmlSource

    if args.interval_ms is None or args.interval_ms <= 0:
        raise VramtuiError("--interval-ms must be a positive number of milliseconds")
    if args.duration is not None and not args.duration > 0:
        raise VramtuiError("--duration must be a positive number of seconds")
    if args.source is not None and args.pid is not None:
        raise VramtuiError("--pid watches a local process; it cannot go with --source (a remote box)")
    if args.out and not args.force:
        _refuse_replacing(args.out)
    gpu_source = _remote_source(args.source) if args.source is not None else None
    if args.pid is not None and args.pid <= 0:
        raise VramtuiError(f"--pid {args.pid}: a process id is a positive whole number")
    host = HostSource(args.pid)
    if args.pid is not None and not host.status().ok:
        raise VramtuiError(f"--pid {args.pid}: {host.status().message}")
    out: TextIO = sys.stdout
    if args.out:
        try:
            out = open(args.out, "w", encoding="utf-8")  # noqa: SIM115 - closed in finally
        except OSError as error:
            raise VramtuiError(f"cannot write {args.out}: {error.strerror or error}") from None

    stop = _Stop()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.asked = True  # finish the row being written, then stop: nothing recorded is lost

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    nvml: Source = gpu_source if gpu_source is not None else NvmlSource()
    try:
        if gpu_source is not None:
            with_gpu = True
            _say(gpu_source.status().message)
        else:
            first = nvml.sample()
            with_gpu = bool(first and first.gpus)
            if with_gpu:
                _say(nvml.status().message)
            else:
                status = nvml.status()
                _say(f"{status.message if not status.ok else 'NVML sees no GPU'}; recording host RAM only")
        if args.pid is not None:
            _say(host.status().message)
        # A remote box's GPUs with this machine's RAM beside them would mix two machines in one row.
        rows, samples, failed = _record(out, nvml, None if gpu_source else host, with_gpu, args, stop)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if out is not sys.stdout:
            with contextlib.suppress(OSError):  # a full disk: said below, with what was kept
                out.close()
        nvml.close()
        host.close()
    where = args.out or "standard output"
    if failed:  # QA: a full disk was an internal error, with no word of what was kept
        raise VramtuiError(
            f"cannot write {where}: {failed}; stopped after {samples} sample(s), {rows} row(s), which are kept"
        )
    _say(f"recorded {samples} sample(s), {rows} row(s) to {where}")
    return 0


def _refuse_replacing(out: str) -> None:
    """A file with something in it is a recording (maybe of a failure hard to see again): opening it for
    writing empties it, so only --force does, as `wizard --save` (QA 39 F6: a repeated command line replaced
    101 rows with 6). An empty file (`mktemp`), a pipe or a device (/dev/stdout) is written as before."""
    try:
        there = os.stat(out)
    except OSError:  # not there (or not reachable: open says why below)
        return
    if stat.S_ISREG(there.st_mode) and there.st_size > 0:
        raise VramtuiError(
            f"--out {out} is there already: record to another file, or add --force to replace it"
        )


def _remote_source(url: str) -> PrometheusSource:
    """The endpoint, fetched once now: one line and exit 2 when it cannot be used."""
    from vramtui.core.memory.prometheus import PrometheusSource

    source = PrometheusSource(url)
    try:
        source.check()
    except VramtuiError:
        source.close()
        raise
    return source


class _Stop:
    """Set by the signal handler, read by the loop: a plain flag, no lock. A threading.Event set from the
    handler can deadlock: the handler runs in the main thread, which may hold the Event's own lock inside
    its wait (a CI run hung 15 s after SIGINT that way)."""

    asked = False

    def pause(self, seconds: float) -> None:
        """Sleep `seconds`, in slices short enough that a stop asked meanwhile is seen within 50 ms."""
        end = time.monotonic() + seconds
        while not self.asked and (left := end - time.monotonic()) > 0:
            time.sleep(min(left, 0.05))


def _record(
    out: TextIO,
    nvml: Source,
    host: HostSource | None,
    with_gpu: bool,
    args: argparse.Namespace,
    stop: _Stop,
) -> tuple[int, int, str | None]:
    from vramtui.core.memory.nvsmi_csv import NvsmiWriter
    from vramtui.core.memory.sampling import merge_samples

    try:
        writer = NvsmiWriter(out, with_gpu=with_gpu, with_process=args.pid is not None)
    except OSError as error:  # not even the header fits
        return 0, 0, error.strerror or str(error)
    interval = args.interval_ms / 1000.0
    started = time.monotonic()
    deadline = None if args.duration is None else started + args.duration
    next_tick = started
    samples = 0
    told_exit = False
    told_status = nvml.status().message
    while not stop.asked:
        t = time.time()
        parts = ([host.sample()] if host is not None else []) + ([nvml.sample()] if with_gpu else [])
        sample = merge_samples(t, parts)
        try:
            writer.write(sample)
        except OSError as error:  # a full disk, a closed pipe: stop here, what was written stays
            return writer.rows, samples, error.strerror or str(error)
        samples += 1
        told_status = _tell_change(nvml, told_status) if host is None else told_status
        if args.pid is not None and not told_exit and sample.host and not sample.host.tree_pids:
            told_exit = True
            _say(f"process {args.pid} and its children have exited; still recording (Ctrl-C to stop)")
        next_tick += interval
        now = time.monotonic()
        if deadline is not None and now >= deadline:
            break
        delay = next_tick - now
        if delay < 0:  # fell behind: skip ticks rather than burst
            next_tick, delay = now, 0.0
        if deadline is not None:
            delay = min(delay, max(deadline - now, 0.0))
        stop.pause(delay)
    return writer.rows, samples, None


def _tell_change(source: Source, told: str) -> str:
    """A remote endpoint that stops answering, or a GPU that leaves its answer: one line when it
    changes (not one per row); the rows go on, with [N/A] where a figure is missing."""
    message = source.status().message
    if message != told:
        _say(message + ("" if source.status().ok else "; still recording (Ctrl-C to stop)"))
    return message
