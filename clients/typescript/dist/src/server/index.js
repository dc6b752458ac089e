/** Server-side helpers for upstream services called by capgate: `capgate-client/server`. */
export { ActorTokenInvalid, ActorTokenVerifier, MAX_LIFETIME_S, TOKEN_TYPE, } from "./verify.js";
export { ACTOR_TOKEN_HEADER, AgentContextInvalid, agentContext, agentContextInterceptor, agentContextKey, readAgentContext, } from "./context.js";
//# sourceMappingURL=index.js.map