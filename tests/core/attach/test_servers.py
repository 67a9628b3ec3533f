"""`vramtui ps` against several real servers at once on loopback: two llama-servers with different models
and contexts (one launched by vramtui, one by hand with its output thrown away) and a llama-cpp-python
server writing to a log file. The GPU shares come from NVML's per-process data in its real shapes (the
fake driver of tests/core/memory/test_nvml.py, given the real servers' PIDs).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from test_nvml import GIB, MIB, FakeDriver, FakeGpu

from vramtui.core.attach.servers import Server, snapshot
from vramtui.core.demo.tinygguf import TinyModelSpec
from vramtui.core.estimate.estimator import Settings
from vramtui.core.estimate.fitnow import fits_now
from vramtui.core.estimate.modelinfo import load_model_info
from vramtui.core.launch.launcher import ModelServer
from vramtui.core.launch.profile import Profile
from vramtui.core.memory.parts import HOST
from vramtui.core.memory.sampling import NvmlSource

pytestmark = pytest.mark.engine

SMALL = {"n_layer": 2, "n_embd": 256, "n_head": 4, "n_head_kv": 2, "n_ff": 512}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_answers(url: str, proc: subprocess.Popen[bytes], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"{proc.args} exited with {proc.returncode}")
        try:
            if httpx.get(url, timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    pytest.fail(f"{url} never answered")


def _kv_bytes(spec: TinyModelSpec, context: int) -> int:
    """K and V in f16 for every layer and cell: what llama.cpp prints for its KV buffer."""
    return 2 * spec.n_layer * context * spec.n_head_kv * spec.head_dim * 2


@pytest.fixture(scope="module")
def three_servers(
    llama_server_bin: Path, tiny_gguf: Path, make_gguf, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, object]]:
    folder = tmp_path_factory.mktemp("ps")
    small = make_gguf(**SMALL)
    port_a, port_c = _free_port(), _free_port()
    by_hand = subprocess.Popen(  # output thrown away: no log to read, its bill is the estimate's
        [str(llama_server_bin), "-m", str(tiny_gguf), "--port", str(port_a), "-c", "256", "-np", "2"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    log_c = (folder / "llama-cpp-python.log").open("wb")
    python_argv = [sys.executable, "-m", "llama_cpp.server", "--model", str(small), "--n_ctx", "512"]
    python_server = subprocess.Popen(  # output to a file: `server > log 2>&1`
        [*python_argv, "--port", str(port_c), "--host", "127.0.0.1"],
        stdout=log_c,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    profile = Profile(
        backend="llama.cpp", model=str(small), params={"context": 1024}, port=0, program=str(llama_server_bin)
    )
    launched = ModelServer(profile, log_dir=folder)
    try:
        launched.start()
        assert launched.wait_ready(120), [line.text for line in launched.lines][-5:]
        _wait_answers(f"http://127.0.0.1:{port_a}/health", by_hand)
        _wait_answers(f"http://127.0.0.1:{port_c}/v1/models", python_server)
        yield {
            "by_hand": by_hand.pid,
            "launched": launched.pid,
            "python": python_server.pid,
            "port_a": port_a,
            "port_c": port_c,
            "port_b": int(launched.base_url.rsplit(":", 1)[1]),
            "small": small,
            "tiny": tiny_gguf,
            "launched_log": str(launched.log_file),
        }
    finally:
        launched.stop()
        for proc in (by_hand, python_server):
            proc.kill()
            proc.wait(10)
        log_c.close()


def _ours(servers: list[Server], pids: dict[str, object]) -> dict[str, Server]:
    """Our three among whatever else runs on this machine (other tests' servers)."""
    by_pid = {server.pid: server for server in servers}
    found = {name: by_pid.get(pid) for name, pid in pids.items() if name in ("by_hand", "launched", "python")}
    missing = [name for name, server in found.items() if server is None]
    assert not missing, f"ps did not list {missing}: {sorted(by_pid)}"
    return found  # type: ignore[return-value]


def test_ps_finds_each_server_its_settings_port_and_bill(three_servers: dict[str, object]) -> None:
    shot = snapshot(nvml=NvmlSource(module=FakeDriver([], init_error=9).module()))  # no driver
    ours = _ours(shot.servers, three_servers)
    small, tiny = TinyModelSpec(**SMALL), TinyModelSpec()

    hand = ours["by_hand"]
    assert hand.engine == "llama.cpp" and hand.model == str(three_servers["tiny"])
    assert hand.params["context"] == 256 and hand.params["parallel"] == 2
    assert hand.ports == [three_servers["port_a"]]
    # its output went nowhere: the bill is the estimate for what its command line says, marked so
    assert hand.bill_source == "estimate" and hand.log is None
    # -c 256 -np 2: each slot's 128 padded to 256 cells, 512 in all (the engine prints 4.00 MiB)
    assert hand.bill is not None and hand.bill.get("kv_cache", HOST) == _kv_bytes(tiny, 512)

    launched = ours["launched"]
    assert launched.ports == [three_servers["port_b"]] and launched.params["context"] == 1024
    # found through the run log vramtui writes for it (its output goes to vramtui's pipe)
    assert launched.log == three_servers["launched_log"] and launched.bill_source == "log"
    assert launched.bill is not None and launched.bill.get("kv_cache", HOST) == _kv_bytes(small, 1024)

    python = ours["python"]
    assert python.engine == "llama-cpp-python" and python.params["context"] == 512
    assert python.ports == [three_servers["port_c"]] and python.bill_source == "log"
    assert python.bill is not None and python.bill.get("kv_cache", HOST) == _kv_bytes(small, 512)

    for server in ours.values():  # the tree's resident memory holds at least the model's weights
        assert server.bill is not None and server.host_bytes > server.bill.get("weights", HOST) > 0
    assert shot.gpus == [] and "NVML" in shot.gpu_status


def _driver(pids: dict[str, object], ours_too: int) -> FakeDriver:
    """Two cards: the llama-servers and a desktop on GPU 0, the llama-cpp-python server on GPU 1."""
    desktop = os.getpid()  # a process that is no model server (here: the test itself)
    card0 = FakeGpu(
        compute=[(pids["by_hand"], 3 * GIB), (pids["launched"], GIB)],  # type: ignore[list-item]
        graphics=[(desktop, 300 * MIB)],
        used=3 * GIB + GIB + 300 * MIB + ours_too,
    )
    card1 = FakeGpu(
        name="NVIDIA RTX A6000",
        uuid="GPU-bbbbbbbb-1111",
        total=48 * GIB,
        compute=[(pids["python"], 2 * GIB)],  # type: ignore[list-item]
        used=2 * GIB,
    )
    return FakeDriver([card0, card1])


def test_ps_splits_each_card_between_servers_other_processes_and_free(
    three_servers: dict[str, object],
) -> None:
    shot = snapshot(nvml=NvmlSource(module=_driver(three_servers, 0).module()), bills=False)
    ours = _ours(shot.servers, three_servers)
    card0, card1 = shot.gpus
    assert ours["by_hand"].gpu_bytes == {0: 3 * GIB} and ours["python"].gpu_bytes == {1: 2 * GIB}
    assert card0.servers == {three_servers["by_hand"]: 3 * GIB, three_servers["launched"]: GIB}
    assert card0.others == {os.getpid(): (card0.others[os.getpid()][0], 300 * MIB)}
    reserved = FakeGpu().reserved  # NVML's v2 figures: the driver's reserve is neither used nor free
    assert card0.free_bytes == 24 * GIB - (4 * GIB + 300 * MIB) - reserved
    assert card1.servers == {three_servers["python"]: 2 * GIB}
    assert card1.free_bytes == 46 * GIB - reserved
    data = json.loads(json.dumps(shot.to_dict()))
    row = next(gpu for gpu in data["gpus"] if gpu["index"] == 0)
    assert row["servers_mib"][str(three_servers["by_hand"])] == 3072.0
    assert row["others"][0]["mib"] == 300.0


def test_fits_answers_on_the_card_with_room_not_the_biggest_total(three_servers: dict[str, object]) -> None:
    # GPU 0 (24 GiB) is nearly full, GPU 1 (48 GiB) has room: the model goes on GPU 1
    nearly_full = 24 * GIB - (4 * GIB + 300 * MIB) - FakeGpu().reserved - 40 * MIB
    shot = snapshot(nvml=NvmlSource(module=_driver(three_servers, nearly_full).module()), bills=False)
    info = load_model_info(str(three_servers["tiny"]))
    settings = Settings.from_params({"context": 4096}, backend="llama.cpp", device_bytes=24 * GIB)
    first, second = fits_now(info, settings, shot)
    assert (
        first.fits and first.place.startswith("GPU 1") and first.free_bytes == 46 * GIB - FakeGpu().reserved
    )
    assert not second.fits and second.place.startswith("GPU 0") and second.free_bytes == 40 * MIB
    assert second.max_context is None or second.max_context < 4096


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vramtui", *args], capture_output=True, text=True, timeout=120, check=False
    )


def test_ps_cli_lists_them_as_text_and_json(three_servers: dict[str, object]) -> None:
    done = _cli("ps", "--json")
    assert done.returncode == 0, done.stderr
    listed = {server["pid"]: server for server in json.loads(done.stdout)["servers"]}
    launched = listed[three_servers["launched"]]
    assert launched["bill_source"] == "log" and launched["params"]["context"] == 1024
    assert launched["bill"]["host"]["kv_cache_bytes"] == _kv_bytes(TinyModelSpec(**SMALL), 1024)
    text = _cli("ps")
    assert text.returncode == 0 and f"{three_servers['python']}  llama-cpp-python" in text.stdout
    assert "bill (estimate)" in text.stdout and "bill (printed)" in text.stdout
    # `ps --fits --json` says the servers running now as `ps` does (QA 25 P1: their bill and log were null)
    fits = _cli("ps", "--fits", str(three_servers["tiny"]), "--ctx", "2048", "--json")
    now = {server["pid"]: server for server in json.loads(fits.stdout)["now"]["servers"]}
    assert now[three_servers["launched"]]["bill"] == launched["bill"]
    assert now[three_servers["launched"]]["log"] == launched["log"]


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("--watch", "0"), "--watch must be a positive number"),
        (("--fits",), "--fits needs a model"),
        (("model.gguf",), "only read with --fits"),
    ],
)
def test_ps_refuses_bad_input_in_one_line(args: tuple[str, ...], said: str) -> None:
    done = _cli("ps", *args)
    assert done.returncode == 2 and said in done.stderr and done.stderr.count("\n") == 1, done.stderr


def test_ps_fits_a_truncated_gguf_is_one_line(tmp_path: Path, tiny_gguf: Path) -> None:
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(tiny_gguf.read_bytes()[:5000])
    done = _cli("ps", "--fits", str(cut))
    assert done.returncode == 2 and "Traceback" not in done.stderr and done.stderr.count("\n") == 1


def test_ps_fits_on_a_machine_without_a_gpu_answers_for_the_host(tiny_gguf: Path) -> None:
    done = _cli("ps", "--fits", str(tiny_gguf), "--ctx", "2048", "--json")
    assert done.returncode == 0, done.stderr
    (answer,) = json.loads(done.stdout)["fits"]
    assert answer["place"] == "host (no GPU here)" and answer["fits"] and answer["context"] == 2048
    assert "--gpu-mem" not in done.stderr
    # QA 39 F11: a card size it does not use is said, not dropped without a word (estimate honours it)
    named = _cli("ps", "--fits", str(tiny_gguf), "--ctx", "2048", "--gpu-mem", "1MiB", "--json")
    assert json.loads(named.stdout)["fits"][0]["fits"] and named.returncode == 0
    assert "--gpu-mem 1MiB is not used here" in named.stderr and named.stderr.count("\n") == 1


def test_ps_fits_a_profile_within_its_memory_budget(tiny_gguf: Path, tmp_path: Path) -> None:
    """QA: a profile whose 1500 MiB budget `check` fails was said to fit (the machine's free RAM counted)."""
    profile = tmp_path / "p.toml"
    profile.write_text(
        f'backend = "llama.cpp"\nmodel = "{tiny_gguf}"\n[params]\ncontext = 262144\n'
        '[limits]\nmemory_budget = "1500MiB"\n',
        encoding="utf-8",
    )
    done = _cli("ps", "--fits", str(profile), "--json")
    assert done.returncode == 1, done.stdout + done.stderr
    (answer,) = json.loads(done.stdout)["fits"]
    assert not answer["fits"] and answer["free_mib"] <= 1500
    assert "memory_budget" in answer["room"] or any("memory_budget" in note for note in answer["notes"])


def test_ps_fits_takes_the_memory_budget_flag_as_estimate_does(tiny_gguf: Path, tmp_path: Path) -> None:
    """QA 37 F8: `ps --fits MODEL --memory-budget 100MiB` said FITS against the machine's free RAM (the flag
    was dropped), where `estimate` with the same flags and the profile's memory_budget said it does not."""
    flags = (str(tiny_gguf), "--ctx", "262144", "--memory-budget", "1500MiB")
    fits = _cli("ps", "--fits", *flags, "--json")
    assert fits.returncode == 1, fits.stdout + fits.stderr
    (answer,) = json.loads(fits.stdout)["fits"]
    assert not answer["fits"] and answer["free_mib"] <= 1500 and "memory_budget" in answer["room"]
    assert _cli("estimate", *flags).returncode == 1  # the same answer
    zero = _cli("ps", "--fits", str(tiny_gguf), "--memory-budget", "0GiB")  # QA 37 F12: no budget at all
    assert zero.returncode == 2 and "is no budget" in zero.stderr and zero.stderr.count("\n") == 1


def test_an_estimated_bill_is_calibrated_by_earlier_runs_as_attach_is(tiny_gguf: Path) -> None:
    """QA: `ps` billed a server by the bare estimate (compute 2.8 MiB) where `attach` used the machine's
    calibration (3.0): one estimate, one answer."""
    from vramtui.core.attach.cmdline import read_command
    from vramtui.core.attach.servers import estimated_bill
    from vramtui.core.estimate.calibrate import save_record

    command = read_command(["llama-server", "-m", str(tiny_gguf), "-c", "256"])
    server = Server(
        pid=1, engine="llama.cpp", pids=[1], command=command, model=str(tiny_gguf), params=command.params
    )
    bare = estimated_bill(server, None)
    assert bare is not None
    record = {
        "version": 1, "ready": True, "place": "host", "time": 1, "settings": {"flash_attn": None},
        "device": {"name": "cpu"}, "engine": {"backend": "llama.cpp", "build": "b"},
        "printed": {"bill": {"host": {"compute_buffer_bytes": 3 << 20}}}, "peak": {"bytes": 1 << 30},
        "estimate": {"compute_buffer_bytes": 2 << 20},
    }  # fmt: skip
    assert save_record(record, "earlier")
    calibrated = estimated_bill(server, None)
    assert calibrated is not None
    assert calibrated.get("compute", HOST) == pytest.approx(1.5 * bare.get("compute", HOST), rel=0.01)


def test_a_servers_settings_are_said_in_its_engines_own_terms() -> None:
    """QA 14: a vLLM server read "ctx 1024, slots 4, KV auto*" in `ps` and the memory pane's table."""
    from vramtui.core.attach.servers import Server

    vllm = Server(
        pid=1, engine="vllm", pids=[1], params={"context": 1024, "parallel": 4}, assumed={"kv_dtype": "auto"}
    )
    assert vllm.settings_line() == "max-model-len 1024, max-num-seqs 4, kv-cache-dtype auto*"
    llama = Server(pid=1, engine="llama.cpp", pids=[1], params={"context": 4096}, assumed={"parallel": 4})
    assert llama.settings_line() == "ctx 4096, slots 4*"


def test_a_servers_port_is_the_one_its_command_line_names() -> None:
    """QA 30 S8: a loading vLLM showed its engine's ZMQ port (:33243) for `--port 8023`: its API listens only
    once the model is loaded, its engine's ports before."""
    from vramtui.core.attach.cmdline import read_command

    command = read_command(["vllm", "serve", "/m", "--port", "8023"])
    loading = Server(pid=1, engine="vllm", pids=[1, 2], command=command, ports=[33243, 41011])
    assert loading.port == 8023 and loading.url == "http://127.0.0.1:8023"
    unnamed = Server(
        pid=1, engine="vllm", pids=[1], command=read_command(["vllm", "serve", "/m"]), ports=[8000]
    )
    assert unnamed.port == 8000
