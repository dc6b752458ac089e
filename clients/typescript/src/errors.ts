/**
 * Errors that keep capgate's `ErrorCode`.
 *
 * Governed failures come back inside the envelope (`{kind: "failed" | "cancelled", error}`), never
 * as an RPC status: the gateway answers them with status OK (DESIGN §2). Transport faults (bad
 * credentials, a deadline or an abort on this side, the gateway unreachable) reject the promise;
 * both arrive here as one `CapgateError` so callers handle a single type.
 */
import { Code, ConnectError } from "@connectrpc/connect";
import {
  ErrorCode as PbErrorCode,
  ExecutionState as PbExecutionState,
  type CapabilityError as PbCapabilityError,
} from "./gen/capgate/v1/types_pb.js";

/** The stable code names (the proto enum without its `ERROR_CODE_` prefix, as JSON and MCP use). */
export type ErrorCode = keyof typeof PbErrorCode;

/** Whether the upstream effect happened: NOT_STARTED, COMPLETED or UNKNOWN (never re-run). */
export type ExecutionState = keyof typeof PbExecutionState;

/** One input-validation problem (INPUT_INVALID only): a JSON path and a value-free message. */
export interface Issue {
  readonly path: string;
  readonly message: string;
}

/** The governed fields of a failure, as the gateway reported them. */
export interface ErrorDetail {
  readonly code: ErrorCode;
  readonly stage: string;
  readonly message: string;
  readonly retryable: boolean;
  readonly exposeToModel: boolean;
  readonly issues: readonly Issue[];
  readonly executedBeforeFailure: boolean;
  readonly executionState: ExecutionState;
  /** RATE_LIMITED only: seconds until the same call can pass the limit that refused it. */
  readonly retryAfterSeconds?: number;
}

/** Name of a proto enum value, or the UNSPECIFIED name for a value this client does not know. */
export function enumName<E extends Record<string, string | number>>(
  enumObject: E,
  value: number,
): keyof E {
  const name = (enumObject as Record<number, string>)[value];
  return (name ?? "UNSPECIFIED") as keyof E;
}

/**
 * A capgate failure. `code` is the governed code; `grpcCode` is set only when the failure was a
 * transport fault (then `code` is the nearest governed code, or UNSPECIFIED when none fits).
 */
export class CapgateError extends Error implements ErrorDetail {
  readonly code: ErrorCode;
  readonly stage: string;
  readonly retryable: boolean;
  readonly exposeToModel: boolean;
  readonly issues: readonly Issue[];
  readonly executedBeforeFailure: boolean;
  readonly executionState: ExecutionState;
  /** RATE_LIMITED only: seconds until the same call can pass the limit that refused it. */
  readonly retryAfterSeconds: number | undefined;
  /** The execution the failure belongs to; empty for transport faults. */
  readonly executionId: string;
  /** The gRPC status of a transport fault (connect's `Code`), else undefined. */
  readonly grpcCode: Code | undefined;

  constructor(
    detail: ErrorDetail,
    options: { executionId?: string; grpcCode?: Code; cause?: unknown } = {},
  ) {
    super(detail.message || detail.code, { cause: options.cause });
    this.name = "CapgateError";
    this.code = detail.code;
    this.stage = detail.stage;
    this.retryable = detail.retryable;
    this.exposeToModel = detail.exposeToModel;
    this.issues = detail.issues;
    this.executedBeforeFailure = detail.executedBeforeFailure;
    this.executionState = detail.executionState;
    this.retryAfterSeconds = detail.retryAfterSeconds;
    this.executionId = options.executionId ?? "";
    this.grpcCode = options.grpcCode;
  }

  /** A CapgateError from the proto `CapabilityError` of an envelope or an answer. */
  static fromProto(error: PbCapabilityError, executionId = ""): CapgateError {
    return new CapgateError(
      {
        code: enumName(PbErrorCode, error.code),
        stage: error.stage,
        message: error.message,
        retryable: error.retryable,
        exposeToModel: error.exposeToModel,
        issues: error.issues.map((i) => ({ path: i.path, message: i.message })),
        executedBeforeFailure: error.executedBeforeFailure,
        executionState: enumName(PbExecutionState, error.executionState),
        retryAfterSeconds:
          error.retryAfter === undefined
            ? undefined
            : Number(error.retryAfter.seconds) + error.retryAfter.nanos / 1e9,
      },
      { executionId },
    );
  }

  /** Any rejection of an RPC (a ConnectError, an AbortError, ...) as a CapgateError. */
  static fromTransport(err: unknown): CapgateError {
    if (err instanceof CapgateError) return err;
    const connectError = ConnectError.from(err);
    const mapped = TRANSPORT_CODES[connectError.code];
    return new CapgateError(
      {
        code: mapped?.code ?? "UNSPECIFIED",
        stage: mapped?.stage ?? "transport",
        message: connectError.rawMessage || Code[connectError.code],
        retryable: connectError.code === Code.Unavailable,
        exposeToModel: false,
        issues: [],
        executedBeforeFailure: false,
        executionState: mapped?.state ?? "UNKNOWN",
      },
      { grpcCode: connectError.code, cause: err },
    );
  }
}

/** Transport statuses with a governed meaning. A deadline or an abort may hit after the upstream
 * ran, so its effect is UNKNOWN; an authentication refusal happens before anything ran. */
const TRANSPORT_CODES: Partial<
  Record<Code, { code: ErrorCode; stage: string; state: ExecutionState }>
> = {
  [Code.Canceled]: { code: "CANCELLED", stage: "cancellation", state: "UNKNOWN" },
  [Code.DeadlineExceeded]: { code: "TIMEOUT", stage: "timeout", state: "UNKNOWN" },
  [Code.Unauthenticated]: {
    code: "UNAUTHENTICATED",
    stage: "authentication",
    state: "NOT_STARTED",
  },
  [Code.PermissionDenied]: { code: "FORBIDDEN", stage: "authorization", state: "NOT_STARTED" },
};
