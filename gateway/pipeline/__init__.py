"""Governance of one call: the stage tables and their runner (`runner`), the typed call
(`call`), the snapshot it runs against (`snapshot`), one module per stage (`stages/`),
discovery and the `Check` dry run (`discovery`), envelopes (`envelope`), hook calls
(`hookcalls`), compiled limits (`limits`) and the calls in flight at shutdown (`drain`)."""
