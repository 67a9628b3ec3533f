"""A ctrl-c that Python swallows is raised again at the next safe point of the forward path.

CPython prints "Exception ignored in ..." and drops a KeyboardInterrupt raised while a weakref callback
or a finalizer runs (an import's module-lock callback is one): a `vramtui wizard --auto` that got its
ctrl-c there went on launching the next attempt (seen in tests/core/wizard/test_wizard_interrupt.py under
load). Real signals, a real weakref callback, in a child interpreter.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

CHILD = textwrap.dedent(
    """
    import os, signal, weakref
    from vramtui.core.launch import procs

    procs.install_exit_handlers()

    class Thing:
        pass

    def callback(_ref):
        os.kill(os.getpid(), signal.SIGINT)  # delivered while the callback runs: its raise is dropped
        sum(range(200_000))

    thing = Thing()
    ref = weakref.ref(thing, callback)
    del thing
    print("went on", flush=True)
    try:
        procs.raise_pending_interrupt()
    except KeyboardInterrupt:
        print("raised again", flush=True)
        procs.interrupt_handled()
    procs.raise_pending_interrupt()  # handled: nothing pending any more
    print("done", flush=True)
    """
)


def test_an_interrupt_dropped_in_a_weakref_callback_is_raised_at_the_next_safe_point() -> None:
    result = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=60)
    assert "Exception ignored" in result.stderr, result.stderr  # Python did drop the first one
    assert result.stdout.split() == ["went", "on", "raised", "again", "done"], (result.stdout, result.stderr)
