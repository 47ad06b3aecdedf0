"""The one error type the library raises for bad input."""

from __future__ import annotations


class TraceError(Exception):
    """A trace that cannot be analyzed; the message names the file and the problem."""

    def __init__(self, source: str, problem: str) -> None:
        super().__init__(source, problem)
        self.source = source
        self.problem = problem

    def __str__(self) -> str:
        return f"{self.source}: {self.problem}"


class ConfigError(ValueError):
    """A FUSION_* setting or a user rule file that cannot be used; the message names it and the problem."""
