package dev.capgate.client;

import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * The closed set of envelope outcomes; switch on it with pattern matching.
 *
 * <pre>{@code
 * if (result.outcome() instanceof Outcome.Completed done) { ... done.output() ... }
 * }</pre>
 */
public sealed interface Outcome
    permits Outcome.Completed, Outcome.ApprovalRequired, Outcome.Failed, Outcome.Cancelled {

  /** The validated, redacted output: decoded JSON, and the JSON text as the gateway sent it. */
  record Completed(Map<String, Object> output, String json) implements Outcome {
    public Completed {
      // Not Map.copyOf: JSON null values are legitimate output members.
      output = Collections.unmodifiableMap(new LinkedHashMap<>(output));
    }

    /** The output decoded into a type of your own (a record or POJO), with Jackson. */
    public <T> T as(Class<T> type) {
      return Json.decode(json, type);
    }
  }

  /** The call is suspended until an approver decides; then {@code resume} it. */
  record ApprovalRequired(Approval approval) implements Outcome {}

  /** A governed failure: denied, invalid input, execution failed, ... */
  record Failed(Failure failure) implements Outcome {}

  /** A timeout or cancellation: {@code failure().code()} is TIMEOUT or CANCELLED. */
  record Cancelled(Failure failure) implements Outcome {}
}
