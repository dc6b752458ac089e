/**
 * Errors that keep capgate's `ErrorCode`.
 *
 * Governed failures come back inside the envelope (`{kind: "failed" | "cancelled", error}`), never
 * as an RPC status: the gateway answers them with status OK (DESIGN §2). Transport faults (bad
 * credentials, a deadline or an abort on this side, the gateway unreachable) reject the promise;
 * both arrive here as one `CapgateError` so callers handle a single type.
 */
import { Code } from "@connectrpc/connect";
import { ErrorCode as PbErrorCode, ExecutionState as PbExecutionState, type CapabilityError as PbCapabilityError } from "./gen/capgate/v1/types_pb.js";
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
}
/** Name of a proto enum value, or the UNSPECIFIED name for a value this client does not know. */
export declare function enumName<E extends Record<string, string | number>>(enumObject: E, value: number): keyof E;
/**
 * A capgate failure. `code` is the governed code; `grpcCode` is set only when the failure was a
 * transport fault (then `code` is the nearest governed code, or UNSPECIFIED when none fits).
 */
export declare class CapgateError extends Error implements ErrorDetail {
    readonly code: ErrorCode;
    readonly stage: string;
    readonly retryable: boolean;
    readonly exposeToModel: boolean;
    readonly issues: readonly Issue[];
    readonly executedBeforeFailure: boolean;
    readonly executionState: ExecutionState;
    /** The execution the failure belongs to; empty for transport faults. */
    readonly executionId: string;
    /** The gRPC status of a transport fault (connect's `Code`), else undefined. */
    readonly grpcCode: Code | undefined;
    constructor(detail: ErrorDetail, options?: {
        executionId?: string;
        grpcCode?: Code;
        cause?: unknown;
    });
    /** A CapgateError from the proto `CapabilityError` of an envelope or an answer. */
    static fromProto(error: PbCapabilityError, executionId?: string): CapgateError;
    /** Any rejection of an RPC (a ConnectError, an AbortError, ...) as a CapgateError. */
    static fromTransport(err: unknown): CapgateError;
}
