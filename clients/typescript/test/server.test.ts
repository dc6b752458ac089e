/**
 * The upstream-side helper in a real connect-node gRPC server: the interceptor verifies the
 * forwarded actor token and hands the handler its AgentContext, or refuses with UNAUTHENTICATED.
 * Tokens are signed here with the golden vectors' test keys; the verifier's clock is fixed.
 */
import assert from "node:assert/strict";
import { createPrivateKey, sign } from "node:crypto";
import { readFileSync } from "node:fs";
import * as http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";
import { Code, ConnectError, createClient, type Client } from "@connectrpc/connect";
import { connectNodeAdapter, createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import { Procedure } from "../src/gen/capgate/v1/procedure_pb.js";
import {
  ActorTokenVerifier,
  AgentContextInvalid,
  agentContext,
  agentContextInterceptor,
  readAgentContext,
  type Jwks,
} from "../src/server/index.js";
import { vectorsPath } from "./helpers.js";

const vectors = JSON.parse(readFileSync(vectorsPath, "utf8")) as {
  jwks: Jwks;
  private_keys_pem: Record<string, string>;
};
const NOW = 1_767_225_600;
const [edKid, esKid] = vectors.jwks.keys.map((k) => (k as { kid: string }).kid) as [string, string];

function b64(value: object): string {
  return Buffer.from(JSON.stringify(value)).toString("base64url");
}

function mint(claims: Record<string, unknown>, kid = edKid): string {
  const alg = kid === edKid ? "EdDSA" : "ES256";
  const input = `${b64({ alg, kid, typ: "capgate-actor+jwt" })}.${b64(claims)}`;
  const key = createPrivateKey(vectors.private_keys_pem[kid]!);
  const signature =
    alg === "EdDSA"
      ? sign(null, Buffer.from(input), key)
      : sign("sha256", Buffer.from(input), { key, dsaEncoding: "ieee-p1363" });
  return `${input}.${signature.toString("base64url")}`;
}

const baseClaims = {
  iss: "capgate",
  aud: "orders",
  sub: "alice",
  actor_iss: "test-idp",
  kind: "user",
  roles: ["agent"],
  exec_id: "exe-1",
  cap: "orders.refund",
  surface: "agent",
  iat: NOW,
  exp: NOW + 60,
  jti: "jti-1",
};

function forwarded(token: string, extra: Record<string, string> = {}): Record<string, string> {
  return {
    "x-capgate-actor-token": token,
    "x-capgate-execution-id": "exe-1",
    "x-capgate-capability": "orders.refund",
    "x-capgate-surface": "agent",
    "x-capgate-idempotency-key": "key-1",
    ...extra,
  };
}

const verifier = new ActorTokenVerifier({ jwks: vectors.jwks, issuer: "capgate", audience: "orders", clock: () => NOW + 1 });

describe("agentContextInterceptor in a connect-node gRPC server", () => {
  let server: http2.Http2Server;
  let client: Client<typeof Procedure>;
  let session: Http2SessionManager;

  before(async () => {
    const handler = connectNodeAdapter({
      interceptors: [agentContextInterceptor(verifier)],
      routes: (router) =>
        router.service(Procedure, {
          invoke: (req, ctx) => ({ outputJson: JSON.stringify({ capability: req.capabilityId, agent: agentContext(ctx) }) }),
        }),
    });
    server = http2.createServer(handler);
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as AddressInfo;
    const baseUrl = `http://127.0.0.1:${port}`;
    session = new Http2SessionManager(baseUrl);
    client = createClient(Procedure, createGrpcTransport({ baseUrl, sessionManager: session }));
  });

  after(async () => {
    session.abort();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  test("a valid token reaches the handler as an AgentContext", async () => {
    const token = mint({ ...baseClaims, approval_id: "apr-1", approver: "bob" }, esKid);
    const res = await client.invoke(
      { capabilityId: "orders.refund", inputJson: "{}" },
      { headers: forwarded(token, { "x-capgate-approval-id": "apr-1", "x-capgate-correlation-id": "c-9" }) },
    );
    const { agent } = JSON.parse(res.outputJson) as { agent: Record<string, unknown> };
    assert.deepEqual(agent.actor, { id: "alice", issuer: "test-idp", kind: "user", roles: ["agent"] });
    assert.equal(agent.executionId, "exe-1");
    assert.equal(agent.capabilityId, "orders.refund");
    assert.equal(agent.idempotencyKey, "key-1");
    assert.equal(agent.correlationId, "c-9");
    assert.equal(agent.approvalId, "apr-1");
    assert.equal(agent.approver, "bob");
  });

  test("a call without a token is refused with UNAUTHENTICATED", async () => {
    await assert.rejects(
      client.invoke({ capabilityId: "orders.refund" }),
      (e: unknown) => e instanceof ConnectError && e.code === Code.Unauthenticated && /missing_token/.test(e.rawMessage),
    );
  });

  test("a token for another upstream is refused with its reason class", async () => {
    const token = mint({ ...baseClaims, aud: "billing" });
    await assert.rejects(
      client.invoke({ capabilityId: "orders.refund" }, { headers: forwarded(token) }),
      (e: unknown) => e instanceof ConnectError && e.code === Code.Unauthenticated && /wrong_audience/.test(e.rawMessage),
    );
  });

  test("a plain header contradicting the signed claims is refused", async () => {
    const token = mint(baseClaims);
    await assert.rejects(
      client.invoke({ capabilityId: "orders.refund" }, { headers: forwarded(token, { "x-capgate-execution-id": "exe-2" }) }),
      (e: unknown) => e instanceof ConnectError && e.code === Code.Unauthenticated && /header_mismatch/.test(e.rawMessage),
    );
  });
});

describe("readAgentContext for other server frameworks", () => {
  test("reads through a lookup function and defaults the idempotency key to the execution id", () => {
    const headers: Record<string, string> = { "x-capgate-actor-token": mint(baseClaims) };
    const ctx = readAgentContext(verifier, (name) => headers[name]);
    assert.equal(ctx.idempotencyKey, "exe-1");
    assert.equal(ctx.approvalId, undefined);
    assert.equal(ctx.claims.jti, "jti-1");
  });

  test("an expired token is refused as expired", () => {
    const headers = new Headers({ "x-capgate-actor-token": mint(baseClaims) });
    assert.throws(
      () => readAgentContext(verifier, headers, { now: NOW + 65 }),
      (e: unknown) => e instanceof AgentContextInvalid && e.reason === "expired",
    );
  });

  // The gateway reuses one token across executions (DESIGN §12, amended 2026-12-01): it names no
  // execution; each call's execution id and capability come from the metadata beside it.
  test("a reused token takes the execution id and capability from the metadata", () => {
    const { exec_id: _e, cap: _c, ...reused } = baseClaims;
    const token = mint(reused);
    for (const exec of ["exe-1", "exe-2"]) {
      const headers = new Headers({ ...forwarded(token, { "x-capgate-execution-id": exec }), "x-capgate-idempotency-key": "" });
      const ctx = readAgentContext(verifier, headers);
      assert.equal(ctx.executionId, exec);
      assert.equal(ctx.capabilityId, "orders.refund");
      assert.equal(ctx.idempotencyKey, exec);
    }
    for (const missing of ["x-capgate-execution-id", "x-capgate-capability"]) {
      const headers = forwarded(token);
      delete headers[missing];
      assert.throws(
        () => readAgentContext(verifier, new Headers(headers)),
        (e: unknown) => e instanceof AgentContextInvalid && e.reason === "missing_metadata",
      );
    }
  });

  test("an approval id header without a signed approval is refused", () => {
    const headers = new Headers(forwarded(mint(baseClaims), { "x-capgate-approval-id": "apr-forged" }));
    assert.throws(
      () => readAgentContext(verifier, headers),
      (e: unknown) => e instanceof AgentContextInvalid && e.reason === "header_mismatch",
    );
  });
});
