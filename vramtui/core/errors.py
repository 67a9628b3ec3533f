"""The one error type users see: a clear one-line message, never a traceback."""

from __future__ import annotations


class VramtuiError(Exception):
    """A problem with the user's input or environment, worded for the user.

    `exit_code` is what the CLI exits with when this reaches it.
    """

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code

    def __str__(self) -> str:
        # One line, always: messages built from file contents must not smuggle newlines.
        return " ".join(super().__str__().split())
