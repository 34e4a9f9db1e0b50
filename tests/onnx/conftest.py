"""Counts the ONNX conformance cases by category and outcome and prints them after the run."""

from __future__ import annotations

import re
from collections import Counter

_counts: Counter = Counter()
_CATEGORY = re.compile(r"OnnxBackend(\w+?)(?:Model)?Test::")


def pytest_runtest_logreport(report):
    m = _CATEGORY.search(report.nodeid)
    if m is None or not report.nodeid.endswith("_cpu"):
        return
    cat = m.group(1)
    if report.when == "call":
        if hasattr(report, "wasxfail"):
            _counts[cat, "expected failures"] += 1
        elif report.passed:
            _counts[cat, "pass"] += 1
        elif report.failed:
            _counts[cat, "FAILED"] += 1
    elif report.when == "setup" and report.skipped:
        _counts[cat, "skipped"] += 1


def pytest_terminal_summary(terminalreporter):
    cats = sorted({c for c, _ in _counts}, key=lambda c: (c != "Node", c))
    for cat in cats:
        parts = [f"{_counts[cat, k]} {k}" for k in ("pass", "expected failures", "FAILED",
                                                    "skipped") if _counts[cat, k]]
        total = sum(_counts[cat, k] for k in ("pass", "expected failures", "FAILED", "skipped"))
        terminalreporter.write_line(
            f"ONNX backend conformance, {cat} cases (CPU): {', '.join(parts)} of {total}")
