import { type CallOptions as ConnectCallOptions } from "@connectrpc/connect";
import { Decision as PbDecision, type Approval as PbApproval, type CapabilityError as PbCapabilityError } from "./gen/capgate/v1/types_pb.js";
import { CapgateError } from "./errors.js";
import { type Approval, type ApprovalStatus, type CapabilityDescriptor, type JsonCodec, type Outcome } from "./envelope.js";
import { type Connection, type ConnectOptions } from "./transport.js";
export interface CallOptions {
    /** Deadline of this call; the gateway runs the capability within it (minus a margin). */
    readonly timeoutMs?: number;
    /** Aborting rejects with CapgateError code CANCELLED; the gateway cancels the execution. */
    readonly signal?: AbortSignal;
    readonly headers?: Record<string, string>;
}
export interface InvokeOptions extends CallOptions {
    /** A repeat with the same key and input returns the recorded result instead of running again. */
    readonly idempotencyKey?: string;
    readonly correlationId?: string;
    /** Request metadata policies may read (when the gateway allow-lists the key). */
    readonly metadata?: Record<string, string>;
}
export interface WaitOptions {
    /** How long to wait in total (default 60 000 ms); then the still-pending approval is returned. */
    readonly timeoutMs?: number;
    readonly signal?: AbortSignal;
    /** Poll interval when the gateway has no WaitApproval (default 1 000 ms). */
    readonly pollIntervalMs?: number;
}
export interface ClientOptions extends ConnectOptions {
    /** How inputs are encoded and outputs decoded (default `JSON`). */
    readonly json?: JsonCodec;
}
export type DecisionName = keyof typeof PbDecision;
export interface CheckResult {
    readonly decision: DecisionName;
    /** What Invoke would answer when the decision is neither ALLOW nor REQUIRE_APPROVAL. */
    readonly error: CapgateError | undefined;
    readonly approvalReasons: readonly string[];
    readonly revision: string;
}
declare abstract class Base {
    protected readonly conn: Connection;
    protected readonly json: JsonCodec;
    protected constructor(options: ClientOptions);
    protected callOptions(o: CallOptions | undefined): ConnectCallOptions;
    /** Run one RPC; any rejection becomes a CapgateError. */
    protected rpc<T>(call: () => Promise<T>): Promise<T>;
    protected encode(input: unknown): Uint8Array;
    protected approvalOrThrow(approval: PbApproval | undefined, error: PbCapabilityError | undefined): Approval;
    /** Close the connection; calls in flight are cancelled. */
    close(): void;
}
/** A caller of capgate's CapabilityGateway (agents, services acting for a user). */
export declare class CapgateClient extends Base {
    private readonly gw;
    private constructor();
    /** A client for one listener; the connection opens on the first call. */
    static connect(options: ClientOptions): CapgateClient;
    /** The capabilities this caller may see on this listener's surface. */
    describe(options?: CallOptions & {
        capabilityIds?: readonly string[];
    }): Promise<{
        capabilities: CapabilityDescriptor[];
        revision: string;
    }>;
    /** Invoke a capability with a native input; resolves with the envelope as an `Outcome`. */
    invoke<T = unknown>(capabilityId: string, input?: unknown, options?: InvokeOptions): Promise<Outcome<T>>;
    /** Run an approved call (once); a repeat by the requester returns the stored envelope. */
    resume<T = unknown>(approvalId: string, options?: CallOptions & {
        correlationId?: string;
    }): Promise<Outcome<T>>;
    /** Dry run of the pipeline up to the policies; reveals only what `invoke` would. */
    check(capabilityId: string, input?: unknown, options?: InvokeOptions): Promise<CheckResult>;
    /** The requester's view of its approval; rejects with APPROVAL_NOT_FOUND for others'. */
    getApproval(approvalId: string, options?: CallOptions): Promise<Approval>;
    /**
     * Wait until the approval leaves PENDING or `timeoutMs` passes, then return it (check
     * `status`). Long-polls WaitApproval; polls GetApproval on gateways without it.
     */
    waitForApproval(approvalId: string, options?: WaitOptions): Promise<Approval>;
    private waitOnce;
}
export interface ListApprovalsOptions extends CallOptions {
    /** Default: PENDING only. */
    readonly statuses?: readonly ApprovalStatus[];
    readonly capabilityId?: string;
    readonly requesterId?: string;
    readonly pageSize?: number;
    readonly pageToken?: string;
}
/** An approver's client of ApprovalAdmin (admin listeners only). Deciding executes nothing. */
export declare class ApprovalAdminClient extends Base {
    private readonly admin;
    private constructor();
    static connect(options: ClientOptions): ApprovalAdminClient;
    /** Approvals this approver may decide (with their redacted `input`). */
    listApprovals(options?: ListApprovalsOptions): Promise<{
        approvals: Approval[];
        nextPageToken: string;
    }>;
    /** Approve; `inputHash` is the hash the approver saw (a mismatch is refused). */
    approve(approvalId: string, inputHash: string, options?: CallOptions & {
        note?: string;
    }): Promise<Approval>;
    reject(approvalId: string, inputHash: string, options?: CallOptions & {
        note?: string;
    }): Promise<Approval>;
    private decide;
}
export {};
