"""The stress check: N requests of the longest expected input, and whether the memory floor climbs."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from vramtui.core.errors import VramtuiError
from vramtui.core.launch.profile import Profile
from vramtui.core.units import MIB


@dataclass
class StressResult:
    """N requests of the longest expected input, the memory floor after each, and whether it climbs."""

    requests: int
    answered: int
    input_tokens: int
    floors_mib: list[float]
    peak_mib: float
    rising: bool
    verdict: str
    failures: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.answered == self.requests and not self.rising

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "requests": self.requests,
            "answered": self.answered,
            "input_tokens": self.input_tokens,
            "floors_mib": [round(v, 1) for v in self.floors_mib],
            "peak_mib": round(self.peak_mib, 1),
            "rising": self.rising,
            "verdict": self.verdict,
            "failures": self.failures,
        }


def rising_floor(floors: list[float], tolerance_mib: float = 8.0) -> bool:
    """A floor that climbs: the memory left after each request keeps growing (a leak or a cache that
    never gives back), by more than `tolerance_mib` over the run and never falling back."""
    if len(floors) < 3:
        return False
    steps = [b - a for a, b in itertools.pairwise(floors)]
    return floors[-1] - floors[0] > tolerance_mib and all(step > -1.0 for step in steps)


def stress_check(
    profile: Profile,
    requests: int = 5,
    input_tokens: int | None = None,
    max_tokens: int = 8,
    timeout_s: float = 300.0,
) -> StressResult:
    """Launch `profile`, send `requests` chat requests of `input_tokens` tokens one after another while
    the launcher samples the process tree, and flag a rising floor. The server is stopped at the end."""
    import httpx

    from vramtui.core.launch import procs
    from vramtui.core.launch.launcher import ModelServer

    context = int(profile.params.get("context") or profile.backend.default("context") or 2048)  # type: ignore[call-overload]
    # The longest input that leaves room for the answer and the chat template's own tokens.
    tokens = input_tokens if input_tokens is not None else max(16, context - max_tokens - 64)
    floors: list[float] = []
    failures: list[str] = []
    answered = 0
    peak = 0
    with ModelServer(profile) as server:  # entering starts it; leaving stops it, always
        if not server.wait_ready(profile.ready_timeout or 120):
            procs.raise_pending_interrupt()  # a ctrl-c stopped it: an interruption, not a server that failed
            raise VramtuiError(_not_up(server))
        # The demo's byte-level vocabulary makes one token per character; real tokenizers give fewer.
        body = {
            "model": server.plan.model_name,
            "messages": [{"role": "user", "content": ("a " * tokens)[: max(1, tokens)]}],
            "max_tokens": max_tokens,
        }
        with httpx.Client(timeout=timeout_s) as client:
            for number in range(requests):
                try:
                    reply = client.post(f"{server.base_url}/v1/chat/completions", json=body)
                    if reply.status_code == 200:
                        answered += 1
                    else:
                        failures.append(f"request {number + 1}: HTTP {reply.status_code} {reply.text[:120]}")
                except httpx.HTTPError as error:
                    procs.raise_pending_interrupt()  # the ctrl-c's kill of the server, not its failure
                    failures.append(f"request {number + 1}: {type(error).__name__}: {error}")
                    if not server.running:
                        break
                if server.pid is not None:
                    floors.append(procs.tree_rss(server.pid) / MIB)
                peak = max(peak, server.peak_bytes)
    rising = rising_floor(floors)
    if failures:
        verdict = f"{len(failures)} of {requests} requests failed: {failures[0]}"
    elif rising:
        verdict = (
            f"the memory floor climbs: {floors[0]:.0f} → {floors[-1]:.0f} MiB over {len(floors)} requests"
        )
    else:
        verdict = f"{answered} requests of {tokens} tokens answered; the floor stays level"
    return StressResult(requests, answered, tokens, floors, peak / MIB, rising, verdict, failures)


def _not_up(server: Any) -> str:
    """Why the stress check's own launch of the final profile did not come up, in one line: the diagnosis
    of its log (a launch under a host budget may die where the wizard's came up: QA saw llama-server's
    thread creation refused), and where the log is."""
    diagnosis = server.diagnosis()
    why = ""
    if diagnosis is not None and diagnosis.failed:
        why = f": {diagnosis.summary}"
    elif server.exit_code:
        why = f" (exit {server.exit_code})"
    where = f"; log: {server.log_file}" if server.log_file else ""
    return f"the stress check's launch of the final profile did not come up{why}{where}"
