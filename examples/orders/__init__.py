"""The example upstream: an in-memory order book served over gRPC (see server.py)."""
