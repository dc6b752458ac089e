import type { GenFile, GenMessage, GenService } from "@bufbuild/protobuf/codegenv2";
import type { Approval, CapabilityError, Decision, ExecutionState } from "./types_pb.js";
import type { Duration } from "@bufbuild/protobuf/wkt";
import type { Message } from "@bufbuild/protobuf";
/**
 * Describes the file capgate/v1/gateway.proto.
 */
export declare const file_capgate_v1_gateway: GenFile;
/**
 * @generated from message capgate.v1.DescribeRequest
 */
export type DescribeRequest = Message<"capgate.v1.DescribeRequest"> & {
    /**
     * Optional filter; empty means all visible capabilities.
     *
     * @generated from field: repeated string capability_ids = 1;
     */
    capabilityIds: string[];
};
/**
 * Describes the message capgate.v1.DescribeRequest.
 * Use `create(DescribeRequestSchema)` to create a new message.
 */
export declare const DescribeRequestSchema: GenMessage<DescribeRequest>;
/**
 * @generated from message capgate.v1.CapabilityDescriptor
 */
export type CapabilityDescriptor = Message<"capgate.v1.CapabilityDescriptor"> & {
    /**
     * @generated from field: string id = 1;
     */
    id: string;
    /**
     * @generated from field: string description = 2;
     */
    description: string;
    /**
     * JSON Schema of the input, as JSON text.
     *
     * @generated from field: string input_schema_json = 3;
     */
    inputSchemaJson: string;
    /**
     * none, read, write, destructive.
     *
     * @generated from field: string side_effect = 4;
     */
    sideEffect: string;
    /**
     * low, medium, high, critical.
     *
     * @generated from field: string risk = 5;
     */
    risk: string;
    /**
     * @generated from field: repeated string tags = 6;
     */
    tags: string[];
    /**
     * @generated from field: bool requires_approval = 7;
     */
    requiresApproval: boolean;
};
/**
 * Describes the message capgate.v1.CapabilityDescriptor.
 * Use `create(CapabilityDescriptorSchema)` to create a new message.
 */
export declare const CapabilityDescriptorSchema: GenMessage<CapabilityDescriptor>;
/**
 * @generated from message capgate.v1.DescribeResponse
 */
export type DescribeResponse = Message<"capgate.v1.DescribeResponse"> & {
    /**
     * @generated from field: repeated capgate.v1.CapabilityDescriptor capabilities = 1;
     */
    capabilities: CapabilityDescriptor[];
    /**
     * Config and policy revision these descriptors come from.
     *
     * @generated from field: string revision = 2;
     */
    revision: string;
};
/**
 * Describes the message capgate.v1.DescribeResponse.
 * Use `create(DescribeResponseSchema)` to create a new message.
 */
export declare const DescribeResponseSchema: GenMessage<DescribeResponse>;
/**
 * @generated from message capgate.v1.InvokeRequest
 */
export type InvokeRequest = Message<"capgate.v1.InvokeRequest"> & {
    /**
     * @generated from field: string capability_id = 1;
     */
    capabilityId: string;
    /**
     * UTF-8 JSON text of the input object; empty means {}. Bytes, so that invalid UTF-8
     * gets ERROR_CODE_INPUT_INVALID rather than a transport error.
     *
     * @generated from field: bytes input_json = 2;
     */
    inputJson: Uint8Array;
    /**
     * A repeat with the same key and input returns the recorded result.
     *
     * @generated from field: string idempotency_key = 3;
     */
    idempotencyKey: string;
    /**
     * @generated from field: string correlation_id = 4;
     */
    correlationId: string;
    /**
     * Request metadata, visible to policies when allow-listed by the gateway config.
     *
     * @generated from field: map<string, string> metadata = 5;
     */
    metadata: {
        [key: string]: string;
    };
};
/**
 * Describes the message capgate.v1.InvokeRequest.
 * Use `create(InvokeRequestSchema)` to create a new message.
 */
export declare const InvokeRequestSchema: GenMessage<InvokeRequest>;
/**
 * @generated from message capgate.v1.ResumeRequest
 */
export type ResumeRequest = Message<"capgate.v1.ResumeRequest"> & {
    /**
     * @generated from field: string approval_id = 1;
     */
    approvalId: string;
    /**
     * @generated from field: string correlation_id = 2;
     */
    correlationId: string;
};
/**
 * Describes the message capgate.v1.ResumeRequest.
 * Use `create(ResumeRequestSchema)` to create a new message.
 */
export declare const ResumeRequestSchema: GenMessage<ResumeRequest>;
/**
 * @generated from message capgate.v1.Completed
 */
export type Completed = Message<"capgate.v1.Completed"> & {
    /**
     * UTF-8 JSON text of the validated, redacted output.
     *
     * @generated from field: string output_json = 1;
     */
    outputJson: string;
};
/**
 * Describes the message capgate.v1.Completed.
 * Use `create(CompletedSchema)` to create a new message.
 */
export declare const CompletedSchema: GenMessage<Completed>;
/**
 * @generated from message capgate.v1.ApprovalRequired
 */
export type ApprovalRequired = Message<"capgate.v1.ApprovalRequired"> & {
    /**
     * @generated from field: capgate.v1.Approval approval = 1;
     */
    approval?: Approval | undefined;
};
/**
 * Describes the message capgate.v1.ApprovalRequired.
 * Use `create(ApprovalRequiredSchema)` to create a new message.
 */
export declare const ApprovalRequiredSchema: GenMessage<ApprovalRequired>;
/**
 * ExecutionResult is the one normalized envelope of every invocation.
 *
 * @generated from message capgate.v1.ExecutionResult
 */
export type ExecutionResult = Message<"capgate.v1.ExecutionResult"> & {
    /**
     * @generated from field: string execution_id = 1;
     */
    executionId: string;
    /**
     * @generated from field: string capability_id = 2;
     */
    capabilityId: string;
    /**
     * @generated from field: int32 attempts = 3;
     */
    attempts: number;
    /**
     * Omitted on concealed answers so that they equal not-found (SI-8).
     *
     * @generated from field: google.protobuf.Duration duration = 4;
     */
    duration?: Duration | undefined;
    /**
     * @generated from field: capgate.v1.ExecutionState execution_state = 5;
     */
    executionState: ExecutionState;
    /**
     * Set on executions that resume an approval.
     *
     * @generated from field: string approval_id = 6;
     */
    approvalId: string;
    /**
     * Config and policy revision used from start to end.
     *
     * @generated from field: string revision = 7;
     */
    revision: string;
    /**
     * @generated from oneof capgate.v1.ExecutionResult.outcome
     */
    outcome: {
        /**
         * @generated from field: capgate.v1.Completed completed = 10;
         */
        value: Completed;
        case: "completed";
    } | {
        /**
         * @generated from field: capgate.v1.ApprovalRequired approval_required = 11;
         */
        value: ApprovalRequired;
        case: "approvalRequired";
    } | {
        /**
         * @generated from field: capgate.v1.CapabilityError failed = 12;
         */
        value: CapabilityError;
        case: "failed";
    } | {
        /**
         * @generated from field: capgate.v1.CapabilityError cancelled = 13;
         */
        value: CapabilityError;
        case: "cancelled";
    } | {
        case: undefined;
        value?: undefined;
    };
};
/**
 * Describes the message capgate.v1.ExecutionResult.
 * Use `create(ExecutionResultSchema)` to create a new message.
 */
export declare const ExecutionResultSchema: GenMessage<ExecutionResult>;
/**
 * @generated from message capgate.v1.CheckRequest
 */
export type CheckRequest = Message<"capgate.v1.CheckRequest"> & {
    /**
     * @generated from field: string capability_id = 1;
     */
    capabilityId: string;
    /**
     * @generated from field: bytes input_json = 2;
     */
    inputJson: Uint8Array;
    /**
     * @generated from field: map<string, string> metadata = 3;
     */
    metadata: {
        [key: string]: string;
    };
};
/**
 * Describes the message capgate.v1.CheckRequest.
 * Use `create(CheckRequestSchema)` to create a new message.
 */
export declare const CheckRequestSchema: GenMessage<CheckRequest>;
/**
 * @generated from message capgate.v1.PolicyStance
 */
export type PolicyStance = Message<"capgate.v1.PolicyStance"> & {
    /**
     * @generated from field: string policy = 1;
     */
    policy: string;
    /**
     * enforce or shadow.
     *
     * @generated from field: string mode = 2;
     */
    mode: string;
    /**
     * DECISION_UNSPECIFIED when the policy abstained.
     *
     * @generated from field: capgate.v1.Decision effect = 3;
     */
    effect: Decision;
    /**
     * @generated from field: int32 rule = 4;
     */
    rule: number;
    /**
     * @generated from field: string message = 5;
     */
    message: string;
    /**
     * Set when the policy failed (counts as deny).
     *
     * @generated from field: string error = 6;
     */
    error: string;
};
/**
 * Describes the message capgate.v1.PolicyStance.
 * Use `create(PolicyStanceSchema)` to create a new message.
 */
export declare const PolicyStanceSchema: GenMessage<PolicyStance>;
/**
 * @generated from message capgate.v1.CheckResponse
 */
export type CheckResponse = Message<"capgate.v1.CheckResponse"> & {
    /**
     * @generated from field: capgate.v1.Decision decision = 1;
     */
    decision: Decision;
    /**
     * What Invoke would answer when the decision is not ALLOW or REQUIRE_APPROVAL
     * (concealed the same way), or the validation failure.
     *
     * @generated from field: capgate.v1.CapabilityError error = 2;
     */
    error?: CapabilityError | undefined;
    /**
     * Full stances only on the admin listener.
     *
     * @generated from field: repeated capgate.v1.PolicyStance stances = 3;
     */
    stances: PolicyStance[];
    /**
     * @generated from field: repeated string approval_reasons = 4;
     */
    approvalReasons: string[];
    /**
     * @generated from field: string revision = 5;
     */
    revision: string;
};
/**
 * Describes the message capgate.v1.CheckResponse.
 * Use `create(CheckResponseSchema)` to create a new message.
 */
export declare const CheckResponseSchema: GenMessage<CheckResponse>;
/**
 * @generated from message capgate.v1.GetApprovalRequest
 */
export type GetApprovalRequest = Message<"capgate.v1.GetApprovalRequest"> & {
    /**
     * @generated from field: string approval_id = 1;
     */
    approvalId: string;
};
/**
 * Describes the message capgate.v1.GetApprovalRequest.
 * Use `create(GetApprovalRequestSchema)` to create a new message.
 */
export declare const GetApprovalRequestSchema: GenMessage<GetApprovalRequest>;
/**
 * @generated from message capgate.v1.WaitApprovalRequest
 */
export type WaitApprovalRequest = Message<"capgate.v1.WaitApprovalRequest"> & {
    /**
     * @generated from field: string approval_id = 1;
     */
    approvalId: string;
    /**
     * How long to wait at most; capped by the gateway (default 30 s).
     *
     * @generated from field: google.protobuf.Duration timeout = 2;
     */
    timeout?: Duration | undefined;
};
/**
 * Describes the message capgate.v1.WaitApprovalRequest.
 * Use `create(WaitApprovalRequestSchema)` to create a new message.
 */
export declare const WaitApprovalRequestSchema: GenMessage<WaitApprovalRequest>;
/**
 * @generated from message capgate.v1.GetApprovalResponse
 */
export type GetApprovalResponse = Message<"capgate.v1.GetApprovalResponse"> & {
    /**
     * @generated from field: capgate.v1.Approval approval = 1;
     */
    approval?: Approval | undefined;
    /**
     * @generated from field: capgate.v1.CapabilityError error = 2;
     */
    error?: CapabilityError | undefined;
};
/**
 * Describes the message capgate.v1.GetApprovalResponse.
 * Use `create(GetApprovalResponseSchema)` to create a new message.
 */
export declare const GetApprovalResponseSchema: GenMessage<GetApprovalResponse>;
/**
 * CapabilityGateway is what callers (agents, services acting for a user) use.
 * The surface is fixed by the listener the call arrives on; the actor comes from
 * transport authentication, never from a request field.
 *
 * @generated from service capgate.v1.CapabilityGateway
 */
export declare const CapabilityGateway: GenService<{
    /**
     * Discovery pipeline: the capabilities this caller may see on this surface.
     *
     * @generated from rpc capgate.v1.CapabilityGateway.Describe
     */
    describe: {
        methodKind: "unary";
        input: typeof DescribeRequestSchema;
        output: typeof DescribeResponseSchema;
    };
    /**
     * Invocation pipeline, stages 2-15. Governed failures come back inside the result.
     *
     * @generated from rpc capgate.v1.CapabilityGateway.Invoke
     */
    invoke: {
        methodKind: "unary";
        input: typeof InvokeRequestSchema;
        output: typeof ExecutionResultSchema;
    };
    /**
     * Resume an approved call; re-enters the pipeline at the approval gate (stage 8).
     *
     * @generated from rpc capgate.v1.CapabilityGateway.Resume
     */
    resume: {
        methodKind: "unary";
        input: typeof ResumeRequestSchema;
        output: typeof ExecutionResultSchema;
    };
    /**
     * Dry run of stages 3-7; reveals only what Invoke would.
     *
     * @generated from rpc capgate.v1.CapabilityGateway.Check
     */
    check: {
        methodKind: "unary";
        input: typeof CheckRequestSchema;
        output: typeof CheckResponseSchema;
    };
    /**
     * The requester reads its approval.
     *
     * @generated from rpc capgate.v1.CapabilityGateway.GetApproval
     */
    getApproval: {
        methodKind: "unary";
        input: typeof GetApprovalRequestSchema;
        output: typeof GetApprovalResponseSchema;
    };
    /**
     * Long-poll: answers when the approval leaves PENDING or the wait ends.
     *
     * @generated from rpc capgate.v1.CapabilityGateway.WaitApproval
     */
    waitApproval: {
        methodKind: "unary";
        input: typeof WaitApprovalRequestSchema;
        output: typeof GetApprovalResponseSchema;
    };
}>;
