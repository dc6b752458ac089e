# The same decisions as bench/policies/three.yaml (the three capgate policies Check evaluates),
# for the OPA side of the comparison: every rule is evaluated, deny > require_approval > allow.
# Queried as POST /v1/data/capgate/bench/decision with {"input": {actor, capability, input}}.
package capgate.bench

approval_threshold := 500

hard_limit := 10000

# anonymous-read-only
deny contains "Anonymous callers may only read." if {
	input.actor.kind == "anonymous"
	input.capability.side_effect != "none"
}

# amount-limits, rule 1
deny contains "Amounts over 10,000 are refused." if {
	input.input.amount > hard_limit
}

# amount-limits, rule 2 (a rule that matched first abstains from the later ones)
require_approval contains "Amounts over 500 need a manager." if {
	input.input.amount > approval_threshold
	not input.input.amount > hard_limit
}

# agent-role-required
deny contains "Only agents may call this." if {
	not "agent" in input.actor.roles
}

default decision := "allow"

decision := "deny" if count(deny) > 0

decision := "require_approval" if {
	count(deny) == 0
	count(require_approval) > 0
}
