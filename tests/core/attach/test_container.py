"""The container a host PID runs in, read from real /proc/PID/cgroup line shapes."""

from __future__ import annotations

from pathlib import Path

import pytest

from vramtui.core.attach.container import container_from_cgroup, container_of

ID = "3f2a9c0d1e4b5a6978c0d1e2f3a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6"

SHAPES = [
    # cgroup v1 under docker: one line per controller.
    (f"12:memory:/docker/{ID}\n11:cpu,cpuacct:/docker/{ID}\n1:name=systemd:/docker/{ID}\n", "docker"),
    (f"0::/system.slice/docker-{ID}.scope\n", "docker"),  # cgroup v2, systemd driver
    (f"0::/docker/{ID}\n", "docker"),  # cgroup v2, cgroupfs driver
    (
        "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1b2c3d4e_5f60_4718_"
        f"9293_a4b5c6d7e8f9.slice/cri-containerd-{ID}.scope\n",
        "containerd",
    ),
    (f"11:cpu:/kubepods/besteffort/pod1b2c3d4e-5f60-4718-9293-a4b5c6d7e8f9/{ID}\n", "kubernetes"),
    (f"0::/machine.slice/libpod-{ID}.scope/container\n", "podman"),
    (f"0::/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-{ID}.scope\n", "podman"),
    (f"0::/kubepods.slice/kubepods-burstable.slice/crio-{ID}.scope\n", "cri-o"),
]


@pytest.mark.parametrize(("text", "runtime"), SHAPES)
def test_each_runtimes_cgroup_path_names_the_container(text: str, runtime: str) -> None:
    container = container_from_cgroup(text)
    assert container is not None
    assert container.runtime == runtime
    assert container.id == ID
    assert container.short_id == ID[:12]
    assert container.to_dict() == {"runtime": runtime, "id": ID[:12], "full_id": ID}


@pytest.mark.parametrize(
    "text",
    [
        "0::/user.slice/user-1000.slice/session-2.scope\n",  # a login session on the host
        "0::/\n",  # inside the container's own cgroup namespace: nothing to see
        "12:memory:/system.slice/ssh.service\n",
        f"0::/machine.slice/libpod-conmon-{ID}.scope\n",  # podman's monitor, not the container
        "",
    ],
)
def test_a_host_process_is_in_no_container(text: str) -> None:
    assert container_from_cgroup(text) is None


def test_container_of_reads_the_proc_file(tmp_path: Path) -> None:
    (tmp_path / "4242").mkdir()
    (tmp_path / "4242" / "cgroup").write_text(f"0::/system.slice/docker-{ID}.scope\n")
    found = container_of(4242, proc=tmp_path)
    assert found is not None and found.runtime == "docker"
    assert container_of(4243, proc=tmp_path) is None  # gone: no container, no error


def test_this_test_process_is_read_without_error() -> None:
    # Whatever this machine is (host or container), reading our own cgroup never raises.
    import os

    found = container_of(os.getpid())
    assert found is None or len(found.id) == 64


RECORDED = Path(__file__).resolve().parents[2] / "data" / "attach" / "cgroups.jsonl"


def _recorded() -> list[dict]:
    import json

    return [json.loads(line) for line in RECORDED.read_text().splitlines() if line.strip()]


@pytest.mark.parametrize("record", _recorded(), ids=lambda r: r["source"].split("github.com/")[1])
def test_recorded_cgroup_printouts_name_their_container(record: dict) -> None:
    """Real /proc/PID/cgroup contents from public reports (docker's and podman's cgroup v1 and v2
    shapes, containerd under Kubernetes, dockerd itself on the host)."""
    found = container_from_cgroup(record["cgroup"])
    if record["runtime"] is None:
        assert found is None
        return
    assert found is not None and (found.runtime, found.id) == (record["runtime"], record["full_id"])
    assert found.label == f"{record['runtime']} {record['full_id'][:12]}"  # no runtime CLI asked here


def test_container_names_reads_each_cgroup_once_and_names_without_the_cli(tmp_path: Path) -> None:
    from vramtui.core.attach.container import ContainerNames

    docker = next(r for r in _recorded() if r["runtime"] == "docker")
    (tmp_path / "10").mkdir()
    (tmp_path / "10" / "cgroup").write_text(docker["cgroup"])
    names = ContainerNames(proc=tmp_path, ask_names=False)
    first = names.of(10)
    assert first is not None and first.runtime == "docker" and first.name is None
    (tmp_path / "10" / "cgroup").write_text("0::/user.slice/user-1000.slice/session-2.scope\n")
    assert names.of(10) == first  # read once per PID: a repaint costs no file read
    assert names.of(11) is None  # no such process: on no container, no error


def test_attach_json_names_each_gpu_process_container(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`attach --json`'s gpu_processes and container: NVML's host PIDs (through vramtui's NVML code
    on a pynvml-shaped driver) mapped through recorded docker and podman cgroups."""
    from test_nvml import GIB, MIB, FakeDriver, FakeGpu

    from vramtui.core.attach import container as container_module
    from vramtui.core.attach.target import Target
    from vramtui.core.attach.watch import Attached
    from vramtui.core.memory.sampling import NvmlSource

    docker = next(r for r in _recorded() if "ctrsploit" in r["source"])  # v1 cgroupfs + the v2 line
    podman = next(r for r in _recorded() if "podman/issues/10602" in r["source"])
    for pid, record in ((4242, docker), (5000, podman)):
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "cgroup").write_text(record["cgroup"])
    monkeypatch.setattr(container_module, "PROC", tmp_path)
    gpu = FakeGpu(compute=[(4242, 9 * GIB), (5000, 512 * MIB), (31337, 64 * MIB)])
    sample = NvmlSource(FakeDriver([gpu]).module(), cuda_visible_devices=None).sample()
    target = Target("http://127.0.0.1:8080", "url", pid=4242, url="http://127.0.0.1:8080")
    report = Attached(target, None, {}, [sample], None).to_dict()
    rows = {row["pid"]: row for row in report["gpu_processes"]}
    assert rows[4242]["container"] == {
        "runtime": "docker",
        "id": docker["full_id"][:12],
        "full_id": docker["full_id"],
    }
    assert (
        rows[5000]["container"]["runtime"] == "podman"
        and rows[5000]["container"]["full_id"] == podman["full_id"]
    )
    assert rows[31337]["container"] is None  # no cgroup to read: on the host as far as vramtui can see
    assert report["container"]["full_id"] == docker["full_id"]  # the attached process's own
