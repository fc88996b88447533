"""JUnit XML from (name, Verdict) pairs."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from nebisect.report import junit_xml, write_junit
from nebisect.verdict import Timings, Verdict, crash_signature, error_signature

RESULTS = [
    ("pass-case", Verdict("pass", target="sim:fp16", timings=Timings(predict=0.5, reference=0.25))),
    ("collapse", Verdict("mismatch", signature="mismatch:collapse", target="sim:ane",
                         message="collapse at 1/16 elements", timings=Timings(total=1.0))),
    ("unrouted", Verdict("unrouted", target="coreml:ne", message="lse ran on cpu")),
    ("segv", Verdict("crash", signature=crash_signature("SIGSEGV"), target="coreml:all",
                     stderr_tail="Espresso exception\x00\x07 cast_kernel_cpu")),
    ("raised", Verdict("error", signature=error_signature("convert", "unsupported op 42"),
                       message="unsupported op 42")),
    ("slow", Verdict("timeout")),
    ("later", Verdict("skipped", message="coreml:ne unavailable: not macOS")),
]


def parse() -> ET.Element:
    return ET.fromstring(junit_xml("nebisect.replay", RESULTS).encode())


def test_counts_and_times():
    root = parse()
    (suite,) = root.findall("testsuite")
    for element in (root, suite):
        assert {k: element.get(k) for k in ("tests", "failures", "errors", "skipped")} == {
            "tests": "7", "failures": "2", "errors": "3", "skipped": "1"}
    assert suite.get("time") == "1.750"
    times = {c.get("name"): c.get("time") for c in suite.iter("testcase")}
    assert times["pass-case"] == "0.750" and times["collapse"] == "1.000"


def test_status_mapping_and_signatures():
    cases = {c.get("name"): c for c in parse().iter("testcase")}
    assert list(cases["pass-case"]) == []
    failure = cases["collapse"].find("failure")
    assert failure.get("type") == "mismatch:collapse"
    assert failure.get("message") == "collapse at 1/16 elements"
    assert "stage: predict" in failure.text
    assert cases["unrouted"].find("failure").get("type") == "unrouted"
    assert cases["segv"].find("error").get("type") == "crash:SIGSEGV"
    assert cases["raised"].find("error").get("type") == "error:convert:unsupported op N"
    assert cases["slow"].find("error") is not None
    assert cases["later"].find("skipped").get("message").startswith("coreml:ne unavailable")
    assert cases["collapse"].get("classname") == "nebisect.replay.sim:ane"
    assert cases["raised"].get("classname") == "nebisect.replay"


def test_control_characters_from_native_stderr_are_replaced():
    cases = {c.get("name"): c for c in parse().iter("testcase")}
    tail = cases["segv"].find("system-err").text
    assert "\x00" not in tail and "Espresso exception" in tail and "cast_kernel_cpu" in tail


def test_write_junit_creates_parents(tmp_path):
    path = write_junit(tmp_path / "ci" / "junit.xml", "nebisect.run", RESULTS[:1])
    assert path.read_text().startswith('<?xml version="1.0" encoding="UTF-8"?>')
    assert ET.parse(path).getroot().get("tests") == "1"


def test_empty_suite():
    root = ET.fromstring(junit_xml("nebisect.fuzzing", []).encode())
    assert root.get("tests") == "0" and root.find("testsuite") is not None
