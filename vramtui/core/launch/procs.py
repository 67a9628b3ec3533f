"""Child processes that never outlive vramtui.

Three layers, because each covers a way of dying the others miss:
- every server starts as the leader of its own process group (a new session), so one signal reaches
  the server and everything it started;
- the child asks the kernel for SIGKILL when its parent dies (PR_SET_PDEATHSIG): that covers vramtui
  itself being SIGKILLed or crashing hard, where no Python code runs;
- atexit and SIGTERM/SIGHUP/SIGINT handlers kill every group still registered: quit, terminal closed,
  SSH dropped. A signal that ends vramtui without unwinding its stack (SIGHUP, SIGTERM) then runs the
  exit hooks (`add_exit_hook`: the wizard's record gets its end line) before it dies of that signal.

PR_SET_PDEATHSIG fires when the *thread* that forked exits, not the process. So every child is forked
from one long-lived spawner thread, never from a short-lived worker thread that would take it down.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import errno
import os
import resource
import signal
import socket
import subprocess
import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor

import psutil

PR_SET_PDEATHSIG = 1

_live_groups: set[int] = set()
# Re-entrant: the exit handlers take it from a signal handler, which may run on the main thread while
# that thread already holds it (a stop in progress); a plain Lock would hang the exit there for good.
_lock = threading.RLock()
_handlers_installed = False
_atexit_installed = False
_previous_handlers: dict[int, object] = {}
_pending_interrupt = False  # a SIGINT whose KeyboardInterrupt may have been swallowed
# What must still happen when a signal ends vramtui (see add_exit_hook); weak: a dropped owner is gone.
_exit_hooks: list[weakref.WeakMethod[Callable[[str], None]]] = []
# Said before the exit paths kill the groups (see add_stop_note): a server's log then shows the stop as ours
_stop_notes: list[weakref.WeakMethod[Callable[[], None]]] = []
_spawner: ThreadPoolExecutor | None = None


def _libc() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


def _child_setup(parent_pid: int, address_space_limit: int | None) -> Callable[[], None]:
    """What runs in the child between fork and exec (async-signal-safe enough: no locks, no imports)."""
    libc = _libc()

    def setup() -> None:
        if libc is not None:
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        # The parent may have died before prctl took effect: then nobody would send the signal.
        if os.getppid() != parent_pid:
            os._exit(137)
        # A crashing model server's core (the size of its weights) has no place in the user's folder,
        # nor has that of the debugger llama.cpp starts for a backtrace (under a budget it dies too).
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if address_space_limit is not None:
            resource.setrlimit(resource.RLIMIT_AS, (address_space_limit, address_space_limit))

    return setup


def _child_env(env: Mapping[str, str] | None, address_space_limit: int | None) -> dict[str, str] | None:
    """The child's environment under an address-space budget (a user's own setting of each is kept):
    - ggml's crash handler would start gdb, which cannot map itself there and fills the log with its own
      errors: ggml is told not to;
    - glibc keeps one malloc arena: each thread's own arena reserves 64 MiB of address space it never
      touches, which a machine with that much RAM would never miss, but a limit counts (llama-server
      0.3.36 on a tiny model came up from 256 MiB with them, from 192 with one; a server taking more
      threads for requests died at thread creation under a limit it had started under);
    - OpenBLAS runs one thread (below)."""
    if address_space_limit is None:
        return dict(env) if env is not None else None
    found = dict(env if env is not None else os.environ)
    found.setdefault("GGML_NO_BACKTRACE", "1")
    found.setdefault("MALLOC_ARENA_MAX", "1")
    # OpenBLAS (numpy's, scipy's: imported by transformers) maps a buffer per thread, and under a limit it
    # spins on the refused mmap instead of failing (QA 5: an 800 MiB budget hung a transformers runner for
    # its whole ready_timeout; with one thread it raises MemoryError at import in 5 s, said as the budget's)
    found.setdefault("OPENBLAS_NUM_THREADS", "1")
    return found


def _spawner_pool() -> ThreadPoolExecutor:
    global _spawner
    with _lock:
        if _spawner is None:
            _spawner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="vramtui-spawner")
        return _spawner


def spawn(
    argv: Sequence[str],
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    address_space_limit: int | None = None,
) -> subprocess.Popen[bytes]:
    """Start `argv` (a list, never a shell string) in its own process group, stdout+stderr merged.

    Raises FileNotFoundError / PermissionError like Popen when the program cannot be run.
    """
    install_exit_handlers()
    parent = os.getpid()

    def start() -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=_child_env(env, address_space_limit),
            cwd=cwd,
            start_new_session=True,  # own session, own process group: pgid == pid
            preexec_fn=_child_setup(parent, address_space_limit),
            close_fds=True,
        )

    proc = _spawner_pool().submit(start).result()
    with _lock:
        _live_groups.add(proc.pid)
    return proc


def group_alive(pgid: int) -> bool:
    """Is any process of the group still there (zombies included until reaped)?"""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def group_members(pgid: int) -> list[psutil.Process]:
    """The live (non-zombie) processes in a process group."""
    members = []
    for proc in psutil.process_iter(["pid", "status"]):
        try:
            if os.getpgid(proc.pid) == pgid and proc.info["status"] != psutil.STATUS_ZOMBIE:
                members.append(proc)
        except (ProcessLookupError, psutil.Error, OSError):
            continue
    return members


_signalled: set[int] = set()  # groups vramtui itself signalled: their deaths are our stops, not OOM kills


def _signal_group(pgid: int, sig: int) -> None:
    with _lock:
        _signalled.add(pgid)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def signalled_by_us(pgid: int) -> bool:
    """Did vramtui send this group a signal (a polite stop, a group kill, an exit handler)?"""
    with _lock:
        return pgid in _signalled


def stop_group(
    proc: subprocess.Popen[bytes], grace_s: float = 5.0, gone_timeout_s: float = 10.0
) -> int | None:
    """SIGTERM the whole group, wait `grace_s`, SIGKILL it, reap the leader, wait until no member is left.

    Returns the leader's exit status.
    """
    pgid = proc.pid
    if proc.poll() is None:
        _signal_group(pgid, signal.SIGTERM)
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            pass
    # Members that ignored SIGTERM, or children left behind by a leader that did exit.
    _signal_group(pgid, signal.SIGKILL)
    try:
        proc.wait(timeout=gone_timeout_s)
    except subprocess.TimeoutExpired:
        pass
    deadline = time.monotonic() + gone_timeout_s
    while group_members(pgid) and time.monotonic() < deadline:
        _signal_group(pgid, signal.SIGKILL)
        time.sleep(0.05)
    forget_group(pgid)
    return proc.returncode


def forget_group(pgid: int) -> None:
    with _lock:
        _live_groups.discard(pgid)


def live_groups() -> set[int]:
    with _lock:
        return set(_live_groups)


def kill_all_groups() -> None:
    """Kill every process group we started and have not stopped yet (exit paths)."""
    if live_groups():
        _say_stops()
    for pgid in live_groups():
        _signal_group(pgid, signal.SIGTERM)
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline and any(group_alive(g) and group_members(g) for g in live_groups()):
        time.sleep(0.05)
    for pgid in live_groups():
        _signal_group(pgid, signal.SIGKILL)
        forget_group(pgid)


def add_stop_note(method: Callable[[], None]) -> None:
    """Call `method()` when an exit path (a signal to vramtui, its exit) is about to kill the groups, before
    the kill: a server's run log gets vramtui's stop line ahead of its death (QA 38 F11: a SIGTERM to
    `vramtui run` left a log that `diagnose` read as a stop by someone else). A bound method, held weakly."""
    with _lock:
        _stop_notes.append(weakref.WeakMethod(method))  # type: ignore[arg-type]


def remove_stop_note(method: Callable[[], None]) -> None:
    with _lock:
        _stop_notes[:] = [ref for ref in _stop_notes if ref() is not None and ref() != method]


def _say_stops() -> None:
    with _lock:
        notes = [ref() for ref in _stop_notes]
    for note in notes:
        if note is not None:
            with contextlib.suppress(Exception):  # a note must never keep the servers from being stopped
                note()


def add_exit_hook(method: Callable[[str], None]) -> None:
    """Call `method(signal name)` when a signal ends vramtui without unwinding its stack (its `finally`
    blocks never run then): after our servers are stopped, before it dies. A bound method, held weakly."""
    with _lock:
        _exit_hooks.append(weakref.WeakMethod(method))  # type: ignore[arg-type]


def remove_exit_hook(method: Callable[[str], None]) -> None:
    with _lock:
        _exit_hooks[:] = [ref for ref in _exit_hooks if ref() is not None and ref() != method]


def _run_exit_hooks(signum: int) -> None:
    with _lock:
        hooks = [ref() for ref in _exit_hooks]
        _exit_hooks.clear()
    for hook in hooks:
        if hook is not None:
            with contextlib.suppress(Exception):  # one failing hook must not keep the others from running
                hook(signal.Signals(signum).name)


def _on_signal(signum: int, frame: object) -> None:
    global _pending_interrupt
    kill_all_groups()
    previous = _previous_handlers.get(signum)
    if callable(previous):
        _pending_interrupt = _pending_interrupt or signum == signal.SIGINT
        previous(signum, frame)  # SIGINT's raises KeyboardInterrupt: the stack unwinds, finally runs
        return
    if previous == signal.SIG_IGN:
        return
    _run_exit_hooks(signum)
    # Default action: die of the same signal, as the caller expects.
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def raise_pending_interrupt() -> None:
    """Raise again a ctrl-c that Python swallowed: a KeyboardInterrupt raised while a weakref callback or
    a finalizer runs (an import's module-lock callback, a `__del__`) is printed as "Exception ignored"
    and lost, and a `--auto` wizard went on launching. Called at the safe points of the forward path (a
    launch, a wait for ready), in the main thread only; the CLI's handler of the interrupt clears it."""
    if _pending_interrupt and threading.current_thread() is threading.main_thread():
        raise KeyboardInterrupt


def interrupt_handled() -> None:
    """The interrupt reached its handler: nothing is pending any more."""
    global _pending_interrupt
    _pending_interrupt = False


def install_exit_handlers() -> None:
    """atexit + SIGTERM/SIGHUP/SIGINT: kill our groups, then do what was going to happen anyway.

    Signal handlers can only be set from the main thread: the app should call this once at startup
    (spawn calls it too; from a worker thread it sets atexit only and tries the signals again later).
    """
    global _atexit_installed, _handlers_installed
    with _lock:
        if not _atexit_installed:
            _atexit_installed = True
            atexit.register(kill_all_groups)
        if _handlers_installed or threading.current_thread() is not threading.main_thread():
            return
        _handlers_installed = True
    for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        try:
            previous = signal.getsignal(signum)
            if signum == signal.SIGINT and previous == signal.SIG_IGN:
                # a background job's SIGINT, ignored by the shell that started it: it stays ignored, its
                # servers included (QA: `kill -INT` of a background wizard killed its server and the run
                # went on, reporting the server's failure). A closed terminal's SIGHUP is still handled.
                continue
            _previous_handlers[signum] = previous
            signal.signal(signum, _on_signal)
        except (ValueError, OSError):
            continue


# --- memory of a process tree -------------------------------------------------------------------------


def tree_pids(pid: int) -> list[int]:
    """The process and all its descendants that still exist."""
    try:
        root = psutil.Process(pid)
        return [root.pid, *(child.pid for child in root.children(recursive=True))]
    except psutil.Error:
        return []


def tree_rss(pid: int) -> int:
    """Resident bytes of a process and its descendants (0 when gone)."""
    return pids_rss(tree_pids(pid))


def pids_rss(pids: list[int]) -> int:
    """Resident bytes of these processes (the gone and the zombies count 0)."""
    total = 0
    for member in pids:
        try:
            proc = psutil.Process(member)
            if proc.status() == psutil.STATUS_ZOMBIE:
                continue
            total += proc.memory_info().rss
        except psutil.Error:
            continue
    return total


def process_name(pid: int) -> str:
    """The process's name, or "?" when it is gone or hidden."""
    try:
        return psutil.Process(pid).name()
    except psutil.Error:
        return "?"


# --- ports ------------------------------------------------------------------------------------------


def free_port(host: str = "127.0.0.1") -> int:
    """A port nobody listens on now (the kernel's pick); one line when the host is none to listen on."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, 0))
        except OSError as error:  # a name that does not resolve, an address this machine does not have
            from vramtui.core.errors import VramtuiError

            reason = error.strerror or str(error)
            raise VramtuiError(
                f"host {host!r}: {reason}: a server cannot listen there (give an address of this machine, "
                "127.0.0.1 or 0.0.0.0)"
            ) from None
        return int(sock.getsockname()[1])


def port_in_use(host: str, port: int) -> bool:
    """True when something already listens on host:port (TIME_WAIT leftovers do not count)."""
    bind_host = "0.0.0.0" if host in {"", "0.0.0.0", "*"} else host
    family = socket.AF_INET6 if ":" in bind_host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((bind_host, port))
        except OSError as error:
            return error.errno == errno.EADDRINUSE
    return False


def port_holder(port: int) -> str | None:
    """'pid 1234 (python)' of the process listening on `port`, when the system lets us see it."""
    try:
        connections = psutil.net_connections(kind="inet")
    except (psutil.Error, OSError):
        return None
    for conn in connections:
        if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port and conn.pid:
            try:
                name = psutil.Process(conn.pid).name()
            except psutil.Error:
                name = "?"
            return f"pid {conn.pid} ({name})"
    return None
