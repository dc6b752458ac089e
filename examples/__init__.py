"""Runnable examples; `examples.orders` is the example upstream used by the demo and tests."""
