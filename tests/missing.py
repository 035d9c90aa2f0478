"""The line a run ends with when tests skipped for a missing service.

``tests.services.unavailable`` attaches a ``Missing`` to the skip it raises;
this plugin counts the tests that skipped with one and prints, after pytest's
own summary, one line grouped by service with the command that provides each.
Nothing is printed when no test skipped for that. conftest.py loads it
(``-p tests.missing`` loads it in any other run)::

    skipped 10 tests: prometheus-alertmanager missing (needs root: sudo apt-get install ...)
"""

from __future__ import annotations

from collections import Counter

import pytest

from tests.services import Missing

_SKIPPED = pytest.StashKey[Counter]()


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_SKIPPED] = Counter()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    missing = getattr(call.excinfo.value, "missing", None) if call.excinfo else None
    if report.skipped and isinstance(missing, Missing):
        item.config.stash[_SKIPPED][missing] += 1
    return report


def _tests(n: int) -> str:
    return f"{n} test" if n == 1 else f"{n} tests"


def summary(skipped: Counter) -> str | None:
    """``skipped N tests: <service> missing [for K] (<hint>); ...``, most skipped first."""
    if not skipped:
        return None
    groups = [f"{m.service} missing{f' for {n}' if len(skipped) > 1 else ''} ({m.hint()})"
              for m, n in skipped.most_common()]
    return f"skipped {_tests(sum(skipped.values()))}: " + "; ".join(groups)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config):
    # Outside pytest's own summary wrapper: printed after its short test summary.
    result = yield
    line = summary(config.stash[_SKIPPED])
    if line:
        terminalreporter.write_line(line, yellow=True, bold=True)
    return result
