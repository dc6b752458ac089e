/**
 * Quickstart: describe, invoke, and the approval flow, against the shared stack.
 *
 *   python scripts/stack.py start                 # from the repository root
 *   cd clients/typescript && npm ci && npm run example
 *
 * Addresses and tokens come from .run/stack.json (or the file named by $CAPGATE_STACK).
 */
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { ApprovalAdminClient, CapgateClient, CapgateError, unwrap } from "../src/index.js";
const stackFile = process.env.CAPGATE_STACK ?? fileURLToPath(new URL("../../../../.run/stack.json", import.meta.url));
const stack = JSON.parse(readFileSync(stackFile, "utf8"));
const alice = CapgateClient.connect({ target: stack.agents, token: stack.tokens.alice, defaultTimeoutMs: 10_000 });
const bob = ApprovalAdminClient.connect({ target: stack.admin, token: stack.tokens.bob });
try {
    // 1. What may alice call?
    const { capabilities } = await alice.describe();
    for (const c of capabilities)
        console.log(`${c.id.padEnd(16)} ${c.sideEffect.padEnd(6)} ${c.description}`);
    // 2. A plain call: the output is a native object.
    const order = unwrap(await alice.invoke("orders.get", { order_id: "o-1001" }));
    console.log("order", order.order_id, order.status);
    // 3. Governed failures come back as outcomes; switch on `kind`.
    const denied = await alice.invoke("orders.refund", { order_id: "o-1001", amount: 50000 });
    if (denied.kind === "failed")
        console.log("denied:", denied.error.code, "-", denied.error.message);
    // 4. The approval flow: alice asks, bob approves on the admin listener, alice resumes.
    const asked = await alice.invoke("orders.refund", { order_id: "o-1003", amount: 800 }, { idempotencyKey: `qs-${Date.now()}` });
    if (asked.kind !== "approval_required")
        throw new Error(`expected an approval, got ${asked.kind}`);
    console.log("approval required:", asked.approval.id, asked.approval.reasons.join("; "));
    await bob.approve(asked.approval.id, asked.approval.inputHash, { note: "quickstart" });
    const approval = await alice.waitForApproval(asked.approval.id, { timeoutMs: 30_000 });
    console.log("approval", approval.status, "by", approval.decidedBy?.id);
    const refund = unwrap(await alice.resume(asked.approval.id));
    console.log("refunded:", refund.refund_id, "card", refund.card_last4);
}
catch (err) {
    if (err instanceof CapgateError)
        console.error(`capgate error ${err.code}: ${err.message}`);
    throw err;
}
finally {
    alice.close();
    bob.close();
}
//# sourceMappingURL=quickstart.js.map