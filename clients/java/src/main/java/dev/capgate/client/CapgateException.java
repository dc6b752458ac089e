package dev.capgate.client;

import dev.capgate.v1.ErrorCode;
import dev.capgate.v1.ExecutionState;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.util.List;

/**
 * A capgate failure that keeps its {@link ErrorCode}: a governed failure from the envelope
 * ({@link Result#output()}) or a transport fault mapped to the closest code (UNAUTHENTICATED,
 * TIMEOUT for a deadline, CANCELLED for a cancellation, else ERROR_CODE_UNSPECIFIED with the gRPC
 * status kept).
 */
public final class CapgateException extends RuntimeException {
  private static final long serialVersionUID = 1L;
  private final transient Failure failure;
  private final Status.Code status;

  public CapgateException(Failure failure) {
    this(failure, null, null);
  }

  private CapgateException(Failure failure, Status.Code status, Throwable cause) {
    super(describe(failure), cause);
    this.failure = failure;
    this.status = status;
  }

  public ErrorCode getCode() {
    return failure.code();
  }

  public Failure getFailure() {
    return failure;
  }

  /** The gRPC status of a transport fault; null for governed failures (RPC status OK). */
  public Status.Code getStatus() {
    return status;
  }

  /** The code without its ERROR_CODE_ prefix. */
  public static String codeName(ErrorCode code) {
    return code.name().replaceFirst("^ERROR_CODE_", "");
  }

  private static String describe(Failure f) {
    StringBuilder sb = new StringBuilder("capgate: ").append(codeName(f.code()));
    if (!f.stage().isEmpty()) {
      sb.append(" (").append(f.stage()).append(')');
    }
    if (!f.message().isEmpty()) {
      sb.append(": ").append(f.message());
    }
    for (Failure.Issue issue : f.issues()) {
      sb.append("; ").append(issue.path()).append(' ').append(issue.message());
    }
    return sb.toString();
  }

  /** Maps a transport fault; governed failures never arrive this way (they are in the envelope). */
  static CapgateException fromStatus(StatusRuntimeException e) {
    Status st = e.getStatus();
    ErrorCode code = ErrorCode.ERROR_CODE_UNSPECIFIED;
    String stage = "";
    boolean retryable = false;
    ExecutionState state = ExecutionState.EXECUTION_STATE_UNKNOWN;
    switch (st.getCode()) {
      case UNAUTHENTICATED -> {
        code = ErrorCode.ERROR_CODE_UNAUTHENTICATED;
        stage = "authentication";
        state = ExecutionState.EXECUTION_STATE_NOT_STARTED;
      }
      case CANCELLED -> {
        code = ErrorCode.ERROR_CODE_CANCELLED;
        stage = "cancellation";
      }
      case DEADLINE_EXCEEDED -> {
        code = ErrorCode.ERROR_CODE_TIMEOUT;
        stage = "timeout";
        retryable = true;
      }
      default -> {}
    }
    String message = st.getDescription() == null ? "" : st.getDescription();
    Failure f = new Failure(code, stage, message, retryable, false, List.of(), false, state);
    return new CapgateException(f, st.getCode(), e);
  }
}
