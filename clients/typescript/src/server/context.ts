/**
 * The agent context an upstream service receives from capgate, verified.
 *
 * The gateway forwards `x-capgate-*` metadata on every upstream call (DESIGN §8): the execution
 * id, capability, surface, idempotency key, correlation id, approval id, W3C `traceparent`, and
 * the actor as a token it signed. Only the token is authoritative; the plain headers that repeat
 * a signed claim must agree with it, or the call is refused.
 */
import { Code, ConnectError, createContextKey, type HandlerContext, type Interceptor } from "@connectrpc/connect";
import { ActorTokenInvalid, type ActorTokenClaims, type ActorTokenVerifier } from "./verify.js";

export const ACTOR_TOKEN_HEADER = "x-capgate-actor-token";

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
  readonly actor: { readonly id: string; readonly issuer: string; readonly kind: string; readonly roles: readonly string[] };
  readonly claims: ActorTokenClaims;
}

/** Why a call carried no acceptable agent context. */
export type AgentContextReason =
  | ActorTokenInvalid["reason"]
  | "missing_token"
  | "header_mismatch"
  | "missing_metadata"; // a token naming no execution, without x-capgate-execution-id/-capability

export class AgentContextInvalid extends Error {
  readonly reason: AgentContextReason;

  constructor(reason: AgentContextReason) {
    super(`capgate agent context refused: ${reason}`);
    this.name = "AgentContextInvalid";
    this.reason = reason;
  }
}

/** Headers as a `Headers` object, or a lookup function (for other server frameworks). */
export type HeaderSource = Headers | ((name: string) => string | undefined);

function getter(headers: HeaderSource): (name: string) => string | undefined {
  if (typeof headers === "function") return headers;
  return (name) => headers.get(name) ?? undefined;
}

/** Verify the actor token in `headers` and build the agent context. */
export function readAgentContext(
  verifier: ActorTokenVerifier,
  headers: HeaderSource,
  options: { now?: number } = {},
): AgentContext {
  const get = getter(headers);
  const token = get(ACTOR_TOKEN_HEADER);
  if (token === undefined || token === "") throw new AgentContextInvalid("missing_token");
  let claims: ActorTokenClaims;
  try {
    claims = verifier.verify(token, options);
  } catch (err) {
    if (err instanceof ActorTokenInvalid) throw new AgentContextInvalid(err.reason);
    throw err;
  }
  const repeated: [string, string | undefined][] = [
    ["x-capgate-surface", claims.surface],
    ["x-capgate-approval-id", claims.approval_id],
  ];
  // A token signed before reuse names its execution: the metadata must agree. A reused token
  // names none: the execution id and capability come from the metadata (both required).
  if (claims.exec_id !== undefined) repeated.push(["x-capgate-execution-id", claims.exec_id]);
  if (claims.cap !== undefined) repeated.push(["x-capgate-capability", claims.cap]);
  for (const [name, signed] of repeated) {
    const plain = get(name);
    if (plain !== undefined && plain !== (signed ?? "")) throw new AgentContextInvalid("header_mismatch");
  }
  const executionId = claims.exec_id || get("x-capgate-execution-id") || "";
  const capabilityId = claims.cap || get("x-capgate-capability") || "";
  if (executionId === "" || capabilityId === "") throw new AgentContextInvalid("missing_metadata");
  return {
    executionId,
    capabilityId,
    surface: claims.surface,
    idempotencyKey: get("x-capgate-idempotency-key") || executionId,
    correlationId: get("x-capgate-correlation-id") ?? "",
    approvalId: claims.approval_id,
    approver: claims.approver,
    traceparent: get("traceparent"),
    actor: { id: claims.sub, issuer: claims.actor_iss, kind: claims.kind, roles: [...claims.roles] },
    claims,
  };
}

/** Where the interceptor leaves the verified context for handlers (`ctx.values`). */
export const agentContextKey = createContextKey<AgentContext | undefined>(undefined, {
  description: "capgate agent context",
});

/**
 * A connect-node server interceptor: verifies every call's agent context and refuses calls
 * without a valid one with UNAUTHENTICATED (the reason class is the message, never token contents).
 */
export function agentContextInterceptor(verifier: ActorTokenVerifier): Interceptor {
  return (next) => async (req) => {
    try {
      req.contextValues.set(agentContextKey, readAgentContext(verifier, req.header));
    } catch (err) {
      if (err instanceof AgentContextInvalid) throw new ConnectError(err.message, Code.Unauthenticated);
      throw err;
    }
    return next(req);
  };
}

/** The verified agent context inside a handler served with `agentContextInterceptor`. */
export function agentContext(ctx: HandlerContext): AgentContext {
  const value = ctx.values.get(agentContextKey);
  if (value === undefined) {
    throw new ConnectError("no capgate agent context (is agentContextInterceptor installed?)", Code.Internal);
  }
  return value;
}
