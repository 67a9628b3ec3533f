"""QA 26 D9: device_map naming a GPU that this Python's torch was not built for is refused before the
launch, from torch's own version.py (no import of torch), as a missing bitsandbytes is."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from vramtui.core.backends.transformers import torchbuild
from vramtui.core.demo.tinyhf import write_tiny_hf
from vramtui.core.launch.profile import profile_from_dict, runnable_refusal


def _fake_torch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cuda: str, hip: str) -> None:
    """A torch package whose version.py is written as torch's own builds write it."""
    package = tmp_path / "site" / "torch"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "version.py").write_text(
        "from typing import Optional\n\n"
        f"__version__ = '2.9.1+test'\ndebug = False\ncuda: Optional[str] = {cuda}\n"
        f"git_version = 'abc'\nhip: Optional[str] = {hip}\nxpu: Optional[str] = None\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    for name in [name for name in sys.modules if name == "torch" or name.startswith("torch.")]:
        monkeypatch.delitem(sys.modules, name)
    torchbuild.torch_build.cache_clear()


@pytest.fixture(autouse=True)
def _fresh_cache():
    torchbuild.torch_build.cache_clear()
    yield
    torchbuild.torch_build.cache_clear()


@pytest.mark.parametrize(
    ("cuda", "hip", "refused"),
    [("None", "None", True), ("'12.8'", "None", False), ("None", "'6.4.43482'", False)],
)
def test_cuda_is_refused_only_where_torch_was_built_without_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cuda: str, hip: str, refused: bool
) -> None:
    _fake_torch(tmp_path, monkeypatch, cuda, hip)
    problem = torchbuild.device_map_here("cuda:0")
    assert (problem is not None) == refused
    if refused:
        assert "torch 2.9.1+test is built without cuda support" in problem
        assert 'device_map = "cpu"' in problem
    for fine in ("auto", "cpu", "balanced", "sequential"):  # accelerate places those itself
        assert torchbuild.device_map_here(fine) is None


def test_this_machines_cpu_torch_refuses_a_cuda_profile_before_launch(tmp_path: Path) -> None:
    """The real torch here is a CPU build (constraints-cpu.txt): `check` refuses in one line, exit 2, where
    it launched and failed after a 5 s load before."""
    build = torchbuild.torch_build()
    if build is None or build[1] & {"cuda", "hip"}:
        pytest.skip("this Python's torch has a GPU build (or none): the CPU case is tested with a fake above")
    model = write_tiny_hf(tmp_path / "model")
    profile = profile_from_dict(
        {"backend": "transformers", "model": str(model), "params": {"device_map": "cuda:0"}}
    )
    refusal = runnable_refusal(profile)
    assert refusal is not None and refusal.param == "device_map"
    assert refusal.value is None  # the wizard's undo drops it: the runner's own placement (accelerate's auto)
    path = tmp_path / "p.toml"
    path.write_text(f'backend = "transformers"\nmodel = "{model}"\n[params]\ndevice_map = "cuda:0"\n')
    done = subprocess.run(
        [sys.executable, "-m", "vramtui", "check", str(path)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "built without cuda support" in done.stderr
    assert "Traceback" not in done.stderr
