"""What a memory budget leaves room for: arithmetic the diagnosis' advice, the engines' named fixes and the
wizard share (the address-space budget vramtui puts on a CPU run counts thread stacks and set-aside caches).
"""

from __future__ import annotations

from collections.abc import Mapping

# The stack each thread reserves in the address space (glibc takes RLIMIT_STACK: 8 MiB on Linux).
THREAD_STACK_BYTES = 8 << 20


# The threads a server starts beside one per slot (llama-server's HTTP pool: its slots and four more).
THREADS_BESIDE_SLOTS = 4


def threads_take_the_budget(threads: float | None, budget: float | None) -> bool:
    """A server's start-up threads (llama-server's HTTP pool: one per slot and a few) reserve more than a
    quarter of the budget in stacks, and one slot's would fit there: fewer slots let it start. Where even
    those few do not fit, the budget itself is too small."""
    if not threads or not budget:
        return False
    room = budget / 4 // THREAD_STACK_BYTES
    return threads > room >= THREADS_BESIDE_SLOTS + 1


def slots_whose_threads_fit(threads: float, slots: float | None, budget: float) -> int:
    """Slots whose threads' stacks take at most a quarter of the budget (a power of two, below `slots`
    where known): the threads beyond the slots (`threads - slots`) stay."""
    extra = max(int(threads - slots), 0) if slots else THREADS_BESIDE_SLOTS
    room = int(budget / 4 // THREAD_STACK_BYTES) - extra
    value = 1
    while value * 2 <= room and (not slots or value * 2 < slots):
        value *= 2
    return value


def kv_bytes_for_budget(kv_bytes: float, budget: float, used: float = 0.0) -> int:
    """A KV cache sized outright for a host budget it did not fit: half of what the budget leaves beside
    what the engine already held (`used`), never more than half the cache that failed; whole MiB."""
    room = budget - used if budget > used else budget
    return max(16, int(min(kv_bytes, room) / 2) >> 20) << 20


def kv_bytes_for_request(request: float) -> int:
    """A KV cache set outright to hold one request of `request` bytes: the power of two above it, at least
    16 MiB (the wizard's step and diagnose's advice alike: QA 29 Q10, 16MiB beside 8M for one log)."""
    size = 16 << 20
    while size < request:
        size *= 2
    return size


def kv_set_aside(figures: Mapping[str, float]) -> float | None:
    """The KV cache an engine sized in bytes before allocating it (vLLM's: the bytes asked for, else what
    its share left), from a log's figures; None when it printed neither."""
    return figures.get("kv_cache_memory_bytes") or figures.get("kv_cache_available") or None


def one_request_kv_bytes(figures: Mapping[str, float]) -> float | None:
    """What one request of the context needs in a KV cache set outright: scaled from the tokens the cache
    holds, else the engine's own figure, said to a tenth of a GiB (so up to 0.05 GiB more)."""
    kv_bytes, context, fit = (
        figures.get(k) for k in ("kv_cache_memory_bytes", "context", "max_model_len_fit")
    )
    if kv_bytes and context and fit:
        return kv_bytes * context / fit
    needed = figures.get("kv_cache_needed")
    return needed + 0.05 * (1 << 30) if needed is not None else None
