"""Errors: values for the model (`ToolError`), sentences for the user (`UserError`)."""

from __future__ import annotations


class ToolError(Exception):
    """A tool could not do what the model asked.

    The message goes back to the model as the tool result, so it must say what to do next.
    """

    def __init__(self, message: str, *, reason: str = "error") -> None:
        super().__init__(message)
        self.message = message
        self.reason = reason
        """Short machine-readable cause (`not_found`, `ambiguous`, `stale`, `path`, ...)."""


class UserError(Exception):
    """Something the user can fix (a setting, a flag, a URL); the message is one sentence."""
