"""Wizard logic without an engine: ladders, log facts, proposals and verification.

Runs are replayed from logs that llama-cpp-python really printed on this machine (a 4-layer, 512-wide
tiny GGUF under a 1500 MiB address-space cap); the real engine runs in test_wizard_engine.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from placeholder_files import EMPTY_GGUF

from vramtui.core.backends import get_backend
from vramtui.core.demo.tinygguf import TinyModelSpec, write_tiny_gguf
from vramtui.core.launch.profile import Profile
from vramtui.core.memory.parts import HOST
from vramtui.core.units import MIB
from vramtui.core.wizard.budget import needed_bytes
from vramtui.core.wizard.ladders import NOT_MEMORY, Rung, ladder_for, quantized_v_needs_flash_attn
from vramtui.core.wizard.observe import observe
from vramtui.core.wizard.steprecord import open_session
from vramtui.core.wizard.wizard import (
    SKIP,
    Proposal,
    Wizard,
    _nice_below,
    rising_floor,
    sibling_files,
)

# The arithmetic here is on replayed runs: the engine share is its backend's figure, not measured.
pytestmark = pytest.mark.usefixtures("assumed_engine_share")

# Real lines, llama-cpp-python 0.3.36: context 262144 under a 1500 MiB cap.

KV_FAILURE_LOG = """\
print_info: file type   = F16
load_tensors:   CPU_Mapped model buffer size =    20.52 MiB
llama_context: n_ctx                 = {n_ctx}
llama_context: flash_attn            = disabled
llama_context:        CPU  output buffer size =     0.00 MiB
ggml_aligned_malloc: insufficient memory (attempted to allocate {kv_mib:.2f} MB)
ggml_backend_cpu_buffer_type_alloc_buffer: failed to allocate buffer of size {kv_bytes}
alloc_tensor_range: failed to allocate CPU buffer of size {kv_bytes}
llama_init_from_model: failed to initialize the context: failed to allocate buffer for kv cache
ValueError: Failed to create llama_context
"""
# Real lines: context 32768, same model and cap: it comes up.
READY_LOG = """\
print_info: file type   = F16
load_tensors:   CPU_Mapped model buffer size =    20.52 MiB
llama_context: n_ctx                 = {n_ctx}
llama_context: flash_attn            = disabled
llama_context:        CPU  output buffer size =     0.00 MiB
llama_kv_cache:        CPU KV buffer size =   {kv_mib:.2f} MiB
llama_kv_cache: size =  {kv_mib:.2f} MiB ( {n_ctx} cells,   4 layers,  1/1 seqs), K (f16):  128.00 MiB, V (f16):  128.00 MiB
sched_reserve:        CPU compute buffer size =   583.01 MiB
INFO:     Uvicorn running on http://127.0.0.1:46345 (Press CTRL+C to quit)
"""
WEIGHTS_FAILURE_LOG = """\
print_info: file type   = F16
ggml_aligned_malloc: insufficient memory (attempted to allocate 589.20 MB)
ggml_backend_cpu_buffer_type_alloc_buffer: failed to allocate buffer of size 617824256
alloc_tensor_range: failed to allocate CPU buffer of size 617824256
llama_model_load: error loading model: unable to allocate CPU buffer
llama_model_load_from_file_impl: failed to load model
"""


@pytest.fixture(scope="module")
def demo_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_gguf(tmp_path_factory.mktemp("wizard-models") / "tiny-f16.gguf", TinyModelSpec())


class ReplayedRuns:
    """A runner that answers like the real engine did, from the recorded logs, by context size.

    `honours_context=False` replays an engine that ignores the context setting (always 262144)."""

    def __init__(self, folder: Path, fits_up_to: int = 32768, honours_context: bool = True) -> None:
        self.folder = folder
        self.fits_up_to = fits_up_to
        self.honours_context = honours_context
        self.profiles: list[Profile] = []

    def __call__(self, profile: Profile) -> Any:
        self.profiles.append(profile)
        n_ctx = int(profile.params.get("context", 2048)) if self.honours_context else 262144  # type: ignore[call-overload]
        kv_bytes = n_ctx * 8192
        log = self.folder / f"run{len(self.profiles)}.log"
        fits = n_ctx <= self.fits_up_to
        template = READY_LOG if fits else KV_FAILURE_LOG
        log.write_text(template.format(n_ctx=n_ctx, kv_mib=kv_bytes / MIB, kv_bytes=kv_bytes))
        return SimpleNamespace(
            ready=fits,
            stage="inference" if fits else "kv_cache",
            failure_stage=None if fits else "kv_cache",
            failure=None if fits else "host_oom",
            diagnosis=None,
            smoke=SimpleNamespace(ok=True) if fits else None,
            peak_mib=1188.7 if fits else 71.0,
            resident_mib=1188.7 if fits else 71.0,
            load_time_s=0.8 if fits else None,
            ttft_s=0.05 if fits else None,
            tokens_per_s=290.0 if fits else None,
            log_file=str(log),
            command=["python", "-m", "llama_cpp.server", "--n_ctx", str(n_ctx)],
            warnings=[],
            message="",
        )


def _demo_profile(model: Path, **changes: Any) -> Profile:
    profile = Profile(
        backend="llama-cpp-python",
        model=str(model),
        params={"context": 262144},
        memory_budget=1500 * MIB,
        port=0,
    )
    return profile.with_changes(**changes) if changes else profile


def test_ladders_follow_the_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("vramtui.core.backends.base._importable", lambda module: True)  # bitsandbytes here
    kv_python = [r.param for r in ladder_for("kv_cache", "llama-cpp-python")]
    # Its server runs one sequence: no parallel rung; no mem_share (vLLM only); gpu layers last.
    assert kv_python == ["kv_dtype", "context", "flash_attn", "gpu_layers"]
    # vLLM's attention backend changes neither its paged KV cache nor its profile run: no such rung. A
    # cache set outright in bytes comes down first (it frees nothing else: QA 29 Q6).
    assert [r.param for r in ladder_for("kv_cache", "vllm")] == [
        "kv_cache_memory",
        "parallel",
        "kv_dtype",
        "context",
        "mem_share",
    ]
    weights_tf = [r.param for r in ladder_for("load_weights", "transformers")]
    assert weights_tf[:3] == ["quant", "model", "double_quant"]
    assert ladder_for("load_weights", "transformers")[2].move == "advice"  # said, not applied
    assert [r.param for r in ladder_for("inference", "llama.cpp")] == [
        "input_length",
        "batch",
        "ubatch",
        "parallel",
        "chunking",
    ]
    assert ladder_for("download", "llama.cpp") == []
    offload = ladder_for("kv_cache", "llama.cpp")[-1]
    assert offload.param == "gpu_layers" and "slower" in offload.cost
    assert offload.knob(get_backend("llama.cpp")) == "--n-gpu-layers"
    assert quantized_v_needs_flash_attn("llama-cpp-python", "q8_0")
    assert not quantized_v_needs_flash_attn("llama-cpp-python", "f16")
    assert not quantized_v_needs_flash_attn("vllm", "fp8")


def _llama_run(**fields: object) -> SimpleNamespace:
    """A check of a llama-server run (the backend it names says whose words its echoed settings are)."""
    return SimpleNamespace(backend="llama.cpp", diagnosis=None, smoke=None, **fields)


def _read_log(tmp_path: Path, text: str) -> tuple[dict[str, int], dict[str, str]]:
    # The sizes come from the log diagnosis of the run's log file, the settings from the engine's echo.
    log = tmp_path / "run.log"
    log.write_text(text)
    obs = observe(_llama_run(ready=False, log_file=str(log)))
    return obs.figures, obs.facts


def test_log_facts_from_real_llama_cpp_lines(tmp_path: Path) -> None:
    figures, facts = _read_log(
        tmp_path, KV_FAILURE_LOG.format(n_ctx=262144, kv_mib=2048.0, kv_bytes=2147483648)
    )
    assert figures == {
        "model_buffer": round(20.52 * MIB),
        "failed_alloc": 2147483648,
    }  # rounded, as the diagnosis reads it
    assert facts == {"file_type": "f16", "n_ctx": "262144"}  # flash attention: the diagnosis' figure
    figures, facts = _read_log(tmp_path, READY_LOG.format(n_ctx=32768, kv_mib=256.0))
    assert figures["kv_buffer"] == 256 * MIB and figures["compute_buffer"] == round(583.01 * MIB)
    assert facts["kv_type"] == "f16" and facts["n_ctx"] == "32768"
    # The destructor's "compute buffer size is ..." line must not count twice.
    figures, _ = _read_log(
        tmp_path, "~llama_context:        CPU compute buffer size is 265.0449 MiB, matches expectation"
    )
    assert figures == {}


def test_nice_context_values_and_sibling_files(tmp_path: Path) -> None:
    assert _nice_below(262144)[:3] == [196608, 131072, 98304]
    assert _nice_below(1024) == [768, 512]
    for name in ("m-f16.gguf", "m-q8_0.gguf", "m-Q4_0.gguf", "other-q4_0.gguf", "m-q8_0.gguf.part"):
        (tmp_path / name).write_bytes(EMPTY_GGUF)
    found = sibling_files(str(tmp_path / "m-f16.gguf"))
    assert [quant for quant, _ in found] == ["q8_0", "q4_0"]
    assert sibling_files(str(tmp_path / "nothing.gguf")) == []


def test_kv_failure_gets_one_change_that_fits(demo_model: Path, tmp_path: Path) -> None:
    runs = ReplayedRuns(tmp_path)
    wizard = Wizard(_demo_profile(demo_model), record_path=tmp_path / "rec.jsonl", auto=True, runner=runs)
    first = wizard.start()
    assert first.outcome == "first_run" and not first.observation.works  # type: ignore[union-attr]
    proposal = wizard.propose()
    assert proposal is not None
    # The estimator (KV 8 KiB/token, compute ~16 KiB/token without flash attention) says 32768 fits
    # in what the process leaves of 1500 MiB; a blind halving would try 131072 first.
    assert (proposal.param, proposal.from_, proposal.to) == ("context", 262144, 32768)
    assert "2048 MiB" in proposal.why and "fits" in proposal.why and proposal.predicted_mib < 1500
    result = wizard.run(max_steps=4)
    assert result.success and result.relaunches == 1
    assert result.final_profile.params["context"] == 32768
    step = result.steps[-1]
    assert step.outcome == "works" and any("n_ctx = 32768" in note for note in step.notes)
    session = open_session(tmp_path / "rec.jsonl")
    assert session.finished and session.success and [s["step"] for s in session.steps] == [0, 1]
    assert session.end["final_params"] == {"context": 32768}  # type: ignore[index]


def test_an_ignored_setting_is_caught_not_counted(demo_model: Path, tmp_path: Path) -> None:
    # The engine keeps n_ctx = 262144 whatever the profile says (as when extra_args override it).
    runs = ReplayedRuns(tmp_path, honours_context=False)
    profile = _demo_profile(demo_model, extra_args=("--n_ctx", "262144"))
    result = Wizard(profile, record_path=tmp_path / "rec.jsonl", auto=True, runner=runs).run(max_steps=5)
    assert not result.success
    assert [s.outcome for s in result.steps] == ["first_run", "not_applied"]
    assert len(runs.profiles) == 2  # it stopped instead of walking further down the ladder
    assert "did not take effect" in result.reason and "n_ctx = 262144" in result.reason
    assert "extra_args" in result.reason
    assert result.final_profile.params["context"] == 262144  # the change is not kept as progress
    recorded = [json.loads(line) for line in (tmp_path / "rec.jsonl").read_text().splitlines()]
    assert recorded[-1]["type"] == "end" and recorded[-1]["success"] is False


def test_same_failure_same_sizes_means_no_effect(demo_model: Path, tmp_path: Path) -> None:
    # No n_ctx line to compare (a failure before the context is built): the figures decide.
    runs = ReplayedRuns(tmp_path, honours_context=False)

    def without_context_line(profile: Profile) -> Any:
        result = runs(profile)
        log = Path(result.log_file)
        log.write_text("\n".join(line for line in log.read_text().splitlines() if "n_ctx" not in line))
        return result

    wizard = Wizard(_demo_profile(demo_model), auto=True, runner=without_context_line, record=False)
    result = wizard.run(max_steps=5)
    assert [s.outcome for s in result.steps] == ["first_run", "not_applied"]
    assert "same allocation sizes" in result.reason


def test_quantized_kv_needs_flash_attention_first(demo_model: Path, tmp_path: Path) -> None:
    ladder = {"kv_cache": (Rung("kv_dtype", "down", "a smaller KV cache type", "quality"),)}
    profile = _demo_profile(demo_model).with_param("context", 65536)
    wizard = Wizard(
        profile, auto=True, runner=ReplayedRuns(tmp_path, fits_up_to=0), ladders=ladder, record=False
    )
    wizard.start()
    proposal = wizard.propose()
    assert proposal is not None and proposal.param == "flash_attn" and proposal.to is True
    assert proposal.then is not None and proposal.then[0] == "kv_dtype"
    assert "needs it for a quantized V cache" in proposal.why


@pytest.mark.parametrize(
    ("failure", "words"),
    [("file_missing", "model path"), ("unsupported_quant", "backend"), ("unknown_arch", "architecture")],
)
def test_non_memory_failures_get_advice_not_a_ladder(
    demo_model: Path, tmp_path: Path, failure: str, words: str
) -> None:
    def failing(profile: Profile) -> Any:
        return SimpleNamespace(
            ready=False,
            stage="load_weights",
            failure_stage="load_weights",
            failure=failure,
            diagnosis=None,
            smoke=None,
            log_file=None,
        )

    result = Wizard(_demo_profile(demo_model), auto=True, runner=failing, record=False).run(max_steps=5)
    assert not result.success and len(result.steps) == 1
    assert result.advice[0] == NOT_MEMORY[failure] and words in result.advice[0]
    assert "not a memory problem" in result.reason


def test_a_failure_not_about_memory_says_read_the_first_error_line_once(demo_model: Path) -> None:
    """QA 29 Q11: the wizard pane read "... not about memory: read the first error line; Read the first
    error line above; ...": its own words for "other", then the diagnosis' bare advice."""
    from vramtui.core.logs.diagnose import diagnose_text

    log = (
        "load_tensors: loading model tensors\n"
        "terminate called after throwing an instance of 'std::runtime_error'\n"
        "  what():  something odd happened\n"
    )
    diagnosis = diagnose_text(log)
    assert diagnosis.failure == "other" and len(diagnosis.advice) == 1  # the bare advice, alone

    def failing(profile: Profile) -> Any:
        return SimpleNamespace(
            ready=False,
            stage="load_weights",
            failure_stage="load_weights",
            failure="other",
            diagnosis=diagnosis,
            smoke=None,
            log_file=None,
        )

    result = Wizard(_demo_profile(demo_model), auto=True, runner=failing, record=False).run(max_steps=5)
    said = " ".join(result.advice).lower()
    assert result.advice[0] == NOT_MEMORY["other"] and said.count("read the first error line") == 1, said


def test_without_auto_and_nobody_to_ask_it_stops_with_the_proposal(demo_model: Path, tmp_path: Path) -> None:
    runs = ReplayedRuns(tmp_path)
    result = Wizard(_demo_profile(demo_model), auto=False, runner=runs, record=False).run(max_steps=5)
    assert not result.success and len(runs.profiles) == 1
    assert result.pending is not None and result.pending.param == "context"
    assert result.to_dict()["pending"]["to"] == 32768


def test_the_user_can_edit_a_proposal(demo_model: Path, tmp_path: Path) -> None:
    runs = ReplayedRuns(tmp_path)
    wizard = Wizard(_demo_profile(demo_model), auto=False, runner=runs, record=False)
    result = wizard.run(max_steps=3, confirm=lambda proposal: proposal.edited(16384))
    assert result.success and result.final_profile.params["context"] == 16384
    assert "edited by the user" in result.steps[-1].proposal.why  # type: ignore[union-attr]


def test_rising_floor() -> None:
    assert rising_floor([100.0, 110.0, 121.0, 130.0])
    assert not rising_floor([100.0, 101.0, 100.5, 100.8])
    assert not rising_floor([100.0, 140.0, 100.0, 141.0])  # it falls back: not a climbing floor
    assert not rising_floor([100.0, 200.0])  # too few requests to say


def test_terminal_answers_yes_no_edit(
    demo_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import io

    from vramtui.cli.wizard import _ask

    wizard = Wizard(_demo_profile(demo_model), runner=ReplayedRuns(tmp_path), record=False)
    proposal = wizard.propose()
    assert proposal is not None
    out = io.StringIO()
    monkeypatch.setattr("sys.stdin", io.StringIO("maybe\ne\nlots\ne\n16384\n"))
    edited = _ask(proposal, out, wizard)
    assert edited is not None and edited.to == 16384 and "whole number" in out.getvalue()
    # tokens as a profile spells them (QA: the TUI's `32k` launched, then failed the wizard's checks)
    monkeypatch.setattr("sys.stdin", io.StringIO("e\n32k\n"))
    edited = _ask(proposal, io.StringIO(), wizard)
    assert edited is not None and edited.to == 32768
    # the value it has now is no change (a relaunch that changes nothing): asked again
    monkeypatch.setattr("sys.stdin", io.StringIO(f"e\n{proposal.from_}\ne\n8192\n"))
    out = io.StringIO()
    edited = _ask(proposal, out, wizard)
    assert edited is not None and edited.to == 8192 and "is 262144 already" in out.getvalue()
    monkeypatch.setattr("sys.stdin", io.StringIO("n\n"))
    assert _ask(proposal, out, wizard) is None
    monkeypatch.setattr("sys.stdin", io.StringIO("y\n"))
    assert _ask(proposal, out, wizard) is proposal
    monkeypatch.setattr("sys.stdin", io.StringIO(""))  # end of input: stop, do not loop
    assert _ask(proposal, out, wizard) is None
    # QA 5: [s]kip keeps the setting and asks for another change, as the TUI's Skip (k) does
    monkeypatch.setattr("sys.stdin", io.StringIO("s\n"))
    assert _ask(proposal, out, wizard) == SKIP
    # QA 5: an edited value the estimate says will not fit is relaunched only on a second yes
    monkeypatch.setattr("sys.stdin", io.StringIO("e\n131072\nn\ne\n131072\ny\n"))
    out = io.StringIO()
    edited = _ask(proposal, out, wizard)
    assert edited is not None and edited.to == 131072
    assert out.getvalue().count("warning: the estimate for context = 131072 needs") == 2
    assert "will not fit. Relaunch anyway?" in out.getvalue()


def test_a_skipped_proposal_keeps_its_setting_and_the_next_change_is_offered(
    demo_model: Path, tmp_path: Path
) -> None:
    asked: list[str] = []

    def confirm(proposal: Proposal) -> Proposal | str | None:
        asked.append(proposal.param)
        return SKIP if len(asked) == 1 else None

    runs = ReplayedRuns(tmp_path)
    result = Wizard(_demo_profile(demo_model), runner=runs, record=False).run(max_steps=3, confirm=confirm)
    assert len(runs.profiles) == 1 and asked[0] == "context" and len(asked) == 2
    assert asked[1] != "context" and result.pending is not None and result.pending.param == asked[1]


CUDA_KV_FAILURE_LOG = """\
load_tensors:        CUDA0 model buffer size =    20.52 MiB
llama_context: n_ctx                 = {n_ctx}
ggml_backend_cuda_buffer_type_alloc_buffer: allocating {kv_mib:.2f} MiB on device 0: cudaMalloc failed: out of memory
alloc_tensor_range: failed to allocate CUDA0 buffer of size {kv_bytes}
llama_init_from_model: failed to initialize the context: failed to allocate buffer for kv cache
"""


def test_on_a_gpu_the_card_is_the_budget(
    demo_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # NVML is absent here: stand in for its answer (a 2 GiB card) where the wizard asks for it. (-np auto is
    # one unified cache: its KQ mask spans all 262144 cells; today's llama.cpp reserves it in f16 under
    # flash attention (llama.cpp#23764), so a q8_0 cache of 1088 MiB fits beside it, the smaller change.)
    monkeypatch.setattr("vramtui.core.wizard.budget._first_gpu_bytes", lambda: 2048 * MIB)

    def cuda_oom(profile: Profile) -> Any:
        n_ctx = int(profile.params["context"])  # type: ignore[call-overload]
        log = tmp_path / f"cuda-{n_ctx}.log"
        log.write_text(
            CUDA_KV_FAILURE_LOG.format(n_ctx=n_ctx, kv_mib=n_ctx * 8192 / MIB, kv_bytes=n_ctx * 8192)
        )
        return SimpleNamespace(
            ready=False, stage="kv_cache", failure_stage="kv_cache", failure="cuda_oom", diagnosis=None,
            smoke=None, log_file=str(log),
        )  # fmt: skip

    # flash attention off: llama-server's default (auto) would have it on already (see below).
    profile = Profile(
        backend="llama.cpp", model=str(demo_model), params={"context": 262144, "flash_attn": False}
    )
    auto = Wizard(profile.with_param("flash_attn", None), runner=cuda_oom, record=False)
    auto.start()
    direct = auto.propose()  # auto turned it on: no step spent on it, the KV cache type comes at once
    assert direct is not None and (direct.param, direct.to, direct.then) == ("kv_dtype", "q8_0", None)
    wizard = Wizard(profile, runner=cuda_oom, record=False)
    wizard.start()
    assert wizard.last is not None and wizard.last.figures["failed_alloc"] == 262144 * 8192
    assert not wizard.model.host and wizard.model.budget == 2048 * MIB
    proposal = wizard.propose()
    # Without logits arrays on the host, a q8_0 cache keeps the whole context on this card: the KV rung
    # comes before the context rung, and flash attention (its prerequisite) comes first, alone.
    assert proposal is not None and (proposal.param, proposal.to) == ("flash_attn", True)
    assert proposal.then == ("kv_dtype", "q8_0")
    room = 2048 * MIB - wizard.model.overhead
    assert proposal.predicted_mib is not None and proposal.predicted_mib * MIB <= room * 0.9
    assert wizard.model.overhead > 0 and "2048 MiB budget" in proposal.why


def test_step_by_step_driving_ends_the_record(demo_model: Path, tmp_path: Path) -> None:
    # The TUI drives start/propose/apply itself; finish() writes the end line.
    record = tmp_path / "tui.jsonl"
    wizard = Wizard(_demo_profile(demo_model), record_path=record, runner=ReplayedRuns(tmp_path))
    wizard.start()
    step = wizard.apply(wizard.propose())  # type: ignore[arg-type]
    assert step.outcome == "works" and wizard.propose() is None
    result = wizard.finish()
    assert result.success and result.final_profile.params["context"] == 32768
    session = open_session(record)
    assert session.finished and session.success and [s["step"] for s in session.steps] == [0, 1]
    assert wizard.finish().success  # a second call writes nothing more
    assert len(open_session(record).steps) == 2


def test_after_a_change_without_effect_nothing_more_is_proposed(demo_model: Path, tmp_path: Path) -> None:
    wizard = Wizard(
        _demo_profile(demo_model), runner=ReplayedRuns(tmp_path, honours_context=False), record=False
    )
    wizard.start()
    step = wizard.apply(wizard.propose())  # type: ignore[arg-type]
    assert step.outcome == "not_applied" and not step.counts_as_progress
    assert wizard.propose() is None and "did not take effect" in wizard.stop_reason


@pytest.mark.parametrize(("gpu_bytes", "expected"), [(None, []), (24 * 2**30, ["fp8"])])
def test_vllms_on_the_fly_fp8_is_no_move_for_its_cpu_build(
    gpu_bytes: int | None, expected: list[object], monkeypatch: pytest.MonkeyPatch
) -> None:
    """QA 37 F4: with no GPU the wizard relaunched vLLM's CPU build with --quantization fp8, which crashed at
    load (torch.ops._C.static_scaled_fp8_quant is built for CUDA only). On a GPU it stays a rung."""
    monkeypatch.setattr("vramtui.core.wizard.budget._first_gpu_bytes", lambda: gpu_bytes)
    wizard = Wizard(Profile(backend="vllm", model="m", params={}), record=False)
    rung = next(r for r in ladder_for("load_weights", "vllm") if r.param == "quant")
    assert wizard.proposer.candidates(rung, None, wizard.profile) == expected


def test_candidate_values_per_backend(demo_model: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("vramtui.core.backends.base._importable", lambda module: True)

    def candidates(
        backend: str, stage: str, param: str, params: dict[str, object], model: str = "m"
    ) -> list[object]:
        wizard = Wizard(Profile(backend=backend, model=model, params=params), record=False)
        rung = next(r for r in ladder_for(stage, backend) if r.param == param)
        from vramtui.core.wizard.wizard import current_value

        return wizard.proposer.candidates(rung, current_value(wizard.profile, param), wizard.profile)

    assert candidates("transformers", "load_weights", "quant", {}) == ["bnb-8bit", "bnb-4bit"]
    assert candidates("transformers", "load_weights", "quant", {"quant": "bnb-8bit"}) == ["bnb-4bit"]
    assert candidates("vllm", "kv_cache", "kv_dtype", {}) == ["fp8"]
    assert candidates("vllm", "kv_cache", "mem_share", {"mem_share": 0.9}) == [0.92, 0.95]
    assert candidates("vllm", "kv_cache", "parallel", {"parallel": 256})[:2] == [224, 192]
    assert candidates("llama.cpp", "kv_cache", "kv_dtype", {"kv_dtype": "q8_0"}) == ["q4_0"]
    assert candidates("llama.cpp", "kv_cache", "gpu_layers", {}, str(demo_model)) == [3, 2, 1, 0]
    assert candidates("llama.cpp", "kv_cache", "gpu_layers", {"gpu_layers": 0}, str(demo_model)) == []
    assert candidates("llama-cpp-python", "kv_cache", "flash_attn", {"flash_attn": True}) == []


@pytest.mark.parametrize(
    ("peaks", "outcome"), [((1400.0, 1401.0), "not_applied"), ((1400.0, 900.0), "no_progress")]
)
def test_without_printed_sizes_the_curve_decides(
    demo_model: Path, tmp_path: Path, peaks: tuple[float, float], outcome: str
) -> None:
    # A run stopped from outside at the budget prints no sizes: only the sampled peak shows a change.
    runs = iter(peaks)

    def stopped_at_budget(profile: Profile) -> Any:
        return SimpleNamespace(
            ready=False, stage="kv_cache", failure_stage="kv_cache", failure="cuda_oom", diagnosis=None,
            smoke=None, log_file=None, peak_mib=next(runs),
        )  # fmt: skip

    wizard = Wizard(_demo_profile(demo_model), runner=stopped_at_budget, record=False)
    wizard.start()
    step = wizard.apply(wizard.propose())  # type: ignore[arg-type]
    assert step.outcome == outcome
    if outcome == "not_applied":
        assert "peak 1400 → 1401 MiB" in step.notes[0]


def test_a_server_that_answers_over_the_budget_makes_progress_when_its_peak_falls(
    demo_model: Path, tmp_path: Path
) -> None:
    # An attached server judged by its sampled peak: up and answering each time, over the budget, and
    # its build prints no buffer sizes; a change that lowers the peak is progress, not "no less memory".
    runs = iter((56.0, 44.0))

    def over_budget(profile: Profile) -> Any:
        return SimpleNamespace(
            ready=False, stage="inference", failure_stage="kv_cache", failure="host_oom", diagnosis=None,
            smoke=SimpleNamespace(ok=True), log_file=None, peak_mib=next(runs), memory_budget_mib=40.0,
        )  # fmt: skip

    wizard = Wizard(_demo_profile(demo_model), runner=over_budget, record=False)
    wizard.start()
    step = wizard.apply(wizard.propose())  # type: ignore[arg-type]
    assert step.outcome == "progress" and step.counts_as_progress
    assert "fails at the same place asking for no less memory" not in step.notes
    # and at the end it is said to answer, still over the budget, not to be "not running yet"
    import argparse
    import contextlib
    import io

    from vramtui.cli.wizard import report

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        report(wizard.finish(), argparse.Namespace(json=False), None)
    assert out.getvalue().splitlines()[1].startswith("it answers, still over the budget: ")
    # its record says so too: up and ready, over the budget, no stage failed (QA: `ready: false`)
    first = wizard.steps[0].to_dict()
    assert (first["ready"], first["over_budget"], first["failure_stage"]) == (True, True, None)


def test_a_server_over_a_budget_below_what_no_setting_shrinks_stops_and_says_so(demo_model: Path) -> None:
    """QA: a server running at 56 MiB under a 20 MiB budget was walked down the ladder and told "a smaller
    model: a less capable model". The engine itself and the weights are already over: say so, no move."""

    def over_budget(profile: Profile) -> Any:
        return SimpleNamespace(
            ready=False, stage="inference", failure_stage="kv_cache", failure="host_oom", diagnosis=None,
            smoke=SimpleNamespace(ok=True), log_file=None, peak_mib=2600.0, memory_budget_mib=500.0,
        )  # fmt: skip

    profile = _demo_profile(demo_model, params={"context": 2048}, memory_budget=500 * MIB)
    wizard = Wizard(profile, runner=over_budget, record=False)
    wizard.start()
    weights = wizard.proposer.model.predict(profile).get("weights", HOST) / MIB  # type: ignore[union-attr]
    assert weights < 500  # the weights alone fit: it is the engine's own share that does not
    assert wizard.propose() is None
    findings = wizard.proposer.findings
    # QA 30 S17: it read "below what no engine setting shrinks"
    assert findings.stop_reason == (
        "the 500 MiB budget is below what the engine itself and its weights hold, which no engine setting shrinks"
    )
    assert (
        "is the engine itself" in findings.advice[0] and "give it a budget of at least" in findings.advice[1]
    )
    # a budget the engine and the weights fit under, with buffers to shrink: the ladder proposes as before
    buffers = needed_bytes(wizard.proposer.model.predict(profile)) / MIB  # type: ignore[arg-type]
    roomy = _demo_profile(demo_model, params={"context": 2048}, memory_budget=int(2600 - buffers / 2) * MIB)
    wizard = Wizard(roomy, runner=over_budget, record=False)
    wizard.start()
    assert wizard.propose() is not None, wizard.proposer.findings.stop_reason


def test_a_saved_request_that_fails_walks_the_inference_ladder(demo_model: Path, tmp_path: Path) -> None:
    # The server starts and answers "ping", but the saved long request runs out of memory until the
    # batch is smaller (what llama.cpp's server does when a prompt's batch does not fit).
    def runs(profile: Profile) -> Any:
        batch = int(profile.params.get("batch", 512))  # type: ignore[call-overload]
        passes = batch <= 256
        return SimpleNamespace(
            ready=True, stage="inference", failure_stage=None if passes else "inference",
            failure=None if passes else "cuda_oom", diagnosis=None, smoke=SimpleNamespace(ok=True),
            replay=SimpleNamespace(ok=passes, meaning="answered" if passes else "HTTP 500: out of memory"),
            log_file=None, peak_mib=900.0,
        )  # fmt: skip

    profile = Profile(backend="llama-cpp-python", model=str(demo_model), params={"context": 8192})
    saved = {"messages": [{"role": "user", "content": "long " * 4000}]}
    wizard = Wizard(profile, runner=runs, record=False, auto=True, replay=saved)
    assert wizard.replay is saved
    result = wizard.run(max_steps=4)
    assert result.success
    step = result.steps[-1]
    assert (step.proposal.param, step.proposal.from_, step.proposal.to) == ("batch", 512, 256)  # type: ignore[union-attr]
    assert "the saved failing request now passes" in step.notes
    first = result.steps[0].observation
    assert first is not None and first.ready and not first.works  # "ping" answering is not enough


def test_a_saved_request_longer_than_the_context_gets_advice(demo_model: Path) -> None:
    def runs(profile: Profile) -> Any:
        return SimpleNamespace(
            ready=True, stage="inference", failure_stage="inference", failure="replay_context_too_long",
            diagnosis=None, smoke=SimpleNamespace(ok=True), replay=SimpleNamespace(ok=False, meaning="too long"),
            log_file=None,
        )  # fmt: skip

    profile = Profile(backend="llama-cpp-python", model=str(demo_model), params={"context": 2048})
    result = Wizard(profile, runner=runs, record=False, auto=True, replay={"messages": []}).run()
    assert not result.success and len(result.steps) == 1
    assert "raise context" in result.advice[0]


def test_a_parameter_the_backend_lacks_is_not_applied(demo_model: Path, tmp_path: Path) -> None:
    # A hand-made ladder asks llama-cpp-python for fewer sequences; its launcher cannot pass that on.
    runs = ReplayedRuns(tmp_path)

    def with_unsupported(profile: Profile) -> Any:
        result = runs(profile.with_param("parallel", None))
        result.unsupported = ["parallel"] if "parallel" in profile.params else []
        result.warnings = ["llama-cpp-python has no parallel setting: its server runs one sequence at a time"]
        return result

    ladder = {"kv_cache": (Rung("parallel", "down", "fewer sequences"),)}
    profile = _demo_profile(demo_model).with_param("parallel", 4)
    wizard = Wizard(profile, runner=with_unsupported, ladders=ladder, record=False)
    wizard.start()
    step = wizard.apply(Proposal("parallel", 4, 1, "test"))
    assert step.outcome == "not_applied" and "runs one sequence at a time" in step.notes[0]


# Real lines, llama-server 0.5.0-dev at verbosity 4: started `-ctk f16 -ctv q4_0 -fa on` (the first), then
# `--cache-type-v q4_0 -fa on -ctv f16` (the second: the last V flag wins).
KV_PRINTED = (
    "llama_kv_cache: size =   20.50 MiB (  4096 cells,   4 layers,  4/1 seqs), "
    "K (f16):   16.00 MiB, V (q4_0):    4.50 MiB\n"
)
KV_PRINTED_AFTER = (
    "llama_kv_cache: size =   32.00 MiB (  4096 cells,   4 layers,  4/1 seqs), "
    "K (f16):   16.00 MiB, V (f16):   16.00 MiB\n"
)


@pytest.mark.parametrize("printed", [KV_PRINTED, KV_PRINTED_AFTER], ids=["K-f16-V-q4_0", "K-f16-V-f16"])
def test_a_kv_change_is_verified_on_both_halves_the_engine_printed(
    demo_model: Path, tmp_path: Path, printed: str
) -> None:
    # Issue 22 #1: a q4_0 step whose V stayed f16 (or whose K did) is not applied, whatever the command says.
    from vramtui.core.wizard.budget import MemoryModel
    from vramtui.core.wizard.verify import took_effect

    log = tmp_path / "run.log"
    log.write_text(printed)
    after = observe(_llama_run(ready=True, log_file=str(log)))
    before_profile = Profile(backend="llama.cpp", model=str(demo_model), params={"kv_dtype": "f16"})
    to = "q4_0"
    after_profile = before_profile.with_param("kv_dtype", to)
    model = MemoryModel(before_profile, device_bytes=8 << 30)
    applied, why = took_effect(
        model, Proposal("kv_dtype", "f16", to, "test"), None, after, before_profile, after_profile
    )
    k_type, v_type = after.facts["kv_type_k"], after.facts["kv_type"]
    assert not applied and why == f"asked for a q4_0 KV cache, the engine printed K ({k_type}), V ({v_type})"
    log.write_text(printed.replace("(f16)", "(q4_0)"))
    after = observe(_llama_run(ready=True, log_file=str(log)))
    applied, why = took_effect(
        model, Proposal("kv_dtype", "f16", to, "test"), None, after, before_profile, after_profile
    )
    assert applied and why.startswith("the log confirms a q4_0 KV cache")


def test_the_settings_are_this_runs_from_its_offset_in_a_shared_log(tmp_path: Path) -> None:
    # A restarted server appending to the log the one before it wrote: the older run's KV line is not its.
    log = tmp_path / "server.log"
    log.write_text(KV_PRINTED)
    offset = log.stat().st_size
    with log.open("a") as out:
        out.write("srv  llama_server: model loaded\n")
    seen = observe(_llama_run(ready=True, log_file=str(log), log_offset=offset))
    assert "kv_type" not in seen.facts and seen.log_offset == offset
    whole = observe(_llama_run(ready=True, log_file=str(log)))
    assert whole.facts["kv_type"] == "q4_0"


def test_an_ollama_context_is_verified_against_its_runners_cells() -> None:
    """Ollama's runner gets num_ctx x parallel cells: a context of 2048 with 4 parallel requests prints
    n_ctx = 8192, and that is the change applied."""
    from vramtui.core.logs.diagnose import diagnose_text
    from vramtui.core.wizard.budget import MemoryModel
    from vramtui.core.wizard.verify import took_effect

    runner = (
        'time=2024-09-20T14:35:02.053+02:00 level=INFO source=server.go:395 msg="starting llama server" '
        'cmd="/usr/lib/ollama/runners/cuda_v12/ollama_llama_server --model /m --ctx-size 8192 --batch-size 512 '
        '--n-gpu-layers 999 --parallel 4 --port 36611"\nllama_new_context_with_model: n_ctx      = 8192\n'
    )
    after = observe(SimpleNamespace(ready=True, diagnosis=diagnose_text(runner), smoke=None, log_file=None))
    before_profile = Profile(backend="ollama", model="qwen2.5:7b", params={"context": 4096})
    for asked, applied in ((2048, True), (8192, False)):
        after_profile = before_profile.with_param("context", asked)
        model = MemoryModel(before_profile, device_bytes=8 << 30)
        proposal = Proposal("context", 4096, asked, "test")
        assert took_effect(model, proposal, None, after, before_profile, after_profile)[0] is applied


def test_the_inference_ladder_skips_a_batch_that_frees_nothing(demo_model: Path) -> None:
    """llama-server's batch 2048 over a micro-batch of 512: a batch of 1024 or 512 takes the same memory a
    step (QA: two relaunches that changed nothing), so the first change is a batch below the micro-batch."""
    launched: list[object] = []

    def runs(profile: Profile) -> Any:
        batch = profile.params.get("batch")
        launched.append(batch)
        passes = batch is not None and int(batch) < 512  # type: ignore[call-overload]
        return SimpleNamespace(
            ready=True, stage="inference", failure_stage=None if passes else "inference",
            failure=None if passes else "host_oom", diagnosis=None, smoke=SimpleNamespace(ok=passes),
            replay=None, log_file=None, peak_mib=40.0,
        )  # fmt: skip

    profile = Profile(backend="llama.cpp", model=str(demo_model), params={"context": 512})
    result = Wizard(profile, runner=runs, record=False, auto=True).run(max_steps=4)
    assert result.success and len(launched) == 2
    step = result.steps[-1]
    assert step.proposal is not None and step.proposal.param == "batch"
    assert step.proposal.from_ == 2048 and int(step.proposal.to) < 512  # type: ignore[call-overload]


def test_a_request_that_failed_alone_is_no_reason_for_fewer_transformers_slots(
    short_trained_hf: Path,
) -> None:
    """QA 21 F1: transformers' one saved request ran out of host memory at inference; the wizard's first
    step was parallel 4 -> 2 (its dynamic cache grows with the sequences served, and one was), then it
    called the setting "ignored". The request failed alone: no parallel step; the ladder's advice instead."""
    launched: list[dict[str, object]] = []

    def runs(profile: Profile) -> Any:
        launched.append(dict(profile.params))
        return SimpleNamespace(
            ready=True, stage="inference", failure_stage="inference", failure="host_oom", diagnosis=None,
            smoke=SimpleNamespace(ok=False), replay=None, log_file=None, peak_mib=600.0,
        )  # fmt: skip

    profile = Profile(backend="transformers", model=str(short_trained_hf), params={"parallel": 4})
    result = Wizard(profile, runner=runs, record=False, auto=True).run(max_steps=3)
    assert not result.success
    assert not any(step.proposal is not None and step.proposal.param == "parallel" for step in result.steps)
    assert all(params.get("parallel") == 4 for params in launched), launched
    # llama.cpp's slots are not the same: the ladder still holds its parallel rung
    from vramtui.core.backends import get_backend

    assert not get_backend("llama.cpp").kv_grows_per_request


def test_a_switch_reads_on_and_off_and_an_unset_value_the_engines_default() -> None:
    """QA: llama-cpp-python's steps read "flash_attn False → True"."""
    assert Proposal("flash_attn", False, True, "why").describe() == "flash_attn: off → on — why"
    assert Proposal("ubatch", None, 256, "why").change() == "default → 256"
    # QA: --json had "from": "off", "to": true; the value keeps the profile's own spelling
    from vramtui.core.backends.base import FLASH_ATTN_ON
    from vramtui.core.wizard.propose import candidates

    profile = Profile(backend="llama.cpp", model="m.gguf", params={"flash_attn": "off"})
    assert candidates(FLASH_ATTN_ON, "off", profile, 0) == ["on"]
    assert candidates(FLASH_ATTN_ON, False, profile, 0) == [True]


def test_when_no_file_fits_the_one_that_needs_least_is_next_not_the_lowest_quantization(
    tmp_path: Path,
) -> None:
    """QA: an f16 file under a budget none of its siblings fits went to the q4_0 file, which llama.cpp's
    CPU build holds twice (the file mapped and its repacked copy): more than the q8_0 file needs."""
    from vramtui.core.wizard.budget import MemoryModel, needed_bytes
    from vramtui.core.wizard.observe import Observation
    from vramtui.core.wizard.propose import Findings, Proposer

    spec = {"n_layer": 8, "n_embd": 1024, "n_head": 8, "n_head_kv": 8, "n_ff": 2816, "context_length": 4096}
    for dtype in ("f16", "q8_0", "q4_0"):
        write_tiny_gguf(tmp_path / f"m-{dtype}.gguf", TinyModelSpec(dtype=dtype, **spec))  # type: ignore[arg-type]
    profile = Profile(
        backend="llama.cpp", model=str(tmp_path / "m-f16.gguf"), params={"context": 2048, "parallel": 1},
        memory_budget=400 * MIB, port=0,
    )  # fmt: skip
    model = MemoryModel(profile)
    needs = {
        dtype: needed_bytes(model.predict(profile.with_changes(model=str(tmp_path / f"m-{dtype}.gguf"))))  # type: ignore[arg-type]
        for dtype in ("q8_0", "q4_0")
    }
    assert needs["q8_0"] < needs["q4_0"]  # the repacked copy: why the lowest is not the least
    failed = Observation(
        ready=False, smoke_ok=None, stage="load_weights", failure_stage="load_weights", failure="host_oom"
    )
    # 440 MiB: the q8_0 file fits the room by the estimate, though not within its 10% margin
    roomy = profile.with_changes(memory_budget=440 * MIB)
    proposal = Proposer(MemoryModel(roomy), Findings()).propose(roomy, failed, set())
    assert proposal is not None and proposal.param == "model"
    assert str(proposal.to).endswith("m-q8_0.gguf"), proposal.describe()
    # 400 MiB: not even the file that needs least fits the room: no relaunch is spent on it, and the
    # advice says so, naming that file (QA: relaunches on changes that could not make it fit)
    findings = Findings()
    assert Proposer(model, findings).propose(profile, failed, set()) is None
    assert "not even all of them at once" in findings.stop_reason
    assert "m-q8_0.gguf" in findings.advice[0] and "smaller quantization" in findings.advice[1]


def test_advice_that_names_a_count_is_sized_by_the_wizards_arithmetic(demo_model: Path) -> None:
    """QA: `check` advised --ubatch-size 256 where the wizard's arithmetic had chosen the context (and the
    advised run failed for real): each such line now says what the estimate makes of it."""
    from vramtui.core.wizard.advice_sizing import named_change, sized_advice
    from vramtui.core.wizard.budget import MemoryModel

    profile = Profile(
        backend="llama.cpp", model=str(demo_model), params={"context": 262144}, memory_budget=1500 * MIB
    )
    lines = [
        "A smaller micro-batch shrinks the compute buffer: --ubatch-size 256 (or 128).",
        "Lower the context: --ctx-size 16384 (now 262144).",
        "Raise `memory_budget` under [limits] in the profile.",
    ]
    assert [named_change(line, profile) for line in lines] == [("ubatch", 256), ("context", 16384), None]
    sized = sized_advice(MemoryModel(profile), profile, lines)
    assert sized[0].endswith("[by the estimate: not enough alone]")  # 2 GiB of KV stay
    assert sized[1].endswith("[by the estimate: fits]") and sized[2] == lines[2]
    # a KV type is sized too (QA 12: the q8_0 line had no tag beside a context line that had one)
    kv_line = "Or store the KV cache in 8 bits (half its bytes): --cache-type-k q8_0 --cache-type-v q8_0."
    assert named_change(kv_line, profile) == ("kv_dtype", "q8_0")
    assert sized_advice(MemoryModel(profile), profile, [kv_line])[0].endswith(
        "[by the estimate: not enough alone]"
    )


def test_a_context_llama_cpp_padded_to_its_slots_took_effect() -> None:
    """QA 6: context 50000 over 4 slots: llama-server prints n_ctx = 50176 (each slot's 12500 rounded up to
    256 cells). The wizard said "did not take effect", stopped, and saved nothing of a server that ran."""
    from vramtui.core.wizard.observe import Observation
    from vramtui.core.wizard.verify import _echoed

    def seen(n_ctx: int, parallel: object) -> tuple[bool, str] | None:
        params = {"context": 131072} if parallel is None else {"context": 131072, "parallel": parallel}
        after = Observation(
            ready=True, smoke_ok=True, stage="inference", failure_stage=None, failure=None,
            facts={"n_ctx": str(n_ctx)},
        )  # fmt: skip
        return _echoed(
            Proposal("context", 131072, 50000, "why"), None, after, Profile("llama.cpp", "m", params)
        )

    assert seen(50176, 4) == (True, "the log confirms n_ctx = 50176")
    assert seen(50176, None) is not None and seen(50176, None)[0]  # type: ignore[index]  # auto: 4 slots
    assert seen(50000, 1) is not None and seen(50000, 1)[0]  # type: ignore[index]
    assert not seen(65536, 4)[0]  # type: ignore[index]  # another value: overridden
    assert not seen(49152, 4)[0]  # type: ignore[index]  # below what was asked
    assert get_backend("vllm").context_as_printed(50000, 4) == range(50000, 50001)  # no padding
    # in the engine's own word (QA 29: "n_ctx" in a vLLM step)
    after = Observation(
        ready=True, smoke_ok=True, stage="inference", failure_stage=None, failure=None,
        facts={"n_ctx": "4096"},
    )  # fmt: skip
    vllm = Profile("vllm", "m", {"context": 8192})
    assert _echoed(Proposal("context", 8192, 4096, "why"), None, after, vllm) == (
        True,
        "the log confirms max-model-len = 4096",
    )


def test_flash_attention_is_confirmed_from_the_diagnosis_figure_whatever_the_build_prints() -> None:
    """The wizard read flash attention with a regex of its own: an older build's "flash_attn = 1" read
    "asked for flash attention enabled, the log shows 1", a failed verification of a change that took."""
    from vramtui.core.logs.diagnose import diagnose_text
    from vramtui.core.wizard.observe import Observation
    from vramtui.core.wizard.verify import _echoed

    profile = Profile(backend="llama.cpp", model="m.gguf", params={"flash_attn": "off"})
    proposal = Proposal("flash_attn", "off", "on", "why")
    said = {
        "llama_new_context_with_model: flash_attn = 1": True,  # builds of 2024
        "llama_context: flash_attn    = enabled": True,
        "llama_context: flash_attn    = auto\nllama_context: Flash Attention was auto, set to enabled": True,
        "llama_context: flash_attn    = auto\nllama_context: Flash Attention was auto, set to disabled": False,
        # builds of mid-2026 resolve "auto" per device (round 52: a DeepSeek-V2 GGUF on a 5080, Ollama 0.32)
        "llama_context: flash_attn    = auto\nresolve_fused_ops: Flash Attention not supported, set to disabled": False,
        "llama_context: flash_attn    = auto\nresolve_fused_ops: Flash Attention enabled": True,
        "llama_context: flash_attn    = 0": False,
    }
    for lines, confirmed in said.items():
        engine = diagnose_text(f"build: 6000 (abc)\n{lines}\n", kernel_log=lambda: None).engine_figures
        after = Observation(
            ready=True, smoke_ok=True, stage="inference", failure_stage=None, failure=None, engine=engine
        )
        verdict = _echoed(proposal, None, after, profile)
        assert verdict is not None and verdict[0] is confirmed, (lines, verdict)
    unresolved = Observation(ready=True, smoke_ok=True, stage="inference", failure_stage=None, failure=None)
    assert _echoed(proposal, None, unresolved, profile) is None  # "auto" alone: nothing to compare


def test_an_edited_value_is_read_and_checked_as_the_relaunched_profile_holds_it(demo_model: Path) -> None:
    """The TUI's Edit and `wizard`'s [e]dit share one reading: `32k` is 32768 before anything launches
    (QA: the TUI launched it, then its verification failed on int('32k') and left the server untracked),
    and a value the engine cannot run is one line at once, not a stopped wizard."""
    from vramtui.core.errors import VramtuiError
    from vramtui.core.wizard.edit import edited_proposal

    profile = _demo_profile(demo_model)
    proposal = Proposal("context", profile.params.get("context"), 8192, "why")
    assert edited_proposal(profile, proposal, " 32k ").to == 32768
    assert edited_proposal(profile, proposal, "16,384").to == 16384
    for bad in ("abc", "", "-5"):
        with pytest.raises(VramtuiError):
            edited_proposal(profile, proposal, bad)
    switch = Proposal("flash_attn", False, True, "why")
    assert edited_proposal(profile, switch, "on").to is True
    with pytest.raises(VramtuiError, match="no such model file"):
        edited_proposal(profile, Proposal("model", profile.model, "x.gguf", "why"), "/nowhere/x.gguf")


@pytest.mark.parametrize(("parallel", "useful"), [(2, 8192), (None, 16384)])
def test_a_context_past_what_the_model_can_use_goes_down_to_that_first_at_no_cost(
    tmp_path: Path, parallel: int | None, useful: int
) -> None:
    """QA: context 1048576 on a model trained for 4096, two slots: llama-server caps each slot at 4096
    ("the slot context exceeds the training context of the model - capping"), so the cache past 2 x 4096
    holds memory and nothing else. The first move is that (its cost: nothing), not 131072 with "long
    prompts no longer fit". Slots left to the engine: its 4."""
    from vramtui.core.wizard.budget import MemoryModel
    from vramtui.core.wizard.observe import Observation
    from vramtui.core.wizard.propose import Findings, Proposer

    model_file = write_tiny_gguf(tmp_path / "m4k.gguf", TinyModelSpec(context_length=4096))
    params: dict[str, object] = {"context": 1048576}
    if parallel:
        params["parallel"] = parallel
    profile = Profile(
        backend="llama.cpp", model=str(model_file), params=params, memory_budget=1024 * MIB, port=0
    )
    failed = Observation(
        ready=False, smoke_ok=None, stage="kv_cache", failure_stage="kv_cache", failure="host_oom"
    )
    proposal = Proposer(MemoryModel(profile), Findings()).propose(profile, failed, set())
    assert proposal is not None and (proposal.param, proposal.to) == ("context", useful)
    assert "cost: nothing" in proposal.why and "long prompts" not in proposal.why


def test_the_free_context_move_comes_first_even_when_it_does_not_fit_alone(tmp_path: Path) -> None:
    """QA 5: context 262144 on a model trained for 131072, one slot, 1 GiB: the wizard went to 65536 (a
    move that fit alone) where 131072 with a q8_0 cache fits. The free move comes first, said as not
    enough alone; the next step continues from the trained length."""
    from vramtui.core.wizard.budget import MemoryModel
    from vramtui.core.wizard.observe import Observation
    from vramtui.core.wizard.propose import Findings, Proposer

    spec = TinyModelSpec(n_layer=8, n_embd=256, n_head=4, n_head_kv=4, n_ff=512, context_length=131072)
    model_file = write_tiny_gguf(tmp_path / "m128.gguf", spec)
    params: dict[str, object] = {"context": 262144, "parallel": 1}
    profile = Profile(
        backend="llama.cpp", model=str(model_file), params=params, memory_budget=1024 * MIB, port=0
    )
    failed = Observation(
        ready=False, smoke_ok=None, stage="kv_cache", failure_stage="kv_cache", failure="host_oom"
    )
    proposer = Proposer(MemoryModel(profile), Findings())
    first = proposer.propose(profile, failed, set())
    assert first is not None and (first.param, first.to) == ("context", 131072)
    assert "cost: nothing" in first.why and "not enough alone" in first.why
    second = proposer.propose(profile.with_param("context", 131072), failed, set())
    assert second is not None and second.param == "kv_dtype"  # the trained length kept


def test_no_relaunch_or_advice_is_spent_on_bitsandbytes_where_it_is_not_installed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """QA 5: the wizard proposed bnb-4bit (the relaunch failed on its ImportError), then advised double
    quantization, on a machine with no bitsandbytes: vramtui's runner runs on vramtui's own Python."""
    monkeypatch.setattr("vramtui.core.backends.base._importable", lambda module: module != "bitsandbytes")
    wizard = Wizard(Profile(backend="transformers", model="m", params={}), record=False)
    rungs = ladder_for("load_weights", "transformers")
    quant = next(r for r in rungs if r.param == "quant")
    assert wizard.proposer.candidates(quant, None, wizard.profile) == []
    assert not any("bitsandbytes" in r.label for r in wizard.profile.backend.rungs("load_weights"))
    assert get_backend("vllm").importable("bitsandbytes")  # an engine on its own Python is not asked
    # ... and where the ladder ends, the wizard says what it could not try here (QA 11: "no setting left")
    from vramtui.core.wizard.propose import missing_packages

    missing = missing_packages(get_backend("transformers"), "load_weights")
    assert missing[0] == "a quantization at load (needs bitsandbytes)" and len(missing) == 2
    assert missing_packages(get_backend("llama.cpp"), "load_weights") == []


def test_an_edited_value_drops_the_proposal_s_figures_and_the_override_is_recorded(
    demo_model: Path, tmp_path: Path
) -> None:
    """QA 6: the edited step kept the proposed value's "needs about 545 MiB ... fits", after the terminal had
    warned the typed value would not fit; and the record kept no trace of the user's yes against it."""
    wizard = Wizard(_demo_profile(demo_model), runner=ReplayedRuns(tmp_path), record=False)
    proposal = wizard.propose()
    assert proposal is not None and proposal.param == "context" and "MiB" in proposal.why
    edited = proposal.edited(131072)
    assert edited.why == f"edited by the user to 131072 (proposed: {proposal.to})"
    assert edited.predicted_mib is None and wizard.fit_warning(edited) is not None
    step = wizard.apply(edited)
    assert any(note.startswith("relaunched on the user's yes, though the estimate") for note in step.notes)
    assert step.proposal is not None and step.proposal.predicted_mib is not None  # for what was launched


def test_a_step_whose_process_was_never_sampled_has_no_memory_figures() -> None:
    """QA 6: a launch that failed before the first sample read "peak RSS 0 B / resident RSS 0 B"."""
    from vramtui.core.wizard.observe import step_memory_of

    never = SimpleNamespace(peak_mib=0.0, resident_mib=0.0, samples=[], events=[])
    assert step_memory_of(never) == (None, None, None)
    held = SimpleNamespace(peak_mib=120.0, resident_mib=100.0, samples=[], events=[])
    assert step_memory_of(held) == (120.0, 100.0, None)


def _under_a_host_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, layers: int, context: int, parallel: int, budget_mib: int
) -> Profile:
    """A tiny llama.cpp model trained to `context`, run with it and `parallel` slots under a host budget,
    beside llama-server's measured 147 MiB of its own."""
    monkeypatch.setattr("vramtui.core.wizard.budget._host_baseline", lambda profile: 147 * MIB)
    model_file = tmp_path / "m.gguf"
    spec = {
        "n_layer": layers,
        "n_embd": 256,
        "n_head": 4,
        "n_head_kv": 4,
        "n_ff": 512,
        "context_length": context,
    }
    write_tiny_gguf(model_file, TinyModelSpec(**spec))  # type: ignore[arg-type]
    return Profile(
        backend="llama.cpp", model=str(model_file), params={"context": context, "parallel": parallel},
        memory_budget=budget_mib * MIB, port=0,
    )  # fmt: skip


def test_a_slots_threads_count_against_a_host_budget_and_fewer_slots_come_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """QA 12: 16 slots under 250 MiB: llama-server's 20 HTTP threads reserve 160 MiB of stacks. The wizard
    did not count them: it predicted q4_0 fits, then cut the context five times and gave up. The slots'
    stacks are in the bill now, and the first change is one that a second change after it makes fit."""
    from vramtui.core.wizard.budget import MemoryModel, slot_thread_stacks
    from vramtui.core.wizard.observe import Observation
    from vramtui.core.wizard.propose import Findings, Proposer

    profile = _under_a_host_budget(
        tmp_path, monkeypatch, layers=8, context=32768, parallel=16, budget_mib=250
    )
    assert slot_thread_stacks(profile) == 15 * 8 * MIB  # the footprint was measured with one slot
    assert slot_thread_stacks(profile.with_param("parallel", "auto")) == 3 * 8 * MIB  # llama-server's 4
    assert slot_thread_stacks(Profile(backend="vllm", model="m", params={"parallel": 16})) == 0
    memory = MemoryModel(profile)
    bill = memory.predict(profile)
    assert bill is not None and bill.get("runtime", HOST) == 15 * 8 * MIB
    failed = Observation(
        ready=False, smoke_ok=None, stage="kv_cache", failure_stage="kv_cache", failure="host_oom"
    )
    proposal = Proposer(memory, Findings()).propose(profile, failed, set())
    assert proposal is not None and proposal.param == "parallel", proposal
    assert int(proposal.to) < 16 and "after it makes it fit" in proposal.why  # type: ignore[call-overload]


def test_fewer_slots_count_in_all_at_once_though_alone_they_free_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """QA 22 (QA 20 D7 again): 8 slots of a 262144-token context under 190 MiB. One slot alone frees
    nothing (its compute buffer grows with the slot's context), so it was left out of "every change at
    once", and the wizard stopped: "not even all of them at once". By hand, context 2048 with one slot
    runs. Fewer slots count in that check now, and the wizard takes a step."""
    from vramtui.core.wizard.budget import MemoryModel, changed
    from vramtui.core.wizard.observe import Observation
    from vramtui.core.wizard.propose import Findings, Proposer

    profile = _under_a_host_budget(
        tmp_path, monkeypatch, layers=4, context=262144, parallel=8, budget_mib=190
    )
    memory = MemoryModel(profile)
    now = memory.predict(profile)
    alone = memory.predict(changed(profile, [("parallel", 1)]))
    assert now is not None and alone is not None and needed_bytes(alone) >= needed_bytes(now)
    small = memory.predict(changed(profile, [("context", 2048), ("parallel", 1), ("kv_dtype", "q4_0")]))
    assert small is not None and memory.fits(small)
    failed = Observation(
        ready=False, smoke_ok=None, stage="kv_cache", failure_stage="kv_cache", failure="host_oom"
    )
    findings = Findings()
    proposal = Proposer(memory, findings).propose(profile, failed, set())
    assert proposal is not None, (findings.stop_reason, findings.advice)
    assert proposal.param != "parallel"  # alone it frees nothing: not the first relaunch


def test_the_first_of_two_changes_frees_something_itself() -> None:
    """QA 22: an attached llama-server (-c 4096 -np 2) over its budget was told parallel 2 -> 1 "not
    enough alone; a change of context after it makes it fit": one cache of the same 4096 cells, its bill
    grew. The first change of a pair frees something itself."""
    from vramtui.core.memory.parts import MemoryBill
    from vramtui.core.wizard.proposal import Proposal
    from vramtui.core.wizard.propose import first_of_a_pair

    def bill(mib: float) -> MemoryBill:
        made = MemoryBill()
        made.add(HOST, "kv_cache", int(mib * MIB))
        return made

    sizes = {(): 64.5, ("parallel",): 66.5, ("context",): 48.5, ("context", "parallel"): 40.0}

    class Model:
        def predict(self, profile: Profile) -> MemoryBill:
            changed = tuple(sorted(k for k in ("context", "parallel") if profile.params.get(k) != start[k]))
            return bill(sizes[changed])

        def fits(self, made: MemoryBill) -> bool:
            return needed_bytes(made) <= 45 * MIB

    start = {"context": 4096, "parallel": 2}
    profile = Profile(backend="llama.cpp", model="m.gguf", params=dict(start), port=0)
    parallel = Proposal("parallel", 2, 1, "why", "fewer slots")
    context = Proposal("context", 4096, 2048, "why", "a shorter context")
    options = [(None, parallel, bill(66.5)), (None, context, bill(48.5))]
    chosen = first_of_a_pair(Model(), profile, options)  # type: ignore[arg-type]
    assert chosen is context and "a change of parallel after it makes it fit" in chosen.why


def test_a_budget_judged_on_rss_bills_no_thread_stacks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """QA 22 #2, QA 23: an attached llama-server (-c 4096 -np 2) over a 60 MiB budget judged on its RSS was
    told parallel 2 -> 1, which freed only the second slot's 8 MiB thread stack: address space the launcher's
    cap counts, never resident. The attached wizard's model bills no stacks, and parallel is no step."""
    from vramtui.core.wizard.budget import MemoryModel
    from vramtui.core.wizard.observe import Observation
    from vramtui.core.wizard.propose import Findings, Proposer

    profile = _under_a_host_budget(tmp_path, monkeypatch, layers=4, context=4096, parallel=2, budget_mib=60)
    capped = MemoryModel(profile)  # the launcher's address-space cap: the stacks count
    assert capped.predict(profile).get("runtime", HOST) == 8 * MIB  # type: ignore[union-attr]
    resident = MemoryModel(profile)
    resident.address_space = False  # as AttachedWizard sets it
    assert resident.predict(profile).get("runtime", HOST) == 0  # type: ignore[union-attr]
    over = Observation(
        ready=False, smoke_ok=True, stage="inference", failure_stage=None, failure="host_oom",
        peak_mib=71.0, budget_mib=60.0,
    )  # fmt: skip
    assert over.runs_over_budget
    proposal = Proposer(resident, Findings()).propose(profile, over, set())
    assert proposal is not None and proposal.param != "parallel", proposal


def test_a_context_cut_says_what_each_slot_keeps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """QA 12: context steps went down to 256 tokens a slot, said only as "long prompts no longer fit"."""
    from vramtui.core.wizard.budget import MemoryModel
    from vramtui.core.wizard.reach import slot_share_words

    monkeypatch.setattr("vramtui.core.wizard.budget._host_baseline", lambda profile: 147 * MIB)
    model_file = tmp_path / "m.gguf"
    write_tiny_gguf(model_file, TinyModelSpec(n_layer=2, n_embd=64, n_ff=128))
    slots16 = Profile(
        backend="llama.cpp", model=str(model_file), params={"parallel": 16}, memory_budget=250 * MIB
    )
    said = slot_share_words(MemoryModel(slots16), slots16, 4096)
    assert (
        said is not None and said.startswith("each of the 16 slots gets 256 tokens") and "fewer slots" in said
    )
    assert "hardly" not in (slot_share_words(MemoryModel(slots16), slots16, 32768) or "")
    one = slots16.with_param("parallel", 1)
    assert slot_share_words(MemoryModel(one), one, 4096) is None
    vllm = Profile(backend="vllm", model=str(model_file), params={"parallel": 16})
    assert slot_share_words(MemoryModel(vllm), vllm, 4096) is None  # its context is each request's
    # QA 16: slots left to llama-server are 4 in one unified cache (its log: "kv_unified = true"); -kvu too
    auto = Profile(backend="llama.cpp", model=str(model_file), memory_budget=250 * MIB)
    assert slot_share_words(MemoryModel(auto), auto, 512) == (
        "the 4 slots share one cache of 512 tokens: one request may use all of it"
    )
    kvu = slots16.with_param("kv_unified", True)
    assert "one request may use all of it" in (slot_share_words(MemoryModel(kvu), kvu, 4096) or "")


def test_fewer_slots_only_where_the_slots_split_the_context(tmp_path: Path) -> None:
    """QA 36 F4's follow-up: where llama-server's slots split one context and each got under a short chat
    turn, fewer slots (as many as keep 1024 tokens each); never where each request has the whole context."""
    from vramtui.core.wizard.budget import MemoryModel
    from vramtui.core.wizard.reach import fewer_slots_move

    model_file = tmp_path / "m.gguf"
    write_tiny_gguf(model_file, TinyModelSpec(n_layer=2, n_embd=64, n_ff=128))

    def move(backend: str, skipped: frozenset[str] = frozenset(), **params: object) -> object:
        profile = Profile(backend=backend, model=str(model_file), params=params)
        return fewer_slots_move(MemoryModel(profile), profile, set(skipped))

    sixteen = move("llama.cpp", context=4096, parallel=16)
    assert sixteen is not None and (sixteen.param, sixteen.from_, sixteen.to) == ("parallel", 16, 4)  # type: ignore[attr-defined]
    assert sixteen.knob == "--parallel" and "4 slots get 1,024 tokens each" in sixteen.why  # type: ignore[attr-defined]
    one = move("llama.cpp", context=512, parallel=2)
    assert one is not None and one.to == 1 and "1 slot gets 512 tokens" in one.why  # type: ignore[attr-defined]
    assert move("llama.cpp", context=4096, parallel=4) is None  # 1024 each: a chat turn
    assert move("llama.cpp", frozenset({"parallel"}), context=1024, parallel=4) is None  # the user keeps them
    assert move("llama.cpp", context=1024, parallel=4, kv_unified=True) is None  # one request may use all
    assert move("llama.cpp", context=1024) is None  # llama-server's own 4 slots share one unified cache
    assert move("vllm", context=1024, parallel=4) is None  # the context is each request's


def test_unsloth_and_iq_siblings_are_smaller_files_by_their_bits(tmp_path: Path) -> None:
    """A folder of Unsloth's files (UD-Q4_K_XL beside UD-Q3_K_XL, UD-IQ2_M, UD-Q8_K_XL): the next smaller
    file is offered, most bits first. Only the names of a fixed list were ranked, so none was."""
    from vramtui.core.wizard.propose import _smaller_files

    names = (
        "Qwen-BF16", "Qwen-UD-Q8_K_XL", "Qwen-Q6_K_L", "Qwen-UD-Q4_K_XL", "Qwen-UD-Q3_K_XL", "Qwen-UD-IQ2_M",
        "Qwen-UD-TQ1_0", "Qwen-UD-Q4_K_XL-mmproj",
    )  # fmt: skip
    for name in names:
        (tmp_path / f"{name}.gguf").write_bytes(EMPTY_GGUF)
    smaller = [Path(str(p)).stem for p in _smaller_files(str(tmp_path / "Qwen-UD-Q4_K_XL.gguf"))]
    assert smaller == ["Qwen-UD-Q3_K_XL", "Qwen-UD-IQ2_M", "Qwen-UD-TQ1_0"]
    # a BF16 file and Unsloth's UD- files are one model's (QA 18: only Q6_K_L was its sibling)
    smaller = [Path(str(p)).stem for p in _smaller_files(str(tmp_path / "Qwen-BF16.gguf"))]
    assert (
        smaller[:3] == ["Qwen-UD-Q8_K_XL", "Qwen-Q6_K_L", "Qwen-UD-Q4_K_XL"]
        and smaller[-1] == "Qwen-UD-TQ1_0"
    )


@pytest.mark.parametrize(
    ("file_name", "printed", "applied"),
    [
        ("m-Q4_K_M.gguf", "Q4_K - Medium", True),
        ("m-UD-Q4_K_XL.gguf", "Q4_K - Medium", True),  # Unsloth's mix says the file type it starts from
        ("m-IQ3_M.gguf", "IQ3_S mix - 3.66 bpw", True),
        ("m-Q4_K_M.gguf", "Q8_0", False),
    ],
)
def test_a_switch_of_file_is_confirmed_by_the_file_type_llama_cpp_prints(
    demo_model: Path, tmp_path: Path, file_name: str, printed: str, applied: bool
) -> None:
    """The log prints the file type's first word ("Q4_K - Medium"): a switch to a Q4_K_M file read as
    "switched to a q4_k_m file but the log shows file type q4_k", not applied."""
    from vramtui.core.wizard.budget import MemoryModel
    from vramtui.core.wizard.proposal import Proposal
    from vramtui.core.wizard.verify import took_effect

    log = tmp_path / "run.log"
    log.write_text(f"print_info: file type   = {printed}\n")
    after = observe(_llama_run(ready=True, log_file=str(log)))
    before_profile = Profile(backend="llama.cpp", model=str(demo_model))
    target = str(tmp_path / file_name)
    after_profile = Profile(backend="llama.cpp", model=target)
    model = MemoryModel(before_profile, device_bytes=8 << 30)
    proposal = Proposal("model", str(demo_model), target, "test")
    done, why = took_effect(model, proposal, None, after, before_profile, after_profile)
    assert done is applied, why


def test_the_echoed_settings_are_read_in_the_engines_own_words(tmp_path: Path) -> None:
    """llama.cpp's "file type =" and "K (q4_0): ... V (q4_0):" lines are its words: the same lines in a
    vLLM run's log are not read as its settings, and a run of an engine this version does not know has
    none (no error)."""
    log = tmp_path / "run.log"
    log.write_text(KV_PRINTED + "print_info: file type   = Q4_K - Medium\n")
    assert observe(_llama_run(ready=True, log_file=str(log))).facts == {
        "kv_type": "q4_0",
        "kv_type_k": "f16",
        "file_type": "q4_k",
    }
    for backend in ("vllm", "no-such-engine", ""):
        check = SimpleNamespace(backend=backend, ready=True, diagnosis=None, smoke=None, log_file=str(log))
        assert observe(check).facts == {}


def test_a_change_that_freed_nothing_is_rolled_back_before_the_next(demo_model: Path) -> None:
    """QA 18 F3: a change recorded as "no progress" (here a run stopped at the budget again, its peak
    capped there) stayed in the profile, and the saved profile kept it on top of the change that worked.
    Now the profile goes back to the settings before it, the step says so, and the next proposal changes
    another setting (that one is not offered again until a change moves the run on)."""
    runs = iter((1400.0, 900.0, 900.0))

    def stopped_at_budget(profile: Profile) -> Any:
        return SimpleNamespace(
            ready=False, stage="kv_cache", failure_stage="kv_cache", failure="cuda_oom", diagnosis=None,
            smoke=None, log_file=None, peak_mib=next(runs),
        )  # fmt: skip

    profile = _demo_profile(demo_model)
    wizard = Wizard(profile, runner=stopped_at_budget, record=False)
    wizard.start()
    first = wizard.propose()
    assert first is not None
    step = wizard.apply(first)
    assert step.outcome == "no_progress" and step.rolled_back
    assert wizard.profile.params == profile.params and wizard.profile.model == profile.model
    assert any(note.startswith(f"rolled back to {first.param} = ") for note in step.notes), step.notes
    following = wizard.propose()
    assert following is not None and following.param != first.param
    assert wizard.steps[-1].to_dict()["rolled_back"] is True


def test_a_room_bound_a_later_run_disproves_gives_way(demo_model: Path) -> None:
    """QA 20 D7: the first launch failed at the weights with no size printed, read as "the weights as a whole
    did not fit" (room under 21 MiB); the next one held those 21 MiB of weights and failed on a 32 MiB KV
    cache. The room stayed 21 MiB, so no change could fit and the wizard stopped after one step. A bound
    the run's own allocated buffers disprove gives way to the new one (room under 53 MiB)."""
    from vramtui.core.wizard.budget import MemoryModel
    from vramtui.core.wizard.observe import Observation

    profile = _demo_profile(demo_model).with_changes(memory_budget=200 * MIB)
    model = MemoryModel(profile)
    weights = model.raw(profile).get("weights", model.place)  # type: ignore[union-attr]
    at_weights = Observation(
        ready=False, smoke_ok=None, stage="load_weights", failure_stage="load_weights", failure="host_oom"
    )
    model.learn(profile, at_weights)
    assert model.room_upper == weights
    at_cache = Observation(
        ready=False, smoke_ok=None, stage="kv_cache", failure_stage="kv_cache", failure="host_oom",
        figures={"failed_alloc": 32 * MIB}, engine={"model_buffer": weights},
    )  # fmt: skip
    model.learn(profile, at_cache)
    assert model.room_upper == weights + 32 * MIB


def test_a_vllm_server_over_its_budget_with_kv_set_outright_gets_a_smaller_kv_cache(tmp_path: Path) -> None:
    """QA 29 Q6: a hand-started vLLM (CPU build) with --kv-cache-memory-bytes 256M ran at 1920 MiB; under a
    1850 MiB budget `wizard --attach` read "no setting left that this backend can change": fewer sequences,
    fp8 or a shorter context free nothing of a cache sized outright. Its bytes do, and the room is what the
    engine leaves at that peak (1920 - 259 MiB of buffers): about 189 MiB, so 192 MiB would still be over."""
    from vramtui.core.demo.tinyhf import write_tiny_hf

    model = write_tiny_hf(tmp_path / "tiny-hf")

    def over_budget(profile: Profile) -> Any:
        return SimpleNamespace(
            ready=False, stage="inference", failure_stage="kv_cache", failure="host_oom", diagnosis=None,
            smoke=SimpleNamespace(ok=True), log_file=None, peak_mib=1920.0, memory_budget_mib=1850.0,
        )  # fmt: skip

    params = {"context": 2048, "kv_cache_memory": "256M"}
    profile = Profile(backend="vllm", model=str(model), params=params, memory_budget=1850 * MIB)
    wizard = Wizard(profile, runner=over_budget, record=False)
    wizard.start()
    proposal = wizard.propose()
    assert proposal is not None, wizard.proposer.findings.stop_reason
    assert (proposal.param, proposal.to) == ("kv_cache_memory", "128MiB"), proposal.why
    room = wizard.proposer.model.room()
    assert room is not None and 180 * MIB < room < 195 * MIB
    # a cache the share sizes has no bytes to lower: no such step
    shared = Profile(backend="vllm", model=str(model), params={"context": 2048}, memory_budget=1850 * MIB)
    shared_wizard = Wizard(shared, runner=over_budget, record=False)
    shared_wizard.start()
    step = shared_wizard.propose()
    assert step is None or step.param != "kv_cache_memory"


def test_a_smaller_kv_cache_is_never_below_one_request() -> None:
    """vLLM refuses to start a cache set outright that cannot hold one request of the whole context: the
    step down stops above that (Qwen2.5-0.5B: 12 KiB a token, 384 MiB for one 32768-token request)."""
    from vramtui.core.backends import get_backend

    config = (
        Path(__file__).resolve().parents[2] / "data" / "configs" / "Qwen--Qwen2.5-0.5B-Instruct.config.json"
    )
    params = {"context": 32768, "kv_cache_memory": "512MiB"}
    profile = Profile(backend="vllm", model=str(config), params=params, memory_budget=4 * 1024 * MIB)
    wizard = Wizard(profile, runner=lambda _profile: None, record=False)
    (rung,) = [r for r in get_backend("vllm").rungs("kv_cache") if r.param == "kv_cache_memory"]
    values = wizard.proposer.candidates(rung, "512MiB", profile)
    assert values and "256MiB" not in values and all(v in ("384MiB",) for v in values), values


def test_check_s_first_move_predicts_what_the_step_launches(demo_model: Path, tmp_path: Path) -> None:
    """QA 31 W11: `check --json` gave `first_move.predicted_mib` 1122.5 (flash attention and the q4_0 cache
    it prepares, together) where the wizard's record of the same step said 2594.5 (flash attention alone,
    what it launches). Both now give the launched change's figure; the pair's stays in the reason."""
    from vramtui.core.wizard.wizard import first_move

    profile = _demo_profile(demo_model, memory_budget=1621 * MIB)  # room for f16 at 32k or q4_0 at 262144
    failed = ReplayedRuns(tmp_path / "check")
    (tmp_path / "check").mkdir()
    move = first_move(profile, failed(profile))
    assert move is not None and move.param == "flash_attn" and move.then == ("kv_dtype", "q4_0")
    wizard = Wizard(profile, record_path=tmp_path / "rec.jsonl", auto=True, runner=ReplayedRuns(tmp_path))
    wizard.start()
    proposal = wizard.propose()
    assert proposal is not None and (proposal.param, proposal.to) == (move.param, move.to)
    step = wizard.apply(proposal)
    assert step.proposal is not None and step.proposal.predicted_mib is not None
    assert move.predicted_mib == pytest.approx(step.proposal.predicted_mib)
    assert "then with kv_dtype = q4_0 too it needs about" in move.why  # the pair's figure, said


def test_a_smaller_micro_batch_is_offered_every_power_of_two_below_the_one_asked() -> None:
    """QA 34 L5: from -ub 4096 the first value the wizard could take was 256, below llama-server's default
    of 512, where its own figures put 1024 and 512 within the margin; the arithmetic picks among them all."""
    from vramtui.core.wizard.propose import candidates

    rung = next(r for r in ladder_for("inference", "llama.cpp") if r.param == "ubatch")
    profile = Profile(backend="llama.cpp", model="m.gguf", params={"ubatch": 4096})
    assert candidates(rung, 4096, profile, 12) == [2048, 1024, 512, 256, 128, 64, 32]
    assert candidates(rung, 512, profile, 12) == [256, 128, 64, 32]
    assert candidates(rung, 300, profile, 12) == [256, 128, 64, 32]
    assert candidates(rung, 32, profile, 12) == []
