package dev.capgate.client;

import dev.capgate.v1.ErrorCode;
import dev.capgate.v1.ExecutionResult;
import dev.capgate.v1.ExecutionState;
import java.time.Duration;
import java.util.List;
import java.util.Map;

/**
 * The normalized envelope of one execution.
 *
 * @param duration null on concealed answers
 * @param executionState whether the upstream effect happened: NOT_STARTED, COMPLETED or UNKNOWN
 *     (never re-run an UNKNOWN write automatically)
 * @param approvalId set on executions that resume an approval
 * @param grantId set when a standing grant stood in for the approval this call needed: it ran at
 *     once, without an approval of its own
 * @param edited set on a resume whose approver changed the input: the edited input ran
 * @param patch the change from the requester's input to the one that ran (after the
 *     capability's redact.approval_input rules); empty unless edited
 */
public record Result(
    String executionId,
    String capabilityId,
    int attempts,
    Duration duration,
    ExecutionState executionState,
    String approvalId,
    String revision,
    Outcome outcome,
    String grantId,
    boolean edited,
    List<PatchOperation> patch) {

  public Result {
    patch = List.copyOf(patch);
  }

  /**
   * The output of a completed execution, else a {@link CapgateException}: the failure's code, or
   * APPROVAL_PENDING when the call waits for an approval.
   */
  public Map<String, Object> output() {
    // Java 17: sealed types, but no pattern matching in switch yet.
    if (outcome instanceof Outcome.Completed c) {
      return c.output();
    }
    if (outcome instanceof Outcome.Failed f) {
      throw new CapgateException(f.failure());
    }
    if (outcome instanceof Outcome.Cancelled c) {
      throw new CapgateException(c.failure());
    }
    Outcome.ApprovalRequired a = (Outcome.ApprovalRequired) outcome;
    throw new CapgateException(
        new Failure(
            ErrorCode.ERROR_CODE_APPROVAL_PENDING,
            "approval",
            "approval " + a.approval().id() + " is required",
            true,
            true,
            List.of(),
            false,
            ExecutionState.EXECUTION_STATE_NOT_STARTED));
  }

  /** The failure of a Failed or Cancelled outcome, else null. */
  public Failure failure() {
    if (outcome instanceof Outcome.Failed f) {
      return f.failure();
    }
    if (outcome instanceof Outcome.Cancelled c) {
      return c.failure();
    }
    return null;
  }

  static Result fromProto(ExecutionResult r) {
    Outcome outcome =
        switch (r.getOutcomeCase()) {
          case COMPLETED -> {
            String json = r.getCompleted().getOutputJson();
            yield new Outcome.Completed(Json.decodeObject(json), json);
          }
          case APPROVAL_REQUIRED ->
              new Outcome.ApprovalRequired(Approval.fromProto(r.getApprovalRequired().getApproval()));
          case FAILED -> new Outcome.Failed(Failure.fromProto(r.getFailed()));
          case CANCELLED -> new Outcome.Cancelled(Failure.fromProto(r.getCancelled()));
          case OUTCOME_NOT_SET ->
              throw new IllegalStateException("capgate: envelope without an outcome");
        };
    Duration duration =
        r.hasDuration()
            ? Duration.ofSeconds(r.getDuration().getSeconds(), r.getDuration().getNanos())
            : null;
    return new Result(
        r.getExecutionId(),
        r.getCapabilityId(),
        r.getAttempts(),
        duration,
        r.getExecutionState(),
        r.getApprovalId(),
        r.getRevision(),
        outcome,
        r.getGrantId(),
        r.getEdited(),
        PatchOperation.decodeAll(r.getPatchJson()));
  }
}
