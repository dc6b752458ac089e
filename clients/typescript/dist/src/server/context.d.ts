/**
 * The agent context an upstream service receives from capgate, verified.
 *
 * The gateway forwards `x-capgate-*` metadata on every upstream call (DESIGN §8): the execution
 * id, capability, surface, idempotency key, correlation id, approval id, W3C `traceparent`, and
 * the actor as a token it signed. Only the token is authoritative; the plain headers that repeat
 * a signed claim must agree with it, or the call is refused.
 */
import { type HandlerContext, type Interceptor } from "@connectrpc/connect";
import { ActorTokenInvalid, type ActorTokenClaims, type ActorTokenVerifier } from "./verify.js";
export declare const ACTOR_TOKEN_HEADER = "x-capgate-actor-token";
/** Who the upstream is serving, and for which governed execution. */
export interface AgentContext {
    readonly executionId: string;
    readonly capabilityId: string;
    readonly surface: string;
    /** The caller's idempotency key, else the execution id (seed 001). */
    readonly idempotencyKey: string;
    readonly correlationId: string;
    /** Set when the call runs an approved request. */
    readonly approvalId: string | undefined;
    readonly approver: string | undefined;
    readonly traceparent: string | undefined;
    /** The actor; identity is the pair (issuer, id). */
    readonly actor: {
        readonly id: string;
        readonly issuer: string;
        readonly kind: string;
        readonly roles: readonly string[];
    };
    readonly claims: ActorTokenClaims;
}
/** Why a call carried no acceptable agent context. */
export type AgentContextReason = ActorTokenInvalid["reason"] | "missing_token" | "header_mismatch";
export declare class AgentContextInvalid extends Error {
    readonly reason: AgentContextReason;
    constructor(reason: AgentContextReason);
}
/** Headers as a `Headers` object, or a lookup function (for other server frameworks). */
export type HeaderSource = Headers | ((name: string) => string | undefined);
/** Verify the actor token in `headers` and build the agent context. */
export declare function readAgentContext(verifier: ActorTokenVerifier, headers: HeaderSource, options?: {
    now?: number;
}): AgentContext;
/** Where the interceptor leaves the verified context for handlers (`ctx.values`). */
export declare const agentContextKey: import("@connectrpc/connect").ContextKey<AgentContext | undefined>;
/**
 * A connect-node server interceptor: verifies every call's agent context and refuses calls
 * without a valid one with UNAUTHENTICATED (the reason class is the message, never token contents).
 */
export declare function agentContextInterceptor(verifier: ActorTokenVerifier): Interceptor;
/** The verified agent context inside a handler served with `agentContextInterceptor`. */
export declare function agentContext(ctx: HandlerContext): AgentContext;
