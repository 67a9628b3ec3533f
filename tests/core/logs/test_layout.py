"""Where the diagnosis keeps what: each engine's wording in its own module, no backend names compared."""

from __future__ import annotations

from pathlib import Path

from vramtui.core.backends.llama_cpp import log as llama_cpp
from vramtui.core.backends.sglang import log as sglang
from vramtui.core.backends.tgi import log as tgi
from vramtui.core.backends.transformers import log as transformers
from vramtui.core.backends.vllm import log as vllm
from vramtui.core.logs import rules as ls

LOGS = Path(__file__).resolve().parents[3] / "vramtui" / "core" / "logs"
FAMILIES = {
    llama_cpp: {"llama.cpp", "llama-cpp-python", "ollama"},
    vllm: {"vllm"},
    transformers: {"transformers"},
    sglang: {"sglang"},
    tgi: {"tgi"},
}
TABLES = ("STAGE_RULES", "ERROR_RULES", "NOTICE_RULES", "RECOVERY_RULES", "FIGURE_RULES")


def test_every_engine_rule_lives_in_its_engines_module_and_every_one_is_in_the_tables() -> None:
    pieces: set[int] = set()
    for module, names in FAMILIES.items():
        for value in vars(module).values():
            if (
                isinstance(value, tuple)
                and value
                and isinstance(value[0], ls.StageRule | ls.ErrorRule | ls.NoticeRule | ls.FigureRule)
            ):
                assert {rule.backend for rule in value} <= names, module.__name__
                pieces.update(id(rule) for rule in value)
    spliced = {id(rule) for table in TABLES for rule in getattr(ls, table)}
    assert pieces <= spliced, "an engine's rule the tables leave out"
    # What rules.py keeps itself belongs to no engine.
    own = [rule for table in TABLES for rule in getattr(ls, table) if id(rule) not in pieces]
    assert own and all(rule.backend == "" for rule in own)


def test_every_backend_the_diagnosis_reports_has_a_profile() -> None:
    assert set(ls.LOG_PROFILES) == set(ls.BACKEND_NAMES)
    assert all(name == profile.name for name, profile in ls.LOG_PROFILES.items())
    # A profile that names its own flags names a flag for every parameter the advice asks it for.
    for profile in ls.LOG_PROFILES.values():
        if profile.knobs is not None:
            assert {"context", "parallel", "mem_share"} <= set(profile.knobs), profile.name
