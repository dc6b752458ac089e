/**
 * Issue 28's approvals on the shared stack (tests/stack/: the real gateway, the example upstream
 * and Redis): a call a standing grant covers shows the grant, a resumed call whose approver edited
 * it shows the edit and its patch, and a two-person approval shows its progress ("1 of 2").
 * Skipped, with the reason, when `.run/stack.json` (or $CAPGATE_STACK) is absent.
 */
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, test as nodeTest } from "node:test";
import { ApprovalAdminClient, CapgateClient, approvalProgress, unwrap } from "../src/index.js";
import { loadStack, skipWithoutStack } from "./helpers.js";

/** Refunds go to o-1003: its total never runs out, however often the client suites run. */
const ORDER = "o-1003";

const test = (name: string, fn: () => Promise<void>) => nodeTest(name, { skip: skipWithoutStack }, fn);

describe("issue 28 approvals against the shared stack", () => {
  let alice: CapgateClient;
  let bob: ApprovalAdminClient;
  let carol: ApprovalAdminClient;

  before(() => {
    if (skipWithoutStack) return;
    const stack = loadStack()!;
    alice = CapgateClient.connect({ target: stack.agents, token: stack.tokens.alice, defaultTimeoutMs: 10_000 });
    bob = ApprovalAdminClient.connect({ target: stack.admin, token: stack.tokens.bob, defaultTimeoutMs: 10_000 });
    carol = ApprovalAdminClient.connect({ target: stack.admin, token: stack.tokens.carol, defaultTimeoutMs: 10_000 });
  });

  after(() => {
    if (skipWithoutStack) return;
    alice.close();
    bob.close();
    carol.close();
  });

  test("a call a grant covers runs at once and names the grant; revoked, it waits again", async () => {
    const marker = `ts-grant-${randomUUID()}`; // no other suite's call matches this grant
    const grant = await bob.createGrant({
      actor: { issuer: "test-idp", id: "alice" },
      capabilityId: "orders.refund",
      constraint: `input.reason == "${marker}" && input.amount <= 900`,
      expiresInMs: 600_000,
      maxUses: 2,
      note: "typescript client test",
    });
    assert.equal(grant.status, "ACTIVE");
    assert.equal(grant.maxUses, 2);
    const covered = { order_id: ORDER, amount: 800, reason: marker };
    assert.equal((await alice.check("orders.refund", covered)).grantId, grant.id);

    // Over 500 a refund needs a manager's approval; the grant stands in for it.
    const outcome = await alice.invoke<{ order_id: string }>("orders.refund", covered);
    assert.equal(outcome.kind, "completed", JSON.stringify(outcome));
    assert.equal(outcome.grantId, grant.id);
    assert.equal(outcome.approvalId, "");
    assert.equal(outcome.edited, false);
    assert.deepEqual(outcome.patch, []);
    assert.equal((await bob.getGrant(grant.id)).uses, 1);
    const { grants } = await bob.listGrants({ actorId: "alice", capabilityId: "orders.refund" });
    assert.ok(grants.some((g) => g.id === grant.id), "listed while active");

    const revoked = await bob.revokeGrant(grant.id, { note: "no longer" });
    assert.equal(revoked.status, "REVOKED");
    assert.ok(revoked.revokedAt instanceof Date);
    const later = await alice.invoke("orders.refund", covered);
    assert.equal(later.kind, "approval_required");
    assert.equal(later.grantId, "");
    if (later.kind === "approval_required") await bob.reject(later.approval.id, later.approval.inputHash);
  });

  test("a resumed call whose approver edited it shows the edit and its patch", async () => {
    const asked = await alice.invoke("orders.refund_reviewed", { order_id: ORDER, amount: 900, reason: "damaged" });
    assert.equal(asked.kind, "approval_required");
    if (asked.kind !== "approval_required") return;
    const pending = asked.approval;
    assert.equal(pending.edited, false);
    assert.deepEqual(pending.patch, []);

    // bob lowers the amount; inputHash stays the one he was shown.
    const decided = await bob.approve(pending.id, pending.inputHash, {
      editedInput: { order_id: ORDER, amount: 700, reason: "****" }, // the reason as shown: masked
    });
    assert.equal(decided.status, "APPROVED");
    assert.equal(decided.editedBy?.id, "bob");
    const change = [{ op: "replace", path: "/amount", value: 700 }];
    const seen = await alice.getApproval(pending.id);
    assert.equal(seen.edited, true);
    assert.deepEqual(seen.patch, change);
    assert.equal(seen.originalInputHash, pending.inputHash);
    assert.notEqual(seen.inputHash, pending.inputHash);

    const done = await alice.resume<{ amount: number }>(pending.id);
    assert.equal(unwrap(done).amount, 700, "the edited input ran");
    assert.equal(done.edited, true);
    assert.deepEqual(done.patch, change);
    assert.equal(done.approvalId, pending.id);
  });

  test("a two-person approval shows its progress, 1 of 2, and runs after the second", async () => {
    const asked = await alice.invoke("orders.refund_dual", { order_id: ORDER, amount: 20 });
    assert.equal(asked.kind, "approval_required");
    if (asked.kind !== "approval_required") return;
    const pending = asked.approval;
    assert.equal(pending.quorum, 2);
    assert.equal(approvalProgress(pending), "0 of 2");
    // Escalation is planned at creation (30 minutes later, to admins) and has not happened.
    assert.equal(pending.escalateAt!.getTime() - pending.createdAt!.getTime(), 30 * 60_000);
    assert.equal(pending.escalatedAt, undefined);
    assert.deepEqual(pending.escalationRoles, ["admin"]);

    const half = await bob.approve(pending.id, pending.inputHash);
    assert.equal(half.status, "PENDING");
    assert.equal(approvalProgress(half), "1 of 2");
    assert.deepEqual(half.approvedBy.map((a) => a.id), ["bob"]);
    assert.equal(approvalProgress(await alice.getApproval(pending.id)), "1 of 2");
    const early = await alice.resume(pending.id); // one approval is not enough: nothing runs
    assert.equal(early.kind, "failed");
    assert.equal(early.executionState, "NOT_STARTED");

    const full = await carol.approve(pending.id, pending.inputHash);
    assert.equal(full.status, "APPROVED");
    assert.equal(approvalProgress(full), "2 of 2");
    assert.equal(unwrap<{ order_id: string }>(await alice.resume(pending.id)).order_id, ORDER);
  });
});
