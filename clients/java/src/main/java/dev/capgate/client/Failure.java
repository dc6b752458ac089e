package dev.capgate.client;

import dev.capgate.v1.CapabilityError;
import dev.capgate.v1.ErrorCode;
import dev.capgate.v1.ExecutionState;
import java.time.Duration;
import java.util.List;

/**
 * A governed failure as the envelope carries it (CapabilityError), with its stable ErrorCode.
 *
 * @param stage discovery, input-validation, authentication, policy, approval, execution, ...
 * @param message the public message
 * @param issues input-validation problems (INPUT_INVALID only)
 * @param retryAfter RATE_LIMITED only: the earliest time from now at which the same call can
 *     pass the limit that refused it; null otherwise
 */
public record Failure(
    ErrorCode code,
    String stage,
    String message,
    boolean retryable,
    boolean exposeToModel,
    List<Issue> issues,
    boolean executedBeforeFailure,
    ExecutionState executionState,
    Duration retryAfter) {

  /** One input-validation problem: a JSON path ({@code $.amount}) and a message. */
  public record Issue(String path, String message) {}

  public Failure {
    issues = List.copyOf(issues);
  }

  /** A failure without a retry time (every code but RATE_LIMITED). */
  public Failure(
      ErrorCode code,
      String stage,
      String message,
      boolean retryable,
      boolean exposeToModel,
      List<Issue> issues,
      boolean executedBeforeFailure,
      ExecutionState executionState) {
    this(
        code,
        stage,
        message,
        retryable,
        exposeToModel,
        issues,
        executedBeforeFailure,
        executionState,
        null);
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
        e.getExecutionState(),
        e.hasRetryAfter()
            ? Duration.ofSeconds(e.getRetryAfter().getSeconds(), e.getRetryAfter().getNanos())
            : null);
  }
}
