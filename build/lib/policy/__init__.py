"""capgate's CEL policy engine: load, check and evaluate policy files.

Usable on its own (a policy author's library and the `capgate policy` CLI); it never
imports the gateway. The gateway calls `load_policy_set` at load or reload and
`PolicySet.evaluate_all` at discovery (Describe), stage 7 and stage 9.
"""

from policy.engine import PolicySet
from policy.errors import LoadIssue, PolicyLoadError
from policy.loader import load_policy_set
from policy.model import (
    ITERATION_BUDGET,
    ApprovalRequirement,
    Decision,
    EvalRequest,
    Evaluation,
    Limits,
    Phase,
    Stance,
)

__all__ = [
    "ITERATION_BUDGET",
    "ApprovalRequirement",
    "Decision",
    "EvalRequest",
    "Evaluation",
    "Limits",
    "LoadIssue",
    "Phase",
    "PolicyLoadError",
    "PolicySet",
    "Stance",
    "load_policy_set",
]
