"""The lines a run prints at its end (after the short summary, before the counts): what tests asked to say
(`summary_line`, e.g. the browser sweep's count), and how many tests skipped for want of ../shared.

A test's line travels in its report (`user_properties`), not in the process that ran it, so it reaches the end of
a run in parallel too: under pytest-xdist a worker runs the test and the controller, which prints the summary,
only sees the reports. tests/conftest.py imports these hooks; tests/test_summary.py runs them in a small project,
serially and in parallel."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from builders import SHARED_ABSENT, SHARED_TRACES

SUMMARY_PROPERTY = "summary_line"
"""The name of a test's user property that holds one line to print at the end of the run."""


@pytest.fixture
def summary_line(request: pytest.FixtureRequest) -> Callable[[str], None]:
    """Say something at the end of the run, even when output is captured (the browser sweep's count)."""

    def say(line: str) -> None:
        request.node.user_properties.append((SUMMARY_PROPERTY, line))

    return say


def said(terminalreporter: pytest.TerminalReporter) -> list[str]:
    """The lines tests said, in the order their tests ended: each test's teardown report (its last) carries the
    user properties of all its phases."""
    return [
        value
        for reports in terminalreporter.stats.values()
        for report in reports
        if getattr(report, "when", None) == "teardown"
        for name, value in report.user_properties
        if name == SUMMARY_PROPERTY
    ]


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> Iterator[None]:
    """What tests said, then how many tests skipped for want of ../shared, and how to get them."""
    yield
    for line in said(terminalreporter):
        terminalreporter.write_line(line)
    skipped = [report for report in terminalreporter.stats.get("skipped", []) if SHARED_ABSENT in str(report.longrepr)]
    if skipped:
        terminalreporter.write_line(
            f"{len(skipped)} tests skipped: they need the real public traces in {SHARED_TRACES.parent}, which is "
            "absent; put a copy of the shared folder (shared/traces, shared/repro) beside this checkout to run them "
            "(docs/development.md, Real traces)"
        )
