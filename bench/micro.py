"""`python -m bench.micro`: what each hot-path component costs per governed call, in µs.

In-process and unprofiled, on the real objects a `bench.p3` call uses (prepared capability,
compiled policies, signer, authenticator, audit sink against a real Redis), so a proposed
change can be measured here before and after, next to the end-to-end figures of bench.run.
Writes bench/out/micro.json.
"""

from __future__ import annotations

import contextlib
import json
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
import uvloop

from bench import fixtures
from gateway.audit.sinks import RedisStreamSink
from gateway.config.loader import load_settings
from gateway.pipeline.bindings import View, activation
from gateway.pipeline.call import Call, Runtime
from gateway.pipeline.envelope import completed
from gateway.pipeline.events import build
from gateway.pipeline.snapshot import build_snapshot
from gateway.pipeline.stages.policies import (
    evaluate_execution_policies,
    evaluate_invocation_policies,
)
from gateway.state.connections import connect
from gateway.state.embedded import RedisProcess
from gateway.telemetry import metrics
from gateway.transport.auth.listeners import build_authenticator
from gateway.upstream.actor_token import ActorTokenSettings, ActorTokenSigner
from gateway.upstream.channels import ChannelPool
from gateway.values.jsonvalue import dumps, parse_json, scan
from policy import Phase

OUT = Path(__file__).parent / "out" / "micro.json"


def per_call_us(fn: Callable[[], object], *, seconds: float = 0.3, repeats: int = 5) -> float:
    """Median over `repeats` of the mean µs per call in a `seconds`-long loop."""
    fn()
    results = []
    for _ in range(repeats):
        n, started = 0, time.perf_counter()
        while (elapsed := time.perf_counter() - started) < seconds / repeats:
            for _ in range(20):
                fn()
            n += 20
        results.append(elapsed / n * 1e6)
    return round(statistics.median(results), 2)


class _Null:
    def emit(self, event: dict[str, Any]) -> None:
        pass

    async def emit_strict(self, event: dict[str, Any]) -> None:
        pass


async def measure() -> dict[str, float]:
    run_dir = Path(tempfile.mkdtemp(prefix="cgm-"))
    secret = fixtures.new_secret()
    config = fixtures.write_config(
        run_dir / "gateway.yaml",
        fixtures.gateway_config(
            run_dir=run_dir,
            upstream="127.0.0.1:9",
            redis_url="redis://127.0.0.1:9/0",
            secret=secret,
            hmac_key=fixtures.new_secret(),
        ),
    )
    settings = load_settings(config)
    snapshot = await build_snapshot(settings, ChannelPool(), hmac_key=b"k" * 32)
    p3, p0 = snapshot.capabilities["bench.p3"], snapshot.capabilities["bench.p0"]
    rt = Runtime(audit=_Null())
    auth = build_authenticator(settings.listeners[0])
    metadata = tuple(fixtures.bearer(secret, fixtures.AGENT, "capgate"))
    actor = auth.authenticate(metadata, {}, "ipv4:127.0.0.1:1")
    value = parse_json(fixtures.INPUT_JSON, p3.capability.limits)
    output = {
        "refund_id": "rf-1",
        "order_id": "ord-123456",
        "amount": 120.5,
        "status": "REFUND_STATUS_SUCCEEDED",
        "card_last4": "4242",
        "capability": "bench.p3",
    }

    def call(prepared: Any = p3) -> Call:
        c = Call(
            snapshot=snapshot,
            surface="agent",
            actor=actor,
            capability_id="bench.p3",
            raw_input=fixtures.INPUT_JSON,
            metadata={"x-tenant": fixtures.TENANT},
        )
        c.prepared, c.input, c.execution_id = prepared, value, uuid.uuid4().hex
        return c

    def policies(prepared: Any, phase: Phase) -> Callable[[], object]:
        """The stage as the pipeline runs it (skip check, request, activation, evaluation)."""
        c = call(prepared)
        stage = (
            evaluate_invocation_policies
            if phase is Phase.INVOCATION
            else evaluate_execution_policies
        )

        def once() -> None:
            c.bound.clear()  # a new call's: its variables and activation are built again
            with contextlib.suppress(StopIteration):
                stage(c, rt).send(None)  # the stage never awaits: run it to completion here

        return once

    bound = call()

    def activation_built() -> object:
        bound.bound.clear()  # as a stage found it before issue 26: built for itself
        return activation(bound, rt, View.INVOCATION)

    signer = ActorTokenSigner(ActorTokenSettings())
    results = {
        "jwt authenticate (cached token)": per_call_us(
            lambda: auth.authenticate(metadata, {}, "ipv4:127.0.0.1:1")
        ),
        "execution id (uuid4().hex)": per_call_us(lambda: uuid.uuid4().hex),
        "input parse + limits walk (0.6 KB)": per_call_us(
            lambda: parse_json(fixtures.INPUT_JSON, p3.capability.limits)
        ),
        "input schema validation": per_call_us(lambda: p3.input_validator.validate(value)),
        "invocation policies, 3 (request + activation + eval)": per_call_us(
            policies(p3, Phase.INVOCATION)
        ),
        "invocation policies, 0 (request + activation)": per_call_us(
            policies(p0, Phase.INVOCATION)
        ),
        "execution policies, none apply": per_call_us(policies(p3, Phase.EXECUTION)),
        # What each stage that evaluates CEL (hooks' and the journal's checks, stage 7, limits;
        # cache scope and map_input build the variables only) paid before the activation was
        # kept on the call, and what it pays now that it reuses it (gateway/pipeline/bindings.py).
        "call's CEL activation, built (request + variables + activation)": per_call_us(
            activation_built
        ),
        "call's CEL activation, reused": per_call_us(
            lambda: activation(bound, rt, View.INVOCATION)
        ),
        "actor token, reused (same actor, upstream, surface)": per_call_us(
            lambda: signer.sign(actor, upstream="bench", surface="agent")
        ),
        "actor token signing (Ed25519, an approved call's own token)": per_call_us(
            lambda: signer.sign(actor, upstream="bench", surface="agent", approval_id="a" * 32)
        ),
        "upstream input serialization (orjson)": per_call_us(lambda: dumps(value)),
        "output limits walk + schema validation": per_call_us(
            lambda: (
                scan(output, p3.capability.limits),
                p3.output_validator.validate(output),
            )
        ),  # type: ignore[union-attr]
        "output redaction (1 mask rule, deepcopy)": per_call_us(lambda: p3.redact_output(output)),
        "audit events, 3 built (requested, started, completed)": per_call_us(
            lambda: [build(n, c, time.time()) for c in (call(),) for n in ("a", "b", "c")]
        ),
        "16 metric observations": per_call_us(
            lambda: [metrics.stage_duration.observe(0.0001, ("resolve",)) for _ in range(16)]
        ),
        "result envelope (build + serialize)": per_call_us(
            lambda: completed(
                execution_id="e" * 32,
                capability_id="bench.p3",
                attempts=1,
                duration_s=0.001,
                output_json=dumps(output).decode(),
                revision="r" * 16,
                approval_id="",
            ).SerializeToString()
        ),
    }
    results |= await _pipeline(snapshot, actor, signer)
    results |= await _tracing()
    results |= await _redis(run_dir, snapshot, call)
    return results


class _StubUpstream:
    """Answers at once with the procedure's reply: the pipeline's own cost, without gRPC."""

    full_method = "/capgate.v1.Procedure/Invoke"
    span_attributes = {
        "rpc.system": "grpc",
        "rpc.service": "capgate.v1.Procedure",
        "rpc.method": "Invoke",
    }

    async def __call__(self, input_value: Any, *, timeout: float, metadata: Any = ()) -> Any:  # noqa: ASYNC109
        return {
            "refund_id": "rf-1",
            "order_id": input_value["order_id"],
            "amount": 120.5,
            "status": "REFUND_STATUS_SUCCEEDED",
            "card_last4": "4242",
        }


async def _pipeline(snapshot: Any, actor: Any, signer: Any) -> dict[str, float]:
    """Stages 2-13 of `bench.p3` end to end (upstream stubbed, audit discarded): the whole
    in-process pipeline, glue included, per call."""
    from dataclasses import replace  # noqa: PLC0415

    from gateway.pipeline import runner as pipeline  # noqa: PLC0415

    caps = dict(snapshot.capabilities)
    caps["bench.p3"] = replace(caps["bench.p3"], upstream_call=_StubUpstream())
    stubbed = replace(snapshot, capabilities=caps)
    rt = Runtime(audit=_Null(), signer=signer)

    async def once() -> None:
        call = Call(
            snapshot=stubbed,
            surface="agent",
            actor=actor,
            capability_id="bench.p3",
            raw_input=fixtures.INPUT_JSON,
            metadata={"x-tenant": fixtures.TENANT},
        )
        result = await pipeline.run(call, rt, pipeline.INVOKE)
        assert result.WhichOneof("outcome") == "completed", result

    for _ in range(200):
        await once()
    n, started, cpu = 0, time.perf_counter(), time.process_time()
    while time.perf_counter() - started < 1.0:
        await once()
        n += 1
    return {
        "pipeline stages 2-13, upstream stubbed (CPU)": round(
            (time.process_time() - cpu) / n * 1e6, 2
        )
    }


async def _tracing() -> dict[str, float]:
    """An unsampled SERVER span per RPC (tracing on, sampler off) and the context look-ups."""
    from opentelemetry import context, trace  # noqa: PLC0415
    from opentelemetry.sdk.trace import TracerProvider  # noqa: PLC0415
    from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ParentBased  # noqa: PLC0415

    tracer = TracerProvider(sampler=ParentBased(ALWAYS_OFF)).get_tracer("bench")

    def span() -> None:
        with tracer.start_as_current_span(
            "x", context=context.Context(), kind=trace.SpanKind.SERVER
        ):
            pass

    return {
        "unsampled server span (start + end)": per_call_us(span),
        "trace.get_current_span() x10": per_call_us(
            lambda: [trace.get_current_span() for _ in range(10)]
        ),
    }


async def _redis(run_dir: Path, snapshot: Any, call: Callable[[], Call]) -> dict[str, float]:
    """Redis stream audit sink: client CPU per event in batches of 3 and 64 events."""
    server = RedisProcess(run_dir / "redis").start()
    redis = connect(fixtures_redis(snapshot, server.url))
    sink = RedisStreamSink(redis, "bench:micro", 100_000)
    events = [build("capability.started", call(), time.time()) for _ in range(64)]
    out = {}
    try:
        for size in (3, 64):
            batch = events[:size]
            await sink.write(batch)
            n, started = 0, time.perf_counter()
            while time.perf_counter() - started < 1.0:
                await sink.write(batch)
                n += size
            out[f"redis audit XADD, per event (batches of {size})"] = round(
                (time.perf_counter() - started) / n * 1e6, 2
            )
    finally:
        await redis.aclose()
        server.stop()
    return out


def fixtures_redis(snapshot: Any, url: str) -> Any:
    from dataclasses import replace  # noqa: PLC0415

    return replace(snapshot.settings.redis, url=url)


def main() -> None:
    results = uvloop.run(measure())
    width = max(map(len, results))
    for name, us in results.items():
        print(f"{name:<{width}}  {us:>8.2f} µs")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    _ = grpc  # imported for the same process state as the gateway (grpc's C core loaded)
    main()
