/**
 * The client against the shared stack: the real gateway (tests/gateway/gateway.yaml), the real
 * example upstream and Redis, started once by `scripts/stack.py start`. Skipped, with the reason,
 * when `.run/stack.json` (or $CAPGATE_STACK) is absent.
 */
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test as nodeTest } from "node:test";
import { createFileRegistry, fromBinary } from "@bufbuild/protobuf";
import { FileDescriptorSetSchema } from "@bufbuild/protobuf/wkt";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { ApprovalAdminClient, CapgateClient, CapgateError, unwrap } from "../src/index.js";
import { loadStack, repoRoot, skipWithoutStack } from "./helpers.js";
/** The upstream's own call log (orders.v1.Control/GetStats), read through its descriptor set. */
async function upstreamLog(address) {
    const registry = createFileRegistry(fromBinary(FileDescriptorSetSchema, readFileSync(join(repoRoot, "examples", "orders", "orders.pb"))));
    const control = registry.getService("orders.v1.Control");
    assert.ok(control, "orders.pb describes orders.v1.Control");
    const client = createClient(control, createGrpcTransport({ baseUrl: `http://${address}` }));
    const getStats = client["getStats"];
    return (await getStats({})).log;
}
function expectError(outcome, kind) {
    assert.equal(outcome.kind, kind, `expected a ${kind} outcome, got ${JSON.stringify(outcome)}`);
    return outcome.error;
}
/** Each stack test is skipped (counted, with the reason) when no stack is running. */
const test = (name, fn) => nodeTest(name, { skip: skipWithoutStack }, fn);
describe("against the shared stack", () => {
    let stack;
    let alice;
    let bob;
    before(() => {
        if (skipWithoutStack)
            return;
        stack = loadStack();
        alice = CapgateClient.connect({ target: stack.agents, token: stack.tokens.alice, defaultTimeoutMs: 10_000 });
        bob = ApprovalAdminClient.connect({ target: stack.admin, token: stack.tokens.bob, defaultTimeoutMs: 10_000 });
    });
    after(() => {
        if (skipWithoutStack)
            return;
        alice.close();
        bob.close();
    });
    test("describe lists what alice may see, with parsed input schemas, and hides admin capabilities", async () => {
        const { capabilities, revision } = await alice.describe();
        const ids = capabilities.map((c) => c.id);
        assert.ok(ids.includes("orders.get") && ids.includes("orders.refund"), ids.join(","));
        assert.ok(!ids.includes("admin.orders.purge"), "admin.orders.purge is hidden from non-admins");
        assert.ok(!ids.includes("orders.unexposed"), "unexposed capabilities are not described");
        assert.notEqual(revision, "");
        const refund = capabilities.find((c) => c.id === "orders.refund");
        assert.equal(refund.sideEffect, "write");
        const schema = refund.inputSchema;
        assert.deepEqual([...schema.required].sort(), ["amount", "order_id"]);
        assert.ok("amount" in schema.properties);
    });
    test("an admin sees the admin capability that others do not", async () => {
        const root = CapgateClient.connect({ target: stack.agents, token: stack.tokens.root });
        try {
            const { capabilities } = await root.describe();
            assert.ok(capabilities.some((c) => c.id === "admin.orders.purge"));
        }
        finally {
            root.close();
        }
    });
    test("invoke completes with the output as a native object", async () => {
        const outcome = await alice.invoke("orders.get", { order_id: "o-1001" });
        assert.equal(outcome.kind, "completed", JSON.stringify(outcome));
        assert.equal(unwrap(outcome).order_id, "o-1001");
        assert.equal(outcome.capabilityId, "orders.get");
        assert.equal(outcome.executionState, "COMPLETED");
        assert.match(outcome.executionId, /.+/);
    });
    test("a JSON codec receives the exact output text, so 64-bit integers need not lose digits", async () => {
        const raw = CapgateClient.connect({
            target: stack.agents,
            token: stack.tokens.alice,
            json: { stringify: JSON.stringify, parse: (text) => text },
        });
        try {
            const text = unwrap(await raw.invoke("orders.get", { order_id: "o-1003" }));
            assert.match(text, /9007199254740993/, "2^53 + 1 arrives exactly");
        }
        finally {
            raw.close();
        }
    });
    test("a refund over the limit is denied with POLICY_DENIED, and unwrap throws it", async () => {
        const outcome = await alice.invoke("orders.refund", { order_id: "o-1001", amount: 50000 });
        const error = expectError(outcome, "failed");
        assert.equal(error.code, "POLICY_DENIED");
        assert.equal(error.executionState, "NOT_STARTED");
        assert.equal(error.executionId, outcome.executionId);
        assert.throws(() => unwrap(outcome), (e) => e instanceof CapgateError && e.code === "POLICY_DENIED");
    });
    test("invalid input fails with INPUT_INVALID naming $.amount", async () => {
        const outcome = await alice.invoke("orders.refund", { order_id: "o-1001", amount: "x" });
        const error = expectError(outcome, "failed");
        assert.equal(error.code, "INPUT_INVALID");
        assert.ok(error.issues.some((i) => i.path === "$.amount"), JSON.stringify(error.issues));
    });
    test("a hidden capability answers CAPABILITY_NOT_FOUND", async () => {
        const error = expectError(await alice.invoke("admin.orders.purge", {}), "failed");
        assert.equal(error.code, "CAPABILITY_NOT_FOUND");
    });
    test("approval flow: approval_required → bob approves on the admin listener → resume completes once", async () => {
        const first = await alice.invoke("orders.refund", { order_id: "o-1003", amount: 800, reason: "damaged" });
        assert.equal(first.kind, "approval_required", JSON.stringify(first));
        if (first.kind !== "approval_required")
            return;
        const { approval } = first;
        assert.equal(approval.status, "PENDING");
        assert.match(approval.inputHash, /^[0-9a-f]{64}$/);
        assert.ok(approval.approverRoles.includes("manager"));
        const pending = await bob.listApprovals({ capabilityId: "orders.refund" });
        const seen = pending.approvals.find((a) => a.id === approval.id);
        assert.ok(seen, "bob sees the pending approval");
        const decided = await bob.approve(approval.id, seen.inputHash, { note: "ok" });
        assert.equal(decided.status, "APPROVED");
        const waited = await alice.waitForApproval(approval.id, { timeoutMs: 5_000 });
        assert.equal(waited.status, "APPROVED");
        assert.equal(waited.decidedBy?.id, "bob");
        const resumed = await alice.resume(approval.id);
        assert.equal(resumed.kind, "completed", JSON.stringify(resumed));
        const output = unwrap(resumed);
        assert.equal(output.order_id, "o-1003");
        assert.equal(output.card_last4, "****", "the output is redacted");
        assert.equal(resumed.approvalId, approval.id);
        const runs = (await upstreamLog(stack.orders)).filter((r) => r.approvalId === approval.id);
        assert.equal(runs.length, 1, "the upstream ran exactly once for the approval");
    });
    test("waitForApproval returns the still-pending approval at its deadline; a rejection ends it", async () => {
        const first = await alice.invoke("orders.refund", { order_id: "o-1003", amount: 600 });
        assert.equal(first.kind, "approval_required", JSON.stringify(first));
        if (first.kind !== "approval_required")
            return;
        const id = first.approval.id;
        const started = Date.now();
        const waited = await alice.waitForApproval(id, { timeoutMs: 300 });
        assert.equal(waited.status, "PENDING");
        assert.ok(Date.now() - started < 3_000, "the wait ends near its deadline");
        assert.equal(expectError(await alice.resume(id), "failed").code, "APPROVAL_PENDING");
        const waiting = alice.waitForApproval(id, { timeoutMs: 10_000 });
        await bob.reject(id, first.approval.inputHash, { note: "no" });
        assert.equal((await waiting).status, "REJECTED");
        assert.equal(expectError(await alice.resume(id), "failed").code, "APPROVAL_REJECTED");
    });
    test("a capability timeout comes back as a cancelled outcome with TIMEOUT", async () => {
        const outcome = await alice.invoke("orders.cancel", { order_id: "slow-2000" });
        const error = expectError(outcome, "cancelled");
        assert.equal(error.code, "TIMEOUT");
        assert.equal(error.executionState, "UNKNOWN");
    });
    test("aborting mid-flight rejects with CANCELLED promptly, and the upstream call is cancelled", async () => {
        const key = `ts-cancel-${randomUUID()}`;
        const controller = new AbortController();
        const call = alice.invoke("orders.get", { order_id: "slow-2000" }, { signal: controller.signal, idempotencyKey: key });
        await sleep(200);
        const started = Date.now();
        controller.abort();
        await assert.rejects(call, (e) => e instanceof CapgateError && e.code === "CANCELLED");
        assert.ok(Date.now() - started < 500, "the abort does not wait for the upstream");
        let runs = [];
        for (const until = Date.now() + 3_000; Date.now() < until; await sleep(50)) {
            runs = (await upstreamLog(stack.orders)).filter((r) => r.idempotencyKey === key);
            if (runs[0]?.cancelled)
                break;
        }
        assert.deepEqual(runs.map((r) => r.cancelled), [true], "the upstream saw its call cancelled");
    });
    test("a caller deadline shorter than the work ends in TIMEOUT", async () => {
        const result = await alice
            .invoke("orders.get", { order_id: "slow-2000" }, { timeoutMs: 400 })
            .catch((e) => e);
        // The gateway answers first (deadline minus its margin) with a cancelled envelope; if the
        // client's deadline fires first the call rejects instead. Both carry TIMEOUT.
        const code = result instanceof CapgateError ? result.code : expectError(result, "cancelled").code;
        assert.equal(code, "TIMEOUT");
    });
    test("the same idempotency key and input replays the recorded result without running again", async () => {
        const key = `ts-${randomUUID()}`;
        const first = await alice.invoke("orders.get", { order_id: "o-1004" }, { idempotencyKey: key });
        const again = await alice.invoke("orders.get", { order_id: "o-1004" }, { idempotencyKey: key });
        assert.equal(first.kind, "completed");
        assert.deepEqual(unwrap(again), unwrap(first));
        assert.equal(again.executionId, first.executionId);
        const runs = (await upstreamLog(stack.orders)).filter((r) => r.idempotencyKey === key);
        assert.equal(runs.length, 1);
        const conflict = expectError(await alice.invoke("orders.get", { order_id: "o-1005" }, { idempotencyKey: key }), "failed");
        assert.equal(conflict.code, "IDEMPOTENCY_CONFLICT");
    });
    test("the correlation id reaches the upstream", async () => {
        const correlationId = `ts-corr-${randomUUID()}`;
        const outcome = await alice.invoke("orders.get", { order_id: "o-1001" }, { correlationId });
        const runs = (await upstreamLog(stack.orders)).filter((r) => r.executionId === outcome.executionId);
        assert.deepEqual(runs.map((r) => r.correlationId), [correlationId]);
    });
    test("a bad token rejects with UNAUTHENTICATED (a transport fault, not an envelope)", async () => {
        const stranger = CapgateClient.connect({ target: stack.agents, token: "not-a-jwt" });
        try {
            await assert.rejects(stranger.describe(), (e) => {
                return e instanceof CapgateError && e.code === "UNAUTHENTICATED" && e.grpcCode !== undefined;
            });
        }
        finally {
            stranger.close();
        }
    });
    test("trusted-local over the unix socket: the asserted actor invokes on the direct surface", async () => {
        const local = CapgateClient.connect({
            target: `unix:${stack.local_socket}`,
            localActor: { id: "alice", kind: "user", roles: ["agent"] },
        });
        try {
            const { capabilities } = await local.describe();
            assert.ok(capabilities.some((c) => c.id === "orders.get"));
            const outcome = await local.invoke("orders.get", { order_id: "o-1003" });
            assert.equal(unwrap(outcome).order_id, "o-1003");
            const runs = (await upstreamLog(stack.orders)).filter((r) => r.executionId === outcome.executionId);
            assert.deepEqual(runs.map((r) => r.surface), ["direct"]);
        }
        finally {
            local.close();
        }
    });
});
//# sourceMappingURL=stack.test.js.map