"""The stress check's own launch of the final profile that does not come up says why, from its log's
diagnosis, and where the log is (it said "run the wizard first" right after a wizard that had run).
A real subprocess: a stand-in server that prints llama.cpp's KV failure and exits."""

from __future__ import annotations

from pathlib import Path

import pytest
from placeholder_files import EMPTY_GGUF

from vramtui.core.errors import VramtuiError
from vramtui.core.launch.profile import load_profile
from vramtui.core.wizard.stress import stress_check

DYING_SERVER = (
    "#!/bin/sh\n"
    "echo 'llama_model_loader: loaded meta data with 22 key-value pairs'\n"
    "echo 'ggml_backend_cpu_buffer_type_alloc_buffer: failed to allocate buffer of size 536870912'\n"
    "echo 'llama_init_from_model: failed to initialize the context: failed to allocate buffer for kv cache'\n"
    "exit 1\n"
)


def test_a_stress_launch_that_does_not_come_up_says_why_and_where_the_log_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VRAMTUI_DATA_DIR", str(tmp_path / "data"))
    program = tmp_path / "llama-server"
    program.write_text(DYING_SERVER)
    program.chmod(0o755)
    (tmp_path / "m.gguf").write_bytes(EMPTY_GGUF)
    profile_path = tmp_path / "p.toml"
    profile_path.write_text(f'backend = "llama.cpp"\nmodel = "m.gguf"\nport = 0\nprogram = "{program}"\n')
    with pytest.raises(VramtuiError) as raised:
        stress_check(load_profile(profile_path), requests=1)
    said = str(raised.value)
    assert said.startswith("the stress check's launch of the final profile did not come up: ")
    assert "KV" in said or "kv" in said, said  # the diagnosis of its log, not "run the wizard first"
    log = said.rsplit("; log: ", 1)[1]
    assert Path(log).is_file() and "failed to allocate buffer for kv cache" in Path(log).read_text()
