import { timestampDate } from "@bufbuild/protobuf/wkt";
import { ApprovalStatus as PbApprovalStatus, ExecutionState as PbExecutionState, } from "./gen/capgate/v1/types_pb.js";
import { CapgateError, enumName } from "./errors.js";
export const defaultJson = {
    stringify: (value) => JSON.stringify(value),
    parse: (text) => JSON.parse(text),
};
/** The output of a completed outcome; otherwise throws its `CapgateError` (an approval still
 * required throws code APPROVAL_PENDING carrying the approval id). */
export function unwrap(outcome) {
    switch (outcome.kind) {
        case "completed":
            return outcome.output;
        case "approval_required":
            throw new CapgateError({
                code: "APPROVAL_PENDING",
                stage: "approval",
                message: outcome.approval.message || `approval ${outcome.approval.id} is required`,
                retryable: false,
                exposeToModel: true,
                issues: [],
                executedBeforeFailure: false,
                executionState: outcome.executionState,
            }, { executionId: outcome.executionId });
        case "failed":
        case "cancelled":
            throw outcome.error;
    }
}
function durationMs(d) {
    return d === undefined ? undefined : Number(d.seconds) * 1000 + d.nanos / 1e6;
}
function date(ts) {
    return ts === undefined ? undefined : timestampDate(ts);
}
export function actorFromProto(a) {
    return a === undefined ? undefined : { id: a.id, issuer: a.issuer, kind: a.kind, roles: [...a.roles] };
}
export function approvalFromProto(a, json = defaultJson) {
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
export function descriptorFromProto(d, json = defaultJson) {
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
export function outcomeFromProto(r, json = defaultJson) {
    const info = {
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
            return { ...info, kind: "completed", output: json.parse(o.value.outputJson || "null") };
        case "approvalRequired":
            if (o.value.approval === undefined)
                break;
            return { ...info, kind: "approval_required", approval: approvalFromProto(o.value.approval, json) };
        case "failed":
            return { ...info, kind: "failed", error: CapgateError.fromProto(o.value, r.executionId) };
        case "cancelled":
            return { ...info, kind: "cancelled", error: CapgateError.fromProto(o.value, r.executionId) };
        case undefined:
            break;
    }
    // A gateway always sets the outcome; an envelope without one is a protocol fault.
    throw new CapgateError({
        code: "UNSPECIFIED",
        stage: "transport",
        message: "the gateway answered an envelope without an outcome",
        retryable: false,
        exposeToModel: false,
        issues: [],
        executedBeforeFailure: false,
        executionState: info.executionState,
    }, { executionId: r.executionId });
}
//# sourceMappingURL=envelope.js.map