package dev.capgate.client;

import dev.capgate.v1.CapabilityError;
import dev.capgate.v1.ErrorCode;
import dev.capgate.v1.ExecutionState;
import java.util.List;

/**
 * A governed failure as the envelope carries it (CapabilityError), with its stable ErrorCode.
 *
 * @param stage discovery, input-validation, authentication, policy, approval, execution, ...
 * @param message the public message
 * @param issues input-validation problems (INPUT_INVALID only)
 */
public record Failure(
    ErrorCode code,
    String stage,
    String message,
    boolean retryable,
    boolean exposeToModel,
    List<Issue> issues,
    boolean executedBeforeFailure,
    ExecutionState executionState) {

  /** One input-validation problem: a JSON path ({@code $.amount}) and a message. */
  public record Issue(String path, String message) {}

  public Failure {
    issues = List.copyOf(issues);
  }

  /** The code without its ERROR_CODE_ prefix, as JSON, MCP and audit events spell it. */
  public String codeName() {
    return CapgateException.codeName(code);
  }

  static Failure fromProto(CapabilityError e) {
    return new Failure(
        e.getCode(),
        e.getStage(),
        e.getMessage(),
        e.getRetryable(),
        e.getExposeToModel(),
        e.getIssuesList().stream().map(i -> new Issue(i.getPath(), i.getMessage())).toList(),
        e.getExecutedBeforeFailure(),
        e.getExecutionState());
  }
}
