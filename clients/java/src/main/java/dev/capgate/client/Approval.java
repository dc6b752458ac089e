package dev.capgate.client;

import com.google.protobuf.Timestamp;
import dev.capgate.v1.ApprovalStatus;
import java.time.Instant;
import java.util.List;

/**
 * An approval request as its requester sees it.
 *
 * @param inputHash hex SHA-256 of the canonical input; approvers decide against it
 * @param decidedAt null while pending
 * @param proto the full message (requester, decided_by, approver constraint, ...)
 */
public record Approval(
    String id,
    String capabilityId,
    ApprovalStatus status,
    List<String> reasons,
    String message,
    String inputHash,
    Instant createdAt,
    Instant expiresAt,
    Instant decidedAt,
    String decisionNote,
    String risk,
    String sideEffect,
    dev.capgate.v1.Approval proto) {

  public Approval {
    reasons = List.copyOf(reasons);
  }

  /** No decision yet. */
  public boolean pending() {
    return status == ApprovalStatus.APPROVAL_STATUS_PENDING;
  }

  /** Approved: may be resumed (or already was). */
  public boolean approved() {
    return status == ApprovalStatus.APPROVAL_STATUS_APPROVED
        || status == ApprovalStatus.APPROVAL_STATUS_CONSUMED
        || status == ApprovalStatus.APPROVAL_STATUS_EXECUTED;
  }

  static Approval fromProto(dev.capgate.v1.Approval a) {
    return new Approval(
        a.getId(),
        a.getCapabilityId(),
        a.getStatus(),
        a.getReasonsList(),
        a.getMessage(),
        a.getInputHash(),
        a.hasCreatedAt() ? instant(a.getCreatedAt()) : null,
        a.hasExpiresAt() ? instant(a.getExpiresAt()) : null,
        a.hasDecidedAt() ? instant(a.getDecidedAt()) : null,
        a.getDecisionNote(),
        a.getRisk(),
        a.getSideEffect(),
        a);
  }

  private static Instant instant(Timestamp ts) {
    return Instant.ofEpochSecond(ts.getSeconds(), ts.getNanos());
  }
}
