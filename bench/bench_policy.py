"""Benchmark: one request through 10 typical policies, activation built from ~1 KB of JSON.

Measures `PolicySet.evaluate_all` per request, including `orjson.loads` of the input and
building the activation (what stage 7 pays), on both backends. Prints µs per request
(median and p90 over many iterations, time-bounded) and writes bench/out/policy.json.

    .venv/bin/python bench/bench_policy.py [--seconds 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import orjson

from policy import Decision, EvalRequest, Limits, Phase, load_policy_set

BUDGET_US = 150.0
OUT = Path(__file__).parent / "out" / "policy.json"

POLICIES = """
constants:
  approval_threshold: 500
  hard_limit: 10000
  blocked_countries: [KP, IR, SY]
policies:
  - name: anonymous-read-only
    rules:
      - when: actor.kind == 'anonymous' && capability.side_effect != 'none'
        effect: deny
  - name: refund-limits
    match: {capabilities: ["orders.refund"]}
    rules:
      - {when: "has(input.amount) && input.amount > const.hard_limit", effect: deny}
      - when: has(input.amount) && input.amount > const.approval_threshold
        effect: require-approval
        approval: {approvers: {roles: [manager]}, expires_in: 4h}
  - name: support-staff-only
    match: {capabilities: ["orders.*"]}
    rules: [{when: "!('support' in actor.roles)", effect: deny}]
  - name: high-risk-needs-mfa
    rules:
      - when: capability.risk == 'high' && actor.attributes.mfa != true
        effect: deny
  - name: business-hours
    mode: shadow
    match: {expr: "capability.side_effect != 'none'"}
    rules:
      - when: >-
          request.now.getHours('Europe/Berlin') < 8 ||
          request.now.getHours('Europe/Berlin') >= 18
        effect: deny
  - name: item-consistency
    match: {capabilities: ["orders.refund"]}
    rules:
      - when: has(input.items) && input.items.exists(i, i.qty <= 0)
        effect: deny
  - name: order-id-format
    match: {tags: [orders]}
    rules: [{when: "!input.order_id.matches('^ord-[0-9]{6}$')", effect: deny}]
  - name: sanctions
    rules:
      - when: has(input.customer) && input.customer.address.country in const.blocked_countries
        effect: deny
  - name: tenant-isolation
    rules:
      - when: request.metadata['x-tenant'] != actor.attributes.tenant
        effect: deny
  - name: mcp-no-bulk
    rules:
      - when: surface == 'mcp' && has(input.items) && size(input.items) > 50
        effect: hide
"""

INPUT = {
    "order_id": "ord-123456",
    "amount": 750.25,
    "currency": "EUR",
    "reason": "Customer reports the parcel arrived damaged; photos attached to the ticket.",
    "items": [
        {"sku": f"SKU-{i:05d}", "qty": i + 1, "price": 12.5 * (i + 1), "note": "returned in box"}
        for i in range(8)
    ],
    "customer": {
        "id": "cus-98765",
        "email": "jane.doe@example.com",
        "tier": "gold",
        "address": {"street": "Hauptstraße 1", "city": "Berlin", "zip": "10115", "country": "DE"},
    },
    "ticket": {
        "id": "T-2025-000123",
        "channel": "email",
        "tags": ["damage", "refund", "priority"],
        "opened_at": "2025-03-03T16:42:00Z",
    },
}
RAW = orjson.dumps(INPUT)


def request(data) -> EvalRequest:
    return EvalRequest(
        actor={
            "id": "u-alice",
            "kind": "user",
            "issuer": "https://idp.example.com",
            "roles": ["support", "agent"],
            "attributes": {"mfa": True, "tenant": "t1"},
        },
        capability={
            "id": "orders.refund",
            "tags": ["orders", "billing"],
            "side_effect": "write",
            "risk": "high",
        },
        surface="mcp",
        input=data,
        now=datetime(2025, 3, 4, 10, 0, tzinfo=UTC),
        correlation_id="c-1",
        metadata={"x-tenant": "t1"},
    )


def measure(backend: str, seconds: float, max_iterations: int) -> dict[str, float | int]:
    with tempfile.TemporaryDirectory() as directory:
        Path(directory, "policies.yaml").write_text(POLICIES)
        policy_set = load_policy_set(Path(directory), backend=backend, limits=Limits(1.0))
    first = policy_set.evaluate_all(Phase.INVOCATION, request(orjson.loads(RAW)))
    assert first.decision is Decision.REQUIRE_APPROVAL, first
    assert len(first.stances) == 10, first.stances
    assert not any(s.error for s in first.stances), first.stances
    samples = []
    deadline = time.perf_counter() + seconds
    while len(samples) < max_iterations and time.perf_counter() < deadline:
        started = time.perf_counter()
        policy_set.evaluate_all(Phase.INVOCATION, request(orjson.loads(RAW)))
        samples.append((time.perf_counter() - started) * 1e6)
    samples.sort()
    return {
        "iterations": len(samples),
        "median_us": round(statistics.median(samples), 1),
        "p90_us": round(samples[int(len(samples) * 0.9)], 1),
        "min_us": round(samples[0], 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="time per backend")
    args = parser.parse_args()
    results = {
        "input_bytes": len(RAW),
        "policies": 10,
        "budget_us": BUDGET_US,
        "cel-expr-python": measure("cel-expr-python", args.seconds, 50_000),
        "cel-python": measure("cel-python", args.seconds, 2_000),
    }
    default = results["cel-expr-python"]["median_us"]
    python = results["cel-python"]["median_us"]
    results["within_budget"] = default <= BUDGET_US
    results["cel_python_slowdown"] = round(python / default, 1)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(results, indent=2) + "\n")
    print(f"input {len(RAW)} bytes, 10 policies per request")
    for backend in ("cel-expr-python", "cel-python"):
        r = results[backend]
        print(
            f"{backend:16} median {r['median_us']:>9.1f} µs  p90 {r['p90_us']:>9.1f} µs  "
            f"({r['iterations']} iterations)"
        )
    verdict = "within" if results["within_budget"] else "OVER"
    slowdown = results["cel_python_slowdown"]
    print(f"budget {BUDGET_US:.0f} µs: {verdict}; cel-python is {slowdown}x slower")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
