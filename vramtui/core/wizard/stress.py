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
    from vramtui.core.wizard.reach import request_context

    context = int(profile.params.get("context") or profile.backend.default("context") or 2048)  # type: ignore[call-overload]
    context = request_context(profile, context)  # one slot's share where the slots split it
    # The longest prompt that leaves room for the answer (the chat template's tokens are in the prompt's).
    tokens = input_tokens if input_tokens is not None else max(16, context - max_tokens - _SLACK_TOKENS)
    floors: list[float] = []
    failures: list[str] = []
    answered = 0
    peak = 0
    with ModelServer(profile) as server:  # entering starts it; leaving stops it, always
        if not server.wait_ready(profile.ready_timeout or 120):
            procs.raise_pending_interrupt()  # a ctrl-c stopped it: an interruption, not a server that failed
            raise VramtuiError(_not_up(server))
        url = f"{server.base_url}/v1/chat/completions"
        with httpx.Client(timeout=timeout_s) as client:
            text = _filler(_chars_for(client, url, server.plan.model_name, tokens))
            body = {"model": server.plan.model_name, "messages": [{"role": "user", "content": text}]}
            body["max_tokens"] = max_tokens
            for number in range(requests):
                try:
                    reply = client.post(url, json=body)
                    if reply.status_code == 200:
                        answered += 1
                        tokens = _prompt_tokens(reply) or tokens  # what the engine counted, where it says
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
        verdict = f"{answered} request{'s' if answered != 1 else ''} of {tokens} tokens answered; the floor stays level"
    return StressResult(requests, answered, tokens, floors, peak / MIB, rising, verdict, failures)


_SLACK_TOKENS = 16  # below the context: a tokenizer that counts a token more than the probes said
_PROBE_CHARS = 16  # the first of two short prompts whose counted tokens give the tokens per character


def _filler(chars: int) -> str:
    return ("a " * chars)[: max(1, chars)]


def _prompt_tokens(reply: Any) -> int | None:
    """The prompt's tokens as the engine counted them (the OpenAI reply's usage), or None."""
    try:
        counted = reply.json().get("usage", {}).get("prompt_tokens")
    except (ValueError, AttributeError):
        return None
    return counted if isinstance(counted, int) and counted > 0 else None


def _chars_for(client: Any, url: str, model: str, tokens: int) -> int:
    """Characters of filler that make a prompt of `tokens` tokens, template included, as this engine's
    tokenizer counts them: measured on two short prompts (QA 31 W6: the tiny model's tokenizer made two
    tokens of each character, and a prompt meant to fill a 4096 context asked for 8084). One character a
    token (the demo's byte-level vocabulary) where the engine does not say."""
    import httpx

    counted: list[int] = []
    probes = (_PROBE_CHARS, max(3 * _PROBE_CHARS, min(512, tokens // 4)))  # short of the context
    for chars in probes:
        body = {"model": model, "messages": [{"role": "user", "content": _filler(chars)}], "max_tokens": 1}
        try:
            reply = client.post(url, json=body)
        except httpx.HTTPError:
            return tokens
        found = _prompt_tokens(reply) if reply.status_code == 200 else None
        if found is None:
            return tokens
        counted.append(found)
    per_char = (counted[1] - counted[0]) / (probes[1] - probes[0])
    if per_char <= 0:
        return tokens
    overhead = counted[0] - probes[0] * per_char  # the chat template's own tokens
    return max(1, int((tokens - overhead) / per_char))


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
