"""The launcher's health check: one poll of an engine's health paths, and what an answer that is no
"ready" said (QA: a /health answering HTTP 500, or no HTTP at all, waited out the whole timeout and was
then told to raise `ready_timeout` as if a large model were loading)."""

from __future__ import annotations

import time
from collections.abc import Sequence


class HealthProbe:
    """Polls `paths` under a base URL; `said` keeps the last answer that was no "ready"."""

    def __init__(self, paths: Sequence[str]) -> None:
        self.paths = tuple(paths)
        self.said = ""  # "/health answered HTTP 500 (...)", "/health answered in no HTTP (...)"
        self.status: int | None = None  # that answer's HTTP status (None: no HTTP at all)
        self._not_http_since: float | None = None
        self._erring_since: float | None = None  # answering a server error (5xx, not 503) since

    @property
    def loading(self) -> bool:
        """The last answer was an engine's "still loading" (503: llama-server, TGI), worth waiting out."""
        return self.status == 503

    def ready(self, base_url: str) -> bool:
        """One poll: True when a path answers 200."""
        import httpx

        for path in self.paths:
            try:
                response = httpx.get(base_url + path, timeout=2.0)
            except (httpx.RemoteProtocolError, httpx.DecodingError) as error:
                self.said, self.status = f"{path} answered in no HTTP ({type(error).__name__})", None
                self._not_http_since = self._not_http_since or time.monotonic()
                return False
            except httpx.HTTPError:
                return False
            self._not_http_since = None
            if response.status_code == 200:
                self._erring_since = None
                return True
            erring = response.status_code >= 500 and response.status_code != 503
            self._erring_since = (self._erring_since or time.monotonic()) if erring else None
            body = " ".join(response.text[:80].split())
            self.status = response.status_code
            self.said = f"{path} answered HTTP {response.status_code}" + (f" ({body})" if body else "")
        return False

    def erring_for(self, seconds: float) -> bool:
        """Every answer for longer than `seconds` a server error (500: its handler raises on each poll): an
        engine that is still loading says 503, or does not listen yet (QA 26 D3: 120 s of HTTP 500 waited out)."""
        return self._erring_since is not None and time.monotonic() - self._erring_since > seconds

    def not_http_for(self, seconds: float) -> bool:
        """The port has answered in no HTTP for longer than `seconds` (an engine speaks HTTP once it listens)."""
        return self._not_http_since is not None and time.monotonic() - self._not_http_since > seconds
