import type { GenEnum, GenFile, GenMessage } from "@bufbuild/protobuf/codegenv2";
import type { Timestamp } from "@bufbuild/protobuf/wkt";
import type { Message } from "@bufbuild/protobuf";
/**
 * Describes the file capgate/v1/types.proto.
 */
export declare const file_capgate_v1_types: GenFile;
/**
 * Issue is one input-validation problem: a JSON path and a message that never echoes values.
 *
 * @generated from message capgate.v1.Issue
 */
export type Issue = Message<"capgate.v1.Issue"> & {
    /**
     * @generated from field: string path = 1;
     */
    path: string;
    /**
     * @generated from field: string message = 2;
     */
    message: string;
};
/**
 * Describes the message capgate.v1.Issue.
 * Use `create(IssueSchema)` to create a new message.
 */
export declare const IssueSchema: GenMessage<Issue>;
/**
 * CapabilityError is a governed failure. It is returned inside an ExecutionResult, never raised.
 *
 * @generated from message capgate.v1.CapabilityError
 */
export type CapabilityError = Message<"capgate.v1.CapabilityError"> & {
    /**
     * @generated from field: capgate.v1.ErrorCode code = 1;
     */
    code: ErrorCode;
    /**
     * The seed's stage name: discovery, input-validation, authentication, policy, approval,
     * audit, execution, authorization, timeout, cancellation, output-validation.
     *
     * @generated from field: string stage = 2;
     */
    stage: string;
    /**
     * Public message, safe to show to a model when expose_to_model is true.
     *
     * @generated from field: string message = 3;
     */
    message: string;
    /**
     * @generated from field: bool retryable = 4;
     */
    retryable: boolean;
    /**
     * @generated from field: bool expose_to_model = 5;
     */
    exposeToModel: boolean;
    /**
     * Only for ERROR_CODE_INPUT_INVALID.
     *
     * @generated from field: repeated capgate.v1.Issue issues = 6;
     */
    issues: Issue[];
    /**
     * @generated from field: bool executed_before_failure = 7;
     */
    executedBeforeFailure: boolean;
    /**
     * @generated from field: capgate.v1.ExecutionState execution_state = 8;
     */
    executionState: ExecutionState;
};
/**
 * Describes the message capgate.v1.CapabilityError.
 * Use `create(CapabilityErrorSchema)` to create a new message.
 */
export declare const CapabilityErrorSchema: GenMessage<CapabilityError>;
/**
 * Actor is an authenticated identity. Identity is the pair (issuer, id).
 *
 * @generated from message capgate.v1.Actor
 */
export type Actor = Message<"capgate.v1.Actor"> & {
    /**
     * @generated from field: string id = 1;
     */
    id: string;
    /**
     * @generated from field: string issuer = 2;
     */
    issuer: string;
    /**
     * user, service, agent or anonymous.
     *
     * @generated from field: string kind = 3;
     */
    kind: string;
    /**
     * @generated from field: repeated string roles = 4;
     */
    roles: string[];
};
/**
 * Describes the message capgate.v1.Actor.
 * Use `create(ActorSchema)` to create a new message.
 */
export declare const ActorSchema: GenMessage<Actor>;
/**
 * ApproverConstraint: an approver must hold every listed role.
 *
 * @generated from message capgate.v1.ApproverConstraint
 */
export type ApproverConstraint = Message<"capgate.v1.ApproverConstraint"> & {
    /**
     * @generated from field: repeated string roles = 1;
     */
    roles: string[];
};
/**
 * Describes the message capgate.v1.ApproverConstraint.
 * Use `create(ApproverConstraintSchema)` to create a new message.
 */
export declare const ApproverConstraintSchema: GenMessage<ApproverConstraint>;
/**
 * Approval is one approval request as the caller or an approver may see it.
 *
 * @generated from message capgate.v1.Approval
 */
export type Approval = Message<"capgate.v1.Approval"> & {
    /**
     * @generated from field: string id = 1;
     */
    id: string;
    /**
     * @generated from field: string capability_id = 2;
     */
    capabilityId: string;
    /**
     * @generated from field: capgate.v1.ApprovalStatus status = 3;
     */
    status: ApprovalStatus;
    /**
     * @generated from field: repeated string reasons = 4;
     */
    reasons: string[];
    /**
     * Public message for the requester.
     *
     * @generated from field: string message = 5;
     */
    message: string;
    /**
     * @generated from field: google.protobuf.Timestamp created_at = 6;
     */
    createdAt?: Timestamp | undefined;
    /**
     * @generated from field: google.protobuf.Timestamp expires_at = 7;
     */
    expiresAt?: Timestamp | undefined;
    /**
     * @generated from field: google.protobuf.Timestamp decided_at = 8;
     */
    decidedAt?: Timestamp | undefined;
    /**
     * @generated from field: capgate.v1.Actor requester = 9;
     */
    requester?: Actor | undefined;
    /**
     * Who decided; on_behalf_of is set when an allow-listed inbox decided for a human.
     *
     * @generated from field: capgate.v1.Actor decided_by = 10;
     */
    decidedBy?: Actor | undefined;
    /**
     * @generated from field: capgate.v1.Actor decided_via = 11;
     */
    decidedVia?: Actor | undefined;
    /**
     * @generated from field: string decision_note = 12;
     */
    decisionNote: string;
    /**
     * Hex SHA-256 of the RFC 8785 canonical JSON of the validated input.
     *
     * @generated from field: string input_hash = 13;
     */
    inputHash: string;
    /**
     * The input after the capability's redact.approval_input rules; only on ApprovalAdmin.
     *
     * @generated from field: string input_json = 14;
     */
    inputJson: string;
    /**
     * @generated from field: string risk = 15;
     */
    risk: string;
    /**
     * @generated from field: string side_effect = 16;
     */
    sideEffect: string;
    /**
     * @generated from field: capgate.v1.ApproverConstraint approvers = 17;
     */
    approvers?: ApproverConstraint | undefined;
    /**
     * @generated from field: string requesting_execution_id = 18;
     */
    requestingExecutionId: string;
    /**
     * @generated from field: string resumed_execution_id = 19;
     */
    resumedExecutionId: string;
    /**
     * @generated from field: string surface = 20;
     */
    surface: string;
};
/**
 * Describes the message capgate.v1.Approval.
 * Use `create(ApprovalSchema)` to create a new message.
 */
export declare const ApprovalSchema: GenMessage<Approval>;
/**
 * ErrorCode is the one stable list of governed failure codes, shared by every client.
 * JSON, MCP and audit events use the same names without the ERROR_CODE_ prefix.
 *
 * @generated from enum capgate.v1.ErrorCode
 */
export declare enum ErrorCode {
    /**
     * @generated from enum value: ERROR_CODE_UNSPECIFIED = 0;
     */
    UNSPECIFIED = 0,
    /**
     * Seed 001 codes.
     *
     * @generated from enum value: ERROR_CODE_CAPABILITY_NOT_FOUND = 1;
     */
    CAPABILITY_NOT_FOUND = 1,
    /**
     * @generated from enum value: ERROR_CODE_INPUT_INVALID = 2;
     */
    INPUT_INVALID = 2,
    /**
     * @generated from enum value: ERROR_CODE_UNAUTHENTICATED = 3;
     */
    UNAUTHENTICATED = 3,
    /**
     * @generated from enum value: ERROR_CODE_FORBIDDEN = 4;
     */
    FORBIDDEN = 4,
    /**
     * @generated from enum value: ERROR_CODE_POLICY_DENIED = 5;
     */
    POLICY_DENIED = 5,
    /**
     * @generated from enum value: ERROR_CODE_POLICY_FAILED = 6;
     */
    POLICY_FAILED = 6,
    /**
     * @generated from enum value: ERROR_CODE_APPROVAL_UNSERIALIZABLE_INPUT = 7;
     */
    APPROVAL_UNSERIALIZABLE_INPUT = 7,
    /**
     * @generated from enum value: ERROR_CODE_APPROVAL_PENDING = 8;
     */
    APPROVAL_PENDING = 8,
    /**
     * @generated from enum value: ERROR_CODE_APPROVAL_REJECTED = 9;
     */
    APPROVAL_REJECTED = 9,
    /**
     * @generated from enum value: ERROR_CODE_APPROVAL_EXPIRED = 10;
     */
    APPROVAL_EXPIRED = 10,
    /**
     * @generated from enum value: ERROR_CODE_APPROVAL_CONSUMED = 11;
     */
    APPROVAL_CONSUMED = 11,
    /**
     * @generated from enum value: ERROR_CODE_APPROVAL_INPUT_MISMATCH = 12;
     */
    APPROVAL_INPUT_MISMATCH = 12,
    /**
     * @generated from enum value: ERROR_CODE_APPROVAL_SELF_APPROVAL = 13;
     */
    APPROVAL_SELF_APPROVAL = 13,
    /**
     * @generated from enum value: ERROR_CODE_AUDIT_UNAVAILABLE = 14;
     */
    AUDIT_UNAVAILABLE = 14,
    /**
     * @generated from enum value: ERROR_CODE_EXECUTION_FAILED = 15;
     */
    EXECUTION_FAILED = 15,
    /**
     * @generated from enum value: ERROR_CODE_TIMEOUT = 16;
     */
    TIMEOUT = 16,
    /**
     * @generated from enum value: ERROR_CODE_CANCELLED = 17;
     */
    CANCELLED = 17,
    /**
     * @generated from enum value: ERROR_CODE_OUTPUT_INVALID = 18;
     */
    OUTPUT_INVALID = 18,
    /**
     * Additions of DESIGN §12, fixed now so the enum is stable.
     *
     * @generated from enum value: ERROR_CODE_APPROVAL_UNAVAILABLE = 19;
     */
    APPROVAL_UNAVAILABLE = 19,
    /**
     * @generated from enum value: ERROR_CODE_APPROVAL_NOT_FOUND = 20;
     */
    APPROVAL_NOT_FOUND = 20,
    /**
     * @generated from enum value: ERROR_CODE_IDEMPOTENCY_CONFLICT = 21;
     */
    IDEMPOTENCY_CONFLICT = 21,
    /**
     * @generated from enum value: ERROR_CODE_IDEMPOTENCY_IN_PROGRESS = 22;
     */
    IDEMPOTENCY_IN_PROGRESS = 22,
    /**
     * @generated from enum value: ERROR_CODE_INPUT_TOO_LARGE = 23;
     */
    INPUT_TOO_LARGE = 23,
    /**
     * @generated from enum value: ERROR_CODE_UPSTREAM_UNAVAILABLE = 24;
     */
    UPSTREAM_UNAVAILABLE = 24,
    /**
     * Approval administration.
     *
     * @generated from enum value: ERROR_CODE_APPROVAL_ALREADY_DECIDED = 25;
     */
    APPROVAL_ALREADY_DECIDED = 25,
    /**
     * @generated from enum value: ERROR_CODE_APPROVAL_LIMIT_EXCEEDED = 26;
     */
    APPROVAL_LIMIT_EXCEEDED = 26
}
/**
 * Describes the enum capgate.v1.ErrorCode.
 */
export declare const ErrorCodeSchema: GenEnum<ErrorCode>;
/**
 * ExecutionState tells whether the upstream effect happened.
 *
 * @generated from enum capgate.v1.ExecutionState
 */
export declare enum ExecutionState {
    /**
     * @generated from enum value: EXECUTION_STATE_UNSPECIFIED = 0;
     */
    UNSPECIFIED = 0,
    /**
     * The upstream procedure was not called.
     *
     * @generated from enum value: EXECUTION_STATE_NOT_STARTED = 1;
     */
    NOT_STARTED = 1,
    /**
     * The upstream procedure answered; its effect happened.
     *
     * @generated from enum value: EXECUTION_STATE_COMPLETED = 2;
     */
    COMPLETED = 2,
    /**
     * The effect is unknown (timeout, cancellation, lost reply); never re-run automatically.
     *
     * @generated from enum value: EXECUTION_STATE_UNKNOWN = 3;
     */
    UNKNOWN = 3
}
/**
 * Describes the enum capgate.v1.ExecutionState.
 */
export declare const ExecutionStateSchema: GenEnum<ExecutionState>;
/**
 * Decision is a policy outcome; precedence DENY > HIDE > REQUIRE_APPROVAL > ALLOW.
 *
 * @generated from enum capgate.v1.Decision
 */
export declare enum Decision {
    /**
     * @generated from enum value: DECISION_UNSPECIFIED = 0;
     */
    UNSPECIFIED = 0,
    /**
     * @generated from enum value: DECISION_ALLOW = 1;
     */
    ALLOW = 1,
    /**
     * @generated from enum value: DECISION_REQUIRE_APPROVAL = 2;
     */
    REQUIRE_APPROVAL = 2,
    /**
     * @generated from enum value: DECISION_HIDE = 3;
     */
    HIDE = 3,
    /**
     * @generated from enum value: DECISION_DENY = 4;
     */
    DENY = 4
}
/**
 * Describes the enum capgate.v1.Decision.
 */
export declare const DecisionSchema: GenEnum<Decision>;
/**
 * ApprovalStatus is the life of one approval record.
 *
 * @generated from enum capgate.v1.ApprovalStatus
 */
export declare enum ApprovalStatus {
    /**
     * @generated from enum value: APPROVAL_STATUS_UNSPECIFIED = 0;
     */
    UNSPECIFIED = 0,
    /**
     * @generated from enum value: APPROVAL_STATUS_PENDING = 1;
     */
    PENDING = 1,
    /**
     * @generated from enum value: APPROVAL_STATUS_APPROVED = 2;
     */
    APPROVED = 2,
    /**
     * @generated from enum value: APPROVAL_STATUS_REJECTED = 3;
     */
    REJECTED = 3,
    /**
     * @generated from enum value: APPROVAL_STATUS_EXPIRED = 4;
     */
    EXPIRED = 4,
    /**
     * Consumed by a Resume; the execution is running or its outcome was lost.
     *
     * @generated from enum value: APPROVAL_STATUS_CONSUMED = 5;
     */
    CONSUMED = 5,
    /**
     * Consumed and the execution finished; its envelope is stored.
     *
     * @generated from enum value: APPROVAL_STATUS_EXECUTED = 6;
     */
    EXECUTED = 6
}
/**
 * Describes the enum capgate.v1.ApprovalStatus.
 */
export declare const ApprovalStatusSchema: GenEnum<ApprovalStatus>;
