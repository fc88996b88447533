"""SARIF 2.1.0 output of ``nebisect lint``, checked structurally.

The official schema is not vendored (no installed package ships it and tests run
offline), so the test encodes what it requires of every object the writer emits:
the required properties, the enumerations, and — because the schema declares
``additionalProperties: false`` on its objects — the exact set of property names each
object may use (SARIF 2.1.0, OASIS standard, §3). Plus GitHub code scanning's
conventions: ruleId, level, message.text, a physical location with a region
startLine, and partialFingerprints.
"""

from __future__ import annotations

import json
import math
from typing import Any

import support.lint_programs as lp

from nebisect.hazards import Range, lint_program, registered_rules
from nebisect.report.sarif import artifact_uri, sarif_log, sarif_text

LEVELS = {"none", "note", "warning", "error"}

#: SARIF 2.1.0 object → the properties the schema defines for it.
ALLOWED = {
    "log": {"$schema", "version", "runs", "inlineExternalProperties", "properties"},
    "run": {"tool", "invocations", "conversion", "language", "versionControlProvenance",
            "originalUriBaseIds", "artifacts", "logicalLocations", "graphs", "results",
            "automationDetails", "runAggregates", "baselineGuid", "redactionTokens",
            "defaultEncoding", "defaultSourceLanguage", "newlineSequences", "columnKind",
            "externalPropertyFileReferences", "threadFlowLocations", "taxonomies",
            "addresses", "translations", "policies", "webRequests", "webResponses",
            "specialLocations", "properties"},
    "tool": {"driver", "extensions", "properties"},
    "toolComponent": {"guid", "name", "organization", "product", "productSuite",
                      "shortDescription", "fullDescription", "fullName", "version",
                      "semanticVersion", "dottedQuadFileVersion", "releaseDateUtc",
                      "downloadUri", "informationUri", "globalMessageStrings", "notifications",
                      "rules", "taxa", "locations", "language", "contents",
                      "isComprehensive", "localizedDataSemanticVersion",
                      "minimumRequiredLocalizedDataSemanticVersion", "associatedComponent",
                      "translationMetadata", "supportedTaxonomies", "properties"},
    "reportingDescriptor": {"id", "deprecatedIds", "guid", "deprecatedGuids", "name",
                            "deprecatedNames", "shortDescription", "fullDescription",
                            "messageStrings", "defaultConfiguration", "helpUri", "help",
                            "relationships", "properties"},
    "multiformatMessageString": {"text", "markdown", "properties"},
    "reportingConfiguration": {"enabled", "level", "rank", "parameters", "properties"},
    "result": {"ruleId", "ruleIndex", "rule", "kind", "level", "message", "analysisTarget",
               "locations", "guid", "correlationGuid", "occurrenceCount",
               "partialFingerprints", "fingerprints", "stacks", "codeFlows", "graphs",
               "graphTraversals", "relatedLocations", "suppressions", "baselineState",
               "rank", "attachments", "hostedViewerUri", "workItemUris", "provenance",
               "fixes", "taxa", "webRequest", "webResponse", "properties"},
    "message": {"text", "markdown", "id", "arguments", "properties"},
    "location": {"id", "physicalLocation", "logicalLocations", "message", "annotations",
                 "relationships", "properties"},
    "physicalLocation": {"address", "artifactLocation", "region", "contextRegion",
                         "properties"},
    "artifactLocation": {"uri", "uriBaseId", "index", "description", "properties"},
    "region": {"startLine", "startColumn", "endLine", "endColumn", "charOffset",
               "charLength", "byteOffset", "byteLength", "snippet", "message",
               "sourceLanguage", "properties"},
    "logicalLocation": {"name", "index", "fullyQualifiedName", "decoratedName",
                        "parentIndex", "kind", "properties"},
    "artifact": {"description", "location", "parentIndex", "offset", "length", "roles",
                 "mimeType", "contents", "encoding", "sourceLanguage", "hashes",
                 "lastModifiedTimeUtc", "properties"},
    "invocation": {"commandLine", "arguments", "responseFiles", "startTimeUtc", "endTimeUtc",
                   "exitCode", "ruleConfigurationOverrides",
                   "notificationConfigurationOverrides", "toolExecutionNotifications",
                   "toolConfigurationNotifications", "exitCodeDescription", "exitSignalName",
                   "exitSignalNumber", "processStartFailureMessage", "executionSuccessful",
                   "machine", "account", "processId", "executableLocation",
                   "workingDirectory", "environmentVariables", "stdin", "stdout", "stderr",
                   "stdoutStderr", "properties"},
}


def keys(obj: dict[str, Any], kind: str, required: set[str] = frozenset()) -> None:
    extra = set(obj) - ALLOWED[kind]
    assert not extra, f"{kind} has properties SARIF 2.1.0 does not define: {extra}"
    assert required <= set(obj), f"{kind} lacks {required - set(obj)}"
    if "properties" in obj:
        bag = obj["properties"]
        assert isinstance(bag, dict)
        tags = bag.get("tags", [])
        assert isinstance(tags, list) and len(set(tags)) == len(tags)


def text_message(obj: dict[str, Any], kind: str = "multiformatMessageString") -> None:
    keys(obj, kind, {"text"})
    assert isinstance(obj["text"], str) and obj["text"]


def check_sarif(log: dict[str, Any]) -> None:
    keys(log, "log", {"version", "runs"})
    assert log["version"] == "2.1.0"
    assert log["$schema"].endswith("sarif-2.1.0.json")
    for run in log["runs"]:
        keys(run, "run", {"tool"})
        keys(run["tool"], "tool", {"driver"})
        driver = run["tool"]["driver"]
        keys(driver, "toolComponent", {"name"})
        assert driver["name"] == "nebisect"
        ids = []
        for rule in driver["rules"]:
            keys(rule, "reportingDescriptor", {"id"})
            ids.append(rule["id"])
            for field in ("shortDescription", "fullDescription", "help"):
                text_message(rule[field])
            keys(rule["defaultConfiguration"], "reportingConfiguration")
            assert rule["defaultConfiguration"]["level"] in LEVELS
        assert len(ids) == len(set(ids))
        for artifact in run.get("artifacts", []):
            keys(artifact, "artifact")
            keys(artifact["location"], "artifactLocation", {"uri"})
        for invocation in run.get("invocations", []):
            keys(invocation, "invocation", {"executionSuccessful"})
        for result in run["results"]:
            keys(result, "result", {"message", "ruleId", "level", "locations"})
            assert result["ruleId"] in ids
            assert ids[result["ruleIndex"]] == result["ruleId"]
            assert result["level"] in LEVELS
            text_message(result["message"], "message")
            assert len(result["locations"]) == 1
            (location,) = result["locations"]
            keys(location, "location", {"physicalLocation", "logicalLocations"})
            physical = location["physicalLocation"]
            keys(physical, "physicalLocation", {"artifactLocation", "region"})
            keys(physical["artifactLocation"], "artifactLocation", {"uri"})
            keys(physical["region"], "region", {"startLine"})
            assert physical["region"]["startLine"] >= 1
            for logical in location["logicalLocations"]:
                keys(logical, "logicalLocation", {"name", "fullyQualifiedName"})
            assert result["partialFingerprints"]
            assert all(isinstance(v, str) for v in result["partialFingerprints"].values())


def test_sarif_of_a_failing_model_is_valid_and_names_the_op():
    result = lint_program(lp.seed000(), input_ranges={"x": Range(-15, 15)},
                          source="models/seed000.mlpackage")
    log = json.loads(sarif_text(result))
    check_sarif(log)
    run = log["runs"][0]
    assert [r["id"] for r in run["tool"]["driver"]["rules"]] == list(registered_rules())
    assert [(r["ruleId"], r["level"]) for r in run["results"]] == [
        ("fp16-range-overflow", "error"), ("lse-no-max-shift", "error")]
    location = run["results"][1]["locations"][0]
    assert location["physicalLocation"]["artifactLocation"]["uri"] == "models/seed000.mlpackage"
    assert location["logicalLocations"][0] == {
        "name": "lse", "fullyQualifiedName": "main/lse", "kind": "function",
        "properties": {"opType": "reduce_log_sum_exp"}}
    assert run["results"][1]["properties"]["fix"] == "logsumexp-max-shift"
    assert run["invocations"][0]["properties"]["inputRanges"] == {"x": [-15.0, 15.0]}


def test_severity_override_and_clean_runs():
    log = sarif_log(lint_program(lp.log_softmax(dtype="fp32"), source="m.mlpackage"))
    check_sarif(log)
    assert [r["level"] for r in log["runs"][0]["results"]] == ["warning"]
    clean = sarif_log(lint_program(lp.softplus(stable=True), source="m.mlpackage"))
    check_sarif(clean)
    assert clean["runs"][0]["results"] == []


def test_fingerprints_are_stable_and_distinct():
    first = sarif_log(lint_program(lp.seed000(), source="a.mlpackage"))
    second = sarif_log(lint_program(lp.seed000(), source="a.mlpackage"))
    other = sarif_log(lint_program(lp.softplus(), source="a.mlpackage"))

    def prints(log):
        return [r["partialFingerprints"] for r in log["runs"][0]["results"]]

    assert prints(first) == prints(second)
    assert prints(first) != prints(other)


def test_nonfinite_details_stay_strict_json():
    result = lint_program(lp.logcumsumexp(), input_ranges={"x": Range(-15, 1000)},
                          source="a.mlpackage")
    assert math.isinf(next(f for f in result.findings
                           if f.rule_id == "fp16-range-overflow").details["bound"])

    def reject(constant: str) -> None:
        raise AssertionError(f"non-strict JSON constant {constant}")

    log = json.loads(sarif_text(result), parse_constant=reject)
    details = [r["properties"]["details"] for r in log["runs"][0]["results"]]
    assert {"bound": "Infinity", "limit": 65504.0, "exact": True} in details


def test_artifact_uris():
    assert artifact_uri("models/my model.mlpackage") == "models/my%20model.mlpackage"
    assert artifact_uri("/abs/m.mlpackage") == "file:///abs/m.mlpackage"
