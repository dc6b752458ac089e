"""How the CLI shows evaluations and test reports, as JSON-ready data or text."""

from __future__ import annotations

from typing import Any

from policy.durations import format_duration
from policy.engine import PolicySet
from policy.model import Evaluation, Phase, Stance
from policy.suites import SuiteReport

__all__ = ["evaluation_json", "evaluation_text", "report_json", "report_text"]


def _stance(stance: Stance) -> dict[str, Any]:
    return {
        "policy": stance.policy,
        "mode": stance.mode,
        "effect": stance.effect.label if stance.effect is not None else None,
        "rule": stance.rule,
        "message": stance.message,
        "error": stance.error,
    }


def evaluation_json(phase: Phase, policy_set: PolicySet, evaluation: Evaluation) -> dict[str, Any]:
    """The explain document: decision, failed, message, approval and every stance."""
    approval = evaluation.approval
    return {
        "phase": phase.value,
        "revision": policy_set.revision,
        "backend": policy_set.backend,
        "decision": evaluation.decision.label,
        "failed": evaluation.failed,
        "message": evaluation.message,
        "approval": None
        if approval is None
        else {
            "reasons": list(approval.reasons),
            "roles": sorted(approval.roles),
            "expires_in": format_duration(approval.expires_in) if approval.expires_in else None,
            "policies": list(approval.policies),
            "grantable": approval.grantable,
            "quorum": approval.quorum,
            "distinct_roles": sorted(approval.distinct_roles),
            "escalate_after": format_duration(approval.escalate_after)
            if approval.escalate_after
            else None,
            "escalation_roles": sorted(approval.escalation_roles),
        },
        "stances": [_stance(s) for s in evaluation.stances],
        "duration_ms": round(evaluation.duration_s * 1000, 3),
    }


def evaluation_text(phase: Phase, policy_set: PolicySet, evaluation: Evaluation) -> str:
    """The explain document for people."""
    data = evaluation_json(phase, policy_set, evaluation)
    lines = [f"decision: {data['decision']}{' (policy failed)' if data['failed'] else ''}"]
    if data["message"]:
        lines.append(f"message: {data['message']}")
    if data["approval"]:
        approval = data["approval"]
        lines.append(
            f"approval: roles {', '.join(approval['roles'])}; expires in "
            f"{approval['expires_in'] or 'the default'}; reasons: {'; '.join(approval['reasons'])}"
        )
        lines.append(f"  {_approval_options(approval)}")
    lines.append(f"stances ({phase.value}, revision {policy_set.revision}):")
    for stance in data["stances"]:
        effect = stance["effect"] or "abstain"
        rule = f" rules[{stance['rule']}]" if stance["rule"] is not None else ""
        shadow = " [shadow]" if stance["mode"] == "shadow" else ""
        detail = stance["error"] or stance["message"] or ""
        lines.append(
            f"  {stance['policy']}{shadow}: {effect}{rule}{f' — {detail}' if detail else ''}"
        )
    if not data["stances"]:
        lines.append("  (no policy applies)")
    return "\n".join(lines)


def _approval_options(approval: dict[str, Any]) -> str:
    """Quorum, grants and escalation of the merged requirement, in words."""
    quorum = f"{approval['quorum']} approver{'s' if approval['quorum'] > 1 else ''}"
    if approval["distinct_roles"]:
        quorum += f" (one each: {', '.join(approval['distinct_roles'])})"
    grants = "a standing grant may stand in" if approval["grantable"] else "never by a grant"
    escalation = (
        f"escalates after {approval['escalate_after']} to {', '.join(approval['escalation_roles'])}"
        if approval["escalate_after"]
        else "no escalation"
    )
    return f"{quorum}; {grants}; {escalation}"


def _site(site: tuple[str, int, str, int]) -> dict[str, Any]:
    policy, rule, path, line = site
    return {"policy": policy, "rule": rule, "file": path, "line": line}


def report_json(report: SuiteReport) -> dict[str, Any]:
    """The test report: each case, suite-file problems and rule coverage."""
    return {
        "passed": sum(r.passed for r in report.results),
        "failed": sum(not r.passed for r in report.results),
        "errors": [str(issue) for issue in report.errors],
        "cases": [
            {
                "suite": r.suite,
                "name": r.name,
                "passed": r.passed,
                "problems": r.problems,
                "decision": r.evaluation.decision.label if r.evaluation else None,
            }
            for r in report.results
        ],
        "coverage": {
            "rules": len(report.rules),
            "hit": len(report.rules) - len(report.uncovered),
            "uncovered": [_site(site) for site in report.uncovered],
        },
    }


def report_text(report: SuiteReport) -> str:
    """Pass/fail per case, problems, coverage, and the closing `N passed, N failed` line."""
    lines = []
    for result in report.results:
        lines.append(f"{'PASS' if result.passed else 'FAIL'} {result.suite} :: {result.name}")
        lines += [f"     {problem}" for problem in result.problems]
    for issue in report.errors:
        lines.append(f"ERROR {issue}")
    hit = len(report.rules) - len(report.uncovered)
    lines.append(f"coverage: {hit}/{len(report.rules)} rules hit")
    for policy, rule, path, line in report.uncovered:
        lines.append(f"  not hit: {policy}/rules[{rule}] ({path}:{line})")
    passed = sum(r.passed for r in report.results)
    # Suite problems (a case that could not run) are counted: "0 passed, 0 failed" and exit 1
    # would say nothing went wrong.
    errors = len(report.errors)
    counted = f", {errors} error{'' if errors == 1 else 's'}" if errors else ""
    lines.append(f"{passed} passed, {len(report.results) - passed} failed{counted}")
    return "\n".join(lines)
