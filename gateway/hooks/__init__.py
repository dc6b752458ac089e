"""Governance hooks (seed 002, docs/hooks.md, ADR 0027): `capgate.v1.Hook` services in any
language, called around a governed call. A hook adds context, changes the input or output
through controlled fields, or asks for deny/approval; it never bypasses a policy's deny, hide
or approval requirement, nor exposure, validation or the approval gate.

`model` (the configured specs), `config` (checks and builder), `calls` (one bounded, audited,
traced hook call); the stages that use them are in gateway/stages/hooks.py.
"""
