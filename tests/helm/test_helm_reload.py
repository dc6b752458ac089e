"""The pod, run for real without Kubernetes: the image's ENTRYPOINT (from the project venv)
with the container args the chart renders, on the chart's ConfigMaps laid out and updated the
way kubelet does it (atomic `..data` swaps), next to the example upstream and a real Redis.

What it proves: the chart's config starts a gateway whose probes answer; a ConfigMap edit
(capability, then policy) is picked up with no restart; a broken edit is refused and the last
good revision keeps serving; a Redis outage never fails readiness.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml
from grpc_health.v1 import health_pb2, health_pb2_grpc

from capgate.v1 import gateway_pb2, gateway_pb2_grpc
from examples.orders.server import serve as serve_orders
from gateway.state.embedded import RedisProcess, free_port
from tests.helm.chart import CHART, Rendered, gateway_container, pod_spec, projected_files, render
from tests.helm.dockerfile import entrypoint, parse
from tests.helm.kubelet import ConfigMapVolume

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

VALUES = CHART / "ci" / "sidecar.yaml"
CAPGATE = Path(sys.executable).parent / "capgate"  # the console script of the project venv
ACTOR = [
    ("x-capgate-actor-id", "sam"),
    ("x-capgate-actor-kind", "user"),
    ("x-capgate-actor-roles", "support"),
]
HMAC_KEY = "hmac-key-for-the-chart-test-0123456789"
JWT_SECRET = "jwt-secret-for-the-chart-test-0123456789"


@dataclass
class Pod:
    """One gateway process started as the chart's pod would start it."""

    process: subprocess.Popen[bytes]
    volume: ConfigMapVolume
    files: dict[str, str]
    run_dir: Path
    workdir: Path
    log: Path
    probe_port: int
    probes: dict[str, Any]
    metrics_port: int

    def metrics(self) -> str:
        """The Prometheus scrape the chart's ServiceMonitor points at."""
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as reply:
            body: str = reply.read().decode()
        return body

    @property
    def socket(self) -> str:
        return f"unix:{self.run_dir}/capgate.sock"

    def edit(self, change: Callable[[dict[str, str]], None]) -> None:
        """`kubectl edit configmap`, then kubelet's atomic update of the mounted volume."""
        files = dict(self.files)
        change(files)
        self.volume.write(files)
        self.files = files

    def refusals(self) -> int:
        return self.log.read_text().count("refused")

    def stop(self) -> int:
        self.process.terminate()  # SIGTERM, as kubelet sends it
        try:
            return self.process.wait(15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()


def _rendered(orders: str, run_dir: Path) -> Rendered:
    return render(
        [VALUES],
        sets=[
            f"listeners.probe.port={free_port()}",
            f"listeners.tcp[0].port={free_port()}",
            f"listeners.local.socketDir={run_dir}",
            f"actorToken.jwksOut={run_dir}/actor-jwks.json",
            f"config.upstreams.orders.address={orders}",
            "metrics.enabled=true",
            f"metrics.port={free_port()}",
        ],
        set_json=["gateway.watchInterval=0.2"],  # --set would read 0.2 as a string
    )


def start_pod(tmp: Path, orders: str, redis_url: str) -> Pod:
    run_dir = Path(tempfile.mkdtemp(prefix="cg-"))  # short: unix socket paths are limited
    rendered = _rendered(orders, run_dir)
    pod = pod_spec(rendered.one("Deployment"))
    container = gateway_container(pod)
    files = projected_files(rendered, pod)
    volume = ConfigMapVolume(tmp / "etc-capgate")
    volume.write(files)

    secrets = {
        ("capgate-redis", "url"): redis_url,
        ("capgate-audit", "hmac-key"): HMAC_KEY,
        ("capgate-jwt", "secret"): JWT_SECRET,
    }
    env = {k: v for k, v in os.environ.items() if k in {"PATH", "LANG", "CAPGATE_REDIS_SERVER"}}
    for item in container["env"]:
        ref = item.get("valueFrom", {}).get("secretKeyRef")
        env[item["name"]] = secrets[(ref["name"], ref["key"])] if ref else item["value"]
    env["HOME"] = "/nonexistent"  # the image's user has no home directory

    image_cmd = entrypoint(parse()[-1])
    assert image_cmd[0] == "capgate"
    argv = [
        str(CAPGATE),
        *[str(volume.root) if a == "/etc/capgate" else a for a in image_cmd[1:]],
        *container["args"],
        "--ready-file",
        str(tmp / "ready.json"),
    ]
    workdir = tmp / "cwd"
    workdir.mkdir()
    log = tmp / "gateway.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            argv, env=env, cwd=workdir, stdout=sink, stderr=subprocess.STDOUT
        )
    probes = {k: container[k]["grpc"] for k in ("livenessProbe", "readinessProbe", "startupProbe")}
    metrics_port = next(p["containerPort"] for p in container["ports"] if p["name"] == "metrics")
    started = Pod(
        process,
        volume,
        files,
        run_dir,
        workdir,
        log,
        probes["readinessProbe"]["port"],
        probes,
        metrics_port,
    )
    deadline = time.monotonic() + 30
    while not (tmp / "ready.json").exists():
        if process.poll() is not None or time.monotonic() > deadline:
            started.stop()
            pytest.fail(f"the gateway did not start:\n{log.read_text()}")
        time.sleep(0.05)
    return started


@pytest.fixture(scope="module")
async def orders_address() -> AsyncIterator[str]:
    server, port = await serve_orders("127.0.0.1:0")
    yield f"127.0.0.1:{port}"
    await server.stop(0)


@pytest.fixture(scope="module")
def pod(
    tmp_path_factory: pytest.TempPathFactory, orders_address: str, redis_server: RedisProcess
) -> Iterator[Pod]:
    started = start_pod(tmp_path_factory.mktemp("pod"), orders_address, redis_server.url)
    yield started
    assert started.stop() == 0, started.log.read_text()
    shutil.rmtree(started.run_dir, ignore_errors=True)


async def health(port: int, service: str) -> int:
    """The grpc.health.v1 status of `service`; SERVICE_UNKNOWN before it is first reported."""
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        try:
            reply = await stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=2)
        except grpc.aio.AioRpcError as exc:
            if exc.code() == grpc.StatusCode.NOT_FOUND:
                return int(health_pb2.HealthCheckResponse.SERVICE_UNKNOWN)
            raise
        return int(reply.status)


async def describe(pod: Pod) -> tuple[str, list[str]]:
    async with grpc.aio.insecure_channel(pod.socket) as channel:
        reply = await gateway_pb2_grpc.CapabilityGatewayStub(channel).Describe(
            gateway_pb2.DescribeRequest(), metadata=ACTOR, timeout=5
        )
    return reply.revision, sorted(c.id for c in reply.capabilities)


async def invoke(pod: Pod, capability: str, value: dict[str, Any]) -> gateway_pb2.ExecutionResult:
    async with grpc.aio.insecure_channel(pod.socket) as channel:
        return await gateway_pb2_grpc.CapabilityGatewayStub(channel).Invoke(
            gateway_pb2.InvokeRequest(
                capability_id=capability, input_json=json.dumps(value).encode()
            ),
            metadata=ACTOR,
            timeout=5,
        )


async def wait_for(check: Callable[[], Any], what: str, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not await check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


async def _is(pod: Pod, service: str, status: int) -> bool:
    return await health(pod.probe_port, service) == status


async def test_image_entrypoint_with_the_chart_args_starts_and_answers_the_probes(pod: Pod) -> None:
    for probe in pod.probes.values():
        assert await health(probe["port"], probe["service"]) == SERVING
    await wait_for(lambda: _is(pod, "capgate.redis", SERVING), "the first Redis health check")
    socket = pod.run_dir / "capgate.sock"
    assert stat.S_IMODE(socket.stat().st_mode) == 0o660
    # The app container verifies forwarded actor tokens with the JWKS in the shared directory.
    assert json.loads((pod.run_dir / "actor-jwks.json").read_text())["keys"]
    # Nothing written to the working directory: with a read-only root only volumes are writable.
    assert list(pod.workdir.iterdir()) == []


def _add_capability(files: dict[str, str]) -> None:
    config = yaml.safe_load(files["10-values.yaml"])
    config["capabilities"].append(
        {
            "id": "orders.list",
            "description": "List the orders of a customer.",
            "upstream": "orders",
            "side_effect": "read",
            "risk": "low",
            "expose": {"direct": True},
            "input_schema": {
                "type": "object",
                "required": ["customer_id"],
                "properties": {"customer_id": {"type": "string"}},
            },
        }
    )
    files["10-values.yaml"] = yaml.safe_dump(config)


HIDE_LISTS = """\
policies:
  - name: lists-for-auditors-only
    phases: [discovery, invocation]
    match:
      capabilities: [orders.list]
    rules:
      - when: "!('auditor' in actor.roles)"
        effect: hide
"""


async def test_configmap_edits_reload_capabilities_and_policies_without_restart(pod: Pod) -> None:
    revision, ids = await describe(pod)
    assert ids == ["orders.get"]  # admin.orders.purge is hidden by the chart's 10-admin policy

    pod.edit(_add_capability)

    async def listed() -> bool:
        return "orders.list" in (await describe(pod))[1]

    await wait_for(listed, "the new capability")
    result = await invoke(pod, "orders.list", {"customer_id": "c-1"})
    assert result.WhichOneof("outcome") == "completed", result
    assert {o["order_id"] for o in json.loads(result.completed.output_json)["orders"]} >= {"o-1001"}
    assert result.revision != revision
    assert 'capability="orders.list"' in pod.metrics()

    pod.edit(lambda files: files.update({"policies/20-lists.yaml": HIDE_LISTS}))

    async def hidden() -> bool:
        return (await describe(pod))[1] == ["orders.get"]

    await wait_for(hidden, "the new policy")
    assert pod.process.poll() is None, "reloading must never restart the process"


BROKEN_EDITS: dict[str, Callable[[dict[str, str]], None]] = {
    "unknown risk": lambda files: files.update(
        {"10-values.yaml": files["10-values.yaml"].replace("risk: low", "risk: negligible")}
    ),
    "yaml syntax": lambda files: files.update({"10-values.yaml": "capabilities: [\n"}),
    "cel syntax": lambda files: files.update(
        {
            "policies/10-admin.yaml": files["policies/10-admin.yaml"].replace(
                "!('admin' in actor.roles)", "!('admin' in actor.roles"
            )
        }
    ),
}


@pytest.mark.parametrize("broken", list(BROKEN_EDITS.values()), ids=list(BROKEN_EDITS))
async def test_a_broken_edit_is_refused_and_the_last_good_snapshot_keeps_serving(
    pod: Pod, broken: Callable[[dict[str, str]], None]
) -> None:
    good_files = dict(pod.files)
    before = await describe(pod)
    refusals = pod.refusals()
    pod.edit(broken)

    async def refused() -> bool:
        return pod.refusals() > refusals

    await wait_for(refused, "the gateway to refuse the edit")
    assert await describe(pod) == before
    assert await health(pod.probe_port, "capgate") == SERVING
    assert (await invoke(pod, "orders.get", {"order_id": "o-1001"})).WhichOneof(
        "outcome"
    ) == "completed"

    # Fixing the ConfigMap again is a change like any other.
    fixed = {**good_files, "10-values.yaml": good_files["10-values.yaml"] + "\n# fixed\n"}
    pod.edit(lambda files: (files.clear(), files.update(fixed)))

    async def recovered() -> bool:
        return (await describe(pod))[0] != before[0]

    await wait_for(recovered, "the fixed config")
    assert (await describe(pod))[1] == before[1]


async def test_a_redis_outage_never_fails_readiness(tmp_path: Path, orders_address: str) -> None:
    redis = RedisProcess(tmp_path / "redis").start()
    pod = start_pod(tmp_path, orders_address, redis.url)
    try:
        await wait_for(lambda: _is(pod, "capgate.redis", SERVING), "the first Redis health check")
        redis.stop()
        await wait_for(lambda: _is(pod, "capgate.redis", NOT_SERVING), "the outage to show")
        for probe in pod.probes.values():
            assert await health(probe["port"], probe["service"]) == SERVING
        assert (await describe(pod))[1] == ["orders.get"]
    finally:
        with contextlib.suppress(Exception):
            redis.stop()
        assert pod.stop() == 0, pod.log.read_text()
        shutil.rmtree(pod.run_dir, ignore_errors=True)
