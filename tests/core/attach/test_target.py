"""Targets as people type them: the URL a client is configured with is the server's."""

from __future__ import annotations

import pytest

from vramtui.core.attach.target import parse_target
from vramtui.core.errors import VramtuiError


@pytest.mark.parametrize(
    ("typed", "url"),
    [
        ("http://127.0.0.1:8080", "http://127.0.0.1:8080"),
        ("http://127.0.0.1:8080/", "http://127.0.0.1:8080"),
        ("http://127.0.0.1:8080/v1", "http://127.0.0.1:8080"),  # the OpenAI base URL of a client
        ("http://127.0.0.1:8080/v1/", "http://127.0.0.1:8080"),
        ("http://127.0.0.1:8080/health", "http://127.0.0.1:8080"),
        ("http://127.0.0.1:11434/api", "http://127.0.0.1:11434"),
        ("http://box/llm/v1", "http://box/llm"),  # a reverse proxy's prefix stays
        ("http://box/llm", "http://box/llm"),
    ],
)
def test_a_url_is_probed_from_the_server_root(typed: str, url: str) -> None:
    target = parse_target(typed)
    assert target.kind == "url" and target.url == url


def test_an_unclosed_ipv6_bracket_is_a_one_line_error() -> None:
    with pytest.raises(VramtuiError, match="not a URL"):
        parse_target("http://[::1")
