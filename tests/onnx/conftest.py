"""Counts the ONNX conformance cases by category and outcome and prints them after the run."""

from __future__ import annotations

import re
from collections import Counter, defaultdict

_counts: Counter = Counter()
_excluded: dict[str, list[str]] = defaultdict(list)
_CATEGORY = re.compile(r"OnnxBackend(\w+?)(?:Model)?Test::(\w+)")
OUTCOMES = ("pass", "expected failures", "unexpected successes", "FAILED", "excluded",
            "not included", "skipped")


def _outcome(report) -> str | None:
    if report.when == "setup":
        return "skipped" if report.skipped else None
    if report.when != "call":
        return None
    if hasattr(report, "wasxfail"):
        return "expected failures"
    if report.passed:
        return "pass"
    if report.failed:
        # a listed expected failure that passed: pytest reports it as a failure
        unexpected = report.longreprtext.startswith("Unexpected success")
        return "unexpected successes" if unexpected else "FAILED"
    # BackendTest's exclude() and include() skip cases with unittest.skip and a reason
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else ""
    if "matched exclude pattern" in reason:
        return "excluded"
    return "not included" if "no matched include pattern" in reason else "skipped"


def pytest_runtest_logreport(report):
    m = _CATEGORY.search(report.nodeid)
    if m is None or not report.nodeid.endswith("_cpu"):
        return
    outcome = _outcome(report)
    if outcome is None:
        return
    _counts[m.group(1), outcome] += 1
    if outcome == "excluded":
        _excluded[m.group(1)].append(m.group(2))


def pytest_terminal_summary(terminalreporter):
    cats = sorted({c for c, _ in _counts}, key=lambda c: (c != "Node", c))
    for cat in cats:
        parts = [f"{_counts[cat, k]} {k}" for k in OUTCOMES if _counts[cat, k]]
        total = sum(_counts[cat, k] for k in OUTCOMES)
        line = f"ONNX backend conformance, {cat} cases (CPU): {', '.join(parts)} of {total}"
        if _excluded[cat]:
            line += (f"; excluded, as their outcome depends on the CPU's rounding or on "
                     f"chance (ROUNDING_DEPENDENT and RANDOM_OUTCOME in "
                     f"tests/onnx/expected_failures.py): "
                     f"{', '.join(sorted(_excluded[cat]))}")
        terminalreporter.write_line(line)
