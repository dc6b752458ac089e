"""Everything in Redis: the connections (`connections`), the embedded server (`embedded`),
and each key family with its Lua, TTL and bound — `approvals/`, `idempotency`, `cache`,
`limits/`, `mcp_sessions` (docs/redis.md)."""
