"""What faces a caller: the gRPC listeners (`server`), the servicers (stage 1 and the hand-off
to the pipeline), authentication (`auth/`), the admin services (`admin/`), reflection, and the
MCP listener (`mcp/`). Transport holds no governance logic: that is the pipeline's."""
