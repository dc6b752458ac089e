/**
 * `CapgateClient` (callers: describe, invoke, resume, approvals) and `ApprovalAdminClient`
 * (approvers, on the admin listener) over the generated stubs.
 *
 * Every method resolves with native values and rejects only with `CapgateError`; governed failures
 * resolve as `{kind: "failed" | "cancelled"}` outcomes because the gateway returns them, never
 * raises them (DESIGN §2). Deadlines are `timeoutMs`, cancellation is an `AbortSignal`.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { createClient, Code } from "@connectrpc/connect";
import { ApprovalAdmin } from "./gen/capgate/v1/admin_pb.js";
import { Verdict } from "./gen/capgate/v1/admin_pb.js";
import { CapabilityGateway } from "./gen/capgate/v1/gateway_pb.js";
import { ApprovalStatus as PbApprovalStatus, Decision as PbDecision, } from "./gen/capgate/v1/types_pb.js";
import { CapgateError, enumName } from "./errors.js";
import { approvalFromProto, defaultJson, descriptorFromProto, outcomeFromProto, } from "./envelope.js";
import { openConnection } from "./transport.js";
/** The gateway caps one WaitApproval at 30 s; longer waits are several calls. */
const MAX_WAIT_MS = 30_000;
/** Extra time the client allows a WaitApproval so that the gateway's answer arrives first. */
const WAIT_SLACK_MS = 5_000;
class Base {
    conn;
    json;
    constructor(options) {
        this.conn = openConnection(options);
        this.json = options.json ?? defaultJson;
    }
    callOptions(o) {
        const timeoutMs = o?.timeoutMs ?? this.conn.defaultTimeoutMs;
        return {
            ...(timeoutMs !== undefined ? { timeoutMs } : {}),
            ...(o?.signal !== undefined ? { signal: o.signal } : {}),
            ...(o?.headers !== undefined ? { headers: o.headers } : {}),
        };
    }
    /** Run one RPC; any rejection becomes a CapgateError. */
    async rpc(call) {
        try {
            return await call();
        }
        catch (err) {
            throw CapgateError.fromTransport(err);
        }
    }
    encode(input) {
        return input === undefined ? new Uint8Array() : new TextEncoder().encode(this.json.stringify(input));
    }
    approvalOrThrow(approval, error) {
        if (error !== undefined)
            throw CapgateError.fromProto(error);
        if (approval === undefined) {
            throw CapgateError.fromTransport(new Error("the gateway answered without an approval"));
        }
        return approvalFromProto(approval, this.json);
    }
    /** Close the connection; calls in flight are cancelled. */
    close() {
        this.conn.close();
    }
}
/** A caller of capgate's CapabilityGateway (agents, services acting for a user). */
export class CapgateClient extends Base {
    gw;
    constructor(options) {
        super(options);
        this.gw = createClient(CapabilityGateway, this.conn.transport);
    }
    /** A client for one listener; the connection opens on the first call. */
    static connect(options) {
        return new CapgateClient(options);
    }
    /** The capabilities this caller may see on this listener's surface. */
    async describe(options = {}) {
        const res = await this.rpc(() => this.gw.describe({ capabilityIds: [...(options.capabilityIds ?? [])] }, this.callOptions(options)));
        return { capabilities: res.capabilities.map((d) => descriptorFromProto(d, this.json)), revision: res.revision };
    }
    /** Invoke a capability with a native input; resolves with the envelope as an `Outcome`. */
    async invoke(capabilityId, input, options = {}) {
        const request = {
            capabilityId,
            inputJson: this.encode(input),
            idempotencyKey: options.idempotencyKey ?? "",
            correlationId: options.correlationId ?? "",
            metadata: { ...(options.metadata ?? {}) },
        };
        const res = await this.rpc(() => this.gw.invoke(request, this.callOptions(options)));
        return outcomeFromProto(res, this.json);
    }
    /** Run an approved call (once); a repeat by the requester returns the stored envelope. */
    async resume(approvalId, options = {}) {
        const res = await this.rpc(() => this.gw.resume({ approvalId, correlationId: options.correlationId ?? "" }, this.callOptions(options)));
        return outcomeFromProto(res, this.json);
    }
    /** Dry run of the pipeline up to the policies; reveals only what `invoke` would. */
    async check(capabilityId, input, options = {}) {
        const request = { capabilityId, inputJson: this.encode(input), metadata: { ...(options.metadata ?? {}) } };
        const res = await this.rpc(() => this.gw.check(request, this.callOptions(options)));
        return {
            decision: enumName(PbDecision, res.decision),
            error: res.error === undefined ? undefined : CapgateError.fromProto(res.error),
            approvalReasons: [...res.approvalReasons],
            revision: res.revision,
        };
    }
    /** The requester's view of its approval; rejects with APPROVAL_NOT_FOUND for others'. */
    async getApproval(approvalId, options = {}) {
        const res = await this.rpc(() => this.gw.getApproval({ approvalId }, this.callOptions(options)));
        return this.approvalOrThrow(res.approval, res.error);
    }
    /**
     * Wait until the approval leaves PENDING or `timeoutMs` passes, then return it (check
     * `status`). Long-polls WaitApproval; polls GetApproval on gateways without it.
     */
    async waitForApproval(approvalId, options = {}) {
        const deadline = Date.now() + (options.timeoutMs ?? 60_000);
        const signal = options.signal;
        let longPoll = true;
        for (;;) {
            const remaining = Math.max(0, deadline - Date.now());
            let approval;
            if (longPoll) {
                approval = await this.waitOnce(approvalId, Math.min(remaining, MAX_WAIT_MS), signal).catch((err) => {
                    if (err instanceof CapgateError && err.grpcCode === Code.Unimplemented)
                        return undefined;
                    throw err;
                });
                longPoll = approval !== undefined;
            }
            approval ??= await this.getApproval(approvalId, signal !== undefined ? { signal } : {});
            const left = deadline - Date.now();
            if (approval.status !== "PENDING" || left <= 0)
                return approval;
            if (!longPoll) {
                await this.rpc(() => sleep(Math.min(options.pollIntervalMs ?? 1_000, left), undefined, { signal }));
            }
        }
    }
    async waitOnce(approvalId, waitMs, signal) {
        const timeout = { seconds: BigInt(Math.floor(waitMs / 1000)), nanos: (waitMs % 1000) * 1e6 };
        const res = await this.rpc(() => this.gw.waitApproval({ approvalId, timeout }, { timeoutMs: waitMs + WAIT_SLACK_MS, ...(signal !== undefined ? { signal } : {}) }));
        return this.approvalOrThrow(res.approval, res.error);
    }
}
/** An approver's client of ApprovalAdmin (admin listeners only). Deciding executes nothing. */
export class ApprovalAdminClient extends Base {
    admin;
    constructor(options) {
        super(options);
        this.admin = createClient(ApprovalAdmin, this.conn.transport);
    }
    static connect(options) {
        return new ApprovalAdminClient(options);
    }
    /** Approvals this approver may decide (with their redacted `input`). */
    async listApprovals(options = {}) {
        const request = {
            statuses: (options.statuses ?? []).map((s) => PbApprovalStatus[s]),
            capabilityId: options.capabilityId ?? "",
            requesterId: options.requesterId ?? "",
            pageSize: options.pageSize ?? 0,
            pageToken: options.pageToken ?? "",
        };
        const res = await this.rpc(() => this.admin.listApprovals(request, this.callOptions(options)));
        if (res.error !== undefined)
            throw CapgateError.fromProto(res.error);
        return { approvals: res.approvals.map((a) => approvalFromProto(a, this.json)), nextPageToken: res.nextPageToken };
    }
    /** Approve; `inputHash` is the hash the approver saw (a mismatch is refused). */
    approve(approvalId, inputHash, options = {}) {
        return this.decide(approvalId, Verdict.APPROVE, inputHash, options);
    }
    reject(approvalId, inputHash, options = {}) {
        return this.decide(approvalId, Verdict.REJECT, inputHash, options);
    }
    async decide(approvalId, verdict, inputHash, options) {
        const request = { approvalId, verdict, inputHash, note: options.note ?? "" };
        const res = await this.rpc(() => this.admin.decideApproval(request, this.callOptions(options)));
        return this.approvalOrThrow(res.approval, res.error);
    }
}
//# sourceMappingURL=client.js.map