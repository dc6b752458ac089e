"""The MCP surface: an MCP Streamable HTTP listener in the sidecar with the same governance as
the gRPC listeners (docs/mcp.md, ADR 0010).

Modules: `names` (tool names), `jsonrpc` (messages), `sessions`, `guard` (Host/Origin, RFC 9728),
`tools` (MCP shapes of descriptors and envelopes), `protocol` (the methods), `http` (the ASGI
app), `server` (uvicorn in the gateway's loop), `config` (config checks and settings).
Nothing is imported here, so config checking does not load the HTTP stack.
"""
