"""The kinds of rule the log diagnosis reads, so that each engine's log module can declare its own.

Every rule has an `anchor`: a lower-case literal that must occur in the lower-cased line before the
rule's regular expression is tried (the cheap prefilter). Regexes run on the lower-cased line unless a
rule says otherwise.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

# Pieces of patterns several tables share.
# a ggml device; an RPC device is a remote machine's GPU ("RPC0[10.0.3.67:50053]")
DEVICE = r"(?:(?:cuda|rocm|hip|vulkan|metal|sycl|cann|musa)\d*|rpc\d*(?:\[[^\]\s]*\])?)"
NUM = r"(?P<value>\d+(?:[.,]\d+)*)"
UNIT = r"\s*(?P<unit>[KMGT]i?B)"


def _rx(pattern: str | None, flags: int = 0) -> re.Pattern[str] | None:
    return re.compile(pattern, flags) if pattern else None


@dataclass(frozen=True)
class StageRule:
    """A line that shows the server is in `stage`."""

    anchor: str
    stage: str
    pattern: str | None = None
    backend: str = ""  # whose wording this is (documentation and tests; all rules apply to all logs)
    regex: re.Pattern[str] | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "regex", _rx(self.pattern))


@dataclass(frozen=True)
class ErrorRule:
    """A line that says why the run failed.

    `cause` is a finer name than the failure class (the advice keys on it). `stage` pins the stage
    when the wording itself says where it happened. `strong=False` marks a generic error ("failed to
    load model") that only counts when no specific cause shows up; its `hint` is the class to assume
    then. `case_sensitive` regexes run on the original line.
    """

    anchor: str
    cause: str
    failure: str
    pattern: str | None = None
    stage: str | None = None
    strong: bool = True
    hint: str | None = None
    backend: str = ""
    case_sensitive: bool = False
    # Where it most likely happened when no line says (a kernel fault: while serving); None: the class's
    default_stage: str | None = None
    regex: re.Pattern[str] | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "regex", _rx(self.pattern))


@dataclass(frozen=True)
class NoticeRule:
    """A quiet failure (`kind`: kernel_fallback, cpu_fallback, quant_unconfirmed), a recovery, or a mark."""

    anchor: str
    kind: str
    message: str
    pattern: str | None = None
    backend: str = ""
    # Marks (other notices' messages, kind "mark", space-separated) under which this one is not said: an
    # eager run on vLLM's CPU build has no CUDA graphs to miss.
    unless: str = ""
    # A mark this one is said only with: every layer on the CPU is news only where a GPU was found or
    # asked for (a CPU-only machine runs there on purpose).
    requires: str = ""
    # A recovery's reach: the error causes it clears, space-separated ("": every start-up error, as a
    # retry that loads the model after all). A request served after the KV cache was full clears "kv_full".
    clears: str = ""
    regex: re.Pattern[str] | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "regex", _rx(self.pattern))


# A context split over slots, where the log printed both (QA 6: -c 16384 -np 2 refused a 15752-token prompt
# at "8192 tokens"): each slot gets a share of the context
SLOTS_SPLIT = (
    "Each of the {slot_count} slots gets {per_slot} of the context's {context_cells} tokens: fewer slots "
    "({parallel} 1) give one request all of them; or raise {context} to {slot_count} x the request's tokens."
)

# Where vramtui's memory budget is set, for advice that says to raise it: `check`/`wizard --budget`, or the
# profile (QA 32 D7: a budget given as --budget has no memory_budget in the file to raise)
WHERE_BUDGET = "(`--budget`, or `memory_budget` under [limits] in the profile)"

# The mark of a warm-up the server runs without when it fails (a vision encoder's): an out-of-memory after it,
# in a run that came up, is a quiet failure of that part, not the run's.
OPTIONAL_WARMUP = "optional_warmup"

# The mark an engine's notice sets on a line it logs at ERROR level that states no failure (vLLM's dump of
# the step that failed, before the exception that says why): no first error, unless a rule names a cause.
NOT_AN_ERROR = "not_an_error"

# The figure an engine's rule sets where a second model's load begins (llama-server's speculative draft):
# every figure after it is that model's, filed as draft_<key>, and the model's own stay as they were.
DRAFT_MARK = "draft_model"
DRAFT_PREFIX = "draft_"
# The figure an engine's rule sets where a second cache of the same load begins (llama.cpp's sliding-window
# models print a full-context cache, then a window-sized one, each with its own buffer lines): the cache
# figures after it add to the first cache's, until its size line, instead of starting a new load.
CACHE_PART_MARK = "cache_part"
CACHE_PART_SUMS = ("kv_buffer", "kv_cache_size")  # the last one closes the part


@dataclass(frozen=True)
class FigureRule:
    """A number the engine printed about its own memory. Regex on the original line, case-insensitive.

    Groups: `device` (optional), `value`, `unit` (optional; `unit_default` otherwise). `per_device`
    figures are summed over devices; a device seen again starts a new set (a new load).
    """

    anchor: str
    key: str
    pattern: str
    unit_default: str = "MiB"
    per_device: bool = False
    count: bool = False  # a count (tokens, blocks), not bytes
    backend: str = ""
    regex: re.Pattern[str] | None = field(default=None, compare=False, repr=False)
    constant: float | None = None  # the value when the line says it in words ("disabled": 0), no group

    def __post_init__(self) -> None:
        object.__setattr__(self, "regex", re.compile(self.pattern, re.IGNORECASE))


@dataclass(frozen=True)
class Say:
    """One line of advice: a template, said when a condition of vramtui.core.logs.advice holds.

    `{name}` is filled with a value the diagnosis computed (a context that fits, the free share) or
    else with the engine's own flag for that shared parameter; a line that names a flag the engine
    does not have is dropped, or `otherwise` is said. A line "@topic" stands for the engine's lines
    for that topic (LogProfile.advice), else the default ones.
    """

    template: str
    when: str = ""  # a condition's name ("!name": unless it holds); "" always
    otherwise: str | None = None


@dataclass(frozen=True, eq=False)
class LogProfile:
    """What the diagnosis asks of one engine beyond its rules, as data (looked up by name).

    `advice` holds the engine's own lines for a topic of vramtui.core.logs.advice (they replace the
    default lines for that topic); a line is a template whose `{knob}` is filled with the engine's
    own flag (see advice.Say).
    """

    name: str  # as the diagnosis reports it
    prints_log_of: str = ""  # the engine whose log it prints (llama-cpp-python prints llama.cpp's)
    aliases: tuple[str, ...] = ()  # other names a user may give it
    reads_gguf: bool = False  # GGUF is the one format it reads (llama.cpp and what embeds it)
    is_torch: bool = False  # a PyTorch engine: safetensors/AWQ/GPTQ, PyTorch's caching allocator
    # Its flags, for an engine vramtui.core.backends does not model; None: ask its Backend.
    knobs: Mapping[str, str] | None = None
    # When its marks are few (under two) and these engines' many (over two), the log is theirs: one
    # "TP0]"-like mark of SGLang does not outweigh a vLLM log.
    outweighed_by: tuple[str, ...] = ()
    # When marks of several engines show up, the one with the highest precedence wins: an engine that
    # embeds others (Ollama runs llama.cpp, TGI and SGLang print torch's lines) outranks them.
    precedence: int = 0
    # Words of its server's command line, for an engine vramtui reads but does not launch (SGLang, TGI):
    # `vramtui ps` finds its servers by them (a Backend's own program says it for the others).
    command_words: tuple[str, ...] = ()
    # The names its processes have in the kernel's OOM-kill lines ("Killed process 123 (VLLM::Worker)",
    # cut to 15 characters): a kill of another process near the log's end is no confirmation.
    process_names: tuple[str, ...] = ()
    # It ends a failed launch by SIGKILLing its own process tree: the shell's "Killed" after an error
    # is that, not the OOM killer.
    kills_own_tree: bool = False
    # It takes its whole memory share while starting (the KV cache fills what the weights and the
    # profile leave): a process of it that ran out holding well under the card was still starting.
    holds_its_share: bool = False
    # A figure it prints rounded -> the exact figure that states the same bytes where the log has it, and
    # how far the rounding may take the printed one: the exact one is reported (QA 39 F4: vLLM's "0.12 GiB"
    # of KV cache read 122.88 MiB beside --kv-cache-memory-bytes 134217728)
    exact_figures: Mapping[str, tuple[str, float]] = field(default_factory=dict)
    advice: Mapping[str, tuple[str | Say, ...]] = field(default_factory=dict)


# The milestones a log can prove the run got past, in order, and the earliest stage a failure after each
# can be at: an error after the weights loaded is not a load failure, one after a request was served is
# the request's (the "stage = how far the log proves the run got").
MILESTONES: tuple[str, ...] = ("files", "weights", "cache", "listening", "served")
MILESTONE_FLOOR: dict[str, str] = {
    "files": "load_weights",
    "weights": "kv_cache",
    "cache": "kv_cache",
    "listening": "inference",
    "served": "inference",
}


@dataclass(frozen=True)
class ProgressRule:
    """A line that proves the run got past a milestone (MILESTONES), or that a new load began (`restart`:
    the milestones before it no longer bound a failure after it), or that the server is being stopped on
    purpose (`stop`: errors after it are the stop's consequences, not failures), or that a new server
    process began (`start`: a log appended to across restarts; a run before it without an error is over)."""

    anchor: str
    milestone: str  # one of MILESTONES, "restart", "stop" or "start"
    pattern: str | None = None
    backend: str = ""
    regex: re.Pattern[str] | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.milestone not in (*MILESTONES, "restart", "stop", "start"):
            raise ValueError(f"unknown milestone {self.milestone!r}")
        object.__setattr__(self, "regex", _rx(self.pattern))


@dataclass(frozen=True)
class FrameRule:
    """A bare exception that says what failed only by where it was raised: a traceback frame whose line
    holds `anchor` (a file or a function), closed by an exception named `exception`, is `rule`'s failure
    (transformers' `KeyError: 'qwen3'` out of configuration_auto.py is a model type it does not know)."""

    anchor: str  # lower case, in the frame's `File "...", line N, in NAME` line
    exception: str  # the exception's class name, as the line states it ("": any)
    rule: ErrorRule
    backend: str = ""
    # The cause of the exception line's own rule this frame makes finer ("": a bare exception's): CUDA's
    # "no kernel image" raised in a quantized GEMM is the quantization's kernel missing for this card
    refines: str = ""


Slots = tuple[tuple[str, tuple], ...]  # (slot, rules): where in a table an engine's rules go


@dataclass(frozen=True, eq=False)
class EngineLog:
    """One engine family's wording, table by table: what vramtui.core.logs.rules splices into its tables.

    The error, stage, notice and figure pieces are named by the slot of the table they go in (the slots
    and their order are the mechanism's, in rules.py: an engine adds its words to a family of failures,
    it does not decide precedence). The registry (vramtui.core.backends.engine_logs) hands them over.
    """

    name: str
    profiles: tuple[LogProfile, ...]
    stages: Slots = ()
    errors: Slots = ()
    notices: Slots = ()
    recoveries: tuple[NoticeRule, ...] = ()
    figures: Slots = ()
    marks: tuple[tuple[str, str], ...] = ()
    # (anchor, regex): a mark with a guard counts only on lines the regex finds (lower case)
    mark_guards: tuple[tuple[str, str], ...] = ()
    echo_cuts: tuple[tuple[str, str], ...] = ()
    progress: tuple[ProgressRule, ...] = ()
    frames: tuple[FrameRule, ...] = ()

    def slot(self, table: str, name: str) -> tuple:
        """This engine's rules for one slot of one table (empty when it has none there)."""
        return tuple(rule for slot, rules in getattr(self, table) for rule in rules if slot == name)

    def slot_names(self, table: str) -> set[str]:
        return {slot for slot, _ in getattr(self, table)}
