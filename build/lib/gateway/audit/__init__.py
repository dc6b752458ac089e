"""Audit trail: events exactly as seed 001 names them, never payloads (SI-10)."""
