"""One module per pipeline stage, named by what it does; each docstring starts with the
seed-001 stage number and the invariants it enforces."""

from __future__ import annotations

from typing import Final

SUSPEND: Final = "suspend"  # a stage returns this to end the pipeline early with call.result
