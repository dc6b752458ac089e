package dev.capgate.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.capgate.v1.ApprovalRequired;
import dev.capgate.v1.ApprovalStatus;
import dev.capgate.v1.CapabilityError;
import dev.capgate.v1.CapabilityGatewayGrpc;
import dev.capgate.v1.Completed;
import dev.capgate.v1.ErrorCode;
import dev.capgate.v1.ExecutionResult;
import dev.capgate.v1.InvokeRequest;
import dev.capgate.v1.Issue;
import io.grpc.Grpc;
import io.grpc.InsecureServerCredentials;
import io.grpc.Metadata;
import io.grpc.Server;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerInterceptor;
import io.grpc.ServerInterceptors;
import io.grpc.Status;
import io.grpc.stub.StreamObserver;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** The wrapper against an in-process fake gateway: what it sends, how it maps every outcome. */
class ClientUnitTest {
  static final AtomicReference<Metadata> HEADERS = new AtomicReference<>();
  static final AtomicReference<InvokeRequest> REQUEST = new AtomicReference<>();
  static Server server;

  static final class Fake extends CapabilityGatewayGrpc.CapabilityGatewayImplBase {
    @Override
    public void invoke(InvokeRequest req, StreamObserver<ExecutionResult> out) {
      REQUEST.set(req);
      var r = ExecutionResult.newBuilder().setExecutionId("exe-1").setCapabilityId(req.getCapabilityId());
      switch (req.getCapabilityId()) {
        case "completed" -> r.setCompleted(Completed.newBuilder().setOutputJson("{\"n\":1,\"s\":\"x\",\"z\":null}"));
        case "approval" -> r.setApprovalRequired(ApprovalRequired.newBuilder().setApproval(
            dev.capgate.v1.Approval.newBuilder().setId("apr-1").setStatus(ApprovalStatus.APPROVAL_STATUS_PENDING)));
        case "failed" -> r.setFailed(CapabilityError.newBuilder().setCode(ErrorCode.ERROR_CODE_INPUT_INVALID)
            .setStage("input-validation").setMessage("bad")
            .addIssues(Issue.newBuilder().setPath("$.amount").setMessage("must be a number")));
        case "cancelled" -> r.setCancelled(CapabilityError.newBuilder().setCode(ErrorCode.ERROR_CODE_TIMEOUT).setRetryable(true));
        default -> {
          out.onError(Status.UNAUTHENTICATED.withDescription("token expired").asRuntimeException());
          return;
        }
      }
      out.onNext(r.build());
      out.onCompleted();
    }
  }

  @BeforeAll
  static void start() throws Exception {
    ServerInterceptor capture = new ServerInterceptor() {
      @Override
      public <Q, R> ServerCall.Listener<Q> interceptCall(ServerCall<Q, R> call, Metadata h, ServerCallHandler<Q, R> next) {
        HEADERS.set(h);
        return next.startCall(call, h);
      }
    };
    server = Grpc.newServerBuilderForPort(0, InsecureServerCredentials.create())
        .addService(ServerInterceptors.intercept(new Fake(), capture)).build().start();
  }

  @AfterAll
  static void stop() throws Exception {
    server.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
  }

  static CapgateClient.Builder builder() {
    return CapgateClient.builder("127.0.0.1:" + server.getPort());
  }

  static String header(String name) {
    return HEADERS.get().get(Metadata.Key.of(name, Metadata.ASCII_STRING_MARSHALLER));
  }

  @Test
  void bearerTokenAndOptionsAreSent() {
    try (var c = builder().bearerToken("tok").build()) {
      c.invoke("completed", Map.of("amount", 5), InvokeOption.idempotencyKey("k1"),
          InvokeOption.correlationId("c1"), InvokeOption.metadata(Map.of("ticket", "T-1")));
    }
    assertEquals("Bearer tok", header("authorization"));
    InvokeRequest req = REQUEST.get();
    assertEquals("k1", req.getIdempotencyKey());
    assertEquals("c1", req.getCorrelationId());
    assertEquals("T-1", req.getMetadataMap().get("ticket"));
    assertEquals("{\"amount\":5}", req.getInputJson().toStringUtf8());
  }

  @Test
  void trustedLocalActorIsSentAsMetadata() {
    try (var c = builder().trustedLocal("svc", "service", List.of("a", "b")).build()) {
      c.invoke("completed", null);
    }
    assertEquals("svc", header("x-capgate-actor-id"));
    assertEquals("service", header("x-capgate-actor-kind"));
    assertEquals("a,b", header("x-capgate-actor-roles"));
    assertNull(header("authorization"));
    assertEquals("{}", REQUEST.get().getInputJson().toStringUtf8());
  }

  @Test
  void bearerAndTrustedLocalAreExclusive() {
    assertThrows(IllegalStateException.class, () -> builder().bearerToken("t").trustedLocal("x", "user", List.of()).build());
  }

  @Test
  void everyOutcomeMapsToItsRecord() {
    try (var c = builder().build()) {
      Result done = c.invoke("completed", null);
      var completed = assertInstanceOf(Outcome.Completed.class, done.outcome());
      assertEquals(1, completed.output().get("n"));
      assertTrue(completed.output().containsKey("z"), "JSON null members are kept");
      assertNull(done.failure());

      var approval = assertInstanceOf(Outcome.ApprovalRequired.class, c.invoke("approval", null).outcome());
      assertEquals("apr-1", approval.approval().id());
      assertTrue(approval.approval().pending());

      Result failed = c.invoke("failed", null);
      var f = assertInstanceOf(Outcome.Failed.class, failed.outcome()).failure();
      assertEquals("$.amount", f.issues().get(0).path());
      var e = assertThrows(CapgateException.class, failed::output);
      assertEquals(ErrorCode.ERROR_CODE_INPUT_INVALID, e.getCode());
      assertEquals("capgate: INPUT_INVALID (input-validation): bad; $.amount must be a number", e.getMessage());
      assertNull(e.getStatus());

      var cancelled = assertInstanceOf(Outcome.Cancelled.class, c.invoke("cancelled", null).outcome());
      assertEquals(ErrorCode.ERROR_CODE_TIMEOUT, cancelled.failure().code());
      assertTrue(cancelled.failure().retryable());
    }
  }

  @Test
  void rateLimitedCarriesRetryAfter() {
    var error =
        CapabilityError.newBuilder()
            .setCode(ErrorCode.ERROR_CODE_RATE_LIMITED)
            .setStage("limits")
            .setRetryable(true)
            .setRetryAfter(com.google.protobuf.Duration.newBuilder().setSeconds(2).setNanos(500_000_000))
            .build();
    var failure = Failure.fromProto(error);
    assertEquals(ErrorCode.ERROR_CODE_RATE_LIMITED, failure.code());
    assertTrue(failure.retryable());
    assertEquals(java.time.Duration.ofMillis(2500), failure.retryAfter());
    assertNull(Failure.fromProto(CapabilityError.getDefaultInstance()).retryAfter());
  }

  @Test
  void transportUnauthenticatedKeepsTheCode() {
    try (var c = builder().build()) {
      var e = assertThrows(CapgateException.class, () -> c.invoke("unauthenticated", null));
      assertEquals(ErrorCode.ERROR_CODE_UNAUTHENTICATED, e.getCode());
      assertEquals(Status.Code.UNAUTHENTICATED, e.getStatus());
    }
  }
}
