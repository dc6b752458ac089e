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
 * @param edited set once an approver changed the input: {@code inputHash} is then the edited
 *     input's hash and {@code originalInputHash} the requester's
 * @param patch the change an approver made (after the capability's redact.approval_input rules);
 *     empty unless edited
 * @param quorum distinct approvers needed (1 unless a requirement says more)
 * @param approvalsReceived approvals counted so far for the current input; see {@link #progress()}
 * @param distinctRoles roles that must each be held by a different approver
 * @param escalatedAt set once the approval stayed pending past its escalate_after ({@code
 *     escalateAt}); holders of {@code escalationRoles} may then decide too
 * @param proto the full message (requester, decided_by, edited_by, approved_by, approver
 *     constraint, ...)
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
    boolean edited,
    String originalInputHash,
    List<PatchOperation> patch,
    int quorum,
    int approvalsReceived,
    List<String> distinctRoles,
    Instant escalatedAt,
    Instant escalateAt,
    List<String> escalationRoles,
    dev.capgate.v1.Approval proto) {

  public Approval {
    reasons = List.copyOf(reasons);
    patch = List.copyOf(patch);
    distinctRoles = List.copyOf(distinctRoles);
    escalationRoles = List.copyOf(escalationRoles);
  }

  /** The quorum progress as approvers read it: "1 of 2". */
  public String progress() {
    return approvalsReceived + " of " + quorum;
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
        a.getEdited(),
        a.getOriginalInputHash(),
        PatchOperation.decodeAll(a.getPatchJson()),
        // A gateway from before quorums sends 0: one approver decides.
        Math.max(1, a.getQuorum()),
        a.getApprovalsReceived(),
        a.getDistinctRolesList(),
        a.hasEscalatedAt() ? instant(a.getEscalatedAt()) : null,
        a.hasEscalateAt() ? instant(a.getEscalateAt()) : null,
        a.getEscalationRolesList(),
        a);
  }

  private static Instant instant(Timestamp ts) {
    return Instant.ofEpochSecond(ts.getSeconds(), ts.getNanos());
  }
}
