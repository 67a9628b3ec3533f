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
