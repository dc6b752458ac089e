/** TLS end to end against a local connect-node gRPC server with a test CA (test/fixtures). */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import * as http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { CapabilityGateway } from "../src/gen/capgate/v1/gateway_pb.js";
import { CapgateClient, CapgateError } from "../src/index.js";
import { packageRoot } from "./helpers.js";

const fixture = (name: string) => readFileSync(join(packageRoot, "test", "fixtures", name));

describe("TLS", () => {
  let server: http2.Http2SecureServer;
  let target: string;

  before(async () => {
    const handler = connectNodeAdapter({
      routes: (router) =>
        router.service(CapabilityGateway, {
          // Echo the credentials the client sent, so the test sees them arrive over TLS.
          describe: (_req, ctx) => ({
            capabilities: [{ id: "echo", description: ctx.requestHeader.get("authorization") ?? "" }],
            revision: "r1",
          }),
        }),
    });
    server = http2.createSecureServer({ key: fixture("server-key.pem"), cert: fixture("server.pem") }, handler);
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    target = `127.0.0.1:${(server.address() as AddressInfo).port}`;
  });

  after(() => new Promise<void>((resolve) => server.close(() => resolve())));

  test("a client trusting the CA reaches the server by its certificate name, with its token", async () => {
    const client = CapgateClient.connect({ target, token: "tok", tls: { ca: fixture("ca.pem"), serverName: "capgate.test" } });
    try {
      const { capabilities, revision } = await client.describe();
      assert.equal(revision, "r1");
      assert.deepEqual(capabilities.map((c) => [c.id, c.description]), [["echo", "Bearer tok"]]);
    } finally {
      client.close();
    }
  });

  test("a client that does not trust the certificate is refused", async () => {
    const client = CapgateClient.connect({ target, token: "tok", tls: true, defaultTimeoutMs: 5_000 });
    try {
      await assert.rejects(client.describe(), (e: unknown) => e instanceof CapgateError && e.grpcCode !== undefined);
    } finally {
      client.close();
    }
  });
});
