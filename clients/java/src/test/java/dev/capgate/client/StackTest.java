package dev.capgate.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.capgate.v1.ApprovalAdminGrpc;
import dev.capgate.v1.ApprovalStatus;
import dev.capgate.v1.DecideApprovalRequest;
import dev.capgate.v1.ErrorCode;
import dev.capgate.v1.ExecutionState;
import dev.capgate.v1.Verdict;
import io.grpc.Context;
import io.grpc.Status;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * Against the real shared stack: the gateway, the example upstream and Redis. Skipped, saying
 * why, when .run/stack.json is absent.
 */
class StackTest {
  /** Refunds go to o-1003: its total never runs out, however often the suites run. */
  static final String REFUND_ORDER = "o-1003";

  static TestStack stack;
  static CapgateClient alice;
  static final ScheduledExecutorService TIMER = Executors.newSingleThreadScheduledExecutor();

  @BeforeAll
  static void connect() throws Exception {
    stack = TestStack.loadOrNull();
    alice = stack == null ? null : stack.alice();
  }

  @BeforeEach
  void requireStack() {
    assumeTrue(stack != null, TestStack::missing);
  }

  @AfterAll
  static void close() {
    if (alice != null) {
      alice.close();
    }
    TIMER.shutdownNow();
  }

  static CapgateClient client() {
    return alice.withDeadlineAfter(10, TimeUnit.SECONDS);
  }

  static Failure failed(Result r, ErrorCode code) {
    Outcome.Failed f = assertInstanceOf(Outcome.Failed.class, r.outcome());
    assertEquals(code, f.failure().code());
    var e = assertThrows(CapgateException.class, r::output);
    assertEquals(code, e.getCode());
    return f.failure();
  }

  @Test
  void describeShowsVisibleCapabilitiesWithSchemas() {
    Capability.Catalog cat = client().describe();
    Capability refund = cat.find("orders.refund").orElseThrow();
    assertEquals("write", refund.sideEffect());
    assertFalse(cat.revision().isEmpty());
    assertTrue(((Map<?, ?>) refund.inputSchema().get("properties")).containsKey("amount"));
    assertTrue(cat.find("admin.orders.purge").isEmpty(), "hidden from non-admins (SI-8)");
    assertEquals(List.of("orders.get"),
        client().describe("orders.get").capabilities().stream().map(Capability::id).toList());
  }

  @Test
  void invokeCompletedReturnsTheRedactedOutputAsAMap() {
    Result r = client().invoke("orders.get", Map.of("order_id", "o-1001"));
    Outcome.Completed done = assertInstanceOf(Outcome.Completed.class, r.outcome());
    assertEquals("o-1001", done.output().get("order_id"));
    assertEquals(ExecutionState.EXECUTION_STATE_COMPLETED, r.executionState());
    assertFalse(r.executionId().isEmpty());
    assertNotNull(r.duration());

    record Refund(String order_id, double amount, String card_last4) {}
    Result refund = client().invoke("orders.refund", Map.of("order_id", REFUND_ORDER, "amount", 5));
    assertEquals("****", refund.output().get("card_last4"), "masked by the gateway");
    Refund typed = ((Outcome.Completed) refund.outcome()).as(Refund.class);
    assertEquals(new Refund(REFUND_ORDER, 5, "****"), typed);
  }

  @Test
  void refundOverTheHardLimitIsDenied() {
    Result r = client().invoke("orders.refund", Map.of("order_id", REFUND_ORDER, "amount", 50000));
    Failure f = failed(r, ErrorCode.ERROR_CODE_POLICY_DENIED);
    assertEquals("policy", f.stage());
    assertEquals(ExecutionState.EXECUTION_STATE_NOT_STARTED, r.executionState());
  }

  @Test
  void invalidInputNamesThePath() {
    Result r = client().invoke("orders.refund", Map.of("order_id", "o-1001", "amount", "x"));
    Failure f = failed(r, ErrorCode.ERROR_CODE_INPUT_INVALID);
    assertEquals("$.amount", f.issues().get(0).path());
  }

  @Test
  void hiddenCapabilityIsNotFound() {
    failed(client().invoke("admin.orders.purge", null), ErrorCode.ERROR_CODE_CAPABILITY_NOT_FOUND);
  }

  @Test
  void approvalFlowEndToEnd() throws Exception {
    Result r = client().invoke("orders.refund", Map.of("order_id", REFUND_ORDER, "amount", 800, "reason", "damaged"),
        InvokeOption.correlationId("java-approval-flow"));
    Approval a = assertInstanceOf(Outcome.ApprovalRequired.class, r.outcome()).approval();
    assertTrue(a.pending());
    assertEquals(64, a.inputHash().length());
    assertEquals(ErrorCode.ERROR_CODE_APPROVAL_PENDING, assertThrows(CapgateException.class, r::output).getCode());

    // Undecided: waiting until a deadline ends with APPROVAL_PENDING, not a hang.
    var pending = assertThrows(CapgateException.class, () -> alice.waitForApproval(a.id(), Duration.ofMillis(300)));
    assertEquals(ErrorCode.ERROR_CODE_APPROVAL_PENDING, pending.getCode());

    // bob decides on the admin listener, against the input hash he saw, while alice waits.
    try (CapgateClient bob = CapgateClient.builder(stack.admin()).bearerToken(stack.tokens().get("bob")).build()) {
      TIMER.schedule(() -> ApprovalAdminGrpc.newBlockingStub(bob.channel()).withDeadlineAfter(10, TimeUnit.SECONDS)
          .decideApproval(DecideApprovalRequest.newBuilder().setApprovalId(a.id())
              .setVerdict(Verdict.VERDICT_APPROVE).setInputHash(a.inputHash()).setNote("ok").build()),
          200, TimeUnit.MILLISECONDS);
      Approval decided = alice.waitForApproval(a.id(), Duration.ofSeconds(15));
      assertTrue(decided.approved(), decided.status().toString());
    }

    Result done = client().resume(a.id(), InvokeOption.correlationId("java-approval-flow"));
    assertEquals(REFUND_ORDER, done.output().get("order_id"));
    assertEquals(a.id(), done.approvalId());
    // A repeated resume returns the stored envelope; the upstream ran once.
    assertEquals(done.executionId(), client().resume(a.id()).executionId());
    long ran = stack.upstreamCalls().stream()
        .filter(c -> a.id().equals(c.approvalId()) && c.method().endsWith("/RefundOrder")).count();
    assertEquals(1, ran);
    assertEquals(ApprovalStatus.APPROVAL_STATUS_EXECUTED, client().getApproval(a.id()).status());
  }

  @Test
  void idempotencyKeyReturnsTheRecordedResult() {
    String key = "java-idem-" + System.nanoTime();
    Map<String, Object> input = Map.of("order_id", REFUND_ORDER, "amount", 3);
    Object first = client().invoke("orders.refund", input, InvokeOption.idempotencyKey(key)).output().get("refund_id");
    Object second = client().invoke("orders.refund", input, InvokeOption.idempotencyKey(key)).output().get("refund_id");
    assertEquals(first, second);
    failed(client().invoke("orders.refund", Map.of("order_id", REFUND_ORDER, "amount", 4), InvokeOption.idempotencyKey(key)),
        ErrorCode.ERROR_CODE_IDEMPOTENCY_CONFLICT);
  }

  @Test
  void capabilityTimeoutIsCancelledTimeout() {
    Result r = client().invoke("orders.cancel", Map.of("order_id", "slow-2000"));
    Outcome.Cancelled c = assertInstanceOf(Outcome.Cancelled.class, r.outcome());
    assertEquals(ErrorCode.ERROR_CODE_TIMEOUT, c.failure().code());
    assertEquals(ExecutionState.EXECUTION_STATE_UNKNOWN, r.executionState());
  }

  @Test
  void cancellingTheContextMidFlightIsCancelled() throws Exception {
    String key = "java-cancel-" + System.nanoTime(); // finds this call in the upstream's log
    Context.CancellableContext ctx = Context.current().withCancellation();
    TIMER.schedule(() -> ctx.cancel(null), 300, TimeUnit.MILLISECONDS);
    long start = System.nanoTime();
    var e = assertThrows(CapgateException.class,
        () -> ctx.call(() -> client().invoke("orders.get", Map.of("order_id", "slow-3000"), InvokeOption.idempotencyKey(key))));
    assertEquals(ErrorCode.ERROR_CODE_CANCELLED, e.getCode());
    assertEquals(Status.Code.CANCELLED, e.getStatus());
    assertTrue(System.nanoTime() - start < TimeUnit.SECONDS.toNanos(2), "did not wait for the upstream");
    // The cancellation propagates to the upstream, well before its 3 s.
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(2);
    while (stack.upstreamCalls().stream().noneMatch(c -> key.equals(c.idempotencyKey()) && c.cancelled())) {
      assertTrue(System.nanoTime() < deadline, "the upstream did not see the cancellation");
      Thread.sleep(50);
    }
  }

  @Test
  void callerDeadlineIsTimeout() {
    CapgateClient shortDeadline = alice.withDeadlineAfter(300, TimeUnit.MILLISECONDS);
    try {
      Result r = shortDeadline.invoke("orders.get", Map.of("order_id", "slow-3000"));
      // The gateway keeps a margin before the caller's deadline and answers a governed TIMEOUT.
      assertEquals(ErrorCode.ERROR_CODE_TIMEOUT, assertInstanceOf(Outcome.Cancelled.class, r.outcome()).failure().code());
    } catch (CapgateException e) {
      assertEquals(ErrorCode.ERROR_CODE_TIMEOUT, e.getCode()); // the transport deadline won the race
    }
  }

  @Test
  void wrongAudienceTokenIsUnauthenticated() {
    try (CapgateClient c = CapgateClient.builder(stack.agents()).bearerToken(stack.tokens().get("bob")).build()) {
      var e = assertThrows(CapgateException.class, () -> c.withDeadlineAfter(10, TimeUnit.SECONDS).describe());
      assertEquals(ErrorCode.ERROR_CODE_UNAUTHENTICATED, e.getCode());
      assertEquals(Status.Code.UNAUTHENTICATED, e.getStatus());
    }
  }

  @Test
  void unixSocketWithTrustedLocalActor() {
    try (CapgateClient c = CapgateClient.builder("unix://" + stack.localSocket())
        .trustedLocal("checkout-svc", "service", List.of("agent")).build()) {
      Result r = c.withDeadlineAfter(10, TimeUnit.SECONDS).invoke("orders.get", Map.of("order_id", "o-1002"));
      assertEquals("o-1002", r.output().get("order_id"));
    }
  }
}
