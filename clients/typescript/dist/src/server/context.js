/**
 * The agent context an upstream service receives from capgate, verified.
 *
 * The gateway forwards `x-capgate-*` metadata on every upstream call (DESIGN §8): the execution
 * id, capability, surface, idempotency key, correlation id, approval id, W3C `traceparent`, and
 * the actor as a token it signed. Only the token is authoritative; the plain headers that repeat
 * a signed claim must agree with it, or the call is refused.
 */
import { Code, ConnectError, createContextKey } from "@connectrpc/connect";
import { ActorTokenInvalid } from "./verify.js";
export const ACTOR_TOKEN_HEADER = "x-capgate-actor-token";
export class AgentContextInvalid extends Error {
    reason;
    constructor(reason) {
        super(`capgate agent context refused: ${reason}`);
        this.name = "AgentContextInvalid";
        this.reason = reason;
    }
}
function getter(headers) {
    if (typeof headers === "function")
        return headers;
    return (name) => headers.get(name) ?? undefined;
}
/** Verify the actor token in `headers` and build the agent context. */
export function readAgentContext(verifier, headers, options = {}) {
    const get = getter(headers);
    const token = get(ACTOR_TOKEN_HEADER);
    if (token === undefined || token === "")
        throw new AgentContextInvalid("missing_token");
    let claims;
    try {
        claims = verifier.verify(token, options);
    }
    catch (err) {
        if (err instanceof ActorTokenInvalid)
            throw new AgentContextInvalid(err.reason);
        throw err;
    }
    const repeated = [
        ["x-capgate-execution-id", claims.exec_id],
        ["x-capgate-capability", claims.cap],
        ["x-capgate-surface", claims.surface],
        ["x-capgate-approval-id", claims.approval_id],
    ];
    for (const [name, signed] of repeated) {
        const plain = get(name);
        if (plain !== undefined && plain !== (signed ?? ""))
            throw new AgentContextInvalid("header_mismatch");
    }
    return {
        executionId: claims.exec_id,
        capabilityId: claims.cap,
        surface: claims.surface,
        idempotencyKey: get("x-capgate-idempotency-key") || claims.exec_id,
        correlationId: get("x-capgate-correlation-id") ?? "",
        approvalId: claims.approval_id,
        approver: claims.approver,
        traceparent: get("traceparent"),
        actor: { id: claims.sub, issuer: claims.actor_iss, kind: claims.kind, roles: [...claims.roles] },
        claims,
    };
}
/** Where the interceptor leaves the verified context for handlers (`ctx.values`). */
export const agentContextKey = createContextKey(undefined, {
    description: "capgate agent context",
});
/**
 * A connect-node server interceptor: verifies every call's agent context and refuses calls
 * without a valid one with UNAUTHENTICATED (the reason class is the message, never token contents).
 */
export function agentContextInterceptor(verifier) {
    return (next) => async (req) => {
        try {
            req.contextValues.set(agentContextKey, readAgentContext(verifier, req.header));
        }
        catch (err) {
            if (err instanceof AgentContextInvalid)
                throw new ConnectError(err.message, Code.Unauthenticated);
            throw err;
        }
        return next(req);
    };
}
/** The verified agent context inside a handler served with `agentContextInterceptor`. */
export function agentContext(ctx) {
    const value = ctx.values.get(agentContextKey);
    if (value === undefined) {
        throw new ConnectError("no capgate agent context (is agentContextInterceptor installed?)", Code.Internal);
    }
    return value;
}
//# sourceMappingURL=context.js.map