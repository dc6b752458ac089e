"""The gateway process: `serve` (start, reload, drain, stop), `workers` (N processes on the
same ports), the loader `serve` and `config check` share, telemetry's start and stop, and
stopping background tasks (docs/architecture.md)."""
