/** capgate's TypeScript client: `CapgateClient` for callers, `ApprovalAdminClient` for approvers. */
export {
  ApprovalAdminClient,
  CapgateClient,
  type ApproveOptions,
  type CallOptions,
  type CheckResult,
  type ClientOptions,
  type CreateGrantOptions,
  type DecisionName,
  type InvokeOptions,
  type ListApprovalsOptions,
  type ListGrantsOptions,
  type WaitOptions,
} from "./client.js";
export { CapgateError, type ErrorCode, type ErrorDetail, type ExecutionState, type Issue } from "./errors.js";
export {
  approvalProgress,
  unwrap,
  type Actor,
  type Approval,
  type ApprovalRequiredOutcome,
  type ApprovalStatus,
  type Cancelled,
  type CapabilityDescriptor,
  type Completed,
  type ExecutionInfo,
  type Failed,
  type Grant,
  type GrantStatus,
  type JsonCodec,
  type Outcome,
  type PatchOperation,
} from "./envelope.js";
export type { ConnectOptions, LocalActor, TlsOptions } from "./transport.js";
