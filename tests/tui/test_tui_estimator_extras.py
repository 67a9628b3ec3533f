"""The estimator pane's "extras" field (issue 15): a projector, a draft, a host prompt cache, expert offload
and vLLM's --cpu-offload-gb typed as the engine's flags; the pane shows each extra as `vramtui estimate`
prints it, with the same numbers as the core, and marks a bad flag in place."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_tui import quiet_app
from test_tui_support import wait_for

from vramtui.core.demo.tinygguf import TinyModelSpec, TinyMoESpec, write_tiny_gguf, write_tiny_moe_gguf
from vramtui.core.demo.tinymmproj import write_tiny_mmproj
from vramtui.core.estimate.estimator import Settings, estimate
from vramtui.core.estimate.extras import describe
from vramtui.core.estimate.modelinfo import load_model_info
from vramtui.core.launch.profile import Profile
from vramtui.tui.panes.estimator import EstimatorPane


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("pane-extras")
    return {
        "model": write_tiny_gguf(folder / "model.gguf"),
        "draft": write_tiny_gguf(
            folder / "draft.gguf", TinyModelSpec(n_layer=2, n_embd=256, n_head=4, n_head_kv=4)
        ),
        "mmproj": write_tiny_mmproj(folder / "mmproj.gguf"),
        "moe": write_tiny_moe_gguf(folder / "moe.gguf", TinyMoESpec()),
    }


async def test_the_pane_shows_what_rides_along(files: dict[str, Path]) -> None:
    app = quiet_app()
    async with app.run_test(size=(200, 60)) as pilot:
        pane = app.query_one(EstimatorPane)
        pane.set_value("model", str(files["model"]))
        await wait_for(pilot, lambda: pane.estimate is not None)
        assert not pane.estimate.extras
        flags = f"--mmproj {files['mmproj']} --model-draft {files['draft']} --cache-ram 2048"
        pane.set_value("extras", flags)
        await wait_for(pilot, lambda: pane.estimate is not None and len(pane.estimate.extras) == 3)
        expected = estimate(
            load_model_info(files["model"]),
            Settings(
                device_bytes=24 * 1024**3,  # empty context and parallel: the engine's defaults
                mmproj=str(files["mmproj"]), model_draft=str(files["draft"]), cache_ram=2048,
            ),
        )  # fmt: skip
        assert pane.estimate.extras == expected.extras
        assert pane.estimate.total_bytes == expected.total_bytes
        shown = str(pane.query_one("#est-result").render())  # the pane's text, before it wraps on screen
        for entry in expected.extras:  # each line as `vramtui estimate` words it
            assert f"+ {entry['label']}: {describe(entry)}" in shown

        pane.set_value("extras", "--mmproj")
        await wait_for(pilot, lambda: "extras" in pane.errors)
        assert "needs a value" in pane.errors["extras"] and pane.estimate is None
        assert pane.query_one("#est-extras").has_class("-bad")
        pane.set_value("extras", "--n-cpu-moe lots")
        await wait_for(pilot, lambda: "whole number" in pane.errors.get("extras", ""))


async def test_expert_offload_and_cpu_offload_typed_as_flags(files: dict[str, Path]) -> None:
    app = quiet_app()
    async with app.run_test(size=(200, 60)) as pilot:
        pane = app.query_one(EstimatorPane)
        pane.set_value("model", str(files["moe"]))
        pane.set_value("extras", "--n-cpu-moe 2 -ot blk\\.5\\.ffn_up_exps=CPU")
        await wait_for(pilot, lambda: pane.estimate is not None and pane.estimate.expert_host_bytes > 0)
        expected = estimate(
            load_model_info(files["moe"]),
            Settings(
                device_bytes=24 * 1024**3, n_cpu_moe=2,  # empty context and parallel: the engine's defaults
                override_tensor=(r"blk\.5\.ffn_up_exps=CPU",),
            ),
        )  # fmt: skip
        assert pane.estimate.expert_host_bytes == expected.expert_host_bytes
        assert pane.estimate.weights_host_bytes == expected.weights_host_bytes
        assert "weights on the host" in str(pane.query_one("#est-result").render())


async def test_a_profile_fills_the_extras(files: dict[str, Path]) -> None:
    app = quiet_app()
    async with app.run_test(size=(200, 60)) as pilot:
        pane = app.query_one(EstimatorPane)
        profile = Profile(
            backend="llama.cpp",
            model=str(files["moe"]),
            params={"context": 2048, "n_cpu_moe": 3, "cpu_moe": "off", "lora": [str(files["draft"])]},
        )
        pane.prefill_from_profile(profile)
        assert pane.value("extras") == f"--lora {files['draft']} --n-cpu-moe 3"
        await wait_for(pilot, lambda: pane.estimate is not None and pane.estimate.context == 2048)


def test_a_vllm_profiles_switches_are_bare_flags_the_form_and_the_cli_read_back() -> None:
    """QA 10: a vLLM profile filled the extras field with "--enforce-eager True", which neither the field
    nor `estimate` reads back; vLLM's own --kv-cache-memory-bytes is taken there too."""
    from vramtui.core.estimate.inputs import split_flags
    from vramtui.tui.panes.estimator import _flags_of

    text = _flags_of({"kv_cache_memory": "256MiB", "enforce_eager": True})
    assert text == "--kv-cache-memory 256MiB --enforce-eager"
    assert split_flags(text) == {"kv_cache_memory": "256MiB", "enforce_eager": "on"}
    assert split_flags("--kv-cache-memory-bytes 1GiB") == {"kv_cache_memory": "1GiB"}
