package dev.capgate.examples;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.capgate.client.Approval;
import dev.capgate.client.CapgateClient;
import dev.capgate.client.Capability;
import dev.capgate.client.Outcome;
import dev.capgate.client.Result;
import dev.capgate.v1.ApprovalAdminGrpc;
import dev.capgate.v1.DecideApprovalRequest;
import dev.capgate.v1.Verdict;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * capgate from Java: describe, invoke, and a refund that needs a manager's approval (approved
 * here by "bob" on the admin listener, standing in for the human), then wait and resume.
 *
 * <pre>
 * mvn -q compile exec:java -Dexec.args="--stack ../../.run/stack.json"
 * mvn -q compile exec:java -Dexec.args="AGENTS_ADDR ALICE_JWT [ADMIN_ADDR BOB_JWT]"
 * </pre>
 */
public final class ApprovalExample {
  private ApprovalExample() {}

  public static void main(String[] args) throws Exception {
    String agents;
    String token;
    String admin = null;
    String adminToken = null;
    if (args.length == 2 && args[0].equals("--stack")) {
      JsonNode s = new ObjectMapper().readTree(Files.readString(Path.of(args[1])));
      agents = s.get("agents").asText();
      token = s.at("/tokens/alice").asText();
      admin = s.get("admin").asText();
      adminToken = s.at("/tokens/bob").asText();
    } else if (args.length == 2 || args.length == 4) {
      agents = args[0];
      token = args[1];
      if (args.length == 4) {
        admin = args[2];
        adminToken = args[3];
      }
    } else {
      System.err.println("usage: --stack stack.json | AGENTS_ADDR JWT [ADMIN_ADDR ADMIN_JWT]");
      System.exit(2);
      return;
    }

    try (CapgateClient client = CapgateClient.builder(agents).bearerToken(token).build()) {
      CapgateClient calls = client.withDeadlineAfter(30, TimeUnit.SECONDS);
      for (Capability c : calls.describe().capabilities()) {
        System.out.printf("%-16s %-6s %s%n", c.id(), c.sideEffect(), c.description());
      }
      report("orders.get", calls.invoke("orders.get", Map.of("order_id", "o-1001")));

      Result refund = calls.invoke("orders.refund", Map.of("order_id", "o-1003", "amount", 800, "reason", "damaged"));
      report("orders.refund", refund);
      if (!(refund.outcome() instanceof Outcome.ApprovalRequired pending)) {
        return;
      }
      if (admin != null) {
        approve(admin, adminToken, pending.approval());
      } else {
        System.out.println("waiting for an approver to decide " + pending.approval().id());
      }
      Approval decided = client.waitForApproval(pending.approval().id(), Duration.ofMinutes(2));
      if (!decided.approved()) {
        throw new IllegalStateException("approval " + decided.id() + " was " + decided.status());
      }
      report("resumed refund", calls.resume(decided.id()));
    }
  }

  /** Plays the human approver: DecideApproval on the admin listener, against the input hash shown. */
  private static void approve(String admin, String token, Approval approval) {
    try (CapgateClient bob = CapgateClient.builder(admin).bearerToken(token).build()) {
      var resp = ApprovalAdminGrpc.newBlockingStub(bob.channel()).withDeadlineAfter(10, TimeUnit.SECONDS)
          .decideApproval(DecideApprovalRequest.newBuilder().setApprovalId(approval.id())
              .setVerdict(Verdict.VERDICT_APPROVE).setInputHash(approval.inputHash())
              .setNote("approved by the Java example").build());
      if (resp.hasError()) {
        throw new IllegalStateException("decide: " + resp.getError().getMessage());
      }
      System.out.println("approved by " + resp.getApproval().getDecidedBy().getId());
    }
  }

  private static void report(String what, Result r) {
    Outcome o = r.outcome();
    if (o instanceof Outcome.Completed done) {
      System.out.println(what + ": completed " + done.output());
    } else if (o instanceof Outcome.ApprovalRequired a) {
      System.out.println(what + ": approval required (" + a.approval().id() + "): " + a.approval().message());
    } else if (o instanceof Outcome.Failed f) {
      System.out.println(what + ": failed " + f.failure().codeName() + ": " + f.failure().message());
    } else if (o instanceof Outcome.Cancelled c) {
      System.out.println(what + ": cancelled " + c.failure().codeName());
    }
  }
}
