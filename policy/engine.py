"""A loaded policy set and `evaluate_all` (seed 001, stages 7 and 9, discovery step 3).

Applicable policies: global ones whose phases include the phase and whose `match`
holds, in load order, then the capability-scoped ones the capability lists, in its
order. Every applicable policy is evaluated (no short circuit) so each stance is kept;
the first matching rule is a policy's stance. Errors, non-bool results and late results
become error stances that combine as deny (SI-7). Shadow stances never count.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from time import perf_counter, thread_time
from typing import Any

from policy.approvals import merge_requirements
from policy.backends import Backend, safe_error
from policy.bindings import bindings_for
from policy.compiler import CompiledPolicy
from policy.model import Decision, EvalRequest, Evaluation, Limits, Phase, Stance, combine

__all__ = ["PolicySet", "RuleSite"]

RuleSite = tuple[str, int, str, int]
"""(policy, rule index, file, line) — what coverage reports refer to."""

_CACHE_LIMIT = 4096


def _utc_now() -> datetime:
    return datetime.now(UTC)


class PolicySet:
    """An immutable, compiled policy set. Safe to share between threads and requests."""

    def __init__(
        self,
        policies: list[CompiledPolicy],
        *,
        backend: Backend,
        limits: Limits,
        clock: Callable[[], datetime] | None,
        revision: str,
        constants: Mapping[str, Any],
        notes: tuple[str, ...] = (),
    ) -> None:
        self._policies = tuple(policies)
        self._by_name = {p.name: p for p in policies}
        self._backend = backend
        self._limit = limits.cpu_time_s
        self._clock = clock or _utc_now
        self._constants = dict(constants)
        self._global = {
            phase: tuple(p for p in policies if p.scope == "global" and phase in p.phases)
            for phase in Phase
        }
        self._selected: dict[tuple[str, str, tuple[str, ...]], tuple[CompiledPolicy, ...]] = {}
        self._hides: dict[tuple[Any, ...], bool] = {}
        self.discovery_reads = _union(
            p.discovery_reads for p in policies if Phase.DISCOVERY in p.phases
        )
        self.revision = revision
        self.policy_names = tuple(p.name for p in policies)
        self.notes = notes
        self.backend = backend.name
        self.limits = limits

    def __repr__(self) -> str:
        return f"<PolicySet {self.revision} {len(self._policies)} policies on {self.backend}>"

    def rule_sites(self) -> list[RuleSite]:
        """Every rule of the set, in load order."""
        return [(p.name, r.index, p.path, r.line) for p in self._policies for r in p.rules]

    def applies(
        self, phase: Phase, capability: Mapping[str, Any], capability_policies: tuple[str, ...]
    ) -> bool:
        """Whether any policy could take a stance for this capability in `phase` (cached).

        Callers use it to skip building a request when nothing applies; `evaluate_all` on such
        a request would return an allow with no stances.
        """
        phase = Phase(phase)
        return bool(self._select(phase, capability) or self._listed(phase, capability_policies))

    def applicable(
        self, phase: Phase, capability: Mapping[str, Any], capability_policies: tuple[str, ...]
    ) -> tuple[CompiledPolicy, ...]:
        """The compiled policies that can apply to the capability in `phase`: the global ones
        its static match selects (a `match.expr` is not evaluated: it may hold) and the listed
        ones that exist, in evaluation order. What a standing grant's creator must be an
        approver for (docs/approvals.md "Grants")."""
        phase = Phase(phase)
        listed = self._listed(phase, capability_policies)
        return (*self._select(phase, capability), *(p for p in listed if not isinstance(p, str)))

    def hides_without_input(
        self, capability: Mapping[str, Any], capability_policies: tuple[str, ...]
    ) -> bool:
        """Whether an enforced, input-free invocation-phase policy with a `hide` rule applies to
        the capability: only then can `evaluate_all(..., input_free=True)` conceal it before
        input validation (ADR 0016). Cached like the selection it reads."""
        cache_key = (
            str(capability.get("id", "")),
            tuple(capability.get("tags") or ()),
            capability_policies,
        )
        found = self._hides.get(cache_key)
        if found is None:
            phase = Phase.INVOCATION
            listed = self._listed(phase, capability_policies)
            applicable = (*self._select(phase, capability), *listed)
            found = any(
                isinstance(p, CompiledPolicy)
                and p.input_free
                and p.enforced
                and any(r.effect is Decision.HIDE for r in p.rules)
                for p in applicable
            )
            if len(self._hides) >= _CACHE_LIMIT:
                self._hides.clear()
            self._hides[cache_key] = found
        return found

    def evaluate_all(
        self,
        phase: Phase,
        req: EvalRequest,
        *,
        input_free: bool = False,
        without_hooks: bool = False,
        activation: Any = None,
    ) -> Evaluation:
        """Evaluate every applicable policy for `req` in `phase` and combine the stances.

        `input_free`: only the policies that never read `input` (and unknown listed names,
        which fail closed): the part of the phase decidable before input validation.
        `without_hooks`: only the policies that never read `hooks` (and unknown listed names):
        the part decidable before the gateway's pre-hooks are called (docs/hooks.md).
        `activation`: this set's `activation(phase, req)` for `req`, when the caller keeps one
        per call and phase (the gateway: DESIGN §11, once per request); built here if None."""
        started = perf_counter()
        phase = Phase(phase)
        selected = self._select(phase, req.capability)
        listed = self._listed(phase, req.capability_policies)
        if input_free:
            selected = tuple(p for p in selected if p.input_free)
            listed = [p for p in listed if not isinstance(p, CompiledPolicy) or p.input_free]
        if without_hooks:
            selected = tuple(p for p in selected if not p.reads_hooks)
            listed = [p for p in listed if not isinstance(p, CompiledPolicy) or not p.reads_hooks]
        stances: list[Stance] = []
        if selected or listed:
            if activation is None:
                activation = self.activation(phase, req)
            for policy in (*selected, *listed):
                stance = (
                    self._stance(policy, activation)
                    if isinstance(policy, CompiledPolicy)
                    else _unknown(policy)
                )
                if stance is not None:
                    stances.append(stance)
        return self._combine(stances, perf_counter() - started)

    def activation(self, phase: Phase, req: EvalRequest) -> Any:
        """The backend's activation of `req`'s variables in `phase`, this set's constants
        bound: what `evaluate_all` evaluates every policy against."""
        variables = bindings_for(phase, req, req.now or self._clock(), self._constants)
        return self._backend.activation(variables)

    def _select(self, phase: Phase, capability: Mapping[str, Any]) -> tuple[CompiledPolicy, ...]:
        cap_id = str(capability.get("id", ""))
        tags = tuple(capability.get("tags") or ())
        key = (phase.value, cap_id, tags)
        found = self._selected.get(key)
        if found is None:
            found = tuple(p for p in self._global[phase] if p.selects(cap_id, tags))
            if len(self._selected) >= _CACHE_LIMIT:
                self._selected.clear()
            self._selected[key] = found
        return found

    def _listed(self, phase: Phase, names: tuple[str, ...]) -> list[CompiledPolicy | str]:
        out: list[CompiledPolicy | str] = []
        for name in dict.fromkeys(names):
            policy = self._by_name.get(name)
            if policy is None:
                out.append(name)  # SI-7: a capability relying on a missing policy fails closed
            elif policy.scope == "capability" and phase in policy.phases:
                out.append(policy)
        return out

    def _stance(self, policy: CompiledPolicy, activation: Any) -> Stance | None:
        """The policy's stance, None when its match.expr excludes it.

        The time limit bounds this thread's CPU time (`thread_time`), not wall time: a thread
        descheduled under CPU contention, or waiting for the GIL, does not spend the policy's
        budget (issue 14). The evaluation runs on this thread, in cel-cpp or in Python."""
        run = self._backend.run
        started = thread_time()
        stance = Stance(policy.name, policy.mode, None, None, None, None)
        if policy.match is not None:
            outcome = run(policy.match.runnable, activation)
            if isinstance(outcome, str):
                return _failed(
                    policy, None, f"match.expr: {safe_error(outcome, policy.match.source)}"
                )
            if not outcome and thread_time() - started <= self._limit:
                return None
        for rule in policy.rules:
            outcome = run(rule.when.runnable, activation)
            if outcome is True:
                stance = Stance(
                    policy.name, policy.mode, rule.effect, rule.index, rule.message, None
                )
                break
            if isinstance(outcome, str):
                return _failed(policy, rule.index, f"when: {safe_error(outcome, rule.when.source)}")
        if thread_time() - started > self._limit:
            # cel-cpp cannot be interrupted; a result past the CPU budget is discarded (SI-7).
            limit_ms = f"{self._limit * 1000:g}"
            return _failed(
                policy, stance.rule, f"evaluation exceeded the {limit_ms} ms CPU time limit"
            )
        return stance

    def _combine(self, stances: list[Stance], elapsed: float) -> Evaluation:
        enforced = [s for s in stances if s.enforced and s.effect is not None]
        decision = combine(s.effect for s in enforced if s.effect is not None)
        first = next((s for s in enforced if s.effect is decision and s.error is None), None)
        failed = decision is Decision.DENY and first is None
        approval = None
        if decision is Decision.REQUIRE_APPROVAL:
            parts = [
                (s, self._by_name[s.policy].rules[s.rule].approval)
                for s in enforced
                if s.effect is Decision.REQUIRE_APPROVAL and s.rule is not None
            ]
            approval = merge_requirements(parts)
        message = first.message if first is not None and decision is not Decision.ALLOW else None
        return Evaluation(decision, tuple(stances), message, approval, failed, elapsed)


def _union(
    reads: Iterable[frozenset[tuple[str, ...]] | None],
) -> frozenset[tuple[str, ...]] | None:
    """Every path some discovery-phase policy reads; None when one of them is unknown."""
    found: set[tuple[str, ...]] = set()
    for paths in reads:
        if paths is None:
            return None
        found |= paths
    return frozenset(found)


def _failed(policy: CompiledPolicy, rule: int | None, cause: str) -> Stance:
    """An error stance: it combines as deny (SI-7); `cause` never quotes request values."""
    return Stance(policy.name, policy.mode, Decision.DENY, rule, None, cause)


def _unknown(name: str) -> Stance:
    return Stance(
        name, "enforce", Decision.DENY, None, None, "the capability lists an unknown policy"
    )
