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
  GrantStatus as PbGrantStatus,
  type Actor as PbActor,
  type Approval as PbApproval,
  type Grant as PbGrant,
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

/** ACTIVE → REVOKED | EXHAUSTED (max_uses or max_total reached) | EXPIRED. */
export type GrantStatus = keyof typeof PbGrantStatus;

/** One RFC 6902 JSON Patch operation; the gateway writes add, remove and replace, with `path` an
 * RFC 6901 pointer ("/amount") and `value` the new JSON value. */
export interface PatchOperation {
  readonly op: "add" | "remove" | "replace" | "move" | "copy" | "test";
  readonly path: string;
  readonly from?: string;
  readonly value?: unknown;
}

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
  /** Set once an approver changed the input: `inputHash` is then the edited input's hash,
   * `originalInputHash` the requester's, and `patch` the change (after the capability's
   * redact.approval_input rules). */
  readonly edited: boolean;
  readonly originalInputHash: string;
  readonly patch: readonly PatchOperation[];
  readonly editedBy: Actor | undefined;
  /** Distinct approvers needed (1 unless a requirement says more) and approvals counted so far
   * for the current input; `approvalProgress` writes them as "1 of 2". */
  readonly quorum: number;
  readonly approvalsReceived: number;
  /** Each of these roles must be held by a different approver. */
  readonly distinctRoles: readonly string[];
  /** Who approved so far; only on ApprovalAdmin answers. */
  readonly approvedBy: readonly Actor[];
  /** Set once the approval stayed pending past its escalate_after (planned for `escalateAt`);
   * holders of `escalationRoles` may then decide too. */
  readonly escalatedAt: Date | undefined;
  readonly escalateAt: Date | undefined;
  readonly escalationRoles: readonly string[];
}

/** The quorum progress of an approval as approvers read it: "1 of 2". */
export function approvalProgress(a: Pick<Approval, "approvalsReceived" | "quorum">): string {
  return `${a.approvalsReceived} of ${a.quorum}`;
}

/** A standing approval: calls it covers that policies send to approval run at once. */
export interface Grant {
  readonly id: string;
  readonly status: GrantStatus;
  /** Whom: one actor (issuer and id) or every actor holding `role`. */
  readonly actor: Actor | undefined;
  readonly role: string;
  /** What: one capability or every capability carrying `tag`. */
  readonly capabilityId: string;
  readonly tag: string;
  /** CEL over `input`; empty covers any input. */
  readonly constraint: string;
  readonly createdAt: Date | undefined;
  readonly expiresAt: Date | undefined;
  /** 0: no cap. */
  readonly maxUses: number;
  readonly uses: number;
  /** CEL amount over `input`, its total capped by `maxTotal` (0: no cap). */
  readonly amount: string;
  readonly maxTotal: number;
  readonly total: number;
  readonly createdBy: Actor | undefined;
  readonly createdVia: Actor | undefined;
  readonly note: string;
  readonly fromApprovalId: string;
  readonly revokedAt: Date | undefined;
  readonly revokedBy: Actor | undefined;
  /** The creator's approver roles at creation. */
  readonly approverRoles: readonly string[];
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
  /** Set when a standing grant stood in for the approval this call needed. */
  readonly grantId: string;
  /** On a resume whose approver edited the input: the edited input ran, and `patch` is the
   * change from the requester's input (after the capability's redact.approval_input rules). */
  readonly edited: boolean;
  readonly patch: readonly PatchOperation[];
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

function patchOf(text: string, json: JsonCodec): PatchOperation[] {
  return text === "" ? [] : (json.parse(text) as PatchOperation[]);
}

function actorsOf(actors: readonly PbActor[]): Actor[] {
  return actors.map((a) => actorFromProto(a)!);
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
    edited: a.edited,
    originalInputHash: a.originalInputHash,
    patch: patchOf(a.patchJson, json),
    editedBy: actorFromProto(a.editedBy),
    // A gateway from before quorums sends 0: one approver decides.
    quorum: Math.max(1, a.quorum),
    approvalsReceived: a.approvalsReceived,
    distinctRoles: [...a.distinctRoles],
    approvedBy: actorsOf(a.approvedBy),
    escalatedAt: date(a.escalatedAt),
    escalateAt: date(a.escalateAt),
    escalationRoles: [...a.escalationRoles],
  };
}

export function grantFromProto(g: PbGrant): Grant {
  return {
    id: g.id,
    status: enumName(PbGrantStatus, g.status),
    actor: actorFromProto(g.actor),
    role: g.role,
    capabilityId: g.capabilityId,
    tag: g.tag,
    constraint: g.constraint,
    createdAt: date(g.createdAt),
    expiresAt: date(g.expiresAt),
    maxUses: Number(g.maxUses),
    uses: Number(g.uses),
    amount: g.amount,
    maxTotal: g.maxTotal,
    total: g.total,
    createdBy: actorFromProto(g.createdBy),
    createdVia: actorFromProto(g.createdVia),
    note: g.note,
    fromApprovalId: g.fromApprovalId,
    revokedAt: date(g.revokedAt),
    revokedBy: actorFromProto(g.revokedBy),
    approverRoles: [...g.approverRoles],
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
    grantId: r.grantId,
    edited: r.edited,
    patch: patchOf(r.patchJson, json),
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
