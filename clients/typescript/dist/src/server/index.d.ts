/** Server-side helpers for upstream services called by capgate: `capgate-client/server`. */
export { ActorTokenInvalid, ActorTokenVerifier, MAX_LIFETIME_S, TOKEN_TYPE, type ActorTokenClaims, type ActorTokenReason, type Jwks, type VerifierOptions, } from "./verify.js";
export { ACTOR_TOKEN_HEADER, AgentContextInvalid, agentContext, agentContextInterceptor, agentContextKey, readAgentContext, type AgentContext, type AgentContextReason, type HeaderSource, } from "./context.js";
