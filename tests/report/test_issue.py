"""``run --markdown``'s text: a recorded run payload rendered as upstream issue sections."""

from __future__ import annotations

import pytest
from support.report_payloads import issue_payload

from nebisect.report import ReportPayload
from nebisect.report.issue import issue_markdown


@pytest.fixture(scope="module")
def payload() -> ReportPayload:
    return issue_payload()


def test_a_finding_is_one_section_with_the_issue_parts(payload: ReportPayload) -> None:
    text = issue_markdown(payload)
    lines = text.splitlines()
    assert lines[0] == "# nebisect run seed000.mlpackage: 1 finding"
    headings = [line for line in lines if line.startswith("#")]
    assert headings == [
        "# nebisect run seed000.mlpackage: 1 finding",
        "## 1. device: reduce_log_sum_exp collapses its output (variation lost) in fp16 at "
        "constant inputs x = 7.7 (Neural Engine)",
        "### What happens", "### Numbers", "### Repro"]
    assert ("**Versions:** coremltools 9.0 · torch 2.13.0 · numpy 2.4.6 · python 3.11.7 · "
            "macOS 15.1 (arm64, Apple M2 Pro) · found with nebisect 0.1.0") in lines
    assert "- **Culprit op:** `reduce_log_sum_exp` (`lse`), found as the first op whose own " \
           "output breaks tolerance" in text
    assert "- **Where it enters: device** — the program agrees with the reference both " \
           "exactly" in text
    assert "  - `sim:ane`: a model of the Neural Engine's published fp16 behaviour " \
           "(nebisect's MIL simulator; Core ML CPU_AND_NE on a Mac)" in lines
    assert "`sim:fp16`:" not in text  # it passes: the finding does not show there


def test_the_numbers_are_those_of_the_worst_element(payload: ReportPayload) -> None:
    """log(32 · e^7.7) = 7.7 + log 32 = 11.1657…; the Neural Engine returns 0: the error is
    the whole value, 1024 fp16 ULPs of it, where the oracle allows 16."""
    rows = [line for line in issue_markdown(payload).splitlines() if line.startswith("| ")]
    assert rows[0].startswith("| target | path | inputs | element | reference | converted |")
    assert rows[1] == ("| `sim:ane` | - | constant inputs x = 7.7 | `lse[0, 0, 0, 0]` | "
                       "11.1657359 | 0 | 11.2 | 1.02e+03 ULP (fp16) | 1.02e+03 ULP | 16 ULP |")
    assert "The reference (`sim:fp64`, the converted MIL program evaluated exactly" in \
        issue_markdown(payload)


def test_a_repro_is_folded_fenced_python_beside_its_note(payload: ReportPayload) -> None:
    finding = payload.findings[0]
    with_script = ReportPayload(payload.title, payload.summary, [
        type(finding)(**{**vars(finding), "repro": "print('REPRODUCED')\n"})],
        environment=payload.environment)
    text = issue_markdown(with_script)
    assert text.endswith("No standalone script: the source is a package.\n\n"
                         "<details><summary>repro.py — self-contained, run with python"
                         "</summary>\n\n```python\nprint('REPRODUCED')\n```\n\n</details>\n")


def test_temporary_paths_and_margins_are_left_out(payload: ReportPayload) -> None:
    finding = payload.findings[0]
    failed = type(finding)(**{**vars(finding), "symptom": "error", "stage": "load",
                              "message": "cannot read /tmp/nebisect-run-x1/conv/model.mil"})
    text = issue_markdown(ReportPayload(payload.title, {**payload.summary, "margins": 2},
                                        [failed]))
    assert "It fails at load with:\n\n```text\ncannot read …/model.mil\n```" in text
    assert "/tmp" not in text
    assert text.rstrip().endswith("_2 margins left out: a finding only at inputs far beyond "
                                  "the values the model starts from is a fact of fp16's "
                                  "range, not an issue (the run's output lists them)._")


def test_a_run_without_findings_says_so() -> None:
    text = issue_markdown(ReportPayload(
        "nebisect run m.py:model", {"source": "/work/m.py:model"},
        environment={"coremltools": "9.0", "os": "Linux 6.8", "machine": "x86_64"}))
    assert text.splitlines() == [
        "# nebisect run m.py:model: no finding", "",
        "**Versions:** coremltools 9.0 · Linux 6.8 (x86_64)", "",
        "Every target agreed with the reference on every input set the run evaluated: "
        "there is no issue to report."]
