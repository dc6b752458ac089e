"""The public surface of gateway.upstream, pinned (STYLE principle 7): the pipeline, the
snapshot builder and the example upstream depend on these names and signatures."""

from __future__ import annotations

import importlib
import inspect

import pytest

from gateway.upstream.call import GrpcMethodCall, ProcedureCall
from gateway.upstream.http import HttpCall
from gateway.upstream.mcpcall import McpToolCall

PUBLIC = {
    "call": [
        "Clock",
        "GrpcMethodCall",
        "Jitter",
        "OnRetry",
        "PROCEDURE_METHOD",
        "ProcedureCall",
        "Sleep",
        "UpstreamCall",
        "backoff_delay",
        "call_with_deadline",
        "call_with_retry",
        "grpc_call",
        "procedure_call",
        "retry_allowed",
    ],
    "channels": ["ChannelPool", "channel_credentials", "channel_options", "create_channel"],
    "descriptors": [
        "MethodInfo",
        "load_descriptor_set",
        "load_from_reflection",
        "pool_from_files",
        "proto3_optional_names",
        "real_oneofs",
        "resolve_method",
    ],
    "errors": ["TranscodeError", "UpstreamConfigError", "UpstreamUnreachable"],
    "headers": ["FORWARDED_RULE", "MAX_FORWARDED_LENGTH", "Metadata", "forwarded_value_issues"],
    "schema": ["DRAFT", "derive_schema"],
    "state": [
        "ATTEMPTS_KEY",
        "ExecutionState",
        "RETRY_AFTER_KEY",
        "STATE_KEY",
        "UPSTREAM_STATUS_KEY",
        "state_of",
        "with_state",
    ],
    "status": ["MAX_PUBLIC_MESSAGE", "STATUS_TABLE", "map_rpc_error", "map_status"],
    "fields": [
        "FLOAT32_MAX",
        "INT_RANGES",
        "enum_codec",
        "map_codec",
        "repeated_codec",
        "scalar_codec",
    ],
    "transcode": ["MessageCodec"],
    "http": ["HttpCall", "HttpRequest", "http_call", "map_response", "request_for"],
    "httpclient": [
        "AUTH_STATUSES",
        "MAX_PUBLIC_MESSAGE",
        "USER_AGENT",
        "HttpClients",
        "SentTracker",
        "answered",
        "create_client",
        "deadline_exceeded",
        "public_text",
        "retry_after",
        "transport_errors",
        "transport_failure",
    ],
    "httpspec": ["BODY_METHODS", "HttpUpstream", "parse_template"],
    "spec": ["Upstream"],
    "targets": [
        "KINDS",
        "LOAD_TIMEOUT_S",
        "DescriptorLookup",
        "Target",
        "TargetRefused",
        "UpstreamUnusable",
        "prepare_target",
    ],
    "openapi": ["Draft", "draft_capabilities"],
    "mcpspec": [
        "HANDSHAKE_VERSIONS",
        "STATELESS_VERSION",
        "McpUpstream",
        "OAuthClient",
        "Protocol",
    ],
    "oauth": ["MARGIN_S", "TokenSource", "renew_after"],
    "mcpclient": ["CLIENT_INFO", "McpClient", "McpProtocolError"],
    "mcpcall": [
        "UNSUPPORTED_KEYWORDS",
        "McpToolCall",
        "draft_tool_capabilities",
        "find_tool",
        "load_tool",
        "plain_schema",
        "schema_problems",
        "tool_output",
    ],
    "wellknown": ["Decode", "Encode", "FieldError", "WRAPPERS", "wkt_codec"],
}

SIGNATURES = {
    ("call", "call_with_retry"): (
        "(call: 'UpstreamCall', input_value: 'Any', *, capability: 'Capability', "
        "deadline: 'float', clock: 'Clock', sleep: 'Sleep', jitter: 'Jitter', "
        "on_retry: 'OnRetry', metadata: 'Metadata' = ()) -> 'tuple[Any, int]'"
    ),
    ("call", "call_with_deadline"): (
        "(call: 'UpstreamCall', input_value: 'Any', *, deadline: 'float', clock: 'Clock', "
        "metadata: 'Metadata' = ()) -> 'Any'"
    ),
    ("call", "grpc_call"): (
        "(channel: 'grpc.aio.Channel', method: 'MethodInfo', *, upstream: 'Upstream') "
        "-> 'GrpcMethodCall'"
    ),
    ("call", "procedure_call"): (
        "(channel: 'grpc.aio.Channel', capability_id: 'str', *, upstream: 'Upstream') "
        "-> 'ProcedureCall'"
    ),
    (
        "descriptors",
        "resolve_method",
    ): "(pool: 'DescriptorPool', full_method: 'str') -> 'MethodInfo'",
    ("descriptors", "load_from_reflection"): (
        "(channel: 'grpc.aio.Channel', services: 'Iterable[str] | None' = None, *, "
        "timeout: 'float' = 5.0) -> 'DescriptorPool'"
    ),
    ("descriptors", "load_descriptor_set"): "(path: 'str | Path') -> 'DescriptorPool'",
    ("schema", "derive_schema"): (
        "(descriptor: 'Descriptor', *, max_depth: 'int' = 32, max_recursion: 'int' = 2) "
        "-> 'dict[str, Any]'"
    ),
}


@pytest.mark.parametrize("module", sorted(PUBLIC))
def test_each_module_exports_exactly_its_public_names(module: str) -> None:
    mod = importlib.import_module(f"gateway.upstream.{module}")
    assert sorted(mod.__all__) == sorted(PUBLIC[module])
    for name in mod.__all__:
        assert hasattr(mod, name), name


@pytest.mark.parametrize(("module", "name"), sorted(SIGNATURES))
def test_signatures_callers_rely_on(module: str, name: str) -> None:
    function = getattr(importlib.import_module(f"gateway.upstream.{module}"), name)
    assert str(inspect.signature(function)) == SIGNATURES[(module, name)]


def test_an_upstream_call_takes_json_a_timeout_and_metadata() -> None:
    for cls in (GrpcMethodCall, ProcedureCall, HttpCall, McpToolCall):
        assert str(inspect.signature(cls.__call__)) == (
            "(self, input_value: 'Any', *, timeout: 'float', metadata: 'Metadata' = ()) -> 'Any'"
        )
