"""What the vLLM engine tests share: a tiny checkpoint, a profile for the real vLLM, and the process check.

Every run gets its own temp and cache folders (a cold torch.compile writes 155 MB into $TMPDIR), no hub,
float32 and eager mode (tests/engines/vllm_capture.py says why), and an explicit KV size unless a test
asks otherwise: on these VMs NUMA node 0 reports far less memory than the machine has.
"""

from __future__ import annotations

from pathlib import Path

import psutil
from vllm_capture import engine_env

from vramtui.core.launch.profile import Profile

READY_TIMEOUT_S = 300.0


def vllm_profile(
    program: Path,
    model: Path | str,
    work: Path,
    budget: int | None = None,
    one_process: bool = False,
    **params: object,
) -> Profile:
    """A profile for the real vLLM: its program, loopback, a free port, eager float32, 256 MiB of KV.

    `one_process`: the worker runs inside the engine core (--distributed-executor-backend uni): two
    processes import vLLM instead of three, about 20 s less to each start on 2 cores. The engine's words
    are the same; only the tests of the process tree need its three processes."""
    chosen: dict[str, object] = {"enforce_eager": True, "dtype": "float32", "kv_cache_memory": "256MiB"}
    chosen.update(params)
    chosen = {name: value for name, value in chosen.items() if value is not None}
    return Profile(
        backend="vllm",
        model=str(model),
        program=str(program),
        params=chosen,
        port=0,
        memory_budget=budget,
        env=engine_env(work),
        extra_args=("--distributed-executor-backend", "uni") if one_process else (),
        ready_timeout=READY_TIMEOUT_S,
        name="tiny-qwen2",
    )


def vllm_processes(model: Path | str) -> list[psutil.Process]:
    """Every live process of a vLLM serving `model` (the API server names it; its engine and worker are
    called VLLM::EngineCore and VLLM::Worker, below an API server that names the model, or orphaned after
    this session began). A vLLM someone else runs on the machine is not a leftover of these tests (session
    30: three false failures while vLLM ran by hand beside the suite). Its environment cannot tell: vLLM's
    setproctitle wipes /proc/PID/environ."""
    found = []
    for proc in psutil.process_iter(["cmdline", "name", "status"]):
        if proc.info["status"] == psutil.STATUS_ZOMBIE:
            continue
        words = " ".join(proc.info["cmdline"] or [])
        if str(model) in words or ((proc.info["name"] or "").startswith("VLLM::") and _ours(proc, model)):
            found.append(proc)
    return found


_SESSION_START = psutil.Process().create_time()


def _ours(proc: psutil.Process, model: Path | str) -> bool:
    """Is the vLLM engine process `proc` one of this model's, or an orphan from this session? True where
    that cannot be told."""
    try:
        if any(str(model) in " ".join(parent.cmdline()) for parent in proc.parents()):
            return True
        return proc.ppid() == 1 and proc.create_time() >= _SESSION_START
    except (psutil.AccessDenied, psutil.NoSuchProcess, psutil.ZombieProcess):
        return True
