import type { CapabilityDescriptor as PbDescriptor, ExecutionResult } from "./gen/capgate/v1/gateway_pb.js";
import { ApprovalStatus as PbApprovalStatus, type Actor as PbActor, type Approval as PbApproval } from "./gen/capgate/v1/types_pb.js";
import { CapgateError, type ExecutionState } from "./errors.js";
/** Encodes inputs and decodes outputs. The default is `JSON`; pass a codec that keeps 64-bit
 * integers (for example one built on a BigInt-aware parser) when outputs may exceed 2^53. */
export interface JsonCodec {
    stringify(value: unknown): string;
    parse(text: string): unknown;
}
export declare const defaultJson: JsonCodec;
/** PENDING → APPROVED | REJECTED | EXPIRED → CONSUMED → EXECUTED. */
export type ApprovalStatus = keyof typeof PbApprovalStatus;
/** An authenticated identity; identity is the pair (issuer, id). */
export interface Actor {
    readonly id: string;
    readonly issuer: string;
    readonly kind: string;
    readonly roles: readonly string[];
}
/** One approval request as the requester (or, with `input`, an approver) sees it. */
export interface Approval {
    readonly id: string;
    readonly capabilityId: string;
    readonly status: ApprovalStatus;
    readonly reasons: readonly string[];
    readonly message: string;
    readonly createdAt: Date | undefined;
    readonly expiresAt: Date | undefined;
    readonly decidedAt: Date | undefined;
    readonly requester: Actor | undefined;
    readonly decidedBy: Actor | undefined;
    readonly decidedVia: Actor | undefined;
    readonly decisionNote: string;
    /** Hex SHA-256 of the canonical input; an approver sends it back with the decision. */
    readonly inputHash: string;
    /** The redacted input; only on ApprovalAdmin answers (undefined for requesters). */
    readonly input: unknown;
    readonly risk: string;
    readonly sideEffect: string;
    /** An approver must hold every one of these roles. */
    readonly approverRoles: readonly string[];
    readonly requestingExecutionId: string;
    readonly resumedExecutionId: string;
    readonly surface: string;
}
/** A capability this caller may see on this surface. */
export interface CapabilityDescriptor {
    readonly id: string;
    readonly description: string;
    /** The input JSON Schema, parsed. */
    readonly inputSchema: unknown;
    readonly sideEffect: string;
    readonly risk: string;
    readonly tags: readonly string[];
    readonly requiresApproval: boolean;
}
/** What every envelope carries besides its outcome. */
export interface ExecutionInfo {
    readonly executionId: string;
    readonly capabilityId: string;
    readonly attempts: number;
    /** Undefined on concealed answers (they equal not-found, SI-8). */
    readonly durationMs: number | undefined;
    readonly executionState: ExecutionState;
    /** Set on executions that resume an approval. */
    readonly approvalId: string;
    readonly revision: string;
}
export type Completed<T = unknown> = ExecutionInfo & {
    readonly kind: "completed";
    readonly output: T;
};
export type ApprovalRequiredOutcome = ExecutionInfo & {
    readonly kind: "approval_required";
    readonly approval: Approval;
};
export type Failed = ExecutionInfo & {
    readonly kind: "failed";
    readonly error: CapgateError;
};
export type Cancelled = ExecutionInfo & {
    readonly kind: "cancelled";
    readonly error: CapgateError;
};
/** The outcome of `invoke` and `resume`. Switch on `kind`; `unwrap()` when only output matters. */
export type Outcome<T = unknown> = Completed<T> | ApprovalRequiredOutcome | Failed | Cancelled;
/** The output of a completed outcome; otherwise throws its `CapgateError` (an approval still
 * required throws code APPROVAL_PENDING carrying the approval id). */
export declare function unwrap<T>(outcome: Outcome<T>): T;
export declare function actorFromProto(a: PbActor | undefined): Actor | undefined;
export declare function approvalFromProto(a: PbApproval, json?: JsonCodec): Approval;
export declare function descriptorFromProto(d: PbDescriptor, json?: JsonCodec): CapabilityDescriptor;
/** The native outcome of an `ExecutionResult`. */
export declare function outcomeFromProto<T>(r: ExecutionResult, json?: JsonCodec): Outcome<T>;
