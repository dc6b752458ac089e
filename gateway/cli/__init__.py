"""The `capgate` command line: `main` (the one entry point) and one module per command group.

Nothing below gateway/ imports from here: a command reaches down into the process, the
transport's clients, config and state; nothing reaches up into a command (docs/architecture.md).
"""
