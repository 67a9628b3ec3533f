"""What `vramtui wizard --attach` prints for the restart-it-yourself way, line by line."""

from __future__ import annotations

import io

from vramtui.cli.wizard_attach import _print_change
from vramtui.core.attach.restart import ChangedCommand


def test_a_setting_left_to_the_engine_reads_as_its_default_and_the_wait_is_said() -> None:
    change = ChangedCommand(
        ["llama-server", "-m", "m.gguf", "--cache-type-k", "q4_0", "--cache-type-v", "q4_0"],
        {},
        {"kv_dtype": (None, "q4_0"), "context": (2048, 512)},
        ["stop PID 7 and start it again with the command below"],
    )
    out = io.StringIO()
    _print_change(change, out, "restart", 7, 90.0)
    text = out.getvalue()
    assert "kv_dtype (default) → q4_0, context 2048 → 512" in text
    assert "None" not in text
    assert text.splitlines()[-1] == "waiting up to 90 s for the restarted server (ctrl-c to stop)"
