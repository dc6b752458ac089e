import type { GenFile, GenMessage, GenService } from "@bufbuild/protobuf/codegenv2";
import type { Actor, Approval } from "./types_pb.js";
import type { Message } from "@bufbuild/protobuf";
/**
 * Describes the file capgate/v1/procedure.proto.
 */
export declare const file_capgate_v1_procedure: GenFile;
/**
 * @generated from message capgate.v1.ProcedureInvokeRequest
 */
export type ProcedureInvokeRequest = Message<"capgate.v1.ProcedureInvokeRequest"> & {
    /**
     * @generated from field: string capability_id = 1;
     */
    capabilityId: string;
    /**
     * UTF-8 JSON text of the validated input.
     *
     * @generated from field: string input_json = 2;
     */
    inputJson: string;
};
/**
 * Describes the message capgate.v1.ProcedureInvokeRequest.
 * Use `create(ProcedureInvokeRequestSchema)` to create a new message.
 */
export declare const ProcedureInvokeRequestSchema: GenMessage<ProcedureInvokeRequest>;
/**
 * @generated from message capgate.v1.ProcedureInvokeResponse
 */
export type ProcedureInvokeResponse = Message<"capgate.v1.ProcedureInvokeResponse"> & {
    /**
     * UTF-8 JSON text of the output.
     *
     * @generated from field: string output_json = 1;
     */
    outputJson: string;
};
/**
 * Describes the message capgate.v1.ProcedureInvokeResponse.
 * Use `create(ProcedureInvokeResponseSchema)` to create a new message.
 */
export declare const ProcedureInvokeResponseSchema: GenMessage<ProcedureInvokeResponse>;
/**
 * ContractError is a status detail an upstream attaches for a declared, intentional
 * failure the model may act on; its message is passed to the caller.
 *
 * @generated from message capgate.v1.ContractError
 */
export type ContractError = Message<"capgate.v1.ContractError"> & {
    /**
     * @generated from field: string reason = 1;
     */
    reason: string;
    /**
     * @generated from field: string message = 2;
     */
    message: string;
};
/**
 * Describes the message capgate.v1.ContractError.
 * Use `create(ContractErrorSchema)` to create a new message.
 */
export declare const ContractErrorSchema: GenMessage<ContractError>;
/**
 * @generated from message capgate.v1.ApproverDecideRequest
 */
export type ApproverDecideRequest = Message<"capgate.v1.ApproverDecideRequest"> & {
    /**
     * @generated from field: capgate.v1.Approval approval = 1;
     */
    approval?: Approval | undefined;
    /**
     * The input after redact.approval_input.
     *
     * @generated from field: string input_json = 2;
     */
    inputJson: string;
};
/**
 * Describes the message capgate.v1.ApproverDecideRequest.
 * Use `create(ApproverDecideRequestSchema)` to create a new message.
 */
export declare const ApproverDecideRequestSchema: GenMessage<ApproverDecideRequest>;
/**
 * @generated from message capgate.v1.ApproverDecideResponse
 */
export type ApproverDecideResponse = Message<"capgate.v1.ApproverDecideResponse"> & {
    /**
     * @generated from field: bool approved = 1;
     */
    approved: boolean;
    /**
     * @generated from field: capgate.v1.Actor approver = 2;
     */
    approver?: Actor | undefined;
    /**
     * @generated from field: string note = 3;
     */
    note: string;
};
/**
 * Describes the message capgate.v1.ApproverDecideResponse.
 * Use `create(ApproverDecideResponseSchema)` to create a new message.
 */
export declare const ApproverDecideResponseSchema: GenMessage<ApproverDecideResponse>;
/**
 * Procedure is the JSON-native contract for services written for the gateway.
 * The agent context (execution id, signed actor token, approval, idempotency key,
 * traceparent) travels in x-capgate-* metadata.
 *
 * @generated from service capgate.v1.Procedure
 */
export declare const Procedure: GenService<{
    /**
     * @generated from rpc capgate.v1.Procedure.Invoke
     */
    invoke: {
        methodKind: "unary";
        input: typeof ProcedureInvokeRequestSchema;
        output: typeof ProcedureInvokeResponseSchema;
    };
}>;
/**
 * Approver is implemented by services that decide approvals inline (synchronously).
 * No answer within the deadline or an error is a rejection (fail closed).
 *
 * @generated from service capgate.v1.Approver
 */
export declare const Approver: GenService<{
    /**
     * @generated from rpc capgate.v1.Approver.Decide
     */
    decide: {
        methodKind: "unary";
        input: typeof ApproverDecideRequestSchema;
        output: typeof ApproverDecideResponseSchema;
    };
}>;
