"""The governed result cache (docs/cache.md): entries in Redis, encrypted and bound to their
key (`store`), the scope key a capability's entries are shared under (`scope`). The pipeline
rows that use them are in gateway/stages/cache.py."""
