/**
 * The normalized envelope as native TypeScript: a discriminated union on `kind`, with inputs and
 * outputs as plain values (the wire carries them as JSON text, DESIGN §2).
 */
import type { Duration, Timestamp } from "@bufbuild/protobuf/wkt";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import type {
  CapabilityDescriptor as PbDescriptor,
  ExecutionResult,
} from "./gen/capgate/v1/gateway_pb.js";
import {
  ApprovalStatus as PbApprovalStatus,
  ExecutionState as PbExecutionState,
  type Actor as PbActor,
  type Approval as PbApproval,
} from "./gen/capgate/v1/types_pb.js";
import { CapgateError, enumName, type ExecutionState } from "./errors.js";

/** Encodes inputs and decodes outputs. The default is `JSON`; pass a codec that keeps 64-bit
 * integers (for example one built on a BigInt-aware parser) when outputs may exceed 2^53. */
export interface JsonCodec {
  stringify(value: unknown): string;
  parse(text: string): unknown;
}

export const defaultJson: JsonCodec = {
  stringify: (value) => JSON.stringify(value),
  parse: (text) => JSON.parse(text) as unknown,
};

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

export type Completed<T = unknown> = ExecutionInfo & { readonly kind: "completed"; readonly output: T };
export type ApprovalRequiredOutcome = ExecutionInfo & {
  readonly kind: "approval_required";
  readonly approval: Approval;
};
export type Failed = ExecutionInfo & { readonly kind: "failed"; readonly error: CapgateError };
export type Cancelled = ExecutionInfo & { readonly kind: "cancelled"; readonly error: CapgateError };

/** The outcome of `invoke` and `resume`. Switch on `kind`; `unwrap()` when only output matters. */
export type Outcome<T = unknown> = Completed<T> | ApprovalRequiredOutcome | Failed | Cancelled;

/** The output of a completed outcome; otherwise throws its `CapgateError` (an approval still
 * required throws code APPROVAL_PENDING carrying the approval id). */
export function unwrap<T>(outcome: Outcome<T>): T {
  switch (outcome.kind) {
    case "completed":
      return outcome.output;
    case "approval_required":
      throw new CapgateError(
        {
          code: "APPROVAL_PENDING",
          stage: "approval",
          message: outcome.approval.message || `approval ${outcome.approval.id} is required`,
          retryable: false,
          exposeToModel: true,
          issues: [],
          executedBeforeFailure: false,
          executionState: outcome.executionState,
        },
        { executionId: outcome.executionId },
      );
    case "failed":
    case "cancelled":
      throw outcome.error;
  }
}

function durationMs(d: Duration | undefined): number | undefined {
  return d === undefined ? undefined : Number(d.seconds) * 1000 + d.nanos / 1e6;
}

function date(ts: Timestamp | undefined): Date | undefined {
  return ts === undefined ? undefined : timestampDate(ts);
}

export function actorFromProto(a: PbActor | undefined): Actor | undefined {
  return a === undefined ? undefined : { id: a.id, issuer: a.issuer, kind: a.kind, roles: [...a.roles] };
}

export function approvalFromProto(a: PbApproval, json: JsonCodec = defaultJson): Approval {
  return {
    id: a.id,
    capabilityId: a.capabilityId,
    status: enumName(PbApprovalStatus, a.status),
    reasons: [...a.reasons],
    message: a.message,
    createdAt: date(a.createdAt),
    expiresAt: date(a.expiresAt),
    decidedAt: date(a.decidedAt),
    requester: actorFromProto(a.requester),
    decidedBy: actorFromProto(a.decidedBy),
    decidedVia: actorFromProto(a.decidedVia),
    decisionNote: a.decisionNote,
    inputHash: a.inputHash,
    input: a.inputJson === "" ? undefined : json.parse(a.inputJson),
    risk: a.risk,
    sideEffect: a.sideEffect,
    approverRoles: [...(a.approvers?.roles ?? [])],
    requestingExecutionId: a.requestingExecutionId,
    resumedExecutionId: a.resumedExecutionId,
    surface: a.surface,
  };
}

export function descriptorFromProto(d: PbDescriptor, json: JsonCodec = defaultJson): CapabilityDescriptor {
  return {
    id: d.id,
    description: d.description,
    inputSchema: d.inputSchemaJson === "" ? {} : json.parse(d.inputSchemaJson),
    sideEffect: d.sideEffect,
    risk: d.risk,
    tags: [...d.tags],
    requiresApproval: d.requiresApproval,
  };
}

/** The native outcome of an `ExecutionResult`. */
export function outcomeFromProto<T>(r: ExecutionResult, json: JsonCodec = defaultJson): Outcome<T> {
  const info: ExecutionInfo = {
    executionId: r.executionId,
    capabilityId: r.capabilityId,
    attempts: r.attempts,
    durationMs: durationMs(r.duration),
    executionState: enumName(PbExecutionState, r.executionState),
    approvalId: r.approvalId,
    revision: r.revision,
  };
  const o = r.outcome;
  switch (o.case) {
    case "completed":
      return { ...info, kind: "completed", output: json.parse(o.value.outputJson || "null") as T };
    case "approvalRequired":
      if (o.value.approval === undefined) break;
      return { ...info, kind: "approval_required", approval: approvalFromProto(o.value.approval, json) };
    case "failed":
      return { ...info, kind: "failed", error: CapgateError.fromProto(o.value, r.executionId) };
    case "cancelled":
      return { ...info, kind: "cancelled", error: CapgateError.fromProto(o.value, r.executionId) };
    case undefined:
      break;
  }
  // A gateway always sets the outcome; an envelope without one is a protocol fault.
  throw new CapgateError(
    {
      code: "UNSPECIFIED",
      stage: "transport",
      message: "the gateway answered an envelope without an outcome",
      retryable: false,
      exposeToModel: false,
      issues: [],
      executedBeforeFailure: false,
      executionState: info.executionState,
    },
    { executionId: r.executionId },
  );
}
