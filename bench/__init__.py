"""The benchmark harness (`python -m bench.run`, `make bench`): side-by-side figures of the
direct upstream call, a bare Python proxy hop and the governed gateway paths (DESIGN §11)."""
