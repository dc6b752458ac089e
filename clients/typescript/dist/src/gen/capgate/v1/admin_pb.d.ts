import type { GenEnum, GenFile, GenMessage, GenService } from "@bufbuild/protobuf/codegenv2";
import type { CheckResponseSchema } from "./gateway_pb.js";
import type { Actor, Approval, ApprovalStatus, CapabilityError } from "./types_pb.js";
import type { Message } from "@bufbuild/protobuf";
/**
 * Describes the file capgate/v1/admin.proto.
 */
export declare const file_capgate_v1_admin: GenFile;
/**
 * @generated from message capgate.v1.ListApprovalsRequest
 */
export type ListApprovalsRequest = Message<"capgate.v1.ListApprovalsRequest"> & {
    /**
     * Defaults to PENDING.
     *
     * @generated from field: repeated capgate.v1.ApprovalStatus statuses = 1;
     */
    statuses: ApprovalStatus[];
    /**
     * @generated from field: string capability_id = 2;
     */
    capabilityId: string;
    /**
     * @generated from field: string requester_id = 3;
     */
    requesterId: string;
    /**
     * @generated from field: int32 page_size = 4;
     */
    pageSize: number;
    /**
     * @generated from field: string page_token = 5;
     */
    pageToken: string;
};
/**
 * Describes the message capgate.v1.ListApprovalsRequest.
 * Use `create(ListApprovalsRequestSchema)` to create a new message.
 */
export declare const ListApprovalsRequestSchema: GenMessage<ListApprovalsRequest>;
/**
 * @generated from message capgate.v1.ListApprovalsResponse
 */
export type ListApprovalsResponse = Message<"capgate.v1.ListApprovalsResponse"> & {
    /**
     * @generated from field: repeated capgate.v1.Approval approvals = 1;
     */
    approvals: Approval[];
    /**
     * @generated from field: string next_page_token = 2;
     */
    nextPageToken: string;
    /**
     * @generated from field: capgate.v1.CapabilityError error = 3;
     */
    error?: CapabilityError | undefined;
};
/**
 * Describes the message capgate.v1.ListApprovalsResponse.
 * Use `create(ListApprovalsResponseSchema)` to create a new message.
 */
export declare const ListApprovalsResponseSchema: GenMessage<ListApprovalsResponse>;
/**
 * @generated from message capgate.v1.DecideApprovalRequest
 */
export type DecideApprovalRequest = Message<"capgate.v1.DecideApprovalRequest"> & {
    /**
     * @generated from field: string approval_id = 1;
     */
    approvalId: string;
    /**
     * @generated from field: capgate.v1.Verdict verdict = 2;
     */
    verdict: Verdict;
    /**
     * @generated from field: string note = 3;
     */
    note: string;
    /**
     * The input hash the approver saw; a mismatch fails.
     *
     * @generated from field: string input_hash = 4;
     */
    inputHash: string;
    /**
     * Set only by an allow-listed inbox identity deciding for an authenticated human.
     *
     * @generated from field: capgate.v1.Actor on_behalf_of = 5;
     */
    onBehalfOf?: Actor | undefined;
};
/**
 * Describes the message capgate.v1.DecideApprovalRequest.
 * Use `create(DecideApprovalRequestSchema)` to create a new message.
 */
export declare const DecideApprovalRequestSchema: GenMessage<DecideApprovalRequest>;
/**
 * @generated from message capgate.v1.DecideApprovalResponse
 */
export type DecideApprovalResponse = Message<"capgate.v1.DecideApprovalResponse"> & {
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
 * Describes the message capgate.v1.DecideApprovalResponse.
 * Use `create(DecideApprovalResponseSchema)` to create a new message.
 */
export declare const DecideApprovalResponseSchema: GenMessage<DecideApprovalResponse>;
/**
 * @generated from message capgate.v1.WatchApprovalsRequest
 */
export type WatchApprovalsRequest = Message<"capgate.v1.WatchApprovalsRequest"> & {
    /**
     * Stream id to continue after; empty = only new events.
     *
     * @generated from field: string after_event_id = 1;
     */
    afterEventId: string;
};
/**
 * Describes the message capgate.v1.WatchApprovalsRequest.
 * Use `create(WatchApprovalsRequestSchema)` to create a new message.
 */
export declare const WatchApprovalsRequestSchema: GenMessage<WatchApprovalsRequest>;
/**
 * @generated from message capgate.v1.ApprovalEvent
 */
export type ApprovalEvent = Message<"capgate.v1.ApprovalEvent"> & {
    /**
     * @generated from field: string event_id = 1;
     */
    eventId: string;
    /**
     * requested, approved, rejected, expired, consumed, executed.
     *
     * @generated from field: string type = 2;
     */
    type: string;
    /**
     * @generated from field: capgate.v1.Approval approval = 3;
     */
    approval?: Approval | undefined;
};
/**
 * Describes the message capgate.v1.ApprovalEvent.
 * Use `create(ApprovalEventSchema)` to create a new message.
 */
export declare const ApprovalEventSchema: GenMessage<ApprovalEvent>;
/**
 * @generated from message capgate.v1.ExplainRequest
 */
export type ExplainRequest = Message<"capgate.v1.ExplainRequest"> & {
    /**
     * @generated from field: string capability_id = 1;
     */
    capabilityId: string;
    /**
     * @generated from field: bytes input_json = 2;
     */
    inputJson: Uint8Array;
    /**
     * @generated from field: string surface = 3;
     */
    surface: string;
    /**
     * @generated from field: capgate.v1.Actor actor = 4;
     */
    actor?: Actor | undefined;
    /**
     * invocation (default), discovery or execution.
     *
     * @generated from field: string phase = 5;
     */
    phase: string;
};
/**
 * Describes the message capgate.v1.ExplainRequest.
 * Use `create(ExplainRequestSchema)` to create a new message.
 */
export declare const ExplainRequestSchema: GenMessage<ExplainRequest>;
/**
 * @generated from enum capgate.v1.Verdict
 */
export declare enum Verdict {
    /**
     * @generated from enum value: VERDICT_UNSPECIFIED = 0;
     */
    UNSPECIFIED = 0,
    /**
     * @generated from enum value: VERDICT_APPROVE = 1;
     */
    APPROVE = 1,
    /**
     * @generated from enum value: VERDICT_REJECT = 2;
     */
    REJECT = 2
}
/**
 * Describes the enum capgate.v1.Verdict.
 */
export declare const VerdictSchema: GenEnum<Verdict>;
/**
 * ApprovalAdmin is for approvers. It is served only on admin listeners, with their own
 * credentials. Deciding executes nothing.
 *
 * @generated from service capgate.v1.ApprovalAdmin
 */
export declare const ApprovalAdmin: GenService<{
    /**
     * @generated from rpc capgate.v1.ApprovalAdmin.ListApprovals
     */
    listApprovals: {
        methodKind: "unary";
        input: typeof ListApprovalsRequestSchema;
        output: typeof ListApprovalsResponseSchema;
    };
    /**
     * @generated from rpc capgate.v1.ApprovalAdmin.DecideApproval
     */
    decideApproval: {
        methodKind: "unary";
        input: typeof DecideApprovalRequestSchema;
        output: typeof DecideApprovalResponseSchema;
    };
    /**
     * Resumable stream of approval events (from after_event_id); a trimmed id answers
     * OUT_OF_RANGE so the client re-lists.
     *
     * @generated from rpc capgate.v1.ApprovalAdmin.WatchApprovals
     */
    watchApprovals: {
        methodKind: "server_streaming";
        input: typeof WatchApprovalsRequestSchema;
        output: typeof ApprovalEventSchema;
    };
}>;
/**
 * PolicyAdmin explains decisions with every policy's stance; admin listeners only.
 *
 * @generated from service capgate.v1.PolicyAdmin
 */
export declare const PolicyAdmin: GenService<{
    /**
     * @generated from rpc capgate.v1.PolicyAdmin.Explain
     */
    explain: {
        methodKind: "unary";
        input: typeof ExplainRequestSchema;
        output: typeof CheckResponseSchema;
    };
}>;
