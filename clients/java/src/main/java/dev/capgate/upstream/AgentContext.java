package dev.capgate.upstream;

import io.grpc.Context;
import java.util.List;

/**
 * What the gateway tells an upstream about the call it forwards, verified by {@link
 * AgentContextInterceptor}. Read it in a handler with {@link #current()}.
 *
 * @param executionId the same for every retry of one execution
 * @param idempotencyKey the caller's key, else the execution id: deduplicate effects on it
 * @param approvalId set on a resumed, approved execution (else null)
 * @param approver who approved it (else null)
 */
public record AgentContext(
    Actor actor,
    String executionId,
    String capability,
    String surface,
    String idempotencyKey,
    String correlationId,
    String approvalId,
    String approver,
    String traceparent,
    ActorClaims claims) {

  /** The identity the gateway authenticated; identity is the pair (issuer, id). */
  public record Actor(String id, String issuer, String kind, List<String> roles) {
    public Actor {
      roles = List.copyOf(roles);
    }

    public boolean hasRole(String role) {
      return roles.contains(role);
    }
  }

  /** The gRPC context key the interceptor stores the AgentContext under. */
  public static final Context.Key<AgentContext> KEY = Context.key("capgate-agent-context");

  /** The AgentContext of the current call, or null outside an intercepted call. */
  public static AgentContext current() {
    return KEY.get();
  }
}
