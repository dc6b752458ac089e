/**
 * `CapgateClient` (callers: describe, invoke, resume, approvals) and `ApprovalAdminClient`
 * (approvers, on the admin listener) over the generated stubs.
 *
 * Every method resolves with native values and rejects only with `CapgateError`; governed failures
 * resolve as `{kind: "failed" | "cancelled"}` outcomes because the gateway returns them, never
 * raises them (DESIGN §2). Deadlines are `timeoutMs`, cancellation is an `AbortSignal`.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { createClient, Code, type CallOptions as ConnectCallOptions, type Client } from "@connectrpc/connect";
import { ApprovalAdmin } from "./gen/capgate/v1/admin_pb.js";
import { Verdict } from "./gen/capgate/v1/admin_pb.js";
import { CapabilityGateway } from "./gen/capgate/v1/gateway_pb.js";
import {
  ApprovalStatus as PbApprovalStatus,
  Decision as PbDecision,
  GrantStatus as PbGrantStatus,
  type Approval as PbApproval,
  type CapabilityError as PbCapabilityError,
  type Grant as PbGrant,
} from "./gen/capgate/v1/types_pb.js";
import { CapgateError, enumName } from "./errors.js";
import {
  approvalFromProto,
  defaultJson,
  descriptorFromProto,
  grantFromProto,
  outcomeFromProto,
  type Actor,
  type Approval,
  type ApprovalStatus,
  type CapabilityDescriptor,
  type Grant,
  type GrantStatus,
  type JsonCodec,
  type Outcome,
} from "./envelope.js";
import { openConnection, type Connection, type ConnectOptions } from "./transport.js";

/** The gateway caps one WaitApproval at 30 s; longer waits are several calls. */
const MAX_WAIT_MS = 30_000;
/** Extra time the client allows a WaitApproval so that the gateway's answer arrives first. */
const WAIT_SLACK_MS = 5_000;

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
  /** With REQUIRE_APPROVAL: the live grant `invoke` would use instead of asking (a check uses
   * nothing); empty when none applies now. */
  readonly grantId: string;
}

abstract class Base {
  protected readonly conn: Connection;
  protected readonly json: JsonCodec;

  protected constructor(options: ClientOptions) {
    this.conn = openConnection(options);
    this.json = options.json ?? defaultJson;
  }

  protected callOptions(o: CallOptions | undefined): ConnectCallOptions {
    const timeoutMs = o?.timeoutMs ?? this.conn.defaultTimeoutMs;
    return {
      ...(timeoutMs !== undefined ? { timeoutMs } : {}),
      ...(o?.signal !== undefined ? { signal: o.signal } : {}),
      ...(o?.headers !== undefined ? { headers: o.headers } : {}),
    };
  }

  /** Run one RPC; any rejection becomes a CapgateError. */
  protected async rpc<T>(call: () => Promise<T>): Promise<T> {
    try {
      return await call();
    } catch (err) {
      throw CapgateError.fromTransport(err);
    }
  }

  protected encode(input: unknown): Uint8Array {
    return input === undefined ? new Uint8Array() : new TextEncoder().encode(this.json.stringify(input));
  }

  protected approvalOrThrow(approval: PbApproval | undefined, error: PbCapabilityError | undefined): Approval {
    if (error !== undefined) throw CapgateError.fromProto(error);
    if (approval === undefined) {
      throw CapgateError.fromTransport(new Error("the gateway answered without an approval"));
    }
    return approvalFromProto(approval, this.json);
  }

  /** Close the connection; calls in flight are cancelled. */
  close(): void {
    this.conn.close();
  }
}

/** A caller of capgate's CapabilityGateway (agents, services acting for a user). */
export class CapgateClient extends Base {
  private readonly gw: Client<typeof CapabilityGateway>;

  private constructor(options: ClientOptions) {
    super(options);
    this.gw = createClient(CapabilityGateway, this.conn.transport);
  }

  /** A client for one listener; the connection opens on the first call. */
  static connect(options: ClientOptions): CapgateClient {
    return new CapgateClient(options);
  }

  /** The capabilities this caller may see on this listener's surface. */
  async describe(
    options: CallOptions & { capabilityIds?: readonly string[] } = {},
  ): Promise<{ capabilities: CapabilityDescriptor[]; revision: string }> {
    const res = await this.rpc(() =>
      this.gw.describe({ capabilityIds: [...(options.capabilityIds ?? [])] }, this.callOptions(options)),
    );
    return { capabilities: res.capabilities.map((d) => descriptorFromProto(d, this.json)), revision: res.revision };
  }

  /** Invoke a capability with a native input; resolves with the envelope as an `Outcome`. */
  async invoke<T = unknown>(capabilityId: string, input?: unknown, options: InvokeOptions = {}): Promise<Outcome<T>> {
    const request = {
      capabilityId,
      inputJson: this.encode(input),
      idempotencyKey: options.idempotencyKey ?? "",
      correlationId: options.correlationId ?? "",
      metadata: { ...(options.metadata ?? {}) },
    };
    const res = await this.rpc(() => this.gw.invoke(request, this.callOptions(options)));
    return outcomeFromProto<T>(res, this.json);
  }

  /** Run an approved call (once); a repeat by the requester returns the stored envelope. */
  async resume<T = unknown>(
    approvalId: string,
    options: CallOptions & { correlationId?: string } = {},
  ): Promise<Outcome<T>> {
    const res = await this.rpc(() =>
      this.gw.resume({ approvalId, correlationId: options.correlationId ?? "" }, this.callOptions(options)),
    );
    return outcomeFromProto<T>(res, this.json);
  }

  /** Dry run of the pipeline up to the policies; reveals only what `invoke` would. */
  async check(capabilityId: string, input?: unknown, options: InvokeOptions = {}): Promise<CheckResult> {
    const request = { capabilityId, inputJson: this.encode(input), metadata: { ...(options.metadata ?? {}) } };
    const res = await this.rpc(() => this.gw.check(request, this.callOptions(options)));
    return {
      decision: enumName(PbDecision, res.decision),
      error: res.error === undefined ? undefined : CapgateError.fromProto(res.error),
      approvalReasons: [...res.approvalReasons],
      revision: res.revision,
      grantId: res.grantId,
    };
  }

  /** The requester's view of its approval; rejects with APPROVAL_NOT_FOUND for others'. */
  async getApproval(approvalId: string, options: CallOptions = {}): Promise<Approval> {
    const res = await this.rpc(() => this.gw.getApproval({ approvalId }, this.callOptions(options)));
    return this.approvalOrThrow(res.approval, res.error);
  }

  /**
   * Wait until the approval leaves PENDING or `timeoutMs` passes, then return it (check
   * `status`). Long-polls WaitApproval; polls GetApproval on gateways without it.
   */
  async waitForApproval(approvalId: string, options: WaitOptions = {}): Promise<Approval> {
    const deadline = Date.now() + (options.timeoutMs ?? 60_000);
    const signal = options.signal;
    let longPoll = true;
    for (;;) {
      const remaining = Math.max(0, deadline - Date.now());
      let approval: Approval | undefined;
      if (longPoll) {
        approval = await this.waitOnce(approvalId, Math.min(remaining, MAX_WAIT_MS), signal).catch((err: unknown) => {
          if (err instanceof CapgateError && err.grpcCode === Code.Unimplemented) return undefined;
          throw err;
        });
        longPoll = approval !== undefined;
      }
      approval ??= await this.getApproval(approvalId, signal !== undefined ? { signal } : {});
      const left = deadline - Date.now();
      if (approval.status !== "PENDING" || left <= 0) return approval;
      if (!longPoll) {
        await this.rpc(() => sleep(Math.min(options.pollIntervalMs ?? 1_000, left), undefined, { signal }));
      }
    }
  }

  private async waitOnce(approvalId: string, waitMs: number, signal: AbortSignal | undefined): Promise<Approval> {
    const timeout = { seconds: BigInt(Math.floor(waitMs / 1000)), nanos: (waitMs % 1000) * 1e6 };
    const res = await this.rpc(() =>
      this.gw.waitApproval(
        { approvalId, timeout },
        { timeoutMs: waitMs + WAIT_SLACK_MS, ...(signal !== undefined ? { signal } : {}) },
      ),
    );
    return this.approvalOrThrow(res.approval, res.error);
  }
}

export interface ListApprovalsOptions extends CallOptions {
  /** Default: PENDING only. */
  readonly statuses?: readonly ApprovalStatus[];
  readonly capabilityId?: string;
  readonly requesterId?: string;
  readonly pageSize?: number;
  readonly pageToken?: string;
}

export interface ApproveOptions extends CallOptions {
  readonly note?: string;
  /** Approve this input instead of the requester's (capabilities with approval.editable): the
   * gateway validates and governs it as the requester's call before storing anything. */
  readonly editedInput?: unknown;
}

export interface CreateGrantOptions extends CallOptions {
  /** How long the grant lives (required; at most the gateway's approvals.grants.max_expires_in). */
  readonly expiresInMs: number;
  /** Whom: one actor (issuer and id) or every actor holding `role`. */
  readonly actor?: Pick<Actor, "id" | "issuer">;
  readonly role?: string;
  /** What: one capability or every capability carrying `tag`. */
  readonly capabilityId?: string;
  readonly tag?: string;
  /** CEL over `input`, type-checked at creation; empty covers any input. */
  readonly constraint?: string;
  readonly maxUses?: number;
  /** CEL amount over `input`; `maxTotal` caps its total. */
  readonly amount?: string;
  readonly maxTotal?: number;
  readonly note?: string;
  /** Create it from a pending approval: whom and what default to its requester and capability
   * (the approval itself is not decided). */
  readonly fromApprovalId?: string;
}

export interface ListGrantsOptions extends CallOptions {
  /** Default: ACTIVE only. */
  readonly statuses?: readonly GrantStatus[];
  readonly capabilityId?: string;
  readonly actorId?: string;
  readonly pageSize?: number;
  readonly pageToken?: string;
}

/** An approver's client of ApprovalAdmin (admin listeners only). Deciding executes nothing. */
export class ApprovalAdminClient extends Base {
  private readonly admin: Client<typeof ApprovalAdmin>;

  private constructor(options: ClientOptions) {
    super(options);
    this.admin = createClient(ApprovalAdmin, this.conn.transport);
  }

  static connect(options: ClientOptions): ApprovalAdminClient {
    return new ApprovalAdminClient(options);
  }

  /** Approvals this approver may decide (with their redacted `input`). */
  async listApprovals(
    options: ListApprovalsOptions = {},
  ): Promise<{ approvals: Approval[]; nextPageToken: string }> {
    const request = {
      statuses: (options.statuses ?? []).map((s) => PbApprovalStatus[s]),
      capabilityId: options.capabilityId ?? "",
      requesterId: options.requesterId ?? "",
      pageSize: options.pageSize ?? 0,
      pageToken: options.pageToken ?? "",
    };
    const res = await this.rpc(() => this.admin.listApprovals(request, this.callOptions(options)));
    if (res.error !== undefined) throw CapgateError.fromProto(res.error);
    return { approvals: res.approvals.map((a) => approvalFromProto(a, this.json)), nextPageToken: res.nextPageToken };
  }

  /** Approve; `inputHash` is the hash the approver saw (a mismatch is refused). Under a quorum
   * the approval may stay PENDING: see `approvalProgress`. */
  approve(approvalId: string, inputHash: string, options: ApproveOptions = {}): Promise<Approval> {
    return this.decide(approvalId, Verdict.APPROVE, inputHash, options);
  }

  reject(approvalId: string, inputHash: string, options: CallOptions & { note?: string } = {}): Promise<Approval> {
    return this.decide(approvalId, Verdict.REJECT, inputHash, options);
  }

  private async decide(
    approvalId: string,
    verdict: Verdict,
    inputHash: string,
    options: ApproveOptions,
  ): Promise<Approval> {
    const request = {
      approvalId,
      verdict,
      inputHash,
      note: options.note ?? "",
      editedInputJson: this.encode(options.editedInput),
    };
    const res = await this.rpc(() => this.admin.decideApproval(request, this.callOptions(options)));
    return this.approvalOrThrow(res.approval, res.error);
  }

  /** Create a standing grant; refused (INPUT_INVALID, FORBIDDEN) as docs/approvals.md says. */
  async createGrant(options: CreateGrantOptions): Promise<Grant> {
    const ms = options.expiresInMs;
    const request = {
      ...(options.actor !== undefined
        ? { actor: { id: options.actor.id, issuer: options.actor.issuer, kind: "", roles: [] } }
        : {}),
      role: options.role ?? "",
      capabilityId: options.capabilityId ?? "",
      tag: options.tag ?? "",
      constraint: options.constraint ?? "",
      expiresIn: { seconds: BigInt(Math.floor(ms / 1000)), nanos: (ms % 1000) * 1e6 },
      maxUses: BigInt(options.maxUses ?? 0),
      amount: options.amount ?? "",
      maxTotal: options.maxTotal ?? 0,
      note: options.note ?? "",
      fromApprovalId: options.fromApprovalId ?? "",
    };
    const res = await this.rpc(() => this.admin.createGrant(request, this.callOptions(options)));
    return this.grantOrThrow(res);
  }

  /** Grants (default: active), one page at a time. */
  async listGrants(options: ListGrantsOptions = {}): Promise<{ grants: Grant[]; nextPageToken: string }> {
    const request = {
      statuses: (options.statuses ?? []).map((s) => PbGrantStatus[s]),
      capabilityId: options.capabilityId ?? "",
      actorId: options.actorId ?? "",
      pageSize: options.pageSize ?? 0,
      pageToken: options.pageToken ?? "",
    };
    const res = await this.rpc(() => this.admin.listGrants(request, this.callOptions(options)));
    if (res.error !== undefined) throw CapgateError.fromProto(res.error);
    return { grants: res.grants.map(grantFromProto), nextPageToken: res.nextPageToken };
  }

  async getGrant(grantId: string, options: CallOptions = {}): Promise<Grant> {
    const res = await this.rpc(() => this.admin.getGrant({ grantId }, this.callOptions(options)));
    return this.grantOrThrow(res);
  }

  /** Revoke at once, on every replica: calls it covered wait for approvals again. */
  async revokeGrant(grantId: string, options: CallOptions & { note?: string } = {}): Promise<Grant> {
    const request = { grantId, note: options.note ?? "" };
    const res = await this.rpc(() => this.admin.revokeGrant(request, this.callOptions(options)));
    return this.grantOrThrow(res);
  }

  private grantOrThrow(res: { grant?: PbGrant | undefined; error?: PbCapabilityError | undefined }): Grant {
    if (res.error !== undefined) throw CapgateError.fromProto(res.error);
    if (res.grant === undefined) {
      throw CapgateError.fromTransport(new Error("the gateway answered without a grant"));
    }
    return grantFromProto(res.grant);
  }
}
