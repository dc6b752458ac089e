"""capgate: a language-neutral capability gateway (the gRPC sidecar)."""

__version__ = "0.1.0"
