"""Rate limits and budgets shared by every worker and replica (docs/limits.md)."""
