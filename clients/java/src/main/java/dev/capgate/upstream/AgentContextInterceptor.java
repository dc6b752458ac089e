package dev.capgate.upstream;

import io.grpc.Context;
import io.grpc.Contexts;
import io.grpc.Metadata;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerInterceptor;
import io.grpc.Status;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * Server interceptor for services that capgate calls: verifies the gateway-signed actor token
 * ({@code x-capgate-actor-token}), checks that the x-capgate-* metadata agrees with it, and puts an
 * {@link AgentContext} in the gRPC {@link Context} under {@link AgentContext#KEY}. A call without
 * a valid token is closed with UNAUTHENTICATED before the handler runs.
 *
 * <pre>{@code
 * var verifier = ActorTokenVerifier.fromFile(Path.of("/shared/capgate-jwks.json"), "capgate", "orders");
 * Server server = ServerBuilder.forPort(50051)
 *     .addService(ServerInterceptors.intercept(new OrdersService(), new AgentContextInterceptor(verifier)))
 *     .build();
 * // in a handler: AgentContext ac = AgentContext.current();
 * }</pre>
 */
public final class AgentContextInterceptor implements ServerInterceptor {
  public static final String ACTOR_TOKEN = "x-capgate-actor-token";
  public static final String EXECUTION_ID = "x-capgate-execution-id";
  public static final String CAPABILITY = "x-capgate-capability";
  public static final String SURFACE = "x-capgate-surface";
  public static final String IDEMPOTENCY_KEY = "x-capgate-idempotency-key";
  public static final String CORRELATION_ID = "x-capgate-correlation-id";
  public static final String APPROVAL_ID = "x-capgate-approval-id";
  public static final String TRACEPARENT = "traceparent";

  private final ActorTokenVerifier verifier;
  private final List<String> skipPrefixes;

  public AgentContextInterceptor(ActorTokenVerifier verifier) {
    this(verifier, List.of());
  }

  /**
   * @param skipPrefixes full method names with these prefixes pass without a token and without an
   *     AgentContext (for example "grpc.health.v1.Health/")
   */
  public AgentContextInterceptor(ActorTokenVerifier verifier, List<String> skipPrefixes) {
    this.verifier = Objects.requireNonNull(verifier);
    this.skipPrefixes = List.copyOf(skipPrefixes);
  }

  @Override
  public <Q, R> ServerCall.Listener<Q> interceptCall(
      ServerCall<Q, R> call, Metadata headers, ServerCallHandler<Q, R> next) {
    String method = call.getMethodDescriptor().getFullMethodName();
    if (skipPrefixes.stream().anyMatch(method::startsWith)) {
      return next.startCall(call, headers);
    }
    AgentContext ac;
    try {
      ac = extract(verifier, headers);
    } catch (InvalidActorTokenException e) {
      // The description is a fixed reason class: never token contents.
      call.close(Status.UNAUTHENTICATED.withDescription(e.getMessage()), new Metadata());
      return new ServerCall.Listener<>() {};
    }
    return Contexts.interceptCall(Context.current().withValue(AgentContext.KEY, ac), call, headers, next);
  }

  /** Verifies the token in {@code headers} and builds the AgentContext (for custom interceptors). */
  public static AgentContext extract(ActorTokenVerifier verifier, Metadata headers)
      throws InvalidActorTokenException {
    List<String> tokens = all(headers, ACTOR_TOKEN);
    if (tokens.size() != 1) {
      throw new InvalidActorTokenException("missing");
    }
    ActorClaims c = verifier.verify(tokens.get(0));
    // Metadata is not signed: where it repeats a signed claim it must agree with the token.
    // A token signed before reuse names its execution (the header must be there and agree); a
    // reused token names none, and the execution id and capability come from the metadata.
    String execution = one(headers, EXECUTION_ID);
    String capability = one(headers, CAPABILITY);
    if (c.executionId() != null && !c.executionId().equals(execution)) {
      throw new InvalidActorTokenException("metadata_mismatch");
    }
    if (c.capability() != null && capability != null && !capability.equals(c.capability())) {
      throw new InvalidActorTokenException("metadata_mismatch");
    }
    for (Map.Entry<String, String> e :
        Map.of(SURFACE, c.surface(),
            APPROVAL_ID, c.approvalId() == null ? "" : c.approvalId()).entrySet()) {
      String got = one(headers, e.getKey());
      if (got != null && !got.equals(e.getValue())) {
        throw new InvalidActorTokenException("metadata_mismatch");
      }
    }
    String executionId = c.executionId() != null ? c.executionId() : execution;
    String capabilityId = c.capability() != null ? c.capability() : capability;
    if (executionId == null || executionId.isEmpty() || capabilityId == null || capabilityId.isEmpty()) {
      throw new InvalidActorTokenException("missing_metadata");
    }
    String key = one(headers, IDEMPOTENCY_KEY);
    return new AgentContext(
        new AgentContext.Actor(c.subject(), c.actorIssuer(), c.kind(), c.roles()),
        executionId,
        capabilityId,
        c.surface(),
        key == null || key.isEmpty() ? executionId : key, // the gateway's default (seed 001)
        one(headers, CORRELATION_ID),
        c.approvalId(),
        c.approver(),
        one(headers, TRACEPARENT),
        c);
  }

  private static List<String> all(Metadata headers, String name) {
    Iterable<String> values = headers.getAll(Metadata.Key.of(name, Metadata.ASCII_STRING_MARSHALLER));
    List<String> out = new ArrayList<>();
    if (values != null) {
      values.forEach(out::add);
    }
    return out;
  }

  private static String one(Metadata headers, String name) throws InvalidActorTokenException {
    List<String> values = all(headers, name);
    if (values.size() > 1) {
      throw new InvalidActorTokenException("metadata_mismatch");
    }
    return values.isEmpty() ? null : values.get(0);
  }
}
