"""Issue 22 #29: `wizard --save` onto the profile it reads, and what a saved profile keeps."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

from placeholder_files import EMPTY_GGUF

from vramtui.core.launch.profile import load_profile

SOURCE = """# my bring-up profile: the comments are mine
backend = "llama.cpp"
model = "models/m.gguf"   # relative to this file
program = "./bin/llama-server"
port = 0
ready_timeout = 60
[params]
context = 512
"""


def _folder(tmp_path: Path) -> Path:
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "m.gguf").write_bytes(EMPTY_GGUF)
    (tmp_path / "bin").mkdir()
    server = tmp_path / "bin" / "llama-server"
    server.write_text("#!/bin/sh\nexit 1\n")
    server.chmod(0o755)
    (tmp_path / "p.toml").write_text(SOURCE, encoding="utf-8")
    return tmp_path / "p.toml"


def test_save_onto_the_source_profile_is_refused_without_force(tmp_path: Path) -> None:
    source = _folder(tmp_path)
    for target in (str(source), str(tmp_path / "." / "p.toml")):
        done = subprocess.run(
            [sys.executable, "-m", "vramtui", "wizard", str(source), "--auto", "--save", target],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 2, done
        assert done.stderr.strip().splitlines() == [
            f"vramtui: --save {target} is the profile the wizard reads: saving would drop its comments; "
            "save to another file, or add --force to overwrite it"
        ]
        assert done.stdout == ""  # nothing launched, no record opened
    assert source.read_text(encoding="utf-8") == SOURCE


def test_save_onto_another_file_that_is_there_is_refused_without_force(tmp_path: Path) -> None:
    """QA 23 D1: `--save keep.toml` replaced another profile, its notes and settings, without a word."""
    source = _folder(tmp_path)
    other = tmp_path / "keep.toml"
    other.write_text(SOURCE + "# my notes\n", encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "vramtui", "wizard", str(source), "--auto", "--save", str(other)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2 and done.stdout == "", done
    assert done.stderr.strip().splitlines() == [
        f"vramtui: --save {other} is there already: save to another file, or add --force to replace it"
    ]
    assert other.read_text(encoding="utf-8").endswith("# my notes\n")
    # with --force it goes ahead: the wizard runs (its server fails here), and no refusal is said
    forced = subprocess.run(
        [sys.executable, "-m", "vramtui", "wizard", str(source), "--auto", "--save", str(other), "--force"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert "is there already" not in forced.stderr and forced.stdout, forced


def test_a_saved_profile_keeps_relative_paths_as_written_and_whole_numbers(tmp_path: Path) -> None:
    source = _folder(tmp_path)
    profile = load_profile(source)
    assert profile.model == str(tmp_path / "models" / "m.gguf")  # resolved to launch
    again = profile.with_param("context", 256).save(tmp_path / "saved.toml")
    data = tomllib.loads(again.read_text(encoding="utf-8"))
    assert data["model"] == "models/m.gguf" and data["program"] == "./bin/llama-server"
    assert data["ready_timeout"] == 60 and isinstance(data["ready_timeout"], int)  # not 60.0
    assert data["params"] == {"context": 256}
    reread = load_profile(again)
    assert (reread.model, reread.program) == (profile.model, profile.program)
    # saved in another folder: still relative, to where it now lies
    elsewhere = profile.save(tmp_path / "sub" / "p.toml")
    data = tomllib.loads(elsewhere.read_text(encoding="utf-8"))
    assert data["model"] == "../models/m.gguf" and data["program"] == "../bin/llama-server"
    assert load_profile(elsewhere).model == profile.model
    # a model the wizard changed to another file is written whole
    other = tmp_path / "models" / "m-q4_0.gguf"
    other.write_bytes(EMPTY_GGUF)
    changed = profile.with_changes(model=str(other)).save(tmp_path / "changed.toml")
    assert tomllib.loads(changed.read_text(encoding="utf-8"))["model"] == str(other)


def test_the_wizard_says_it_measures_the_engine_before_it_does(tmp_path: Path) -> None:
    """QA 17 F11: with a slow engine the CLI wizard printed nothing for a minute and a half while it
    measured the engine's own memory; the app's wizard says so, and now the CLI's too (and only then)."""
    import io
    import shutil

    from vramtui.cli.wizard import _say_measuring
    from vramtui.core.launch.profile import Profile

    program = tmp_path / "llama-server"  # a binary this fresh data dir has never measured
    shutil.copy("/bin/true", program)
    profile = Profile(backend="llama.cpp", model="m.gguf", program=str(program), memory_budget=600 << 20)
    out = io.StringIO()
    _say_measuring(profile, out)
    assert out.getvalue().startswith("measuring llama-server's own idle memory (once per binary)")
    unbudgeted = io.StringIO()  # no budget: nothing to measure, nothing said
    _say_measuring(profile.with_changes(memory_budget=None), unbudgeted)
    assert unbudgeted.getvalue() == ""
