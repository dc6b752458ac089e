"""Upstream forwarding (DESIGN §8): descriptors, JSON ⇄ protobuf, derived schemas, pooled
channels and the stage-11 call chain (retry → deadline → error mapping → stub).

Modules: `descriptors` (descriptor sets, server reflection, `resolve_method`), `transcode`
(`MessageCodec`; field converters in `fields`, well-known types in
`wellknown`), `schema` (`derive_schema`), `channels` (`ChannelPool`), `call`
(`UpstreamCall`, `call_with_retry`), `status` (the status → code table), `state`
(execution state of a failed call), `headers` (which caller values may travel as metadata),
`errors` (`UpstreamConfigError`, `TranscodeError`).
"""
