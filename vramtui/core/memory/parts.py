"""The one memory vocabulary: the parts a model server's memory is made of, per device and on the host.

The estimate, the figures an engine prints in its log, the wizard's measurements, the CLI's text,
`--json` and the panes all name memory with these parts, so a figure means the same thing wherever it
is shown. A place is a device index (0, 1, ...) or `HOST` (host RAM: offloaded layers and experts,
mmapped weights, llama.cpp's repacked copies, the prompt cache).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

Part = Literal[
    "weights", "kv_cache", "recurrent_state", "compute", "output", "runtime", "cuda_graphs", "margin"
]
PARTS: tuple[Part, ...] = (
    "weights",  # the model's tensors
    "kv_cache",  # attention keys and values, grows with context x sequences
    "recurrent_state",  # Mamba / linear-attention / short-conv state: per sequence, not per token
    "compute",  # the engine's scratch for one forward pass: llama.cpp's compute buffer on each device and
    # its pinned one on the host (CUDA_Host: the graph's inputs), vLLM's activation peak
    "output",  # logits and sampled ids (llama.cpp's output buffer)
    "runtime",  # the engine's own share: CUDA context, cuBLAS workspaces, non-torch memory
    "cuda_graphs",  # captured CUDA graphs (vLLM, SGLang)
    "margin",  # allocator fragmentation and the safety margin an engine keeps
)
LABELS: dict[Part, str] = {
    "weights": "weights",
    "kv_cache": "KV cache",
    "recurrent_state": "recurrent state",
    "compute": "compute buffers",
    "output": "output buffer",
    "runtime": "runtime (CUDA context)",
    "cuda_graphs": "CUDA graphs",
    "margin": "margin",
}


def part_label(part: Part, place: object = None) -> str:
    """A part's words where it sits: the runtime in host RAM is the engine process's own memory, not a
    CUDA context."""
    return "runtime (the process)" if part == "runtime" and place == HOST else LABELS[part]


# The `--json` key of each part: the first ones are the keys users already script against.
JSON_KEYS: dict[Part, str] = {
    "weights": "weights_bytes",
    "kv_cache": "kv_cache_bytes",
    "recurrent_state": "recurrent_state_bytes",
    "compute": "compute_buffer_bytes",
    "output": "output_buffer_bytes",
    "runtime": "runtime_bytes",
    "cuda_graphs": "cuda_graphs_bytes",
    "margin": "margin_bytes",
}
# The log engine's figure keys (Diagnosis.engine_figures) that are a memory part as printed.
FIGURE_PARTS: dict[str, Part] = {
    "model_buffer": "weights",
    "weights_loaded": "weights",
    "kv_buffer": "kv_cache",
    "rs_buffer": "recurrent_state",
    "compute_buffer": "compute",
    "activation_peak": "compute",
    "output_buffer": "output",
    "non_torch_memory": "runtime",
    "kv_cache_available": "kv_cache",  # vLLM's "Available KV cache memory": what it gives the KV cache
    "cuda_graphs": "cuda_graphs",
}

HOST = "host"
Place = int | str  # a device index, or HOST


@dataclass
class MemoryBill:
    """Bytes by place and part; the sum of what a configuration needs (estimated or measured)."""

    places: dict[Place, dict[Part, int]] = field(default_factory=dict)

    def add(self, place: Place, part: Part, nbytes: int) -> None:
        if nbytes:
            slot = self.places.setdefault(place, {})
            slot[part] = slot.get(part, 0) + int(nbytes)

    def get(self, part: Part, place: Place | None = None) -> int:
        """One part's bytes at one place, or over every device when `place` is None (host apart)."""
        if place is not None:
            return self.places.get(place, {}).get(part, 0)
        return sum(parts.get(part, 0) for where, parts in self.places.items() if where != HOST)

    def total(self, place: Place | None = None) -> int:
        """Every part at one place, or over every device when `place` is None (host apart)."""
        return sum(self.get(part, place) for part in PARTS)

    def devices(self) -> list[int]:
        return sorted(where for where in self.places if isinstance(where, int))

    def describe(self, place: Place | None = None) -> str:
        """`weights 120 MiB, KV cache 64 MiB, ...`: the parts that are there, in the vocabulary's order."""
        from vramtui.core.units import format_bytes

        shown = [(part_label(part, place), self.get(part, place)) for part in PARTS]
        return ", ".join(f"{label} {format_bytes(value)}" for label, value in shown if value)

    def on_host(self) -> MemoryBill:
        """The same parts with every device's moved to the host: an engine that printed them without a
        device ran on the CPU (vLLM's CPU build, a llama.cpp without a GPU backend)."""
        moved = MemoryBill()
        for parts in self.places.values():
            for part, nbytes in parts.items():
                moved.add(HOST, part, nbytes)
        return moved

    def by_place(self) -> dict[str, dict[str, int]]:
        """`{"0": {"weights_bytes": ..}, "host": {..}}`: each place's parts under their JSON keys (devices
        first, then the host), for `--json`."""
        order = [*self.devices(), *([HOST] if HOST in self.places else [])]
        return {
            str(place): {
                JSON_KEYS[part]: self.places[place][part] for part in PARTS if part in self.places[place]
            }
            for place in order
        }

    def to_dict(self) -> dict[str, int]:
        """The device parts under their JSON keys (every device summed), and the host's total."""
        out = {JSON_KEYS[part]: self.get(part) for part in PARTS}
        out["host_bytes"] = self.total(HOST)
        return out


def bill_from_figures(figures: Mapping[str, int | float], host_devices: Iterable[str] = ()) -> MemoryBill:
    """The bill an engine printed: `Diagnosis.engine_figures` (keys `part` or `part.DEVICE`) by part.

    A per-device key (`model_buffer.CUDA0`) lands on that device's index; names in `host_devices`
    (and the CPU buffers llama.cpp names CPU, CPU_Mapped, CUDA_Host, CPU_REPACK...) land on the host.
    Totals without a device go to device 0 when no per-device key of the same figure was seen.
    """
    host_names = {name.lower() for name in host_devices}
    bill = MemoryBill()
    per_device = {key.split(".", 1)[0] for key in figures if "." in key}
    for key, value in figures.items():
        name, _, device = key.partition(".")
        part = FIGURE_PARTS.get(name)
        if part is None or (not device and name in per_device):
            continue
        bill.add(_place_of(device, host_names), part, int(value))
    return bill


def is_cpu_backend_buffer(device: str) -> bool:
    """A buffer of llama.cpp's CPU backend itself: CPU, CPU_Mapped, CPU_REPACK, the AMX copy. (A GPU
    build's pinned CUDA_Host buffer is host memory too, but only a GPU backend allocates it.)"""
    return device.upper().startswith(("CPU", "AMX"))


def is_host_buffer(device: str) -> bool:
    """A buffer llama.cpp keeps in host memory: CPU, CPU_Mapped, CPU_REPACK, CUDA_Host, the AMX copy."""
    upper = device.upper()
    return is_cpu_backend_buffer(device) or upper.endswith("_HOST") or upper in ("?", "HOST")


def _place_of(device: str, host_names: set[str]) -> Place:
    if not device:
        return 0
    if device.lower() in host_names or is_host_buffer(device):
        return HOST
    digits = "".join(ch for ch in device if ch.isdigit())
    return int(digits) if digits else 0
