"""Where tensors go: llama.cpp's `--cpu-moe`, `--n-cpu-moe N` and `-ot PATTERN=DEVICE` (host RAM or any GPU).

llama.cpp keeps one list of (regex, buffer type) overrides; each tensor takes the first rule whose regex
is found in its name (`std::regex_search`), else the place its layer gets (`--gpu-layers`). `--cpu-moe`
and `--n-cpu-moe N` add the rules below after the `-ot` ones, as `common/arg.cpp` does.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache

from vramtui.core.errors import VramtuiError

# llama.cpp's own pattern for the routed experts (gate, up and down; "chexps" in some conversions).
EXPERTS_PATTERN = r"\.ffn_(up|down|gate)_(ch|)exps"


@dataclass(frozen=True)
class TensorOverride:
    """One `-ot` rule: tensors whose name the pattern is found in go to `device` (CPU, CUDA0 ...)."""

    pattern: str
    device: str

    @property
    def to_host(self) -> bool:
        return device_index(self.device) is None


def device_index(device: str) -> int | None:
    """The place a buffer type name gives a tensor: None for host RAM (`CPU`, `CUDA_Host`, `CPU_REPACK`),
    else the GPU its digits name (`CUDA1`, `Vulkan0`, `ROCm2`, `SYCL0`; `Metal` and `MTL0` are GPU 0)."""
    upper = device.strip().upper()
    if upper.startswith(("CPU", "AMX")) or upper.endswith("_HOST") or upper in ("", "HOST"):
        return None
    digits = "".join(ch for ch in upper if ch.isdigit())
    return int(digits) if digits else 0


# the families of buffer type names ggml's backends register (CUDA0, CUDA_Host, ROCm1, Vulkan0, SYCL0, Metal,
# MTL0, CANN0, MUSA0, RPC[host:port], CPU_REPACK ...): llama-server refuses any other name ("unknown buffer type")
_FAMILY_NAMES = (
    "CPU", "AMX", "CUDA", "ROCm", "HIP", "Vulkan", "SYCL", "Metal", "MTL", "CANN", "MUSA", "OpenCL",
    "GPUOpenCL", "RPC", "BLAS", "WebGPU", "zDNN", "KleidiAI", "HTP", "Hexagon", "VirtGPU",
)  # fmt: skip
_BUFFER_FAMILIES = re.compile("|".join(_FAMILY_NAMES), re.IGNORECASE)


@cache
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def parse_override(text: str) -> TensorOverride:
    """`PATTERN=DEVICE` as llama.cpp takes it; a bad regex or a missing device is a one-line error."""
    pattern, sep, device = str(text).strip().rpartition("=")
    if not sep or not pattern or not device.strip():
        raise VramtuiError(f"{text!r}: use PATTERN=DEVICE, e.g. 'exps=CPU'")
    try:
        _compiled(pattern)
    except re.error as error:
        raise VramtuiError(f"--override-tensor {text!r}: not a regular expression ({error})") from None
    name = device.strip()
    found = _BUFFER_FAMILIES.match(name)
    if not found:
        raise VramtuiError(
            f"--override-tensor {text!r}: {name!r} is not a llama.cpp buffer type "
            "(CPU, CUDA0, ROCm0, Vulkan0, SYCL0, Metal ...; `llama-server --list-devices` names yours)"
        )
    spelled = next(family for family in _FAMILY_NAMES if family.lower() == found.group(0).lower())
    if not name.startswith(spelled):  # llama-server compares the names exactly: "cpu" is unknown to it
        raise VramtuiError(
            f"--override-tensor {text!r}: llama.cpp spells it {spelled}{name[len(spelled) :]} "
            "(its buffer type names are case-sensitive)"
        )
    return TensorOverride(pattern, device.strip())


def check_devices(chosen: Iterable[TensorOverride], cards: int) -> None:
    """A rule that names a GPU past the cards given (`-ot exps=CUDA1` on one card): llama-server has no such
    buffer type and refuses to start, so no estimate is made for it."""
    for rule in chosen:
        if rule.device.upper().startswith("RPC"):
            continue  # another machine's device: counted after this one's, not by its name
        index = device_index(rule.device)
        if index is not None and index >= cards:
            given = f"{cards} GPU" + ("s" if cards != 1 else "")
            raise VramtuiError(
                f"--override-tensor '{rule.pattern}={rule.device}': {rule.device} is GPU {index}, and the "
                f"estimate has {given} (give each card: --gpu-mem 24GiB,24GiB)"
            )


def rules(overrides: Iterable[str], cpu_moe: bool, n_cpu_moe: int | None) -> list[TensorOverride]:
    """The override list in llama.cpp's order: the `-ot` rules, then the expert rules."""
    found = [parse_override(text) for text in overrides]
    if cpu_moe:
        found.append(TensorOverride(EXPERTS_PATTERN, "CPU"))
    for layer in range(n_cpu_moe or 0):
        found.append(TensorOverride(rf"blk\.{layer}{EXPERTS_PATTERN}", "CPU"))
    return found


def matches_any(rule: TensorOverride, names: Iterable[str]) -> bool:
    pattern = _compiled(rule.pattern)
    return any(pattern.search(name) for name in names)


def placed(name: str, by_layer: int | None, chosen: list[TensorOverride]) -> int | None:
    """The device one tensor lands on (None: host RAM): the first rule found in its name, else its layer's."""
    for rule in chosen:
        if _compiled(rule.pattern).search(name):
            return device_index(rule.device)
    return by_layer
