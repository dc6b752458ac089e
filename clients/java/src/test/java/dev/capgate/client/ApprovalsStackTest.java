package dev.capgate.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import com.google.protobuf.ByteString;
import dev.capgate.v1.Actor;
import dev.capgate.v1.ApprovalAdminGrpc;
import dev.capgate.v1.CreateGrantRequest;
import dev.capgate.v1.DecideApprovalRequest;
import dev.capgate.v1.ExecutionState;
import dev.capgate.v1.GetGrantRequest;
import dev.capgate.v1.Grant;
import dev.capgate.v1.GrantResponse;
import dev.capgate.v1.GrantStatus;
import dev.capgate.v1.Verdict;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * Issue 28's approvals on the shared stack (tests/stack/): a call a standing grant covers shows the
 * grant, a resumed call whose approver edited it shows the edit and its patch, and a two-person
 * approval shows its progress ("1 of 2"). Skipped, saying why, when .run/stack.json is absent.
 */
class ApprovalsStackTest {
  /** Refunds go to o-1003: its total never runs out, however often the suites run. */
  static final String REFUND_ORDER = "o-1003";

  static TestStack stack;
  static CapgateClient alice;

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
  }

  static CapgateClient alice() {
    return alice.withDeadlineAfter(10, TimeUnit.SECONDS);
  }

  /** One approver's decision on the admin listener, with the generated stub (the client wraps
   * callers only); returns the approval the gateway answers with. */
  static dev.capgate.v1.Approval decide(String approver, DecideApprovalRequest request) {
    try (CapgateClient admin = CapgateClient.builder(stack.admin()).bearerToken(stack.tokens().get(approver)).build()) {
      var resp = ApprovalAdminGrpc.newBlockingStub(admin.channel()).withDeadlineAfter(10, TimeUnit.SECONDS)
          .decideApproval(request);
      assertFalse(resp.hasError(), resp.getError().getMessage());
      return resp.getApproval();
    }
  }

  static DecideApprovalRequest.Builder approve(Approval a) {
    return DecideApprovalRequest.newBuilder().setApprovalId(a.id()).setVerdict(Verdict.VERDICT_APPROVE)
        .setInputHash(a.inputHash());
  }

  @Test
  void callCoveredByAGrantRunsAtOnceAndShowsTheGrant() {
    // One use, for refunds carrying this run's own reason: no other suite's call matches it.
    String marker = "java-grant-" + System.nanoTime();
    try (CapgateClient bob = CapgateClient.builder(stack.admin()).bearerToken(stack.tokens().get("bob")).build()) {
      var grants = ApprovalAdminGrpc.newBlockingStub(bob.channel()).withDeadlineAfter(10, TimeUnit.SECONDS);
      GrantResponse created = grants.createGrant(CreateGrantRequest.newBuilder()
          .setActor(Actor.newBuilder().setIssuer("test-idp").setId("alice"))
          .setCapabilityId("orders.refund")
          .setConstraint("input.reason == \"" + marker + "\" && input.amount <= 900")
          .setExpiresIn(com.google.protobuf.Duration.newBuilder().setSeconds(600))
          .setMaxUses(1).setNote("java client test").build());
      assertFalse(created.hasError(), created.getError().getMessage());
      Grant grant = created.getGrant();

      // Over 500 a refund needs a manager's approval; the grant stands in for it.
      Result r = alice().invoke("orders.refund", Map.of("order_id", REFUND_ORDER, "amount", 800, "reason", marker));
      assertInstanceOf(Outcome.Completed.class, r.outcome(), String.valueOf(r.failure()));
      assertEquals(grant.getId(), r.grantId());
      assertEquals("", r.approvalId());
      assertFalse(r.edited());
      assertEquals(List.of(), r.patch());
      Grant used = grants.getGrant(GetGrantRequest.newBuilder().setGrantId(grant.getId()).build()).getGrant();
      assertEquals(1, used.getUses());
      assertEquals(GrantStatus.GRANT_STATUS_EXHAUSTED, used.getStatus());

      // A call the grant does not cover still waits for an approval.
      Result plain = alice().invoke("orders.refund",
          Map.of("order_id", REFUND_ORDER, "amount", 800, "reason", marker + "-other"));
      Approval waiting = assertInstanceOf(Outcome.ApprovalRequired.class, plain.outcome()).approval();
      assertEquals("", plain.grantId());
      decide("bob", DecideApprovalRequest.newBuilder().setApprovalId(waiting.id())
          .setVerdict(Verdict.VERDICT_REJECT).setInputHash(waiting.inputHash()).build()); // leave nothing pending
    }
  }

  @Test
  void resumedEditedCallShowsEditedAndThePatch() {
    Result r = alice().invoke("orders.refund_reviewed",
        Map.of("order_id", REFUND_ORDER, "amount", 900, "reason", "damaged"));
    Approval a = assertInstanceOf(Outcome.ApprovalRequired.class, r.outcome()).approval();
    assertFalse(a.edited());
    assertEquals(List.of(), a.patch());
    // bob lowers the amount before approving; input_hash is still the one he was shown.
    byte[] edited = Json.encode(Map.of("order_id", REFUND_ORDER, "amount", 700, "reason", "****")); // reason as shown: masked
    decide("bob", approve(a).setEditedInputJson(ByteString.copyFrom(edited)).build());

    Approval seen = alice().getApproval(a.id());
    assertTrue(seen.approved(), seen.status().toString());
    assertTrue(seen.edited());
    assertEquals(a.inputHash(), seen.originalInputHash());
    assertFalse(a.inputHash().equals(seen.inputHash()), "the hash is the edited input's");
    assertAmountReplacedBy700(seen.patch());

    Result done = alice().resume(a.id());
    assertEquals(700.0, ((Number) done.output().get("amount")).doubleValue(), "the edited input ran");
    assertTrue(done.edited());
    assertAmountReplacedBy700(done.patch());
    assertEquals(a.id(), done.approvalId());
  }

  static void assertAmountReplacedBy700(List<PatchOperation> patch) {
    assertEquals(1, patch.size(), patch.toString());
    PatchOperation op = patch.get(0);
    assertEquals("replace", op.op());
    assertEquals("/amount", op.path());
    assertEquals(700.0, ((Number) op.value()).doubleValue());
  }

  @Test
  void quorumApprovalShowsProgress() {
    Result r = alice().invoke("orders.refund_dual", Map.of("order_id", REFUND_ORDER, "amount", 20));
    Approval a = assertInstanceOf(Outcome.ApprovalRequired.class, r.outcome()).approval();
    assertEquals(2, a.quorum());
    assertEquals("0 of 2", a.progress());
    // Escalation is planned at creation (30 minutes later, to admins) and has not happened.
    assertEquals(a.createdAt().plus(java.time.Duration.ofMinutes(30)), a.escalateAt());
    assertEquals(null, a.escalatedAt());
    assertEquals(List.of("admin"), a.escalationRoles());

    decide("bob", approve(a).build());
    Approval half = alice().getApproval(a.id());
    assertTrue(half.pending(), half.status().toString());
    assertEquals("1 of 2", half.progress());
    // One approval is not enough: resuming now runs nothing.
    Result early = alice().resume(a.id());
    assertNotNull(early.failure());
    assertEquals(ExecutionState.EXECUTION_STATE_NOT_STARTED, early.executionState());

    decide("carol", approve(a).build());
    Approval full = alice().getApproval(a.id());
    assertTrue(full.approved(), full.status().toString());
    assertEquals("2 of 2", full.progress());
    assertEquals(REFUND_ORDER, alice().resume(a.id()).output().get("order_id"));
  }
}
