"""JUnit XML for `capgate policy test --junit FILE`: one testcase per suite case."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from itertools import groupby
from pathlib import Path

from policy.suites import SuiteReport

__all__ = ["write_junit"]


def write_junit(report: SuiteReport, path: Path) -> None:
    """Write `report` as JUnit XML (suite-file problems become one errored testcase each)."""
    root = ET.Element("testsuites", name="capgate policy test")
    totals = {"tests": 0, "failures": 0, "errors": len(report.errors)}
    for suite, group in groupby(report.results, key=lambda r: r.suite):
        cases = list(group)
        failures = sum(not c.passed for c in cases)
        element = ET.SubElement(
            root,
            "testsuite",
            name=suite,
            tests=str(len(cases)),
            failures=str(failures),
            errors="0",
            time=f"{sum(c.duration_s for c in cases):.6f}",
        )
        for case in cases:
            testcase = ET.SubElement(
                element, "testcase", classname=suite, name=case.name, time=f"{case.duration_s:.6f}"
            )
            if case.problems:
                failure = ET.SubElement(testcase, "failure", message=case.problems[0])
                failure.text = "\n".join(case.problems)
        totals["tests"] += len(cases)
        totals["failures"] += failures
    if report.errors:
        element = ET.SubElement(
            root,
            "testsuite",
            name="suite files",
            tests=str(len(report.errors)),
            failures="0",
            errors=str(len(report.errors)),
            time="0",
        )
        for issue in report.errors:
            testcase = ET.SubElement(element, "testcase", classname="suite files", name=str(issue))
            ET.SubElement(testcase, "error", message=issue.message).text = str(issue)
        totals["tests"] += len(report.errors)
    for key, value in totals.items():
        root.set(key, str(value))
    ET.indent(root)
    path.write_bytes(ET.tostring(root, encoding="utf-8", xml_declaration=True) + b"\n")
