package dev.capgate.client;

import com.google.protobuf.ByteString;
import dev.capgate.v1.CapabilityGatewayGrpc;
import dev.capgate.v1.DescribeRequest;
import dev.capgate.v1.GetApprovalRequest;
import dev.capgate.v1.GetApprovalResponse;
import dev.capgate.v1.InvokeRequest;
import dev.capgate.v1.ResumeRequest;
import dev.capgate.v1.WaitApprovalRequest;
import io.grpc.Channel;
import io.grpc.ChannelCredentials;
import io.grpc.ClientInterceptors;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.StatusRuntimeException;
import io.grpc.TlsChannelCredentials;
import io.grpc.stub.MetadataUtils;
import java.time.Duration;
import java.time.Instant;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * A thin client for the capgate CapabilityGateway: describe, invoke, resume and
 * waitForApproval over the generated stubs, with JSON inputs and outputs as maps and the envelope
 * as a sealed {@link Outcome}.
 *
 * <pre>{@code
 * try (var client = CapgateClient.builder("127.0.0.1:7443").bearerToken(jwt).build()) {
 *   Result r = client.withDeadlineAfter(5, TimeUnit.SECONDS)
 *       .invoke("orders.get", Map.of("order_id", "o-1001"));
 *   if (r.outcome() instanceof Outcome.Completed done) System.out.println(done.output());
 * }
 * }</pre>
 *
 * <p>Governed failures come back in the {@link Result}; transport faults and cancellations throw
 * {@link CapgateException}. Cancel a call by cancelling the gRPC {@code Context} it runs in.
 */
public final class CapgateClient implements AutoCloseable {
  /** The gateway caps one WaitApproval long-poll at 30 s. */
  private static final Duration MAX_WAIT = Duration.ofSeconds(30);

  private final ManagedChannel managed;
  private final Channel channel;
  private final long deadlineNanos; // relative deadline per call; 0 = none

  private CapgateClient(ManagedChannel managed, Channel channel, long deadlineNanos) {
    this.managed = managed;
    this.channel = channel;
    this.deadlineNanos = deadlineNanos;
  }

  /** A builder for "host:port" or "unix:///absolute/path.sock". */
  public static Builder builder(String target) {
    return new Builder(target);
  }

  /**
   * A view of this client whose calls each get this deadline (the same connection). A call past
   * its deadline throws CapgateException TIMEOUT, unless the gateway answers first with a
   * governed TIMEOUT outcome.
   */
  public CapgateClient withDeadlineAfter(long duration, TimeUnit unit) {
    return new CapgateClient(managed, channel, unit.toNanos(duration));
  }

  /**
   * The authenticated channel, for the other services of the same listener, for example {@code
   * ApprovalAdminGrpc.newBlockingStub(admin.channel())} on an admin listener.
   */
  public Channel channel() {
    return channel;
  }

  private CapabilityGatewayGrpc.CapabilityGatewayBlockingStub stub() {
    var stub = CapabilityGatewayGrpc.newBlockingStub(channel);
    return deadlineNanos > 0 ? stub.withDeadlineAfter(deadlineNanos, TimeUnit.NANOSECONDS) : stub;
  }

  /** The capabilities this caller may see; {@code ids} filters (none = all). */
  public Capability.Catalog describe(String... ids) {
    var resp = call(() -> stub().describe(DescribeRequest.newBuilder().addAllCapabilityIds(Arrays.asList(ids)).build()));
    List<Capability> caps =
        resp.getCapabilitiesList().stream()
            .map(
                d ->
                    new Capability(
                        d.getId(),
                        d.getDescription(),
                        Json.decodeObject(d.getInputSchemaJson()),
                        d.getSideEffect(),
                        d.getRisk(),
                        d.getTagsList(),
                        d.getRequiresApproval()))
            .toList();
    return new Capability.Catalog(caps, resp.getRevision());
  }

  /** Runs a capability with {@code input} (null means {}), encoded as JSON with Jackson. */
  public Result invoke(String capabilityId, Map<String, ?> input, InvokeOption... options) {
    return invokeJson(capabilityId, Json.encode(input == null ? Map.of() : input), options);
  }

  /** {@link #invoke} with the input already encoded as UTF-8 JSON. */
  public Result invokeJson(String capabilityId, byte[] inputJson, InvokeOption... options) {
    var b = InvokeRequest.newBuilder().setCapabilityId(capabilityId).setInputJson(ByteString.copyFrom(inputJson));
    for (InvokeOption o : options) {
      if (o instanceof InvokeOption.IdempotencyKey k) {
        b.setIdempotencyKey(k.key());
      } else if (o instanceof InvokeOption.CorrelationId c) {
        b.setCorrelationId(c.id());
      } else if (o instanceof InvokeOption.Metadata m) {
        b.putAllMetadata(m.values());
      }
    }
    return Result.fromProto(call(() -> stub().invoke(b.build())));
  }

  /**
   * Executes an approved call. Only the original requester may resume; repeating it returns the
   * stored envelope. Accepts a correlation id option.
   */
  public Result resume(String approvalId, InvokeOption... options) {
    var b = ResumeRequest.newBuilder().setApprovalId(approvalId);
    for (InvokeOption o : options) {
      if (!(o instanceof InvokeOption.CorrelationId c)) {
        throw new IllegalArgumentException("resume takes only a correlation id");
      }
      b.setCorrelationId(c.id());
    }
    return Result.fromProto(call(() -> stub().resume(b.build())));
  }

  /** Reads one of the caller's own approvals. */
  public Approval getApproval(String approvalId) {
    return approval(call(() -> stub().getApproval(GetApprovalRequest.newBuilder().setApprovalId(approvalId).build())));
  }

  /**
   * Long-polls until the approval leaves PENDING or {@code timeout} passes. A decided approval is
   * returned whatever the decision (check {@link Approval#approved()}); still pending at the end
   * throws CapgateException APPROVAL_PENDING.
   */
  public Approval waitForApproval(String approvalId, Duration timeout) {
    Instant end = Instant.now().plus(timeout);
    while (true) {
      Duration left = Duration.between(Instant.now(), end);
      if (left.isNegative() || left.isZero()) {
        Approval last = getApproval(approvalId);
        if (last.pending()) {
          throw new CapgateException(pendingFailure());
        }
        return last;
      }
      Duration wait = left.compareTo(MAX_WAIT) < 0 ? left : MAX_WAIT;
      var req =
          WaitApprovalRequest.newBuilder()
              .setApprovalId(approvalId)
              .setTimeout(com.google.protobuf.Duration.newBuilder().setSeconds(wait.getSeconds()).setNanos(wait.getNano()))
              .build();
      // The RPC deadline leaves the gateway time to answer "still pending" itself.
      var stub = CapabilityGatewayGrpc.newBlockingStub(channel).withDeadlineAfter(wait.toMillis() + 5_000, TimeUnit.MILLISECONDS);
      Approval a = approval(call(() -> stub.waitApproval(req)));
      if (!a.pending()) {
        return a;
      }
    }
  }

  private static Failure pendingFailure() {
    return new Failure(
        dev.capgate.v1.ErrorCode.ERROR_CODE_APPROVAL_PENDING,
        "approval",
        "the approval is still pending",
        true,
        true,
        List.of(),
        false,
        dev.capgate.v1.ExecutionState.EXECUTION_STATE_NOT_STARTED);
  }

  private static Approval approval(GetApprovalResponse resp) {
    if (resp.hasError()) {
      throw new CapgateException(Failure.fromProto(resp.getError()));
    }
    return Approval.fromProto(resp.getApproval());
  }

  private interface Rpc<T> {
    T run();
  }

  private static <T> T call(Rpc<T> rpc) {
    try {
      return rpc.run();
    } catch (StatusRuntimeException e) {
      throw CapgateException.fromStatus(e);
    }
  }

  /** Shuts the connection down (views from withDeadlineAfter share it). */
  @Override
  public void close() {
    managed.shutdown();
    try {
      if (!managed.awaitTermination(5, TimeUnit.SECONDS)) {
        managed.shutdownNow();
      }
    } catch (InterruptedException e) {
      managed.shutdownNow();
      Thread.currentThread().interrupt();
    }
  }

  /** Connection settings: TLS optional, a bearer JWT or a trusted-local actor. */
  public static final class Builder {
    private final String target;
    private ChannelCredentials credentials = InsecureChannelCredentials.create();
    private String bearer;
    private String actorId;
    private String actorKind;
    private List<String> actorRoles = List.of();

    private Builder(String target) {
      this.target = target;
    }

    /** TLS with the JVM's trust store. Without TLS the connection is plaintext: loopback or unix sockets only. */
    public Builder useTls() {
      return credentials(TlsChannelCredentials.create());
    }

    /** Any channel credentials, for example TlsChannelCredentials with a client certificate (mTLS). */
    public Builder credentials(ChannelCredentials credentials) {
      this.credentials = credentials;
      return this;
    }

    /** Sends "authorization: Bearer token" on every call (jwt listeners). */
    public Builder bearerToken(String token) {
      this.bearer = token;
      return this;
    }

    /**
     * Asserts the actor with x-capgate-actor-* metadata (trusted-local listeners, unix sockets only).
     *
     * @param kind user, service, agent or anonymous
     */
    public Builder trustedLocal(String id, String kind, List<String> roles) {
      this.actorId = id;
      this.actorKind = kind;
      this.actorRoles = List.copyOf(roles);
      return this;
    }

    public CapgateClient build() {
      if (bearer != null && actorId != null) {
        throw new IllegalStateException("choose a bearer token or a trusted-local actor, not both");
      }
      Metadata md = new Metadata();
      if (bearer != null) {
        md.put(key("authorization"), "Bearer " + bearer);
      }
      if (actorId != null) {
        md.put(key("x-capgate-actor-id"), actorId);
        if (actorKind != null && !actorKind.isEmpty()) {
          md.put(key("x-capgate-actor-kind"), actorKind);
        }
        if (!actorRoles.isEmpty()) {
          md.put(key("x-capgate-actor-roles"), String.join(",", actorRoles));
        }
      }
      ManagedChannel managed = Grpc.newChannelBuilder(target, credentials).build();
      Channel channel =
          ClientInterceptors.intercept(managed, MetadataUtils.newAttachHeadersInterceptor(md));
      return new CapgateClient(managed, channel, 0);
    }

    private static Metadata.Key<String> key(String name) {
      return Metadata.Key.of(name, Metadata.ASCII_STRING_MARSHALLER);
    }
  }
}
