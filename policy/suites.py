"""Policy test suites (`*_test.yaml`): fixtures, cases, expectations, rule coverage.

A suite runs against the policy set of the directory it sits in (or of the policy file it is
named after). Each case names fixtures (or gives inline values), a phase and a `now` (optional:
the run's start time when neither the case nor the suite gives one), and states the expected
stance per policy and/or the combined decision. The published schema is
`policy/schema/policy-test.schema.json`.

With a registry (`capgate policy test DIR --config FILE`), suites are run against the
capabilities the config defines: every capability a case names must be one of them, the
fields it states (`tags`, `side_effect`, `risk`, `policies`) must agree with the config, and
the fields it leaves out come from the config. So a suite cannot pass because its fixture
lists a policy the deployed capability does not (a case's own `capability_policies` stays an
explicit what-if).

A case may give `hooks:`, the context the gateway's pre-hooks returned for the call
(`hooks.<hook>.<attribute>` in policies, docs/hooks.md). With the config's hook declarations
(`--config`), every hook and attribute it gives must be declared and its value of the declared
type; an undeclared one or a mismatch is an error of that case, as the gateway would never
bind it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from time import perf_counter
from typing import Any

from policy.durations import format_duration, parse_duration
from policy.engine import PolicySet, RuleSite
from policy.errors import LoadIssue
from policy.files import read_sources
from policy.model import Evaluation, Stance
from policy.requests import request_from_data
from policy.schemacheck import schema_issues
from policy.yamlsource import Located, parse_documents

__all__ = ["CaseResult", "SuiteReport", "run_suites", "stance_label"]

_SUITE_SCHEMA = "policy-test.schema.json"
# The `now` of cases that give none: the time this process started running suites.
_RUN_STARTED = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(slots=True)
class CaseResult:
    suite: str
    name: str
    problems: list[str]
    evaluation: Evaluation | None
    duration_s: float

    @property
    def passed(self) -> bool:
        return not self.problems


@dataclass(slots=True)
class SuiteReport:
    """Every case's result, suite-file problems, and the rules no case hit."""

    results: list[CaseResult] = field(default_factory=list)
    errors: list[LoadIssue] = field(default_factory=list)
    rules: list[RuleSite] = field(default_factory=list)
    uncovered: list[RuleSite] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors and all(r.passed for r in self.results)


def stance_label(stance: Stance | None) -> str:
    """`deny|hide|require-approval|allow|abstain|error`, as written in suites."""
    if stance is None or stance.effect is None:
        return "abstain"
    return "error" if stance.error is not None else stance.effect.label


Registry = Mapping[str, Mapping[str, Any]]
Hooks = Mapping[str, Mapping[str, str]]  # hook name -> attribute -> declared JSON type
_AGREE = ("tags", "side_effect", "risk", "policies")


def run_suites(
    directory: Path | Sequence[Path],
    policy_set: PolicySet,
    registry: Registry | None = None,
    hooks: Hooks | None = None,
) -> SuiteReport:
    """Run every `*_test.yaml` under `directory` against `policy_set` (and, when given, the
    capability `registry` and the hook context declarations of a gateway config: see the
    module docstring)."""
    report = SuiteReport(rules=policy_set.rule_sites())
    hit: set[tuple[str, int]] = set()
    for source in read_sources(directory, tests=True):
        if source.data is None:
            report.errors.append(
                LoadIssue(source.label, 1, 1, None, None, f"cannot read: {source.error}")
            )
            continue
        docs, problems = parse_documents(source.label, source.data.decode("utf-8", "replace"))
        report.errors += problems
        for doc in docs:
            found = schema_issues(doc, source.label, _SUITE_SCHEMA)
            report.errors += found
            if not found:
                report.results += _run_suite(
                    doc, source.label, policy_set, report.errors, registry=registry, hooks=hooks
                )
    for result in report.results:
        for stance in result.evaluation.stances if result.evaluation else ():
            if stance.rule is not None and stance.error is None:
                hit.add((stance.policy, stance.rule))
    report.uncovered = [site for site in report.rules if (site[0], site[1]) not in hit]
    return report


def _run_suite(
    doc: Located,
    path: str,
    policy_set: PolicySet,
    errors: list[LoadIssue],
    *,
    registry: Registry | None,
    hooks: Hooks | None,
) -> list[CaseResult]:
    suite = doc.value
    name = suite.get("name") or Path(path).stem
    fixtures = suite.get("fixtures", {})
    results = []
    for index, case in enumerate(suite["tests"]):
        line, column = doc.position(("tests", index))
        try:
            request = _request(case, suite, fixtures, set(policy_set.policy_names), registry)
            if "hooks" in case:
                request["hooks"] = checked_hooks(case["hooks"], hooks)
            phase, eval_request = request_from_data(request)
        except ValueError as exc:
            errors.append(LoadIssue(path, line, column, case["name"], None, str(exc)))
            continue
        started = perf_counter()
        evaluation = policy_set.evaluate_all(phase, eval_request)
        problems = _compare(case, evaluation)
        results.append(
            CaseResult(name, case["name"], problems, evaluation, perf_counter() - started)
        )
    return results


def _request(
    case: Mapping[str, Any],
    suite: Mapping[str, Any],
    fixtures: Mapping[str, Any],
    names: set[str],
    registry: Registry | None,
) -> dict[str, Any]:
    unknown = sorted(set(case.get("expected", {})) - names)
    if unknown:
        raise ValueError(f"expected names unknown policies: {', '.join(unknown)}")
    capability = dict(_fixture(fixtures, "capabilities", case["capability"]))
    if registry is not None:
        capability = _as_configured(capability, registry)
    listed = capability.pop("policies", [])
    request = {
        "phase": case.get("phase", "invocation"),
        "actor": _fixture(fixtures, "actors", case["actor"]),
        "capability": capability,
        "capability_policies": case.get("capability_policies", listed),
        "surface": case.get("surface", suite.get("surface", "")),
        "now": case.get("now", suite.get("now")),
        "correlation_id": case.get("correlation_id", ""),
        "metadata": case.get("metadata", {}),
    }
    for key in ("approval_expires_in", "approval_escalate_after"):
        if case.get(key) is not None:
            parse_duration(case[key])
    if request["now"] is None:
        # Optional (docs/policies.md): one clock for the whole run. A suite whose policies read
        # `request.now` gives one, so its results do not depend on the day it runs.
        request["now"] = _RUN_STARTED
    if "input" in case:
        request["input"] = _fixture(fixtures, "inputs", case["input"])
    if case.get("approval") is not None:
        request["approval"] = _fixture(fixtures, "approvals", case["approval"])
    return request


_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
}


def checked_hooks(given: Mapping[str, Mapping[str, Any]], declared: Hooks | None) -> dict[str, Any]:
    """A case's (or an explained request's) hook context; with declarations, ValueError for
    anything the gateway would not bind (an undeclared hook or attribute, a value not of the
    declared type)."""
    if declared is None:
        return {hook: dict(attrs) for hook, attrs in given.items()}
    for hook, attrs in given.items():
        if hook not in declared:
            known = ", ".join(sorted(declared)) or "none"
            raise ValueError(f"hooks: no pre_invoke hook {hook!r} in the config ({known} declared)")
        for name, value in attrs.items():
            kind = declared[hook].get(name)
            if kind is None:
                raise ValueError(f"hooks.{hook}: {name!r} is not in the hook's declared context")
            wanted = _JSON_TYPES.get(kind, ())
            if (isinstance(value, bool) and kind != "boolean") or not isinstance(value, wanted):
                raise ValueError(
                    f"hooks.{hook}.{name}: the hook declares {kind}, the case gives "
                    f"{type(value).__name__}"
                )
    return {hook: dict(attrs) for hook, attrs in given.items()}


def _as_configured(capability: dict[str, Any], registry: Registry) -> dict[str, Any]:
    """The capability as the config defines it; ValueError where the suite disagrees."""
    cap_id = capability.get("id")
    configured = registry.get(cap_id) if isinstance(cap_id, str) else None
    if configured is None:
        raise ValueError(f"capability {cap_id!r} is not in the config")
    merged = dict(capability)
    for key in _AGREE:
        config_value = configured.get(key, [] if key in {"tags", "policies"} else None)
        if key not in capability:
            if config_value is not None:
                merged[key] = config_value
            continue
        if _normal(key, capability[key]) != _normal(key, config_value):
            raise ValueError(
                f"capability {cap_id}: the suite gives {key} {capability[key]!r}, "
                f"the config {config_value!r}"
            )
    return merged


def _normal(key: str, value: Any) -> Any:
    """Tags compare as sets; listed policies in order (the order they run in)."""
    if key == "tags" and isinstance(value, list):
        return sorted(value)
    return value


def _fixture(fixtures: Mapping[str, Any], kind: str, ref: Any) -> Any:
    if not isinstance(ref, str):
        return ref
    table = fixtures.get(kind, {})
    if ref not in table:
        raise ValueError(f"no {kind[:-1]} fixture named {ref!r}")
    return table[ref]


def _compare(case: Mapping[str, Any], evaluation: Evaluation) -> list[str]:
    problems = []
    stances = {s.policy: s for s in evaluation.stances}
    for policy, want in case.get("expected", {}).items():
        stance = stances.get(policy)
        got = stance_label(stance)
        if got != want:
            detail = f" ({stance.error})" if stance is not None and stance.error else ""
            problems.append(f"{policy}: expected {want}, got {got}{detail}")
    approval = evaluation.approval
    actual: dict[str, Any] = {
        "decision": evaluation.decision.label,
        "failed": evaluation.failed,
        "message": evaluation.message,
        "approval_roles": sorted(approval.roles) if approval else None,
        "approval_expires_in": _duration(approval.expires_in if approval else None),
        "approval_grantable": approval.grantable if approval else None,
        "approval_quorum": approval.quorum if approval else None,
        "approval_distinct_roles": sorted(approval.distinct_roles) if approval else None,
        "approval_escalate_after": _duration(approval.escalate_after if approval else None),
        "approval_escalation_roles": sorted(approval.escalation_roles) if approval else None,
    }
    for key, got in actual.items():
        if key not in case:
            continue
        want = case[key]
        if key in _ROLE_SETS and want is not None:
            want = sorted(want)
        elif key in _DURATIONS and want is not None:
            want = format_duration(parse_duration(want))
        if want != got:
            problems.append(f"{key}: expected {want!r}, got {got!r}")
    return problems


_ROLE_SETS = frozenset({"approval_roles", "approval_distinct_roles", "approval_escalation_roles"})
_DURATIONS = frozenset({"approval_expires_in", "approval_escalate_after"})


def _duration(value: timedelta | None) -> str | None:
    return format_duration(value) if value is not None else None
