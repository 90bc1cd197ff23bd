"""JUnit XML (as pytest's ``--junitxml`` writes it) to per-test outcomes."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from judges.judgement import TestOutcome


def parse_junit(xml_text: str) -> list[TestOutcome]:
    """Every ``testcase`` of a JUnit report, in report order.

    Raises:
        ValueError: the text is not a JUnit report.
    """
    try:
        root = ET.fromstring(xml_text)
    except ET.ParseError as exc:
        raise ValueError(f"not a JUnit XML report: {exc}") from exc
    if root.tag not in ("testsuites", "testsuite"):
        raise ValueError(f"not a JUnit XML report: root element <{root.tag}>")
    out = []
    for case in root.iter("testcase"):
        cls = case.get("classname", "")
        name = f"{cls}::{case.get('name', '?')}" if cls else case.get("name", "?")
        status, message = "passed", None
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                status = {"failure": "failed", "error": "error", "skipped": "skipped"}[child.tag]
                text = child.get("message") or (child.text or "")
                message = text.strip().splitlines()[0][:300] if text.strip() else None
                break
        try:
            duration = float(case.get("time", "0") or 0)
        except ValueError:
            duration = 0.0
        out.append(TestOutcome(name=name, status=status, message=message, duration_s=duration))  # type: ignore[arg-type]
    return out
